//! # zarrstream
//!
//! Records camera streams into sharded Zarr v3 arrays at the speed of the camera.
//!
//! Frames (2-D planes of an N-D array whose axis 0 is the append axis) are tiled into
//! inner chunks; worker threads encode each inner chunk straight into its fixed slot of a
//! preallocated shard file (memory-mapped, or written with `pwrite`); a finisher thread
//! writes the shard index, compacts, renames the shard into place and republishes
//! `zarr.json`. See `ARCHITECTURE.md` for the data flow.
//!
//! The user guide is the book in `docs/book` of the repository (build it with
//! `tools/book/build`); this documentation is the reference of every type.
//!
//! # Which type do I need
//!
//! | to … | use |
//! |---|---|
//! | describe an array (shape, chunks, shards, data type, codec) | [`ArraySpec::builder`], [`Codec`], [`DataType`] |
//! | record one camera into one array | [`Writer::create`], with [`WriterOptions`] |
//! | record an OME-Zarr image, with a pyramid and display windows | [`Writer::create_ome`], [`Ome`], [`Levels`], [`Omero`] |
//! | record several arrays (cameras, positions) with one thread pool | [`Recording::create`], [`ArrayConfig`] |
//! | record a high-content screening plate | [`Recording::create_plate`], [`Plate`] |
//! | write frames in the acquisition's own order | [`Writer::write_frame`], [`AcquisitionOrder`] |
//! | store metadata per frame | [`FrameMetaSpec`], [`FrameMeta`], [`Writer::push_with`] |
//! | know the memory before starting | [`estimate_memory`], [`MemoryEstimate`] |
//! | record to S3 (or another object store) | [`remote::RemoteOptions`] |
//! | configure from JSON (the C API's and Python's path) | [`config`] |
//! | repair, read or check a store | [`recover::recover_store`], [`store::StoreReader`] |
//! | handle failures | [`Error`] |
//!
//! ```no_run
//! use zarrstream::{ArraySpec, Codec, DataType, Writer, WriterOptions};
//! let spec = ArraySpec::builder()
//!     .shape([0, 2048, 2048])
//!     .chunk_shape([1, 512, 512])
//!     .shard_shape([32, 2048, 2048])
//!     .dtype(DataType::UInt16)
//!     .codec(Codec::blosc_lz4(1))
//!     .dimension_names(["t", "y", "x"])
//!     .build()?;
//! let mut writer = Writer::create("run.zarr", spec, WriterOptions::default())?;
//! # let camera: Vec<Vec<u16>> = vec![];
//! for frame in camera {
//!     let _ = writer.push(&frame)?;
//! }
//! let stats = writer.finish()?;
//! println!("{} frames in {:.2} s", stats.frames_written, stats.seconds);
//! # Ok::<(), zarrstream::Error>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod config;
mod de;
pub mod document;
mod dtype;
mod error;
mod frame_meta;
mod metadata;
mod meter;
#[cfg(all(feature = "loom", test))]
mod model;
mod ome;
#[allow(unsafe_code)]
mod platform;
mod pyramid;
pub mod read;
pub mod recover;
pub mod remote;
mod shard;
mod sink;
#[allow(unsafe_code)]
mod slots;
mod spec;
mod stats;
pub mod store;
mod sync;
mod tile;
mod writer;

/// The Rust examples of the README and of the book (`docs/book`), compiled and run as
/// doctests by `cargo test -p zarrstream --doc`, so what users copy works.
#[cfg(doctest)]
mod book {
    #[doc = include_str!("../../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../../docs/book/src/getting-started/rust.md")]
    pub struct GettingStartedRust;
    #[doc = include_str!("../../../docs/book/src/guide/acquisition-order.md")]
    pub struct GuideAcquisitionOrder;
    #[doc = include_str!("../../../docs/book/src/guide/ome-zarr.md")]
    pub struct GuideOmeZarr;
    #[doc = include_str!("../../../docs/book/src/guide/recordings.md")]
    pub struct GuideRecordings;
    #[doc = include_str!("../../../docs/book/src/guide/metadata.md")]
    pub struct GuideMetadata;
    #[doc = include_str!("../../../docs/book/src/guide/object-stores.md")]
    pub struct GuideObjectStores;
    #[doc = include_str!("../../../docs/book/src/guide/memory.md")]
    pub struct GuideMemory;
}

pub use codec::{BloscCompressor, BloscShuffle, Checksum, ChunkEncoder, Codec};
pub use dtype::{DataType, Element};
pub use error::{
    Error, ErrorKind, FrameIndexError, IoError, OmeError, OrderError, ParseError, PlateError,
    RemoteError, Result, SpecError,
};
pub use frame_meta::{FrameMeta, FrameMetaSpec, MetaType, MetaValue};
pub use meter::MemoryUsage;
pub use ome::{
    Acquisition, Axis, AxisKind, DISPLAY_HIGH_QUANTILE, DISPLAY_LOW_QUANTILE,
    DISPLAY_SAMPLE_INTERVAL, LEVEL_LZ4_ACCELERATION, LEVEL0_PATH, OME_VERSION, Ome, Omero,
    OmeroChannel, Plate, PlateImage, SpaceUnit, TimeUnit, Window,
};
pub use pyramid::{Downsample, Levels, MAX_LEVELS};
pub use shard::{ChunkOrder, Packing};
pub use sink::{SinkChoice, SinkKind};
pub use spec::{ArraySpec, ArraySpecBuilder, IndexLocation, MAX_CHUNKS_PER_SHARD};
pub use stats::{LatencySummary, Stats};
pub use writer::{
    AcquisitionOrder, ArrayConfig, ArrayId, ArrayWriter, Backpressure, Durability, MemoryEstimate,
    PoolBuf, PushOutcome, Recording, RecordingStats, WINDOW_ROWS, Writer, WriterOptions,
    estimate_memory, estimate_memory_ome,
};
