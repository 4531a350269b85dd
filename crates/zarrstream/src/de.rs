//! Deserialization helpers shared by the option types (see [`crate::config`]): the text
//! forms of enums come from their `FromStr`, so each is spelled in one place; durations are
//! numbers of milliseconds (the one unit of the JSON configuration, keys ending in `_ms`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, Visitor};

use crate::ParseError;

/// A value named by its text form, through the type's own `FromStr`.
pub(crate) fn from_str<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr<Err = ParseError>,
{
    let text = String::deserialize(d)?;
    text.parse().map_err(de::Error::custom)
}

/// A number of milliseconds ≥ 0 (a fraction is allowed).
pub(crate) fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    Duration::try_from_secs_f64(ms / 1e3)
        .map_err(|_| de::Error::custom(format!("{ms} is not a number of milliseconds ≥ 0")))
}

/// An object of strings, as key–value pairs in key order.
pub(crate) fn string_pairs<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    Ok(BTreeMap::<String, String>::deserialize(d)?
        .into_iter()
        .collect())
}

/// A JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"` (the Zarr v3 spellings of the
/// floats JSON has no numbers for).
pub(crate) fn fill_value<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match &v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| {
        de::Error::custom(format!(
            "{v} is not a number, \"NaN\", \"Infinity\" or \"-Infinity\""
        ))
    })
}

/// The JSON keys of a struct that derives `Deserialize`: serde hands them to
/// `deserialize_struct`, so the flat-config shim reads each section's keys from the type
/// itself instead of a second list that could drift.
pub(crate) fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}

struct Fields<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Stop;

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field names read")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for Fields<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
