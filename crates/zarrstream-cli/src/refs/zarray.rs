//! The Zarr v2 metadata of the inner-chunk view: `.zgroup`, `<name>/.zarray` and
//! `<name>/.zattrs`, built from a sharded v3 array's `zarr.json`.

use serde_json::{Map, Value, json};
use zarrstream::{ArraySpec, BloscShuffle, Codec, DataType};

use super::RefsError;

/// How the 4-byte crc32c that ends every inner chunk (when the array has one) is shown to
/// v2 readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Crc32cMode {
    /// Reference the whole chunk and declare numcodecs' `crc32c` codec (numcodecs ≥ 0.14)
    /// as the v2 compressor, the inner codec as the filter: readers check every chunk.
    Verify,
    /// Reference only the payload (`nbytes - 4`): any v2 reader decodes it, nobody checks it.
    Strip,
}

/// What the reference set says about the checksum, for the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Crc32cShown {
    /// The array's inner chunks carry no crc32c.
    Absent,
    /// Declared as the numcodecs `crc32c` compressor.
    Verify,
    /// Cut off the referenced byte ranges.
    Strip,
}

impl Crc32cShown {
    /// What happens to the checksum of an array with (`on`) or without inner crc32c.
    pub(crate) fn new(on: bool, mode: Crc32cMode) -> Self {
        match (on, mode) {
            (false, _) => Crc32cShown::Absent,
            (true, Crc32cMode::Verify) => Crc32cShown::Verify,
            (true, Crc32cMode::Strip) => Crc32cShown::Strip,
        }
    }

    /// Bytes to cut off the end of every referenced chunk.
    pub(crate) fn trim(self) -> u64 {
        if self == Crc32cShown::Strip { 4 } else { 0 }
    }

    /// One phrase for the text summary.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Crc32cShown::Absent => "chunks carry no crc32c",
            Crc32cShown::Verify => "readers verify each chunk's crc32c (numcodecs crc32c)",
            Crc32cShown::Strip => "crc32c cut off the references (not verified by readers)",
        }
    }
}

/// The numpy type string of a little-endian element type.
fn v2_dtype(dtype: DataType) -> Result<&'static str, RefsError> {
    Ok(match dtype {
        DataType::Int8 => "|i1",
        DataType::UInt8 => "|u1",
        DataType::Int16 => "<i2",
        DataType::UInt16 => "<u2",
        DataType::Int32 => "<i4",
        DataType::UInt32 => "<u4",
        DataType::Int64 => "<i8",
        DataType::UInt64 => "<u8",
        DataType::Float32 => "<f4",
        DataType::Float64 => "<f8",
        other => return Err(RefsError::Unsupported(format!("data type {other}"))),
    })
}

/// The numcodecs configuration of the inner bytes→bytes codec, `None` for no compression.
fn numcodec(spec: &ArraySpec) -> Result<Option<Value>, RefsError> {
    Ok(match spec.codec() {
        Codec::None => None,
        Codec::Zstd { level, .. } => Some(json!({"id": "zstd", "level": level})),
        // numcodecs' shuffle ids (0 none, 1 byte, 2 bit), as the writer chose; the Blosc1
        // header is self-describing, so decoding depends on none of these values.
        Codec::Blosc {
            compressor, clevel, ..
        } => {
            let shuffle = match spec.codec().blosc_shuffle(spec.dtype()) {
                Some(BloscShuffle::NoShuffle) => 0,
                Some(BloscShuffle::BitShuffle) => 2,
                _ => 1,
            };
            Some(json!({
                "id": "blosc", "cname": compressor.cname(), "clevel": clevel,
                "shuffle": shuffle, "blocksize": 0
            }))
        }
        other => return Err(RefsError::Unsupported(format!("codec {other}"))),
    })
}

/// `(filters, compressor)` of the `.zarray`.
fn codec_chain(spec: &ArraySpec, crc: Crc32cShown) -> Result<(Value, Value), RefsError> {
    let inner = numcodec(spec)?;
    Ok(match (crc, inner) {
        // v2 decodes the compressor first, then the filters in reverse: the crc32c
        // codec checks and strips the suffix, then the inner codec decompresses.
        (Crc32cShown::Verify, Some(c)) => (json!([c]), json!({"id": "crc32c"})),
        (Crc32cShown::Verify, None) => (Value::Null, json!({"id": "crc32c"})),
        (_, Some(c)) => (Value::Null, c),
        (_, None) => (Value::Null, Value::Null),
    })
}

