//! The push loops of `record`: one writer, several arrays from one thread or one thread
//! each, a plate field by field; each paced on a camera clock (`--fps`).

use std::time::{Duration, Instant};

use zarrstream::{FrameMeta, FrameMetaSpec, MetaType, Plate, Recording, Writer};

use super::{Failure, Options, array_key};

pub(super) struct Acquisition {
    /// When the first frame was due: the report's clock starts here.
    pub started: Instant,
    /// Frames pushed more than one period after they were due.
    pub late_frames: u64,
    /// The most a frame was pushed after it was due.
    pub max_lateness: Duration,
}

/// The leading coordinates of the `k`-th point of nested loops over `order` (outermost
/// first) on a grid of `extent` (the outermost loop is not wrapped, so an unbounded
/// axis 0 outermost counts on).
fn loop_point(mut k: u64, order: &[usize], extent: &[u64]) -> Vec<u64> {
    let mut c = vec![0; extent.len()];
    for (i, &a) in order.iter().enumerate().rev() {
        if i == 0 {
            c[a] = k;
        } else {
            c[a] = k % extent[a];
            k /= extent[a];
        }
    }
    c
}

/// Pushes `frames` frames, cycling through `pool`, paced at `fps` (0 = flat out); with
/// `order` (a loop order and the leading extents), writes frame `k` by index at the
/// `k`-th point of that loop instead. With `progress`, prints `sink S` (the sink in use)
/// once and then `encoded N` to stderr each time `Writer::frames_encoded` has grown
/// (polled after each push).
pub(super) fn one(
    writer: &mut Writer,
    pool: &[Vec<u8>],
    frames: u64,
    fps: f64,
    progress: bool,
    frame_meta: bool,
    order: Option<(&[usize], &[u64])>,
) -> Result<Acquisition, Failure> {
    let mut encoded = 0;
    if progress {
        // Crash tests need the sink actually used: a requested direct or mmap sink
        // falls back to pwrite where the filesystem cannot take it.
        eprintln!("sink {}", writer.sink().as_str());
    }
    let mut pacer = Pacer::new(Instant::now(), fps);
    for k in 0..frames {
        let frame = &pool[(k % pool.len() as u64) as usize];
        let scheduled = pacer.wait(k);
        // A frame dropped under --backpressure drop is counted by the writer.
        if let Some((order, extent)) = order {
            let index = loop_point(k, order, extent);
            let _ = writer.write_frame_bytes(&index, frame, scheduled)?;
        } else if frame_meta {
            let meta = synthetic_meta(k, scheduled.duration_since(pacer.started));
            let _ = writer.push_with(frame, scheduled, &meta)?;
        } else {
            let _ = writer.push_bytes(frame, scheduled)?;
        }
        if progress {
            let now = writer.frames_encoded();
            if now > encoded {
                encoded = now;
                eprintln!("encoded {now}");
            }
        }
    }
    Ok(pacer.into())
}

/// The camera clock of one pushing thread: frame `k` is due at `started + k / fps`.
struct Pacer {
    started: Instant,
    period: Option<f64>,
    late_frames: u64,
    max_lateness: Duration,
}

impl From<Pacer> for Acquisition {
    fn from(p: Pacer) -> Self {
        Acquisition {
            started: p.started,
            late_frames: p.late_frames,
            max_lateness: p.max_lateness,
        }
    }
}

impl Pacer {
    fn new(started: Instant, fps: f64) -> Self {
        Pacer {
            started,
            period: (fps > 0.0).then(|| 1.0 / fps),
            late_frames: 0,
            max_lateness: Duration::ZERO,
        }
    }

    /// Waits until frame `k` is due (when paced) and returns its scheduled time.
    fn wait(&mut self, k: u64) -> Instant {
        let Some(p) = self.period else {
            return Instant::now();
        };
        // Camera clock: computed from t0 so rounding never accumulates.
        let due = self.started + Duration::from_secs_f64(k as f64 * p);
        wait_until(due);
        let lateness = Instant::now().saturating_duration_since(due);
        self.max_lateness = self.max_lateness.max(lateness);
        if lateness.as_secs_f64() > p {
            self.late_frames += 1;
        }
        due
    }
}

/// Where camera `a` of `o.arrays` starts in the shared pool of `len` frames: a
/// synthetic camera `a / n` of the way into it (each camera sees different frames
/// without a pool of its own); with `--input`, every array gets the input's frames.
fn camera_offset(o: &Options, a: usize, len: usize) -> u64 {
    if o.input.is_some() {
        return 0;
    }
    (a * len / o.arrays.unwrap_or(1).max(1)) as u64
}

/// Pushes frame `k` of array `a` (with its synthetic metadata under `--frame-meta`).
fn push_array(
    rec: &Recording,
    a: usize,
    frame: &[u8],
    k: u64,
    scheduled: Instant,
    started: Instant,
    frame_meta: bool,
) -> zarrstream::Result<()> {
    // A frame dropped under --backpressure drop is counted by the recording.
    if frame_meta {
        let meta = synthetic_meta(k, scheduled.duration_since(started));
        let _ = rec.array(a)?.push_with(frame, scheduled, &meta)?;
    } else {
        let _ = rec.array(a)?.push_bytes(frame, scheduled)?;
    }
    Ok(())
}

/// `--progress` with `--arrays` or `--plate`: prints `encoded KEY N` when array `a`'s
/// count grew.
fn report_progress(rec: &Recording, a: usize, seen: &mut u64) -> zarrstream::Result<()> {
    let now = rec.array(a)?.frames_encoded();
    if now > *seen {
        *seen = now;
        eprintln!("encoded {} {now}", rec.keys().nth(a).unwrap_or_default());
    }
    Ok(())
}

