//! Element types and fill values.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::{ParseError, SpecError};

/// Element type of an array (the Zarr v3 core `data_type` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// `int8`
    Int8,
    /// `uint8`
    UInt8,
    /// `int16`
    Int16,
    /// `uint16`
    UInt16,
    /// `int32`
    Int32,
    /// `uint32`
    UInt32,
    /// `int64`
    Int64,
    /// `uint64`
    UInt64,
    /// `float32`
    Float32,
    /// `float64`
    Float64,
}

impl DataType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::UInt8 => 1,
            DataType::Int16 | DataType::UInt16 => 2,
            DataType::Int32 | DataType::UInt32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::UInt64 | DataType::Float64 => 8,
        }
    }

    /// Every data type, smallest first (the order of the book's on-disk format chapter).
    pub const ALL: [DataType; 10] = [
        DataType::Int8,
        DataType::UInt8,
        DataType::Int16,
        DataType::UInt16,
        DataType::Int32,
        DataType::UInt32,
        DataType::Int64,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
    ];

    /// Whether elements are IEEE 754 floating point (`float32`, `float64`).
    pub const fn is_float(self) -> bool {
        matches!(self, DataType::Float32 | DataType::Float64)
    }

    /// The short name of command lines (`i8`, `u16`, `f64`: numpy's kind letter and the
    /// size in bits), which [`FromStr`] also parses.
    pub const fn short_name(self) -> &'static str {
        match self {
            DataType::Int8 => "i8",
            DataType::UInt8 => "u8",
            DataType::Int16 => "i16",
            DataType::UInt16 => "u16",
            DataType::Int32 => "i32",
            DataType::UInt32 => "u32",
            DataType::Int64 => "i64",
            DataType::UInt64 => "u64",
            DataType::Float32 => "f32",
            DataType::Float64 => "f64",
        }
    }

    /// The Zarr v3 name, as written in `zarr.json`.
    pub const fn zarr_name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::UInt8 => "uint8",
            DataType::Int16 => "int16",
            DataType::UInt16 => "uint16",
            DataType::Int32 => "int32",
            DataType::UInt32 => "uint32",
            DataType::Int64 => "int64",
            DataType::UInt64 => "uint64",
            DataType::Float32 => "float32",
            DataType::Float64 => "float64",
        }
    }

    /// Checks that `value` is exactly representable and returns its little-endian bytes.
    ///
    /// Fill values travel as `f64`, so an `int64`/`uint64` fill value must be one an
    /// `f64` holds exactly (every integer up to 2^53 in magnitude, and larger ones that
    /// are multiples of a power of two); others are refused rather than rounded.
    pub(crate) fn fill_bytes(self, value: f64) -> Result<FillPattern, SpecError> {
        let bad = || SpecError::FillValue { value, dtype: self };
        // `hi` is exclusive: 2^63 and 2^64 are exact in f64, where `i64::MAX as f64` is
        // not (it rounds up to 2^63, outside the type).
        let int_in = |lo: f64, hi: f64| value.fract() == 0.0 && value >= lo && value < hi;
        let pow2 = |e: i32| 2f64.powi(e);
        let bytes: Vec<u8> = match self {
            DataType::Int8 if int_in(-pow2(7), pow2(7)) => (value as i8).to_le_bytes().to_vec(),
            DataType::UInt8 if int_in(0.0, pow2(8)) => vec![value as u8],
            DataType::Int16 if int_in(-pow2(15), pow2(15)) => (value as i16).to_le_bytes().to_vec(),
            DataType::UInt16 if int_in(0.0, pow2(16)) => (value as u16).to_le_bytes().to_vec(),
            DataType::Int32 if int_in(-pow2(31), pow2(31)) => (value as i32).to_le_bytes().to_vec(),
            DataType::UInt32 if int_in(0.0, pow2(32)) => (value as u32).to_le_bytes().to_vec(),
            DataType::Int64 if int_in(-pow2(63), pow2(63)) => (value as i64).to_le_bytes().to_vec(),
            DataType::UInt64 if int_in(0.0, pow2(64)) => (value as u64).to_le_bytes().to_vec(),
            DataType::Float32 => {
                let f = value as f32;
                // A finite f64 that overflows f32 would silently become infinity.
                if value.is_finite() && !f.is_finite() {
                    return Err(bad());
                }
                let bits = if value.is_nan() {
                    0x7fc0_0000
                } else {
                    f.to_bits()
                };
                bits.to_le_bytes().to_vec()
            }
            DataType::Float64 => {
                let bits = if value.is_nan() {
                    0x7ff8_0000_0000_0000
                } else {
                    value.to_bits()
                };
                bits.to_le_bytes().to_vec()
            }
            _ => return Err(bad()),
        };
        Ok(FillPattern::new(&bytes))
    }

    /// The value of one element from its little-endian bytes (`size()` of them; the
    /// 64-bit integers rounded to the nearest `f64`).
    pub(crate) fn value_f64(self, b: &[u8]) -> f64 {
        fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(&b[..N]);
            a
        }
        match self {
            DataType::Int8 => f64::from(i8::from_le_bytes(arr(b))),
            DataType::UInt8 => f64::from(b[0]),
            DataType::Int16 => f64::from(i16::from_le_bytes(arr(b))),
            DataType::UInt16 => f64::from(u16::from_le_bytes(arr(b))),
            DataType::Int32 => f64::from(i32::from_le_bytes(arr(b))),
            DataType::UInt32 => f64::from(u32::from_le_bytes(arr(b))),
            DataType::Int64 => i64::from_le_bytes(arr(b)) as f64,
            DataType::UInt64 => u64::from_le_bytes(arr(b)) as f64,
            DataType::Float32 => f64::from(f32::from_le_bytes(arr(b))),
            DataType::Float64 => f64::from_le_bytes(arr(b)),
        }
    }

    /// The `fill_value` JSON for an already validated value: a number, or for the float
    /// types the strings `NaN`, `Infinity` and `-Infinity` Zarr v3 uses where JSON has none.
    pub(crate) fn fill_json(self, value: f64) -> Value {
        let float = |f: f64| {
            if f.is_nan() {
                Value::from("NaN")
            } else if f.is_infinite() {
                Value::from(if f > 0.0 { "Infinity" } else { "-Infinity" })
            } else {
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        };
        match self {
            // Printed through f64 so the JSON number rounds back to exactly the f32.
            DataType::Float32 => float(f64::from(value as f32)),
            DataType::Float64 => float(value),
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                Value::from(value as i64)
            }
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
                Value::from(value as u64)
            }
        }
    }
}

