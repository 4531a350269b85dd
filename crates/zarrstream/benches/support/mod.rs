//! What the benchmarks (`codecs`, `throughput`, `latency`, `longrun`, `scaling`) share: the
//! C1/C2 workloads (BENCHMARKS.md), the synthetic camera frames, one timed writer run, the
//! encode and disk ceilings, memory and CPU-time readings, and a small option parser and
//! table printer.
#![allow(dead_code)] // each benchmark uses its own subset

pub(crate) use zarrstream_camera as camera;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zarrstream::{
    ArraySpec, Checksum, ChunkEncoder, Codec, DataType, LatencySummary, Ome, SinkChoice, Stats,
    Writer, WriterOptions,
};

/// One benchmark array layout (t, y, x), `uint16`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Workload {
    pub name: &'static str,
    pub frame: [u64; 2],
    pub chunk: [u64; 3],
    pub shard: [u64; 3],
}

/// C1 "frame chunks" and C2 "time blocks" on 2048 × 2048 frames.
pub(crate) const C1: Workload = Workload {
    name: "C1",
    frame: [2048, 2048],
    chunk: [1, 512, 512],
    shard: [32, 2048, 2048],
};
pub(crate) const C2: Workload = Workload {
    name: "C2",
    frame: [2048, 2048],
    chunk: [16, 256, 256],
    shard: [64, 2048, 2048],
};

impl Workload {
    pub(crate) fn by_name(name: &str) -> Option<Workload> {
        match name {
            "C1" | "c1" => Some(C1),
            "C2" | "c2" => Some(C2),
            _ => None,
        }
    }

    pub(crate) fn frame_bytes(&self) -> usize {
        (self.frame[0] * self.frame[1] * 2) as usize
    }

    /// The array spec: unbounded append axis, crc32c on (the writer's default).
    pub(crate) fn spec(&self, codec: Codec) -> ArraySpec {
        ArraySpec::builder()
            .shape([0, self.frame[0], self.frame[1]])
            .chunk_shape(self.chunk)
            .shard_shape(self.shard)
            .dtype(DataType::UInt16)
            .codec(codec)
            .build()
            .expect("benchmark workloads are valid specs")
    }
}

/// Pre-rendered frames of the synthetic sCMOS camera (the `record` example's default).
pub(crate) fn render(frames: usize, h: u64, w: u64) -> Vec<Vec<u8>> {
    camera::Camera::new(h as usize, w as usize, DataType::UInt16).render(frames)
}

/// Re-executes the benchmark with glibc's `mmap` threshold fixed at 1 MiB, unless it is
/// already set. By default glibc raises the threshold after the first large `free`, so
/// later runs in the same process would take their frame pools from a heap the previous
/// run left resident, and "extra RSS" would read near zero. With a fixed threshold every
/// large buffer is mapped and unmapped, and each run's extra RSS is its own.
pub(crate) fn fixed_malloc_threshold() {
    use std::os::unix::process::CommandExt;
    const KEY: &str = "MALLOC_MMAP_THRESHOLD_";
    if std::env::var_os(KEY).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(KEY, "1048576")
        .exec();
    eprintln!("could not re-execute with {KEY} set ({err}); extra RSS may read low");
}

/// Where outputs go: `$ZARRSTREAM_BENCH_DIR` or `target/bench-out` (a real disk, not tmpfs).
pub(crate) fn out_dir() -> PathBuf {
    let dir = std::env::var_os("ZARRSTREAM_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-out")
        });
    std::fs::create_dir_all(&dir).expect("create the benchmark output directory");
    dir
}

pub(crate) fn sink_name(s: SinkChoice) -> &'static str {
    s.as_str()
}

/// A `/proc/self/status` field in bytes (`VmRSS`, `VmHWM`).
pub(crate) fn status_bytes(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |k| k * 1024)
}

/// Resets `VmHWM` to the current RSS, so a later peak is the peak of what follows.
pub(crate) fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM via /proc/self/clear_refs");
}

/// `/proc/meminfo` field in bytes (`Cached`, `Dirty`, `Writeback`).
pub(crate) fn meminfo_bytes(key: &str) -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |k| k * 1024)
}

