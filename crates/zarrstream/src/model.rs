//! Loom model of the lock-free per-chunk path: the offset hand-out ([`Bump`], as the
//! pwrite and direct sinks use it) and the working-index entries stored through claimed
//! slots ([`SlotRegion`], with [`store_entry`], as the direct and mmap sinks do),
//! against the two readers of the working index: the finisher, which takes the whole
//! memory once the shard's pending count reaches zero, and `recover`, which reads what
//! a kill left.
//!
//! Built only with the test-only feature `loom` (loom's `--cfg loom` pattern as a
//! feature: that cfg would also switch tokio in the dependency tree), which swaps the
//! atomics of `crate::sync` for loom's and gives every slot a loom cell that tracks its
//! accesses:
//!
//! ```text
//! cargo test -p zarrstream --lib --features loom model::
//! ```
//!
//! A kill is modelled as a flag a killer thread raises at any point loom chooses;
//! each worker stops at the next kill point (after its reservation, after its data,
//! between an entry's offset and length inside [`store_entry`], after the entry), and
//! the reader then sees every worker's stores up to where it stopped, as `recover`
//! sees the page cache of a killed process.

// The whole file is the model test: test-only, like its `mod` line in lib.rs.
#![cfg(all(feature = "loom", test))]

use std::cell::RefCell;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use loom::thread;

use crate::read::index::{EMPTY, raw_entries};
use crate::shard::store_entry;
use crate::sink::bump::{Bump, BumpError};
use crate::slots::{SlotGeometry, SlotRegion};

/// Bytes of one "block" of chunk data in the model.
const BLOCK: u64 = 4096;

loom::thread_local! {
    /// The kill flag this model thread obeys, if any.
    static KILL: RefCell<Option<Arc<AtomicBool>>> = RefCell::new(None);
}

/// What unwinds a killed worker (never shown: `resume_unwind` skips the panic hook).
struct Killed;

/// Stops the calling model thread if its kill flag is raised.
pub(crate) fn kill_point() {
    let killed = KILL.with(|k| {
        k.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::SeqCst))
    });
    if killed {
        std::panic::resume_unwind(Box::new(Killed));
    }
}

/// A shard of `n` chunks: the working index as slots of entries only (the direct
/// sink's region; the mmap sink's differs only in its data bytes), the data region as
/// one marker per block (the chunk written there + 1), and the offset bump over it.
struct Shard {
    index: SlotRegion<Vec<u8>>,
    data: Vec<AtomicU64>,
    bump: Bump,
    /// Chunks still being written; the worker that takes it to zero hands the shard to
    /// the finisher (`sent`), as `OpenShard::release` does through the channel.
    pending: AtomicUsize,
    sent: AtomicBool,
}

impl Shard {
    fn new(n: usize, blocks: u64) -> Self {
        let index = SlotRegion::new(vec![0xff; 16 * n], SlotGeometry::entries_only(n, 0))
            .expect("the geometry fits");
        Shard {
            index,
            data: (0..blocks).map(|_| AtomicU64::new(0)).collect(),
            bump: Bump::new(0, blocks * BLOCK),
            pending: AtomicUsize::new(n),
            sent: AtomicBool::new(false),
        }
    }

    /// One worker's chunk `i` of `blocks` blocks, as a sink writes it: a position, the
    /// data, then the entry through the chunk's claim; then the pending count.
    fn write(&self, i: usize, blocks: u64) -> Result<u64, BumpError> {
        let result = self.bump.reserve(blocks * BLOCK);
        kill_point();
        if let Ok(at) = result {
            for b in 0..blocks {
                let k = usize::try_from(at / BLOCK + b).expect("small");
                self.data[k].store(i as u64 + 1, Ordering::Relaxed);
            }
            kill_point();
            let mut slot = self.index.claim(i).expect("each chunk is claimed once");
            store_entry(slot.entry(), at, blocks * BLOCK);
            drop(slot);
            kill_point();
        }
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.sent.store(true, Ordering::Release);
        }
        result
    }

    /// The working index as a reader sees it now; `None` while a claim is live.
    fn entries(&self) -> Option<Vec<(u64, u64)>> {
        let whole = self.index.close()?;
        Some(raw_entries(&whole).collect())
    }

    /// The chunk whose data lies at `offset` (+ 1), or 0.
    fn data_at(&self, offset: u64) -> u64 {
        usize::try_from(offset / BLOCK)
            .ok()
            .and_then(|k| self.data.get(k))
            .map_or(0, |d| d.load(Ordering::Relaxed))
    }
}

