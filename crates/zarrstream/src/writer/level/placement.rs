//! Frames written by index ([`Writer::write_frame`](crate::writer::Writer::write_frame)): the
//! index checks, and the counts that tell when a staging group, a shard set or an
//! append-axis row has all its frames, whatever order they came in.
//!
//! Appending seals a box when its last frame in C order arrives; indexed frames seal it
//! when the frames taken in it (written or dropped) reach the frames it holds. A frame
//! is taken at most once: a second one at the same index is refused, and nothing
//! already written is touched.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::error::{Error, FrameIndexError, Result};
use crate::writer::level::Level;
use crate::writer::state::grid::Grid;

/// Rows of shard sets along an unbounded axis 0 that may be open at once: the lowest one
/// not yet complete and the next (see [`Writer::write_frame`](crate::writer::Writer::write_frame)).
pub const WINDOW_ROWS: u64 = 2;

/// What the pushing thread knows of the frames written by index.
#[derive(Debug, Default)]
pub(in crate::writer) struct Placement {
    /// Frames taken in each shard set not yet complete: one flag per frame of the set's
    /// box (C order), and how many are set.
    sets: HashMap<Vec<u64>, (Vec<bool>, u64)>,
    /// Shard sets all of whose frames were taken (below `low_row` they are forgotten).
    done_sets: HashSet<Vec<u64>>,
    /// Frames taken in each staging group not yet complete (chunks deeper than a frame).
    groups: HashMap<Vec<u64>, u64>,
    /// Frames taken in each append-axis row of shard sets not yet complete.
    rows: HashMap<u64, u64>,
    /// Rows complete above `low_row`.
    done_rows: HashSet<u64>,
    /// The lowest row not yet complete.
    low_row: u64,
    /// One past the largest axis-0 coordinate taken.
    pub(in crate::writer) extent0: u64,
}

/// Frames of the box at box coordinates `b` of boxes of `size`, clipped to the array.
fn box_frames(g: &Grid, b: &[u64], size: &[u64]) -> u64 {
    b.iter()
        .zip(size)
        .zip(&g.extent)
        .map(|((&bi, &s), &e)| {
            let start = bi * s;
            s.min(e.saturating_sub(start))
        })
        .product()
}

impl Placement {
    /// Checks `c` against the array's grid: its rank, every coordinate in bounds (an
    /// unbounded axis 0 within [`WINDOW_ROWS`]) and not taken before.
    pub(in crate::writer) fn check(
        &self,
        g: &Grid,
        c: &[u64],
    ) -> std::result::Result<(), FrameIndexError> {
        if c.len() != g.extent.len() {
            return Err(FrameIndexError::Rank {
                got: c.len(),
                lead: g.extent.len(),
            });
        }
        for (axis, (&value, &size)) in c.iter().zip(&g.extent).enumerate() {
            if size != u64::MAX && value >= size {
                return Err(FrameIndexError::OutOfBounds { axis, value, size });
            }
        }
        let row = c[0] / g.shard_lead[0];
        // Every frame of the rows below `low_row` was taken.
        if row < self.low_row {
            return Err(FrameIndexError::Duplicate);
        }
        if g.extent[0] == u64::MAX && row >= self.low_row + WINDOW_ROWS {
            return Err(FrameIndexError::OutsideWindow {
                value: c[0],
                low: self.low_row * g.shard_lead[0],
                high: (self.low_row + WINDOW_ROWS) * g.shard_lead[0],
            });
        }
        let sc = Grid::box_of(c, &g.shard_lead);
        let taken = self.done_sets.contains(&sc)
            || self
                .sets
                .get(&sc)
                .is_some_and(|(f, _)| f[Grid::index_in_box(c, &g.shard_lead)]);
        if taken {
            return Err(FrameIndexError::Duplicate);
        }
        Ok(())
    }

    /// Records frame `c` as taken; returns what it completed.
    fn take(&mut self, g: &Grid, c: &[u64]) -> Completed {
        self.extent0 = self.extent0.max(c[0] + 1);
        let mut done = Completed::default();
        if g.deep() {
            let gc = Grid::box_of(c, &g.chunk_lead);
            let n = self.groups.entry(gc.clone()).or_default();
            *n += 1;
            if *n == box_frames(g, &gc, &g.chunk_lead) {
                self.groups.remove(&gc);
                done.group = Some(gc);
            }
        }
        let sc = Grid::box_of(c, &g.shard_lead);
        let per_set = g.shard_lead.iter().product::<u64>() as usize;
        let (frames, n) = self
            .sets
            .entry(sc.clone())
            .or_insert_with(|| (vec![false; per_set], 0));
        frames[Grid::index_in_box(c, &g.shard_lead)] = true;
        *n += 1;
        if *n == box_frames(g, &sc, &g.shard_lead) {
            self.sets.remove(&sc);
            self.done_sets.insert(sc.clone());
            done.set = Some(sc);
        }
        let row = c[0] / g.shard_lead[0];
        let n = self.rows.entry(row).or_default();
        *n += 1;
        if *n == box_frames(g, &[row], &g.row_box[..1]) * g.row_box[1..].iter().product::<u64>() {
            self.rows.remove(&row);
            self.done_rows.insert(row);
            let end = (row + 1).saturating_mul(g.shard_lead[0]).min(g.extent[0]);
            done.row = Some((row, end));
            while self.done_rows.remove(&self.low_row) {
                self.low_row += 1;
                let low = self.low_row;
                self.done_sets.retain(|s| s[0] >= low);
            }
        }
        done
    }
}

