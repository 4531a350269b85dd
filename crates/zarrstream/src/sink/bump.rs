//! Lock-free hand-out of append positions inside a shard's reserved data region, for
//! the sinks that pack chunks back to back (pwrite, direct).
//!
//! A worker takes its range with one atomic read-modify-write; no lock is held per
//! chunk. The bounds check is part of the same step: the counter moves only when the
//! whole range fits, so a refused chunk leaves it where it was. A plain `fetch_add`
//! would leave the counter past the end after a refusal, so every later chunk, even
//! one that fits, would be refused too, and repeated refusals could wrap the counter
//! around and let a range through the check that overlaps written chunks.

use crate::sync::{AtomicU64, Ordering};

/// Why a range was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BumpError {
    /// The range would pass the reserved end (`at + len > end`, or overflow `u64`).
    #[error("{len} bytes at {at} pass the shard's reserved end {end}")]
    PastReservedEnd {
        /// Where the range would have started.
        at: u64,
        /// Its length.
        len: u64,
        /// The reserved end.
        end: u64,
    },
}

/// The next free position in `[start, end)`.
pub(crate) struct Bump {
    next: AtomicU64,
    end: u64,
}

impl Bump {
    pub(crate) fn new(start: u64, end: u64) -> Self {
        Bump {
            next: AtomicU64::new(start),
            end,
        }
    }

    /// Hands out `len` bytes at the current end of the handed-out ranges; ranges never
    /// overlap and never pass `end`.
    ///
    /// Relaxed suffices: the counter orders nothing but itself (each range's bytes are
    /// written by the thread that got it, and the finisher learns about them through
    /// the shard's pending count), and a read-modify-write always sees the latest value.
    pub(crate) fn reserve(&self, len: u64) -> Result<u64, BumpError> {
        let mut at = self.next.load(Ordering::Relaxed);
        loop {
            let new = at.checked_add(len).filter(|&e| e <= self.end).ok_or(
                BumpError::PastReservedEnd {
                    at,
                    len,
                    end: self.end,
                },
            )?;
            match self
                .next
                .compare_exchange_weak(at, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(at),
                Err(now) => at = now,
            }
        }
    }

    /// The end of the ranges handed out so far.
    #[cfg(all(test, not(feature = "loom")))]
    pub(crate) fn position(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn a_refused_range_leaves_the_counter_for_later_ones() {
        let b = Bump::new(100, 200);
        assert_eq!(b.reserve(60), Ok(100));
        assert_eq!(
            b.reserve(60),
            Err(BumpError::PastReservedEnd {
                at: 160,
                len: 60,
                end: 200
            })
        );
        assert_eq!(b.position(), 160, "the refusal did not move the counter");
        assert_eq!(b.reserve(40), Ok(160), "a range that fits still does");
        assert_eq!(b.position(), 200);
        assert!(b.reserve(u64::MAX).is_err(), "no wrap-around");
        assert_eq!(b.reserve(0), Ok(200));
    }

    #[test]
    fn threads_get_disjoint_ranges() {
        let b = Bump::new(0, 8 * 1000 * 7);
        let mut got: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..1000).map(|_| b.reserve(7).unwrap()).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        got.sort_unstable();
        assert!(got.iter().enumerate().all(|(k, &at)| at == 7 * k as u64));
        assert!(b.reserve(1).is_err());
    }
}
