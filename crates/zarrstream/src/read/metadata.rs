//! Reads back a `zarr.json` that this library wrote, as an [`ArraySpec`].
//!
//! Only the subset the writer produces is accepted (a `sharding_indexed` array with
//! `bytes(little)` + optional `zstd` or `blosc` (lz4 or zstd; any shuffle) + optional
//! `crc32c` inside,
//! `bytes(little)` + `crc32c` for the index, default `/` chunk keys); anything else is a
//! [`ReadError::Metadata`] naming the field.

use serde_json::{Map, Value};

use super::ReadError;
use crate::codec::{BloscCompressor, BloscShuffle, Codec};
use crate::dtype::DataType;
use crate::spec::{ArraySpec, IndexLocation};

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

fn err(msg: impl Into<String>) -> ReadError {
    ReadError::Metadata(msg.into())
}

fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value, ReadError> {
    v.get(key)
        .ok_or_else(|| err(format!("{at}{key} is missing")))
}

fn shape(v: &Value, what: &str) -> Result<Vec<u64>, ReadError> {
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| err(format!("{what} is not a list of non-negative integers")))
}

fn name_of(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

fn is_bytes_little(v: &Value) -> bool {
    name_of(v) == Some("bytes")
        && v.get("configuration")
            .and_then(|c| c.get("endian"))
            .is_none_or(|e| e == "little")
}

/// The inner codec chain: `bytes(little)`, then optionally `zstd` or `blosc`, then
/// optionally `crc32c`.
fn inner_codecs(list: &Value, dtype: DataType) -> Result<(Codec, bool), ReadError> {
    let at = "codecs[0].configuration.codecs";
    let list = list
        .as_array()
        .ok_or_else(|| err(format!("{at} is not a list")))?;
    let (first, mut rest) = list
        .split_first()
        .ok_or_else(|| err(format!("{at} is empty")))?;
    if !is_bytes_little(first) {
        return Err(err(format!("{at}[0] is not bytes(endian little)")));
    }
    let crc32c = match rest.split_last() {
        Some((last, before)) if name_of(last) == Some("crc32c") => {
            rest = before;
            true
        }
        _ => false,
    };
    let codec = match rest {
        [] => Codec::None,
        [c] => {
            let conf = c.get("configuration").unwrap_or(&Value::Null);
            match name_of(c) {
                Some("zstd") => {
                    let level = conf
                        .get("level")
                        .and_then(Value::as_i64)
                        .and_then(|l| i32::try_from(l).ok())
                        .ok_or_else(|| err("zstd level is not an integer"))?;
                    let checksum = conf
                        .get("checksum")
                        .map_or(Some(false), Value::as_bool)
                        .ok_or_else(|| err("zstd checksum is not a boolean"))?;
                    Codec::Zstd { level, checksum }
                }
                Some("blosc") => {
                    let compressor = match conf.get("cname").and_then(Value::as_str) {
                        Some("lz4") => BloscCompressor::Lz4,
                        Some("zstd") => BloscCompressor::Zstd,
                        _ => return Err(err("blosc cname other than lz4 or zstd")),
                    };
                    let shuffle = conf
                        .get("shuffle")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<BloscShuffle>().ok())
                        .ok_or_else(|| {
                            err("blosc shuffle is not noshuffle, shuffle or bitshuffle")
                        })?;
                    if conf.get("typesize").and_then(Value::as_u64) != Some(dtype.size() as u64) {
                        return Err(err("blosc typesize does not match data_type"));
                    }
                    let clevel = conf
                        .get("clevel")
                        .and_then(Value::as_u64)
                        .and_then(|l| u8::try_from(l).ok())
                        .ok_or_else(|| err("blosc clevel is not in 0..=255"))?;
                    // The default shuffle reads back as the default (for 1-byte elements
                    // an explicit byte shuffle would be refused, though it is what
                    // zarrstream writes by default).
                    let shuffle = (shuffle != BloscShuffle::default_for(dtype)).then_some(shuffle);
                    Codec::Blosc {
                        compressor,
                        clevel,
                        shuffle,
                    }
                }
                other => {
                    return Err(err(format!(
                        "unsupported inner codec {}",
                        other.unwrap_or("(unnamed)")
                    )));
                }
            }
        }
        _ => return Err(err(format!("{at}: more codecs than zarrstream writes"))),
    };
    Ok((codec, crc32c))
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

fn progress(ours: Option<&Value>) -> RecordedProgress {
    let Some(o) = ours else {
        return RecordedProgress::default();
    };
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    RecordedProgress {
        state: text("state"),
        frames_committed: o.get("frames_committed").and_then(Value::as_u64),
        frames_dropped: o.get("frames_dropped").and_then(Value::as_u64),
        error: text("error"),
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
    // The checks run in document order so that the first problem is the one reported.
    check_header(doc)?;
    let shape_v = shape(field(doc, "shape", "")?, "shape")?;
    let dtype = data_type(doc)?;
    let shard = shard_shape(doc)?;
    check_layout_options(doc)?;
    let sharding = sharding(doc, dtype)?;
    let fill = fill_value(field(doc, "fill_value", "")?, dtype)?;
    let mut attributes: Map<String, Value> = match doc.get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(err("attributes is not an object")),
    };
    let ours = attributes.remove("zarrstream");
    let mut builder = ArraySpec::builder()
        .shape(&shape_v)
        .chunk_shape(&sharding.chunk)
        .shard_shape(&shard)
        .dtype(dtype)
        .fill_value(fill)
        .codec(sharding.codec)
        .crc32c(sharding.crc32c)
        .index_location(sharding.index_location)
        .attributes(attributes);
    if let Some(names) = dimension_names(doc)? {
        builder = builder.dimension_names(names);
    }
    let spec = builder
        .build()
        .map_err(|e| err(format!("invalid array: {e}")))?;
    Ok(StoreMetadata {
        spec,
        progress: progress(ours.as_ref()),
    })
}

/// A Zarr v3 array node.
fn check_header(doc: &Value) -> Result<(), ReadError> {
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(3) {
        return Err(err("zarr_format is not 3"));
    }
    if doc.get("node_type").and_then(Value::as_str) != Some("array") {
        return Err(err("node_type is not array"));
    }
    Ok(())
}

/// The data type, spelled exactly as this library writes it.
fn data_type(doc: &Value) -> Result<DataType, ReadError> {
    let dt_name = field(doc, "data_type", "")?
        .as_str()
        .ok_or_else(|| err("data_type is not a string"))?;
    dt_name
        .parse::<DataType>()
        .ok()
        .filter(|d| d.zarr_name() == dt_name)
        .ok_or_else(|| err(format!("unsupported data_type {dt_name}")))
}

/// The shard shape: the chunk shape of the regular chunk grid.
fn shard_shape(doc: &Value) -> Result<Vec<u64>, ReadError> {
    let grid = field(doc, "chunk_grid", "")?;
    if name_of(grid) != Some("regular") {
        return Err(err("chunk_grid is not regular"));
    }
    shape(
        field(
            field(grid, "configuration", "chunk_grid.")?,
            "chunk_shape",
            "chunk_grid.configuration.",
        )?,
        "chunk_grid.configuration.chunk_shape",
    )
}

/// Keys `c/0/1/2` (the default encoding with `/`) and no storage transformers.
fn check_layout_options(doc: &Value) -> Result<(), ReadError> {
    if let Some(enc) = doc.get("chunk_key_encoding") {
        let sep = enc
            .get("configuration")
            .and_then(|c| c.get("separator"))
            .and_then(Value::as_str)
            .unwrap_or("/");
        if name_of(enc) != Some("default") || sep != "/" {
            return Err(err("chunk_key_encoding is not default with separator /"));
        }
    }
    if doc
        .get("storage_transformers")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        return Err(err("storage_transformers are not supported"));
    }
    Ok(())
}

