//! The errors of input a caller gives: option names, array specifications, acquisition
//! orders, frame indices, OME and plate layouts. Each is also a variant of [`Error`](super::Error).

use crate::codec::{BloscCompressor, BloscShuffle};
use crate::dtype::DataType;

/// A name that does not parse as the option it was given for: returned by the
/// [`FromStr`](std::str::FromStr) implementations of [`Codec`](crate::Codec),
/// [`DataType`](crate::DataType), [`SinkChoice`](crate::SinkChoice) and the other option
/// enums. It names what was being parsed, the input and the forms accepted, so a command
/// line or a binding can show it as it is.
///
/// ```
/// use zarrstream::{Codec, ParseError};
/// let e: ParseError = "gzip".parse::<Codec>().unwrap_err();
/// assert_eq!(e.what, "codec");
/// assert_eq!(e.input, "gzip");
/// assert!(e.to_string().starts_with("\"gzip\" is not a codec ("));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a {what} ({expected})")]
#[non_exhaustive]
pub struct ParseError {
    /// What was being parsed (`"codec"`, `"data type"`, `"sink"`, …).
    pub what: &'static str,
    /// The text given.
    pub input: String,
    /// The accepted forms, comma-separated (`"auto, mmap, pwrite, direct"`).
    pub expected: &'static str,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, input: &str, expected: &'static str) -> Self {
        ParseError {
            what,
            input: input.to_owned(),
            expected,
        }
    }
}

/// Why an [`ArraySpec`](crate::ArraySpec) was rejected by the builder.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The array needs an append axis plus a 2-D frame.
    #[error("rank {0} is too small: arrays need at least 2 axes (y, x)")]
    RankTooSmall(usize),
    /// Sharded arrays are limited to rank 31 by tensorstore.
    #[error("rank {0} is too large: at most 31 axes are supported")]
    RankTooLarge(usize),
    /// A shape-like field was not given.
    #[error("{0} was not set")]
    Missing(&'static str),
    /// Two shape-like fields differ in length.
    #[error("{what} has {got} entries but the array has rank {rank}")]
    RankMismatch {
        /// Which field.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The array's rank.
        rank: usize,
    },
    /// Only axis 0 may be 0 (unbounded).
    #[error(
        "axis {axis} has size 0; only axis 0 (the append axis) may be 0 (unbounded), in arrays of 3 or more axes"
    )]
    ZeroExtent {
        /// The offending axis.
        axis: usize,
    },
    /// Chunk and shard sizes must be at least 1.
    #[error("{what} is 0 on axis {axis}")]
    ZeroChunk {
        /// `chunk_shape` or `shard_shape`.
        what: &'static str,
        /// The offending axis.
        axis: usize,
    },
    /// The sharding codec requires inner chunks to tile the shard exactly.
    #[error("inner chunk {chunk} does not divide shard {shard} on axis {axis}")]
    ChunkNotDividingShard {
        /// The offending axis.
        axis: usize,
        /// Inner chunk size on that axis.
        chunk: u64,
        /// Shard size on that axis.
        shard: u64,
    },
    /// tensorstore caps shards at 2^30 inner chunks.
    #[error("a shard would hold {0} inner chunks; at most 2^30 are allowed")]
    TooManyChunksPerShard(u64),
    /// A size computed from the shapes does not fit the platform or the format.
    #[error("{0} overflows")]
    Overflow(&'static str),
    /// A codec parameter is out of its range.
    #[error("{codec} level {level} is out of range {min}..={max}")]
    LevelOutOfRange {
        /// Codec name.
        codec: &'static str,
        /// Given level.
        level: i32,
        /// Smallest accepted level.
        min: i32,
        /// Largest accepted level.
        max: i32,
    },
    /// The fill value cannot be stored in the data type.
    #[error("fill value {value} is not representable as {dtype}")]
    FillValue {
        /// The given value.
        value: f64,
        /// The array's data type.
        dtype: DataType,
    },
    /// Dimension names must be unique.
    #[error("dimension name {0:?} is used twice")]
    DuplicateDimensionName(String),
    /// An explicit Blosc shuffle that does nothing for the element size (byte shuffle
    /// of 1-byte elements): most likely a mistake, so it is refused rather than ignored.
    #[error(
        "{compressor} with {shuffle} does not fit {dtype}: byte shuffle needs elements of 2 \
         bytes or more (use noshuffle or bitshuffle, or leave the shuffle out)"
    )]
    ShuffleDoesNotFit {
        /// The compressor inside the Blosc container.
        compressor: BloscCompressor,
        /// The shuffle asked for.
        shuffle: BloscShuffle,
        /// The array's data type.
        dtype: DataType,
    },
    /// Blosc1 frames are limited to 2^31 - 17 bytes.
    #[error("an inner chunk of {0} bytes is too large for the blosc codec (limit 2147483631)")]
    ChunkTooLargeForBlosc(u64),
}

