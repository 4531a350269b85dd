//! Where each chunk and the index end up when a shard is finished.

use super::ShardLayout;
use crate::spec::IndexLocation;

/// What happens to the unused tail of each slot when a shard is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Packing {
    /// Move chunks together so the file has no gaps (default; files copy and upload
    /// without holes).
    #[default]
    Compact,
    /// Leave chunks in their slots and punch the gaps out of the file (no data moves;
    /// the file is sparse, its logical size includes the gaps).
    Sparse,
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

pub(crate) fn plan(
    layout: &ShardLayout,
    written: &[Option<(u64, u64)>],
    packing: Packing,
) -> FinalLayout {
    let start = layout.location == IndexLocation::Start;
    let mut entries = written.to_vec();
    let mut moves = Vec::new();
    let mut holes = Vec::new();
    let data_end = match packing {
        Packing::Compact => {
            let mut pos = if start { layout.index_size } else { 0 };
            for e in entries.iter_mut().flatten() {
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
            for (i, e) in written.iter().enumerate() {
                let slot = layout.slot_offset(i as u64);
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
    fn compact_end_packs_in_slot_order_then_index() {
        let l = layout(IndexLocation::End);
        let p = plan(
            &l,
            &[Some((0, 10)), None, Some((200, 30))],
            Packing::Compact,
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
        let p = plan(&l, &written, Packing::Sparse);
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
        let p = plan(&l, &[Some((0, 10)), Some((100, 5)), None], Packing::Sparse);
        assert!(p.moves.is_empty());
        assert_eq!((p.index_at, p.len), (105, 157));
        let empty = plan(&l, &[None, None, None], Packing::Sparse);
        assert_eq!((empty.index_at, empty.len), (0, 52));
    }
}