/// The `.zarray` of the inner-chunk view. `fill_value` is copied from `zarr.json` as it is
/// (a different or `null` value would change what missing chunks read as).
pub(super) fn zarray(
    spec: &ArraySpec,
    fill_value: &Value,
    crc: Crc32cShown,
) -> Result<Value, RefsError> {
    let (filters, compressor) = codec_chain(spec, crc)?;
    Ok(json!({
        "zarr_format": 2,
        "shape": spec.shape(),
        "chunks": spec.chunk_shape(),
        "dtype": v2_dtype(spec.dtype())?,
        "compressor": compressor,
        "filters": filters,
        "fill_value": fill_value,
        "order": "C",
        // The parquet layout only understands ".".
        "dimension_separator": ".",
    }))
}

/// The `.zattrs`: the v3 `attributes`, plus `_ARRAY_DIMENSIONS` (xarray) when the array
/// has dimension names.
pub(super) fn zattrs(spec: &ArraySpec, attributes: Option<&Value>) -> Value {
    let mut out = attributes
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_else(Map::new);
    if let Some(names) = spec.dimension_names() {
        out.insert("_ARRAY_DIMENSIONS".into(), json!(names));
    }
    Value::Object(out)
}

/// The three metadata documents, keyed as in the reference set.
pub(super) fn metadata_keys(name: &str, zarray: Value, zattrs: Value) -> Vec<(String, Value)> {
    vec![
        (".zgroup".into(), json!({"zarr_format": 2})),
        (format!("{name}/.zarray"), zarray),
        (format!("{name}/.zattrs"), zattrs),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(codec: Codec, crc: bool) -> ArraySpec {
        ArraySpec::builder()
            .shape([0, 8, 8])
            .chunk_shape([1, 4, 4])
            .shard_shape([2, 8, 8])
            .dtype(DataType::UInt16)
            .codec(codec)
            .crc32c(crc)
            .build()
            .expect("spec")
    }

    #[test]
    fn crc32c_becomes_the_compressor_and_the_codec_a_filter() {
        let z = zarray(&spec(Codec::zstd(3), true), &json!(7), Crc32cShown::Verify).unwrap();
        assert_eq!(z["compressor"], json!({"id": "crc32c"}));
        assert_eq!(z["filters"], json!([{"id": "zstd", "level": 3}]));
        assert_eq!(z["fill_value"], json!(7));
        assert_eq!(z["dtype"], json!("<u2"));
    }

    #[test]
    fn stripped_or_absent_crc32c_leaves_the_codec_as_compressor() {
        for crc in [Crc32cShown::Strip, Crc32cShown::Absent] {
            let z = zarray(&spec(Codec::blosc_lz4(1), true), &json!(0), crc).unwrap();
            assert_eq!(z["compressor"]["cname"], json!("lz4"));
            assert_eq!(z["filters"], Value::Null);
        }
        let z = zarray(&spec(Codec::none(), false), &json!(0), Crc32cShown::Absent).unwrap();
        assert_eq!(z["compressor"], Value::Null);
    }

    #[test]
    fn blosc_names_its_compressor_and_shuffle() {
        let bits = Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle);
        for (codec, cname, clevel, shuffle) in [
            (Codec::blosc_lz4(1), "lz4", 1, 1),
            (Codec::blosc_zstd(3), "zstd", 3, 1),
            (bits, "zstd", 3, 2),
            (
                Codec::blosc_lz4(5).with_shuffle(BloscShuffle::NoShuffle),
                "lz4",
                5,
                0,
            ),
        ] {
            let z = zarray(&spec(codec, false), &json!(0), Crc32cShown::Absent).unwrap();
            assert_eq!(
                z["compressor"],
                json!({"id": "blosc", "cname": cname, "clevel": clevel,
                       "shuffle": shuffle, "blocksize": 0}),
                "{codec}"
            );
        }
    }
}
