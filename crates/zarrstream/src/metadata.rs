//! `zarr.json` for the array, published atomically.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

pub(crate) use crate::document::State;
use crate::document::{
    ArrayDocument, ArrayNode, Endian, Named, ShardingConfiguration, WriterAttributes, ZarrFormat,
};
use crate::error::{Error, Result};
use crate::spec::ArraySpec;
use crate::store::{METADATA_FILE, publish_bytes};

/// Progress written into the array's attributes on each publication.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub state: State,
    pub frames_committed: u64,
    pub frames_dropped: u64,
    pub error: Option<String>,
}

impl Progress {
    /// `attributes.zarrstream` for this progress, stamped with this version.
    pub(crate) fn attributes(&self) -> WriterAttributes {
        WriterAttributes {
            version: Some(env!("CARGO_PKG_VERSION").into()),
            state: Some(self.state.as_str().into()),
            frames_committed: Some(self.frames_committed),
            frames_dropped: Some(self.frames_dropped),
            error: self.error.clone(),
            extra: Map::new(),
        }
    }
}

/// The array metadata document with `shape[0] = extent0` and the spec's attributes.
pub(crate) fn array_json(spec: &ArraySpec, extent0: u64, progress: &Progress) -> ArrayDocument {
    array_json_with(spec, extent0, progress, &spec.attributes)
}

/// The array metadata document with `shape[0] = extent0` and `attributes` (besides the
/// writer's own `attributes.zarrstream`).
pub(crate) fn array_json_with(
    spec: &ArraySpec,
    extent0: u64,
    progress: &Progress,
    attributes: &Map<String, Value>,
) -> ArrayDocument {
    // A single frame (`y, x`) has no append axis: its shape is fixed.
    let mut shape = spec.shape().to_vec();
    if !spec.planar {
        shape[0] = extent0;
    }
    let sharding = ShardingConfiguration {
        chunk_shape: spec.chunk_shape().to_vec(),
        codecs: spec.codec.zarr_codecs(spec.dtype, spec.crc32c),
        index_codecs: vec![Named::bytes(Endian::Little), Named::new("crc32c")],
        index_location: spec.index_location,
    };
    let mut doc = ArrayDocument {
        zarr_format: ZarrFormat,
        node_type: ArrayNode,
        shape,
        data_type: spec.dtype.zarr_name().into(),
        chunk_grid: Named::regular_grid(spec.shard_shape().to_vec()),
        chunk_key_encoding: Named::default_keys(),
        fill_value: spec.dtype.fill_json(spec.fill_value),
        codecs: vec![Named::with("sharding_indexed", &sharding)],
        attributes: attributes.clone(),
        storage_transformers: Some(Vec::new()),
        dimension_names: spec
            .dimension_names
            .as_ref()
            .map(|names| names.iter().cloned().map(Some).collect()),
        extra: Map::new(),
    };
    set_progress(&mut doc, &progress.attributes());
    doc
}

/// Replaces `attributes.zarrstream`. Our attribute type always serializes.
pub(crate) fn set_progress(doc: &mut ArrayDocument, attributes: &WriterAttributes) {
    if let Ok(v) = serde_json::to_value(attributes) {
        doc.attributes
            .insert(crate::document::WRITER_ATTRIBUTES.into(), v);
    }
}

/// Writes `doc` to `dir/zarr.json` so a reader sees the old or the new document, never a
/// mix (see [`publish_bytes`]). A full disk is [`Error::DiskFull`] with the document's size.
pub(crate) fn publish(dir: &Path, doc: &impl Serialize) -> Result<()> {
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
    use serde_json::json;
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
        let doc = serde_json::to_value(array_json(&spec, 1, &p)).unwrap();
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
