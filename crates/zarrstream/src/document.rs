//! The `zarr.json` documents as types: what the writer publishes, what the reader,
//! `recover`, the object-store coordinator and the CLI's `convert` read and write.
//!
//! The shape follows the Zarr v3 core specification and `zarrs_metadata`'s
//! `ArrayMetadataV3`: the fields every array document has are typed, `zarr_format` and
//! `node_type` are checked by their types ([`ZarrFormat`], [`ArrayNode`], [`GroupNode`]),
//! and each codec, chunk grid and key encoding is a [`Named`] `name` with an optional
//! `configuration`, read into the configuration type of the codec that understands it
//! ([`ShardingConfiguration`], [`BloscConfiguration`], …) only by the code that needs it.
//! Keys this library does not write are kept, not refused, at the top level and in the
//! attributes: a document another tool edited stays readable.
//!
//! ```
//! use zarrstream::document::{ArrayDocument, ShardingConfiguration};
//! let text = r#"{"zarr_format": 3, "node_type": "array", "shape": [0, 64],
//!     "data_type": "uint16",
//!     "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 64]}},
//!     "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
//!     "fill_value": 0,
//!     "codecs": [{"name": "sharding_indexed", "configuration": {
//!         "chunk_shape": [1, 64],
//!         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
//!         "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
//!                          {"name": "crc32c"}],
//!         "index_location": "end"}}],
//!     "attributes": {}}"#;
//! let doc: ArrayDocument = serde_json::from_str(text)?;
//! let sharding: ShardingConfiguration = doc.codecs[0].configuration()?;
//! assert_eq!(sharding.chunk_shape, [1, 64]);
//! assert!(serde_json::from_str::<ArrayDocument>(&text.replace("3,", "2,")).is_err());
//! # Ok::<(), serde_json::Error>(())
//! ```

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::spec::IndexLocation;

/// `zarr_format: 3`, the only version this library reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZarrFormat;

impl Serialize for ZarrFormat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(3)
    }
}

impl<'de> Deserialize<'de> for ZarrFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match u64::deserialize(d)? {
            3 => Ok(ZarrFormat),
            other => Err(D::Error::custom(format!("zarr_format is {other}, not 3"))),
        }
    }
}

/// A fixed `node_type` string, checked when read.
macro_rules! node_type {
    ($name:ident, $text:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($text)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let got = String::deserialize(d)?;
                if got == $text {
                    Ok($name)
                } else {
                    Err(D::Error::custom(format!(
                        "node_type is {got:?}, not {:?}",
                        $text
                    )))
                }
            }
        }
    };
}

node_type!(ArrayNode, "array", "`node_type: \"array\"`.");
node_type!(GroupNode, "group", "`node_type: \"group\"`.");

/// A codec, chunk grid or chunk key encoding: its `name` and optional `configuration`
/// (`zarrs_metadata`'s `MetadataV3`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    /// The registered name (`"sharding_indexed"`, `"regular"`, `"default"`, …).
    pub name: String,
    /// The configuration object; absent for codecs that have none (`crc32c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<Map<String, Value>>,
}

impl Named {
    /// `name` without a configuration.
    pub fn new(name: impl Into<String>) -> Self {
        Named {
            name: name.into(),
            configuration: None,
        }
    }

    /// `name` with `configuration`, one of this module's configuration types (or any
    /// value that serializes to a JSON object; anything else is left out).
    pub fn with(name: impl Into<String>, configuration: &impl Serialize) -> Self {
        let configuration = match serde_json::to_value(configuration) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        };
        Named {
            name: name.into(),
            configuration,
        }
    }

    /// The `regular` chunk grid with chunks (for a sharded array, shards) of `chunk_shape`.
    pub fn regular_grid(chunk_shape: Vec<u64>) -> Self {
        Named::with("regular", &RegularGrid { chunk_shape })
    }

    /// The `default` chunk key encoding with `/` (`c/0/1/2`), the only one written here.
    pub fn default_keys() -> Self {
        Named::with("default", &DefaultKeyEncoding { separator: slash() })
    }

    /// The `bytes` codec in `endian` order.
    pub fn bytes(endian: Endian) -> Self {
        Named::with(
            "bytes",
            &BytesConfiguration {
                endian: Some(endian),
            },
        )
    }

    /// The configuration read as `C`; an absent configuration reads as an empty object,
    /// so types whose fields all have defaults accept it.
    pub fn configuration<C: DeserializeOwned>(&self) -> Result<C, serde_json::Error> {
        let conf = self.configuration.clone().unwrap_or_default();
        serde_json::from_value(Value::Object(conf))
    }
}

