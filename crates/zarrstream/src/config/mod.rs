//! A writer or a recording described by one JSON object, for the bindings (the C API's
//! `config_json`, the Python package's keyword arguments).
//!
//! The object is made of sections, each deserialized by the library type it configures,
//! so every default is the Rust API's own and a key in the wrong section is refused by
//! construction (the error names the key's place: `writer.sikn: unknown field …`):
//!
//! | section | type | |
//! |---|---|---|
//! | `array` | [`ArraySpecBuilder`] | shape, chunks, shards, data type, codec, attributes |
//! | `writer` | [`WriterOptions`] | threads, sink, buffers, durability, packing, … |
//! | `remote` | [`RemoteOptions`] | staging and upload of an object-store destination |
//! | `ome` | [`Ome`] settings | present = an OME-Zarr image ([`Writer::create_ome`]) |
//! | `frame_meta` | [`FrameMetaSpec`] | `{"fields": {"name": "float64" \| "int64"}, "json": bool}` |
//!
//! Every duration is a number of milliseconds, in a key ending in `_ms`. Enumerations
//! take their text forms (`"zstd:3"`, `"morton"`, …), parsed by the types' `FromStr`.
//! The JSON Schema of both forms is `docs/config.schema.json`, generated from these types
//! ([`schema`]).
//!
//! ```
//! use zarrstream::config::Config;
//! let parsed = Config::parse(
//!     r#"{"array": {"shape": [0, 64, 64], "chunk_shape": [1, 32, 32],
//!                   "shard_shape": [4, 64, 64], "codec": "zstd:3"},
//!         "writer": {"threads": 2}}"#,
//! )?
//! .into_parsed()?;
//! assert_eq!(parsed.spec.frame_bytes(), 64 * 64 * 2);
//! assert_eq!(parsed.options.threads, 2);
//! assert!(parsed.deprecated.is_none());
//! # Ok::<(), zarrstream::config::ConfigError>(())
//! ```
//!
//! The flat form of release 0.1 (every key at the top level, `upload_timeout` in seconds)
//! is still read for one release: its keys are split into the sections by the sections'
//! own field lists, and the result carries a deprecation notice (`deprecated`), which the
//! C API prints once to stderr.

mod schema;

pub use schema::{schema, schema_text};
use std::path::Path;

