//! The JSON Schema of the configuration, generated from the types that read it.

use serde_json::Value;

use super::{Config, RecordingKeys};

/// The JSON Schema (draft 2020-12) of both forms of the configuration, a writer's
/// ([`Config`]) and a recording's ([`RecordingConfig`](super::RecordingConfig)), generated from the types that
/// read them (their doc comments are its descriptions). `docs/config.schema.json` is
/// this, written by `cargo run -p zarrstream --example config_schema`.
pub fn schema() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let writer = generator.subschema_for::<Config>();
    let recording = generator.subschema_for::<RecordingKeys>();
    let mut defs = Value::Object(generator.take_definitions(true));
    plain_descriptions(&mut defs);
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "zarrstream configuration",
        "description": "The JSON configuration of a writer (the C API's zs_writer_create, \
            zarrstream::config::Config) or of a recording (zs_recording_create, \
            zarrstream::config::RecordingConfig). Every duration is a number of \
            milliseconds in a key ending in _ms. Generated from the Rust types by \
            `cargo run -p zarrstream --example config_schema`.",
        "oneOf": [writer, recording],
        "$defs": defs,
    })
}

/// The doc comments the descriptions come from, as plain text for a schema's readers:
/// code examples left out, rustdoc links reduced to their text, lines of a paragraph
/// joined.
fn plain_descriptions(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match v {
                    Value::String(s) if k == "description" => *s = plain(s),
                    _ => plain_descriptions(v),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

fn plain(doc: &str) -> String {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut in_code = false;
    for line in doc.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_code = !in_code;
        } else if in_code {
        } else if line.is_empty() {
            if !text.is_empty() {
                paragraphs.push(std::mem::take(&mut text));
            }
        } else {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(line);
        }
    }
    if !text.is_empty() {
        paragraphs.push(text);
    }
    unlink(&paragraphs.join("\n\n"))
}

/// `[text](target)` as `text`, and `` [`X`] `` as `` `X` ``.
fn unlink(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let label = &after[..close];
        let tail = &after[close + 1..];
        let target = tail
            .strip_prefix('(')
            .and_then(|t| t.find(')').map(|end| &t[..end]))
            .filter(|t| !t.contains(' '));
        if let Some(target) = target {
            out.push_str(label);
            rest = &tail[target.len() + 2..];
        } else if label.len() > 2 && label.starts_with('`') && label.ends_with('`') {
            out.push_str(label);
            rest = tail;
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// [`schema`] as the text of `docs/config.schema.json` (pretty-printed, one final
/// newline).
pub fn schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_plain_text() {
        let doc = "Options of a [`Writer`](crate::Writer); see [`Ome`].\nSecond line.\n\n\
                   ```\nlet x = 1;\n```\n\nShape `[y, x]`, [a link](https://x.org).";
        assert_eq!(
            plain(doc),
            "Options of a `Writer`; see `Ome`. Second line.\n\nShape `[y, x]`, a link."
        );
    }
}
