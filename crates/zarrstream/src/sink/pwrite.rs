//! The pwrite sink: workers encode into a per-thread buffer, then append it to the shard
//! file, one writer at a time. Chunks land back to back in completion order (the index
//! says where each is), so finishing the shard moves no data. For a chunk order other
//! than C (Morton), each chunk is written into its fixed slot instead, as the mmap sink
//! does, and finishing the shard compacts the slots in their order.

use crate::platform::FileExt;
use std::sync::Mutex;

use super::{Scratch, SlotSink, TempShard, intact};
use crate::error::{Error, Result};
use crate::shard::{ChunkOrder, FinalLayout, SlotOrder, entry_bytes};
use crate::spec::IndexLocation;

pub(crate) struct PwriteSink {
    temp: TempShard,
    /// Where the next chunk goes; held while writing (see `append`).
    next: Mutex<u64>,
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
            next: Mutex::new(data_start),
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
    /// Buffered writes to one file take its inode lock exclusively, and a writer that
    /// finds it taken *spins* in the kernel while the owner copies: two workers writing
    /// one shard spent more time spinning than encoding. Here the second one sleeps, the
    /// kernel never spins, and the lock also hands out the append position. The chunks
    /// of a shard never exceed the slots they would have used, so appending stays inside
    /// the reserved data region.
    ///
    /// In slot mode the chunk goes to its slot instead; the lock is still taken, for the
    /// same reason (one writer per file at a time).
    fn append(&self, i: usize, parts: &[&[u8]]) -> Result<(u64, u64)> {
        let n: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let offset = match &self.slots {
            Some(order) => self.temp.layout.slot_offset(order.position(i) as u64),
            None => *next,
        };
        let mut at = offset;
        for part in parts {
            self.write_at(part, at)?;
            at += part.len() as u64;
        }
        let entry_at = self.temp.layout.index_offset + 16 * i as u64;
        self.write_at(&entry_bytes(offset, n), entry_at)?;
        if self.slots.is_none() {
            *next = offset + n;
        }
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