use crate::de::fields_of;
use crate::remote::RemoteOptions;
use crate::{
    ArrayConfig, ArraySpec, ArraySpecBuilder, FrameMetaSpec, Ome, OmeError, Plate, PlateError,
    Recording, SpecError, Writer, WriterOptions,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Why `config_json` was rejected before the library saw it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not UTF-8.
    #[error("config_json is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// Not JSON, not an object, an unknown key, or a value of the wrong type (the message
    /// starts with the key's place, `writer.sink: …`).
    #[error("config_json: {0}")]
    Json(#[from] serde_json::Error),
    /// A value of the right type that names nothing the library knows.
    #[error("config_json: {key}: {message}")]
    Value {
        /// The key.
        key: &'static str,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// The array specification is impossible (the builder's own error).
    #[error("invalid array specification: {0}")]
    Spec(#[from] SpecError),
    /// An OME option is invalid (the library's own error).
    #[error("invalid OME-Zarr options: {0}")]
    Ome(#[from] OmeError),
    /// A plate's layout is invalid (the library's own error).
    #[error("invalid plate: {0}")]
    Plate(#[from] PlateError),
}

/// What a flat (release 0.1) configuration is told.
pub const FLAT_DEPRECATED: &str = "a flat config_json (every key at the top level) is \
    deprecated and will be refused in a later release: give the keys in their sections, \
    {\"array\": {…}, \"writer\": {…}, \"remote\": {…}, \"ome\": {…}, \"frame_meta\": {…}} \
    (see docs/config.schema.json); durations are milliseconds (upload_timeout_ms)";

/// A writer's configuration: the sections of one array and its writer.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "writer_config")]
pub struct Config {
    /// The array: shape, chunks, shards, data type, codec, attributes.
    array: ArraySpecBuilder,
    /// The writer's options.
    writer: WriterOptions,
    /// The staging and upload of an object-store destination.
    remote: RemoteOptions,
    /// Present: the array is level 0 of an OME-Zarr image with these settings.
    ome: Option<Ome>,
    /// Per-frame metadata stored beside the array.
    frame_meta: Option<FrameMetaSpec>,
    #[serde(skip)]
    deprecated: Option<String>,
}

/// What `config_json` asks for, in the library's types.
#[derive(Debug)]
#[non_exhaustive]
pub struct Parsed {
    /// The array.
    pub spec: ArraySpec,
    /// The writer's options.
    pub options: WriterOptions,
    /// OME-Zarr image options; `None` for a plain array.
    pub ome: Option<Ome>,
    /// Set when the configuration used a deprecated form: what to tell the user.
    pub deprecated: Option<String>,
}

impl Config {
    /// Parses the text of `config_json`: the sectioned form, or the deprecated flat one.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let Value::Object(top) = serde_json::from_str::<Value>(text)? else {
            return Err(not_an_object());
        };
        let (top, flat) = if top.keys().all(|k| WRITER_SECTIONS.contains(&k.as_str())) {
            (top, false)
        } else {
            (split_flat(top, &FLAT_WRITER)?, true)
        };
        let (top, renamed) = name_axes(top);
        let mut config: Config = if flat || renamed {
            from_value(Value::Object(top))?
        } else {
            // From the text again: serde then refuses duplicate keys and says where.
            from_text(text)?
        };
        config.deprecated = flat.then(|| FLAT_DEPRECATED.to_string());
        Ok(config)
    }

    /// Builds the library's values from the sections (every check of the builders).
    pub fn into_parsed(self) -> Result<Parsed, ConfigError> {
        let spec = self.array.build()?;
        let mut options = self.writer;
        options.remote = self.remote;
        options.frame_meta = self.frame_meta;
        Ok(Parsed {
            spec,
            options,
            ome: self.ome,
            deprecated: self.deprecated,
        })
    }
}

/// The keywords the Python package's `Writer` and `Recording` take are the keys of
/// these sections: `(section, keys)` for `array`, `writer` and `remote`, each key as the
/// section's type reads it.
pub fn section_keys() -> [(&'static str, &'static [&'static str]); 3] {
    [
        ("array", fields_of::<ArraySpecBuilder>()),
        ("writer", fields_of::<WriterOptions>()),
        ("remote", fields_of::<RemoteOptions>()),
    ]
}

/// The sections of a writer's configuration.
const WRITER_SECTIONS: &[&str] = &["array", "writer", "remote", "ome", "frame_meta"];

fn not_an_object() -> ConfigError {
    ConfigError::Value {
        key: "(top level)",
        message: "not a JSON object".into(),
    }
}

/// `T` from JSON text, an error naming the key's place (`writer.sink: …`).
fn from_text<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let t = serde_path_to_error::deserialize(&mut de).map_err(located)?;
    de.end()?;
    Ok(t)
}

/// `T` from a JSON value, an error naming the key's place.
fn from_value<T: DeserializeOwned>(v: Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(v).map_err(located)
}

fn located(e: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if path == "." || path.is_empty() {
        ConfigError::Json(inner)
    } else {
        ConfigError::Json(serde::de::Error::custom(format!("{path}: {inner}")))
    }
}

/// Replaces the dimension names in `writer.acquisition_order` by the axis numbers they
/// have in `array.dimension_names` (a name not found is left for serde to refuse);
/// `true` when one was replaced.
fn name_axes(mut top: Map<String, Value>) -> (Map<String, Value>, bool) {
    let names: Vec<String> = top
        .get("array")
        .and_then(|a| a.get("dimension_names"))
        .and_then(|n| serde_json::from_value(n.clone()).ok())
        .unwrap_or_default();
    let mut renamed = false;
    if let Some(Value::Array(order)) = top
        .get_mut("writer")
        .and_then(|w| w.get_mut("acquisition_order"))
    {
        for axis in order {
            if let Value::String(n) = axis
                && let Some(i) = names.iter().position(|d| d == n)
            {
                *axis = Value::from(i);
                renamed = true;
            }
        }
    }
    (top, renamed)
}

/// Where the keys of a flat object go.
struct Flat {
    /// Keys kept where they are (sections, or the envelope's own keys).
    keep: &'static [&'static str],
    /// The array keys: into `array`, or refused with this advice.
    array: Result<(), &'static str>,
    /// The writer and remote keys: into their sections, or refused with this advice.
    options: Result<(), &'static str>,
}

const FLAT_WRITER: Flat = Flat {
    keep: &["ome", "frame_meta"],
    array: Ok(()),
    options: Ok(()),
};

const FLAT_RECORDING: Flat = Flat {
    keep: &["attributes", "arrays", "plate", "image", "frame_meta"],
    array: Err("is an array key; give it in each entry of `arrays`"),
    options: Ok(()),
};

const FLAT_ARRAY: Flat = Flat {
    keep: &["key", "ome", "frame_meta"],
    array: Ok(()),
    options: Err("is a recording option; set it at the top level"),
};

/// The sectioned form of a flat object: each key moved into the section whose type has a
/// field of that name (`upload_timeout`, in seconds, becomes `upload_timeout_ms`); a key
/// no section knows stays, for serde to refuse by name.
fn split_flat(flat: Map<String, Value>, place: &Flat) -> Result<Map<String, Value>, ConfigError> {
    fn put(out: &mut Map<String, Value>, section: &str, key: String, value: Value) {
        if let Value::Object(m) = out
            .entry(section)
            .or_insert_with(|| Value::Object(Map::new()))
        {
            m.insert(key, value);
        }
    }
    let mut out = Map::new();
    for (key, value) in flat {
        let k = key.as_str();
        let known = |fields: &[&str]| fields.contains(&k);
        if place.keep.contains(&k) {
            out.insert(key, value);
        } else if known(fields_of::<ArraySpecBuilder>()) {
            place.array.map_err(|m| moved(k, m))?;
            put(&mut out, "array", key, value);
        } else if known(fields_of::<WriterOptions>()) {
            place.options.map_err(|m| moved(k, m))?;
            put(&mut out, "writer", key, value);
        } else if k == "upload_timeout" {
            place.options.map_err(|m| moved(k, m))?;
            let ms = match value.as_f64() {
                Some(s) => Value::from(s * 1e3),
                None => value,
            };
            put(&mut out, "remote", "upload_timeout_ms".into(), ms);
        } else if known(fields_of::<RemoteOptions>()) {
            place.options.map_err(|m| moved(k, m))?;
            put(&mut out, "remote", key, value);
        } else {
            out.insert(key, value);
        }
    }
    Ok(out)
}

fn moved(key: &str, advice: &str) -> ConfigError {
    ConfigError::Json(serde::de::Error::custom(format!("{key:?} {advice}")))
}

/// A plate's layout and the image every field of view is (the `plate` and `image` keys
/// of [`RecordingConfig`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct PlateConfig {
    /// The layout, checked.
    pub plate: Plate,
    /// Level 0 of every field image.
    pub spec: ArraySpec,
    /// The OME settings of every field image.
    pub ome: Ome,
}

/// The [`Plate`] a `plate` object describes (the keys of [`RecordingConfig`]'s
/// `plate`), its layout checked: for bindings that need the plate's images before (or
/// without) making the recording.
///
/// ```
/// let plate = zarrstream::config::plate_from_json(r#"{"rows": 2, "columns": 3, "fields": 2}"#)?;
/// assert_eq!(plate.images()?.len(), 12);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plate_from_json(text: &str) -> Result<Plate, ConfigError> {
    let plate: Plate = from_text(text)?;
    plate.validate()?;
    Ok(plate)
}