impl fmt::Display for DataType {
    /// The Zarr name ([`DataType::zarr_name`]), which [`FromStr`] parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.zarr_name())
    }
}

impl FromStr for DataType {
    type Err = ParseError;

    /// Parses the Zarr names (`uint16`) and the short names used on command lines
    /// (`i8`, `u8`, `i16`, `u16`, `i32`, `u32`, `i64`, `u64`, `f32`, `f64`).
    ///
    /// ```
    /// use zarrstream::DataType;
    /// assert_eq!("u16".parse::<DataType>()?, DataType::UInt16);
    /// assert_eq!("float32".parse::<DataType>()?, DataType::Float32);
    /// assert_eq!("i64".parse::<DataType>()?, DataType::Int64);
    /// # Ok::<(), zarrstream::ParseError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, ParseError> {
        DataType::ALL
            .into_iter()
            .find(|d| s == d.zarr_name() || s == d.short_name())
            .ok_or_else(|| {
                ParseError::new(
                    "data type",
                    s,
                    "int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, \
                     float64, or i8, u8, i16, u16, i32, u32, i64, u64, f32, f64",
                )
            })
    }
}

/// Element types that can be pushed as frames.
///
/// Implemented for `i8`, `u8`, `i16`, `u16`, `i32`, `u32`, `i64`, `u64`, `f32` and
/// `f64`; sealed.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// The matching array data type.
    const DTYPE: DataType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DataType = DataType::$d; }
    )*};
}
element!(
    i8 => Int8, u8 => UInt8, i16 => Int16, u16 => UInt16, i32 => Int32, u32 => UInt32,
    i64 => Int64, u64 => UInt64, f32 => Float32, f64 => Float64
);

/// One element's little-endian bytes, repeated to pad edge chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FillPattern {
    bytes: [u8; 8],
    size: usize,
}

