//! Worker threads: encode one inner chunk per job straight into its shard slot, or, for
//! a sink whose writes wait for the device (direct), into a scratch from the engine's
//! pool that a write-behind thread then writes ([`write_behind`](super::write_behind)).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::Receiver;
use hdrhistogram::Histogram;

use crate::Error;
use crate::codec::{Checksum, ChunkEncoder, Codec};
use crate::meter::{Held, Meter};
use crate::sink::Scratch;
use crate::writer::state::job::Job;
use crate::writer::state::shared::Shared;
use crate::writer::threads::write_behind::{Staged, WriteBehind};

/// What makes two arrays' encoders interchangeable.
#[derive(Clone, Copy, PartialEq, Eq)]
struct EncoderKey {
    codec: Codec,
    elem_size: usize,
    checksum: Checksum,
    lz4_acceleration: Option<i32>,
}

/// One encoder per kind of array this worker has met (a linear search: a recording has
/// few kinds).
#[derive(Default)]
struct Encoders(Vec<(EncoderKey, ChunkEncoder)>);

impl Encoders {
    /// The encoder for `shared`'s array; an encoder that cannot be made fails the array.
    fn get(&mut self, shared: &Shared) -> Option<&mut ChunkEncoder> {
        let spec = &shared.spec;
        let key = EncoderKey {
            codec: spec.codec,
            elem_size: spec.dtype.size(),
            checksum: spec.checksum(),
            lz4_acceleration: spec.lz4_acceleration,
        };
        let i = match self.0.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => match ChunkEncoder::new(key.codec, key.elem_size, key.checksum) {
                Ok(e) => {
                    let e = match key.lz4_acceleration {
                        Some(a) => e.lz4_acceleration(a),
                        None => e,
                    };
                    self.0.push((key, e));
                    self.0.len() - 1
                }
                Err(e) => {
                    shared.fail(e);
                    return None;
                }
            },
        };
        Some(&mut self.0[i].1)
    }

    /// Bytes the encoders hold (contexts and scratch).
    fn held_bytes(&self) -> u64 {
        self.0.iter().map(|(_, e)| e.held_bytes() as u64).sum()
    }
}

/// The frame latencies this worker recorded for one array and has not yet merged into
/// the array's histogram: recording a batch takes no lock, and the one lock a merge
/// takes is taken when the worker goes idle or turns to another array, not per batch.
pub(super) struct Latency {
    /// The array of the latencies in `hist`; `None` when there are none.
    array: Option<Arc<Shared>>,
    hist: Histogram<u64>,
}

impl Latency {
    pub(super) fn new() -> Self {
        Latency {
            array: None,
            hist: crate::stats::histogram(),
        }
    }

    /// Whether latencies of `shared`'s array wait to be merged.
    pub(super) fn holds(&self, shared: &Arc<Shared>) -> bool {
        self.array.as_ref().is_some_and(|a| Arc::ptr_eq(a, shared))
    }

    /// Records the latency of frames scheduled at `times`, completed at `now`.
    fn record(&mut self, shared: &Arc<Shared>, times: &[Instant], now: Instant) {
        if !self.holds(shared) {
            self.merge();
            self.array = Some(Arc::clone(shared));
        }
        for t in times {
            let ns = now.saturating_duration_since(*t).as_nanos();
            let _ = self.hist.record(u64::try_from(ns).unwrap_or(u64::MAX));
        }
    }

    /// Merges what is recorded into its array's histogram; the histogram is kept (its
    /// buckets already sized) for the next array.
    pub(super) fn merge(&mut self) {
        if let Some(array) = self.array.take() {
            array.merge_frame_latency(&self.hist);
            self.hist.reset();
        }
    }
}

