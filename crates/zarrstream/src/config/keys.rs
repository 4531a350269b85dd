//! The input structs of the OME and per-frame metadata sections, turned into the
//! library's `Ome` and `FrameMetaSpec`, and the text-form helpers they share.

use super::*;

/// The `frame_meta` object: the fields of `FrameMetaSpec`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct FrameMetaKeys {
    fields: Map<String, Value>,
    json: bool,
}

impl FrameMetaKeys {
    pub(super) fn into_spec(self) -> Result<FrameMetaSpec, ConfigError> {
        let mut spec = FrameMetaSpec::new().json(self.json);
        for (name, kind) in self.fields {
            let kind = kind.as_str().ok_or_else(|| ConfigError::Value {
                key: "frame_meta.fields",
                message: format!("{name}: {kind} is not \"float64\" or \"int64\""),
            })?;
            spec = spec.field(name, parsed("frame_meta.fields", kind)?);
        }
        Ok(spec)
    }
}

/// The `ome` object: the options of `Ome` (`frame_interval_ms` in milliseconds).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct OmeKeys {
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
pub(super) enum OmeroKey {
    Auto,
    Window(WindowKeys),
    Channels(Vec<OmeroChannelKeys>),
}

/// A channel without `window` has its window taken from the data.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OmeroChannelKeys {
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
pub(super) struct WindowKeys {
    min: f64,
    max: f64,
    start: f64,
    end: f64,
}

impl OmeKeys {
    pub(super) fn into_ome(self) -> Result<Ome, ConfigError> {
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
pub(super) fn parsed<T>(key: &'static str, v: &str) -> Result<T, ConfigError>
where
    T: FromStr<Err = ParseError>,
{
    v.parse().map_err(|e: ParseError| ConfigError::Value {
        key,
        message: e.to_string(),
    })
}

/// `ome.levels`: a count, or `"auto"` (until a level's frame fits one inner chunk).
pub(super) fn levels(v: &Value) -> Result<Levels, ConfigError> {
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
