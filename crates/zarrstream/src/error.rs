//! Error types. Every failure a caller can cause or meet is a variant here; what kind
//! of failure each one is ([`ErrorKind`]) is decided in one place, `error/kind.rs`.

mod kind;

pub use kind::ErrorKind;

use std::io;
use std::path::PathBuf;

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

/// Errors of the writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The array specification is invalid.
    #[error("invalid array specification: {0}")]
    Spec(#[from] SpecError),
    /// The OME-Zarr image options are invalid.
    #[error("invalid OME-Zarr options: {0}")]
    Ome(#[from] OmeError),
    /// The layout of an OME-Zarr plate is invalid.
    #[error("invalid plate: {0}")]
    Plate(#[from] PlateError),
    /// A writer option is out of its range.
    #[error("writer option {option} = {value} is out of range (at most {max})")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: usize,
        /// The largest accepted value.
        max: usize,
    },
    /// Resume was asked for an array this version cannot continue.
    #[error("resume is not supported for {0}")]
    ResumeUnsupported(&'static str),
    /// The acquisition order does not fit the array.
    #[error("invalid acquisition order: {0}")]
    Order(#[from] OrderError),
    /// [`Writer::write_frame`](crate::Writer::write_frame) was given an index it cannot
    /// take (see [`FrameIndexError`]), or `push` was called on a writer written by index.
    #[error("frame index {index:?}: {problem}")]
    FrameIndex {
        /// The index given (empty for a `push` on an indexed writer).
        index: Vec<u64>,
        /// What is wrong with it.
        problem: FrameIndexError,
    },
    /// The acquisition order keeps more open at once than a budget allows: shard files
    /// reserved and unfinished, or staging memory.
    #[error(
        "the acquisition order keeps {needed} {what} open at once but {limit} allows {budget}; {advice}"
    )]
    WorkingSet {
        /// What is open (`"shards"`).
        what: &'static str,
        /// How many the order needs.
        needed: u64,
        /// What bounds it (`"max_open_shards"`).
        limit: &'static str,
        /// The bound.
        budget: u64,
        /// What to do about it.
        advice: &'static str,
    },
    /// Two writer options that exclude each other were both set.
    #[error("writer options {0} and {1} cannot be combined")]
    ConflictingOptions(&'static str, &'static str),
    /// A frame of the wrong byte length was pushed.
    #[error("frame {frame}: expected {expected} bytes, got {got}")]
    FrameSize {
        /// Index of the frame (0-based, counting every push).
        frame: u64,
        /// Bytes per frame of this array.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A frame of a different element type than the array's was pushed.
    #[error("frame {frame}: element type {got} does not match the array's data type {expected}")]
    DataType {
        /// Index of the frame.
        frame: u64,
        /// The array's data type.
        expected: DataType,
        /// The pushed element type.
        got: DataType,
    },
    /// The store path exists and overwriting was not requested.
    #[error("{path}: already exists (set overwrite to replace it)")]
    Exists {
        /// The store path.
        path: PathBuf,
    },
    /// Another live process is recording into this store.
    #[error("{path}: the store is locked by a writer that is still recording")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The filesystem is full.
    #[error("{op} {path}: disk full ({needed} bytes needed)")]
    DiskFull {
        /// What was being done (`"reserve"`, `"fallocate"`, `"write"`, …).
        op: &'static str,
        /// The file being written.
        path: PathBuf,
        /// Bytes that were being reserved or written (0 when unknown).
        needed: u64,
    },
    /// Any other I/O failure, with the operation and path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done (`"create"`, `"fallocate"`, …).
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Another process cut (truncated) a shard file while the writer was filling it.
    /// The writer never truncates its own temporary shards, so the chunks written before
    /// the cut may be gone: the shard is not finished, the writer stops (the shards
    /// published before stay valid), and the file is kept in `.zarrstream-partial/` for
    /// `zarrstream recover`, which keeps whatever chunks still verify. With the mmap and
    /// direct sinks, which write through a mapping of the file, the access that met the
    /// cut raised SIGBUS; the writer's SIGBUS guard caught it, so no process dies.
    #[error(
        "{path}: the shard file was truncated by another process while it was written \
         ({reason}); it is kept for `zarrstream recover`"
    )]
    ShardTruncated {
        /// The temporary shard file.
        path: PathBuf,
        /// How the cut was seen (the file's length against its reservation, a write
        /// through the mapping that met it, lost working-index entries).
        reason: String,
    },
    /// The array's append axis is bounded and every frame has been pushed.
    #[error("the array is full: it holds {frames} frames")]
    ArrayFull {
        /// Frames the array holds.
        frames: u64,
    },
    /// A [`Recording`](crate::Recording) was given an array key it cannot use: not a
    /// relative `/` path of plain names (empty, `.`, `..`, `c`, `zarr.json` or dot-prefixed
    /// components are refused), a key given twice, or a key inside another array's.
    #[error("array key {key:?}: {reason}")]
    ArrayKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A [`Recording`](crate::Recording) has no array with this key (or index).
    #[error("the recording has no array {key:?}")]
    UnknownArray {
        /// The key (or the index, as text) that was asked for.
        key: String,
    },
    /// `push` after `finish`, or after a failure closed the writer.
    #[error("the writer is closed")]
    Closed,
    /// A codec failed; it carries the library's message.
    #[error("codec {codec}: {message}")]
    Codec {
        /// Codec name.
        codec: &'static str,
        /// What failed.
        message: String,
    },
    /// An attribute name the caller may not set.
    #[error("attribute {name:?}: {reason}")]
    Attribute {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Per-frame metadata that does not fit the writer's
    /// [`FrameMetaSpec`](crate::FrameMetaSpec): an unknown field, a value of the wrong
    /// type, JSON for a writer that stores none. The frame was not pushed.
    #[error("frame metadata {field}: {reason}")]
    FrameMeta {
        /// The field (`"json"` for the free JSON object).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The path is a Zarr group that zarrstream did not create (no `zarrstream` marker
    /// in its attributes), or not a Zarr group at all; a [`Recording`](crate::Recording)
    /// adds arrays to someone else's group only with
    /// [`WriterOptions::existing_group`](crate::WriterOptions::existing_group).
    #[error("{path}: {reason}")]
    NotOwned {
        /// The group's directory.
        path: PathBuf,
        /// What was found there.
        reason: &'static str,
    },
    /// Resume was asked with a specification that differs from the array on disk.
    #[error("resume {path}: {field} differs: on disk {on_disk}, requested {requested}")]
    ResumeMismatch {
        /// The array's directory.
        path: PathBuf,
        /// The field that differs (`"codec"`, `"chunk_shape"`, `"dtype"`, …).
        field: &'static str,
        /// Its value on disk.
        on_disk: String,
        /// Its value in the request.
        requested: String,
    },
    /// The store was left by a writer that did not finish (temporary shards, or state
    /// `running` with no live writer): run `zarrstream recover` on it first.
    #[error("{path}: {reason}; run `zarrstream recover` on it first")]
    NeedsRecovery {
        /// The array's directory.
        path: PathBuf,
        /// What was found.
        reason: String,
    },
    /// An object-store destination failed: its URL, credentials, bucket, reachability,
    /// an upload, or a second coordinator (see [`RemoteError`]).
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The operation needs an OME-Zarr image (a writer made by `Writer::create_ome`).
    #[error("{0} needs an OME-Zarr image writer")]
    NotAnImage(&'static str),
    /// A writer thread died or panicked ([`Error::panicked`]); this is a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// [`Error::Internal`] for a panic caught in `context` (a thread, or an entry point
    /// of a binding that runs the writer under `catch_unwind`), with the panic's
    /// message when it has one.
    ///
    /// ```
    /// let payload = std::panic::catch_unwind(|| panic!("index out of range")).unwrap_err();
    /// let e = zarrstream::Error::panicked("a worker thread", payload.as_ref());
    /// assert_eq!(e.to_string(), "internal error: a worker thread panicked: index out of range");
    /// ```
    pub fn panicked(context: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        Error::Internal(format!("{context} panicked: {message}"))
    }

    /// Wraps an I/O error with its operation and path, turning a full disk or quota
    /// (`ENOSPC`, `EDQUOT`, `ERROR_DISK_FULL`, …) into [`Error::DiskFull`] so callers can match on one variant.
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
        source: io::Error,
        needed: u64,
    ) -> Self {
        let path = path.into();
        if is_disk_full(&source) {
            Error::DiskFull { op, path, needed }
        } else {
            Error::Io { op, path, source }
        }
    }
}

/// Whether `e` is a full disk or an exhausted quota: `std` classifies `ENOSPC` and
/// Windows' `ERROR_DISK_FULL`/`ERROR_HANDLE_DISK_FULL` as `StorageFull`, `EDQUOT` and
/// `ERROR_DISK_QUOTA_EXCEEDED` as `QuotaExceeded`.
fn is_disk_full(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// An I/O failure with what was being done and to which path: the one shape every
/// error enum of this crate (and of its tools) wraps, so that all of them read
/// `"<op> <path>: <OS error>"`.
///
/// ```
/// use std::io;
/// use zarrstream::IoError;
/// let e = IoError::new("read", "run.zarr/zarr.json", io::Error::from(io::ErrorKind::NotFound));
/// assert!(e.to_string().starts_with("read run.zarr/zarr.json: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}: {source}")]
pub struct IoError {
    /// What was being done (`"read"`, `"rename"`, `"fsync"`, …).
    pub op: &'static str,
    /// The path involved.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl IoError {
    /// An I/O error of `op` on `path`.
    pub fn new(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        IoError {
            op,
            path: path.into(),
            source,
        }
    }

    /// A closure for `map_err` that wraps an [`io::Error`] of `op` on `path`.
    ///
    /// ```
    /// use zarrstream::IoError;
    /// let path = std::path::Path::new("/nonexistent/zarr.json");
    /// let e = std::fs::read(path).map_err(IoError::with("read", path)).unwrap_err();
    /// assert_eq!(e.op, "read");
    /// ```
    pub fn with<'a>(
        op: &'static str,
        path: &'a std::path::Path,
    ) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| IoError::new(op, path, source)
    }
}

/// The writer's view of an I/O failure: a full filesystem becomes
/// [`Error::DiskFull`] (with 0 bytes needed, as the size is not known here).
impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        Error::io(e.op, e.path, e.source, 0)
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with an object-store destination (`s3://…`, `gs://…`, `az://…`,
/// `file://…`). Every variant names the destination URL (never its credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The URL or its options cannot be used (unknown scheme, no bucket, a bad option).
    #[error("{url}: {reason}")]
    Url {
        /// The destination as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store refused the credentials (unknown key, wrong secret, no permission on
    /// the bucket).
    #[error("{url}: the store refused the credentials ({message})")]
    Credentials {
        /// The destination.
        url: String,
        /// The store's answer.
        message: String,
    },
    /// The bucket (or container) does not exist.
    #[error("{url}: the bucket does not exist ({message})")]
    NoBucket {
        /// The destination.
        url: String,
        /// The store's answer.
        message: String,
    },
    /// The store did not answer (connection refused, timed out, name not resolved)
    /// within the retries.
    #[error("{url}: the store cannot be reached ({message})")]
    Unreachable {
        /// The destination.
        url: String,
        /// The last failure.
        message: String,
    },
    /// An upload failed after its retries. Every finished shard not yet uploaded is
    /// kept in the staging directory; `zarrstream upload STAGING` sends them later and
    /// republishes the metadata.
    #[error(
        "{url}: uploading {key} failed ({message}); the data not yet uploaded stays in {staging}: run `zarrstream upload {staging}` when the store is back",
        staging = staging.display()
    )]
    Upload {
        /// The destination.
        url: String,
        /// The object that failed.
        key: String,
        /// The last failure.
        message: String,
        /// The staging directory that keeps what was not uploaded.
        staging: PathBuf,
    },
    /// Another coordinator published the shared `zarr.json` in between (seen only on
    /// stores that enforce conditional writes).
    #[error("{url}: {key} was written by someone else in between ({message})")]
    Conflict {
        /// The destination.
        url: String,
        /// The object.
        key: String,
        /// The store's answer.
        message: String,
    },
    /// The staging directory cannot be used for this destination (it holds data of
    /// another destination, or data not yet uploaded).
    #[error("{path}: {reason}", path = path.display())]
    Staging {
        /// The staging directory.
        path: PathBuf,
        /// What was found there.
        reason: String,
    },
}
