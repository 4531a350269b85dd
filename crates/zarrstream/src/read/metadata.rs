//! Reads back a `zarr.json` that this library wrote, as an [`ArraySpec`].
//!
//! Only the subset the writer produces is accepted (a `sharding_indexed` array with
//! `bytes(little)` + optional `zstd` or `blosc` (lz4 or zstd; any shuffle) + optional
//! `crc32c` inside,
//! `bytes(little)` + `crc32c` for the index, default `/` chunk keys); anything else is a
//! [`ReadError::Metadata`] naming the field.

use serde::Deserialize;
use serde_json::Value;

use super::ReadError;
use crate::codec::{BloscCompressor, BloscShuffle, Codec};
use crate::document::{
    ArrayDocument, BloscConfiguration, BytesConfiguration, DefaultKeyEncoding, Endian, Named,
    RegularGrid, ShardingConfiguration, WRITER_ATTRIBUTES, WriterAttributes, ZstdConfiguration,
};
use crate::dtype::DataType;
use crate::spec::ArraySpec;

/// What a `zarr.json` written by zarrstream says.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreMetadata {
    /// The array specification; `shape()[0]` is the published extent of the append axis.
    pub spec: ArraySpec,
    /// Progress recorded in `attributes.zarrstream`, if present.
    pub progress: RecordedProgress,
}

/// The writer's progress attributes (`attributes.zarrstream`); absent fields are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedProgress {
    /// `running`, `finished`, `aborted` or `recovered`.
    pub state: Option<String>,
    /// Frames the metadata counted as committed.
    pub frames_committed: Option<u64>,
    /// Frames dropped by the writer.
    pub frames_dropped: Option<u64>,
    /// Why the acquisition stopped, if it failed.
    pub error: Option<String>,
}

impl From<WriterAttributes> for RecordedProgress {
    fn from(a: WriterAttributes) -> Self {
        RecordedProgress {
            state: a.state,
            frames_committed: a.frames_committed,
            frames_dropped: a.frames_dropped,
            error: a.error,
        }
    }
}

fn err(msg: impl Into<String>) -> ReadError {
    ReadError::Metadata(msg.into())
}

/// `named`'s configuration as `C`, or an error naming where it sits.
fn configuration<C: serde::de::DeserializeOwned>(named: &Named, at: &str) -> Result<C, ReadError> {
    named
        .configuration()
        .map_err(|e| err(format!("{at} ({}): {e}", named.name)))
}

fn is_bytes_little(named: &Named) -> bool {
    named.name == "bytes"
        && named
            .configuration::<BytesConfiguration>()
            .is_ok_and(|c| c.endian.is_none_or(|e| e == Endian::Little))
}

/// The inner codec chain: `bytes(little)`, then optionally `zstd` or `blosc`, then
/// optionally `crc32c`.
fn inner_codecs(list: &[Named], dtype: DataType) -> Result<(Codec, bool), ReadError> {
    let at = "codecs[0].configuration.codecs";
    let (first, mut rest) = list
        .split_first()
        .ok_or_else(|| err(format!("{at} is empty")))?;
    if !is_bytes_little(first) {
        return Err(err(format!("{at}[0] is not bytes(endian little)")));
    }
    let crc32c = match rest.split_last() {
        Some((last, before)) if last.name == "crc32c" => {
            rest = before;
            true
        }
        _ => false,
    };
    let codec = match rest {
        [] => Codec::None,
        [c] => match c.name.as_str() {
            "zstd" => {
                let z: ZstdConfiguration = configuration(c, at)?;
                Codec::Zstd {
                    level: z.level,
                    checksum: z.checksum,
                }
            }
            "blosc" => blosc(configuration(c, at)?, dtype)?,
            other => return Err(err(format!("unsupported inner codec {other}"))),
        },
        _ => return Err(err(format!("{at}: more codecs than zarrstream writes"))),
    };
    Ok((codec, crc32c))
}

