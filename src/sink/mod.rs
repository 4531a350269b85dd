//! Slot sinks: how encoded chunks reach a shard file. Both sinks use the same
//! preallocated file and the same [`ShardLayout`]; they differ in how bytes get there.

mod mmap;
mod pwrite;
mod temp;

use std::path::Path;

pub(crate) use temp::{CREATING_EXTENSION, TempShard};

use crate::error::{Error, Result};
use crate::shard::{FinalLayout, ShardLayout};

/// Which sink writes the shard files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SinkChoice {
    /// The measured default: `pwrite`. In `cargo bench --bench throughput` (C1 and C2 ×
    /// lz4:1, zstd:1, none; 2 cores, ext4; medians of 3 rounds; BENCHMARKS.md) pwrite was
    /// faster on 5 of 6 workload × codec pairs (C1 lz4:1 2248 vs 1355 MiB/s, zstd:1 452 vs 406,
    /// none 1550 vs 1239), with 49–51 MiB extra resident memory on C1 against 550–822 MiB
    /// for mmap, whose first touch of each mapped page costs a fault and a page zeroing
    /// (the mapped shard pages also count as resident), and with lower push latency.
    #[default]
    Auto,
    /// Workers encode straight into a shared mapping of the shard (no copy). Falls back
    /// to `pwrite` where a reservation does not protect a mapping (btrfs, ZFS, NFS,
    /// CIFS/SMB, FUSE, AFS), since a full disk would then raise SIGBUS.
    Mmap,
    /// Workers encode into a per-thread buffer and append it to the shard file with
    /// `pwrite` (one writer per file at a time; chunks back to back, nothing to compact).
    Pwrite,
}

/// The sink actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// Memory-mapped shard files.
    Mmap,
    /// Positioned writes.
    Pwrite,
}

impl SinkKind {
    /// `mmap` or `pwrite`.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Mmap => "mmap",
            SinkKind::Pwrite => "pwrite",
        }
    }
}

impl SinkChoice {
    /// Parses `auto`, `mmap`, `pwrite`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => SinkChoice::Auto,
            "mmap" => SinkChoice::Mmap,
            "pwrite" => SinkChoice::Pwrite,
            _ => return None,
        })
    }

    /// Resolves the choice for the filesystem holding `dir`.
    pub(crate) fn resolve(self, dir: &Path) -> SinkKind {
        match self {
            SinkChoice::Mmap if mapping_is_safe(dir) => SinkKind::Mmap,
            SinkChoice::Auto | SinkChoice::Mmap | SinkChoice::Pwrite => SinkKind::Pwrite,
        }
    }
}

/// Filesystems where `fallocate` does not guarantee that writing a mapped page succeeds
/// (copy-on-write or remote), so a full disk would raise SIGBUS instead of an error.
fn mapping_is_safe(dir: &Path) -> bool {
    const UNSAFE_FS: [u64; 7] = [
        0x9123_683e, // btrfs
        0x2fc1_2fc1, // zfs
        0x6969,      // nfs
        0xff53_4d42, // cifs
        0xfe53_4d42, // smb2
        0x6573_5546, // fuse
        0x5346_414f, // afs
    ];
    match rustix::fs::statfs(dir) {
        Ok(st) => !UNSAFE_FS.contains(&(st.f_type as u64)),
        Err(_) => false,
    }
}

/// One shard file being filled by the workers.
pub(crate) trait SlotSink: Send + Sync {
    /// Encodes chunk `i` with `encode` (which returns the bytes used), writes it, then
    /// records its working-index entry, so a crash never leaves an entry pointing at
    /// unwritten data. Returns where the chunk is, `(offset, nbytes)`.
    fn write_chunk(
        &self,
        i: usize,
        scratch: &mut Vec<u8>,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<(u64, u64)>;

    /// Writes chunk `i`, already encoded in memory as `data` followed by `tail` (an
    /// uncompressed staged chunk and its crc32c), without copying it into a buffer first,
    /// like [`write_chunk`](Self::write_chunk) otherwise. `None` if this sink has no
    /// such path.
    fn write_encoded(&self, _i: usize, _data: &[u8], _tail: &[u8]) -> Option<Result<(u64, u64)>> {
        None
    }

    /// Whether chunks are written back to back (no slot gaps), so finishing the shard
    /// moves nothing ([`packed`](crate::shard::packed) instead of a compaction plan).
    fn packs_chunks(&self) -> bool {
        false
    }

    /// Makes the slots `first..end` cheap to write (the mmap sink populates its pages);
    /// called by the preparer thread, possibly while workers write other slots.
    fn prefault(&self, _first: usize, _end: usize) {}

    /// Leaves the temporary file in place when the sink is dropped unfinished, so that
    /// `recover` can restore its chunks (used when the writer fails).
    fn keep_for_recovery(&self);

    /// Moves chunks and writes the final index per `fin`, releases any mapping and cuts
    /// the file to its final length. Called once, after every chunk was written.
    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard>;
}

/// Creates the temporary shard file at `path` and opens the sink of `kind` over it.
pub(crate) fn open(kind: SinkKind, path: &Path, layout: ShardLayout) -> Result<Box<dyn SlotSink>> {
    let temp = TempShard::create(path, layout)?;
    Ok(match kind {
        SinkKind::Mmap if temp.reserved => Box::new(mmap::MmapSink::new(temp)?),
        _ => Box::new(pwrite::PwriteSink::new(temp)),
    })
}

fn internal(msg: &str) -> Error {
    Error::Internal(msg.to_string())
}
