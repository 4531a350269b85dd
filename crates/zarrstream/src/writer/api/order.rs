//! The order in which frames arrive: the loop order of the leading axes, and what it
//! implies for the boxes (staging groups, shard sets) that are open at once.
//!
//! Frames are points of the leading axes (all but `y, x`). An acquisition visits them in
//! nested loops; appending is the loop in storage order (axis 0 outermost). A box of
//! frames (an inner chunk deeper than one frame, or a shard set) opens at its first frame
//! and can be finished at its last, so how many are open at once depends on the order:
//! appending `t, c, z` frames into shard sets 4 deep on `t` keeps a set open for every
//! `(c, z)`, acquiring channel-first (`c` outermost, then `t`, then `z`) only one per `z`.

use crate::error::{Error, OrderError, Result};

/// The loop order of an acquisition over the array's leading axes (every axis but the
/// last two), outermost first, as axis numbers of the stored array.
///
/// Storage order `t, c, z, y, x` acquired channel-first (all time points of channel 0,
/// then of channel 1, a z-stack at each) is `[1, 0, 2]`: the loop over `c` outermost,
/// then `t`, then `z`.
///
/// ```
/// use zarrstream::AcquisitionOrder;
/// let order = AcquisitionOrder::new([1, 0, 2]);
/// assert_eq!(order.axes(), &[1, 0, 2]);
/// assert_eq!(AcquisitionOrder::storage(3).axes(), &[0, 1, 2]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcquisitionOrder(Vec<usize>);

/// Axis numbers; a dimension name is resolved before (by [`crate::config`], against the
/// array's `dimension_names`), so one left here named no dimension.
impl<'de> serde::Deserialize<'de> for AcquisitionOrder {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Axis {
            Number(usize),
            Name(String),
        }
        Vec::<Axis>::deserialize(d)?
            .into_iter()
            .map(|a| match a {
                Axis::Number(i) => Ok(i),
                Axis::Name(n) => Err(serde::de::Error::custom(format!(
                    "{n:?} is not one of the array's dimension_names (or give axis numbers)"
                ))),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(AcquisitionOrder)
    }
}

impl AcquisitionOrder {
    /// The loop order `axes`, outermost first (checked against the array when a writer
    /// is created: [`OrderError`]).
    pub fn new(axes: impl Into<Vec<usize>>) -> Self {
        AcquisitionOrder(axes.into())
    }

    /// Storage order (appending): axis 0 outermost, for `lead` leading axes.
    pub fn storage(lead: usize) -> Self {
        AcquisitionOrder((0..lead).collect())
    }

