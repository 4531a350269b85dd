//! Hands out disjoint, writable slots of one shard's memory to worker threads.
//!
//! This is the crate's only `unsafe` code. A shard's memory (a file mapping, or plain
//! memory in tests) holds `n` fixed data slots and `n` 16-byte index entries. Each slot
//! `i` (its data bytes together with its index entry) can be claimed exactly once, from
//! any thread; the claim is a `&mut` view that no other claim overlaps. Slot `i`'s data
//! lies at data position `i`, or at `positions[i]` when the chunks are laid out in
//! another order (Morton). When every claim has been dropped, [`SlotRegion::close`]
//! gives the finisher the whole memory, once.
//!
//! Soundness rests on three checks made here, not by callers: the geometry is validated
//! against the memory's length and for non-overlap in [`SlotRegion::new`] (the positions
//! must be a permutation of `0..n`, so no two slots share data bytes); a per-slot flag
//! makes each claim unique; and a counter of live claims with a closed bit makes `close`
//! exclusive with every claim.
//!
//! A sink whose data goes to the file by other means (the direct sink) uses only the
//! slots' index entries: [`SlotGeometry::entries_only`] gives slots of no data bytes.
//!
//! Under the loom model tests (`--features loom`) the atomics are loom's, and every slot and
//! the whole memory carry a loom cell that tracks their accesses, so the model checks
//! that no claim overlaps another or the finisher's view of the whole memory.
//!
//! The shard files' mappings that back slots ([`crate::platform::GuardedMap`]) come from
//! the platform layer: on Linux under the SIGBUS guard, on Windows as plain views (a file
//! with a mapped view cannot be cut there).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// Memory whose address stays fixed while the owner is moved.
///
/// # Safety
/// `as_mut_ptr_len` must return the same pointer and length for the life of the value,
/// valid for reads and writes of `len` bytes, and nothing else may access that memory
/// while the value is owned by a [`SlotRegion`].
pub(crate) unsafe trait Backing: Send + Sync {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize);

    /// Makes `len` bytes at `offset` resident and writable without touching their
    /// contents (a hint: failures are ignored).
    fn prefault(&self, _offset: usize, _len: usize) {}
}

// SAFETY: a Vec's heap buffer does not move when the Vec is moved, and the region owns it.
unsafe impl Backing for Vec<u8> {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize) {
        (self.as_mut_ptr(), self.len())
    }
}

/// Where the slots and index entries lie (byte offsets into the memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotGeometry {
    pub n: usize,
    pub data_start: usize,
    pub slot_size: usize,
    pub index_offset: usize,
    /// The data position of each slot (`None`: slot `i` at position `i`).
    pub positions: Option<Arc<[u32]>>,
}

/// Why a geometry does not fit its memory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct GeometryError;

impl SlotGeometry {
    fn check(&self, len: usize) -> Result<(), GeometryError> {
        let data_end = self
            .n
            .checked_mul(self.slot_size)
            .and_then(|b| b.checked_add(self.data_start));
        let index_end = self
            .n
            .checked_mul(16)
            .and_then(|b| b.checked_add(self.index_offset));
        let (Some(data_end), Some(index_end)) = (data_end, index_end) else {
            return Err(GeometryError);
        };
        let disjoint = self.n == 0 || index_end <= self.data_start || data_end <= self.index_offset;
        if data_end <= len && index_end <= len && disjoint && self.positions_are_a_permutation() {
            Ok(())
        } else {
            Err(GeometryError)
        }
    }

    /// Whether every slot has its own data position in `0..n`.
    fn positions_are_a_permutation(&self) -> bool {
        let Some(positions) = &self.positions else {
            return true;
        };
        let mut seen = vec![false; self.n];
        positions.len() == self.n
            && positions.iter().all(|&p| {
                let p = p as usize;
                p < self.n && !std::mem::replace(&mut seen[p], true)
            })
    }

    /// Slots with no data bytes, only their index entries at `index_offset`: for a sink
    /// that writes the data by other means and stores each entry after it.
    pub(crate) fn entries_only(n: usize, index_offset: usize) -> Self {
        SlotGeometry {
            n,
            data_start: 0,
            slot_size: 0,
            index_offset,
            positions: None,
        }
    }

    /// The data position of slot `i` (`i < n`).
    fn position(&self, i: usize) -> usize {
        self.positions.as_ref().map_or(i, |p| p[i] as usize)
    }
}

const CLOSED: usize = 1 << (usize::BITS - 1);

/// A shard's memory cut into claimable slots.
pub(crate) struct SlotRegion<B: Backing> {
    ptr: *mut u8,
    len: usize,
    geometry: SlotGeometry,
    claimed: Box<[AtomicBool]>,
    /// Live claims, plus `CLOSED` once the finisher has taken the memory.
    live: AtomicUsize,
    /// Loom's record of each slot's accesses (one cell per slot).
    #[cfg(all(feature = "loom", test))]
    tracks: Box<[loom::cell::UnsafeCell<()>]>,
    backing: B,
}

