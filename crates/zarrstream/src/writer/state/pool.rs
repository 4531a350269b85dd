//! A bounded pool of equally sized buffers; a buffer goes home when dropped.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, bounded};
use memmap2::MmapMut;

use crate::meter::{Held, Meter, page_span};

/// Clones share the buffers.
#[derive(Clone)]
pub(crate) struct Pool {
    home: Sender<Block>,
    free: Receiver<Block>,
    count: usize,
    len: usize,
}

/// One buffer and its count in the writer's meter, which ends when the buffer is freed.
struct Block {
    map: MmapMut,
    _held: Held,
}

/// A frame buffer lent by the writer's pool ([`Writer::buffer`](crate::Writer::buffer));
/// it goes back to the pool when dropped.
pub struct PoolBuf {
    /// `None` only while going home.
    buf: Option<Block>,
    home: Sender<Block>,
}

impl Pool {
    /// `count` buffers of `len` bytes, made resident now: otherwise the first push into
    /// each buffer pays a page fault per 4 KiB page (about 2,000 for a 2048 × 2048 u16
    /// frame), which showed up as the maximum push latency.
    ///
    /// The buffers are anonymous mappings advised to use transparent huge pages (where
    /// the kernel has them, as with the default `madvise` setting): the caller's copy
    /// into deep-chunk staging writes 512-byte runs spread over a 128 MiB group, and with
    /// 4 KiB pages C2 `lz4:1` ran 13 % slower (`record`, BENCHMARKS.md).
    ///
    /// Each buffer counts its pages in `meter` until it is freed.
    pub(crate) fn new(count: usize, len: usize, meter: &Arc<Meter>) -> std::io::Result<Self> {
        let (home, free) = bounded(count);
        for _ in 0..count {
            let mut buf = MmapMut::map_anon(len)?;
            // Advice only: without huge pages, 4 KiB pages serve the same bytes.
            crate::platform::advise_huge_pages(&buf);
            // Anonymous memory reads as zeros until written; a store makes it resident.
            buf.iter_mut().step_by(4096).for_each(|b| *b = 1);
            let block = Block {
                map: buf,
                _held: Held::new(meter, page_span(0, len as u64)),
            };
            // The channel holds exactly `count`, so this never fails.
            let _ = home.try_send(block);
        }
        Ok(Pool {
            home,
            free,
            count,
            len,
        })
    }

    /// A free buffer; waits for one when `wait`, else `None` if all are in use.
    pub(crate) fn get(&self, wait: bool) -> Option<PoolBuf> {
        let buf = if wait {
            self.free.recv().ok()?
        } else {
            self.free.try_recv().ok()?
        };
        Some(PoolBuf {
            buf: Some(buf),
            home: self.home.clone(),
        })
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }

    pub(crate) fn bytes(&self) -> usize {
        self.count * self.len
    }
}

impl Deref for PoolBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| &b.map[..])
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut().map_or(&mut [], |b| &mut b.map[..])
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        // The pool may already be gone at shutdown; then the memory is simply freed.
        if let Some(buf) = self.buf.take() {
            let _ = self.home.try_send(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_home_on_drop() {
        let meter = Meter::new();
        let p = Pool::new(2, 8, &meter).unwrap();
        assert_eq!(meter.usage().current, 2 * 4096, "each buffer is a page");
        let a = p.get(false).unwrap();
        let _b = p.get(false).unwrap();
        assert!(p.get(false).is_none());
        drop(a);
        assert_eq!(p.get(false).map(|b| b.len()), Some(8));
        drop((p, _b));
        assert_eq!(
            meter.usage().current,
            0,
            "freed buffers are no longer counted"
        );
    }
}
