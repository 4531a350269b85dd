//! Per-frame metadata: values that travel with each frame (camera timestamp, exposure,
//! stage position, a free JSON object), stored beside the array as ordinary Zarr arrays
//! aligned with its append axis.
//!
//! Layout, under the array's directory:
//!
//! ```text
//! <array>/frame_meta/zarr.json            a group; attributes.zarrstream_frame_meta lists the fields
//! <array>/frame_meta/<field>/zarr.json    1-D float64 or int64 array, one value per frame
//! <array>/frame_meta/json_offset          1-D uint64: where frame i's JSON starts in json_bytes
//! <array>/frame_meta/json_length          1-D uint64: its length in bytes (0: none)
//! <array>/frame_meta/json_bytes           1-D uint8: the UTF-8 JSON texts, one after another
//! ```
//!
//! Value `i` belongs to frame `i` of the array, counting 2-D frames in C order over the
//! axes before the frame's (`t, c, z`: frame `i` is `t = i / (C·Z)`, …), dropped and
//! skipped frames included so the two stay aligned; a field not given for a frame reads as its fill value (NaN for
//! float64, 0 for int64). Every metadata array is published after the array's own
//! `zarr.json` and never longer than it, so readers never see metadata ahead of the
//! frames. Values reach the disk on the finisher thread, one chunk file per 4096 values;
//! memory is one chunk per field plus the values of frames not yet published.

mod column;
mod store;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use crate::error::ParseError;

pub(crate) use store::{MetaRows, MetaStore, Row, check_resumable, open};

/// The type of a numeric per-frame field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetaType {
    /// IEEE 754 double: times in seconds, positions, exposures.
    Float64,
    /// Signed 64-bit integer: counters, camera timestamps in ticks.
    Int64,
}

impl MetaType {
    /// The Zarr data type name.
    pub fn zarr_name(self) -> &'static str {
        match self {
            MetaType::Float64 => "float64",
            MetaType::Int64 => "int64",
        }
    }
}

impl fmt::Display for MetaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.zarr_name())
    }
}

impl FromStr for MetaType {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "float64" | "f64" => Ok(MetaType::Float64),
            "int64" | "i64" => Ok(MetaType::Int64),
            _ => Err(ParseError::new(
                "frame metadata type",
                s,
                "float64 or int64",
            )),
        }
    }
}

/// Which per-frame metadata a writer stores: named numeric fields and, optionally, a
/// free JSON object per frame.
///
/// ```
/// use zarrstream::{FrameMetaSpec, MetaType};
/// let spec = FrameMetaSpec::new()
///     .field("timestamp", MetaType::Float64)
///     .field("stage_x", MetaType::Float64)
///     .json(true);
/// assert_eq!(spec.fields().len(), 2);
/// ```
///
/// It is also the `frame_meta` section of a JSON configuration ([`crate::config`]):
/// `{"fields": {"name": "float64" | "int64"}, "json": bool}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "frame_meta")]
#[non_exhaustive]
pub struct FrameMetaSpec {
    /// The numeric fields: each name (the array's name under `frame_meta/`) and its
    /// type, `"float64"` or `"int64"`.
    #[serde(deserialize_with = "crate::de::meta_fields")]
    #[schemars(with = "std::collections::BTreeMap<String, MetaTypeName>")]
    fields: Vec<(String, MetaType)>,
    /// Whether a free JSON object is stored per frame as well.
    json: bool,
}

/// The text forms of [`MetaType`] in a JSON configuration (for the schema).
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
// Never built: it only names the text forms in the schema.
#[allow(dead_code)]
enum MetaTypeName {
    Float64,
    Int64,
}

impl FrameMetaSpec {
    /// No fields, no JSON.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a numeric field (its name is the array's name under `frame_meta/`).
    #[must_use]
    pub fn field(mut self, name: impl Into<String>, kind: MetaType) -> Self {
        self.fields.push((name.into(), kind));
        self
    }

    /// Stores a free JSON object per frame as well.
    #[must_use]
    pub fn json(mut self, on: bool) -> Self {
        self.json = on;
        self
    }