/// What the one `sharding_indexed` codec says.
struct Sharding {
    chunk: Vec<u64>,
    codec: Codec,
    crc32c: bool,
    index_location: IndexLocation,
}

fn sharding(doc: &Value, dtype: DataType) -> Result<Sharding, ReadError> {
    let codecs = field(doc, "codecs", "")?
        .as_array()
        .ok_or_else(|| err("codecs is not a list"))?;
    let [sharding] = codecs.as_slice() else {
        return Err(err("codecs is not exactly one sharding_indexed codec"));
    };
    if name_of(sharding) != Some("sharding_indexed") {
        return Err(err("codecs[0] is not sharding_indexed"));
    }
    let conf = field(sharding, "configuration", "codecs[0].")?;
    let at = "codecs[0].configuration.";
    let chunk = shape(
        field(conf, "chunk_shape", at)?,
        "codecs[0].configuration.chunk_shape",
    )?;
    let (codec, crc32c) = inner_codecs(field(conf, "codecs", at)?, dtype)?;
    let index_codecs = field(conf, "index_codecs", at)?.as_array();
    let index_ok = index_codecs.is_some_and(|l| {
        l.len() == 2 && is_bytes_little(&l[0]) && name_of(&l[1]) == Some("crc32c")
    });
    if !index_ok {
        return Err(err("index_codecs are not [bytes(little), crc32c]"));
    }
    let index_location = match conf.get("index_location").and_then(Value::as_str) {
        None | Some("end") => IndexLocation::End,
        Some("start") => IndexLocation::Start,
        Some(other) => return Err(err(format!("index_location {other}"))),
    };
    Ok(Sharding {
        chunk,
        codec,
        crc32c,
        index_location,
    })
}

/// `dimension_names`, when given (null counts as not given).
fn dimension_names(doc: &Value) -> Result<Option<Vec<&str>>, ReadError> {
    match doc.get("dimension_names") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_array()
            .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<&str>>>())
            .map(Some)
            .ok_or_else(|| err("dimension_names is not a list of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{Progress, State, array_json};

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