/// Sum of the file sizes under `dir`.
pub(crate) fn stored_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// One timed acquisition.
pub(crate) struct Run {
    /// First push until `finish` returned (data durable).
    pub seconds: f64,
    pub raw_bytes: u64,
    pub stored_bytes: u64,
    /// Peak RSS during the run minus RSS before `Writer::create`.
    pub extra_rss: u64,
    pub stats: Stats,
    /// Frames whose scheduled time had already passed when the pusher got to them.
    pub late: u64,
    /// User + system CPU seconds of the whole process from `Writer::create` until
    /// `finish` returned.
    pub cpu_seconds: f64,
}

impl Run {
    pub(crate) fn mib_s(&self) -> f64 {
        mib(self.raw_bytes) / self.seconds
    }
    pub(crate) fn ratio(&self) -> f64 {
        self.raw_bytes as f64 / self.stored_bytes.max(1) as f64
    }
}

/// How frames reach the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Feed {
    /// `push_bytes`: the writer copies the frame into a pooled buffer inside `push`.
    Copy,
    /// `buffer` + `push_buffer`: the frame is written into a pooled buffer first (as a
    /// camera driver's DMA would; outside push latency, inside frame latency), then
    /// handed over. No free buffer under `Drop` counts the frame as dropped (`skip`).
    ZeroCopy,
    /// `buffer` + `push_buffer` with no copy by the caller: each pool buffer is filled
    /// once, the first time it is lent, and then pushed with what it holds, as a
    /// camera's DMA fills it without the CPU. The caller's copy is off the path
    /// altogether; the frames pushed cycle through the first pool-size rendered frames
    /// (which frame each push carried is recorded, so the store can be checked).
    Lent,
}

impl Feed {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Feed::Copy => "copy (push_bytes)",
            Feed::ZeroCopy => "zero-copy (buffer + push_buffer)",
            Feed::Lent => "zero-copy, DMA-filled (buffer + push_buffer, no caller copy)",
        }
    }
}

/// Feeds frames to one writer (or one array of a recording) as a [`Feed`] says, and
/// records which rendered frame each push carried.
pub(crate) struct Feeder<'a> {
    feed: Feed,
    frames: &'a [Vec<u8>],
    /// Pool buffer address → the rendered frame it holds ([`Feed::Lent`]).
    lent: std::collections::HashMap<usize, usize>,
    /// For each frame pushed so far, the rendered frame it carried (`None`: skipped).
    pub carried: Vec<Option<usize>>,
}

impl<'a> Feeder<'a> {
    pub(crate) fn new(feed: Feed, frames: &'a [Vec<u8>], count: usize) -> Self {
        Feeder {
            feed,
            frames,
            lent: std::collections::HashMap::new(),
            carried: Vec::with_capacity(count),
        }
    }

    /// Pushes frame `k` (rendered frame `k mod len`, or with [`Feed::Lent`] what the
    /// lent buffer holds), due at `due`.
    pub(crate) fn push(&mut self, w: &mut Writer, k: usize, due: Instant) {
        let i = k % self.frames.len();
        let carried = match self.feed {
            Feed::Copy => {
                let _ = w.push_bytes(&self.frames[i], due).expect("push a frame");
                Some(i)
            }
            Feed::ZeroCopy | Feed::Lent => match w.buffer().expect("take a pool buffer") {
                Some(mut buf) => {
                    let held = if self.feed == Feed::ZeroCopy {
                        buf.copy_from_slice(&self.frames[i]);
                        i
                    } else {
                        let frames = self.frames;
                        *self.lent.entry(buf.as_ptr() as usize).or_insert_with(|| {
                            buf.copy_from_slice(&frames[i]);
                            i
                        })
                    };
                    let _ = w.push_buffer(buf, due).expect("push a buffer");
                    Some(held)
                }
                None => {
                    w.skip().expect("skip a frame");
                    None
                }
            },
        };
        self.carried.push(carried);
    }
}