fn blosc(conf: BloscConfiguration, dtype: DataType) -> Result<Codec, ReadError> {
    let compressor = match conf.cname.as_str() {
        "lz4" => BloscCompressor::Lz4,
        "zstd" => BloscCompressor::Zstd,
        _ => return Err(err("blosc cname other than lz4 or zstd")),
    };
    let shuffle = conf
        .shuffle
        .parse::<BloscShuffle>()
        .map_err(|_| err("blosc shuffle is not noshuffle, shuffle or bitshuffle"))?;
    if conf.typesize != Some(dtype.size()) {
        return Err(err("blosc typesize does not match data_type"));
    }
    // The default shuffle reads back as the default (for 1-byte elements an explicit
    // byte shuffle would be refused, though it is what zarrstream writes by default).
    let shuffle = (shuffle != BloscShuffle::default_for(dtype)).then_some(shuffle);
    Ok(Codec::Blosc {
        compressor,
        clevel: conf.clevel,
        shuffle,
    })
}

fn fill_value(v: &Value, dtype: DataType) -> Result<f64, ReadError> {
    let bad = || err(format!("fill_value {v} is not a {dtype} value"));
    match (v, dtype) {
        (Value::String(s), DataType::Float32 | DataType::Float64) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(bad()),
        },
        (Value::Number(n), DataType::Float32 | DataType::Float64) => n.as_f64().ok_or_else(bad),
        (Value::Number(n), _) => n
            .as_i64()
            .map(|i| i as f64)
            .or_else(|| n.as_u64().map(|u| u as f64))
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// Parses an array `zarr.json` written by zarrstream back into its specification (built
/// with [`ArraySpec::builder`], so every builder check applies) and the recorded progress.
///
/// ```
/// use zarrstream::read::metadata::parse_array_json;
/// let doc = serde_json::json!({"zarr_format": 2});
/// assert!(parse_array_json(&doc).is_err());
/// ```
pub fn parse_array_json(doc: &Value) -> Result<StoreMetadata, ReadError> {
    let doc = ArrayDocument::deserialize(doc).map_err(|e| err(e.to_string()))?;
    parse_array_document(&doc)
}

/// [`parse_array_json`] of a document already read as its type.
pub fn parse_array_document(doc: &ArrayDocument) -> Result<StoreMetadata, ReadError> {
    let dtype = data_type(&doc.data_type)?;
    let shard = shard_shape(doc)?;
    check_layout_options(doc)?;
    let sharding = sharding(doc, dtype)?;
    let fill = fill_value(&doc.fill_value, dtype)?;
    let mut attributes = doc.attributes.clone();
    let progress = match attributes.remove(WRITER_ATTRIBUTES) {
        None => RecordedProgress::default(),
        Some(v) => WriterAttributes::deserialize(&v)
            .map_err(|e| err(format!("attributes.{WRITER_ATTRIBUTES}: {e}")))?
            .into(),
    };
    let mut builder = ArraySpec::builder()
        .shape(&doc.shape)
        .chunk_shape(&sharding.chunk_shape)
        .shard_shape(&shard)
        .dtype(dtype)
        .fill_value(fill)
        .codec(sharding.codec)
        .crc32c(sharding.crc32c)
        .index_location(sharding.index_location)
        .attributes(attributes);
    if let Some(names) = &doc.dimension_names {
        let names: Vec<&str> = names
            .iter()
            .map(Option::as_deref)
            .collect::<Option<_>>()
            .ok_or_else(|| err("dimension_names has an unnamed axis"))?;
        builder = builder.dimension_names(names);
    }
    let spec = builder
        .build()
        .map_err(|e| err(format!("invalid array: {e}")))?;
    Ok(StoreMetadata { spec, progress })
}

/// The data type, spelled exactly as this library writes it.
fn data_type(name: &str) -> Result<DataType, ReadError> {
    name.parse::<DataType>()
        .ok()
        .filter(|d| d.zarr_name() == name)
        .ok_or_else(|| err(format!("unsupported data_type {name}")))
}

/// The shard shape: the chunk shape of the regular chunk grid.
fn shard_shape(doc: &ArrayDocument) -> Result<Vec<u64>, ReadError> {
    if doc.chunk_grid.name != "regular" {
        return Err(err("chunk_grid is not regular"));
    }
    let grid: RegularGrid = configuration(&doc.chunk_grid, "chunk_grid")?;
    Ok(grid.chunk_shape)
}

/// Keys `c/0/1/2` (the default encoding with `/`) and no storage transformers.
fn check_layout_options(doc: &ArrayDocument) -> Result<(), ReadError> {
    let enc = &doc.chunk_key_encoding;
    let default_slash = enc.name == "default"
        && enc
            .configuration::<DefaultKeyEncoding>()
            .is_ok_and(|c| c.separator == "/");
    if !default_slash {
        return Err(err("chunk_key_encoding is not default with separator /"));
    }
    if doc
        .storage_transformers
        .as_ref()
        .is_some_and(|t| !t.is_empty())
    {
        return Err(err("storage_transformers are not supported"));
    }
    Ok(())
}

/// What the one `sharding_indexed` codec says.
struct Sharding {
    chunk_shape: Vec<u64>,
    codec: Codec,
    crc32c: bool,
    index_location: crate::spec::IndexLocation,
}

fn sharding(doc: &ArrayDocument, dtype: DataType) -> Result<Sharding, ReadError> {
    let [sharding] = doc.codecs.as_slice() else {
        return Err(err("codecs is not exactly one sharding_indexed codec"));
    };
    if sharding.name != "sharding_indexed" {
        return Err(err("codecs[0] is not sharding_indexed"));
    }
    let conf: ShardingConfiguration = configuration(sharding, "codecs[0]")?;
    let (codec, crc32c) = inner_codecs(&conf.codecs, dtype)?;
    let index_ok = matches!(conf.index_codecs.as_slice(),
        [bytes, crc] if is_bytes_little(bytes) && crc.name == "crc32c");
    if !index_ok {
        return Err(err("index_codecs are not [bytes(little), crc32c]"));
    }
    Ok(Sharding {
        chunk_shape: conf.chunk_shape,
        codec,
        crc32c,
        index_location: conf.index_location,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::BloscShuffle;
    use crate::metadata::{Progress, State};
    use crate::spec::IndexLocation;
    use serde_json::Map;

    fn array_json(spec: &ArraySpec, extent0: u64, progress: &Progress) -> Value {
        serde_json::to_value(crate::metadata::array_json(spec, extent0, progress)).unwrap()
    }

    fn specs() -> Vec<ArraySpec> {
        let base = || {
            ArraySpec::builder()
                .shape([0, 2, 40, 96, 80])
                .chunk_shape([1, 1, 2, 32, 40])
                .shard_shape([4, 1, 4, 96, 80])
        };
        let mut attrs = Map::new();
        attrs.insert("user".into(), serde_json::json!({"k": [1, 2]}));
        vec![
            base().build().unwrap(),
            base()
                .dtype(DataType::Float32)
                .fill_value(f64::NAN)
                .codec(Codec::Zstd {
                    level: -3,
                    checksum: true,
                })
                .crc32c(false)
                .index_location(IndexLocation::Start)
                .dimension_names(["t", "c", "z", "y", "x"])
                .attributes(attrs)
                .build()
                .unwrap(),
            base()
                .dtype(DataType::Int16)
                .fill_value(-7.0)
                .codec(Codec::none())
                .build()
                .unwrap(),
            base()
                .dtype(DataType::UInt8)
                .fill_value(255.0)
                .codec(Codec::blosc_lz4(9))
                .build()
                .unwrap(),
            base()
                .dtype(DataType::UInt32)
                .codec(Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle))
                .build()
                .unwrap(),
            base()
                .dtype(DataType::UInt8)
                .codec(Codec::blosc_zstd(1).with_shuffle(BloscShuffle::NoShuffle))
                .build()
                .unwrap(),
            base().codec(Codec::blosc_zstd(5)).build().unwrap(),
        ]
    }

    #[test]
    fn round_trips_what_the_writer_publishes() {
        for spec in specs() {
            let progress = Progress {
                state: State::Aborted,
                frames_committed: 24,
                frames_dropped: 3,
                error: Some("disk full".into()),
            };
            let doc = array_json(&spec, 3, &progress);
            let m = parse_array_json(&doc).unwrap();
            let mut want = spec.clone();
            want.shape[0] = 3;
            // NaN != NaN: compare the rest field by field through the document.
            assert_eq!(array_json(&m.spec, 3, &progress), doc);
            assert_eq!(m.spec.codec(), want.codec());
            assert_eq!(m.spec.shape(), want.shape());
            assert_eq!(
                m.progress,
                RecordedProgress {
                    state: Some("aborted".into()),
                    frames_committed: Some(24),
                    frames_dropped: Some(3),
                    error: Some("disk full".into()),
                }
            );
        }
    }

    #[test]
    fn refuses_what_the_writer_never_writes() {
        let spec = &specs()[0];
        let p = Progress {
            state: State::Running,
            frames_committed: 0,
            frames_dropped: 0,
            error: None,
        };
        let good = array_json(spec, 0, &p);
        type Damage = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Damage)> = vec![
            ("format", Box::new(|d| d["zarr_format"] = 2.into())),
            ("group", Box::new(|d| d["node_type"] = "group".into())),
            ("dtype", Box::new(|d| d["data_type"] = "u16".into())),
            ("dtype64", Box::new(|d| d["data_type"] = "complex64".into())),
            (
                "grid",
                Box::new(|d| d["chunk_grid"]["name"] = "rectangular".into()),
            ),
            (
                "sep",
                Box::new(|d| d["chunk_key_encoding"]["configuration"]["separator"] = ".".into()),
            ),
            ("codecs", Box::new(|d| d["codecs"] = serde_json::json!([]))),
            (
                "inner",
                Box::new(|d| d["codecs"][0]["configuration"]["codecs"][1]["name"] = "gzip".into()),
            ),
            (
                "cname",
                Box::new(|d| {
                    d["codecs"][0]["configuration"]["codecs"][1]["configuration"]["cname"] =
                        "blosclz".into()
                }),
            ),
            (
                "shuffle",
                Box::new(|d| {
                    d["codecs"][0]["configuration"]["codecs"][1]["configuration"]["shuffle"] =
                        1.into()
                }),
            ),
            (
                "index",
                Box::new(|d| {
                    d["codecs"][0]["configuration"]["index_codecs"] = serde_json::json!([])
                }),
            ),
            (
                "location",
                Box::new(|d| d["codecs"][0]["configuration"]["index_location"] = "middle".into()),
            ),
            ("fill", Box::new(|d| d["fill_value"] = 70000.into())),
            ("fill-str", Box::new(|d| d["fill_value"] = "NaN".into())),
            (
                "shape",
                Box::new(|d| d["shape"] = serde_json::json!([0, -1, 2])),
            ),
            (
                "divide",
                Box::new(|d| {
                    d["codecs"][0]["configuration"]["chunk_shape"] =
                        serde_json::json!([1, 1, 3, 32, 40])
                }),
            ),
            (
                "names",
                Box::new(|d| d["dimension_names"] = serde_json::json!([1, 2])),
            ),
            ("missing", Box::new(|d| d["shape"] = Value::Null)),
        ];
        for (name, f) in cases {
            let mut d = good.clone();
            f(&mut d);
            assert!(
                matches!(parse_array_json(&d), Err(ReadError::Metadata(_))),
                "{name}: {:?}",
                parse_array_json(&d)
            );
        }
    }
}
