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
mod tests;
