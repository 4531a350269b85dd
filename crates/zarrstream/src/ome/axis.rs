//! The axes of an image as OME-Zarr lists them.

/// What an axis holds (`axes[].type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AxisKind {
    /// The append axis.
    Time,
    /// Channels (no unit).
    Channel,
    /// `z`, `y` or `x`.
    Space,
}

impl AxisKind {
    /// The name written into `axes[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            AxisKind::Time => "time",
            AxisKind::Channel => "channel",
            AxisKind::Space => "space",
        }
    }
}

/// One axis of the image, as written into `multiscales[0].axes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Name, equal to the level arrays' dimension name.
    pub name: String,
    /// Time, channel or space.
    pub kind: AxisKind,
    /// UDUNITS-2 unit, `None` for channels and for axes without a physical size.
    pub unit: Option<&'static str>,
    /// Physical size of one level-0 pixel along the axis (1 where there is none).
    pub scale: f64,
}
