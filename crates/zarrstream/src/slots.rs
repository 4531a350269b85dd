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
//! It also maps shard files ([`map_reserved_file`]) under the SIGBUS guard: a process-wide
//! SIGBUS handler and a lock-free table of the shard mappings, which turn an access past
//! the end of a shard file that another process truncated into zero pages and a flag
//! instead of the death of the process (see "The SIGBUS guard" below).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

// SAFETY: a mapping's address is fixed from mmap to munmap, and the region owns it.
unsafe impl Backing for memmap2::MmapMut {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize) {
        (self.as_mut_ptr(), self.len())
    }

    fn prefault(&self, offset: usize, len: usize) {
        // Kernels before 5.14 lack MADV_POPULATE_WRITE: pages then fault in on first write.
        let _ = self.advise_range(memmap2::Advice::PopulateWrite, offset, len);
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
        // Release: the slot's writes happen-before a `close` that observes the count.
        self.live.fetch_sub(1, Ordering::Release);
    }
}

/// Exclusive access to the whole memory after [`SlotRegion::close`].
pub(crate) struct Whole<'a> {
    bytes: &'a mut [u8],
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
        let claimed = (0..geometry.n).map(|_| AtomicBool::new(false)).collect();
        Ok(SlotRegion {
            ptr,
            len,
            geometry,
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
        Some(Whole { bytes })
    }

    /// Gives the memory back (e.g. to unmap it on the finisher thread).
    pub(crate) fn into_backing(self) -> B {
        self.backing
    }
}

/// Maps a shard file the writer created itself and reserved at its full size, with its
/// pages under the SIGBUS guard (see [`GuardedMap`]).
///
/// Mapping a file is unsafe because another process could truncate or change it under
/// the mapping. This file is a fresh temporary (`create_new`) inside the writer's own
/// store, reserved with `fallocate` first, so pages are backed and a full disk is an
/// error before this call, never a SIGBUS later. What the writer cannot prevent is
/// another process cutting the file: an access to a page past the new end then raises
/// SIGBUS, which the guard turns into zero pages and a flag the finisher reports as
/// `Error::ShardTruncated`. Fails (never maps unguarded) when the guard cannot be
/// installed or its table is full.
pub(crate) fn map_reserved_file(file: &std::fs::File) -> std::io::Result<GuardedMap> {
    install_sigbus_guard()?;
    // SAFETY: see above; the writer itself never truncates the file while it is mapped
    // (the finisher unmaps before `set_len`), and a truncation by anyone else faults
    // into the guard registered below before any access can be made.
    let map = unsafe { memmap2::MmapMut::map_mut(file) }?;
    let (ptr, len) = (map.as_ptr() as usize, map.len());
    let entry = GUARDS.register(ptr, len, page_size()).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!(
                "the SIGBUS guard's table of {GUARD_CAPACITY} mapped shards is full \
                 (too many shard files open at once)"
            ),
        )
    })?;
    Ok(GuardedMap {
        guard: Registration { entry },
        map,
    })
}

// ---------------------------------------------------------------------------------------
// The SIGBUS guard
// ---------------------------------------------------------------------------------------
//
// A mapped shard file that another process truncates makes every access to a page past
// its new end raise SIGBUS, whose default action kills the process: the recording, the
// camera software and every other array with it. The guard keeps a fixed table of the
// shard mappings (an entry per live `GuardedMap`) and a process-wide SIGBUS handler. A
// SIGBUS the kernel raises for an address inside a registered mapping is answered by
// mapping anonymous zero pages over the whole mapping (`mmap` with `MAP_FIXED`, a plain
// system call and safe in a signal handler) and setting the entry's flag: the faulting
// store then retries on the new page and succeeds, the writer goes on into memory that
// no longer reaches the file, and the finisher, which checks the flag before it
// finishes the shard, reports `Error::ShardTruncated` and keeps the file for `recover`.
// Any other SIGBUS goes to the handler that was installed before ours (Rust's own
// stack-overflow handler, a host's), or kills the process as it would have.
//
// The handler reads the table without locks or allocation: entries are claimed and
// released with atomics, and each entry's fields are read under a sequence number, so a
// handler never acts on a half-written entry (seqlock). Soundness of the remapping rests
// on the order the owner keeps: an entry is registered right after its mapping is made
// and removed right before it is unmapped, and no access to the mapping happens outside
// that window (the `GuardedMap` owns both), so an address inside a registered entry can
// only fault while its mapping is live, and replacing the mapping's pages there changes
// memory only the writer's own shard uses.