    /// The numeric fields, in order.
    pub fn fields(&self) -> &[(String, MetaType)] {
        &self.fields
    }

    /// Whether a JSON object is stored per frame.
    pub fn has_json(&self) -> bool {
        self.json
    }

    /// Checks field names: non-empty, no `/`, not starting with `.`, not `json*` (the
    /// JSON arrays' names), no two alike.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (name, _) in &self.fields {
            if name.contains('/')
                || name.starts_with("json")
                || crate::store::bad_node_name(name).is_some()
            {
                return Err(format!(
                    "field name {name:?} is not a plain array name (nor json*)"
                ));
            }
            if !seen.insert(name) {
                return Err(format!("field {name:?} is given twice"));
            }
        }
        Ok(())
    }
}

/// One numeric value of a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum MetaValue {
    /// For a `Float64` field (an integer is accepted too).
    Float(f64),
    /// For an `Int64` field.
    Int(i64),
}

impl From<f64> for MetaValue {
    fn from(v: f64) -> Self {
        MetaValue::Float(v)
    }
}

impl From<i64> for MetaValue {
    fn from(v: i64) -> Self {
        MetaValue::Int(v)
    }
}

/// The metadata of one frame, for [`Writer::push_with`](crate::Writer::push_with).
///
/// ```
/// use zarrstream::FrameMeta;
/// let meta = FrameMeta::new()
///     .value("timestamp", 12.034)
///     .value("frame_counter", 17i64)
///     .with_json(serde_json::json!({"shutter": "open"}));
/// # let _ = meta;
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameMeta {
    pub(crate) values: BTreeMap<String, MetaValue>,
    pub(crate) json: Option<Value>,
}

impl FrameMeta {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the numeric field `name` for this frame.
    #[must_use]
    pub fn value(mut self, name: impl Into<String>, value: impl Into<MetaValue>) -> Self {
        self.values.insert(name.into(), value.into());
        self
    }

    /// The metadata described by a JSON object `{"values": {"name": number, …}, "json":
    /// any}` (both keys optional), as the C API and the Python package pass it: an
    /// integer number is a [`MetaValue::Int`], any other a [`MetaValue::Float`].
    ///
    /// ```
    /// use zarrstream::FrameMeta;
    /// let meta = FrameMeta::from_json(&serde_json::json!(
    ///     {"values": {"timestamp": 0.5, "counter": 7}, "json": {"laser": "488"}}))?;
    /// assert_eq!(meta, FrameMeta::new().value("timestamp", 0.5).value("counter", 7i64)
    ///     .with_json(serde_json::json!({"laser": "488"})));
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn from_json(doc: &Value) -> Result<Self, crate::Error> {
        Self::from_value(doc.clone())
    }

    /// [`from_json`](Self::from_json), taking the document (the bindings' path: the
    /// frame's free JSON object is moved into the metadata, not copied).
    pub fn from_value(doc: Value) -> Result<Self, crate::Error> {
        let bad = |field: &str, reason: &str| crate::Error::FrameMeta {
            field: field.to_string(),
            reason: reason.to_string(),
        };
        let Value::Object(object) = doc else {
            return Err(bad("(all)", "is not a JSON object"));
        };
        let mut meta = FrameMeta::new();
        for (key, value) in object {
            match key.as_str() {
                "values" => {
                    let Some(values) = value.as_object() else {
                        return Err(bad("values", "is not an object of numbers"));
                    };
                    for (name, v) in values {
                        let v = match (v.as_i64(), v.as_f64()) {
                            (Some(i), _) => MetaValue::Int(i),
                            (None, Some(f)) => MetaValue::Float(f),
                            _ => return Err(bad(name, "is not a number")),
                        };
                        meta.values.insert(name.clone(), v);
                    }
                }
                "json" => meta.json = Some(value),
                other => return Err(bad(other, "is not \"values\" or \"json\"")),
            }
        }
        Ok(meta)
    }

    /// Sets the frame's free JSON object.
    #[must_use]
    pub fn with_json(mut self, json: Value) -> Self {
        self.json = Some(json);
        self
    }
}
