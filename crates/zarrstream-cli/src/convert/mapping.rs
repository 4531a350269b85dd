//! Legacy metadata values → standard Zarr v3: data types, fill values, compressors.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::error::{ConvertError, bad_meta, unsupported};
use zarrstream::document::{BloscConfiguration, Named, ZstdConfiguration};

/// A data type: its v3 name, element size and the byte order of its encoded elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DType {
    /// The v3 core name, e.g. `uint16`.
    pub name: &'static str,
    /// Bytes per element.
    pub size: usize,
    /// `true` for big-endian elements (`>u2`); 1-byte types are always little.
    pub big_endian: bool,
}

/// Parses a numpy-style type string (`<u2`, `|u1`, `u1`, `>f4`, `bool`) or a v3 core
/// name (`uint16`) as written by the legacy layouts.
pub(super) fn parse_dtype(path: &Path, v: &Value) -> Result<DType, ConvertError> {
    let s = v
        .as_str()
        .ok_or_else(|| bad_meta(path, format!("data type {v} is not a string")))?;
    let (big, body) = match s.as_bytes().first() {
        Some(b'>') => (true, &s[1..]),
        Some(b'<' | b'|' | b'=') => (false, &s[1..]),
        _ => (false, s),
    };
    let (name, size) = match body {
        "b1" | "bool" => ("bool", 1),
        "i1" | "int8" => ("int8", 1),
        "i2" | "int16" => ("int16", 2),
        "i4" | "int32" => ("int32", 4),
        "i8" | "int64" => ("int64", 8),
        "u1" | "uint8" => ("uint8", 1),
        "u2" | "uint16" => ("uint16", 2),
        "u4" | "uint32" => ("uint32", 4),
        "u8" | "uint64" => ("uint64", 8),
        "f2" | "float16" => ("float16", 2),
        "f4" | "float32" => ("float32", 4),
        "f8" | "float64" => ("float64", 8),
        "c8" | "complex64" => ("complex64", 8),
        "c16" | "complex128" => ("complex128", 16),
        _ => return Err(unsupported(path, format!("data type {s:?}"))),
    };
    Ok(DType {
        name,
        size,
        big_endian: big && size > 1,
    })
}

impl DType {
    fn is_int(&self) -> bool {
        self.name.starts_with("int") || self.name.starts_with("uint")
    }
    fn is_float(&self) -> bool {
        self.name.starts_with("float")
    }
}

/// A fill value in v3 form and whether the legacy one (`null`) had to be replaced.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fill {
    /// The v3 `fill_value`.
    pub value: Value,
    /// `true` when the legacy document had `null` (v3 requires a value).
    pub replaced: bool,
}

/// Maps a legacy `fill_value` to v3: `null` becomes the type's zero, integral floats
/// given for integer types become integers, `"NaN"`/`"Infinity"` stay as they are.
pub(super) fn map_fill(path: &Path, v: &Value, dt: &DType) -> Result<Fill, ConvertError> {
    if v.is_null() {
        let value = match dt.name {
            "bool" => json!(false),
            "complex64" | "complex128" => json!([0.0, 0.0]),
            _ if dt.is_float() => json!(0.0),
            _ => json!(0),
        };
        return Ok(Fill {
            value,
            replaced: true,
        });
    }
    let bad = || {
        bad_meta(
            path,
            format!("fill_value {v} does not fit data type {}", dt.name),
        )
    };
    let value = match (dt.name, v) {
        ("bool", Value::Bool(_)) => v.clone(),
        ("bool", Value::Number(n)) if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
            json!(n.as_u64() == Some(1))
        }
        (_, Value::Number(n)) if dt.is_int() => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => json!(i),
            (_, Some(u), _) => json!(u),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => json!(f as i64),
            _ => return Err(bad()),
        },
        (_, Value::Number(_)) if dt.is_float() => v.clone(),
        (_, Value::String(s))
            if dt.is_float() && matches!(s.as_str(), "NaN" | "Infinity" | "-Infinity") =>
        {
            v.clone()
        }
        ("complex64" | "complex128", Value::Array(a)) if a.len() == 2 => v.clone(),
        _ => return Err(bad()),
    };
    Ok(Fill {
        value,
        replaced: false,
    })
}

/// The inner compressor of a legacy array, as a v3 bytes→bytes codec.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Compressor {
    /// No compression.
    None,
    /// Zstandard.
    Zstd {
        /// Compression level.
        level: i32,
        /// Frame content checksum flag.
        checksum: bool,
    },
    /// Blosc 1.
    Blosc {
        /// Internal compressor name.
        cname: String,
        /// Compression level 0–9.
        clevel: u8,
        /// `noshuffle`, `shuffle` or `bitshuffle`.
        shuffle: &'static str,
        /// Block size (0 = automatic).
        blocksize: usize,
    },
    /// gzip (DEFLATE in a gzip container).
    Gzip {
        /// Compression level 0–9.
        level: i64,
    },
}

