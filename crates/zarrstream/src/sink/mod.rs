//! Slot sinks: how encoded chunks reach a shard file. The three sinks use the same
//! preallocated file and the same [`ShardLayout`]; they differ in how bytes get there.

pub(crate) mod bump;
mod direct;
mod intact;
mod mmap;
mod pwrite;
mod temp;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub(crate) use temp::TempShard;

use std::sync::Arc;

use crate::error::{Error, ParseError, Result};
use crate::meter::{Held, Meter, page_span};
use crate::shard::{ChunkOrder, FinalLayout, ShardLayout, SlotOrder};

/// Which sink writes the shard files.
///
/// Parses from and prints as `auto`, `mmap`, `pwrite`, `direct`:
///
/// ```
/// use zarrstream::SinkChoice;
/// assert_eq!("direct".parse::<SinkChoice>()?, SinkChoice::Direct);
/// assert_eq!(SinkChoice::Pwrite.to_string(), "pwrite");
/// # Ok::<(), zarrstream::ParseError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SinkChoice {
    /// The measured default: [`Direct`](Self::Direct) where it is supported, else
    /// `pwrite`. In `cargo bench --bench throughput` (both workloads, each codec) direct
    /// was the fastest sink, with about pwrite's extra resident memory (the pool and
    /// staging, plus a few MiB). pwrite copies every encoded byte into the page cache and
    /// the kernel's threads write it back, on the cores the encoders need; mmap pays a
    /// page fault and a page zeroing at the first touch of each mapped page, and its
    /// mapped pages count as resident. With a
    /// [`ChunkOrder::Morton`](crate::ChunkOrder::Morton) chunk order: `Mmap`, since only
    /// the slot sinks lay chunks out in an order of their own.
    #[default]
    Auto,
    /// Workers encode straight into a shared mapping of the shard (no copy). Falls back
    /// to `pwrite` where a reservation does not protect a mapping (btrfs, ZFS, NFS,
    /// CIFS/SMB, FUSE, AFS), since a full disk would then raise SIGBUS.
    Mmap,
    /// Workers encode into a per-thread buffer and append it to the shard file with
    /// `pwrite` (positions handed out without a lock; chunks back to back, nothing to
    /// compact).
    /// With a [`ChunkOrder::Morton`](crate::ChunkOrder::Morton) chunk order each chunk is
    /// written into its slot instead, and the finished shard is compacted in that order.
    Pwrite,
    /// Workers encode into a page-aligned per-thread buffer and append it with
    /// `O_DIRECT` writes, which bypass the page cache: no copy into the cache and no
    /// writeback by the kernel's threads. Chunks start at 4 KiB boundaries and are
    /// padded with zeros to the next one (the index holds their true length), so a
    /// shard is up to 4 KiB − 1 per chunk larger. Falls back to `pwrite` where chunk
    /// slots are smaller than 64 KiB (their layout is not block-aligned), where the
    /// filesystem refuses a direct write, and where [`Mmap`](Self::Mmap) would (the
    /// working index is written through a mapping). Chunks lie in the order they
    /// complete, so a [`ChunkOrder::Morton`](crate::ChunkOrder::Morton) chunk order is
    /// refused with it.
    Direct,
}

/// The sink actually used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkKind {
    /// Memory-mapped shard files.
    Mmap,
    /// Positioned writes.
    Pwrite,
    /// Positioned `O_DIRECT` writes of block-padded chunks.
    Direct,
}

impl SinkKind {
    /// `mmap`, `pwrite` or `direct`.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkKind::Mmap => "mmap",
            SinkKind::Pwrite => "pwrite",
            SinkKind::Direct => "direct",
        }
    }
}