/// The `regular` chunk grid's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegularGrid {
    /// The shape of one chunk of the grid (for a sharded array, one shard).
    pub chunk_shape: Vec<u64>,
}

/// The `default` chunk key encoding's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultKeyEncoding {
    /// `/` (what zarrstream writes) or `.`.
    #[serde(default = "slash")]
    pub separator: String,
}

fn slash() -> String {
    "/".into()
}

/// Byte order of the `bytes` codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endian {
    /// Little-endian (what zarrstream writes).
    Little,
    /// Big-endian (legacy arrays that `convert` rewrites keep theirs).
    Big,
}

/// The `bytes` codec's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BytesConfiguration {
    /// Absent for one-byte types, where order means nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endian: Option<Endian>,
}

/// The `zstd` codec's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZstdConfiguration {
    /// The compression level (negative levels are zstd's fast modes).
    pub level: i32,
    /// Whether each frame carries zstd's content checksum.
    #[serde(default)]
    pub checksum: bool,
}

/// The `blosc` codec's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BloscConfiguration {
    /// The compressor (`lz4`, `zstd`, …).
    pub cname: String,
    /// The compression level, 0 to 9.
    pub clevel: u8,
    /// `noshuffle`, `shuffle` or `bitshuffle`.
    pub shuffle: String,
    /// The element size that shuffling works on, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typesize: Option<usize>,
    /// Blosc's block size; 0 lets Blosc choose.
    #[serde(default)]
    pub blocksize: usize,
}

/// The `sharding_indexed` codec's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardingConfiguration {
    /// The inner chunk's shape.
    pub chunk_shape: Vec<u64>,
    /// The codecs of each inner chunk.
    pub codecs: Vec<Named>,
    /// The codecs of the shard index.
    pub index_codecs: Vec<Named>,
    /// Where the index sits in each shard file (`end` when absent, as the spec says).
    #[serde(default)]
    pub index_location: IndexLocation,
}

/// An array's `zarr.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayDocument {
    /// Always 3.
    pub zarr_format: ZarrFormat,
    /// Always `"array"`.
    pub node_type: ArrayNode,
    /// The array's shape; for a recording, axis 0 is the published extent.
    pub shape: Vec<u64>,
    /// The element type's Zarr name (`"uint16"`).
    pub data_type: String,
    /// The chunk grid (`regular`, whose chunks are the shards of a sharded array).
    pub chunk_grid: Named,
    /// How chunk coordinates become keys (`default` with `/`).
    pub chunk_key_encoding: Named,
    /// The fill value in the spec's JSON form (numbers, or `"NaN"` and the infinities).
    pub fill_value: Value,
    /// The array-to-bytes chain (one `sharding_indexed` codec for zarrstream's arrays).
    pub codecs: Vec<Named>,
    /// User attributes, and the writer's own under `zarrstream` ([`WriterAttributes`]).
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// Storage transformers; zarrstream writes none and reads none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_transformers: Option<Vec<Value>>,
    /// A name per axis, when named (`null` entries for unnamed axes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension_names: Option<Vec<Option<String>>>,
    /// Keys this library does not write, kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ArrayDocument {
    /// The writer's attributes (`attributes.zarrstream`), if any.
    pub fn writer_attributes(&self) -> Result<Option<WriterAttributes>, serde_json::Error> {
        self.attributes
            .get(WRITER_ATTRIBUTES)
            .map(WriterAttributes::deserialize)
            .transpose()
    }

    /// Replaces the writer's attributes.
    pub fn set_writer_attributes(&mut self, a: &WriterAttributes) -> Result<(), serde_json::Error> {
        self.attributes
            .insert(WRITER_ATTRIBUTES.into(), serde_json::to_value(a)?);
        Ok(())
    }

    /// The document as pretty-printed JSON, as it is published.
    pub fn to_vec_pretty(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(self)
    }
}

