//! The direct sink: workers encode into a page-aligned buffer and write it with
//! `O_DIRECT`, so encoded bytes go from the worker's buffer to the device: no copy into
//! the page cache and no writeback by the kernel's threads, which on a 2-core machine
//! take CPU from the encoders.
//!
//! `O_DIRECT` writes must start at and cover whole blocks. Each chunk is therefore
//! appended at a 4 KiB boundary and padded with zeros to the next one; its index entry
//! holds its true length, so readers never see the padding. A chunk never takes more
//! than its slot (the slot size is a multiple of 4 KiB), so appending stays inside the
//! reserved data region, as for the pwrite sink.
//!
//! Each chunk's working-index entry is stored, after its data write returned, through a
//! shared mapping of the index's pages: it is in the page cache at once, so a killed
//! process leaves it for `recover`, as the other sinks do. A buffered `pwrite` of the
//! entry would take the file's inode lock exclusively and wait for every direct write
//! in flight; writing the entry's block with `O_DIRECT`, before the chunk counts as
//! written, costs a third of the throughput (measured in BENCHMARKS.md §9).
//!
//! No lock is taken per chunk: positions come from an atomic bump ([`Bump`]) and each
//! entry is stored through its own claimed slot of the mapping ([`SlotRegion`] with
//! [`SlotGeometry::entries_only`]), so workers only contend on one counter.

use std::fs::File;
use std::path::Path;

use memmap2::MmapMut;

use super::bump::Bump;
use super::{Scratch, SlotSink, TempShard, intact, internal};
use crate::error::{Error, Result};
use crate::meter::{Held, Meter, page_span};
use crate::platform::{FileExt, GuardedMap, map_reserved_file, open_direct};
use crate::shard::{FinalLayout, ShardLayout, store_entry};
use crate::slots::{SlotGeometry, SlotRegion};

/// The alignment of every direct write's offset, length and buffer: the largest logical
/// block size of common devices, a multiple of the 512-byte sectors of others.
pub(crate) const ALIGN: u64 = 4096;

fn align_up(v: u64) -> u64 {
    v.div_ceil(ALIGN) * ALIGN
}

/// Whether shards of `layout` can be written with `O_DIRECT` in `dir`: the layout puts
/// slots at 4 KiB boundaries (slots of 64 KiB and more), the filesystem accepts direct
/// writes there (a probe file is written and removed), and it asks for no more than
/// 4 KiB alignment where the kernel reports it (`statx`). The caller also checks that
/// a mapping of the file is safe (the working index is written through one).
pub(crate) fn supported(dir: &Path, layout: &ShardLayout) -> bool {
    aligned(layout) && probe(dir).is_ok()
}

/// Whether the layout puts slots at 4 KiB boundaries.
pub(crate) fn aligned(layout: &ShardLayout) -> bool {
    [layout.slot_size, layout.data_start]
        .iter()
        .all(|v| v.is_multiple_of(ALIGN))
}

fn probe(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(".direct-probe");
    let result = (|| {
        let file = open_direct(&path, true)?;
        if !crate::platform::direct_alignment_fits(&file, ALIGN) {
            return Err(std::io::Error::from(std::io::ErrorKind::Unsupported));
        }
        let page = MmapMut::map_anon(ALIGN as usize)?;
        file.write_all_at(&page, 0)
    })();
    let _ = std::fs::remove_file(&path);
    result
}

pub(crate) struct DirectSink {
    temp: TempShard,
    /// The same file opened with `O_DIRECT`; `temp.file` (buffered) writes the final
    /// index, which starts mid-block.
    direct: File,
    /// Where the next chunk goes, up to the end of the reserved slots: direct writes
    /// to the disjoint blocks it hands out run in parallel.
    next: Bump,
    /// The file, mapped for its working index: one claim per chunk's entry, the whole
    /// mapping to `finalize` once no claim is live.
    index: SlotRegion<GuardedMap>,
    /// The working index's mapped pages, counted until unmapped.
    held: Held,
}