impl SinkChoice {
    /// `auto`, `mmap`, `pwrite` or `direct`, as [`FromStr`] accepts it.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkChoice::Auto => "auto",
            SinkChoice::Mmap => "mmap",
            SinkChoice::Pwrite => "pwrite",
            SinkChoice::Direct => "direct",
        }
    }

    /// Resolves the choice for shards of `layout` in `dir` (a directory on the
    /// store's filesystem, where the direct sink's probe file may be written) whose
    /// chunks lie in `order`. Only the slot sinks lay chunks out in an order other than
    /// C: `Auto` then means `Mmap` (the options refuse `Direct` with such an order).
    pub(crate) fn resolve(self, dir: &Path, layout: &ShardLayout, order: ChunkOrder) -> SinkKind {
        let slots = order != ChunkOrder::C;
        match self {
            SinkChoice::Mmap if crate::platform::mapping_is_safe(dir) => SinkKind::Mmap,
            SinkChoice::Auto | SinkChoice::Direct if slots => {
                if crate::platform::mapping_is_safe(dir) {
                    SinkKind::Mmap
                } else {
                    SinkKind::Pwrite
                }
            }
            SinkChoice::Auto | SinkChoice::Direct
                if crate::platform::mapping_is_safe(dir) && direct::supported(dir, layout) =>
            {
                SinkKind::Direct
            }
            SinkChoice::Auto | SinkChoice::Mmap | SinkChoice::Pwrite | SinkChoice::Direct => {
                SinkKind::Pwrite
            }
        }
    }
}

impl FromStr for SinkChoice {
    type Err = ParseError;

    /// Parses `auto`, `mmap`, `pwrite`, `direct`.
    fn from_str(s: &str) -> std::result::Result<Self, ParseError> {
        Ok(match s {
            "auto" => SinkChoice::Auto,
            "mmap" => SinkChoice::Mmap,
            "pwrite" => SinkChoice::Pwrite,
            "direct" => SinkChoice::Direct,
            _ => return Err(ParseError::new("sink", s, "auto, mmap, pwrite, direct")),
        })
    }
}

