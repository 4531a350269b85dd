//! The part of a reduced frame that one reduction writes.

/// A rectangle of a reduced frame: output rows `rows` and columns `cols`, where output
/// row `rows.start + i` starts at element `i * stride` of the destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    pub rows: std::ops::Range<usize>,
    pub cols: std::ops::Range<usize>,
    pub stride: usize,
}

impl Region {
    /// Output rows `first..first + n` of the whole width of an `h × w` frame's reduction,
    /// in a destination holding just those rows (a band).
    pub(crate) fn band((h, w): (usize, usize), first: usize, n: usize) -> Region {
        let w2 = w.div_ceil(2);
        Region {
            rows: first..(first + n).min(h.div_ceil(2)),
            cols: 0..w2,
            stride: w2,
        }
    }

    /// The part of the reduction that input rows `y` and columns `x` of an `h × w`
    /// frame reduce to, with the stride of the whole reduced frame. Both ranges must
    /// start on even pixels, so that no 2×2 block straddles two regions.
    pub(crate) fn of_input(
        (_, w): (usize, usize),
        y: std::ops::Range<usize>,
        x: std::ops::Range<usize>,
    ) -> Region {
        debug_assert!(y.start.is_multiple_of(2) && x.start.is_multiple_of(2));
        Region {
            rows: y.start / 2..y.end.div_ceil(2),
            cols: x.start / 2..x.end.div_ceil(2),
            stride: w.div_ceil(2),
        }
    }

    /// Byte offset of the region's first pixel in the whole reduced frame.
    pub(crate) fn offset_in_frame(&self, es: usize) -> usize {
        (self.rows.start * self.stride + self.cols.start) * es
    }
}