impl DirectSink {
    /// Opens `temp` a second time, for direct writes.
    pub(crate) fn new(temp: TempShard, meter: &std::sync::Arc<Meter>) -> Result<Self> {
        let direct =
            open_direct(&temp.path, false).map_err(|e| Error::io("open", &temp.path, e, 0))?;
        let l = temp.layout;
        // The whole file is mapped (address space only), and only the index's pages are
        // ever touched.
        let map = map_reserved_file(&temp.file).map_err(|e| Error::io("mmap", &temp.path, e, 0))?;
        let usize_of = |v: u64| {
            usize::try_from(v).map_err(|_| internal("shard larger than the address space"))
        };
        let geometry = SlotGeometry::entries_only(usize_of(l.n)?, usize_of(l.index_offset)?);
        let index = SlotRegion::new(map, geometry)
            .map_err(|_| internal("direct sink: working index exceeds the mapping"))?;
        Ok(DirectSink {
            held: Held::new(meter, page_span(l.index_offset, l.index_size)),
            next: Bump::new(l.data_start, l.data_start + l.n * l.slot_size),
            direct,
            index,
            temp,
        })
    }

    fn write_direct(&self, buf: &[u8], at: u64) -> Result<()> {
        self.direct
            .write_all_at(buf, at)
            .map_err(|e| Error::io("write", &self.temp.path, e, buf.len() as u64))
    }

    /// Hands out `len` bytes (a multiple of [`ALIGN`]) at the end of the written data.
    /// A refusal moves nothing, so the chunks already handed out and `finalize` are as
    /// if it had not been asked.
    fn reserve(&self, len: u64) -> Result<u64> {
        self.next
            .reserve(len)
            .map_err(|_| internal("direct sink: chunks exceed the shard's slots"))
    }

    /// Records chunk `i` at `(offset, n)` in the working index, after its data, through
    /// the entry's own claim (out of range, claimed twice or finishing: an error).
    fn record(&self, i: usize, offset: u64, n: u64) -> Result<(u64, u64)> {
        let mut slot = self
            .index
            .claim(i)
            .ok_or_else(|| internal("direct sink: index entry out of range or claimed twice"))?;
        store_entry(slot.entry(), offset, n);
        Ok((offset, n))
    }
}

