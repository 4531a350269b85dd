//! `zarr.json` for the array, published atomically.

use std::path::Path;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::spec::ArraySpec;
use crate::store::{METADATA_FILE, publish_bytes};

/// Acquisition state recorded in `attributes.zarrstream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    Finished,
    Aborted,
    /// Rebuilt by `zarrstream recover` after the writer stopped without finishing.
    Recovered,
}

/// Progress written into the array's attributes on each publication.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub state: State,
    pub frames_committed: u64,
    pub frames_dropped: u64,
    pub error: Option<String>,
}

/// The array metadata document with `shape[0] = extent0` and the spec's attributes.
pub(crate) fn array_json(spec: &ArraySpec, extent0: u64, progress: &Progress) -> Value {
    array_json_with(spec, extent0, progress, &spec.attributes)
}

/// The array metadata document with `shape[0] = extent0` and `attributes` (besides the
/// writer's own `attributes.zarrstream`).
pub(crate) fn array_json_with(
    spec: &ArraySpec,
    extent0: u64,
    progress: &Progress,
    attributes: &serde_json::Map<String, Value>,
) -> Value {
    // A single frame (`y, x`) has no append axis: its shape is fixed.
    let mut shape = spec.shape().to_vec();
    if !spec.planar {
        shape[0] = extent0;
    }
    let mut attributes = attributes.clone();
    let state = match progress.state {
        State::Running => "running",
        State::Finished => "finished",
        State::Aborted => "aborted",
        State::Recovered => "recovered",
    };
    let mut ours = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "state": state,
        "frames_committed": progress.frames_committed,
        "frames_dropped": progress.frames_dropped,
    });
    if let Some(e) = &progress.error {
        ours["error"] = Value::from(e.as_str());
    }
    attributes.insert("zarrstream".into(), ours);
    let mut doc = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": spec.dtype.zarr_name(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": spec.shard_shape()}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": spec.dtype.fill_json(spec.fill_value),
        "codecs": [{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": spec.chunk_shape(),
                "codecs": spec.codec.zarr_codecs(spec.dtype, spec.crc32c),
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"}
                ],
                "index_location": spec.index_location.as_str(),
            }
        }],
        "attributes": attributes,
        "storage_transformers": [],
    });
    if let Some(names) = &spec.dimension_names {
        doc["dimension_names"] = json!(names);
    }
    doc
}

/// Writes `doc` to `dir/zarr.json` so a reader sees the old or the new document, never a
/// mix (see [`publish_bytes`]). A full disk is [`Error::DiskFull`] with the document's size.
pub(crate) fn publish(dir: &Path, doc: &Value) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(doc).map_err(|e| Error::Internal(e.to_string()))?;
    publish_bytes(dir, METADATA_FILE, &bytes).map_err(|e| {
        // Only the write of the document itself consumes space.
        let needed = if e.op == "write" {
            bytes.len() as u64
        } else {
            0
        };
        Error::io(e.op, e.path, e.source, needed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Codec, DataType, IndexLocation};
    use std::fs;

    #[test]
    fn array_json_follows_the_writer_checklist() {
        let spec = ArraySpec::builder()
            .shape([0, 2, 40, 2048, 2048])
            .chunk_shape([1, 1, 1, 256, 256])
            .shard_shape([1, 1, 8, 2048, 2048])
            .dtype(DataType::UInt16)
            .codec(Codec::zstd(1))
            .index_location(IndexLocation::End)
            .dimension_names(["t", "c", "z", "y", "x"])
            .build()
            .unwrap();
        let p = Progress {
            state: State::Running,
            frames_committed: 80,
            frames_dropped: 0,
            error: None,
        };
        let doc = array_json(&spec, 1, &p);
        let want = json!({
          "zarr_format": 3, "node_type": "array",
          "shape": [1, 2, 40, 2048, 2048],
          "data_type": "uint16",
          "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 1, 8, 2048, 2048]}},
          "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
          "fill_value": 0,
          "codecs": [{"name": "sharding_indexed", "configuration": {
              "chunk_shape": [1, 1, 1, 256, 256],
              "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "zstd", "configuration": {"level": 1, "checksum": false}},
                         {"name": "crc32c"}],
              "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
              "index_location": "end"}}],
          "attributes": {"zarrstream": {"version": env!("CARGO_PKG_VERSION"), "state": "running",
                                        "frames_committed": 80, "frames_dropped": 0}},
          "storage_transformers": [],
          "dimension_names": ["t", "c", "z", "y", "x"]
        });
        assert_eq!(doc, want);
    }

    #[test]
    fn publish_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), &json!({"a": 1})).unwrap();
        publish(dir.path(), &json!({"a": 2})).unwrap();
        let got: Value =
            serde_json::from_slice(&fs::read(dir.path().join("zarr.json")).unwrap()).unwrap();
        assert_eq!(got, json!({"a": 2}));
        assert!(!dir.path().join(".zarr.json.tmp").exists());
    }
}