// SAFETY: the raw pointer is only dereferenced through claims (disjoint by construction)
// or through `close` (exclusive by the `live` protocol), and `B: Send + Sync`.
unsafe impl<B: Backing> Send for SlotRegion<B> {}
// SAFETY: as above; shared access only hands out disjoint or exclusive views.
unsafe impl<B: Backing> Sync for SlotRegion<B> {}

/// One claimed slot: its data bytes and its index entry.
///
/// The views are private and only lent out for as long as the `Slot` is borrowed, so no
/// reference into the slot can outlive the claim (and alias a later [`SlotRegion::close`]).
pub(crate) struct Slot<'a> {
    data: &'a mut [u8],
    entry: &'a mut [u8; 16],
    live: &'a AtomicUsize,
    /// Loom's write access to the slot, for as long as the claim lives.
    #[cfg(all(feature = "loom", test))]
    track: Option<loom::cell::MutPtr<()>>,
}

impl Slot<'_> {
    /// The slot's data bytes.
    pub(crate) fn data(&mut self) -> &mut [u8] {
        self.data
    }

    /// The slot's 16-byte working-index entry.
    pub(crate) fn entry(&mut self) -> &mut [u8; 16] {
        self.entry
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        // Loom's access ends before the count drops, as the real writes do.
        #[cfg(all(feature = "loom", test))]
        drop(self.track.take());
        // Release: the slot's writes happen-before a `close` that observes the count.
        self.live.fetch_sub(1, Ordering::Release);
    }
}

/// Exclusive access to the whole memory after [`SlotRegion::close`].
pub(crate) struct Whole<'a> {
    bytes: &'a mut [u8],
    /// Loom's access to every slot, for as long as the finisher holds the memory.
    #[cfg(all(feature = "loom", test))]
    _tracks: Vec<loom::cell::MutPtr<()>>,
}

impl Deref for Whole<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl DerefMut for Whole<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.bytes
    }
}

impl<B: Backing> SlotRegion<B> {
    pub(crate) fn new(mut backing: B, geometry: SlotGeometry) -> Result<Self, GeometryError> {
        let (ptr, len) = backing.as_mut_ptr_len();
        geometry.check(len)?;
        let n = geometry.n;
        let claimed = (0..n).map(|_| AtomicBool::new(false)).collect();
        Ok(SlotRegion {
            ptr,
            len,
            geometry,
            #[cfg(all(feature = "loom", test))]
            tracks: (0..n).map(|_| loom::cell::UnsafeCell::new(())).collect(),
            claimed,
            live: AtomicUsize::new(0),
            backing,
        })
    }

    /// Claims slot `i`; `None` if it is out of range, already claimed, or the region is closed.
    pub(crate) fn claim(&self, i: usize) -> Option<Slot<'_>> {
        let g = &self.geometry;
        if i >= g.n {
            return None;
        }
        let mut cur = self.live.load(Ordering::Relaxed);
        loop {
            if cur & CLOSED != 0 {
                return None;
            }
            match self.live.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        if self.claimed[i].swap(true, Ordering::AcqRel) {
            self.live.fetch_sub(1, Ordering::Release);
            return None;
        }
        let data_at = g.data_start + g.position(i) * g.slot_size;
        let entry_at = g.index_offset + 16 * i;
        // SAFETY: `check` proved both ranges lie inside the memory and that the data
        // slots and the index region do not overlap; slot `i`'s ranges are disjoint from
        // every other slot's (its data position is its own: the positions are a
        // permutation); the `claimed` flag makes this the only claim of slot `i`; and
        // `live > 0` until the Slot drops, which keeps `close` from aliasing it.
        unsafe {
            let data = std::slice::from_raw_parts_mut(self.ptr.add(data_at), g.slot_size);
            let entry = &mut *self.ptr.add(entry_at).cast::<[u8; 16]>();
            Some(Slot {
                data,
                entry,
                live: &self.live,
                #[cfg(all(feature = "loom", test))]
                track: Some(self.tracks[i].get_mut()),
            })
        }
    }

    /// Prefaults the data of slots `first..end` (clamped to the region), e.g. on another
    /// thread ahead of the workers; safe at any time, as it reads and writes no bytes.
    pub(crate) fn prefault(&self, first: usize, end: usize) {
        let g = &self.geometry;
        let end = end.min(g.n);
        // Runs of consecutive data positions, one advice each (all of them in C order).
        let mut run: Option<(usize, usize)> = None;
        for p in (first..end).map(|i| g.position(i)) {
            run = match run {
                Some((a, b)) if b == p => Some((a, p + 1)),
                other => {
                    self.prefault_positions(other);
                    Some((p, p + 1))
                }
            };
        }
        self.prefault_positions(run);
    }

    /// Prefaults the data of positions `a..b`.
    fn prefault_positions(&self, run: Option<(usize, usize)>) {
        if let Some((a, b)) = run {
            let g = &self.geometry;
            // Only the backing's own fields are borrowed here, never its bytes, so this
            // does not alias the claimed slots.
            self.backing
                .prefault(g.data_start + a * g.slot_size, (b - a) * g.slot_size);
        }
    }