/// The boxes one frame completed.
#[derive(Debug, Default)]
struct Completed {
    group: Option<Vec<u64>>,
    set: Option<Vec<u64>>,
    /// The row and the axis-0 extent it ends at.
    row: Option<(u64, u64)>,
}

impl Level {
    /// Checks a frame index for [`write_frame`](crate::writer::Writer::write_frame), switching
    /// this level to indexed frames on the first one.
    pub(in crate::writer) fn check_index(&mut self, c: &[u64]) -> Result<()> {
        self.check_open()?;
        let refuse = |problem| Error::FrameIndex {
            index: c.to_vec(),
            problem,
        };
        if self.pyramid.is_some() {
            return Err(refuse(FrameIndexError::Unsupported(
                "pyramid levels (they are appended to)",
            )));
        }
        if self.intake.placement.is_none() {
            if self.counters.next_frame > 0 {
                return Err(refuse(FrameIndexError::Appending));
            }
            self.intake.placement = Some(Placement::default());
        }
        let g = &self.shared.grid;
        match &self.intake.placement {
            Some(p) => p.check(g, c).map_err(refuse),
            None => Err(Error::Internal("indexed frames without placement".into())),
        }
    }

    /// After indexed frame `c` (accepted or not): dispatch the chunk group it completes,
    /// seal the shard set and the append-axis row it completes.
    pub(in crate::writer) fn seal_counted(&mut self, c: &[u64]) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let Some(p) = self.intake.placement.as_mut() else {
            return Err(Error::Internal("indexed frames without placement".into()));
        };
        let done = p.take(&shared.grid, c);
        if let Some(gc) = done.group
            && let Some(group) = self.intake.open_groups.remove(&gc)
        {
            self.dispatch_group(&gc, group)?;
        }
        if let Some(sc) = done.set {
            self.seal_set(&sc);
        }
        if let Some((row, end)) = done.row {
            self.seal_row(row, end);
        }
        Ok(())
    }

    /// Whether shard sets may be handed over out of the preparer's order, with those
    /// not yet needed kept open until their frames come.
    pub(in crate::writer) fn indexed(&self) -> bool {
        self.intake.placement.is_some()
    }

    /// One past the largest axis-0 coordinate of the indexed frames taken.
    pub(in crate::writer) fn indexed_extent0(&self) -> Option<u64> {
        self.intake.placement.as_ref().map(|p| p.extent0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::state::grid::tests::grid;

    #[test]
    fn boxes_complete_whatever_the_order() {
        // t=3 (clipped last set), c=2; groups 2 deep on t, sets 2 deep on t.
        let g = grid(&[3, 2, 4, 4], &[2, 1, 4, 4], &[2, 2, 4, 4]);
        let mut p = Placement::default();
        // Channel-first: c=1 then c=0.
        let order = [[0, 1], [1, 1], [2, 1], [0, 0], [1, 0], [2, 0]];
        let mut groups = Vec::new();
        let mut sets = Vec::new();
        let mut rows = Vec::new();
        for c in order {
            assert_eq!(p.check(&g, &c), Ok(()));
            let d = p.take(&g, &c);
            groups.extend(d.group);
            sets.extend(d.set);
            rows.extend(d.row);
            assert_eq!(p.check(&g, &c), Err(FrameIndexError::Duplicate));
        }
        assert_eq!(groups, [vec![0, 1], vec![1, 1], vec![0, 0], vec![1, 0]]);
        assert_eq!(sets, [vec![0, 0], vec![1, 0]]);
        assert_eq!(rows, [(0, 2), (1, 3)]);
    }

    #[test]
    fn indices_are_checked() {
        let g = grid(&[3, 2, 4, 4], &[1, 1, 4, 4], &[1, 1, 4, 4]);
        let p = Placement::default();
        assert_eq!(
            p.check(&g, &[0]),
            Err(FrameIndexError::Rank { got: 1, lead: 2 })
        );
        assert_eq!(
            p.check(&g, &[1, 2]),
            Err(FrameIndexError::OutOfBounds {
                axis: 1,
                value: 2,
                size: 2
            })
        );
        let g = grid(&[0, 2, 4, 4], &[1, 1, 4, 4], &[2, 1, 4, 4]);
        let mut p = Placement::default();
        assert_eq!(
            p.check(&g, &[4, 0]),
            Err(FrameIndexError::OutsideWindow {
                value: 4,
                low: 0,
                high: 4
            })
        );
        for c in [[0, 0], [1, 0], [0, 1], [1, 1]] {
            p.take(&g, &c);
        }
        assert_eq!(p.check(&g, &[4, 0]), Ok(()), "row 0 done: the window moved");
        assert_eq!(p.check(&g, &[1, 1]), Err(FrameIndexError::Duplicate));
        assert!(
            p.done_sets.is_empty(),
            "sets below the window are forgotten"
        );
    }
}