impl FillPattern {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b[..bytes.len()].copy_from_slice(bytes);
        FillPattern {
            bytes: b,
            size: bytes.len(),
        }
    }

    /// Byte `j` of the element (used by the byte shuffle).
    pub(crate) fn byte(&self, j: usize) -> u8 {
        self.bytes[j % self.size]
    }

    /// Fills `out` (a whole number of elements) with the pattern.
    pub(crate) fn fill(&self, out: &mut [u8]) {
        let b = &self.bytes[..self.size];
        if b.iter().all(|&x| x == b[0]) {
            out.fill(b[0]);
        } else {
            for e in out.chunks_exact_mut(self.size) {
                e.copy_from_slice(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_json_follows_the_zarr_v3_spec() {
        assert_eq!(DataType::UInt16.fill_json(7.0), serde_json::json!(7));
        assert_eq!(DataType::Int16.fill_json(-3.0), serde_json::json!(-3));
        assert_eq!(
            DataType::Float32.fill_json(f64::NAN),
            serde_json::json!("NaN")
        );
        assert_eq!(
            DataType::Float32.fill_json(f64::NEG_INFINITY),
            serde_json::json!("-Infinity")
        );
        assert_eq!(DataType::Float32.fill_json(-1.5), serde_json::json!(-1.5));
        // 0.1f32 printed through f64 parses back to the same f32.
        let v = DataType::Float32.fill_json(0.1);
        assert_eq!(v.as_f64().map(|x| x as f32), Some(0.1f32));
    }

    #[test]
    fn fill_values_out_of_range_are_rejected() {
        assert!(DataType::UInt8.fill_bytes(256.0).is_err());
        assert!(DataType::UInt16.fill_bytes(-1.0).is_err());
        assert!(DataType::UInt16.fill_bytes(1.5).is_err());
        assert!(DataType::Int16.fill_bytes(-32769.0).is_err());
        assert!(DataType::Float32.fill_bytes(1e300).is_err());
        assert_eq!(
            DataType::Int16
                .fill_bytes(-2.0)
                .map(|p| (p.byte(0), p.byte(1))),
            Ok((0xfe, 0xff))
        );
        let nan = DataType::Float32.fill_bytes(f64::NAN).map(|p| p.bytes);
        assert_eq!(nan, Ok([0, 0, 0xc0, 0x7f, 0, 0, 0, 0]));
        // The 64-bit integers: 2^63 and 2^64 are exact in f64 and just outside the types.
        assert!(DataType::Int64.fill_bytes(2f64.powi(63)).is_err());
        assert!(DataType::UInt64.fill_bytes(2f64.powi(64)).is_err());
        assert!(DataType::Int8.fill_bytes(128.0).is_err());
        assert!(DataType::Int32.fill_bytes(2f64.powi(31)).is_err());
        let min = DataType::Int64
            .fill_bytes(-(2f64.powi(63)))
            .map(|p| p.bytes);
        assert_eq!(min, Ok(i64::MIN.to_le_bytes()));
        let big = DataType::UInt64.fill_bytes(2f64.powi(60)).map(|p| p.bytes);
        assert_eq!(big, Ok((1u64 << 60).to_le_bytes()));
        let f = DataType::Float64.fill_bytes(0.1).map(|p| p.bytes);
        assert_eq!(f, Ok(0.1f64.to_le_bytes()));
    }

    #[test]
    fn names_round_trip_and_short_names_parse() {
        use DataType::*;
        let shorts = [
            "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64",
        ];
        for (d, short) in DataType::ALL.into_iter().zip(shorts) {
            assert_eq!(d.to_string().parse::<DataType>(), Ok(d));
            assert_eq!(short.parse::<DataType>(), Ok(d));
            assert_eq!(d.short_name(), short);
            // The bits in the short name are the element size.
            assert_eq!(short[1..].parse::<usize>(), Ok(8 * d.size()));
        }
        assert_eq!(Float64.fill_json(-2.5), serde_json::json!(-2.5));
        assert_eq!(Int64.fill_json(-7.0), serde_json::json!(-7));
        assert_eq!(
            Float64.fill_json(f64::INFINITY),
            serde_json::json!("Infinity")
        );
        let e = "complex64".parse::<DataType>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("data type", "complex64"));
        assert!(
            e.to_string()
                .starts_with("\"complex64\" is not a data type (int8, uint8, ")
        );
    }

    #[test]
    fn fill_pattern_repeats_multibyte_elements() {
        let p = FillPattern::new(&[1, 2]);
        let mut out = [0u8; 6];
        p.fill(&mut out);
        assert_eq!(out, [1, 2, 1, 2, 1, 2]);
    }
}
