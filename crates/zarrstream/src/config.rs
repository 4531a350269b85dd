//! A writer described by one JSON object, for the bindings (the C API's `config_json`,
//! the Python package's keyword arguments): its keys are the names of the builder methods
//! and option fields. Only the keys given are applied, onto `ArraySpec::builder()`,
//! `WriterOptions::default()` (its [`RemoteOptions`] too, whose keys are top-level
//! options: `staging_dir`, `staging_budget`, `part_size`, `uploads_in_flight`,
//! `upload_timeout` in seconds, `part`, `coordinate`, `store_options` an object of
//! strings) and `Ome::new()`, so every default is the Rust API's own.
//! Unknown keys are errors (a misspelt option must not silently fall back to its
//! default).
//!
//! ```
//! use zarrstream::config::Config;
//! let parsed = Config::parse(
//!     r#"{"shape": [0, 64, 64], "chunk_shape": [1, 32, 32], "shard_shape": [4, 64, 64],
//!         "codec": "zstd:3", "threads": 2}"#,
//! )?
//! .into_parsed()?;
//! assert_eq!(parsed.spec.frame_bytes(), 64 * 64 * 2);
//! assert_eq!(parsed.options.threads, 2);
//! # Ok::<(), zarrstream::config::ConfigError>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::remote::RemoteOptions;
use crate::{
    Acquisition, AcquisitionOrder, ArrayConfig, ArraySpec, Backpressure, Downsample, Durability,
    FrameMetaSpec, Levels, Ome, OmeError, Omero, OmeroChannel, ParseError, Plate, PlateError,
    Recording, SpecError, Window, Writer, WriterOptions,
};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Why `config_json` was rejected before the library saw it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not UTF-8.
    #[error("config_json is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    /// Not JSON, not an object, an unknown key, or a value of the wrong type.
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

/// The whole configuration object.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    // ArraySpec::builder()
    shape: Option<Vec<u64>>,
    chunk_shape: Option<Vec<u64>>,
    shard_shape: Option<Vec<u64>>,
    dtype: Option<String>,
    fill_value: Option<Value>,
    dimension_names: Option<Vec<String>>,
    codec: Option<String>,
    crc32c: Option<bool>,
    index_location: Option<String>,
    attributes: Option<Map<String, Value>>,
    // WriterOptions
    threads: Option<usize>,
    pin_threads: Option<bool>,
    background_nice: Option<u8>,
    sink: Option<String>,
    pool_frames: Option<usize>,
    spare_groups: Option<usize>,
    backpressure: Option<BackpressureKey>,
    durability: Option<DurabilityKey>,
    packing: Option<String>,
    /// `"c"` or `"morton"`: the order of the inner chunks inside each shard file.
    chunk_order: Option<String>,
    /// The acquisition's loop order, outermost first: axis numbers, or dimension names
    /// (resolved against this object's `dimension_names`).
    acquisition_order: Option<Vec<AxisKey>>,
    max_open_shards: Option<usize>,
    overwrite: Option<bool>,
    resume: Option<bool>,
    existing_group: Option<bool>,
    /// `{"fields": {"name": "float64" | "int64", …}, "json": bool}`.
    frame_meta: Option<FrameMetaKeys>,
    // RemoteOptions: how an object-store destination (`s3://…`) is staged and uploaded
    staging_dir: Option<PathBuf>,
    staging_budget: Option<u64>,
    part_size: Option<usize>,
    uploads_in_flight: Option<usize>,
    /// Seconds (JSON has no durations; a fraction is allowed).
    upload_timeout: Option<f64>,
    part: Option<u64>,
    coordinate: Option<bool>,
    /// `object_store` configuration keys and their values (`{"aws_endpoint": "…"}`).
    store_options: Option<BTreeMap<String, String>>,
    // Ome: present = an OME-Zarr image (Writer::create_ome)
    ome: Option<OmeKeys>,
}

/// An axis, by number or by dimension name.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum AxisKey {
    Number(usize),
    Name(String),
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackpressureKey {
    Block,
    Drop,
}

/// `"shard"`, `"none"` or `{"periodic": {"interval_ms": N}}` (serde's form of the
/// Rust enum; JSON has no durations, so the interval is in milliseconds).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DurabilityKey {
    Shard,
    Periodic(PeriodicKeys),
    None,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeriodicKeys {
    interval_ms: u64,
}

