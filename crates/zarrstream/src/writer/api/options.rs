//! The options of a [`Writer`](crate::writer::Writer): threads, sink, buffers, back-pressure,
//! durability, packing, chunk order.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::writer::api::order::AcquisitionOrder;

use crate::error::{Error, ParseError, Result};
use crate::frame_meta::FrameMetaSpec;
use crate::remote::{RemoteOptions, StagingLink};
use crate::shard::{ChunkOrder, Packing};
use crate::sink::SinkChoice;

/// [`WriterOptions::max_open_shards`] by default: far above what appending needs (a few
/// shard sets), and few enough files and reservations for any workstation.
pub(crate) const DEFAULT_MAX_OPEN_SHARDS: usize = 4096;

/// What `push` does when every frame buffer is in use (the encoders are behind).
/// In JSON `"block"` or `"drop"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Backpressure {
    /// Wait for a buffer: nothing is lost, the caller is slowed down.
    #[default]
    Block,
    /// Drop the frame and count it; its place in the array reads as the fill value.
    Drop,
}

/// How far data is flushed before the metadata makes it visible.
///
/// Every mode survives a crash of the process: finished shards are renamed into place
/// from the page cache, and `zarrstream recover` restores the chunks of unfinished ones.
/// They differ in what survives a power loss or kernel crash.
///
/// In JSON `"shard"`, `"none"` or `{"periodic": {"interval_ms": N}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
#[non_exhaustive]
pub enum Durability {
    /// Each shard is `fdatasync`ed before its rename and its directory synced after, and
    /// `zarr.json` is published after that: after a power loss every frame the metadata
    /// counted is on disk. Costs one flush per shard, on the finisher thread.
    #[default]
    Shard,
    /// Group commit: finished shards wait under their temporary names (where `recover`
    /// finds them), and every `interval` the finisher flushes all of them, renames them
    /// into place, flushes their directories, then publishes `zarr.json`. A shard is
    /// never in place before its data is flushed; a power loss loses at most the shards
    /// of the last interval, and the metadata never counts frames that were not flushed.
    /// Fewer, larger flushes than `Shard`.
    Periodic {
        /// Time between group commits, in milliseconds.
        #[serde(
            rename = "interval_ms",
            deserialize_with = "crate::de::positive_millis"
        )]
        #[schemars(schema_with = "crate::de::positive_millis_schema")]
        interval: Duration,
    },
    /// No flushes of shard data (each `zarr.json` publication is still written with
    /// temp file, fsync and rename): after a power loss, recently finished shards may be
    /// missing or empty although the metadata counts them.
    None,
}

impl Backpressure {
    /// `block` or `drop`, as [`FromStr`](std::str::FromStr) accepts it and as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Backpressure::Block => "block",
            Backpressure::Drop => "drop",
        }
    }
}

impl std::str::FromStr for Backpressure {
    type Err = ParseError;

    /// Parses `block` or `drop`.
    fn from_str(s: &str) -> std::result::Result<Self, ParseError> {
        match s {
            "block" => Ok(Backpressure::Block),
            "drop" => Ok(Backpressure::Drop),
            _ => Err(ParseError::new("back-pressure mode", s, "block, drop")),
        }
    }
}

impl fmt::Display for Backpressure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The forms [`Durability`]'s [`FromStr`](std::str::FromStr) accepts.
const DURABILITY_FORMS: &str = "shard, none, periodic:MS with MS > 0";

impl std::str::FromStr for Durability {
    type Err = ParseError;

