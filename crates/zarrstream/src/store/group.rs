//! Zarr groups a recording makes or joins: the group document, the mark that says
//! zarrstream made it, and what an existing directory holds.

use std::path::Path;

use crate::document::{GroupDocument, WRITER_ATTRIBUTES};
use serde_json::{Map, Value, json};

use super::contract::METADATA_FILE;

/// The attribute under which a recording's group records that zarrstream made it
/// (`attributes.zarrstream.recording`).
const MARK: &str = "recording";

/// What a directory a recording wants for its group holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    /// Nothing: the recording creates it.
    Absent,
    /// A Zarr group a recording made (it carries the mark).
    Ours,
    /// A Zarr v3 group someone else made.
    Foreign,
    /// A file, an array, or a directory without a Zarr v3 group document.
    NotAGroup,
}

/// A Zarr v3 group document with `attributes` (every group zarrstream writes: an OME
/// image, a recording's root and the groups below it, per-frame metadata).
pub(crate) fn group_document(attributes: Value) -> Value {
    json!({"zarr_format": 3, "node_type": "group", "attributes": attributes})
}

/// The group document of a recording's root, marked as made by zarrstream and naming
/// its arrays, with `extra` attributes beside the mark (a plate's `ome`).
pub(crate) fn recording_group(keys: &[String], extra: &Map<String, Value>) -> Value {
    let mut attributes = extra.clone();
    attributes.insert(WRITER_ATTRIBUTES.into(), json!({MARK: {"arrays": keys}}));
    group_document(Value::Object(attributes))
}

/// A plain group document (the groups between a recording's root and its arrays).
pub(crate) fn plain_group() -> Value {
    group_document(json!({}))
}

/// What `dir` holds (see [`GroupState`]); unreadable or unparsable documents count as
/// [`GroupState::NotAGroup`], so they are never taken over.
pub(crate) fn group_state(dir: &Path) -> GroupState {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return GroupState::Absent,
        Ok(m) if m.is_dir() => {}
        _ => return GroupState::NotAGroup,
    }
    let Ok(text) = std::fs::read(dir.join(METADATA_FILE)) else {
        return GroupState::NotAGroup;
    };
    let Ok(doc) = serde_json::from_slice::<GroupDocument>(&text) else {
        return GroupState::NotAGroup;
    };
    match doc
        .attributes
        .get(WRITER_ATTRIBUTES)
        .and_then(|a| a.get(MARK))
    {
        Some(_) => GroupState::Ours,
        None => GroupState::Foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_document() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("g");
        assert_eq!(group_state(&g), GroupState::Absent);
        std::fs::create_dir(&g).unwrap();
        assert_eq!(group_state(&g), GroupState::NotAGroup);
        let write = |v: &Value| std::fs::write(g.join(METADATA_FILE), v.to_string()).unwrap();
        write(&plain_group());
        assert_eq!(group_state(&g), GroupState::Foreign);
        write(&recording_group(&["a".into()], &Map::new()));
        assert_eq!(group_state(&g), GroupState::Ours);
        write(&json!({"zarr_format": 3, "node_type": "array"}));
        assert_eq!(group_state(&g), GroupState::NotAGroup);
        std::fs::write(g.join(METADATA_FILE), b"{not json").unwrap();
        assert_eq!(group_state(&g), GroupState::NotAGroup);
    }
}