impl Compressor {
    /// Parses a Zarr v2 / numcodecs compressor (`{"id": "zstd", "level": 1}`) or `null`.
    pub(super) fn from_v2(path: &Path, v: &Value, dt: &DType) -> Result<Self, ConvertError> {
        match v {
            Value::Null => Ok(Self::None),
            Value::Object(m) => {
                let id = m.get("id").and_then(Value::as_str).ok_or_else(|| {
                    bad_meta(path, format!("compressor {v} has no string \"id\""))
                })?;
                Self::from_parts(path, id, m, dt)
            }
            _ => Err(bad_meta(path, format!("compressor {v} is not an object"))),
        }
    }

    /// Parses a v3-draft compressor (`{"codec": ".../codec/zstd/1.0", "configuration":
    /// {...}}`), absent or `null`.
    pub(super) fn from_draft(
        path: &Path,
        v: Option<&Value>,
        dt: &DType,
    ) -> Result<Self, ConvertError> {
        let Some(Value::Object(m)) = v else {
            return match v {
                None | Some(Value::Null) => Ok(Self::None),
                Some(other) => Err(bad_meta(
                    path,
                    format!("compressor {other} is not an object"),
                )),
            };
        };
        let uri = m
            .get("codec")
            .and_then(Value::as_str)
            .ok_or_else(|| bad_meta(path, "compressor has no string \"codec\""))?;
        // ".../spec/codec/<name>/1.0" → <name>
        let name = uri.trim_end_matches('/').rsplit('/').nth(1).unwrap_or(uri);
        let empty = Map::new();
        let conf = match m.get("configuration") {
            Some(Value::Object(c)) => c,
            None | Some(Value::Null) => &empty,
            Some(other) => {
                return Err(bad_meta(path, format!("compressor configuration {other}")));
            }
        };
        Self::from_parts(path, name, conf, dt)
    }

    fn from_parts(
        path: &Path,
        name: &str,
        conf: &Map<String, Value>,
        dt: &DType,
    ) -> Result<Self, ConvertError> {
        let int = |key: &str, default: i64| -> Result<i64, ConvertError> {
            match conf.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_i64()
                    .ok_or_else(|| bad_meta(path, format!("{name} {key} {v} is not an integer"))),
            }
        };
        match name {
            "zstd" => Ok(Self::Zstd {
                level: {
                    let level = int("level", 0)?;
                    i32::try_from(level)
                        .map_err(|_| bad_meta(path, format!("zstd level {level}")))?
                },
                checksum: conf
                    .get("checksum")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            }),
            "gzip" => {
                let level = int("level", 1)?;
                check_range(path, "gzip level", level, 0, 9)?;
                Ok(Self::Gzip { level })
            }
            "blosc" => Self::blosc(path, conf, dt, int("clevel", 5)?, int("blocksize", 0)?),
            other => Err(unsupported(
                path,
                format!("compressor {other:?} (supported: zstd, blosc, gzip, none)"),
            )),
        }
    }

    fn blosc(
        path: &Path,
        conf: &Map<String, Value>,
        dt: &DType,
        clevel: i64,
        blocksize: i64,
    ) -> Result<Self, ConvertError> {
        let cname = conf.get("cname").and_then(Value::as_str).unwrap_or("lz4");
        if !matches!(
            cname,
            "lz4" | "lz4hc" | "blosclz" | "zstd" | "snappy" | "zlib"
        ) {
            return Err(unsupported(path, format!("blosc cname {cname:?}")));
        }
        check_range(path, "blosc clevel", clevel, 0, 9)?;
        let clevel =
            u8::try_from(clevel).map_err(|_| bad_meta(path, format!("blosc clevel {clevel}")))?;
        let blocksize = usize::try_from(blocksize)
            .map_err(|_| bad_meta(path, format!("blosc blocksize {blocksize}")))?;
        let shuffle = match conf.get("shuffle") {
            None | Some(Value::Null) => default_shuffle(dt),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(0) => "noshuffle",
                Some(1) => "shuffle",
                Some(2) => "bitshuffle",
                Some(-1) => default_shuffle(dt),
                _ => return Err(bad_meta(path, format!("blosc shuffle {n}"))),
            },
            Some(Value::String(s)) => match s.as_str() {
                "noshuffle" => "noshuffle",
                "shuffle" => "shuffle",
                "bitshuffle" => "bitshuffle",
                _ => return Err(bad_meta(path, format!("blosc shuffle {s:?}"))),
            },
            Some(other) => return Err(bad_meta(path, format!("blosc shuffle {other}"))),
        };
        Ok(Self::Blosc {
            cname: cname.to_string(),
            clevel,
            shuffle,
            blocksize,
        })
    }

    /// The v3 codec, or `None` for no compression.
    pub(super) fn codec(&self, dt: &DType) -> Option<Named> {
        match self {
            Self::None => None,
            Self::Zstd { level, checksum } => Some(Named::with(
                "zstd",
                &ZstdConfiguration {
                    level: *level,
                    checksum: *checksum,
                },
            )),
            // No configuration type of the library's: zarrstream never writes gzip.
            Self::Gzip { level } => Some(Named::with("gzip", &json!({"level": level}))),
            Self::Blosc {
                cname,
                clevel,
                shuffle,
                blocksize,
            } => Some(Named::with(
                "blosc",
                &BloscConfiguration {
                    cname: cname.clone(),
                    clevel: *clevel,
                    shuffle: (*shuffle).into(),
                    typesize: Some(dt.size),
                    blocksize: *blocksize,
                },
            )),
        }
    }

    /// A short name for reports: `zstd`, `blosc/lz4`, `gzip`, `none`.
    pub(super) fn describe(&self) -> String {
        match self {
            Self::None => "none".into(),
            Self::Zstd { level, .. } => format!("zstd:{level}"),
            Self::Gzip { level } => format!("gzip:{level}"),
            Self::Blosc { cname, clevel, .. } => format!("blosc/{cname}:{clevel}"),
        }
    }
}