pub(crate) fn run(
    jobs: Receiver<Job>,
    behind: Option<WriteBehind>,
    core: Option<core_affinity::CoreId>,
    nice: u8,
    meter: &Arc<Meter>,
) {
    if let Some(core) = core {
        core_affinity::set_for_current(core);
    }
    crate::writer::threads::priority::lower_priority(nice);
    let mut encoders = Encoders::default();
    let mut scratch = Scratch::counted(meter);
    // The encoders allocate inside the codec libraries; their size is read after each
    // job (a few additions), since they grow only while encoding.
    let encoders_held = Held::new(meter, 0);
    let mut latency = Latency::new();
    // The job taken while looking ahead (see `complete`).
    let mut next: Option<Job> = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match jobs.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
        };
        let shared = &*job.link.shared;
        // A chunk for a sink that writes behind is encoded into a pooled scratch, taken
        // before the job (the pool bounds the chunks waiting for their writes).
        let mut pooled = behind
            .as_ref()
            .filter(|_| job.shard.sink.writes_behind() && !shared.failed())
            .and_then(WriteBehind::take);
        // A panic (a bug, in an encoder or the reduction) must not take the job's
        // bookkeeping below with it: the shard would never be released and a pyramid
        // would wait forever for the tile's reduction. It fails the job's array like an
        // I/O error instead. The encoders and scratch it may have left half-updated are
        // replaced: other arrays of a recording share this worker.
        let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let stage = pooled.is_some();
            let into = pooled.as_mut().unwrap_or(&mut scratch);
            encode(shared, &job, &mut encoders, into, stage)
        }));
        let staged = match encoded {
            Ok(staged) => staged,
            Err(panic) => {
                shared.fail(Error::panicked("a worker thread", panic.as_ref()));
                encoders = Encoders::default();
                scratch = Scratch::counted(meter);
                pooled = pooled.map(|_| Scratch::counted(meter));
                None
            }
        };
        encoders_held.set(encoders.held_bytes());
        let next_is_of = |array: &Arc<Shared>, next: &mut Option<Job>| {
            *next = jobs.try_recv().ok();
            next.as_ref()
                .is_some_and(|n| Arc::ptr_eq(&n.link.shared, array))
        };
        match (staged, pooled, &behind) {
            (Some(n), Some(scratch), Some(b)) => {
                // A write-behind thread writes it and does the job's bookkeeping. A send
                // fails only once those threads are gone, which the engine's shutdown
                // order rules out while a worker runs.
                if let Err(Staged { job, .. }) = b.send(Staged { job, scratch, n }) {
                    let e = Error::Internal("the write-behind threads are gone".into());
                    job.link.shared.fail(e);
                    complete(job, &mut latency, |a| next_is_of(a, &mut next));
                }
            }
            (_, pooled, _) => {
                if let (Some(s), Some(b)) = (pooled, &behind) {
                    b.put(s);
                }
                complete(job, &mut latency, |a| next_is_of(a, &mut next));
            }
        }
    }
    latency.merge();
}

/// The bookkeeping once `job`'s chunk is written (or skipped after a failure): counts
/// the batch's frames as encoded when this was its last chunk, records their latency,
/// offers them to the image's display windows, and releases the shard to the finisher.
///
/// This job's link may be the last one of its array, after which the array's finisher
/// ends and `finish` reads its latency: so the latency is merged first, unless
/// `next_is_of` (which may take the next job, without waiting) says that the next job is
/// of the same array and holds it open.
pub(super) fn complete(
    job: Job,
    latency: &mut Latency,
    next_is_of: impl FnOnce(&Arc<Shared>) -> bool,
) {
    let shared = &*job.link.shared;
    if job.batch.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        if let Some(r) = &job.batch.reduction {
            r.finished();
        }
        if !shared.failed() {
            let n = job.batch.times.len() as u64;
            shared.frames_encoded.fetch_add(n, Ordering::Release);
        }
        let now = Instant::now();
        latency.record(&job.link.shared, &job.batch.times, now);
        if let Some(image) = shared.image.get() {
            image.offer(&shared.grid, &job.batch, now);
        }
    }
    if latency.holds(&job.link.shared) && !next_is_of(&job.link.shared) {
        latency.merge();
    }
    let Job {
        batch, shard, link, ..
    } = job;
    drop(batch);
    shard.release(&link.finisher);
}