    /// Parses `shard`, `none` or `periodic:MS` (a group commit every MS milliseconds,
    /// MS > 0), the command-line form; [`Display`](fmt::Display) prints the same.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zarrstream::Durability;
    /// let d: Durability = "periodic:250".parse()?;
    /// assert_eq!(d, Durability::Periodic { interval: Duration::from_millis(250) });
    /// assert_eq!(d.to_string(), "periodic:250");
    /// assert!("periodic:0".parse::<Durability>().is_err());
    /// # Ok::<(), zarrstream::ParseError>(())
    /// ```
    fn from_str(s: &str) -> std::result::Result<Self, ParseError> {
        match s {
            "shard" => Ok(Durability::Shard),
            "none" => Ok(Durability::None),
            _ => s
                .strip_prefix("periodic:")
                .and_then(|ms| ms.parse::<u64>().ok())
                .filter(|&ms| ms > 0)
                .map(|ms| Durability::Periodic {
                    interval: Duration::from_millis(ms),
                })
                .ok_or_else(|| ParseError::new("durability", s, DURABILITY_FORMS)),
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Durability::Shard => f.write_str("shard"),
            Durability::None => f.write_str("none"),
            Durability::Periodic { interval } => write!(f, "periodic:{}", interval.as_millis()),
        }
    }
}

