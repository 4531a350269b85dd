//! The transitional `omero` rendering metadata: channel labels, colours and windows.

use crate::dtype::DataType;

/// A channel's display window for `omero` (in data values).
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// One channel of the transitional `omero` rendering metadata.
///
/// Built with [`OmeroChannel::new`] (OMERO defines more per-channel fields, e.g.
/// `inverted` or `family`, that may be added later):
///
/// ```
/// use zarrstream::{OmeroChannel, Window};
/// let gfp = OmeroChannel::new("GFP", "00FF00", Window { min: 0.0, max: 65535.0, start: 100.0, end: 4000.0 })
///     .active(false);
/// assert_eq!(gfp.label, "GFP");
/// assert!(!gfp.active);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OmeroChannel {
    /// Label shown by viewers.
    pub label: String,
    /// Colour as 6 hexadecimal digits, `RRGGBB`.
    pub color: String,
    /// Display window.
    pub window: Window,
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
            window,
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
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Omero {
    /// One channel per channel-axis entry (one if there is no channel axis), labelled
    /// with the channel names, coloured from a fixed palette (grey for a single
    /// channel), windows over the data type's range.
    Auto,
    /// These channels, one per channel-axis entry.
    Channels(Vec<OmeroChannel>),
}

/// Channel colours of [`Omero::Auto`]: green, magenta, cyan, yellow, red, blue.
pub(super) const PALETTE: [&str; 6] = ["00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF"];

/// The display range of a data type (floats: 0..1). The 64-bit integer limits are
/// rounded to the nearest f64, as JSON numbers are read by viewers.
pub(super) fn dtype_range(dtype: DataType) -> (f64, f64) {
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