/// Workers write chunks of `sizes` blocks into a shard of `blocks` blocks while the
/// finisher waits for the shard: ranges never overlap nor pass the end, a refusal
/// leaves the counter where the granted ranges end (so a later range that fits is
/// granted), and the finisher reads every granted chunk's entry whole.
fn hand_out_and_finish(sizes: &'static [u64], blocks: u64) {
    loom::model(move || {
        let shard = Arc::new(Shard::new(sizes.len(), blocks));
        let workers: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let shard = Arc::clone(&shard);
                thread::spawn(move || shard.write(i, size))
            })
            .collect();
        let finisher = {
            let shard = Arc::clone(&shard);
            thread::spawn(move || {
                while !shard.sent.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                shard
                    .entries()
                    .expect("no claim is live once pending is zero")
            })
        };
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        let entries = finisher.join().unwrap();

        let mut granted: Vec<(u64, u64)> = Vec::new();
        for (i, (r, &size)) in results.iter().zip(sizes).enumerate() {
            match *r {
                Ok(at) => {
                    assert_eq!(entries[i], (at, size * BLOCK), "entry {i} whole");
                    assert_eq!(shard.data_at(at), i as u64 + 1, "chunk {i}'s data");
                    granted.push((at, size * BLOCK));
                }
                Err(BumpError::PastReservedEnd { at, len, end }) => {
                    assert!(at + len > end, "refused only past the end");
                    assert_eq!(entries[i], (EMPTY, EMPTY), "no entry for refused {i}");
                }
            }
        }
        granted.sort_unstable();
        assert!(
            granted.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0),
            "disjoint"
        );
        let used: u64 = granted.iter().map(|g| g.1).sum();
        assert!(
            granted.last().is_none_or(|g| g.0 + g.1 == used),
            "packed from 0"
        );
        // The counter is where the granted ranges end: what is left is still granted.
        let left = blocks * BLOCK - used;
        assert_eq!(shard.bump.reserve(left), Ok(used));
        assert!(shard.bump.reserve(1).is_err());
    });
}

#[test]
fn model_offsets_and_entries_reach_the_finisher() {
    hand_out_and_finish(&[1, 1], 2);
}

#[test]
fn model_a_chunk_past_the_reserved_end_is_refused_cleanly() {
    // Whichever comes first is granted: chunk 0 (2 blocks) refuses chunk 1, or chunk 1
    // (1 block) leaves room for only 1 of chunk 0's 2.
    hand_out_and_finish(&[2, 1], 2);
}

/// The finisher's `close` while a worker may still hold its claim: it either fails
/// (the claim is live, and `finalize` reports an error) or succeeds after the
/// worker's entry was stored, never in between (loom's cell tracking), and a claim
/// after a successful close fails.
#[test]
fn model_close_is_exclusive_with_claims() {
    loom::model(|| {
        let shard = Arc::new(Shard::new(1, 1));
        let worker = {
            let shard = Arc::clone(&shard);
            thread::spawn(move || {
                let mut slot = shard.index.claim(0)?;
                store_entry(slot.entry(), 0, BLOCK);
                Some(())
            })
        };
        let seen = shard.entries();
        let stored = worker.join().unwrap();
        match (seen, stored) {
            (Some(e), Some(())) => assert_eq!(e, vec![(0, BLOCK)]),
            (Some(e), None) => assert_eq!(e, vec![(EMPTY, EMPTY)]),
            (None, stored) => assert!(stored.is_some(), "close fails only for a claim"),
        }
    });
}

/// A kill at any point of two workers' writes leaves a working index that `recover`
/// reads as it expects: every entry empty, whole, or torn as `(offset, EMPTY)` (the
/// length read off the chunk) — never `(EMPTY, length)` — and every offset points at
/// its own chunk's data at a range no other entry claims.
#[test]
fn model_a_kill_leaves_a_recoverable_working_index() {
    // Two workers and the killer have too many interleavings to explore them all in a
    // test's time; loom's documented bound on preemptions keeps every schedule with up
    // to three forced switches, where such bugs show (loom's own guidance: 2–3).
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(3);
    model.check(|| {
        let shard = Arc::new(Shard::new(2, 2));
        let kill = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let (shard, kill) = (Arc::clone(&shard), Arc::clone(&kill));
                thread::spawn(move || {
                    KILL.with(|k| *k.borrow_mut() = Some(kill));
                    // A kill stops the worker where it is; what it wrote stays.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        shard.write(i, 1)
                    }));
                })
            })
            .collect();
        kill.store(true, Ordering::SeqCst);
        for w in workers {
            w.join().unwrap();
        }
        let entries = shard.entries().expect("the killed workers hold no claim");
        let mut offsets = Vec::new();
        for (i, &(o, n)) in entries.iter().enumerate() {
            match (o, n) {
                (EMPTY, EMPTY) => {}
                (EMPTY, n) => panic!("entry {i} torn the wrong way: length {n} first"),
                (o, n) => {
                    assert!(n == EMPTY || n == BLOCK, "entry {i}: length {n}");
                    assert_eq!(shard.data_at(o), i as u64 + 1, "entry {i} before its data");
                    offsets.push(o);
                }
            }
        }
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(
            offsets.len(),
            entries.iter().filter(|e| e.0 != EMPTY).count()
        );
    });
}