/// Why an [`AcquisitionOrder`](crate::AcquisitionOrder) does not fit the array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OrderError {
    /// Not one entry per leading axis.
    #[error("the acquisition order has {got} axes but the array has {lead} leading axes")]
    Rank {
        /// Entries given.
        got: usize,
        /// The array's leading axes (all but y, x).
        lead: usize,
    },
    /// An axis number past the leading axes.
    #[error(
        "the acquisition order names axis {axis} but the array has no axis {axis} before y, x (it has {lead} leading axes)"
    )]
    NoAxis {
        /// The axis given.
        axis: usize,
        /// The array's leading axes.
        lead: usize,
    },
    /// An axis given twice.
    #[error("the acquisition order lists axis {0} twice")]
    Repeated(usize),
    /// A dimension name the array does not have.
    #[error("the acquisition order names {0:?}, which is not a leading dimension of the array")]
    UnknownName(String),
    /// An unbounded axis 0 inside another loop: that loop would never move on.
    #[error("an unbounded axis 0 must be the outermost loop of the acquisition order")]
    UnboundedInside,
}

/// Why [`Writer::write_frame`](crate::Writer::write_frame) refused a frame index; the
/// frame was not taken and nothing written before is touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameIndexError {
    /// Not one coordinate per leading axis.
    #[error("has {got} coordinates but the array has {lead} leading axes (all but y, x)")]
    Rank {
        /// Coordinates given.
        got: usize,
        /// The array's leading axes.
        lead: usize,
    },
    /// A coordinate past the axis' size.
    #[error("coordinate {value} on axis {axis} is out of bounds (the axis has size {size})")]
    OutOfBounds {
        /// The axis.
        axis: usize,
        /// The coordinate given.
        value: u64,
        /// The axis' size.
        size: u64,
    },
    /// An unbounded axis 0 coordinate outside the window of rows that may be open.
    #[error(
        "axis 0 coordinate {value} is outside the window {low}..{high} of the unbounded axis 0"
    )]
    OutsideWindow {
        /// The coordinate given.
        value: u64,
        /// The first coordinate still open (everything before is finished).
        low: u64,
        /// The first coordinate past the window.
        high: u64,
    },
    /// A frame at this index was already taken (written or dropped).
    #[error("was already written")]
    Duplicate,
    /// `write_frame` on a writer that `push` appended to.
    #[error(
        "this writer was appended to with push; a writer takes either appended or indexed frames"
    )]
    Appending,
    /// `push` on a writer that `write_frame` wrote to.
    #[error("this writer was written by index; a writer takes either appended or indexed frames")]
    Indexed,
    /// A writer whose frames must come in storage order.
    #[error("indexed writes are not supported with {0}")]
    Unsupported(&'static str),
}