    /// Takes the whole memory once no claim is live; later claims fail. `None` if a claim
    /// is still live or the region was already closed.
    pub(crate) fn close(&self) -> Option<Whole<'_>> {
        self.live
            .compare_exchange(0, CLOSED, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: `live` went from 0 to CLOSED, so no Slot exists and none can be created,
        // and only this one call can succeed; the memory is valid for `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) };
        Some(Whole {
            bytes,
            #[cfg(all(feature = "loom", test))]
            _tracks: self.tracks.iter().map(|t| t.get_mut()).collect(),
        })
    }

    /// Gives the memory back (e.g. to unmap it on the finisher thread).
    pub(crate) fn into_backing(self) -> B {
        self.backing
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn geometry(n: usize) -> SlotGeometry {
        SlotGeometry {
            n,
            data_start: 0,
            slot_size: 8,
            index_offset: 8 * n,
            positions: None,
        }
    }

    #[test]
    fn geometry_must_fit_and_not_overlap() {
        assert!(SlotRegion::new(vec![0u8; 8 * 4 + 16 * 4], geometry(4)).is_ok());
        assert!(SlotRegion::new(vec![0u8; 8 * 4 + 16 * 4 - 1], geometry(4)).is_err());
        let overlap = SlotGeometry {
            n: 4,
            data_start: 0,
            slot_size: 8,
            index_offset: 24,
            positions: None,
        };
        assert!(SlotRegion::new(vec![0u8; 200], overlap).is_err());
        let huge = SlotGeometry {
            n: usize::MAX,
            data_start: 0,
            slot_size: 8,
            index_offset: 0,
            positions: None,
        };
        assert!(SlotRegion::new(vec![0u8; 200], huge).is_err());
    }

    #[test]
    fn each_slot_is_claimed_once() {
        let r = SlotRegion::new(vec![0u8; 96], geometry(4)).unwrap();
        let a = r.claim(1);
        assert!(a.is_some());
        assert!(r.claim(1).is_none());
        assert!(r.claim(4).is_none());
        drop(a);
        assert!(
            r.claim(1).is_none(),
            "a slot stays claimed after its view is dropped"
        );
    }

    #[test]
    fn close_waits_for_live_claims_and_is_exclusive() {
        let r = SlotRegion::new(vec![0u8; 96], geometry(4)).unwrap();
        let s = r.claim(0).unwrap();
        assert!(r.close().is_none(), "a live claim blocks close");
        drop(s);
        let w = r.close().unwrap();
        assert!(r.claim(2).is_none(), "no claims after close");
        assert_eq!(w.len(), 96);
        assert!(r.close().is_none(), "close succeeds only once");
    }

    #[test]
    fn threads_fill_disjoint_slots() {
        let n = 16;
        let r = Arc::new(SlotRegion::new(vec![0u8; n * 8 + n * 16], geometry(n)).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for i in (t..n).step_by(4) {
                        let mut slot = r.claim(i).unwrap();
                        slot.data().fill(i as u8);
                        slot.entry().copy_from_slice(&[i as u8 + 100; 16]);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let w = r.close().unwrap();
        for i in 0..n {
            assert!(w[i * 8..i * 8 + 8].iter().all(|&b| b == i as u8));
            assert!(
                w[n * 8 + 16 * i..n * 8 + 16 * i + 16]
                    .iter()
                    .all(|&b| b == i as u8 + 100)
            );
        }
        let r = Arc::try_unwrap(r).ok().unwrap();
        assert_eq!(r.into_backing().len(), n * 24);
    }

    fn permuted(positions: &[u32]) -> SlotGeometry {
        SlotGeometry {
            positions: Some(positions.into()),
            ..geometry(positions.len())
        }
    }

    #[test]
    fn positions_must_be_a_permutation() {
        let len = 4 * 24;
        assert!(SlotRegion::new(vec![0u8; len], permuted(&[2, 0, 3, 1])).is_ok());
        for bad in [&[0, 1, 1, 3][..], &[0, 1, 2, 4], &[0, 1, 2]] {
            let g = SlotGeometry {
                positions: Some(bad.into()),
                ..geometry(4)
            };
            assert!(SlotRegion::new(vec![0u8; len], g).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn permuted_slots_write_at_their_positions() {
        let order = [3u32, 0, 2, 1];
        let n = order.len();
        let r = Arc::new(SlotRegion::new(vec![0u8; n * 24], permuted(&order)).unwrap());
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for i in (t..n).step_by(2) {
                        let mut slot = r.claim(i).unwrap();
                        slot.data().fill(i as u8 + 1);
                        slot.entry().fill(i as u8 + 100);
                        r.prefault(0, n);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let w = r.close().unwrap();
        for (i, &p) in order.iter().enumerate() {
            let p = p as usize;
            assert!(w[p * 8..p * 8 + 8].iter().all(|&b| b == i as u8 + 1));
            let e = n * 8 + 16 * i;
            assert!(w[e..e + 16].iter().all(|&b| b == i as u8 + 100));
        }
    }
}