/// `--plate`: one camera visiting the plate as a screening microscope does. Each pass
/// moves the stage well by well (row by row) and takes each well's fields one after
/// another; at each field it takes one time point (`per_visit` frames: every channel
/// and z plane of it). Passes repeat until every field has `frames` frames. The
/// camera's frames (cycling through `pool`) go to the fields in that order, each paced
/// on the one camera clock.
pub(super) fn plate(
    rec: &Recording,
    plate: &Plate,
    pool: &[Vec<u8>],
    frames: u64,
    per_visit: u64,
    o: &Options,
) -> Result<Acquisition, Failure> {
    let images = plate.images()?;
    let len = pool.len() as u64;
    let per_visit = per_visit.max(1);
    let mut encoded = vec![0; images.len()];
    let mut pacer = Pacer::new(Instant::now(), o.fps);
    let mut g = 0u64;
    for pass in 0..frames.div_ceil(per_visit) {
        let first = pass * per_visit;
        for (a, seen) in encoded.iter_mut().enumerate() {
            for k in first..frames.min(first + per_visit) {
                let scheduled = pacer.wait(g);
                let frame = &pool[(g % len) as usize];
                push_array(rec, a, frame, k, scheduled, pacer.started, o.frame_meta)?;
                g += 1;
            }
            if o.progress {
                report_progress(rec, a, seen)?;
            }
        }
    }
    Ok(pacer.into())
}

/// `--arrays` from one thread: frame `k` of every array in turn (all due at the same
/// camera time), `frames` rounds.
pub(super) fn round_robin(
    rec: &Recording,
    pool: &[Vec<u8>],
    frames: u64,
    o: &Options,
) -> Result<Acquisition, Failure> {
    let n = o.arrays.unwrap_or(1);
    let len = pool.len() as u64;
    let offsets: Vec<u64> = (0..n).map(|a| camera_offset(o, a, pool.len())).collect();
    let mut encoded = vec![0; n];
    let mut pacer = Pacer::new(Instant::now(), o.fps);
    for k in 0..frames {
        let scheduled = pacer.wait(k);
        for (a, off) in offsets.iter().enumerate() {
            let frame = &pool[((k + off) % len) as usize];
            push_array(rec, a, frame, k, scheduled, pacer.started, o.frame_meta)?;
        }
        if o.progress {
            for (a, seen) in encoded.iter_mut().enumerate() {
                report_progress(rec, a, seen)?;
            }
        }
    }
    Ok(pacer.into())
}

/// `--arrays --camera-threads`: one thread per array, each pushing its array on its
/// own camera clock (all started at the same time). The first failure stops the
/// other threads.
pub(super) fn threads(
    rec: &Recording,
    pool: &[Vec<u8>],
    frames: u64,
    o: &Options,
) -> Result<Acquisition, Failure> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let n = o.arrays.unwrap_or(1);
    let len = pool.len() as u64;
    let failed = AtomicBool::new(false);
    let started = Instant::now();
    let camera = |a: usize| -> zarrstream::Result<Pacer> {
        let off = camera_offset(o, a, pool.len());
        let mut pacer = Pacer::new(started, o.fps);
        let mut encoded = 0;
        for k in 0..frames {
            if failed.load(Ordering::Relaxed) {
                break;
            }
            let scheduled = pacer.wait(k);
            let frame = &pool[((k + off) % len) as usize];
            push_array(rec, a, frame, k, scheduled, started, o.frame_meta)
                .and_then(|()| {
                    if o.progress {
                        report_progress(rec, a, &mut encoded)
                    } else {
                        Ok(())
                    }
                })
                .inspect_err(|_| failed.store(true, Ordering::Relaxed))?;
        }
        Ok(pacer)
    };
    let results: Vec<zarrstream::Result<Pacer>> = std::thread::scope(|s| {
        let camera = &camera;
        let handles: Vec<_> = (0..n)
            .map(|a| {
                std::thread::Builder::new()
                    .name(format!("record-{}", array_key(a)))
                    .spawn_scoped(s, move || camera(a))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    Err(zarrstream::Error::Internal(format!(
                        "start a camera thread: {e}"
                    )))
                }
            })
            .collect()
    });
    let mut run = Acquisition {
        started,
        late_frames: 0,
        max_lateness: Duration::ZERO,
    };
    for r in results {
        let pacer = r?;
        run.late_frames += pacer.late_frames;
        run.max_lateness = run.max_lateness.max(pacer.max_lateness);
    }
    Ok(run)
}

/// The fields `--frame-meta` stores: what a microscope records with each frame.
pub(super) fn meta_spec() -> FrameMetaSpec {
    FrameMetaSpec::new()
        .field("timestamp", MetaType::Float64)
        .field("exposure_ms", MetaType::Float64)
        .field("stage_x", MetaType::Float64)
        .field("stage_y", MetaType::Float64)
        .field("stage_z", MetaType::Float64)
        .json(true)
}

/// Frame `k`'s synthetic metadata: its camera time, a fixed exposure, a stage that
/// steps in x every frame and in z every 10 frames, and a small JSON object.
fn synthetic_meta(k: u64, since_start: Duration) -> FrameMeta {
    FrameMeta::new()
        .value("timestamp", since_start.as_secs_f64())
        .value("exposure_ms", 10.0)
        .value("stage_x", 100.0 + 0.5 * k as f64)
        .value("stage_y", -20.0)
        .value("stage_z", (k / 10) as f64 * 0.25)
        .with_json(serde_json::json!({"frame": k, "shutter": "open"}))
}

/// Sleeps most of the way to `due`, then spins for the last fraction of a millisecond
/// (sleep alone overshoots by the timer slack).
fn wait_until(due: Instant) {
    const SPIN: Duration = Duration::from_micros(250);
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}
