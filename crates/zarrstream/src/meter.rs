//! Counting the bytes the writer's own buffers hold, at the sites that allocate them
//! (frame pool, staging, encode scratch and encoder contexts, mapped shard pages), so
//! [`Writer::memory_in_use`](crate::Writer::memory_in_use) and [`Stats::memory`]
//! report what the writer holds without reading `/proc`.
//!
//! [`Stats::memory`]: crate::Stats::memory

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bytes held by a writer's buffers: now and at most so far.
///
/// Counted where the buffers are allocated and freed, so it covers the writer's own
/// buffers (those [`MemoryEstimate`](crate::MemoryEstimate) lists as resident, except
/// `bookkeeping`): not thread stacks, small heap objects or the page cache.
///
/// ```
/// use zarrstream::MemoryUsage;
/// let u = MemoryUsage::default();
/// assert_eq!((u.current, u.peak), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct MemoryUsage {
    /// Bytes held now.
    pub current: u64,
    /// The most bytes held at once since the writer was created.
    pub peak: u64,
}

/// A counter of held bytes; adding to it also adds to its parent (a recording's
/// arrays count into the recording's meter).
#[derive(Debug, Default)]
pub(crate) struct Meter {
    current: AtomicU64,
    peak: AtomicU64,
    parent: Option<Arc<Meter>>,
}

impl Meter {
    pub(crate) fn new() -> Arc<Meter> {
        Arc::new(Meter::default())
    }

    /// A meter whose bytes also count in `parent`.
    pub(crate) fn child(parent: &Arc<Meter>) -> Arc<Meter> {
        Arc::new(Meter {
            parent: Some(Arc::clone(parent)),
            ..Meter::default()
        })
    }

    fn add(&self, n: u64) {
        let now = self.current.fetch_add(n, Ordering::AcqRel) + n;
        self.peak.fetch_max(now, Ordering::AcqRel);
        if let Some(p) = &self.parent {
            p.add(n);
        }
    }

    fn sub(&self, n: u64) {
        self.current.fetch_sub(n, Ordering::AcqRel);
        if let Some(p) = &self.parent {
            p.sub(n);
        }
    }

    pub(crate) fn usage(&self) -> MemoryUsage {
        let current = self.current.load(Ordering::Acquire);
        // `add` raises the peak just after the current figure, so a reader in between
        // would see the current above the peak; the current was reached, so it is one.
        let peak = self.peak.load(Ordering::Acquire).max(current);
        MemoryUsage { current, peak }
    }
}

/// Bytes counted in a meter for as long as this lives (a buffer's share).
#[derive(Debug)]
pub(crate) struct Held {
    meter: Arc<Meter>,
    bytes: AtomicU64,
}

impl Held {
    /// `bytes` counted in `meter` until dropped.
    pub(crate) fn new(meter: &Arc<Meter>, bytes: u64) -> Held {
        meter.add(bytes);
        Held {
            meter: Arc::clone(meter),
            bytes: AtomicU64::new(bytes),
        }
    }

    /// Counts `n` more bytes.
    pub(crate) fn add(&self, n: u64) {
        if n > 0 {
            self.bytes.fetch_add(n, Ordering::AcqRel);
            self.meter.add(n);
        }
    }

    /// Counts `n` bytes in all (more or fewer than before).
    pub(crate) fn set(&self, n: u64) {
        let old = self.bytes.swap(n, Ordering::AcqRel);
        if n > old {
            self.meter.add(n - old);
        } else if old > n {
            self.meter.sub(old - n);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.meter.sub(*self.bytes.get_mut());
    }
}

/// Bytes of the memory pages that `len` bytes starting at `offset` touch.
pub(crate) fn page_span(offset: u64, len: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let start = offset / PAGE * PAGE;
    (offset + len).div_ceil(PAGE) * PAGE - start
}

/// The page size the counts and the estimate round to (the smallest on Linux; huge
/// pages only ever back whole pages of a mapping the writer touches anyway).
pub(crate) const PAGE: u64 = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_count_in_the_meter_and_its_parent_until_dropped() {
        let parent = Meter::new();
        let child = Meter::child(&parent);
        let a = Held::new(&child, 100);
        let b = Held::new(&parent, 50);
        a.add(20);
        assert_eq!(
            child.usage(),
            MemoryUsage {
                current: 120,
                peak: 120
            }
        );
        assert_eq!(
            parent.usage(),
            MemoryUsage {
                current: 170,
                peak: 170
            }
        );
        a.set(10);
        assert_eq!(
            child.usage(),
            MemoryUsage {
                current: 10,
                peak: 120
            }
        );
        drop(a);
        drop(b);
        assert_eq!(
            parent.usage(),
            MemoryUsage {
                current: 0,
                peak: 170
            }
        );
        assert_eq!(child.usage().current, 0);
    }

    #[test]
    fn page_span_rounds_out_to_pages() {
        assert_eq!(page_span(0, 0), 0);
        assert_eq!(page_span(0, 1), 4096);
        assert_eq!(page_span(4095, 2), 8192);
        assert_eq!(page_span(4096, 4096), 4096);
    }
}