/// A [`Recording`] described by one JSON object: the sections `writer`, `remote` and
/// `frame_meta` of [`Config`] shared by every array (`frame_meta` there is every array's
/// default), `attributes` for the root group, and `arrays`, a list of objects each with a
/// `key` and the array's own sections `array`, `ome` and `frame_meta`. A key in the wrong
/// place is refused by construction.
///
/// An OME-Zarr high-content screening plate ([`Recording::create_plate`]) gives `plate`
/// and `image` instead of `arrays`:
///
/// - `plate`: `rows` and `columns` (lists of names, or counts: `2` is `["A", "B"]`, `3`
///   is `["1", "2", "3"]`), `wells` (`["A/1", "B/3"]`, in the order visited; default
///   every well, row by row), `fields` (per well and acquisition, default 1), `name`,
///   `acquisitions` (`[{"id": 0, "name": "…", "description": "…", "start_time": s,
///   "end_time": s}]`, times in seconds since the Unix epoch). A layout the library
///   refuses is [`ConfigError::Plate`].
/// - `image`: the sections `array`, `ome` (whose settings default to `Ome::new()`'s) and
///   `frame_meta` of every field image.
///
/// The flat form of release 0.1 (writer options at the top level, array keys in each
/// entry) is still read, with [`deprecated`](Self::deprecated) set.
///
/// ```
/// use zarrstream::config::RecordingConfig;
/// let config = RecordingConfig::parse(
///     r#"{"writer": {"threads": 2}, "attributes": {"experiment": "E12"},
///         "arrays": [
///           {"key": "cam0", "array": {"shape": [0, 64, 64], "chunk_shape": [1, 64, 64],
///                                     "shard_shape": [8, 64, 64]}},
///           {"key": "cam1", "array": {"shape": [0, 32, 32], "chunk_shape": [1, 32, 32],
///                                     "shard_shape": [8, 32, 32], "codec": "zstd:1"}}]}"#,
/// )?;
/// assert_eq!(config.arrays.len(), 2);
/// assert_eq!(config.options.threads, 2);
/// # Ok::<(), zarrstream::config::ConfigError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct RecordingConfig {
    /// The arrays, in the order given (empty for a plate: its field images are made
    /// from [`plate`](Self::plate)).
    pub arrays: Vec<ArrayConfig>,
    /// The options shared by every array.
    pub options: WriterOptions,
    /// Attributes set on the root group once it is created.
    pub attributes: Map<String, Value>,
    /// A high-content screening plate, when `plate` was given.
    pub plate: Option<PlateConfig>,
    /// Set when the configuration used a deprecated form: what to tell the user.
    pub deprecated: Option<String>,
}

/// The sectioned form of a recording.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "recording_config")]
struct RecordingKeys {
    /// The options shared by every array.
    writer: WriterOptions,
    /// The staging and upload of an object-store destination.
    remote: RemoteOptions,
    /// Every array's default per-frame metadata.
    frame_meta: Option<FrameMetaSpec>,
    /// Set on the root group.
    attributes: Map<String, Value>,
    /// The arrays, in order (not with `plate`).
    arrays: Option<Vec<ArrayKeys>>,
    /// A high-content screening plate, whose field images are the arrays.
    plate: Option<Plate>,
    /// With `plate`: the sections of every field image.
    image: Option<ImageKeys>,
}

/// One entry of a recording's `arrays`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "recording_array")]
struct ArrayKeys {
    /// The array's relative `/` path under the root.
    key: String,
    /// The array.
    #[serde(default)]
    array: ArraySpecBuilder,
    /// Present: the array is level 0 of an OME-Zarr image with these settings.
    #[serde(default)]
    ome: Option<Ome>,
    /// The array's per-frame metadata (replaces the recording's).
    #[serde(default)]
    frame_meta: Option<FrameMetaSpec>,
}

/// A plate's field image.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "plate_image")]
struct ImageKeys {
    /// Level 0 of every field image.
    array: ArraySpecBuilder,
    /// The OME settings of every field image (default `Ome::new()`'s).
    ome: Option<Ome>,
    /// The per-frame metadata of every field image.
    frame_meta: Option<FrameMetaSpec>,
}

/// A recording's object in its sectioned form, and whether it was flat.
fn recording_sections(top: Map<String, Value>) -> Result<(Map<String, Value>, bool), ConfigError> {
    let sectioned =
        |m: &Map<String, Value>, fields: &[&str]| m.keys().all(|k| fields.contains(&k.as_str()));
    let mut flat = false;
    let mut top = if sectioned(&top, fields_of::<RecordingKeys>()) {
        top
    } else {
        flat = true;
        split_flat(top, &FLAT_RECORDING)?
    };
    if let Some(Value::Array(entries)) = top.get_mut("arrays") {
        for entry in entries {
            if let Value::Object(m) = entry
                && !sectioned(m, fields_of::<ArrayKeys>())
            {
                flat = true;
                *m = split_flat(std::mem::take(m), &FLAT_ARRAY)?;
            }
        }
    }
    if let Some(Value::Object(m)) = top.get_mut("image")
        && !sectioned(m, fields_of::<ImageKeys>())
    {
        flat = true;
        *m = split_flat(std::mem::take(m), &FLAT_ARRAY)?;
    }
    Ok((top, flat))
}

impl RecordingConfig {
    /// Parses and checks the text of a recording's configuration (sectioned, or the
    /// deprecated flat form).
    pub fn parse(text: &str) -> Result<RecordingConfig, ConfigError> {
        let Value::Object(top) = serde_json::from_str::<Value>(text)? else {
            return Err(not_an_object());
        };
        let (top, flat) = recording_sections(top)?;
        let keys: RecordingKeys = if flat {
            from_value(Value::Object(top))?
        } else {
            from_text(text)?
        };
        if keys.plate.is_none() && keys.image.is_some() {
            return Err(ConfigError::Value {
                key: "image",
                message: "is the field image of a plate: give `plate` too, or use `arrays`".into(),
            });
        }
        let arrays = match (keys.arrays, &keys.plate) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Value {
                    key: "arrays",
                    message: "a plate's arrays are its field images: give `image` (the \
                              sections of every field image), not `arrays`"
                        .into(),
                });
            }
            (None, Some(_)) => Vec::new(),
            (Some(a), None) if !a.is_empty() => a,
            _ => {
                return Err(ConfigError::Value {
                    key: "arrays",
                    message: "a non-empty list of array objects is required".into(),
                });
            }
        };
        let mut options = keys.writer;
        options.remote = keys.remote;
        options.frame_meta = keys.frame_meta;
        let arrays = arrays
            .into_iter()
            .map(|a| {
                let mut array = ArrayConfig::new(a.key, a.array.build()?);
                if let Some(ome) = a.ome {
                    array = array.ome(ome);
                }
                if let Some(m) = a.frame_meta.or_else(|| options.frame_meta.clone()) {
                    array = array.frame_meta(m);
                }
                Ok(array)
            })
            .collect::<Result<_, ConfigError>>()?;
        let plate = match keys.plate {
            None => None,
            Some(plate) => {
                plate.validate()?;
                let Some(image) = keys.image else {
                    return Err(ConfigError::Value {
                        key: "image",
                        message: "a plate needs `image`, the sections of every field image".into(),
                    });
                };
                let spec = image.array.build()?;
                if let Some(m) = image.frame_meta {
                    options.frame_meta = Some(m);
                }
                Some(PlateConfig {
                    plate,
                    spec,
                    ome: image.ome.unwrap_or_default(),
                })
            }
        };
        Ok(RecordingConfig {
            arrays,
            options,
            attributes: keys.attributes,
            plate,
            deprecated: flat.then(|| FLAT_DEPRECATED.to_string()),
        })
    }

    /// The memory the recording [`create`](Self::create) would make will use at most
    /// ([`Recording::estimate_memory`]).
    pub fn estimate_memory(&self) -> crate::Result<crate::MemoryEstimate> {
        match &self.plate {
            Some(p) => Recording::estimate_plate_memory(&p.plate, &p.spec, &p.ome, &self.options),
            None => Recording::estimate_memory(&self.arrays, &self.options),
        }
    }

    /// Creates the recording at `root` (a plate's, when `plate` was given) and sets the
    /// root group's attributes.
    pub fn create(self, root: &Path) -> crate::Result<Recording> {
        let rec = match self.plate {
            Some(p) => Recording::create_plate(root, &p.plate, p.spec, &p.ome, self.options)?,
            None => Recording::create(root, self.arrays, self.options)?,
        };
        for (name, value) in self.attributes {
            rec.set_root_attribute(&name, value)?;
        }
        Ok(rec)
    }
}