impl fmt::Display for SinkChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for SinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
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
        scratch: &mut Scratch,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<(u64, u64)>;

    /// Writes chunk `i`, already encoded in memory as `data` followed by `tail` (an
    /// uncompressed staged chunk and its crc32c), without copying it into a buffer first,
    /// like [`write_chunk`](Self::write_chunk) otherwise. `None` if this sink has no
    /// such path for these buffers.
    fn write_encoded(
        &self,
        _i: usize,
        _data: &[u8],
        _tail: &[u8],
        _scratch: &mut Scratch,
    ) -> Option<Result<(u64, u64)>> {
        None
    }

    /// Whether this sink's writes may be handed to a writer thread: a worker encodes the
    /// chunk into a scratch with [`stage`](Self::stage) and goes on encoding while
    /// another thread writes it with [`write_staged`](Self::write_staged). The direct
    /// sink's writes wait for the device; the others' return once the bytes are copied.
    fn writes_behind(&self) -> bool {
        false
    }

    /// Encodes a chunk with `encode` into `scratch`, ready for
    /// [`write_staged`](Self::write_staged); returns its length in bytes.
    fn stage(
        &self,
        _scratch: &mut Scratch,
        _encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<usize> {
        Err(internal("this sink writes each chunk as it is encoded"))
    }

    /// Writes the `n` bytes [`stage`](Self::stage) left in `scratch` as chunk `i`, then
    /// records its working-index entry, as [`write_chunk`](Self::write_chunk) does.
    fn write_staged(&self, _i: usize, _scratch: &mut Scratch, _n: usize) -> Result<(u64, u64)> {
        Err(internal("this sink writes each chunk as it is encoded"))
    }

    /// Whether chunks are written back to back (no slot gaps), so finishing the shard
    /// moves nothing ([`packed`](crate::shard::packed) instead of a compaction plan);
    /// otherwise each chunk is in its slot, in the shard's [`SlotOrder`].
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

/// Creates the temporary shard file at `path` and opens the sink of `kind` over it,
/// chunks in slots of `order` (the direct sink appends, so it takes C order only); the
/// file's pages that the sink maps and touches count in `meter` while it is mapped.
pub(crate) fn open(
    kind: SinkKind,
    path: &Path,
    layout: ShardLayout,
    order: &SlotOrder,
    meter: &Arc<Meter>,
) -> Result<Box<dyn SlotSink>> {
    let temp = TempShard::create(path, layout)?;
    let c = order.order() == ChunkOrder::C;
    Ok(match kind {
        SinkKind::Mmap if temp.reserved => {
            Box::new(mmap::MmapSink::new(temp, order.clone(), meter)?)
        }
        SinkKind::Direct if temp.reserved && c => Box::new(direct::DirectSink::new(temp, meter)?),
        SinkKind::Direct if !c => return Err(internal("the direct sink writes chunks in C order")),
        _ => Box::new(pwrite::PwriteSink::new(temp, order.clone())),
    })
}

/// Whether shards of `layout` suit the direct sink (block-aligned slots), as far as the
/// layout alone tells; the file system is probed when a writer starts.
pub(crate) fn direct_layout_ok(layout: &ShardLayout) -> bool {
    direct::aligned(layout)
}

/// Pages of a shard file of `layout` that the sink of `kind` maps and touches while the
/// shard is open (counted in the writer's meter, and what the memory estimate assumes
/// per open shard): the mmap sink prefaults every slot and writes the working index
/// through the mapping; the direct sink touches only the working index's pages.
pub(crate) fn mapped_bytes(kind: SinkKind, layout: &ShardLayout) -> u64 {
    let index = page_span(layout.index_offset, layout.index_size);
    match kind {
        SinkKind::Mmap => page_span(layout.data_start, layout.n * layout.slot_size) + index,
        SinkKind::Direct => index,
        SinkKind::Pwrite => 0,
    }
}

/// A worker's encode buffer, reused from chunk to chunk. Page-aligned (an anonymous
/// mapping), so that the direct sink can hand it to `O_DIRECT` writes as it is.
#[derive(Default)]
pub(crate) struct Scratch {
    map: Option<memmap2::MmapMut>,
    /// The buffer's pages in the writer's meter (none in tests).
    held: Option<Held>,
}

impl Scratch {
    /// An empty scratch whose buffer counts in `meter`.
    pub(crate) fn counted(meter: &Arc<Meter>) -> Self {
        Scratch {
            map: None,
            held: Some(Held::new(meter, 0)),
        }
    }

    /// The first `len` bytes of the buffer, replaced by a larger (zeroed) mapping if it
    /// is shorter.
    pub(crate) fn get(&mut self, len: usize) -> Result<&mut [u8]> {
        if self.map.as_ref().is_none_or(|m| m.len() < len) {
            let map = memmap2::MmapMut::map_anon(len.max(1))
                .map_err(|e| Error::io("allocate buffers", "", e, len as u64))?;
            if let Some(h) = &self.held {
                h.set(page_span(0, map.len() as u64));
            }
            self.map = Some(map);
        }
        match self.map.as_mut() {
            Some(map) => Ok(&mut map[..len]),
            None => Err(internal("scratch buffer missing")),
        }
    }
}

fn internal(msg: &str) -> Error {
    Error::Internal(msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_names_round_trip() {
        use SinkChoice::*;
        for c in [Auto, Mmap, Pwrite, Direct] {
            assert_eq!(c.to_string().parse::<SinkChoice>(), Ok(c));
        }
        for k in [SinkKind::Mmap, SinkKind::Pwrite, SinkKind::Direct] {
            assert_eq!(k.to_string(), k.as_str());
        }
        let e = "disk".parse::<SinkChoice>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("sink", "disk"));
        assert_eq!(
            e.to_string(),
            "\"disk\" is not a sink (auto, mmap, pwrite, direct)"
        );
    }
}