/// Why the options of an OME-Zarr image ([`Ome`](crate::Ome)) were rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OmeError {
    /// OME-Zarr images have at most 5 axes (and ours at least 3).
    #[error("rank {0} cannot be an OME-Zarr image: 3 to 5 axes (t, [c], [z], y, x) are supported")]
    Rank(usize),
    /// A physical size must be a positive finite number.
    #[error("OME option {field} = {value} must be a positive number")]
    NotPositive {
        /// Which option.
        field: &'static str,
        /// The value given.
        value: f64,
    },
    /// An option describes an axis the array does not have.
    #[error("OME option {field} is given but the array has no {axis} axis")]
    NoAxis {
        /// Which option.
        field: &'static str,
        /// The missing axis.
        axis: &'static str,
    },
    /// The channel list does not match the size of the channel axis.
    #[error("OME option {field} lists {got} channels but the channel axis has size {axis_size}")]
    ChannelCount {
        /// `channels` or `omero`.
        field: &'static str,
        /// Channels given.
        got: usize,
        /// Size of the channel axis (1 without one).
        axis_size: u64,
    },
    /// An `omero` colour is not 6 hexadecimal digits.
    #[error("OME option omero: channel {channel} colour {color:?} is not RRGGBB hex")]
    Color {
        /// The channel.
        channel: usize,
        /// The colour given.
        color: String,
    },
    /// The number of pyramid levels is out of range.
    #[error("OME option levels = {got} must be 1 to {max}")]
    Levels {
        /// Levels asked for.
        got: usize,
        /// Most levels accepted.
        max: usize,
    },
    /// An `omero` window is not finite or not ordered (`min <= max`, `start <= end`).
    #[error("OME option omero: channel {channel} has an invalid window")]
    Window {
        /// The channel.
        channel: usize,
    },
}

/// Why the layout of an OME-Zarr high-content screening plate
/// ([`Plate`](crate::Plate)) was rejected. Checked before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlateError {
    /// The plate has no rows, no columns, or an empty list of wells.
    #[error("the plate has no {0}")]
    Empty(&'static str),
    /// A row or column name is empty, not alphanumeric (NGFF allows `[A-Za-z0-9]+`),
    /// or given twice (also when differing only in case, which would collide on a
    /// case-insensitive file system).
    #[error("plate {axis} name {name:?}: {reason}")]
    Name {
        /// `"row"` or `"column"`.
        axis: &'static str,
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A well names a row or column the plate does not have.
    #[error("well {row}/{column} is outside the plate: it has no {axis} {missing:?}")]
    WellOutside {
        /// The well's row.
        row: String,
        /// The well's column.
        column: String,
        /// `"row"` or `"column"`: which of the two the plate lacks.
        axis: &'static str,
        /// The name the plate lacks (the row's or the column's).
        missing: String,
    },
    /// A well is listed twice.
    #[error("well {row}/{column} is given twice")]
    DuplicateWell {
        /// The well's row.
        row: String,
        /// The well's column.
        column: String,
    },
    /// A field count of 0: every well needs at least one field of view.
    #[error("plate field count 0: every well needs at least one field of view")]
    NoFields,
    /// Two acquisitions share an id.
    #[error("plate acquisition id {0} is given twice")]
    DuplicateAcquisition(u32),
    /// An acquisition ends before it starts.
    #[error("plate acquisition {id}: end time {end} is before start time {start}")]
    AcquisitionTimes {
        /// The acquisition's id.
        id: u32,
        /// Its start, in seconds since the Unix epoch.
        start: u64,
        /// Its end, in seconds since the Unix epoch.
        end: u64,
    },
    /// A field image the plate does not have was asked for
    /// ([`Plate::image_key`](crate::Plate::image_key)).
    #[error("the plate has no field image {row}/{column} field {field}{}: {reason}", of_acquisition(.acquisition))]
    NoImage {
        /// The row asked for.
        row: String,
        /// The column asked for.
        column: String,
        /// The field asked for.
        field: u32,
        /// The acquisition asked for.
        acquisition: Option<u32>,
        /// Why there is none.
        reason: &'static str,
    },
}

/// `" of acquisition N"`, or nothing.
fn of_acquisition(a: &Option<u32>) -> String {
    a.map(|a| format!(" of acquisition {a}"))
        .unwrap_or_default()
}
