//! Where each chunk and the index end up when a shard is finished.

use super::{ShardLayout, SlotOrder};
use crate::spec::IndexLocation;

/// What happens to the unused tail of each slot when a shard is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Packing {
    /// Move chunks together so the file has no gaps (default; files copy and upload
    /// without holes). The pwrite and direct sinks append chunks, so nothing moves; the
    /// [direct](crate::SinkChoice::Direct) sink leaves each chunk's padding to the
    /// next 4 KiB boundary (under 4 KiB per chunk).
    #[default]
    Compact,
    /// Leave chunks in their slots and punch the gaps out of the file (no data moves;
    /// the file is sparse, its logical size includes the gaps).
    Sparse,
}

impl std::str::FromStr for Packing {
    type Err = crate::error::ParseError;
    /// Parses `compact` or `sparse`, the names [`Display`](std::fmt::Display) prints.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "compact" => Ok(Packing::Compact),
            "sparse" => Ok(Packing::Sparse),
            _ => Err(crate::error::ParseError::new(
                "packing",
                s,
                "compact, sparse",
            )),
        }
    }
}

impl std::fmt::Display for Packing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Packing::Compact => "compact",
            Packing::Sparse => "sparse",
        })
    }
}

/// One chunk move, `len` bytes from `from` to `to` (`to <= from`; apply in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Move {
    pub from: u64,
    pub to: u64,
    pub len: u64,
}

/// The finished shard's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FinalLayout {
    pub entries: Vec<Option<(u64, u64)>>,
    pub moves: Vec<Move>,
    /// Byte ranges to punch out (sparse packing), page aligned.
    pub holes: Vec<(u64, u64)>,
    pub index_at: u64,
    pub len: u64,
}

const PAGE: u64 = 4096;

impl FinalLayout {
    /// Where each chunk was written before finishing: its final place, or where a move
    /// takes it from.
    pub(crate) fn written(&self) -> Vec<Option<(u64, u64)>> {
        let from: std::collections::HashMap<u64, u64> =
            self.moves.iter().map(|m| (m.to, m.from)).collect();
        self.entries
            .iter()
            .map(|e| e.map(|(at, n)| (from.get(&at).copied().unwrap_or(at), n)))
            .collect()
    }

    /// Every chunk as a copy `(from, to, len)` from where it was written to its final
    /// place, in the order of the final file.
    pub(crate) fn copies(&self) -> Vec<Move> {
        let mut copies: Vec<Move> = self
            .written()
            .iter()
            .zip(&self.entries)
            .filter_map(|(w, e)| match (w, e) {
                (Some((from, len)), Some((to, _))) => Some(Move {
                    from: *from,
                    to: *to,
                    len: *len,
                }),
                _ => None,
            })
            .collect();
        copies.sort_by_key(|m| m.to);
        copies
    }
}

/// The finished layout of a shard whose chunks were written into their slots, slot
/// position `p` holding chunk `order.chunk_at(p)`: compaction packs them in the order of
/// their positions (so each moves towards the start, `to <= from`, and the shard keeps
/// its chunk order); sparse packing punches out each slot's unused tail.
pub(crate) fn plan(
    layout: &ShardLayout,
    written: &[Option<(u64, u64)>],
    packing: Packing,
    order: &SlotOrder,
) -> FinalLayout {
    let start = layout.location == IndexLocation::Start;
    let mut entries = written.to_vec();
    let mut moves = Vec::new();
    let mut holes = Vec::new();
    let data_end = match packing {
        Packing::Compact => {
            let mut pos = if start { layout.index_size } else { 0 };
            for p in 0..entries.len() {
                let Some(e) = entries[order.chunk_at(p)].as_mut() else {
                    continue;
                };
                if e.0 != pos {
                    moves.push(Move {
                        from: e.0,
                        to: pos,
                        len: e.1,
                    });
                    e.0 = pos;
                }
                pos += e.1;
            }
            pos
        }
        Packing::Sparse => {
            for p in 0..written.len() {
                let e = &written[order.chunk_at(p)];
                let slot = layout.slot_offset(p as u64);
                let used_end = e.map_or(slot, |(o, n)| o + n);
                let (a, b) = (
                    used_end.div_ceil(PAGE) * PAGE,
                    (slot + layout.slot_size) / PAGE * PAGE,
                );
                if a < b {
                    holes.push((a, b - a));
                }
            }
            let last = written.iter().flatten().map(|(o, n)| o + n).max();
            last.unwrap_or(if start { layout.index_size } else { 0 })
        }
    };
    with_index(layout, entries, moves, holes, data_end)
}

