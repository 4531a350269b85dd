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

/// A number of milliseconds > 0 (a fraction is allowed).
pub(crate) fn positive_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let ms = f64::deserialize(d)?;
    Duration::try_from_secs_f64(ms / 1e3)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| de::Error::custom(format!("{ms} is not a positive number of milliseconds")))
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
    // Fill values are held as doubles: an integer a double would round (beyond 2^53)
    // would silently become another value.
    let exact = |n: &serde_json::Number| match (n.as_u64(), n.as_i64(), n.as_f64()) {
        (Some(u), _, Some(f)) => (f as u64 == u && f < 2f64.powi(64)).then_some(f),
        (_, Some(i), Some(f)) => (f as i64 == i && f >= -(2f64.powi(63))).then_some(f),
        (_, _, f) => f,
    };
    if let serde_json::Value::Number(n) = &v
        && n.as_f64().is_some()
        && exact(n).is_none()
    {
        return Err(de::Error::custom(format!(
            "fill value {n} is not exactly representable as a double (int64/uint64 fill \
             values beyond 2^53 must be multiples of a power of two)"
        )));
    }
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

/// `Option<T>` through `f` for a present, non-null value: the helpers above made
/// optional (a `null` is "not set", as an absent key is).
fn optional<'de, D, T>(
    d: D,
    f: impl FnOnce(serde_json::Value) -> Result<T, String>,
) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
{
    match Option::<serde_json::Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => f(v).map(Some).map_err(de::Error::custom),
    }
}

/// `ome.frame_interval_ms`: a positive number of milliseconds (refused in
/// [`OmeError`](crate::OmeError)'s words, as `Ome` would refuse it).
pub(crate) fn frame_interval<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Duration>, D::Error> {
    optional(d, |v| {
        let ms = v.as_f64().ok_or_else(|| format!("{v} is not a number"))?;
        Duration::try_from_secs_f64(ms / 1e3).map_err(|_| {
            crate::OmeError::NotPositive {
                field: "frame_interval",
                value: ms,
            }
            .to_string()
        })
    })
}

/// `ome.levels`: a count, or `"auto"` (until a level's frame fits one inner chunk).
pub(crate) fn levels<'de, D: Deserializer<'de>>(d: D) -> Result<crate::Levels, D::Error> {
    use crate::Levels;
    let levels = optional(d, |v| {
        match &v {
            serde_json::Value::Number(n) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Levels::Count),
            serde_json::Value::String(s) if s == "auto" => Some(Levels::Auto),
            _ => None,
        }
        .ok_or_else(|| format!("{v} is not a level count or \"auto\""))
    })?;
    Ok(levels.unwrap_or_default())
}

/// `ome.downsample`, in the wording C programs have matched since before `ParseError`
/// (`unknown downsampling method "median" (mean, …)`).
pub(crate) fn downsample<'de, D: Deserializer<'de>>(d: D) -> Result<crate::Downsample, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map_err(|e: ParseError| {
        de::Error::custom(format!("unknown {} {:?} ({})", e.what, e.input, e.expected))
    })
}

/// `ome.level_lz4_acceleration`, at least 1 (as the setter makes it).
pub(crate) fn acceleration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    Ok(Option::<i32>::deserialize(d)?.map(|a| a.max(1)))
}

/// `frame_meta.fields`: an object of field names and their types (`"float64"` or
/// `"int64"`), in key order.
pub(crate) fn meta_fields<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, crate::MetaType)>, D::Error> {
    serde_json::Map::<String, serde_json::Value>::deserialize(d)?
        .into_iter()
        .map(|(name, kind)| {
            let text = kind.as_str().ok_or_else(|| {
                de::Error::custom(format!("{name}: {kind} is not \"float64\" or \"int64\""))
            })?;
            let kind = text.parse().map_err(de::Error::custom)?;
            Ok((name, kind))
        })
        .collect()
}

/// A plate's `rows` or `columns`: their names, or how many (named as
/// [`Plate::grid`](crate::Plate::grid) names them).
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Names {
    Count(usize),
    Names(Vec<String>),
}

/// `plate.rows`: names, or a count (`2` is `["A", "B"]`).
pub(crate) fn plate_rows<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Names::deserialize(d)? {
        Names::Count(n) => crate::Plate::grid(n, 0).rows().to_vec(),
        Names::Names(v) => v,
    })
}

/// `plate.columns`: names, or a count (`3` is `["1", "2", "3"]`).
pub(crate) fn plate_columns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Names::deserialize(d)? {
        Names::Count(n) => crate::Plate::grid(0, n).columns().to_vec(),
        Names::Names(v) => v,
    })
}

/// `plate.wells`: well paths `ROW/COLUMN`, as (row, column) pairs.
pub(crate) fn well_paths<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<(String, String)>>, D::Error> {
    let Some(wells) = Option::<Vec<String>>::deserialize(d)? else {
        return Ok(None);
    };
    wells
        .iter()
        .map(|w| match w.split_once('/') {
            Some((r, c)) if !c.contains('/') => Ok((r.to_string(), c.to_string())),
            _ => Err(de::Error::custom(format!(
                "{w:?} is not a well path ROW/COLUMN"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The schema of `ome.levels`: a count or `"auto"`.
pub(crate) fn levels_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [{"type": "integer", "minimum": 1}, {"const": "auto"}]
    })
}

/// The schema of a plate's `rows` or `columns`: names, or a count.
pub(crate) fn names_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9]+$"}}
        ]
    })
}

/// The schema of a fill value: a number, or a Zarr v3 spelling of a float JSON has no
/// number for.
pub(crate) fn fill_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]
    })
}

/// The schema of a duration that must be positive: a number of milliseconds > 0.
pub(crate) fn positive_millis_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "number", "exclusiveMinimum": 0})
}

/// The schema of a duration: a number of milliseconds ≥ 0.
pub(crate) fn millis_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "number", "minimum": 0})
}

/// The schema of an acquisition order: axis numbers, or dimension names.
pub(crate) fn order_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["array", "null"],
        "items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}
    })
}
