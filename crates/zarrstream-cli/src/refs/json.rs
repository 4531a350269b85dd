//! Writes a reference set as kerchunk JSON version 1: one template `u` for the store
//! root, metadata as JSON-encoded strings (as kerchunk writes them), one
//! `[url, offset, nbytes]` per present chunk, no `gen` (fsspec ignores `gen` by default).

use std::io::Write;

use serde_json::Value;

use super::set::RefSet;

/// The template name of the store root URL.
pub(super) const TEMPLATE: &str = "u";

/// Writes `set` with chunk URLs `{{u}}/<shard key>` and `templates.u = root_url`.
/// Streams the chunk entries, so memory does not grow with a second copy of the set.
pub(super) fn write(set: &RefSet, root_url: &str, out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(b"{\"version\":1,\"templates\":{")?;
    serde_json::to_writer(&mut *out, TEMPLATE)?;
    out.write_all(b":")?;
    serde_json::to_writer(&mut *out, root_url)?;
    out.write_all(b"},\"refs\":{")?;
    let mut first = true;
    for (key, doc) in &set.metadata {
        entry(out, &mut first, key, &Value::String(doc.to_string()))?;
    }
    let urls: Vec<String> = set
        .shard_keys
        .iter()
        .map(|k| format!("{{{{{TEMPLATE}}}}}/{k}"))
        .collect();
    for r in &set.refs {
        let value = serde_json::json!([urls[r.shard], r.offset, r.nbytes]);
        entry(out, &mut first, &set.key(r.number), &value)?;
    }
    out.write_all(b"}}\n")?;
    Ok(())
}

/// One `"key":value` member, comma-separated, one per line.
fn entry(out: &mut impl Write, first: &mut bool, key: &str, value: &Value) -> std::io::Result<()> {
    out.write_all(if *first { b"\n" } else { b",\n" })?;
    *first = false;
    serde_json::to_writer(&mut *out, key)?;
    out.write_all(b":")?;
    serde_json::to_writer(&mut *out, value)?;
    Ok(())
}