/// Options of a [`Writer`](crate::writer::Writer); `Default` gives the documented defaults.
///
/// New options may be added in any release, so build a value from the default with the
/// chainable setters (one per field, named after it) rather than a struct literal;
/// reading the fields is fine.
///
/// ```
/// use zarrstream::{Backpressure, SinkChoice, WriterOptions};
/// let options = WriterOptions::default()
///     .threads(2)
///     .sink(SinkChoice::Pwrite)
///     .backpressure(Backpressure::Drop);
/// assert_eq!(options.threads, 2);
/// ```
///
/// It is also the `writer` section of a JSON configuration ([`crate::config`]): every
/// field by its name, but `remote` and `frame_meta`, which are sections of their own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "writer")]
#[non_exhaustive]
pub struct WriterOptions {
    /// Encoding threads (0 = one per core), worker `i` pinned to core `i mod cores`.
    /// With the [direct](SinkChoice::Direct) sink each also has two write-behind
    /// threads (not pinned): a direct write waits until the device has the bytes, so
    /// the worker hands its encoded chunks to them and encodes on.
    pub threads: usize,
    /// Pin worker `i` to core `i mod cores`.
    pub pin_threads: bool,
    /// Scheduling niceness of the writer's own threads — workers, shard preparer and
    /// finisher — (0..=19; on Linux per thread). Encoding and finishing shards are
    /// throughput work; the thread that pushes frames is latency work. With the writer's
    /// threads a few steps nicer, a push that wakes one of them (handing a shard to the
    /// finisher, say) is not preempted by it, and a push waits for its frame copy, not
    /// behind an encode, when every core is busy. 0 leaves priorities alone.
    pub background_nice: u8,
    /// Which sink writes shard files: `"auto"`, `"mmap"`, `"pwrite"` or `"direct"`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String", extend("enum" = ["auto", "mmap", "pwrite", "direct"]))]
    pub sink: SinkChoice,
    /// Frame buffers in the pool (0 = `2 × threads + 2`, at most 65536); bounds the
    /// memory for frames not yet encoded. Arrays with chunks deeper than one frame stage
    /// rows instead and keep only 2 frame buffers (for [`Writer::buffer`](crate::writer::Writer::buffer)).
    pub pool_frames: usize,
    /// Extra staging groups beyond those that must be open at once (deep chunks only;
    /// lets the pushing thread run ahead of the encoders).
    pub spare_groups: usize,
    /// Behaviour when the pool is exhausted.
    pub backpressure: Backpressure,
    /// Flushing policy.
    pub durability: Durability,
    /// What happens to unused slot space when a shard is finished: `"compact"` or
    /// `"sparse"`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String", extend("enum" = ["compact", "sparse"]))]
    pub packing: Packing,
    /// The order of the inner chunks' bytes inside each shard file (the shard index
    /// stays in C order; readers follow it, so the order is recorded nowhere).
    /// [`ChunkOrder::Morton`] keeps the chunks of a spatial block together, so a reader
    /// of a region fetches fewer byte ranges. The mmap and pwrite sinks write each chunk
    /// into a slot at its place in this order and compaction keeps it; with
    /// [`SinkChoice::Auto`] a Morton order selects the mmap sink (pwrite where a
    /// mapping is unsafe). The direct sink appends chunks as they complete, so it takes
    /// C order only ([`Error::ConflictingOptions`]). A [`Packing::Sparse`] shard has its
    /// chunks in their slots, in this order too. `"c"` or `"morton"`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String", extend("enum" = ["c", "morton"]))]
    pub chunk_order: ChunkOrder,
    /// The order in which frames will arrive, when they are written by index
    /// ([`Writer::write_frame`](crate::writer::Writer::write_frame)) in an order other than
    /// storage order: shard files are prepared in the order the acquisition first
    /// reaches them, and the staging groups and shards it keeps open at once are sized
    /// (and checked against [`max_open_shards`](Self::max_open_shards)) for it. `None`:
    /// storage order, as appended; indexed frames may then stray from it only as far as
    /// the open shards allow ([`Error::WorkingSet`](crate::Error::WorkingSet)). In JSON
    /// axis numbers or the array's dimension names, outermost loop first.
    #[schemars(schema_with = "crate::de::order_schema")]
    pub acquisition_order: Option<AcquisitionOrder>,
    /// The most shard files reserved and not yet finished at once (each holds its
    /// worst-case size on disk and, with the mmap sink, in memory): an acquisition order
    /// that needs more is refused when the writer is created.
    pub max_open_shards: usize,
    /// Replace an existing store at the path.
    pub overwrite: bool,
    /// Per-frame metadata to store beside the array (`frame_meta/`), pushed with
    /// [`Writer::push_with`](crate::writer::Writer::push_with); `None` stores none.
    #[serde(skip)]
    pub frame_meta: Option<FrameMetaSpec>,
    /// Continue an array that zarrstream finished (or that `zarrstream recover`
    /// repaired) instead of creating one: the first frame pushed follows the last one
    /// committed, with the same specification (checked, [`Error::ResumeMismatch`]).
    /// For a [`Recording`](crate::writer::Recording), every array is resumed.
    pub resume: bool,
    /// Let a [`Recording`](crate::writer::Recording) add its arrays to an existing Zarr group it
    /// did not create (refused otherwise, [`Error::NotOwned`]); that group's `zarr.json`
    /// is never rewritten, except by an explicit
    /// [`set_root_attribute`](crate::writer::Recording::set_root_attribute).
    pub existing_group: bool,
    /// How an object-store destination (`s3://bucket/prefix`, …) is staged and
    /// uploaded; unused for a local path. See [`remote`](crate::remote).
    #[serde(skip)]
    pub remote: RemoteOptions,
    /// The uploader's gate when the destination is an object store (set by `create`).
    #[serde(skip)]
    pub(crate) staging: StagingLink,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            threads: 0,
            pin_threads: true,
            background_nice: 5,
            sink: SinkChoice::Auto,
            pool_frames: 0,
            spare_groups: 1,
            backpressure: Backpressure::Block,
            durability: Durability::Shard,
            packing: Packing::Compact,
            chunk_order: ChunkOrder::C,
            acquisition_order: None,
            max_open_shards: DEFAULT_MAX_OPEN_SHARDS,
            overwrite: false,
            frame_meta: None,
            resume: false,
            existing_group: false,
            remote: RemoteOptions::default(),
            staging: StagingLink::default(),
        }
    }
}

/// Chainable setters, so that options are built from [`WriterOptions::default`] and new
/// fields can be added without breaking callers.
impl WriterOptions {
    /// Sets [`acquisition_order`](Self::acquisition_order): the loop order of the
    /// frames written by index.
    #[must_use]
    pub fn acquisition_order(mut self, order: AcquisitionOrder) -> Self {
        self.acquisition_order = Some(order);
        self
    }

    /// Sets [`max_open_shards`](Self::max_open_shards).
    #[must_use]
    pub fn max_open_shards(mut self, max_open_shards: usize) -> Self {
        self.max_open_shards = max_open_shards;
        self
    }

