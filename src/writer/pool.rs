//! A bounded pool of equally sized buffers; a buffer goes home when dropped.

use std::ops::{Deref, DerefMut};

use crossbeam_channel::{Receiver, Sender, bounded};

/// Clones share the buffers.
#[derive(Clone)]
pub(crate) struct Pool {
    home: Sender<Vec<u8>>,
    free: Receiver<Vec<u8>>,
    count: usize,
    len: usize,
}

/// A buffer taken from a [`Pool`].
pub struct PoolBuf {
    buf: Vec<u8>,
    home: Sender<Vec<u8>>,
}

impl Pool {
    /// `count` buffers of `len` bytes, made resident now: otherwise the first push into
    /// each buffer pays a page fault per 4 KiB page (about 2,000 for a 2048 × 2048 u16
    /// frame), which showed up as the maximum push latency.
    pub(crate) fn new(count: usize, len: usize) -> Self {
        let (home, free) = bounded(count);
        for _ in 0..count {
            let mut buf = vec![0u8; len];
            // A zero store into calloc'ed memory may be optimised away; a one may not.
            buf.iter_mut().step_by(4096).for_each(|b| *b = 1);
            // The channel holds exactly `count`, so this never fails.
            let _ = home.try_send(buf);
        }
        Pool {
            home,
            free,
            count,
            len,
        }
    }

    /// A free buffer; waits for one when `wait`, else `None` if all are in use.
    pub(crate) fn get(&self, wait: bool) -> Option<PoolBuf> {
        let buf = if wait {
            self.free.recv().ok()?
        } else {
            self.free.try_recv().ok()?
        };
        Some(PoolBuf {
            buf,
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
        &self.buf
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        // The pool may already be gone at shutdown; then the memory is simply freed.
        let _ = self.home.try_send(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_home_on_drop() {
        let p = Pool::new(2, 8);
        let a = p.get(false).unwrap();
        let _b = p.get(false).unwrap();
        assert!(p.get(false).is_none());
        drop(a);
        assert_eq!(p.get(false).map(|b| b.len()), Some(8));
    }
}