/// The two keys that make a document a Zarr v3 array, read alone (other keys ignored):
/// tells "not an array" apart from "an array this library cannot read".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayHeader {
    /// Always 3.
    pub zarr_format: ZarrFormat,
    /// Always `"array"`.
    pub node_type: ArrayNode,
}

/// A group's `zarr.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupDocument {
    /// Always 3.
    pub zarr_format: ZarrFormat,
    /// Always `"group"`.
    pub node_type: GroupNode,
    /// The group's attributes (`ome`, and `zarrstream` for the groups it made).
    #[serde(default)]
    pub attributes: Map<String, Value>,
    /// Keys this library does not write, kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl GroupDocument {
    /// A group with `attributes`.
    pub fn new(attributes: Map<String, Value>) -> Self {
        GroupDocument {
            zarr_format: ZarrFormat,
            node_type: GroupNode,
            attributes,
            extra: Map::new(),
        }
    }
}

/// The attribute under which the writer keeps its own record of an array.
pub const WRITER_ATTRIBUTES: &str = "zarrstream";

/// Where an acquisition stands, as `attributes.zarrstream.state` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// The writer is recording; the document grows.
    Running,
    /// `finish` returned: every accepted frame is in the array.
    Finished,
    /// The acquisition was aborted or failed (`error` says why).
    Aborted,
    /// Rebuilt by `zarrstream recover` after the writer stopped without finishing.
    Recovered,
}

impl State {
    /// The name written in the document.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Finished => "finished",
            State::Aborted => "aborted",
            State::Recovered => "recovered",
        }
    }
}

/// `attributes.zarrstream` of an array: the writer's record of its progress. Every
/// field is optional when read (an older or foreign document may lack them); the
/// writer fills all but `error`. Other keys (`recovery`, `parts`) are kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterAttributes {
    /// The zarrstream version that wrote the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `running`, `finished`, `aborted` or `recovered`, as written (kept as text so a
    /// state a newer version adds still reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Frames the document counts as committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_committed: Option<u64>,
    /// Frames the writer dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_dropped: Option<u64>,
    /// Why the acquisition stopped, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Other keys: `recovery` (from `recover`), `parts` (from the part coordinator).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_codecs_round_trip_with_and_without_configuration() {
        let crc = Named::new("crc32c");
        assert_eq!(
            serde_json::to_value(&crc).unwrap(),
            json!({"name": "crc32c"})
        );
        let zstd = Named::with(
            "zstd",
            &ZstdConfiguration {
                level: -3,
                checksum: true,
            },
        );
        let v = serde_json::to_value(&zstd).unwrap();
        assert_eq!(
            v,
            json!({"name": "zstd", "configuration": {"level": -3, "checksum": true}})
        );
        let back: Named = serde_json::from_value(v).unwrap();
        assert_eq!(
            back.configuration::<ZstdConfiguration>().unwrap(),
            ZstdConfiguration {
                level: -3,
                checksum: true
            }
        );
        let bytes: BytesConfiguration = Named::new("bytes").configuration().unwrap();
        assert_eq!(bytes.endian, None);
    }

    #[test]
    fn the_header_is_checked_by_type() {
        let ok = json!({"zarr_format": 3, "node_type": "group"});
        let g: GroupDocument = serde_json::from_value(ok.clone()).unwrap();
        assert!(g.attributes.is_empty());
        assert_eq!(serde_json::to_value(&g).unwrap()["zarr_format"], 3);
        let mut v2 = ok.clone();
        v2["zarr_format"] = json!(2);
        let e = serde_json::from_value::<GroupDocument>(v2).unwrap_err();
        assert!(e.to_string().contains("zarr_format is 2, not 3"), "{e}");
        let mut array = ok;
        array["node_type"] = json!("array");
        let e = serde_json::from_value::<GroupDocument>(array).unwrap_err();
        assert!(e.to_string().contains("not \"group\""), "{e}");
    }

    #[test]
    fn writer_attributes_keep_what_they_do_not_name() {
        let v = json!({"version": "0.1.0", "state": "recovered", "frames_committed": 4,
                       "recovery": {"shards_recovered": 1}});
        let a: WriterAttributes = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(a.state.as_deref(), Some("recovered"));
        assert_eq!(a.frames_dropped, None);
        assert_eq!(a.extra["recovery"], json!({"shards_recovered": 1}));
        assert_eq!(serde_json::to_value(&a).unwrap(), v);
    }
}