/// numcodecs' automatic shuffle: bit shuffle for 1-byte types, byte shuffle otherwise.
fn default_shuffle(dt: &DType) -> &'static str {
    if dt.size == 1 {
        "bitshuffle"
    } else {
        "shuffle"
    }
}

fn check_range(path: &Path, what: &str, v: i64, lo: i64, hi: i64) -> Result<(), ConvertError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(bad_meta(path, format!("{what} {v} outside {lo}..={hi}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("x")
    }

    #[test]
    fn dtypes() {
        let d = parse_dtype(p(), &json!("<u2")).unwrap();
        assert_eq!((d.name, d.size, d.big_endian), ("uint16", 2, false));
        let d = parse_dtype(p(), &json!(">f4")).unwrap();
        assert_eq!((d.name, d.size, d.big_endian), ("float32", 4, true));
        assert!(!parse_dtype(p(), &json!(">u1")).unwrap().big_endian);
        assert_eq!(parse_dtype(p(), &json!("u1")).unwrap().name, "uint8");
        assert!(parse_dtype(p(), &json!("<M8[ns]")).is_err());
        assert!(parse_dtype(p(), &json!(3)).is_err());
    }

    #[test]
    fn fills() {
        let u2 = parse_dtype(p(), &json!("<u2")).unwrap();
        let f4 = parse_dtype(p(), &json!("<f4")).unwrap();
        let f = map_fill(p(), &Value::Null, &u2).unwrap();
        assert_eq!((f.value, f.replaced), (json!(0), true));
        assert_eq!(map_fill(p(), &json!(7.0), &u2).unwrap().value, json!(7));
        assert!(map_fill(p(), &json!(7.5), &u2).is_err());
        assert_eq!(
            map_fill(p(), &json!("NaN"), &f4).unwrap().value,
            json!("NaN")
        );
        assert!(map_fill(p(), &json!("nope"), &f4).is_err());
    }

    #[test]
    fn compressors() {
        let u2 = parse_dtype(p(), &json!("<u2")).unwrap();
        let b = Compressor::from_v2(
            p(),
            &json!({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": -1, "blocksize": 0}),
            &u2,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(b.codec(&u2).unwrap()).unwrap()["configuration"],
            json!({"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 2, "blocksize": 0})
        );
        let z = Compressor::from_draft(
            p(),
            Some(
                &json!({"codec": "https://purl.org/zarr/spec/codec/zstd/1.0",
                         "configuration": {"level": 3}}),
            ),
            &u2,
        )
        .unwrap();
        assert_eq!(
            z,
            Compressor::Zstd {
                level: 3,
                checksum: false
            }
        );
        assert_eq!(
            Compressor::from_draft(p(), None, &u2).unwrap(),
            Compressor::None
        );
        let e = Compressor::from_v2(p(), &json!({"id": "lzma"}), &u2).unwrap_err();
        assert!(
            e.to_string().contains("unsupported compressor \"lzma\""),
            "{e}"
        );
    }
}