/// User + system CPU seconds of this process so far (`getrusage`).
pub(crate) fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` through the pointer, which is valid and
    // aligned for it; RUSAGE_SELF is always accepted.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and zeroed() had already
    // made every field a valid integer).
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Writes `count` frames (cycling `frames`) into a fresh store at `path` (an OME-Zarr
/// image with `ome`, else a plain array), fed as `feed` says and paced at `fps` (0 = as
/// fast as possible), and returns the timings. Frame k is due at t0 + k/fps; its latency
/// is measured from then (open loop).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_writer(
    path: &Path,
    spec: ArraySpec,
    ome: Option<&Ome>,
    options: WriterOptions,
    frames: &[Vec<u8>],
    count: usize,
    fps: f64,
    feed: Feed,
) -> Run {
    run_writer_checked(
        path,
        spec,
        ome,
        options,
        frames,
        (count, fps),
        feed,
        |_, _| {},
    )
}

/// [`run_writer`], then `check(path, carried)` on the finished store before it is
/// removed, `carried[k]` being the rendered frame that frame k carried (`None`: skipped).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_writer_checked(
    path: &Path,
    spec: ArraySpec,
    ome: Option<&Ome>,
    options: WriterOptions,
    frames: &[Vec<u8>],
    (count, fps): (usize, f64),
    feed: Feed,
    check: impl FnOnce(&Path, &[Option<usize>]),
) -> Run {
    let _ = std::fs::remove_dir_all(path);
    let base = status_bytes("VmRSS");
    reset_peak();
    let cpu0 = cpu_seconds();
    let mut w = match ome {
        Some(ome) => Writer::create_ome(path, spec, ome, options),
        None => Writer::create(path, spec, options),
    }
    .expect("create the store");
    let mut feeder = Feeder::new(feed, frames, count);
    let t0 = Instant::now();
    let mut late = 0;
    for k in 0..count {
        let due = if fps > 0.0 {
            let due = t0 + Duration::from_secs_f64(k as f64 / fps);
            let now = Instant::now();
            if due > now {
                spin_until(due);
            } else if now - due > Duration::from_millis(1) {
                late += 1;
            }
            due
        } else {
            Instant::now()
        };
        feeder.push(&mut w, k, due);
    }
    let stats = w.finish().expect("finish the store");
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds() - cpu0;
    let extra_rss = status_bytes("VmHWM").saturating_sub(base);
    let stored = stored_bytes(path);
    check(path, &feeder.carried);
    let _ = std::fs::remove_dir_all(path);
    Run {
        seconds,
        raw_bytes: stats.bytes_in,
        stored_bytes: stored,
        extra_rss,
        stats,
        late,
        cpu_seconds,
    }
}

/// Checks the array at `root`/`key` (zarrs reading it, an independent reader) against
/// what was pushed: as many frames as `carried` has, and the first, middle and last
/// frames equal to the rendered frames they carried. `Err` says what is wrong.
pub(crate) fn check_frames(
    root: &Path,
    key: &str,
    frames: &[Vec<u8>],
    carried: &[Option<usize>],
) -> Result<(), String> {
    use zarrs::array::{Array, ArraySubset};
    let store = std::sync::Arc::new(
        zarrs::filesystem::FilesystemStore::new(root).map_err(|e| format!("open store: {e}"))?,
    );
    let array = Array::open(store, key).map_err(|e| format!("zarrs cannot open {key}: {e}"))?;
    let shape = array.shape().to_vec();
    if shape.first().copied() != Some(carried.len() as u64) {
        return Err(format!(
            "{key}: shape {shape:?}, but {} frames were pushed",
            carried.len()
        ));
    }
    let last = carried.len().saturating_sub(1);
    for k in [0, carried.len() / 2, last] {
        let Some(Some(i)) = carried.get(k).copied() else {
            return Err(format!("{key}: frame {k} was skipped (no free buffer)"));
        };
        let mut start = vec![0; shape.len()];
        start[0] = k as u64;
        let mut size = shape.clone();
        size[0] = 1;
        let subset = ArraySubset::new_with_start_shape(start, size)
            .map_err(|e| format!("{key}: frame {k}: {e}"))?;
        let got = array
            .retrieve_array_subset::<Vec<u16>>(&subset)
            .map_err(|e| format!("{key}: zarrs cannot read frame {k}: {e}"))?;
        let want = frames[i]
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]));
        if !got.iter().copied().eq(want) {
            return Err(format!("{key}: frame {k} differs from the frame pushed"));
        }
    }
    Ok(())
}

/// Sleeps most of the way, then spins the last 200 µs: a camera clock accurate to well
/// under a millisecond that does not steal a core from the writer (spinning the last
/// millisecond of every frame took a quarter of a core at 250 fps).
pub(crate) fn spin_until(t: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `p50/p99/p99.9/max` in milliseconds.
pub(crate) fn pct_ms(h: &LatencySummary) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    format!(
        "{:.2} / {:.2} / {:.2} / {:.1}",
        ms(h.p50),
        ms(h.p99),
        ms(h.p999),
        ms(h.max)
    )
}

/// `--key value` options after `cargo bench --bench NAME --`; cargo's own `--bench` flag
/// is ignored.
pub(crate) struct Args(Vec<String>);

impl Args {
    pub(crate) fn parse() -> Args {
        Args(
            std::env::args()
                .skip(1)
                .filter(|a| a != "--bench")
                .collect(),
        )
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        let i = self.0.iter().position(|a| a == key)?;
        self.0.get(i + 1).map(String::as_str)
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        self.0.iter().any(|a| a == key)
    }

    pub(crate) fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> T {
        match self.get(key) {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| panic!("{key}: cannot parse {v:?}")),
            None => default,
        }
    }

    pub(crate) fn list(&self, key: &str, default: &str) -> Vec<String> {
        self.get(key)
            .unwrap_or(default)
            .split(',')
            .map(str::to_owned)
            .collect()
    }
}

/// c-blosc 1.x (the `blosc-src` dev-dependency) compressing `src` with lz4 + byte shuffle
/// for 2-byte elements at `clevel`, single-threaded; returns the frame length (0 = error).
pub(crate) fn c_blosc_lz4(src: &[u8], dst: &mut [u8], clevel: i32) -> usize {
    c_blosc(src, dst, c"lz4", clevel, 1)
}

/// c-blosc 1.x compressing `src` (2-byte elements) with compressor `cname` at `clevel`
/// and `shuffle` (0 none, 1 byte, 2 bit), single-threaded; the frame length (0 = error).
#[allow(dead_code)] // each bench binary compiles this module; not all of them use it
pub(crate) fn c_blosc(
    src: &[u8],
    dst: &mut [u8],
    cname: &std::ffi::CStr,
    clevel: i32,
    shuffle: i32,
) -> usize {
    // SAFETY: src and dst are valid for their lengths; c-blosc writes at most destsize;
    // cname is NUL-terminated.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            clevel,
            shuffle,
            2,
            src.len(),
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            dst.len(),
            cname.as_ptr(),
            0,
            1,
        )
    };
    usize::try_from(n).unwrap_or(0)
}

/// Machine facts for the report header.
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|s| s.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem = meminfo_bytes("MemTotal");
    format!(
        "{cores} cores ({cpu}), {:.1} GiB RAM, Linux {}",
        mem as f64 / (1u64 << 30) as f64,
        kernel.trim()
    )
}

/// The inner chunks of the whole acquisition, contiguous, in shard order (untimed).
pub(crate) fn cut_chunks(wl: &Workload, pool: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let [ct, cy, cx] = wl.chunk.map(|v| v as usize);
    let [h, w] = wl.frame.map(|v| v as usize);
    let mut out = Vec::new();
    for t0 in (0..pool.len() - pool.len() % ct).step_by(ct) {
        for y0 in (0..h).step_by(cy) {
            for x0 in (0..w).step_by(cx) {
                let mut c = Vec::with_capacity(ct * cy * cx * 2);
                for frame in &pool[t0..t0 + ct] {
                    for y in y0..y0 + cy {
                        c.extend_from_slice(&frame[(y * w + x0) * 2..(y * w + x0 + cx) * 2]);
                    }
                }
                out.push(c);
            }
        }
    }
    out
}

/// Encodes every chunk on `threads` threads (chunk i on thread i mod threads), each with
/// its own output buffer; returns wall seconds and the total encoded bytes.
pub(crate) fn encode_all(
    chunks: &[Vec<u8>],
    threads: usize,
    f: impl Fn(&[u8], &mut Vec<u8>) -> usize + Sync,
) -> (f64, u64) {
    let t = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let f = &f;
                s.spawn(move || {
                    let mut out = Vec::new();
                    chunks
                        .iter()
                        .skip(k)
                        .step_by(threads)
                        .map(|c| f(c, &mut out) as u64)
                        .sum::<u64>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    (t.elapsed().as_secs_f64(), total)
}

/// Our `ChunkEncoder` (crc32c on, as the writer writes it) encoding `chunk` into `out`,
/// one encoder per thread and codec; returns the encoded length.
pub(crate) fn ours_encode(codec: Codec, chunk: &[u8], out: &mut Vec<u8>) -> usize {
    thread_local! {
        static ENC: std::cell::RefCell<Option<(Codec, ChunkEncoder)>> =
            const { std::cell::RefCell::new(None) };
    }
    ENC.with_borrow_mut(|slot| {
        if slot.as_ref().is_none_or(|(c, _)| *c != codec) {
            *slot = Some((
                codec,
                ChunkEncoder::new(codec, 2, Checksum::Crc32c).expect("encoder"),
            ));
        }
        let (_, enc) = slot.as_mut().expect("just set");
        out.resize(enc.slot_bound(chunk.len()), 0);
        enc.encode_slice(chunk, out).expect("encode")
    })
}

/// Sequential write of `bytes` into `files` equal files, each in 8 MiB `write`s and
/// `fsync`ed when complete; returns seconds.
pub(crate) fn disk_write(dir: &std::path::Path, bytes: u64, files: u64, data: &[u8]) -> f64 {
    use std::io::Write as _;
    let per_file = bytes.div_ceil(files);
    let paths: Vec<_> = (0..files)
        .map(|i| dir.join(format!("disk-ceiling-{i}.bin")))
        .collect();
    let t = Instant::now();
    for path in &paths {
        let mut f = std::fs::File::create(path).expect("create a disk-ceiling file");
        let mut left = per_file;
        while left > 0 {
            let n = left.min(data.len() as u64) as usize;
            f.write_all(&data[..n]).expect("write a disk-ceiling file");
            left -= n as u64;
        }
        f.sync_all().expect("fsync a disk-ceiling file");
    }
    let secs = t.elapsed().as_secs_f64();
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    secs
}

/// `O_DIRECT` writes in flight at once in the disk ceiling: one thread could not keep the
/// device busy, and the direct sink keeps several writes in flight (up to its workers).
pub(crate) const DIRECT_IN_FLIGHT: usize = 4;

/// `O_DIRECT` writes of `bytes` (rounded up to 4 KiB) into one file reserved with
/// `fallocate`, in blocks of `data`'s length, [`DIRECT_IN_FLIGHT`] threads writing every
/// that-many-th block, then `fsync`; returns seconds, or `None` where the filesystem
/// refuses `O_DIRECT`.
pub(crate) fn disk_write_direct(dir: &std::path::Path, bytes: u64, data: &[u8]) -> Option<f64> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let path = dir.join("disk-ceiling-direct.bin");
    // O_DIRECT needs page-aligned memory and lengths: an anonymous mapping is aligned.
    let block = (data.len() & !4095) as u64;
    let mut buf = memmap2::MmapMut::map_anon(block as usize).ok()?;
    buf.copy_from_slice(&data[..block as usize]);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .ok()?;
    let len = bytes.div_ceil(4096) * 4096;
    let t = Instant::now();
    let written = (|| {
        rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, len)?;
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..DIRECT_IN_FLIGHT as u64)
                .map(|t| {
                    let (f, buf) = (&f, &buf);
                    s.spawn(move || -> std::io::Result<()> {
                        let mut at = t * block;
                        while at < len {
                            let n = (len - at).min(block) as usize;
                            f.write_all_at(&buf[..n], at)?;
                            at += DIRECT_IN_FLIGHT as u64 * block;
                        }
                        Ok(())
                    })
                })
                .collect();
            writers.into_iter().try_for_each(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(std::io::ErrorKind::Other.into()))
            })
        })?;
        f.sync_all()
    })();
    let secs = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    written.ok().map(|()| secs)
}