    /// Sets [`threads`](Self::threads): encoding threads (0 = one per core).
    #[must_use]
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Sets [`pin_threads`](Self::pin_threads): pin worker `i` to core `i mod cores`.
    #[must_use]
    pub fn pin_threads(mut self, pin_threads: bool) -> Self {
        self.pin_threads = pin_threads;
        self
    }

    /// Sets [`background_nice`](Self::background_nice): the niceness of the writer's
    /// own threads (0..=19; 0 leaves priorities alone).
    #[must_use]
    pub fn background_nice(mut self, background_nice: u8) -> Self {
        self.background_nice = background_nice;
        self
    }

    /// Sets [`sink`](Self::sink): which sink writes shard files.
    #[must_use]
    pub fn sink(mut self, sink: SinkChoice) -> Self {
        self.sink = sink;
        self
    }

    /// Sets [`pool_frames`](Self::pool_frames): frame buffers in the pool (0 = derived
    /// from the threads).
    #[must_use]
    pub fn pool_frames(mut self, pool_frames: usize) -> Self {
        self.pool_frames = pool_frames;
        self
    }

    /// Sets [`spare_groups`](Self::spare_groups): extra staging groups for chunks deeper
    /// than one frame.
    #[must_use]
    pub fn spare_groups(mut self, spare_groups: usize) -> Self {
        self.spare_groups = spare_groups;
        self
    }

    /// Sets [`backpressure`](Self::backpressure): what a push does when every frame
    /// buffer is in use.
    #[must_use]
    pub fn backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = backpressure;
        self
    }

    /// Sets [`durability`](Self::durability): how far data is flushed before the
    /// metadata makes it visible.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets [`packing`](Self::packing): what happens to unused slot space when a shard
    /// is finished.
    #[must_use]
    pub fn packing(mut self, packing: Packing) -> Self {
        self.packing = packing;
        self
    }

    /// Sets [`chunk_order`](Self::chunk_order): the order of the inner chunks' bytes
    /// inside each shard file.
    ///
    /// ```
    /// use zarrstream::{ChunkOrder, WriterOptions};
    /// let options = WriterOptions::default().chunk_order(ChunkOrder::Morton);
    /// assert_eq!(options.chunk_order, ChunkOrder::Morton);
    /// ```
    #[must_use]
    pub fn chunk_order(mut self, chunk_order: ChunkOrder) -> Self {
        self.chunk_order = chunk_order;
        self
    }

    /// Sets [`frame_meta`](Self::frame_meta): per-frame metadata stored beside the array.
    #[must_use]
    pub fn frame_meta(mut self, spec: FrameMetaSpec) -> Self {
        self.frame_meta = Some(spec);
        self
    }

    /// Sets [`overwrite`](Self::overwrite): replace an existing store at the path.
    #[must_use]
    pub fn overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Sets [`resume`](Self::resume): continue the finished array at the path.
    #[must_use]
    pub fn resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// Sets [`existing_group`](Self::existing_group): add a recording's arrays to an
    /// existing Zarr group zarrstream did not create.
    #[must_use]
    pub fn existing_group(mut self, existing_group: bool) -> Self {
        self.existing_group = existing_group;
        self
    }
}

impl WriterOptions {
    /// Bounds that keep the derived sizes (pool, queue) far from overflow.
    /// How an object-store destination is staged and uploaded (see [`RemoteOptions`]).
    #[must_use]
    pub fn remote(mut self, remote: RemoteOptions) -> Self {
        self.remote = remote;
        self
    }