    /// The order from dimension names, outermost first (`["c", "t", "z"]`), against
    /// the array's leading `dims` in storage order.
    ///
    /// ```
    /// use zarrstream::AcquisitionOrder;
    /// let dims = ["t", "c", "z"];
    /// let order = AcquisitionOrder::from_names(&["c", "t", "z"], &dims)?;
    /// assert_eq!(order.axes(), &[1, 0, 2]);
    /// # Ok::<(), zarrstream::Error>(())
    /// ```
    pub fn from_names<S: AsRef<str>, D: AsRef<str>>(names: &[S], dims: &[D]) -> Result<Self> {
        let axes = names
            .iter()
            .map(|n| {
                dims.iter()
                    .position(|d| d.as_ref() == n.as_ref())
                    .ok_or_else(|| OrderError::UnknownName(n.as_ref().to_string()))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let order = AcquisitionOrder(axes);
        order.check(dims.len())?;
        Ok(order)
    }

    /// The axes, outermost loop first.
    pub fn axes(&self) -> &[usize] {
        &self.0
    }

    /// A permutation of `0..lead`.
    pub(crate) fn check(&self, lead: usize) -> std::result::Result<(), OrderError> {
        if self.0.len() != lead {
            return Err(OrderError::Rank {
                got: self.0.len(),
                lead,
            });
        }
        let mut seen = vec![false; lead];
        for &a in &self.0 {
            match seen.get_mut(a) {
                None => return Err(OrderError::NoAxis { axis: a, lead }),
                Some(s) if *s => return Err(OrderError::Repeated(a)),
                Some(s) => *s = true,
            }
        }
        Ok(())
    }
}

/// How many boxes of `size` can have received some but not all of their frames at once
/// when frames arrive in nested loops over `order` on a grid of `extent` (axis 0
/// `u64::MAX` when unbounded): every combination of the box coordinates of the loops
/// inside the outermost loop whose box is more than one frame deep (those loops run
/// through all their boxes before the deep loop moves on, leaving each open). `None`
/// when that is unbounded (an unbounded axis 0 inside such a loop).
pub(crate) fn max_open_boxes(extent: &[u64], size: &[u64], order: &[usize]) -> Option<usize> {
    let Some(outer) = order.iter().position(|&a| size[a] > 1) else {
        return Some(1);
    };
    order[outer + 1..].iter().try_fold(1usize, |acc, &a| {
        if extent[a] == u64::MAX {
            return None;
        }
        usize::try_from(extent[a].div_ceil(size[a]))
            .ok()
            .and_then(|n| acc.checked_mul(n))
    })
}

/// Advances `coords` to the next point of a grid of `counts` in the loop order `order`
/// (the innermost loop, `order`'s last axis, first). The outermost axis is not wrapped:
/// past the grid's end it reads `counts[order[0]]`.
pub(crate) fn next_in_order(coords: &mut [u64], counts: &[u64], order: &[usize]) {
    for (i, &a) in order.iter().enumerate().rev() {
        coords[a] += 1;
        if i == 0 || coords[a] < counts[a] {
            break;
        }
        coords[a] = 0;
    }
}

/// Checks that frames can arrive in `order` on a grid of `extent`: a permutation of the
/// leading axes, and an unbounded axis 0 outermost (no other loop could ever move on).
pub(crate) fn validate(order: &AcquisitionOrder, extent: &[u64]) -> Result<()> {
    order.check(extent.len())?;
    if extent[0] == u64::MAX && order.axes()[0] != 0 {
        return Err(Error::Order(OrderError::UnboundedInside));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_order_walks_c_order() {
        let counts = [2, 2, 3];
        let mut c = vec![0, 0, 0];
        let mut seen = vec![c.clone()];
        for _ in 0..11 {
            next_in_order(&mut c, &counts, &[0, 1, 2]);
            seen.push(c.clone());
        }
        assert_eq!(seen[1], vec![0, 0, 1]);
        assert_eq!(seen[3], vec![0, 1, 0]);
        assert_eq!(seen[11], vec![1, 1, 2]);
        next_in_order(&mut c, &counts, &[0, 1, 2]);
        assert_eq!(c, vec![2, 0, 0], "past the end, axis 0 reads its count");
    }

    #[test]
    fn channel_first_walks_t_inside_c() {
        let counts = [3, 2];
        let mut c = vec![0, 0];
        let mut seen = vec![c.clone()];
        for _ in 0..5 {
            next_in_order(&mut c, &counts, &[1, 0]);
            seen.push(c.clone());
        }
        assert_eq!(
            seen,
            [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]].map(|a| a.to_vec())
        );
        next_in_order(&mut c, &counts, &[1, 0]);
        assert_eq!(c, vec![0, 2]);
    }

    #[test]
    fn open_boxes_follow_the_loops_inside_the_deep_one() {
        // t=8, c=3, z=5; shard sets 4 deep on t.
        let extent = [8, 3, 5];
        let size = [4, 1, 1];
        // Appending: the t-box is outermost, every (c, z) set is open.
        assert_eq!(max_open_boxes(&extent, &size, &[0, 1, 2]), Some(15));
        // Channel-first: inside c, t's boxes (z inside) stay open: 5 at once.
        assert_eq!(max_open_boxes(&extent, &size, &[1, 0, 2]), Some(5));
        // z outermost, then c, then t innermost: a t-box completes as t runs.
        assert_eq!(max_open_boxes(&extent, &size, &[2, 1, 0]), Some(1));
        // Frame-deep boxes: one at a time.
        assert_eq!(max_open_boxes(&extent, &[1, 1, 1], &[2, 0, 1]), Some(1));
        // An unbounded t inside the deep loop can never close its boxes.
        let unbounded = [u64::MAX, 3, 5];
        assert_eq!(max_open_boxes(&unbounded, &[1, 3, 1], &[1, 0, 2]), None);
        assert_eq!(max_open_boxes(&unbounded, &[4, 1, 1], &[0, 2, 1]), Some(15));
    }

    #[test]
    fn orders_are_permutations_with_an_unbounded_axis_outermost() {
        let extent = [u64::MAX, 3, 5];
        assert!(validate(&AcquisitionOrder::new([0, 2, 1]), &extent).is_ok());
        for (order, want) in [
            (vec![0, 1], "2 axes"),
            (vec![0, 1, 3], "no axis 3"),
            (vec![0, 1, 1], "twice"),
            (vec![1, 0, 2], "unbounded"),
        ] {
            let e = validate(&AcquisitionOrder::new(order.clone()), &extent).unwrap_err();
            assert!(e.to_string().contains(want), "{order:?}: {e}");
        }
        let e = AcquisitionOrder::from_names(&["c", "q"], &["t", "c"]).unwrap_err();
        assert!(e.to_string().contains("\"q\""), "{e}");
    }
}