/// Shard mappings the guard can hold at once. Each open shard of the mmap and direct
/// sinks takes one entry (a few per array and level, see `preparer::max_unfinished`); a
/// mapping beyond this fails with an I/O error instead of going unguarded.
pub(crate) const GUARD_CAPACITY: usize = 16384;

/// The table of every guarded mapping in the process.
static GUARDS: GuardTable<GUARD_CAPACITY> = GuardTable::new();

/// The state word's low two bits.
const FREE: usize = 0;
const WRITING: usize = 1;
const ACTIVE: usize = 2;

/// The state after `s` with tag `tag`: the generation (the bits above the tag) grows on
/// every change, so a reader that sees the same word before and after its reads knows
/// the fields did not change in between.
fn next_state(s: usize, tag: usize) -> usize {
    ((s >> 2).wrapping_add(1) << 2) | tag
}

struct GuardEntry {
    /// Generation << 2 | `FREE`, `WRITING` or `ACTIVE`.
    state: AtomicUsize,
    /// First byte of the mapping.
    start: AtomicUsize,
    /// Bytes of the mapping, rounded up to whole pages.
    len: AtomicUsize,
    /// Set by the handler when it replaced the mapping's pages.
    truncated: AtomicBool,
}

impl GuardEntry {
    const fn new() -> Self {
        GuardEntry {
            state: AtomicUsize::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            truncated: AtomicBool::new(false),
        }
    }
}

/// A lock-free, fixed-capacity table of address ranges.
struct GuardTable<const N: usize> {
    entries: [GuardEntry; N],
    /// Where the next registration starts looking (keeps claims O(1) on average).
    hint: AtomicUsize,
}

impl<const N: usize> GuardTable<N> {
    const fn new() -> Self {
        GuardTable {
            entries: [const { GuardEntry::new() }; N],
            hint: AtomicUsize::new(0),
        }
    }

    /// Registers `[start, start + len)` (`len` rounded up to `page`); `None` when full.
    fn register(&self, start: usize, len: usize, page: usize) -> Option<usize> {
        let len = len.div_ceil(page).checked_mul(page)?;
        let first = self.hint.load(Ordering::Relaxed);
        for k in (0..N).map(|k| (first + k) % N) {
            let e = &self.entries[k];
            let s = e.state.load(Ordering::Relaxed);
            if s & 3 != FREE {
                continue;
            }
            let writing = next_state(s, WRITING);
            if e.state
                .compare_exchange(s, writing, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // Release: a reader that sees the fields' new values also sees `WRITING`.
            std::sync::atomic::fence(Ordering::Release);
            e.start.store(start, Ordering::Relaxed);
            e.len.store(len, Ordering::Relaxed);
            e.truncated.store(false, Ordering::Relaxed);
            e.state
                .store(next_state(writing, ACTIVE), Ordering::Release);
            self.hint.store((k + 1) % N, Ordering::Relaxed);
            return Some(k);
        }
        None
    }

    /// Whether the handler replaced entry `k`'s pages.
    fn truncated(&self, k: usize) -> bool {
        self.entries[k].truncated.load(Ordering::Acquire)
    }

    /// Removes entry `k` (its owner's mapping is about to be unmapped).
    fn unregister(&self, k: usize) {
        let e = &self.entries[k];
        let s = e.state.load(Ordering::Relaxed);
        e.state.store(next_state(s, FREE), Ordering::Release);
    }

    /// The registered range holding `addr`, as `(entry, start, len)`. Async-signal-safe:
    /// atomic loads only.
    fn find(&self, addr: usize) -> Option<(usize, usize, usize)> {
        for (k, e) in self.entries.iter().enumerate() {
            let s1 = e.state.load(Ordering::Acquire);
            if s1 & 3 != ACTIVE {
                continue;
            }
            let start = e.start.load(Ordering::Relaxed);
            let len = e.len.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if e.state.load(Ordering::Relaxed) != s1 {
                // Changed while read: not the live mapping that faulted (that one's entry
                // cannot change while its mapping is in use).
                continue;
            }
            if addr >= start && addr - start < len {
                return Some((k, start, len));
            }
        }
        None
    }
}

/// A shard file's shared writable mapping, registered with the SIGBUS guard for as long
/// as it exists. Dropping it removes the registration, then unmaps.
pub(crate) struct GuardedMap {
    // Declared first: dropped (unregistered) before `map` is unmapped.
    guard: Registration,
    map: memmap2::MmapMut,
}

impl GuardedMap {
    /// Whether another process cut the file under the mapping and an access met the cut
    /// (the guard then replaced the mapping's pages with zeros: what was written through
    /// it since did not reach the file).
    pub(crate) fn truncated(&self) -> bool {
        GUARDS.truncated(self.guard.entry)
    }
}

impl Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl DerefMut for GuardedMap {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

// SAFETY: the mapping's address is fixed from mmap to munmap (the guard's replacement
// pages keep the address and length), and the region owns the mapping.
unsafe impl Backing for GuardedMap {
    fn as_mut_ptr_len(&mut self) -> (*mut u8, usize) {
        self.map.as_mut_ptr_len()
    }