/// The `frame_meta` object: the fields of `FrameMetaSpec`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameMetaKeys {
    #[serde(default)]
    fields: Map<String, Value>,
    #[serde(default)]
    json: bool,
}

/// The `ome` object: the options of `Ome`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OmeKeys {
    name: Option<String>,
    /// `[y, x]`.
    pixel_size: Option<[f64; 2]>,
    z_step: Option<f64>,
    frame_interval_ms: Option<f64>,
    space_unit: Option<String>,
    time_unit: Option<String>,
    channels: Option<Vec<String>>,
    omero: Option<OmeroKey>,
    /// A count (1 = level 0 only) or `"auto"`.
    levels: Option<Value>,
    downsample: Option<String>,
    downsample_z: Option<bool>,
    level_lz4_acceleration: Option<i32>,
}

/// `"auto"`, `{"window": {..}}` or `{"channels": [..]}`, as `Omero::Auto`,
/// `Omero::AutoWindow` and `Omero::Channels`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum OmeroKey {
    Auto,
    Window(WindowKeys),
    Channels(Vec<OmeroChannelKeys>),
}

/// A channel without `window` has its window taken from the data.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OmeroChannelKeys {
    label: String,
    color: String,
    window: Option<WindowKeys>,
    active: bool,
}

impl From<WindowKeys> for Window {
    fn from(w: WindowKeys) -> Self {
        Window {
            min: w.min,
            max: w.max,
            start: w.start,
            end: w.end,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowKeys {
    min: f64,
    max: f64,
    start: f64,
    end: f64,
}

/// What `config_json` asks for, in the library's types.
#[derive(Debug)]
pub struct Parsed {
    /// The array.
    pub spec: ArraySpec,
    /// The writer's options.
    pub options: WriterOptions,
    /// OME-Zarr image options; `None` for a plain array.
    pub ome: Option<Ome>,
}

impl Config {
    /// Parses the text of `config_json`.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        // serde would also take a struct's fields by position from a JSON array.
        let first = text.trim_start().chars().next();
        if first.is_some() && first != Some('{') {
            return Err(ConfigError::Value {
                key: "(top level)",
                message: "not a JSON object".into(),
            });
        }
        Ok(serde_json::from_str(text)?)
    }

    /// Applies the keys given onto the Rust API's defaults.
    pub fn into_parsed(mut self) -> Result<Parsed, ConfigError> {
        let spec = self.take_spec()?;
        self.name_axes(spec.dimension_names());
        let options = self.take_options()?;
        let ome = self.ome.map(OmeKeys::into_ome).transpose()?;
        Ok(Parsed { spec, options, ome })
    }

    /// Resolves the dimension names of `acquisition_order` against `names` (those
    /// found become axis numbers of the leading axes; the rest is refused later).
    fn name_axes(&mut self, names: Option<&[String]>) {
        let (Some(order), Some(names)) = (self.acquisition_order.as_mut(), names) else {
            return;
        };
        for key in order {
            if let AxisKey::Name(n) = key
                && let Some(i) = names.iter().position(|d| d == n)
            {
                *key = AxisKey::Number(i);
            }
        }
    }

    /// The array specification from the spec keys (taken out).
    fn take_spec(&mut self) -> Result<ArraySpec, ConfigError> {
        let mut b = ArraySpec::builder();
        if let Some(v) = self.shape.take() {
            b = b.shape(v);
        }
        if let Some(v) = self.chunk_shape.take() {
            b = b.chunk_shape(v);
        }
        if let Some(v) = self.shard_shape.take() {
            b = b.shard_shape(v);
        }
        if let Some(v) = self.dtype.take() {
            b = b.dtype(parsed("dtype", &v)?);
        }
        if let Some(v) = self.fill_value.take() {
            b = b.fill_value(fill_value(&v)?);
        }
        if let Some(v) = self.dimension_names.take() {
            b = b.dimension_names(v);
        }
        if let Some(v) = self.codec.take() {
            b = b.codec(parsed("codec", &v)?);
        }
        if let Some(v) = self.crc32c.take() {
            b = b.crc32c(v);
        }
        if let Some(v) = self.index_location.take() {
            b = b.index_location(parsed("index_location", &v)?);
        }
        if let Some(v) = self.attributes.take() {
            b = b.attributes(v);
        }
        Ok(b.build()?)
    }

    /// The writer options from the option keys (taken out).
    fn take_options(&mut self) -> Result<WriterOptions, ConfigError> {
        let mut o = WriterOptions::default();
        if let Some(v) = self.threads.take() {
            o.threads = v;
        }
        if let Some(v) = self.pin_threads.take() {
            o.pin_threads = v;
        }
        if let Some(v) = self.background_nice.take() {
            o.background_nice = v;
        }
        if let Some(v) = self.sink.take() {
            o.sink = parsed("sink", &v)?;
        }
        if let Some(v) = self.pool_frames.take() {
            o.pool_frames = v;
        }
        if let Some(v) = self.spare_groups.take() {
            o.spare_groups = v;
        }
        if let Some(v) = self.backpressure.take() {
            o.backpressure = match v {
                BackpressureKey::Block => Backpressure::Block,
                BackpressureKey::Drop => Backpressure::Drop,
            };
        }
        if let Some(v) = self.durability.take() {
            o.durability = match v {
                DurabilityKey::Shard => Durability::Shard,
                DurabilityKey::None => Durability::None,
                DurabilityKey::Periodic(p) => Durability::Periodic {
                    interval: Duration::from_millis(p.interval_ms),
                },
            };
        }
        if let Some(v) = self.packing.take() {
            o.packing = parsed("packing", &v)?;
        }
        if let Some(v) = self.chunk_order.take() {
            o.chunk_order = parsed("chunk_order", &v)?;
        }
        if let Some(v) = self.acquisition_order.take() {
            let axes = v
                .into_iter()
                .map(|k| match k {
                    AxisKey::Number(i) => Ok(i),
                    AxisKey::Name(n) => Err(ConfigError::Value {
                        key: "acquisition_order",
                        message: format!(
                            "{n:?} is not one of the array's dimension_names (or give axis numbers)"
                        ),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            o.acquisition_order = Some(AcquisitionOrder::new(axes));
        }
        if let Some(v) = self.max_open_shards.take() {
            o.max_open_shards = v;
        }
        if let Some(v) = self.overwrite.take() {
            o.overwrite = v;
        }
        if let Some(v) = self.resume.take() {
            o.resume = v;
        }
        if let Some(v) = self.existing_group.take() {
            o.existing_group = v;
        }
        if let Some(m) = self.frame_meta.take() {
            let mut spec = FrameMetaSpec::new().json(m.json);
            for (name, kind) in m.fields {
                let kind = kind.as_str().ok_or_else(|| ConfigError::Value {
                    key: "frame_meta.fields",
                    message: format!("{name}: {kind} is not \"float64\" or \"int64\""),
                })?;
                spec = spec.field(name, parsed("frame_meta.fields", kind)?);
            }
            o.frame_meta = Some(spec);
        }
        self.take_remote(&mut o.remote)?;
        Ok(o)
    }

    /// The object-store options from the remote keys (taken out) onto `r`.
    fn take_remote(&mut self, r: &mut RemoteOptions) -> Result<(), ConfigError> {
        if let Some(v) = self.staging_dir.take() {
            r.staging_dir = Some(v);
        }
        if let Some(v) = self.staging_budget.take() {
            r.staging_budget = v;
        }
        if let Some(v) = self.part_size.take() {
            r.part_size = v;
        }
        if let Some(v) = self.uploads_in_flight.take() {
            r.uploads_in_flight = v;
        }
        if let Some(s) = self.upload_timeout.take() {
            r.upload_timeout = Duration::try_from_secs_f64(s).map_err(|_| ConfigError::Value {
                key: "upload_timeout",
                message: format!("{s} is not a number of seconds ≥ 0"),
            })?;
        }
        if let Some(v) = self.part.take() {
            r.part = Some(v);
        }
        if let Some(v) = self.coordinate.take() {
            r.coordinate = v;
        }
        if let Some(m) = self.store_options.take() {
            r.store_options.extend(m);
        }
        Ok(())
    }
}

impl OmeKeys {
    fn into_ome(self) -> Result<Ome, ConfigError> {
        let mut ome = Ome::new();
        if let Some(v) = self.name {
            ome = ome.name(v);
        }
        if let Some([y, x]) = self.pixel_size {
            ome = ome.pixel_size(y, x);
        }
        if let Some(v) = self.z_step {
            ome = ome.z_step(v);
        }
        if let Some(ms) = self.frame_interval_ms {
            // `Duration` cannot hold what `Ome` would reject anyway; say it in its words.
            let d = Duration::try_from_secs_f64(ms / 1e3).map_err(|_| OmeError::NotPositive {
                field: "frame_interval",
                value: ms,
            })?;
            ome = ome.frame_interval(d);
        }
        if let Some(v) = self.space_unit {
            ome = ome.space_unit(parsed("ome.space_unit", &v)?);
        }
        if let Some(v) = self.time_unit {
            ome = ome.time_unit(parsed("ome.time_unit", &v)?);
        }
        if let Some(v) = self.channels {
            ome = ome.channels(v);
        }
        if let Some(v) = self.omero {
            ome = ome.omero(match v {
                OmeroKey::Auto => Omero::Auto,
                OmeroKey::Window(w) => Omero::AutoWindow(w.into()),
                OmeroKey::Channels(chs) => Omero::Channels(
                    chs.into_iter()
                        .map(|c| {
                            let channel = match c.window {
                                Some(w) => OmeroChannel::new(c.label, c.color, w.into()),
                                None => OmeroChannel::from_data(c.label, c.color),
                            };
                            channel.active(c.active)
                        })
                        .collect(),
                ),
            });
        }
        if let Some(v) = self.levels {
            ome = ome.levels(levels(&v)?);
        }
        if let Some(v) = self.downsample {
            // The wording C programs have matched since before `ParseError`.
            let method = v.parse::<Downsample>().map_err(|e| ConfigError::Value {
                key: "ome.downsample",
                message: format!("unknown {} {:?} ({})", e.what, e.input, e.expected),
            })?;
            ome = ome.downsample(method);
        }
        if let Some(v) = self.downsample_z {
            ome = ome.downsample_z(v);
        }
        if let Some(v) = self.level_lz4_acceleration {
            ome = ome.level_lz4_acceleration(v);
        }
        Ok(ome)
    }
}

/// `v` as a `T` named by its text form (the library's `FromStr`), the error naming `key`.
fn parsed<T>(key: &'static str, v: &str) -> Result<T, ConfigError>
where
    T: FromStr<Err = ParseError>,
{
    v.parse().map_err(|e: ParseError| ConfigError::Value {
        key,
        message: e.to_string(),
    })
}

/// `ome.levels`: a count, or `"auto"` (until a level's frame fits one inner chunk).
fn levels(v: &Value) -> Result<Levels, ConfigError> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Levels::Count),
        Value::String(s) if s == "auto" => Some(Levels::Auto),
        _ => None,
    }
    .ok_or_else(|| ConfigError::Value {
        key: "ome.levels",
        message: format!("{v} is not a level count or \"auto\""),
    })
}

/// A JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"` (the Zarr v3 spellings of the
/// floats JSON has no numbers for).
fn fill_value(v: &Value) -> Result<f64, ConfigError> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| ConfigError::Value {
        key: "fill_value",
        message: format!("{v} is not a number, \"NaN\", \"Infinity\" or \"-Infinity\""),
    })
}

/// Keys of one array: its specification, its OME settings and its per-frame metadata.
const ARRAY_KEYS: &[&str] = &[
    "shape",
    "chunk_shape",
    "shard_shape",
    "dtype",
    "fill_value",
    "dimension_names",
    "codec",
    "crc32c",
    "index_location",
    "attributes",
    "ome",
];

/// A [`Recording`] described by one JSON object: the writer option keys of [`Config`]
/// at the top level (shared by every array; `frame_meta` there is every array's
/// default), `attributes` for the root group, and `arrays`, a list of objects each with
/// a `key` and the array keys of [`Config`] (`shape`, …, `attributes`, `ome`,
/// `frame_meta`). A key in the wrong place is an error that says where it goes.
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
/// - `image`: the array keys of [`Config`] for every field image (`shape`, …, `ome`,
///   whose settings default to `Ome::new()`'s; its `frame_meta` is the recording's).
///
/// ```
/// use zarrstream::config::RecordingConfig;
/// let config = RecordingConfig::parse(
///     r#"{"threads": 2, "attributes": {"experiment": "E12"},
///         "arrays": [
///           {"key": "cam0", "shape": [0, 64, 64], "chunk_shape": [1, 64, 64],
///            "shard_shape": [8, 64, 64]},
///           {"key": "cam1", "shape": [0, 32, 32], "chunk_shape": [1, 32, 32],
///            "shard_shape": [8, 32, 32], "codec": "zstd:1"}]}"#,
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

/// The `plate` object: the settings of [`Plate`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlateKeys {
    name: Option<String>,
    rows: NamesKey,
    columns: NamesKey,
    wells: Option<Vec<String>>,
    fields: Option<u32>,
    acquisitions: Option<Vec<AcquisitionKeys>>,
}

/// Rows or columns: their names, or how many (named as [`Plate::grid`] names them).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NamesKey {
    Count(usize),
    Names(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquisitionKeys {
    id: u32,
    name: Option<String>,
    description: Option<String>,
    start_time: Option<u64>,
    end_time: Option<u64>,
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
    serde_json::from_str::<PlateKeys>(text)?.into_plate()
}

impl PlateKeys {
    fn into_plate(self) -> Result<Plate, ConfigError> {
        let names = |k: NamesKey, grid: fn(usize) -> Vec<String>| match k {
            NamesKey::Count(n) => grid(n),
            NamesKey::Names(v) => v,
        };
        let rows = names(self.rows, |n| Plate::grid(n, 0).rows().to_vec());
        let columns = names(self.columns, |n| Plate::grid(0, n).columns().to_vec());
        let mut plate = Plate::new(rows, columns);
        if let Some(v) = self.name {
            plate = plate.name(v);
        }
        if let Some(wells) = self.wells {
            let pairs = wells
                .iter()
                .map(|w| match w.split_once('/') {
                    Some((r, c)) if !c.contains('/') => Ok((r.to_string(), c.to_string())),
                    _ => Err(ConfigError::Value {
                        key: "plate.wells",
                        message: format!("{w:?} is not a well path ROW/COLUMN"),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?;
            plate = plate.wells(pairs);
        }
        if let Some(v) = self.fields {
            plate = plate.fields(v);
        }
        if let Some(list) = self.acquisitions {
            plate = plate.acquisitions(list.into_iter().map(|a| {
                let mut acq = Acquisition::new(a.id);
                acq.name = a.name;
                acq.description = a.description;
                acq.start_time = a.start_time;
                acq.end_time = a.end_time;
                acq
            }));
        }
        plate.validate()?;
        Ok(plate)
    }
}

impl RecordingConfig {
    /// Parses and checks the text of a recording's configuration.
    pub fn parse(text: &str) -> Result<RecordingConfig, ConfigError> {
        let top: Value = serde_json::from_str(text)?;
        let Value::Object(mut top) = top else {
            return Err(ConfigError::Value {
                key: "(top level)",
                message: "not a JSON object".into(),
            });
        };
        let plate = top.remove("plate");
        let image = top.remove("image");
        if plate.is_none() && image.is_some() {
            return Err(ConfigError::Value {
                key: "image",
                message: "is the field image of a plate: give `plate` too, or use `arrays`".into(),
            });
        }
        let arrays = match (top.remove("arrays"), &plate) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Value {
                    key: "arrays",
                    message: "a plate's arrays are its field images: give `image` (the \
                              array keys of every field image), not `arrays`"
                        .into(),
                });
            }
            (None, Some(_)) => Vec::new(),
            (Some(Value::Array(a)), None) if !a.is_empty() => a,
            _ => {
                return Err(ConfigError::Value {
                    key: "arrays",
                    message: "a non-empty list of array objects is required".into(),
                });
            }
        };
        let attributes = match top.remove("attributes") {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(ConfigError::Value {
                    key: "attributes",
                    message: "not a JSON object".into(),
                });
            }
        };
        if let Some(k) = ARRAY_KEYS.iter().find(|k| top.contains_key(**k)) {
            return Err(ConfigError::Value {
                key: k,
                message: "is an array key; give it in each entry of `arrays`".into(),
            });
        }
        let mut options = serde_json::from_value::<Config>(Value::Object(top))?.take_options()?;
        let arrays = arrays
            .into_iter()
            .map(|a| array_config(a, &options))
            .collect::<Result<_, _>>()?;
        let plate = match plate {
            None => None,
            Some(p) => {
                let plate = serde_json::from_value::<PlateKeys>(p)?.into_plate()?;
                let Some(Value::Object(image)) = image else {
                    return Err(ConfigError::Value {
                        key: "image",
                        message: "a plate needs `image`, the array keys of every field image"
                            .into(),
                    });
                };
                let (spec, ome, frame_meta) = array_parts(image, "image", &options)?;
                options.frame_meta = frame_meta;
                Some(PlateConfig {
                    plate,
                    spec,
                    ome: ome.unwrap_or_default(),
                })
            }
        };
        Ok(RecordingConfig {
            arrays,
            options,
            attributes,
            plate,
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

/// One entry of a recording's `arrays`.
fn array_config(entry: Value, options: &WriterOptions) -> Result<ArrayConfig, ConfigError> {
    let Value::Object(mut entry) = entry else {
        return Err(ConfigError::Value {
            key: "arrays",
            message: "every entry must be a JSON object".into(),
        });
    };
    let key = match entry.remove("key") {
        Some(Value::String(k)) => k,
        _ => {
            return Err(ConfigError::Value {
                key: "arrays",
                message: "every entry needs a \"key\" string".into(),
            });
        }
    };
    let (spec, ome, frame_meta) = array_parts(entry, &key, options)?;
    let mut array = ArrayConfig::new(key, spec);
    if let Some(ome) = ome {
        array = array.ome(ome);
    }
    if let Some(m) = frame_meta {
        array = array.frame_meta(m);
    }
    Ok(array)
}

/// The specification, OME settings and per-frame metadata (or the recording's
/// default) of one array object (`key` names it in errors).
fn array_parts(
    entry: Map<String, Value>,
    key: &str,
    options: &WriterOptions,
) -> Result<(ArraySpec, Option<Ome>, Option<FrameMetaSpec>), ConfigError> {
    let allowed = |k: &str| ARRAY_KEYS.contains(&k) || k == "frame_meta";
    if let Some(k) = entry.keys().find(|k| !allowed(k)) {
        // Recording options are the recording's; an unknown key is serde's to name.
        let known = serde_json::from_value::<Config>(Value::Object(
            std::iter::once((k.clone(), entry[k].clone())).collect(),
        ))
        .is_ok();
        if known {
            return Err(ConfigError::Value {
                key: "arrays",
                message: format!("{key}: {k:?} is a recording option; set it at the top level"),
            });
        }
    }
    let mut c: Config = serde_json::from_value(Value::Object(entry))?;
    let spec = c.take_spec()?;
    let frame_meta = c.take_options()?.frame_meta.or(options.frame_meta.clone());
    let ome = c.ome.map(OmeKeys::into_ome).transpose()?;
    Ok((spec, ome, frame_meta))
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
        ChunkOrder, Codec, DataType, IndexLocation, Packing, SinkChoice, SpaceUnit, TimeUnit,
    };

    const BASE: &str =
        r#""shape": [0, 64, 64], "chunk_shape": [1, 32, 32], "shard_shape": [4, 64, 64]"#;

    fn parse(extra: &str) -> Result<Parsed, ConfigError> {
        let sep = if extra.is_empty() { "" } else { ", " };
        Config::parse(&format!("{{{BASE}{sep}{extra}}}"))?.into_parsed()
    }

    fn err(extra: &str) -> String {
        parse(extra).unwrap_err().to_string()
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
        let base = r#""shape": [4, 2, 3, 64, 64], "chunk_shape": [1, 1, 1, 32, 32],
            "shard_shape": [1, 1, 1, 64, 64], "dimension_names": ["t", "c", "z", "y", "x"]"#;
        let parse = |extra: &str| Config::parse(&format!("{{{base}, {extra}}}"))?.into_parsed();
        let p = parse(r#""acquisition_order": ["c", "t", 2], "max_open_shards": 7"#).unwrap();
        assert_eq!(
            p.options.acquisition_order,
            Some(AcquisitionOrder::new([1, 0, 2]))
        );
        assert_eq!(p.options.max_open_shards, 7);
        let e = parse(r#""acquisition_order": ["c", "q", "z"]"#).unwrap_err();
        assert!(e.to_string().contains("\"q\" is not one of"), "{e}");
    }

    #[test]
    fn every_key_reaches_the_library() {
        let p = parse(
            r#""dtype": "float32", "fill_value": "NaN", "dimension_names": ["t", "y", "x"],
               "codec": "zstd:3", "crc32c": false, "index_location": "start",
               "attributes": {"instrument": "scope 1"},
               "threads": 3, "pin_threads": false, "background_nice": 0, "sink": "mmap",
               "pool_frames": 9, "spare_groups": 2, "backpressure": "drop",
               "durability": {"periodic": {"interval_ms": 250}}, "packing": "sparse",
               "chunk_order": "morton", "overwrite": true"#,
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
            parse(r#""durability": "none""#).unwrap().options.durability,
            Durability::None
        );
        assert_eq!(parse(r#""fill_value": 7"#).unwrap().spec.fill_value(), 7.0);
        assert_eq!(
            parse(r#""dtype": "u8""#).unwrap().spec.dtype(),
            DataType::UInt8
        );
        assert_eq!(
            parse(r#""codec": "none""#).unwrap().spec.codec(),
            Codec::none()
        );
        assert_eq!(
            parse(r#""sink": "direct""#).unwrap().options.sink,
            SinkChoice::Direct
        );
    }

    #[test]
    fn remote_keys_make_the_same_options_as_the_builder() {
        let p = parse(
            r#""staging_dir": "/scratch/staging", "staging_budget": 4294967296,
               "part_size": 16777216, "uploads_in_flight": 8, "upload_timeout": 2.5,
               "part": 1, "coordinate": true,
               "store_options": {"aws_endpoint": "http://127.0.0.1:3900",
                                 "aws_region": "garage"}"#,
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
        // A recording takes them at the top level, as every other writer option.
        let c = RecordingConfig::parse(
            r#"{"staging_budget": 1024, "store_options": {"aws_region": "eu"},
                "arrays": [{"key": "a", "shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                            "shard_shape": [2, 8, 8]}]}"#,
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
    }

    #[test]
    fn ome_keys_make_the_same_ome_as_the_builder() {
        let p = Config::parse(
            r#"{"shape": [0, 2, 64, 64], "chunk_shape": [1, 1, 32, 32],
                "shard_shape": [4, 1, 64, 64],
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
        assert_eq!(pyramid.ome.unwrap().into_ome().unwrap(), want);
        let auto = Config::parse(r#"{"ome": {"levels": "auto"}}"#).unwrap();
        let want = Ome::new().levels(Levels::Auto);
        assert_eq!(auto.ome.unwrap().into_ome().unwrap(), want);
        let o = Config::parse(
            r##"{"ome": {"z_step": 2, "omero": {"channels": [{"label": "a", "color": "FF0000",
                 "window": {"min": 0, "max": 10, "start": 1, "end": 9}, "active": true}]}}}"##,
        )
        .unwrap();
        let ome = o.ome.unwrap().into_ome().unwrap();
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
        assert_eq!(o.ome.unwrap().into_ome().unwrap(), want);
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
        assert_eq!(o.ome.unwrap().into_ome().unwrap(), want);
    }

    /// BASE with the keys of `extra` (a JSON object's inside) added or replaced.
    fn with(extra: &str) -> String {
        let mut base: Map<String, Value> = serde_json::from_str(&format!("{{{BASE}}}")).unwrap();
        let extra: Map<String, Value> = serde_json::from_str(&format!("{{{extra}}}")).unwrap();
        base.extend(extra);
        Value::Object(base).to_string()
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let cases = [
            // unknown keys, also inside nested objects
            (r#""shapes": [1]"#, "unknown field `shapes`"),
            (
                r#""ome": {"pixelsize": [1, 1]}"#,
                "unknown field `pixelsize`",
            ),
            (
                r#""durability": {"periodic": {"interval": 5}}"#,
                "unknown field `interval`",
            ),
            // types and names
            (r#""threads": -1"#, "invalid value: integer `-1`"),
            (
                r#""crc32c": "yes""#,
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                r#""sink": "disk""#,
                "sink: \"disk\" is not a sink (auto, mmap, pwrite, direct)",
            ),
            (
                r#""dtype": "complex64""#,
                "dtype: \"complex64\" is not a data type",
            ),
            (r#""codec": "gzip""#, "codec: \"gzip\" is not a codec"),
            (
                r#""chunk_order": "hilbert""#,
                "chunk_order: \"hilbert\" is not a chunk order (c, morton)",
            ),
            (r#""backpressure": "wait""#, "unknown variant `wait`"),
            (r#""durability": "periodic""#, "expected newtype variant"),
            (r#""fill_value": true"#, "fill_value: true is not a number"),
            (
                r#""upload_timeout": -1"#,
                "upload_timeout: -1 is not a number of seconds ≥ 0",
            ),
            (
                r#""store_options": {"aws_region": 5}"#,
                "invalid type: integer `5`, expected a string",
            ),
            (
                r#""store_options": ["aws_region", "eu"]"#,
                "invalid type: sequence, expected a map",
            ),
            (r#""staging_dir": 1"#, "invalid type: integer `1`"),
            (r#""part": -1"#, "invalid value: integer `-1`"),
            (r#""coordinate": 1"#, "expected a boolean"),
            (r#""stage_dir": "/x""#, "unknown field `stage_dir`"),
            (
                r#""ome": {"frame_interval_ms": -5}"#,
                "frame_interval = -5 must be a positive",
            ),
            (
                r#""ome": {"levels": "many"}"#,
                "ome.levels: \"many\" is not a level count or \"auto\"",
            ),
            (
                r#""ome": {"downsample": "median"}"#,
                "ome.downsample: unknown downsampling method \"median\"",
            ),
            // the builder's own checks
            (r#""shard_shape": [4, 64, 48]"#, "does not divide shard"),
            (
                r#""shape": [0, 0, 64]"#,
                "only axis 0 (the append axis) may be 0",
            ),
            (r#""codec": "zstd:99""#, "zstd level 99 is out of range"),
            (
                r#""fill_value": -1"#,
                "fill value -1 is not representable as uint16",
            ),
        ];
        for (extra, want) in cases {
            let text = with(extra);
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
        let syntax = Config::parse(r#"{"shape": }"#).unwrap_err().to_string();
        assert!(
            syntax.starts_with("config_json: expected value at line 1"),
            "{syntax}"
        );
        assert!(err(r#""shape": [0, 64, 64]"#).contains("duplicate field `shape`"));
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

    #[test]
    fn a_recording_config_puts_each_key_in_its_place() {
        let arrays = r#""arrays": [
            {"key": "cam0", "shape": [0, 8, 8], "chunk_shape": [1, 8, 8], "shard_shape": [2, 8, 8],
             "attributes": {"camera": 0}},
            {"key": "cam1", "shape": [0, 4, 4], "chunk_shape": [1, 4, 4], "shard_shape": [2, 4, 4],
             "dtype": "uint8", "ome": {"levels": 1},
             "frame_meta": {"fields": {"x": "int64"}}}]"#;
        let c = RecordingConfig::parse(&format!(
            r#"{{"threads": 2, "resume": true, "existing_group": true,
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
        assert!(bad(r#"{"threads": 2}"#).contains("arrays"));
        assert!(bad(r#"{"arrays": []}"#).contains("non-empty"));
        let e = bad(r#"{"shape": [0, 8, 8], "arrays": [{"key": "a"}]}"#);
        assert!(e.contains("shape") && e.contains("each entry"), "{e}");
        let e = bad(
            r#"{"arrays": [{"key": "a", "threads": 2, "shape": [0, 8, 8],
                "chunk_shape": [1, 8, 8], "shard_shape": [2, 8, 8]}]}"#,
        );
        assert!(e.contains("\"threads\" is a recording option"), "{e}");
        let e = bad(r#"{"arrays": [{"shape": [0, 8, 8]}]}"#);
        assert!(e.contains("key"), "{e}");
        let e = bad(r#"{"arrays": [{"key": "a", "shap": [0, 8, 8]}]}"#);
        assert!(e.contains("shap"), "{e}");
        let e = bad(r#"{"thread": 1, "arrays": [{"key": "a"}]}"#);
        assert!(e.contains("thread"), "{e}");
    }

    #[test]
    fn a_plate_config_makes_the_plate() {
        let image = r#""image": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
            "shard_shape": [2, 8, 8], "ome": {"pixel_size": [0.5, 0.5]},
            "frame_meta": {"fields": {"x": "float64"}}}"#;
        let c = RecordingConfig::parse(&format!(
            r#"{{"threads": 2, "plate": {{"name": "P", "rows": 2, "columns": ["01", "02", "03"],
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
        assert!(e.to_string().contains("unknown field `field`"), "{e}");
    }
}
