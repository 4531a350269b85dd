//! The mmap sink: workers encode straight into the shard's mapping.

use memmap2::MmapMut;

use super::{Scratch, SlotSink, TempShard, internal};
use crate::error::{Error, Result};
use crate::shard::{FinalLayout, SlotOrder, encode_index, entry_bytes};
use crate::slots::{SlotGeometry, SlotRegion, map_reserved_file};

pub(crate) struct MmapSink {
    temp: TempShard,
    region: SlotRegion<MmapMut>,
    order: SlotOrder,
}

impl MmapSink {
    /// Maps the reserved file, chunk `i`'s slot at position `order.position(i)`;
    /// [`SlotSink::prefault`] then populates it ahead of the workers.
    pub(crate) fn new(temp: TempShard, order: SlotOrder) -> Result<Self> {
        let map = map_reserved_file(&temp.file).map_err(|e| Error::io("mmap", &temp.path, e, 0))?;
        let l = temp.layout;
        let usize_of = |v: u64| {
            usize::try_from(v).map_err(|_| internal("shard larger than the address space"))
        };
        let geometry = SlotGeometry {
            n: usize_of(l.n)?,
            data_start: usize_of(l.data_start)?,
            slot_size: usize_of(l.slot_size)?,
            index_offset: usize_of(l.index_offset)?,
            positions: order.positions(),
        };
        let region = SlotRegion::new(map, geometry)
            .map_err(|_| internal("slot geometry exceeds the mapping"))?;
        Ok(MmapSink {
            temp,
            region,
            order,
        })
    }
}

impl SlotSink for MmapSink {
    fn write_chunk(
        &self,
        i: usize,
        _scratch: &mut Scratch,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<(u64, u64)> {
        let mut slot = self
            .region
            .claim(i)
            .ok_or_else(|| internal("shard slot claimed twice"))?;
        let n = encode(slot.data())? as u64;
        let offset = self.temp.layout.slot_offset(self.order.position(i) as u64);
        *slot.entry() = entry_bytes(offset, n);
        Ok((offset, n))
    }

    fn prefault(&self, first: usize, end: usize) {
        self.region.prefault(first, end);
    }

    fn keep_for_recovery(&self) {
        self.temp.keep();
    }

    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard> {
        let MmapSink { temp, region, .. } = *self;
        {
            let mut all = region
                .close()
                .ok_or_else(|| internal("shard finalized while a slot is in use"))?;
            for m in &fin.moves {
                let (from, to, len) = (m.from as usize, m.to as usize, m.len as usize);
                all.copy_within(from..from + len, to);
            }
            let at = fin.index_at as usize;
            encode_index(
                &fin.entries,
                &mut all[at..at + temp.layout.index_size as usize],
            );
        }
        // Unmap here, on the finisher thread, before cutting the file: truncating mapped
        // pages would fault any later access, and munmap interrupts every core we run on.
        drop(region.into_backing());
        temp.punch(&fin.holes)?;
        temp.set_len(fin.len)?;
        Ok(temp)
    }
}
