//! The on-disk contract of a store and its reader.
//!
//! An array written by zarrstream is a directory holding:
//!
//! * `zarr.json` ([`METADATA_FILE`]), republished atomically ([`publish_bytes`]) as frames
//!   are committed;
//! * finished shard files under `c/` ([`CHUNK_DIR`]), one per shard key `c/0/1/2`
//!   ([`shard_key`], [`parse_shard_key`]);
//! * while a writer records, `.zarrstream-partial/` ([`PARTIAL_DIR`]): the shards being
//!   filled (`c.0.1.2.partial`, [`partial_file_name`]) and the writer's lock
//!   ([`LOCK_FILE`], held by a [`StoreLock`]).
//!
//! The writer, [`recover`](crate::recover) and the `zarrstream` tool all take these
//! names from this module. [`StoreReader`] opens a finished (or recovered) array and
//! walks, reads and checks its shards; on top of it, [`summarise`] and [`shard_index`]
//! describe what is stored and [`verify`] checks every chunk (the data behind
//! `zarrstream inspect` and `zarrstream verify`).
//!
//! ```no_run
//! use zarrstream::store::StoreReader;
//! let store = StoreReader::open("run.zarr".as_ref())?;
//! for shard in store.shards()? {
//!     let file = store.open_shard(&shard)?;
//!     let entries = store.read_index(&shard, &file)?;
//!     println!("{}: {} chunks", shard.key, entries.iter().flatten().count());
//! }
//! # Ok::<(), zarrstream::store::StoreError>(())
//! ```

mod check;
mod contract;
mod group;
mod key;
mod lock;
mod progress;
mod publish;
mod reader;
mod summary;
#[cfg(test)]
mod tests;
mod verify;
#[cfg(test)]
mod written_tests;

pub use crate::shard::{LayoutOverflow, ShardLayout};
pub use check::{CheckedBy, ChunkFault, EntryFault, read_chunk};
pub(crate) use check::{check_chunk, stored_len};
pub(crate) use contract::bad_node_name;
pub use contract::{
    CHUNK_DIR, COMPACTING_EXTENSION, CREATING_EXTENSION, LOCK_FILE, METADATA_FILE, PARTIAL_DIR,
    PARTIAL_SUFFIX, REBUILD_SUFFIX, UNRECOVERABLE_SUFFIX, is_leftover, partial_file_name,
    partial_key,
};
pub(crate) use group::{GroupState, group_document, group_state, plain_group, recording_group};
pub use key::{parse_shard_key, shard_key};
pub use lock::StoreLock;
pub(crate) use lock::prepare_dir;
pub(crate) use publish::{
    VANISHED_TRIES, create_dirs, create_dirs_durably, prune_empty_dirs, sync_shard_dir,
};
pub use publish::{publish_bytes, sync_dir};
pub use reader::{Shard, StoreError, StoreReader};
pub use summary::{
    ArrayInfo, IndexRow, ShardIndex, ShardInfo, Summary, allocated_bytes, shard_index, summarise,
};
pub use verify::{Problem, Report, verify};