/// Encodes `job`'s chunk into its shard and reduces it into the next pyramid level,
/// unless the writer has failed. With `stage`, the chunk is encoded into `scratch` for a
/// write-behind thread and its length returned; otherwise it is written here.
fn encode(
    shared: &Shared,
    job: &Job,
    encoders: &mut Encoders,
    scratch: &mut Scratch,
    stage: bool,
) -> Option<usize> {
    #[cfg(test)]
    test_hooks::maybe_panic(shared);
    let mut reduced = (job.batch.reduction.as_ref())
        .filter(|_| !shared.failed())
        .map(|r| r.tile(shared, &job.batch.buf, job.tile));
    let mut staged = None;
    if let Some(enc) = (!shared.failed()).then(|| encoders.get(shared)).flatten() {
        let src = job.batch.source(&shared.grid, job.tile);
        let sink = &job.shard.sink;
        // An uncompressed staged chunk is written from the staging buffer itself, one
        // copy less than gathering it into the scratch (strided frame tiles are still
        // gathered: writing their rows directly, under the file's lock, was slower).
        let direct = enc.raw_contiguous(&src).and_then(|(data, crc)| {
            let tail = crc.as_ref().map_or(&[][..], |c| &c[..]);
            sink.write_encoded(job.slot, data, tail, scratch)
        });
        // The next pyramid level is reduced from the rows the encoder just read.
        let mut encode = |out: &mut [u8]| {
            enc.encode_observed(&src, out, &mut |read| {
                if let Some(l) = reduced.as_mut() {
                    l.read_to(read.end);
                }
            })
        };
        let written = match direct {
            Some(r) => r.map(Some),
            None if stage => sink.stage(scratch, &mut encode).map(|n| {
                staged = Some(n);
                None
            }),
            None => sink.write_chunk(job.slot, scratch, &mut encode).map(Some),
        };
        match written {
            Ok(Some((offset, n))) => job.shard.entries.set(job.slot, offset, n),
            Ok(None) => {}
            Err(e) => shared.fail(e),
        }
    }
    if let Some(mut l) = reduced {
        l.finish();
    }
    staged
}

/// Makes a worker panic on demand, for the tests of how the writer survives it.
#[cfg(test)]
pub(crate) mod test_hooks {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use super::Shared;

    /// Array directory (its last components) → jobs to run before one panics.
    static PANIC_AFTER: Mutex<Vec<(PathBuf, usize)>> = Mutex::new(Vec::new());

    /// The worker that takes the `jobs + 1`-th job of the array whose directory ends
    /// with `dir` (a name, or `image.zarr/0` for a level) panics.
    pub(crate) fn panic_after(dir: &str, jobs: usize) {
        PANIC_AFTER.lock().unwrap().push((dir.into(), jobs));
    }