    fn prefault(&self, offset: usize, len: usize) {
        self.map.prefault(offset, len);
    }
}

/// A guard table entry, removed on drop.
struct Registration {
    entry: usize,
}

impl Drop for Registration {
    fn drop(&mut self) {
        GUARDS.unregister(self.entry);
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(1)
}

/// The SIGBUS disposition found when the guard was installed, which it chains to.
static PREVIOUS: std::sync::OnceLock<libc::sigaction> = std::sync::OnceLock::new();

/// Installs the SIGBUS handler, once per process; later calls return the first result.
fn install_sigbus_guard() -> std::io::Result<()> {
    static INSTALLED: std::sync::OnceLock<Result<(), i32>> = std::sync::OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid out-parameter and a valid "default"
        // value (SIG_DFL, no flags, empty mask).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current disposition into a valid out-pointer.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let _ = PREVIOUS.set(old);
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: a thread with an alternate stack (Rust's threads have one) runs the
        // handler there; SA_SIGINFO: the handler needs the fault address.
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `new` is fully initialised, the handler has the SA_SIGINFO signature,
        // and the previous disposition was saved above for chaining.
        if unsafe { libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(())
    });
    (*result).map_err(std::io::Error::from_raw_os_error)
}

/// The SIGBUS handler: async-signal-safe (atomics, `mmap`, `sigaction`, `raise`).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if !info.is_null() {
        // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo for this signal.
        let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
        // Only faults the kernel raised (si_code > 0), not a SIGBUS sent with kill().
        if code > 0
            && let Some((k, start, len)) = GUARDS.find(addr)
        {
            GUARDS.entries[k].truncated.store(true, Ordering::Release);
            // SAFETY: `[start, start + len)` is the live shard mapping that faulted (see
            // the module's notes: its entry exists only while it is mapped and in use),
            // page-aligned and whole; replacing it with private zero pages keeps its
            // address valid for the owner, who unmaps it later as before.
            let p = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // The faulting access runs again, on a zero page.
                return;
            }
        }
    }
    chain(sig, info, ctx);
}

/// Hands a SIGBUS that is not ours to the previous handler, or lets it kill the process.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if let Some(prev) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: a handler installed with SA_SIGINFO has this signature, and it
                // is called as the kernel would have called it.
                let f = unsafe {
                    std::mem::transmute::<
                        usize,
                        extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void),
                    >(h)
                };
                f(sig, info, ctx);
            } else {
                // SAFETY: a handler installed without SA_SIGINFO takes the signal number.
                let f = unsafe { std::mem::transmute::<usize, extern "C" fn(libc::c_int)>(h) };
                f(sig);
            }
            return;
        }
    }
    // The default action (also for an ignored SIGBUS: a fault cannot be ignored, its
    // instruction would fault forever). A fault re-executes on return and now kills the
    // process; a signal sent with kill() is raised again, pending until we return.
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: valid pointers; sigaction and raise are async-signal-safe.
    unsafe {
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
        if info.is_null() || (*info).si_code <= 0 {
            libc::raise(libc::SIGBUS);
        }
    }
}

