//! The transitional `omero` rendering metadata: channel labels, colours and windows.

use crate::dtype::DataType;

/// A channel's display window for `omero` (in data values).
///
/// Viewers (napari-ome-zarr, OMERO, vizarr) show `start..end` as the contrast limits,
/// within the slider range `min..max`.
///
/// ```
/// use zarrstream::{DataType, Window};
/// let w = Window::of_type(DataType::UInt16, 100.0, 4000.0);
/// assert_eq!((w.min, w.max, w.start, w.end), (0.0, 65535.0, 100.0, 4000.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Smallest value the data type holds (or the data may take).
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Display range start.
    pub start: f64,
    /// Display range end.
    pub end: f64,
}

impl Window {
    /// The display range `start..end` within the range of `dtype` (`min`, `max`; for
    /// floating-point types 0..1, widened to take `start..end`).
    pub fn of_type(dtype: DataType, start: f64, end: f64) -> Self {
        let (min, max) = dtype_range(dtype);
        let (min, max) = if dtype.is_float() {
            (min.min(start), max.max(end))
        } else {
            (min, max)
        };
        Window {
            min,
            max,
            start,
            end,
        }
    }

    /// The `window` object of an `omero` channel.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({"min": self.min, "max": self.max, "start": self.start, "end": self.end})
    }
}

/// One channel of the transitional `omero` rendering metadata.
///
/// Built with [`OmeroChannel::new`] (a window given) or [`OmeroChannel::from_data`]
/// (the window follows the frames recorded). OMERO defines more per-channel fields,
/// e.g. `inverted` or `family`, that may be added later.
///
/// ```
/// use zarrstream::{OmeroChannel, Window};
/// let gfp = OmeroChannel::new("GFP", "00FF00", Window { min: 0.0, max: 65535.0, start: 100.0, end: 4000.0 })
///     .active(false);
/// assert_eq!(gfp.label, "GFP");
/// assert!(!gfp.active);
/// let rfp = OmeroChannel::from_data("RFP", "FF00FF");
/// assert_eq!(rfp.window, None);
/// ```
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OmeroChannel {
    /// Label shown by viewers.
    pub label: String,
    /// Colour as 6 hexadecimal digits, `RRGGBB`.
    pub color: String,
    /// Display window as given; `None`: `start..end` from the frames recorded (see
    /// [`Omero::Auto`]), `min..max` the data type's range.
    #[serde(default)]
    pub window: Option<Window>,
    /// Whether the channel is shown.
    pub active: bool,
}

impl OmeroChannel {
    /// A channel shown by default, labelled `label`, coloured `color` (`RRGGBB`; checked
    /// when the image is created), displayed over `window`.
    pub fn new(label: impl Into<String>, color: impl Into<String>, window: Window) -> Self {
        OmeroChannel {
            label: label.into(),
            color: color.into(),
            window: Some(window),
            active: true,
        }
    }

    /// A channel shown by default, labelled `label`, coloured `color`, whose display
    /// window follows the frames recorded (as [`Omero::Auto`]'s channels).
    pub fn from_data(label: impl Into<String>, color: impl Into<String>) -> Self {
        OmeroChannel {
            label: label.into(),
            color: color.into(),
            window: None,
            active: true,
        }
    }

    /// Whether viewers show the channel when they open the image.
    pub fn active(mut self, active: bool) -> Self {
        self.active = active;
        self
    }
}

/// The `omero` rendering metadata to write.
///
/// In a JSON configuration: `"auto"`, `{"window": {…}}` or `{"channels": […]}`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Omero {
    /// One channel per channel-axis entry (one if there is no channel axis), labelled
    /// with the channel names, coloured from a fixed palette (grey for a single
    /// channel), each displayed over a window taken from the frames recorded.
    ///
    /// The writer samples pixels of the frames it encodes (a few thousand per frame, at
    /// most every [`DISPLAY_SAMPLE_INTERVAL`](crate::DISPLAY_SAMPLE_INTERVAL) per channel, on the
    /// encoding workers), and sets each channel's `window.start`/`end` to the
    /// [`DISPLAY_LOW_QUANTILE`](crate::DISPLAY_LOW_QUANTILE) and
    /// [`DISPLAY_HIGH_QUANTILE`](crate::DISPLAY_HIGH_QUANTILE) of its samples, so a few hot or dead
    /// pixels do not set the contrast. The group's `zarr.json` is republished with them
    /// as the level array's is (a viewer opening the image while it is recorded gets a
    /// sensible contrast from the first shard on). `window.min`/`max` are the data
    /// type's range; before any frame, `start`/`end` are too.
    Auto,
    /// As [`Auto`](Self::Auto), with every channel displayed over this window.
    #[serde(rename = "window")]
    AutoWindow(Window),
    /// These channels, one per channel-axis entry.
    Channels(Vec<OmeroChannel>),
}

/// Channel colours of [`Omero::Auto`]: green, magenta, cyan, yellow, red, blue.
pub(super) const PALETTE: [&str; 6] = ["00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF"];

/// The display range of a data type (floats: 0..1). The 64-bit integer limits are
/// rounded to the nearest f64, as JSON numbers are read by viewers.
pub(crate) fn dtype_range(dtype: DataType) -> (f64, f64) {
    match dtype {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::UInt8 => (0.0, u8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::UInt16 => (0.0, u16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::UInt32 => (0.0, u32::MAX.into()),
        DataType::Int64 => (i64::MIN as f64, i64::MAX as f64),
        DataType::UInt64 => (0.0, u64::MAX as f64),
        DataType::Float32 | DataType::Float64 => (0.0, 1.0),
    }
}