    pub(in crate::writer) fn validate(&self) -> Result<()> {
        for (option, value, max) in [
            ("threads", self.threads, 1024),
            ("pool_frames", self.pool_frames, 1 << 16),
            ("spare_groups", self.spare_groups, 1 << 16),
            ("background_nice", usize::from(self.background_nice), 19),
            ("max_open_shards", self.max_open_shards, 1 << 20),
        ] {
            if value > max {
                return Err(Error::InvalidOption { option, value, max });
            }
        }
        self.remote.validate()?;
        if self.resume && self.overwrite {
            return Err(Error::ConflictingOptions("resume", "overwrite"));
        }
        if self.resume && self.acquisition_order.is_some() {
            return Err(Error::ConflictingOptions("resume", "acquisition_order"));
        }
        if self.chunk_order != ChunkOrder::C && self.sink == SinkChoice::Direct {
            return Err(Error::ConflictingOptions(
                "chunk_order morton",
                "sink direct",
            ));
        }
        // Before anything is created, so a bad field name leaves nothing behind.
        if let Some(spec) = &self.frame_meta {
            spec.validate().map_err(|reason| Error::FrameMeta {
                field: "(spec)".into(),
                reason,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_set_their_field_and_nothing_else() {
        let o = WriterOptions::default()
            .threads(3)
            .pin_threads(false)
            .background_nice(0)
            .sink(SinkChoice::Pwrite)
            .pool_frames(8)
            .spare_groups(2)
            .backpressure(Backpressure::Drop)
            .durability(Durability::None)
            .packing(Packing::Sparse)
            .chunk_order(ChunkOrder::Morton)
            .acquisition_order(AcquisitionOrder::new([1, 0]))
            .max_open_shards(9)
            .overwrite(true)
            .frame_meta(FrameMetaSpec::new().field("t", crate::MetaType::Float64))
            .resume(true)
            .existing_group(true)
            .remote(RemoteOptions::default().staging_budget(7).part(1));
        let want = WriterOptions {
            threads: 3,
            pin_threads: false,
            background_nice: 0,
            sink: SinkChoice::Pwrite,
            pool_frames: 8,
            spare_groups: 2,
            backpressure: Backpressure::Drop,
            durability: Durability::None,
            packing: Packing::Sparse,
            chunk_order: ChunkOrder::Morton,
            acquisition_order: Some(AcquisitionOrder::new([1, 0])),
            max_open_shards: 9,
            overwrite: true,
            frame_meta: Some(FrameMetaSpec::new().field("t", crate::MetaType::Float64)),
            resume: true,
            existing_group: true,
            remote: RemoteOptions {
                staging_budget: 7,
                part: Some(1),
                ..RemoteOptions::default()
            },
            staging: StagingLink::default(),
        };
        assert_eq!(o, want);
        assert_eq!(WriterOptions::default().threads(5).threads, 5);
    }

    #[test]
    fn morton_order_refuses_the_direct_sink() {
        let morton = WriterOptions::default().chunk_order(ChunkOrder::Morton);
        for sink in [SinkChoice::Auto, SinkChoice::Mmap, SinkChoice::Pwrite] {
            assert!(morton.clone().sink(sink).validate().is_ok(), "{sink}");
        }
        let e = morton.sink(SinkChoice::Direct).validate().unwrap_err();
        assert!(matches!(e, Error::ConflictingOptions(..)), "{e}");
        assert_eq!(
            e.to_string(),
            "writer options chunk_order morton and sink direct cannot be combined"
        );
    }

    #[test]
    fn durability_and_backpressure_parse_what_they_print() {
        let modes = [
            Durability::Shard,
            Durability::None,
            Durability::Periodic {
                interval: Duration::from_millis(20),
            },
        ];
        for d in modes {
            assert_eq!(d.to_string().parse::<Durability>(), Ok(d), "{d}");
        }
        for bad in [
            "",
            "periodic",
            "periodic:",
            "periodic:0",
            "periodic:-5",
            "Shard",
        ] {
            let e = bad.parse::<Durability>().unwrap_err();
            assert_eq!((e.what, e.input.as_str()), ("durability", bad));
            assert!(e.to_string().contains("periodic:MS"), "{e}");
        }
        for b in [Backpressure::Block, Backpressure::Drop] {
            assert_eq!(b.to_string().parse::<Backpressure>(), Ok(b));
        }
        let e = "wait".parse::<Backpressure>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"wait\" is not a back-pressure mode (block, drop)"
        );
    }
}