impl SlotSink for DirectSink {
    fn write_chunk(
        &self,
        i: usize,
        scratch: &mut Scratch,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<(u64, u64)> {
        let n = self.stage(scratch, encode)?;
        self.write_staged(i, scratch, n)
    }

    fn writes_behind(&self) -> bool {
        true
    }

    fn stage(
        &self,
        scratch: &mut Scratch,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<usize> {
        let slot = self.temp.layout.slot_size as usize;
        let buf = scratch.get(slot)?;
        let n = encode(buf)?;
        let padded = align_up(n as u64) as usize;
        let tail = buf
            .get_mut(n..padded)
            .ok_or_else(|| internal("direct sink: chunk larger than its slot"))?;
        tail.fill(0);
        Ok(n)
    }

    fn write_staged(&self, i: usize, scratch: &mut Scratch, n: usize) -> Result<(u64, u64)> {
        let padded = align_up(n as u64);
        // The scratch already holds the slot `stage` asked for, so this never reallocates
        // (which would lose the chunk).
        let buf = scratch.get(self.temp.layout.slot_size as usize)?;
        let block = buf
            .get(..padded as usize)
            .ok_or_else(|| internal("direct sink: chunk larger than its slot"))?;
        let offset = self.reserve(padded)?;
        self.write_direct(block, offset)?;
        self.record(i, offset, n as u64)
    }

    fn write_encoded(
        &self,
        i: usize,
        data: &[u8],
        tail: &[u8],
        scratch: &mut Scratch,
    ) -> Option<Result<(u64, u64)>> {
        // Straight from the caller's buffer only when it is aligned as a direct write
        // needs (staging groups are page-aligned mappings of whole pages per chunk).
        let aligned = (data.as_ptr() as usize).is_multiple_of(ALIGN as usize)
            && (data.len() as u64).is_multiple_of(ALIGN)
            && !data.is_empty()
            && (tail.len() as u64) < ALIGN;
        if !aligned {
            return None;
        }
        Some((|| {
            let n = (data.len() + tail.len()) as u64;
            let offset = self.reserve(align_up(n))?;
            self.write_direct(data, offset)?;
            if !tail.is_empty() {
                let page = scratch.get(ALIGN as usize)?;
                page.fill(0);
                page[..tail.len()].copy_from_slice(tail);
                self.write_direct(page, offset + data.len() as u64)?;
            }
            self.record(i, offset, n)
        })())
    }

    fn packs_chunks(&self) -> bool {
        true
    }

    fn keep_for_recovery(&self) {
        self.temp.keep();
    }

    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard> {
        if !fin.moves.is_empty() || !fin.holes.is_empty() {
            return Err(internal("direct sink: a packed shard has nothing to move"));
        }
        let DirectSink {
            temp, index, held, ..
        } = *self;
        // Every entry is stored: no claim may be live while the file is finished.
        if index.close().is_none() {
            return Err(internal(
                "direct sink: finalized while an entry is being stored",
            ));
        }
        // Unmapped before the file is cut below it.
        let map = index.into_backing();
        let mapping_cut = map.truncated();
        drop(map);
        drop(held);
        let seen = intact::Seen {
            mapping_cut,
            mapped: true,
            working_index: true,
        };
        intact::check(&temp, seen)?;
        // Buffered: the final index starts where the last chunk ends, mid-block.
        temp.finish(fin)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use crate::platform::FileExt;

    use super::*;
    use crate::read::index::{parse_index, raw_entries};
    use crate::shard::packed;
    use crate::{ArraySpec, Codec, IndexLocation};

    /// Shards of `shard_t` × 2 × 2 uncompressed 128 KiB chunks (slots of 132 KiB).
    fn layout(location: IndexLocation, shard_t: u64) -> ShardLayout {
        let spec = ArraySpec::builder()
            .shape([0, 512, 512])
            .chunk_shape([1, 256, 256])
            .shard_shape([shard_t, 512, 512])
            .codec(Codec::none())
            .index_location(location)
            .build()
            .unwrap();
        ShardLayout::new(&spec).unwrap()
    }

    fn chunk(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|k| (k * 31 + i * 7 + 1) as u8).collect()
    }

    /// The working index as the file holds it now.
    fn working_index(path: &Path, l: &ShardLayout) -> Vec<(u64, u64)> {
        let mut buf = vec![0; 16 * l.n as usize];
        File::open(path)
            .unwrap()
            .read_exact_at(&mut buf, l.index_offset)
            .unwrap();
        raw_entries(&buf).collect()
    }

    /// Writes chunk `i` of `len` bytes with `threads` threads, each with its own
    /// scratch, as workers do; returns the sink's answers.
    fn write_all(sink: &DirectSink, lens: &[usize], threads: usize) -> Vec<(u64, u64)> {
        let mut out = vec![(0, 0); lens.len()];
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut scratch = Scratch::default();
                        (t..lens.len())
                            .step_by(threads)
                            .map(|i| {
                                let data = chunk(i, lens[i]);
                                let at = sink.write_chunk(i, &mut scratch, &mut |buf| {
                                    buf[..data.len()].copy_from_slice(&data);
                                    Ok(data.len())
                                });
                                let at = at.unwrap();
                                let l = &sink.temp.layout;
                                let on_disk = working_index(&sink.temp.path, l)[i];
                                assert_eq!(on_disk, at, "entry {i} in the file on return");
                                (i, at)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                for (i, at) in h.join().unwrap() {
                    out[i] = at;
                }
            }
        });
        out
    }

    #[test]
    fn chunks_are_block_aligned_and_the_final_shard_reads_back() {
        for location in [IndexLocation::End, IndexLocation::Start] {
            let dir = tempfile::tempdir().unwrap();
            let l = layout(location, 4);
            assert!(supported(dir.path(), &l), "{location:?}");
            let path = dir.path().join("shard.partial");
            let sink =
                DirectSink::new(TempShard::create(&path, l).unwrap(), &Meter::new()).unwrap();
            // Lengths around block boundaries; chunk 5 is never written.
            let lens: Vec<usize> = (0..16)
                .map(|i| [1, 4095, 4096, 4097, 70_000][i % 5])
                .collect();
            let mut written = write_all(&sink, &lens, 3);
            written[5] = (u64::MAX, u64::MAX);
            for (i, &(at, n)) in written.iter().enumerate().filter(|&(i, _)| i != 5) {
                assert_eq!(at % ALIGN, 0, "chunk {i} at {at}");
                assert_eq!(n, lens[i] as u64);
                assert!(at >= l.data_start && at + n <= l.data_start + l.n * l.slot_size);
            }
            // Before finishing: a recoverable temporary shard of the reserved length
            // whose working index says where every chunk is.
            assert_eq!(std::fs::metadata(&path).unwrap().len(), l.file_size);
            let mut on_disk = working_index(&path, &l);
            on_disk[5] = (u64::MAX, u64::MAX);
            assert_eq!(on_disk, written);

            let entries: Vec<_> = (0..16).map(|i| (i != 5).then_some(written[i])).collect();
            let fin = packed(&l, &entries);
            let temp = Box::new(sink).finalize(&fin).unwrap();
            let bytes = std::fs::read(&temp.path).unwrap();
            assert_eq!(bytes.len() as u64, fin.len);
            let index = match location {
                IndexLocation::End => &bytes[bytes.len() - l.index_size as usize..],
                IndexLocation::Start => &bytes[..l.index_size as usize],
            };
            let parsed = parse_index(index, 16).unwrap();
            assert_eq!(parsed, entries);
            for (i, e) in parsed.iter().enumerate() {
                if let Some((at, n)) = e {
                    assert_eq!(&bytes[*at as usize..(at + n) as usize], chunk(i, lens[i]));
                }
            }
        }
    }

    #[test]
    fn every_entry_reaches_the_file_when_threads_race() {
        // 64 chunks per shard written by 8 threads at once, 20 times: each chunk's entry
        // must be in the file when its write returns (`write_all` checks), whatever the
        // other threads store next to it.
        let dir = tempfile::tempdir().unwrap();
        let l = layout(IndexLocation::End, 16);
        assert_eq!(l.n, 64);
        for round in 0..20 {
            let path = dir.path().join(format!("shard{round}.partial"));
            let sink =
                DirectSink::new(TempShard::create(&path, l).unwrap(), &Meter::new()).unwrap();
            let written = write_all(&sink, &[100; 64], 8);
            assert_eq!(working_index(&path, &l), written, "round {round}");
            sink.keep_for_recovery();
        }
    }

    #[test]
    fn aligned_staged_chunks_are_written_in_place_and_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let l = layout(IndexLocation::End, 4);
        let path = dir.path().join("shard.partial");
        let sink = DirectSink::new(TempShard::create(&path, l).unwrap(), &Meter::new()).unwrap();
        let mut scratch = Scratch::default();
        let mut staged = MmapMut::map_anon(2 * 8192).unwrap();
        staged
            .iter_mut()
            .enumerate()
            .for_each(|(k, b)| *b = k as u8);
        let crc = [1, 2, 3, 4];
        assert!(
            sink.write_encoded(0, &staged[1..4097], &crc, &mut scratch)
                .is_none()
        );
        assert!(
            sink.write_encoded(0, &staged[..100], &crc, &mut scratch)
                .is_none()
        );
        let (at, n) = sink
            .write_encoded(3, &staged[8192..], &crc, &mut scratch)
            .unwrap()
            .unwrap();
        assert_eq!((at % ALIGN, n), (0, 8196));
        let mut back = vec![0; 8196];
        File::open(&path)
            .unwrap()
            .read_exact_at(&mut back, at)
            .unwrap();
        assert_eq!(&back[..8192], &staged[8192..]);
        assert_eq!(&back[8192..], &crc);
        assert_eq!(working_index(&path, &l)[3], (at, n));
    }

    #[test]
    fn small_slots_are_not_written_directly() {
        let spec = ArraySpec::builder()
            .shape([0, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert!(!supported(dir.path(), &ShardLayout::new(&spec).unwrap()));
    }
}
