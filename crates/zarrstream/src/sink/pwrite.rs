//! The pwrite sink: workers encode into a per-thread buffer, then append it to the shard
//! file. Chunks land back to back in completion order (the index says where each is),
//! so finishing the shard moves no data. For a chunk order other than C (Morton), each
//! chunk is written into its fixed slot instead, as the mmap sink does, and finishing
//! the shard compacts the slots in their order.
//!
//! Append positions come from an atomic bump ([`Bump`]), and each chunk's data and then
//! its working-index entry are written with `pwrite` to ranges no other chunk uses. The
//! writes themselves take turns (`turn`): the kernel serialises buffered writes to one
//! file on its inode lock anyway, and a worker that finds that lock taken spins in the
//! kernel while the owner copies, taking the core from the caller's thread and the
//! other workers. Waiting for the turn here sleeps instead. The turn guards no state:
//! positions and entries are right without it (the loom model checks them without it).
//! Measured (BENCHMARKS.md §20): without the turn, C1 with this sink fell to 0.78
//! (`lz4:1`) and 0.91 (`none`) of the same build with it.

use std::sync::Mutex;

use crate::platform::FileExt;

use super::bump::Bump;
use super::{Scratch, SlotSink, TempShard, intact, internal};
use crate::error::{Error, Result};
use crate::shard::{ChunkOrder, FinalLayout, SlotOrder, entry_bytes};
use crate::spec::IndexLocation;

pub(crate) struct PwriteSink {
    temp: TempShard,
    /// Where the next appended chunk goes, up to the end of the reserved slots.
    next: Bump,
    /// Held while a chunk's data and entry are written, so that one worker at a time
    /// is in the kernel's write path of this file (see the module's comment).
    turn: Mutex<()>,
    /// `None`: chunks are appended; otherwise each goes into its slot in this order.
    slots: Option<SlotOrder>,
}

impl PwriteSink {
    pub(crate) fn new(temp: TempShard, order: SlotOrder) -> Self {
        let l = temp.layout;
        let data_start = if l.location == IndexLocation::Start {
            l.index_size
        } else {
            0
        };
        PwriteSink {
            temp,
            // Chunks never take more than the slots they would have used, so appends
            // end by the slots' end; the bound turns a bug into an error instead of a
            // chunk over the working index.
            next: Bump::new(data_start, l.data_start + l.n * l.slot_size),
            turn: Mutex::new(()),
            slots: (order.order() != ChunkOrder::C).then_some(order),
        }
    }

    fn write_at(&self, buf: &[u8], at: u64) -> Result<()> {
        self.temp
            .file
            .write_all_at(buf, at)
            .map_err(|e| Error::io("write", &self.temp.path, e, buf.len() as u64))
    }
}

impl PwriteSink {
    /// Appends one encoded chunk, given as consecutive `parts`, then its working-index
    /// entry; returns `(offset, nbytes)`.
    ///
    /// The position is handed out before the turn is taken, so the turn only orders the
    /// writes (see the module's comment). A refused position moves nothing.
    ///
    /// In slot mode the chunk goes to its slot instead.
    fn append(&self, i: usize, parts: &[&[u8]]) -> Result<(u64, u64)> {
        let n: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let offset = match &self.slots {
            Some(order) => self.temp.layout.slot_offset(order.position(i) as u64),
            None => self
                .next
                .reserve(n)
                .map_err(|_| internal("pwrite sink: chunks exceed the shard's slots"))?,
        };
        // A worker that panicked mid-write left nothing the turn guards.
        let _turn = self
            .turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut at = offset;
        for part in parts {
            self.write_at(part, at)?;
            at += part.len() as u64;
        }
        let entry_at = self.temp.layout.index_offset + 16 * i as u64;
        self.write_at(&entry_bytes(offset, n), entry_at)?;
        Ok((offset, n))
    }
}

impl SlotSink for PwriteSink {
    fn write_chunk(
        &self,
        i: usize,
        scratch: &mut Scratch,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<(u64, u64)> {
        let buf = scratch.get(self.temp.layout.slot_size as usize)?;
        let n = encode(buf)?;
        self.append(i, &[&buf[..n]])
    }

    fn write_encoded(
        &self,
        i: usize,
        data: &[u8],
        tail: &[u8],
        _scratch: &mut Scratch,
    ) -> Option<Result<(u64, u64)>> {
        Some(self.append(i, &[data, tail]))
    }

    fn packs_chunks(&self) -> bool {
        self.slots.is_none()
    }

    fn keep_for_recovery(&self) {
        self.temp.keep();
    }

    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard> {
        // A file another process cut is left as it is for `recover`, not finished.
        let seen = intact::Seen {
            mapping_cut: false,
            mapped: false,
            working_index: true,
        };
        intact::check(&self.temp, seen)?;
        self.temp.finish(fin)
    }
}