impl Parsed {
    /// Creates the writer at `path`: [`Writer::create_ome`] when an `ome` object was
    /// given, [`Writer::create`] otherwise.
    pub fn create(self, path: &Path) -> crate::Result<Writer> {
        match &self.ome {
            Some(ome) => Writer::create_ome(path, self.spec, ome, self.options),
            None => Writer::create(path, self.spec, self.options),
        }
    }

    /// The memory the writer [`create`](Self::create) would make will use at most:
    /// [`estimate_memory_ome`](crate::estimate_memory_ome) when an `ome` object was
    /// given, [`estimate_memory`](crate::estimate_memory) otherwise.
    pub fn estimate_memory(&self) -> crate::Result<crate::MemoryEstimate> {
        match &self.ome {
            Some(ome) => crate::estimate_memory_ome(&self.spec, ome, &self.options),
            None => crate::estimate_memory(&self.spec, &self.options),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Acquisition, AcquisitionOrder, Backpressure, ChunkOrder, Codec, DataType, Downsample,
        Durability, IndexLocation, Levels, Omero, OmeroChannel, Packing, SinkChoice, SpaceUnit,
        TimeUnit, Window,
    };
    use std::time::Duration;

    const BASE: &str =
        r#""shape": [0, 64, 64], "chunk_shape": [1, 32, 32], "shard_shape": [4, 64, 64]"#;

    /// BASE's array with the array keys `array` added, and the other sections `rest`.
    fn parse_with(array: &str, rest: &str) -> Result<Parsed, ConfigError> {
        let sep = |s: &str| if s.is_empty() { "" } else { ", " };
        let text = format!(
            "{{\"array\": {{{BASE}{}{array}}}{}{rest}}}",
            sep(array),
            sep(rest)
        );
        Config::parse(&text)?.into_parsed()
    }

    /// BASE's array and the sections `rest`.
    fn parse(rest: &str) -> Result<Parsed, ConfigError> {
        parse_with("", rest)
    }

    fn err(array: &str) -> String {
        parse_with(array, "").unwrap_err().to_string()
    }

    #[test]
    fn defaults_are_the_rust_apis() {
        let p = parse("").unwrap();
        let want = ArraySpec::builder()
            .shape([0, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
            .build()
            .unwrap();
        assert_eq!(p.spec, want);
        assert_eq!(p.options, WriterOptions::default());
        assert!(p.ome.is_none());
    }

    #[test]
    fn acquisition_orders_by_number_or_name() {
        let base = r#""array": {"shape": [4, 2, 3, 64, 64], "chunk_shape": [1, 1, 1, 32, 32],
            "shard_shape": [1, 1, 1, 64, 64], "dimension_names": ["t", "c", "z", "y", "x"]}"#;
        let parse = |extra: &str| Config::parse(&format!("{{{base}, {extra}}}"))?.into_parsed();
        let p = parse(r#""writer": {"acquisition_order": ["c", "t", 2], "max_open_shards": 7}"#)
            .unwrap();
        assert_eq!(
            p.options.acquisition_order,
            Some(AcquisitionOrder::new([1, 0, 2]))
        );
        assert_eq!(p.options.max_open_shards, 7);
        let e = parse(r#""writer": {"acquisition_order": ["c", "q", "z"]}"#).unwrap_err();
        assert!(e.to_string().contains("\"q\" is not one of"), "{e}");
        assert!(e.to_string().contains("writer.acquisition_order"), "{e}");
    }

    #[test]
    fn every_key_reaches_the_library() {
        let p = parse_with(
            r#""dtype": "float32", "fill_value": "NaN", "dimension_names": ["t", "y", "x"],
               "codec": "zstd:3", "crc32c": false, "index_location": "start",
               "attributes": {"instrument": "scope 1"}"#,
            r#""writer": {"threads": 3, "pin_threads": false, "background_nice": 0,
               "sink": "mmap", "pool_frames": 9, "spare_groups": 2, "backpressure": "drop",
               "durability": {"periodic": {"interval_ms": 250}}, "packing": "sparse",
               "chunk_order": "morton", "overwrite": true}"#,
        )
        .unwrap();
        let s = &p.spec;
        assert_eq!(s.dtype(), DataType::Float32);
        assert!(s.fill_value().is_nan());
        assert_eq!(s.dimension_names().unwrap(), ["t", "y", "x"]);
        assert_eq!(s.codec(), Codec::zstd(3));
        assert!(!s.crc32c());
        assert_eq!(s.index_location(), IndexLocation::Start);
        let o = p.options;
        let want = WriterOptions::default()
            .threads(3)
            .pin_threads(false)
            .background_nice(0)
            .sink(SinkChoice::Mmap)
            .pool_frames(9)
            .spare_groups(2)
            .backpressure(Backpressure::Drop)
            .durability(Durability::Periodic {
                interval: Duration::from_millis(250),
            })
            .packing(Packing::Sparse)
            .chunk_order(ChunkOrder::Morton)
            .overwrite(true);
        assert_eq!(o, want);
        assert_eq!(
            parse(r#""writer": {"durability": "none"}"#)
                .unwrap()
                .options
                .durability,
            Durability::None
        );
        assert_eq!(
            parse_with(r#""fill_value": 7"#, "")
                .unwrap()
                .spec
                .fill_value(),
            7.0
        );
        assert_eq!(
            parse_with(r#""dtype": "u8""#, "").unwrap().spec.dtype(),
            DataType::UInt8
        );
        assert_eq!(
            parse_with(r#""codec": "none""#, "").unwrap().spec.codec(),
            Codec::none()
        );
        assert_eq!(
            parse(r#""writer": {"sink": "direct"}"#)
                .unwrap()
                .options
                .sink,
            SinkChoice::Direct
        );
    }

    #[test]
    fn remote_keys_make_the_same_options_as_the_builder() {
        let p = parse(
            r#""remote": {"staging_dir": "/scratch/staging", "staging_budget": 4294967296,
               "part_size": 16777216, "uploads_in_flight": 8, "upload_timeout_ms": 2500,
               "part": 1, "coordinate": true,
               "store_options": {"aws_endpoint": "http://127.0.0.1:3900",
                                 "aws_region": "garage"}}"#,
        )
        .unwrap();
        let want = RemoteOptions::default()
            .staging_dir("/scratch/staging")
            .staging_budget(4 << 30)
            .part_size(16 << 20)
            .uploads_in_flight(8)
            .upload_timeout(Duration::from_millis(2500))
            .part(1)
            .coordinate(true)
            .store_option("aws_endpoint", "http://127.0.0.1:3900")
            .store_option("aws_region", "garage");
        assert_eq!(p.options.remote, want);
        assert_eq!(p.options, WriterOptions::default().remote(want));
        // A recording takes them in its own `remote`, shared by every array.
        let c = RecordingConfig::parse(
            r#"{"remote": {"staging_budget": 1024, "store_options": {"aws_region": "eu"}},
                "arrays": [{"key": "a", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                            "shard_shape": [2, 8, 8]}}]}"#,
        )
        .unwrap();
        let want = RemoteOptions::default()
            .staging_budget(1024)
            .store_option("aws_region", "eu");
        assert_eq!(c.options.remote, want);
        let e = RecordingConfig::parse(
            r#"{"arrays": [{"key": "a", "part_size": 5242880, "shape": [0, 8, 8]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"part_size\" is a recording option"), "{e}");
        let e = RecordingConfig::parse(
            r#"{"arrays": [{"key": "a", "remote": {"part_size": 5242880}}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("arrays[0]") && e.contains("unknown field `remote`"),
            "{e}"
        );
    }

    #[test]
    fn ome_keys_make_the_same_ome_as_the_builder() {
        let p = Config::parse(
            r#"{"array": {"shape": [0, 2, 64, 64], "chunk_shape": [1, 1, 32, 32],
                "shard_shape": [4, 1, 64, 64]},
                "ome": {"name": "run", "pixel_size": [0.5, 0.25], "frame_interval_ms": 20,
                        "space_unit": "nanometer", "time_unit": "second",
                        "channels": ["GFP", "RFP"], "omero": "auto"}}"#,
        )
        .unwrap()
        .into_parsed()
        .unwrap();
        let want = Ome::new()
            .name("run")
            .pixel_size(0.5, 0.25)
            .frame_interval(Duration::from_millis(20))
            .space_unit(SpaceUnit::Nanometer)
            .time_unit(TimeUnit::Second)
            .channels(["GFP", "RFP"])
            .omero(Omero::Auto);
        assert_eq!(p.ome.unwrap(), want);
        let pyramid = Config::parse(
            r#"{"ome": {"levels": 3, "downsample": "max", "downsample_z": true,
                        "level_lz4_acceleration": 9}}"#,
        )
        .unwrap();
        let want = Ome::new()
            .levels(Levels::Count(3))
            .downsample(Downsample::Max)
            .downsample_z(true)
            .level_lz4_acceleration(9);
        assert_eq!(pyramid.ome.unwrap(), want);
        let auto = Config::parse(r#"{"ome": {"levels": "auto"}}"#).unwrap();
        let want = Ome::new().levels(Levels::Auto);
        assert_eq!(auto.ome.unwrap(), want);
        let o = Config::parse(
            r##"{"ome": {"z_step": 2, "omero": {"channels": [{"label": "a", "color": "FF0000",
                 "window": {"min": 0, "max": 10, "start": 1, "end": 9}, "active": true}]}}}"##,
        )
        .unwrap();
        let ome = o.ome.unwrap();
        let want = Ome::new()
            .z_step(2.0)
            .omero(Omero::Channels(vec![OmeroChannel::new(
                "a",
                "FF0000",
                Window {
                    min: 0.0,
                    max: 10.0,
                    start: 1.0,
                    end: 9.0,
                },
            )]));
        assert_eq!(ome, want);
        // A channel without a window, and a window for every channel of `auto`.
        let o = Config::parse(
            r##"{"ome": {"omero": {"channels": [{"label": "a", "color": "FF0000",
                 "active": false}]}}}"##,
        )
        .unwrap();
        let want = Ome::new().omero(Omero::Channels(vec![
            OmeroChannel::from_data("a", "FF0000").active(false),
        ]));
        assert_eq!(o.ome.unwrap(), want);
        let o = Config::parse(
            r#"{"ome": {"omero": {"window": {"min": 0, "max": 255, "start": 3, "end": 99}}}}"#,
        )
        .unwrap();
        let w = Window {
            min: 0.0,
            max: 255.0,
            start: 3.0,
            end: 99.0,
        };
        let want = Ome::new().omero(Omero::AutoWindow(w));
        assert_eq!(o.ome.unwrap(), want);
    }

    /// BASE's array with the keys of `extra` (a JSON object's inside) added to (or
    /// replacing those of) `section`.
    fn with(section: &str, extra: &str) -> String {
        let base: Map<String, Value> = serde_json::from_str(&format!("{{{BASE}}}")).unwrap();
        let mut top = Map::new();
        top.insert("array".into(), Value::Object(base));
        let extra: Map<String, Value> = serde_json::from_str(&format!("{{{extra}}}")).unwrap();
        if let Value::Object(m) = top
            .entry(section)
            .or_insert_with(|| Value::Object(Map::new()))
        {
            m.extend(extra);
        }
        Value::Object(top).to_string()
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let cases = [
            // unknown keys, also inside nested objects, named with their section
            (
                "array",
                r#""shapes": [1]"#,
                "array.shapes: unknown field `shapes`",
            ),
            (
                "ome",
                r#""pixelsize": [1, 1]"#,
                "ome.pixelsize: unknown field `pixelsize`",
            ),
            (
                "writer",
                r#""durability": {"periodic": {"interval": 5}}"#,
                "writer.durability.periodic.interval: unknown field `interval`",
            ),
            // a key in the wrong section
            (
                "array",
                r#""threads": 2"#,
                "array.threads: unknown field `threads`",
            ),
            (
                "writer",
                r#""codec": "zstd:1""#,
                "writer.codec: unknown field `codec`",
            ),
            (
                "remote",
                r#""sink": "mmap""#,
                "remote.sink: unknown field `sink`",
            ),
            (
                "writer",
                r#""part": 1"#,
                "writer.part: unknown field `part`",
            ),
            (
                "writer",
                r#""frame_meta": {}"#,
                "writer.frame_meta: unknown field `frame_meta`",
            ),
            (
                "writer",
                r#""remote": {}"#,
                "writer.remote: unknown field `remote`",
            ),
            (
                "remote",
                r#""upload_timeout": 5"#,
                "remote.upload_timeout: unknown field `upload_timeout`",
            ),
            // types and names
            (
                "writer",
                r#""threads": -1"#,
                "writer.threads: invalid value: integer `-1`",
            ),
            (
                "array",
                r#""crc32c": "yes""#,
                "array.crc32c: invalid type: string \"yes\", expected a boolean",
            ),
            (
                "writer",
                r#""sink": "disk""#,
                "writer.sink: \"disk\" is not a sink (auto, mmap, pwrite, direct)",
            ),
            (
                "array",
                r#""dtype": "complex64""#,
                "array.dtype: \"complex64\" is not a data type",
            ),
            (
                "array",
                r#""codec": "gzip""#,
                "array.codec: \"gzip\" is not a codec",
            ),
            (
                "writer",
                r#""chunk_order": "hilbert""#,
                "writer.chunk_order: \"hilbert\" is not a chunk order (c, morton)",
            ),
            (
                "writer",
                r#""backpressure": "wait""#,
                "unknown variant `wait`",
            ),
            (
                "writer",
                r#""durability": "periodic""#,
                "writer.durability.periodic: invalid type: unit variant, expected struct variant",
            ),
            (
                "array",
                r#""fill_value": true"#,
                "array.fill_value: true is not a number",
            ),
            (
                "array",
                r#""dtype": "uint64", "fill_value": 9007199254740993"#,
                "array.fill_value: fill value 9007199254740993 is not exactly representable",
            ),
            (
                "writer",
                r#""durability": {"periodic": {"interval_ms": 0}}"#,
                "writer.durability.periodic.interval_ms: 0 is not a positive number",
            ),
            (
                "remote",
                r#""upload_timeout_ms": -1"#,
                "remote.upload_timeout_ms: -1 is not a number of milliseconds ≥ 0",
            ),
            (
                "remote",
                r#""store_options": {"aws_region": 5}"#,
                "invalid type: integer `5`, expected a string",
            ),
            (
                "remote",
                r#""store_options": ["aws_region", "eu"]"#,
                "invalid type: sequence, expected a map",
            ),
            ("remote", r#""staging_dir": 1"#, "invalid type: integer `1`"),
            ("remote", r#""part": -1"#, "invalid value: integer `-1`"),
            ("remote", r#""coordinate": 1"#, "expected a boolean"),
            (
                "remote",
                r#""stage_dir": "/x""#,
                "unknown field `stage_dir`",
            ),
            (
                "ome",
                r#""frame_interval_ms": -5"#,
                "frame_interval = -5 must be a positive",
            ),
            (
                "ome",
                r#""levels": "many""#,
                "ome.levels: \"many\" is not a level count or \"auto\"",
            ),
            (
                "ome",
                r#""downsample": "median""#,
                "ome.downsample: unknown downsampling method \"median\"",
            ),
            // the builder's own checks
            (
                "array",
                r#""shard_shape": [4, 64, 48]"#,
                "does not divide shard",
            ),
            (
                "array",
                r#""shape": [0, 0, 64]"#,
                "only axis 0 (the append axis) may be 0",
            ),
            (
                "array",
                r#""codec": "zstd:99""#,
                "zstd level 99 is out of range",
            ),
            (
                "array",
                r#""fill_value": -1"#,
                "fill value -1 is not representable as uint16",
            ),
        ];
        for (section, extra, want) in cases {
            let text = with(section, extra);
            let got = Config::parse(&text)
                .and_then(Config::into_parsed)
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                got.contains(want),
                "{text}\n  got: {got}\n  want: ...{want}..."
            );
        }
        let syntax = Config::parse(r#"{"array": {"shape": }}"#)
            .unwrap_err()
            .to_string();
        assert!(
            syntax.starts_with("config_json: expected value at line 1"),
            "{syntax}"
        );
        assert!(err(r#""shape": [0, 64, 64]"#).contains("duplicate field `shape`"));
        let top = Config::parse(r#"{"array": {}, "writers": {}}"#).unwrap_err();
        assert!(top.to_string().contains("unknown field `writers`"), "{top}");
        let missing = Config::parse("{}").unwrap().into_parsed().unwrap_err();
        assert_eq!(
            missing.to_string(),
            "invalid array specification: shape was not set"
        );
        let not_object = Config::parse("[[0, 64, 64], [1, 32, 32], [4, 64, 64]]");
        assert_eq!(
            not_object.unwrap_err().to_string(),
            "config_json: (top level): not a JSON object"
        );
        let empty = Config::parse("").unwrap_err().to_string();
        assert!(empty.contains("EOF while parsing"), "{empty}");
    }

    /// The flat form of 0.1, key for key the sectioned one.
    #[test]
    fn the_flat_form_parses_to_the_sectioned_result_and_warns() {
        let flat = r#"{"shape": [0, 64, 64], "chunk_shape": [1, 32, 32],
            "shard_shape": [4, 64, 64], "dtype": "uint8", "dimension_names": ["t", "y", "x"],
            "attributes": {"a": 1}, "threads": 3, "sink": "pwrite",
            "durability": {"periodic": {"interval_ms": 250}}, "acquisition_order": ["t"],
            "staging_budget": 1024, "upload_timeout": 2.5, "store_options": {"k": "v"},
            "ome": {"frame_interval_ms": 20}, "frame_meta": {"fields": {"x": "int64"}}}"#;
        let sectioned = r#"{"array": {"shape": [0, 64, 64], "chunk_shape": [1, 32, 32],
            "shard_shape": [4, 64, 64], "dtype": "uint8", "dimension_names": ["t", "y", "x"],
            "attributes": {"a": 1}},
            "writer": {"threads": 3, "sink": "pwrite",
              "durability": {"periodic": {"interval_ms": 250}}, "acquisition_order": ["t"]},
            "remote": {"staging_budget": 1024, "upload_timeout_ms": 2500,
              "store_options": {"k": "v"}},
            "ome": {"frame_interval_ms": 20}, "frame_meta": {"fields": {"x": "int64"}}}"#;
        let f = Config::parse(flat).unwrap().into_parsed().unwrap();
        let s = Config::parse(sectioned).unwrap().into_parsed().unwrap();
        assert_eq!(f.spec, s.spec);
        assert_eq!(f.options, s.options);
        assert_eq!(f.ome, s.ome);
        assert_eq!(f.options.remote.upload_timeout, Duration::from_millis(2500));
        assert_eq!(f.deprecated.as_deref(), Some(FLAT_DEPRECATED));
        assert!(s.deprecated.is_none());
        // The old error messages still name the key.
        let e = Config::parse(r#"{"sink": "disk"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("writer.sink: \"disk\" is not a sink"), "{e}");
        let e = Config::parse(r#"{"shapes": [1]}"#).unwrap_err().to_string();
        assert!(e.contains("unknown field `shapes`"), "{e}");
        let e = Config::parse(r#"{"upload_timeout": -1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("remote.upload_timeout_ms: -1000 is not"), "{e}");

        let rec_flat = r#"{"threads": 2, "part_size": 5242880, "frame_meta": {"fields": {"t": "float64"}},
            "attributes": {"p": 1},
            "arrays": [{"key": "a", "shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                        "shard_shape": [2, 8, 8], "ome": {"levels": 1}}]}"#;
        let rec_sectioned = r#"{"writer": {"threads": 2}, "remote": {"part_size": 5242880},
            "frame_meta": {"fields": {"t": "float64"}}, "attributes": {"p": 1},
            "arrays": [{"key": "a", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                        "shard_shape": [2, 8, 8]}, "ome": {"levels": 1}}]}"#;
        let f = RecordingConfig::parse(rec_flat).unwrap();
        let s = RecordingConfig::parse(rec_sectioned).unwrap();
        assert_eq!(f.options, s.options);
        assert_eq!(f.attributes, s.attributes);
        assert_eq!(f.arrays.len(), 1);
        assert_eq!(f.arrays[0].spec, s.arrays[0].spec);
        assert_eq!(f.arrays[0].ome, s.arrays[0].ome);
        assert_eq!(f.arrays[0].frame_meta, s.arrays[0].frame_meta);
        assert_eq!(f.deprecated.as_deref(), Some(FLAT_DEPRECATED));
        assert!(s.deprecated.is_none());
    }

    /// `docs/config.schema.json` is generated from the types; this holds the file to
    /// them too: every object of the schema has exactly the keys its type deserializes,
    /// and refuses others.
    #[test]
    fn the_schema_matches_the_types() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../../docs/config.schema.json")).unwrap();
        let types: [(&str, &[&str]); 10] = [
            ("writer_config", fields_of::<Config>()),
            ("recording_config", fields_of::<RecordingKeys>()),
            ("recording_array", fields_of::<ArrayKeys>()),
            ("plate_image", fields_of::<ImageKeys>()),
            ("array", fields_of::<ArraySpecBuilder>()),
            ("writer", fields_of::<WriterOptions>()),
            ("remote", fields_of::<RemoteOptions>()),
            ("ome", fields_of::<Ome>()),
            ("frame_meta", fields_of::<FrameMetaSpec>()),
            ("plate", fields_of::<Plate>()),
        ];
        for (name, fields) in types {
            let def = &schema["$defs"][name];
            let mut in_schema: Vec<&str> = def["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("$defs.{name} has no properties"))
                .keys()
                .map(String::as_str)
                .collect();
            let mut in_type = fields.to_vec();
            in_schema.sort_unstable();
            in_type.sort_unstable();
            assert_eq!(
                in_schema, in_type,
                "docs/config.schema.json $defs.{name} differs from its Rust type: edit the \
                 schema to the type's fields"
            );
            assert_eq!(def["additionalProperties"], false, "$defs.{name}");
        }
    }

    /// The committed `docs/config.schema.json` is what the types generate now.
    #[test]
    fn the_committed_schema_is_generated_from_the_types() {
        let committed = include_str!("../../../../docs/config.schema.json");
        assert!(
            committed == schema_text(),
            "docs/config.schema.json differs from the schema the Rust types generate: \
             regenerate it with\n  cargo run -p zarrstream --example config_schema > \
             docs/config.schema.json"
        );
    }

    /// The book's examples (`json` blocks of the configuration chapter) are accepted as
    /// they are, in the sectioned form.
    #[test]
    fn the_books_examples_parse() {
        let book = include_str!("../../../../docs/book/src/reference/config.md");
        let blocks: Vec<&str> = book
            .split("```json")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .collect();
        assert!(blocks.len() >= 3, "the chapter shows its examples");
        for block in blocks {
            let top: Map<String, Value> = serde_json::from_str(block).unwrap();
            let deprecated = if top.contains_key("array") {
                let parsed = Config::parse(block).and_then(Config::into_parsed);
                parsed.unwrap_or_else(|e| panic!("{block}: {e}")).deprecated
            } else {
                let parsed = RecordingConfig::parse(block);
                parsed.unwrap_or_else(|e| panic!("{block}: {e}")).deprecated
            };
            assert!(deprecated.is_none(), "{block}");
        }
    }

    /// Each section's keys come from its type: the shim's split cannot miss a field.
    #[test]
    fn the_sections_field_lists_come_from_the_types() {
        let writer = fields_of::<WriterOptions>();
        assert!(writer.contains(&"spare_groups") && writer.contains(&"acquisition_order"));
        assert!(!writer.contains(&"remote") && !writer.contains(&"staging"));
        assert!(fields_of::<RemoteOptions>().contains(&"upload_timeout_ms"));
        assert!(fields_of::<ArraySpecBuilder>().contains(&"chunk_shape"));
    }

    #[test]
    fn a_recording_config_puts_each_key_in_its_place() {
        let arrays = r#""arrays": [
            {"key": "cam0", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
             "shard_shape": [2, 8, 8], "attributes": {"camera": 0}}},
            {"key": "cam1", "array": {"shape": [0, 4, 4], "chunk_shape": [1, 4, 4],
             "shard_shape": [2, 4, 4], "dtype": "uint8"}, "ome": {"levels": 1},
             "frame_meta": {"fields": {"x": "int64"}}}]"#;
        let c = RecordingConfig::parse(&format!(
            r#"{{"writer": {{"threads": 2, "resume": true, "existing_group": true}},
                "frame_meta": {{"fields": {{"t": "float64"}}}},
                "attributes": {{"plate": "P1"}}, {arrays}}}"#
        ))
        .unwrap();
        assert_eq!(c.options.threads, 2);
        assert!(c.options.resume && c.options.existing_group);
        assert_eq!(c.attributes["plate"], "P1");
        let [a, b] = &c.arrays[..] else {
            panic!("two arrays")
        };
        assert_eq!((a.key.as_str(), b.key.as_str()), ("cam0", "cam1"));
        assert_eq!(a.spec.frame_bytes(), 128);
        assert_eq!(a.spec.attributes["camera"], 0);
        assert!(a.ome.is_none() && b.ome.is_some());
        // The top level's frame_meta is the default; an array's own replaces it.
        assert_eq!(a.frame_meta.as_ref().unwrap().fields()[0].0, "t");
        assert_eq!(b.frame_meta.as_ref().unwrap().fields()[0].0, "x");

        let bad = |text: &str| RecordingConfig::parse(text).unwrap_err().to_string();
        assert!(bad(r#"{"writer": {"threads": 2}}"#).contains("arrays"));
        assert!(bad(r#"{"arrays": []}"#).contains("non-empty"));
        let e = bad(r#"{"array": {"shape": [0, 8, 8]}, "arrays": [{"key": "a"}]}"#);
        assert!(e.contains("unknown field `array`"), "{e}");
        // The flat form's misplaced keys are still named with where they go.
        let e = bad(r#"{"shape": [0, 8, 8], "arrays": [{"key": "a"}]}"#);
        assert!(e.contains("shape") && e.contains("each entry"), "{e}");
        let e = bad(
            r#"{"arrays": [{"key": "a", "threads": 2, "shape": [0, 8, 8],
                "chunk_shape": [1, 8, 8], "shard_shape": [2, 8, 8]}]}"#,
        );
        assert!(e.contains("\"threads\" is a recording option"), "{e}");
        let e = bad(r#"{"arrays": [{"key": "a", "writer": {"threads": 2}}]}"#);
        assert!(
            e.contains("arrays[0].writer: unknown field `writer`"),
            "{e}"
        );
        let e = bad(r#"{"arrays": [{"key": "a", "array": {"threads": 2}}]}"#);
        assert!(
            e.contains("arrays[0].array.threads: unknown field `threads`"),
            "{e}"
        );
        let e = bad(r#"{"arrays": [{"array": {"shape": [0, 8, 8]}}]}"#);
        assert!(e.contains("key"), "{e}");
        let e = bad(r#"{"arrays": [{"key": "a", "array": {"shap": [0, 8, 8]}}]}"#);
        assert!(e.contains("shap"), "{e}");
        let e = bad(r#"{"writer": {"thread": 1}, "arrays": [{"key": "a"}]}"#);
        assert!(e.contains("writer.thread: unknown field `thread`"), "{e}");
    }

    #[test]
    fn a_plate_config_makes_the_plate() {
        let image = r#""image": {"array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
            "shard_shape": [2, 8, 8]}, "ome": {"pixel_size": [0.5, 0.5]},
            "frame_meta": {"fields": {"x": "float64"}}}"#;
        let c = RecordingConfig::parse(&format!(
            r#"{{"writer": {{"threads": 2}}, "plate": {{"name": "P", "rows": 2, "columns": ["01", "02", "03"],
                "wells": ["A/01", "B/03"], "fields": 2,
                "acquisitions": [{{"id": 4, "name": "a", "description": "d",
                                   "start_time": 10, "end_time": 20}}]}}, {image}}}"#
        ))
        .unwrap();
        let p = c.plate.as_ref().unwrap();
        let want = Plate::new(["A", "B"], ["01", "02", "03"])
            .name("P")
            .wells([("A", "01"), ("B", "03")])
            .fields(2)
            .acquisitions([Acquisition::new(4)
                .name("a")
                .description("d")
                .start_time(10)
                .end_time(20)]);
        assert_eq!(p.plate, want);
        assert_eq!(p.ome, Ome::new().pixel_size(0.5, 0.5));
        assert_eq!(p.spec.frame_bytes(), 128);
        assert!(c.arrays.is_empty());
        assert_eq!(c.options.frame_meta.as_ref().unwrap().fields()[0].0, "x");

        let bad = |text: &str| RecordingConfig::parse(text).unwrap_err();
        let plate_err = |plate: &str| match bad(&format!(r#"{{"plate": {plate}, {image}}}"#)) {
            ConfigError::Plate(e) => e,
            e => panic!("{plate}: {e}"),
        };
        assert!(matches!(
            plate_err(r#"{"rows": 2, "columns": 2, "wells": ["A/1", "C/1"]}"#),
            PlateError::WellOutside { axis: "row", .. }
        ));
        assert_eq!(
            plate_err(r#"{"rows": 1, "columns": 1, "fields": 0}"#),
            PlateError::NoFields
        );
        let e = bad(&format!(
            r#"{{"plate": {{"rows": 1, "columns": 1, "wells": ["A1"]}}, {image}}}"#
        ));
        assert!(e.to_string().contains("\"A1\" is not a well path"), "{e}");
        let e = bad(r#"{"plate": {"rows": 1, "columns": 1}}"#);
        assert!(e.to_string().contains("a plate needs `image`"), "{e}");
        let e = bad(&format!(
            r#"{{"plate": {{"rows": 1, "columns": 1}}, "arrays": [], {image}}}"#
        ));
        assert!(e.to_string().contains("give `image`"), "{e}");
        let e = bad(&format!(r#"{{{image}}}"#));
        assert!(e.to_string().contains("give `plate` too"), "{e}");
        let e = bad(&format!(
            r#"{{"plate": {{"rows": 1, "columns": 1, "field": 2}}, {image}}}"#
        ));
        assert!(
            e.to_string().contains("plate.field: unknown field `field`"),
            "{e}"
        );
        let e = bad(r#"{"plate": {"rows": 1, "columns": 1}, "image": {"array": {}, "key": "x"}}"#);
        assert!(
            e.to_string().contains("image.key: unknown field `key`"),
            "{e}"
        );
    }
}