#[cfg(test)]
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

    #[test]
    fn guard_table_has_a_fixed_capacity_and_reuses_entries() {
        let t = GuardTable::<4>::new();
        let ks: Vec<usize> = (0..4)
            .map(|i| t.register(0x10000 * (i + 1), 100, 4096).unwrap())
            .collect();
        assert!(t.register(0x90000, 100, 4096).is_none(), "full");
        t.unregister(ks[2]);
        let again = t.register(0x90000, 100, 4096).unwrap();
        assert_eq!(again, ks[2]);
        assert_eq!(t.find(0x90000), Some((again, 0x90000, 4096)));
    }

    #[test]
    fn guard_table_finds_the_range_holding_an_address() {
        let t = GuardTable::<8>::new();
        let a = t.register(0x10000, 5000, 4096).unwrap();
        let b = t.register(0x40000, 4096, 4096).unwrap();
        // Lengths are rounded up to whole pages: the kernel maps whole pages.
        assert_eq!(t.find(0x10000), Some((a, 0x10000, 8192)));
        assert_eq!(t.find(0x10000 + 8191), Some((a, 0x10000, 8192)));
        assert_eq!(t.find(0x10000 + 8192), None);
        assert_eq!(t.find(0xffff), None);
        assert_eq!(t.find(0x40fff), Some((b, 0x40000, 4096)));
        assert!(!t.truncated(a));
        t.unregister(a);
        assert_eq!(t.find(0x10000), None, "an unregistered range is not ours");
    }

    #[test]
    fn guard_table_lookups_never_see_a_torn_entry() {
        // One live entry is looked up while other threads register and remove ranges
        // in the remaining entries as fast as they can: the lookup must always find the
        // live one and never report a range that was not registered as a whole.
        let t = Arc::new(GuardTable::<16>::new());
        let live = t.register(0x1000_0000, 4096, 4096).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..3)
            .map(|w| {
                let (t, stop) = (Arc::clone(&t), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        // Disjoint ranges, each with a length of its own: range `m`
                        // is `m` pages at `m << 24`.
                        let m = 1 + (i + w * 7) % 50;
                        if let Some(k) = t.register(m << 24, 4096 * m, 4096) {
                            t.unregister(k);
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        for _ in 0..rounds {
            assert_eq!(t.find(0x1000_0000 + 100), Some((live, 0x1000_0000, 4096)));
            for m in 1..=50usize {
                if let Some((_, start, l)) = t.find((m << 24) + 4096 * m - 1) {
                    assert_eq!((start, l), (m << 24, 4096 * m), "a torn entry was seen");
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in churn {
            h.join().unwrap();
        }
    }

    /// Runs this binary's test `name` alone in a child process with `ZARRSTREAM_SIGBUS_CHILD`
    /// set and returns how it ended: a test that provokes SIGBUS must never take the test
    /// binary (and every test running in parallel in it) down with it.
    fn in_child(name: &str) -> std::process::Output {
        use std::process::{Command, Stdio};
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env("ZARRSTREAM_SIGBUS_CHILD", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                // Our own child, by its id.
                let _ = child.kill();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    fn in_the_child() -> bool {
        if std::env::var_os("ZARRSTREAM_SIGBUS_CHILD").is_none() {
            return false;
        }
        // No core file for the child that is meant to die.
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a valid rlimit value.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
        // And none through a piped `core_pattern` either (systemd-coredump, apport),
        // which ignores RLIMIT_CORE but not a process that is not dumpable.
        // SAFETY: PR_SET_DUMPABLE takes an integer argument; no pointers.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        true
    }

    fn file_of(len: u64) -> (tempfile::TempDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("shard"))
            .unwrap();
        file.set_len(len).unwrap();
        (dir, file)
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn guard_catches_a_sigbus_in_a_truncated_shard_mapping() {
        if !in_the_child() {
            let out = in_child("slots::tests::guard_catches_a_sigbus_in_a_truncated_shard_mapping");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("CHILD OK"),
                "the child ended with {:?}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let (_dir, file) = file_of(64 * 1024);
        let mut map = map_reserved_file(&file).unwrap();
        map[0] = 1;
        map[40_000] = 2;
        assert!(!map.truncated());
        // Another process would do this; the kernel cannot tell the difference.
        file.set_len(0).unwrap();
        // Past the new end: SIGBUS, caught; the store then lands on a zero page.
        map[40_000] = 7;
        // The store must happen before the flag is read (the handler runs inside it).
        std::hint::black_box(&mut map[..]);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        assert!(map.truncated(), "the guard flagged the mapping");
        assert_eq!((map[40_000], map[0], map[65_535]), (7, 0, 0));
        drop(map);
        // A new mapping starts unflagged and works as before.
        let (_dir2, file2) = file_of(8192);
        let mut map2 = map_reserved_file(&file2).unwrap();
        map2[5000] = 3;
        assert!(!map2.truncated());
        println!("CHILD OK");
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn an_unrelated_sigbus_still_kills_the_process() {
        if !in_the_child() {
            let out = in_child("slots::tests::an_unrelated_sigbus_still_kills_the_process");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGBUS),
                "the child must die of SIGBUS: {:?}\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(String::from_utf8_lossy(&out.stdout).contains("GUARD INSTALLED"));
            return;
        }
        // The guard is installed and guards a shard of its own ...
        let (_dir, file) = file_of(8192);
        let _guarded = map_reserved_file(&file).unwrap();
        println!("GUARD INSTALLED");
        // ... but this mapping is not registered with it.
        let (_dir2, other) = file_of(64 * 1024);
        // SAFETY: the test cuts this file itself, to provoke SIGBUS on purpose.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&other) }.unwrap();
        other.set_len(0).unwrap();
        map[40_000] = 1;
        std::hint::black_box(&mut map[..]);
        println!("STILL ALIVE");
        std::process::exit(3);
    }
}
