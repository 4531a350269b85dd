//! A bounded pool of equally sized buffers; a buffer goes home when dropped.

use std::ops::{Deref, DerefMut};

use crossbeam_channel::{Receiver, Sender, bounded};
use memmap2::{Advice, MmapMut};

/// Clones share the buffers.
#[derive(Clone)]
pub(crate) struct Pool {
    home: Sender<MmapMut>,
    free: Receiver<MmapMut>,
    count: usize,
    len: usize,
}

/// A frame buffer lent by the writer's pool ([`Writer::buffer`](crate::Writer::buffer));
/// it goes back to the pool when dropped.
pub struct PoolBuf {
    /// `None` only while going home.
    buf: Option<MmapMut>,
    home: Sender<MmapMut>,
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
    pub(crate) fn new(count: usize, len: usize) -> std::io::Result<Self> {
        let (home, free) = bounded(count);
        for _ in 0..count {
            let mut buf = MmapMut::map_anon(len)?;
            // Advice only: without huge pages, 4 KiB pages serve the same bytes.
            let _ = buf.advise(Advice::HugePage);
            // Anonymous memory reads as zeros until written; a store makes it resident.
            buf.iter_mut().step_by(4096).for_each(|b| *b = 1);
            // The channel holds exactly `count`, so this never fails.
            let _ = home.try_send(buf);
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
        self.buf.as_deref().unwrap_or_default()
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf.as_deref_mut().unwrap_or_default()
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
        let p = Pool::new(2, 8).unwrap();
        let a = p.get(false).unwrap();
        let _b = p.get(false).unwrap();
        assert!(p.get(false).is_none());
        drop(a);
        assert_eq!(p.get(false).map(|b| b.len()), Some(8));
    }
}