/// The layout of a shard whose sink already wrote its chunks back to back from the start
/// of the data region (the pwrite sink): nothing moves, only the index is placed.
pub(crate) fn packed(layout: &ShardLayout, written: &[Option<(u64, u64)>]) -> FinalLayout {
    let start = layout.location == IndexLocation::Start;
    let data_start = if start { layout.index_size } else { 0 };
    let data_end = written
        .iter()
        .flatten()
        .map(|(o, n)| o + n)
        .max()
        .unwrap_or(data_start);
    with_index(layout, written.to_vec(), Vec::new(), Vec::new(), data_end)
}

/// Places the index before the data (start) or right after it (end).
fn with_index(
    layout: &ShardLayout,
    entries: Vec<Option<(u64, u64)>>,
    moves: Vec<Move>,
    mut holes: Vec<(u64, u64)>,
    data_end: u64,
) -> FinalLayout {
    let start = layout.location == IndexLocation::Start;
    let (index_at, len) = if start {
        (0, data_end.max(layout.index_size))
    } else {
        (data_end, data_end + layout.index_size)
    };
    if !start {
        // The end index is written over the slots after the last chunk: never punch it,
        // and nothing past it survives the final truncation anyway.
        let keep_from = index_at / PAGE * PAGE;
        holes.retain_mut(|(a, len)| {
            *len = (*a + *len).min(keep_from).saturating_sub(*a);
            *len > 0
        });
    }
    FinalLayout {
        entries,
        moves,
        holes,
        index_at,
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(location: IndexLocation) -> ShardLayout {
        let index_size = 16 * 3 + 4;
        let data_start = if location == IndexLocation::Start {
            64
        } else {
            0
        };
        ShardLayout {
            n: 3,
            slot_size: 100,
            data_start,
            index_offset: if location == IndexLocation::Start {
                0
            } else {
                300
            },
            index_size,
            file_size: data_start
                + 300
                + if location == IndexLocation::End {
                    index_size
                } else {
                    0
                },
            location,
        }
    }

    #[test]
    fn packed_shards_move_nothing_and_place_the_index() {
        // Chunks appended in completion order 2, 0 (chunk 1 dropped).
        let end = layout(IndexLocation::End);
        let written = [Some((40, 30)), None, Some((0, 40))];
        let fin = packed(&end, &written);
        assert!(fin.moves.is_empty() && fin.holes.is_empty());
        assert_eq!(fin.entries, written.to_vec());
        assert_eq!((fin.index_at, fin.len), (70, 70 + end.index_size));

        let start = layout(IndexLocation::Start);
        let d = start.index_size;
        let written = [Some((d, 10)), Some((d + 10, 5)), None];
        let fin = packed(&start, &written);
        assert!(fin.moves.is_empty());
        assert_eq!((fin.index_at, fin.len), (0, d + 15));
        // Nothing written: just the index.
        let fin = packed(&start, &[None, None, None]);
        assert_eq!(fin.len, d);
    }

    #[test]
    fn compact_end_packs_in_slot_order_then_index() {
        let l = layout(IndexLocation::End);
        let p = plan(
            &l,
            &[Some((0, 10)), None, Some((200, 30))],
            Packing::Compact,
            &SlotOrder::c(),
        );
        assert_eq!(p.entries, vec![Some((0, 10)), None, Some((10, 30))]);
        assert_eq!(
            p.moves,
            vec![Move {
                from: 200,
                to: 10,
                len: 30
            }]
        );
        assert_eq!((p.index_at, p.len), (40, 40 + 52));
    }

    #[test]
    fn compact_start_begins_data_after_index() {
        let l = layout(IndexLocation::Start);
        let p = plan(
            &l,
            &[Some((64, 10)), Some((164, 5)), None],
            Packing::Compact,
            &SlotOrder::c(),
        );
        assert_eq!(p.entries, vec![Some((52, 10)), Some((62, 5)), None]);
        assert_eq!((p.index_at, p.len), (0, 67));
    }

    #[test]
    fn sparse_holes_never_cover_the_end_index() {
        // 256 page-sized slots: the index (4100 bytes) spans two pages after the last chunk.
        let l = ShardLayout {
            n: 256,
            slot_size: 8192,
            data_start: 0,
            index_offset: 256 * 8192,
            index_size: 16 * 256 + 4,
            file_size: 256 * 8192 + 16 * 256 + 4,
            location: IndexLocation::End,
        };
        let mut written = vec![None; 256];
        written[0] = Some((0, 100));
        written[3] = Some((3 * 8192, 5000));
        let p = plan(&l, &written, Packing::Sparse, &SlotOrder::c());
        assert_eq!(p.index_at, 3 * 8192 + 5000);
        for &(a, len) in &p.holes {
            assert!(
                a + len <= p.index_at,
                "hole {a}+{len} overlaps the index at {}",
                p.index_at
            );
        }
        // Slot 0's tail and the empty slots 1 and 2 are punched.
        assert_eq!(p.holes, vec![(4096, 4096), (8192, 8192), (16384, 8192)]);
    }

    #[test]
    fn sparse_keeps_offsets_and_ends_at_last_chunk() {
        let l = layout(IndexLocation::End);
        let c = SlotOrder::c();
        let p = plan(
            &l,
            &[Some((0, 10)), Some((100, 5)), None],
            Packing::Sparse,
            &c,
        );
        assert!(p.moves.is_empty());
        assert_eq!((p.index_at, p.len), (105, 157));
        let empty = plan(&l, &[None, None, None], Packing::Sparse, &c);
        assert_eq!((empty.index_at, empty.len), (0, 52));
    }

    #[test]
    fn copies_take_every_chunk_from_where_it_was_written() {
        let order = SlotOrder::from_sequence(vec![2, 0, 1]);
        let l = layout(IndexLocation::End);
        let written = [Some((100, 5)), Some((200, 7)), Some((0, 10))];
        let p = plan(&l, &written, Packing::Compact, &order);
        assert_eq!(p.written(), written.to_vec());
        let copies =
            [(0, 0, 10), (100, 10, 5), (200, 15, 7)].map(|(from, to, len)| Move { from, to, len });
        assert_eq!(p.copies(), copies.to_vec());
    }

    #[test]
    fn compact_keeps_the_slot_order() {
        // Slots hold chunks 2, 0, 1 (positions 0, 1, 2).
        let order = SlotOrder::from_sequence(vec![2, 0, 1]);
        let l = layout(IndexLocation::End);
        let written = [Some((100, 5)), Some((200, 7)), Some((0, 10))];
        let p = plan(&l, &written, Packing::Compact, &order);
        assert_eq!(p.entries, vec![Some((10, 5)), Some((15, 7)), Some((0, 10))]);
        let moves = [(100, 10, 5), (200, 15, 7)].map(|(from, to, len)| Move { from, to, len });
        assert_eq!(p.moves, moves.to_vec());
        assert_eq!((p.index_at, p.len), (22, 22 + 52));
        // Sparse: each slot's tail is measured against the chunk in it.
        let sparse = plan(&l, &written, Packing::Sparse, &order);
        assert_eq!(sparse.entries, written.to_vec());
        assert_eq!(sparse.index_at, 207);
    }
}

#[cfg(test)]
mod proptests {
    //! Properties of the finished layout over random specs and random sets of written
    //! chunks, checked by applying the plan to a buffer the way the sinks do.

    use proptest::prelude::*;

    use super::*;
    use crate::shard::layout::proptests::arb_spec;
    use crate::shard::{ChunkOrder, encode_index};
    use crate::spec::ArraySpec;

    /// Largest worst-case file simulated in memory.
    const MAX_FILE: u64 = 8 << 20;

    /// A layout (small or page-aligned slots), an order of the chunks in their slots
    /// (C, Morton, or any permutation) and, per chunk, the size the workers wrote into
    /// its slot (1..=slot_size bytes) or nothing.
    type Case = (ShardLayout, SlotOrder, Vec<Option<(u64, u64)>>);

    fn arb_case() -> impl Strategy<Value = Case> {
        prop_oneof![arb_spec(3, 24, 4), arb_spec(1, 180, 3)]
            .prop_map(|spec: ArraySpec| (ShardLayout::new(&spec).unwrap(), spec))
            .prop_filter("worst-case file too large to simulate", |(l, _)| {
                l.file_size <= MAX_FILE
            })
            .prop_flat_map(|(l, spec)| {
                let sizes = proptest::collection::vec(
                    prop_oneof![
                        2 => Just(None),
                        1 => Just(Some(u64::MAX)), // a full slot
                        1 => (0u64..64).prop_map(Some), // tiny
                        3 => any::<u64>().prop_map(Some),
                    ],
                    l.n as usize,
                );
                let n = l.n as u32;
                let order = prop_oneof![
                    Just(SlotOrder::c()),
                    Just(SlotOrder::new(ChunkOrder::Morton, &spec)),
                    Just((0..n).collect::<Vec<u32>>())
                        .prop_shuffle()
                        .prop_map(SlotOrder::from_sequence),
                ];
                (Just(l), order, sizes)
            })
            .prop_map(|(l, order, sizes)| {
                let written = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        s.map(|s| (l.slot_offset(order.position(i) as u64), 1 + s % l.slot_size))
                    })
                    .collect();
                (l, order, written)
            })
    }

    fn byte_of(chunk: usize, k: u64) -> u8 {
        (chunk as u64)
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(k.wrapping_mul(131))
            .to_le_bytes()[1]
            ^ (k as u8)
    }

    fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
        a.0 < b.0 + b.1 && b.0 < a.0 + a.1
    }

    fn check(
        l: &ShardLayout,
        order: &SlotOrder,
        written: &[Option<(u64, u64)>],
        packing: Packing,
    ) -> Result<(), TestCaseError> {
        let p = plan(l, written, packing, order);
        let index = (p.index_at, l.index_size);
        prop_assert_eq!(p.entries.len(), written.len());
        // The index fits where the sinks write it (in the worst-case file) and in the
        // final file.
        prop_assert!(p.index_at + l.index_size <= p.len);
        prop_assert!(p.index_at + l.index_size <= l.file_size);
        prop_assert!(p.len <= l.file_size);
        match l.location {
            IndexLocation::Start => prop_assert_eq!(p.index_at, 0),
            IndexLocation::End => prop_assert_eq!(p.len, p.index_at + l.index_size),
        }
        let placed: Vec<(usize, (u64, u64))> = p
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|e| (i, e)))
            .collect();
        for (i, (w, e)) in written.iter().zip(&p.entries).enumerate() {
            prop_assert_eq!(w.is_some(), e.is_some(), "chunk {} presence", i);
            if let (Some(w), Some(e)) = (w, e) {
                prop_assert_eq!(w.1, e.1, "chunk {} length", i);
            }
        }
        for (k, &(i, e)) in placed.iter().enumerate() {
            prop_assert!(e.0 + e.1 <= p.len, "chunk {i} {e:?} past the end {}", p.len);
            prop_assert!(
                !overlaps(e, index),
                "chunk {i} {e:?} overlaps the index {index:?}"
            );
            for &(j, f) in &placed[k + 1..] {
                prop_assert!(!overlaps(e, f), "chunks {i} {e:?} and {j} {f:?} overlap");
            }
        }
        for &(a, n) in &p.holes {
            prop_assert!(
                n > 0 && a % PAGE == 0 && n % PAGE == 0,
                "hole {a}+{n} unaligned"
            );
            prop_assert!(a + n <= l.file_size, "hole {a}+{n} past the file");
            prop_assert!(
                !overlaps((a, n), index),
                "hole {a}+{n} overlaps the index {index:?}"
            );
            for &(i, e) in &placed {
                prop_assert!(
                    !overlaps((a, n), e),
                    "hole {a}+{n} overlaps chunk {i} {e:?}"
                );
            }
        }
        for m in &p.moves {
            prop_assert!(m.to <= m.from && m.from + m.len <= l.file_size, "{m:?}");
        }
        let data: u64 = placed.iter().map(|(_, e)| e.1).sum();
        match packing {
            Packing::Compact => {
                // No gaps: the chunks in the order of their slots, then (or after) the
                // index.
                prop_assert!(p.holes.is_empty());
                prop_assert_eq!(p.len, data + l.index_size);
                let mut pos = if l.location == IndexLocation::Start {
                    l.index_size
                } else {
                    0
                };
                for e in (0..p.entries.len()).filter_map(|q| p.entries[order.chunk_at(q)]) {
                    prop_assert_eq!(e.0, pos);
                    pos += e.1;
                }
            }
            Packing::Sparse => {
                prop_assert!(p.moves.is_empty());
                prop_assert_eq!(&p.entries, &written.to_vec());
            }
        }

        // Apply the plan as the sinks do: moves in order, the index, holes, truncation.
        let mut file = vec![0xEEu8; l.file_size as usize];
        for &(i, (o, n)) in &placed {
            let o = written[i].map_or(o, |w| w.0);
            for k in 0..n {
                file[(o + k) as usize] = byte_of(i, k);
            }
        }
        for m in &p.moves {
            let (from, to, len) = (m.from as usize, m.to as usize, m.len as usize);
            file.copy_within(from..from + len, to);
        }
        let at = p.index_at as usize;
        encode_index(&p.entries, &mut file[at..at + l.index_size as usize]);
        for &(a, n) in &p.holes {
            file[a as usize..(a + n) as usize].fill(0);
        }
        file.truncate(p.len as usize);
        for &(i, (o, n)) in &placed {
            let got = &file[o as usize..(o + n) as usize];
            let bad = (0..n).find(|&k| got[k as usize] != byte_of(i, k));
            prop_assert!(bad.is_none(), "chunk {i} at {o} differs at byte {bad:?}");
        }
        let ix = &file[at..at + l.index_size as usize];
        let nn = l.n as usize;
        prop_assert_eq!(
            u32::from_le_bytes(ix[16 * nn..].try_into().unwrap()),
            crc32c::crc32c(&ix[..16 * nn])
        );
        for (i, e) in p.entries.iter().enumerate() {
            let o = u64::from_le_bytes(ix[16 * i..16 * i + 8].try_into().unwrap());
            let n = u64::from_le_bytes(ix[16 * i + 8..16 * i + 16].try_into().unwrap());
            prop_assert_eq!(*e, (o != u64::MAX).then_some((o, n)), "index entry {}", i);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn compact_plan_is_sound((l, order, written) in arb_case()) {
            check(&l, &order, &written, Packing::Compact)?;
        }

        #[test]
        fn sparse_plan_is_sound((l, order, written) in arb_case()) {
            check(&l, &order, &written, Packing::Sparse)?;
        }
    }
}