    pub(super) fn maybe_panic(shared: &Shared) {
        let mut armed = PANIC_AFTER.lock().unwrap();
        let Some(i) = armed.iter().position(|(d, _)| shared.dir.ends_with(d)) else {
            return;
        };
        if armed[i].1 == 0 {
            armed.remove(i);
            drop(armed);
            panic!("injected worker panic");
        }
        armed[i].1 -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::mpsc;
    use std::time::Duration;

    use zarrs::array::{Array, ArraySubset};
    use zarrs::filesystem::FilesystemStore;

    use crate::{ArraySpec, Codec, DataType, Error, Levels, Ome, Writer, WriterOptions};

    fn spec() -> ArraySpec {
        ArraySpec::builder()
            .shape([0, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
            .dtype(DataType::UInt16)
            .codec(Codec::blosc_lz4(1))
            .build()
            .unwrap()
    }

    fn frame(k: usize) -> Vec<u16> {
        (0..64 * 64).map(|i| (i * 7 + k * 131) as u16).collect()
    }

    /// Pushes frames, on a thread, into the writer `open` makes with two workers: four
    /// (shard 0), then, once `array`'s `zarr.json` publishes them, arms a panic in the
    /// second job of the array whose directory ends with `key` and pushes on until the
    /// writer fails. Returns the frames accepted and the error, or fails the test if the
    /// writer hangs.
    fn push_until_failure(
        array: PathBuf,
        key: &'static str,
        open: impl FnOnce(WriterOptions) -> Writer + Send + 'static,
    ) -> (usize, Error) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut w = open(WriterOptions::default().threads(2));
            let mut pushed = 0;
            for k in 0..64 {
                if k == 4 {
                    wait_for_published(&array, 4);
                    super::test_hooks::panic_after(key, 1);
                }
                match w.push(&frame(k)) {
                    Ok(_) => pushed += 1,
                    Err(e) => {
                        let _ = tx.send((pushed, e));
                        return;
                    }
                }
            }
            let e = w.finish().expect_err("the writer must fail");
            let _ = tx.send((pushed, e));
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the writer hung after a worker panicked")
    }

    fn shape0(array: &Path) -> u64 {
        std::fs::read(array.join("zarr.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|doc| doc["shape"][0].as_u64())
            .unwrap_or(0)
    }

    /// Waits (up to 30 s) until the array publishes `frames` frames.
    fn wait_for_published(array: &Path, frames: u64) {
        let t = std::time::Instant::now();
        while shape0(array) < frames {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "shard 0 was never published"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The array at `path` says it was aborted, publishes shard 0 (frames 0..4) and no
    /// more, and zarrs reads shard 0 back as pushed.
    fn check_shard0_kept(path: &Path) {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap();
        let ours = &doc["attributes"]["zarrstream"];
        assert_eq!(ours["state"], "aborted", "{ours}");
        assert_eq!(doc["shape"][0], 4, "only shard 0 was finished: {doc}");
        let store = std::sync::Arc::new(FilesystemStore::new(path).unwrap());
        let array = Array::open(store, "/").unwrap();
        let got = array
            .retrieve_array_subset::<Vec<u16>>(&ArraySubset::new_with_shape(vec![4, 64, 64]))
            .unwrap();
        let want: Vec<u16> = (0..4).flat_map(frame).collect();
        assert!(got == want, "shard 0 does not read back as pushed");
    }

    fn assert_injected(pushed: usize, error: &Error) {
        assert!(pushed >= 4, "frames accepted before the failure: {pushed}");
        match error {
            Error::Internal(m) => assert!(m.contains("injected worker panic"), "{m}"),
            e => panic!("expected Error::Internal, got {e:?}"),
        }
    }

    /// A worker that panics fails the writer with `Error::Internal` naming the panic,
    /// and the shard finished before it still reads back (with zarrs).
    #[test]
    fn a_worker_panic_fails_the_writer_and_keeps_finished_shards() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("panicking-worker.zarr");
        let p = path.clone();
        let (pushed, error) =
            push_until_failure(path.clone(), "panicking-worker.zarr", move |opts| {
                Writer::create(&p, spec(), opts).unwrap()
            });
        assert_injected(pushed, &error);
        check_shard0_kept(&path);
    }

    /// The same in an OME-Zarr image whose level 0 workers also reduce level 1: the
    /// panicking tile's reduction never completes, and before the worker caught its
    /// panics the pyramid waited for it forever.
    #[test]
    fn a_worker_panic_during_a_pyramid_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("panicking-pyramid.zarr");
        let p = path.clone();
        let (pushed, error) =
            push_until_failure(path.join("0"), "panicking-pyramid.zarr/0", move |opts| {
                let ome = Ome::new().levels(Levels::Count(2));
                Writer::create_ome(&p, spec(), &ome, opts).unwrap()
            });
        assert_injected(pushed, &error);
        check_shard0_kept(&path.join("0"));
    }
}
