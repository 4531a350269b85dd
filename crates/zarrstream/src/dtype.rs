//! Element types and fill values.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::{ParseError, SpecError};

/// Element type of an array (the Zarr v3 core `data_type` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DataType {
    /// `uint8`
    UInt8,
    /// `uint16`
    UInt16,
    /// `int16`
    Int16,
    /// `uint32`
    UInt32,
    /// `float32`
    Float32,
}

impl DataType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DataType::UInt8 => 1,
            DataType::UInt16 | DataType::Int16 => 2,
            DataType::UInt32 | DataType::Float32 => 4,
        }
    }

    /// The Zarr v3 name, as written in `zarr.json`.
    pub const fn zarr_name(self) -> &'static str {
        match self {
            DataType::UInt8 => "uint8",
            DataType::UInt16 => "uint16",
            DataType::Int16 => "int16",
            DataType::UInt32 => "uint32",
            DataType::Float32 => "float32",
        }
    }

    /// Checks that `value` is exactly representable and returns its little-endian bytes.
    pub(crate) fn fill_bytes(self, value: f64) -> Result<FillPattern, SpecError> {
        let bad = || SpecError::FillValue { value, dtype: self };
        let int_in = |lo: f64, hi: f64| value.fract() == 0.0 && value >= lo && value <= hi;
        let bytes: Vec<u8> = match self {
            DataType::UInt8 if int_in(0.0, u8::MAX as f64) => vec![value as u8],
            DataType::UInt16 if int_in(0.0, u16::MAX as f64) => {
                (value as u16).to_le_bytes().to_vec()
            }
            DataType::Int16 if int_in(i16::MIN as f64, i16::MAX as f64) => {
                (value as i16).to_le_bytes().to_vec()
            }
            DataType::UInt32 if int_in(0.0, u32::MAX as f64) => {
                (value as u32).to_le_bytes().to_vec()
            }
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
            _ => return Err(bad()),
        };
        Ok(FillPattern::new(&bytes))
    }

    /// The `fill_value` JSON for an already validated value: a number, or for `float32`
    /// the strings `NaN`, `Infinity` and `-Infinity` Zarr v3 uses where JSON has none.
    pub(crate) fn fill_json(self, value: f64) -> Value {
        match self {
            DataType::Float32 => {
                let f = value as f32;
                if f.is_nan() {
                    Value::from("NaN")
                } else if f.is_infinite() {
                    Value::from(if f > 0.0 { "Infinity" } else { "-Infinity" })
                } else {
                    // Printed through f64 so the JSON number rounds back to exactly `f`.
                    serde_json::Number::from_f64(f64::from(f)).map_or(Value::Null, Value::Number)
                }
            }
            DataType::Int16 => Value::from(value as i64),
            _ => Value::from(value as u64),
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
    /// (`u8`, `u16`, `i16`, `u32`, `f32`).
    ///
    /// ```
    /// use zarrstream::DataType;
    /// assert_eq!("u16".parse::<DataType>()?, DataType::UInt16);
    /// assert_eq!("float32".parse::<DataType>()?, DataType::Float32);
    /// # Ok::<(), zarrstream::ParseError>(())
    /// ```
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Ok(match s {
            "u8" | "uint8" => DataType::UInt8,
            "u16" | "uint16" => DataType::UInt16,
            "i16" | "int16" => DataType::Int16,
            "u32" | "uint32" => DataType::UInt32,
            "f32" | "float32" => DataType::Float32,
            _ => {
                return Err(ParseError::new(
                    "data type",
                    s,
                    "uint8, uint16, int16, uint32, float32, u8, u16, i16, u32, f32",
                ));
            }
        })
    }
}

/// Element types that can be pushed as frames.
///
/// Implemented for `u8`, `u16`, `i16`, `u32` and `f32`; sealed.
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
element!(u8 => UInt8, u16 => UInt16, i16 => Int16, u32 => UInt32, f32 => Float32);

/// One element's little-endian bytes, repeated to pad edge chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FillPattern {
    bytes: [u8; 4],
    size: usize,
}

impl FillPattern {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        let mut b = [0u8; 4];
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
        assert_eq!(nan, Ok(0x7fc0_0000u32.to_le_bytes()));
    }

    #[test]
    fn names_round_trip_and_short_names_parse() {
        use DataType::*;
        for (d, short) in [
            (UInt8, "u8"),
            (UInt16, "u16"),
            (Int16, "i16"),
            (UInt32, "u32"),
            (Float32, "f32"),
        ] {
            assert_eq!(d.to_string().parse::<DataType>(), Ok(d));
            assert_eq!(short.parse::<DataType>(), Ok(d));
        }
        let e = "int64".parse::<DataType>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("data type", "int64"));
        assert!(
            e.to_string()
                .starts_with("\"int64\" is not a data type (uint8, ")
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
