//! The mmap sink: workers encode straight into the shard's mapping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Scratch, SlotSink, TempShard, intact, internal};
use crate::error::{Error, Result};
use crate::meter::{Held, Meter, PAGE, page_span};
use crate::platform::{GuardedMap, map_reserved_file};
use crate::shard::{ChunkOrder, FinalLayout, SlotOrder, store_entry};
use crate::slots::{SlotGeometry, SlotRegion};

pub(crate) struct MmapSink {
    temp: TempShard,
    region: SlotRegion<GuardedMap>,
    /// The mapped pages made resident: the working index's from the start, the slots'
    /// as they are prefaulted; released when the file is unmapped.
    held: Held,
    /// File offset up to which slots are counted as prefaulted (page-rounded).
    faulted: AtomicU64,
    order: SlotOrder,
}

impl MmapSink {
    /// Maps the reserved file, chunk `i`'s slot at position `order.position(i)`;
    /// [`SlotSink::prefault`] then populates it ahead of the workers. The file's pages
    /// it touches count in `meter` while it is mapped.
    pub(crate) fn new(temp: TempShard, order: SlotOrder, meter: &Arc<Meter>) -> Result<Self> {
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
        let held = Held::new(meter, page_span(l.index_offset, l.index_size));
        let faulted = AtomicU64::new(l.data_start / PAGE * PAGE);
        Ok(MmapSink {
            temp,
            region,
            held,
            faulted,
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
        store_entry(slot.entry(), offset, n);
        Ok((offset, n))
    }

    fn prefault(&self, first: usize, end: usize) {
        self.region.prefault(first, end);
        let l = &self.temp.layout;
        let end = (end as u64).min(l.n);
        if (first as u64) < end {
            // In C order chunks `first..end` are the slots at those positions; in another
            // order their slots are scattered over the shard, which is counted whole at
            // the first prefault (ahead of the pages, never behind them).
            let (first, end) = match self.order.order() {
                ChunkOrder::C => (first as u64, end),
                _ => (0, l.n),
            };
            let start = (l.data_start + first * l.slot_size) / PAGE * PAGE;
            let stop = (l.data_start + end * l.slot_size).div_ceil(PAGE) * PAGE;
            let before = self.faulted.fetch_max(stop, Ordering::AcqRel);
            self.held.add(stop.saturating_sub(before.max(start)));
        }
    }

    fn keep_for_recovery(&self) {
        self.temp.keep();
    }

    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard> {
        let MmapSink {
            temp, region, held, ..
        } = *self;
        // Every slot is written: no claim may be live while the file is finished.
        if region.close().is_none() {
            return Err(internal("shard finalized while a slot is in use"));
        }
        // Unmap here, on the finisher thread, before the file is finished: cutting
        // mapped pages would fault any later access, and munmap interrupts every core we
        // run on. The chunks stay in the page cache, where `finish` reads them.
        let map = region.into_backing();
        let mapping_cut = map.truncated();
        drop(map);
        drop(held);
        // A file another process cut is left as it is for `recover`, not finished.
        let seen = intact::Seen {
            mapping_cut,
            mapped: true,
            working_index: true,
        };
        intact::check(&temp, seen)?;
        temp.finish(fin)
    }
}
