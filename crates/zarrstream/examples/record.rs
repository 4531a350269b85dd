//! `record`: stream camera frames into a sharded Zarr v3 array and report throughput,
//! compression, latency and memory, on its synthetic camera or on frames from a file.
//!
//! ```text
//! cargo run --release --example record -- --out /tmp/c1.zarr --overwrite \
//!     --shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 128 \
//!     --codec lz4:1 --sink mmap --report /tmp/r.json
//! ```
//!
//! Frames come from a headerless raw file (`--input`) or from a synthetic sCMOS-like
//! camera (`record/camera.rs`); either way they are in memory before timing starts.
//! Timing runs from the first push until `finish` returned (data durable per
//! `--durability`). With `--fps F`, frame k is due at t0 + k/F on a camera clock: the
//! pusher waits until then, and the frame latency is measured from that scheduled time,
//! so a stall of the writer shows up in the latency of every frame it delays (open loop).
//! `--arrays N` records N cameras (`cam0..`) into one group with a `Recording`, from one
//! thread or (`--camera-threads`) one thread per camera; `--plate ROWSxCOLS --fields F`
//! records an OME-Zarr high-content screening plate field by field; `--resume` continues
//! a finished array or recording. `--help` lists every option.

#[path = "record/args.rs"]
mod args;
#[path = "record/os.rs"]
mod os;
#[path = "record/report.rs"]
mod report;

use std::error::Error as StdError;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zarrstream::remote::RemoteOptions;
use zarrstream::{
    AcquisitionOrder, ArrayConfig, ArraySpec, Backpressure, Durability, FrameMeta, FrameMetaSpec,
    MemoryEstimate, MetaType, Ome, Omero, Plate, Recording, Stats, Writer, WriterOptions,
    estimate_memory, estimate_memory_ome,
};

use zarrstream_camera as camera;

use crate::args::{Command, OmeArgs, Options, UsageError, join};
use crate::report::{mib, round};

/// Largest total size of distinct synthetic frames kept in memory (they are cycled).
const SYNTHETIC_POOL_BYTES: u64 = 1 << 30;

/// Why the example failed: bad options (exit 2) or a failure while running (exit 1).
enum Failure {
    Usage(String),
    Run(Box<dyn StdError>),
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<zarrstream::Error> for Failure {
    fn from(e: zarrstream::Error) -> Self {
        match e {
            zarrstream::Error::Exists { path } => Failure::Usage(exists_message(&path)),
            zarrstream::Error::Spec(s) => Failure::Usage(format!("invalid array: {s}")),
            // What --resume found differs from the options, or cannot be continued.
            e @ (zarrstream::Error::ResumeMismatch { .. }
            | zarrstream::Error::ResumeUnsupported(_)
            | zarrstream::Error::ConflictingOptions(..)
            | zarrstream::Error::NotOwned { .. }
            | zarrstream::Error::Plate(_)) => Failure::Usage(e.to_string()),
            e => Failure::Run(Box::new(e)),
        }
    }
}

impl From<zarrstream::PlateError> for Failure {
    fn from(e: zarrstream::PlateError) -> Self {
        Failure::from(zarrstream::Error::from(e))
    }
}

impl From<zarrstream::SpecError> for Failure {
    fn from(e: zarrstream::SpecError) -> Self {
        Failure::Usage(format!("invalid array: {e}"))
    }
}

/// An I/O error with what was being done to which path.
#[derive(Debug)]
struct IoContext {
    what: String,
    source: std::io::Error,
}

impl fmt::Display for IoContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl StdError for IoContext {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&self.source)
    }
}

fn io_failure(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Failure {
    let what = what.into();
    move |source| Failure::Run(Box::new(IoContext { what, source }))
}

fn exists_message(path: &Path) -> String {
    format!(
        "{} already exists; pass --overwrite to replace it",
        path.display()
    )
}

fn main() -> ExitCode {
    os::ignore_sigxfsz();
    match run(std::env::args().skip(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("record: error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            // Our errors and the library's already include their cause in the message.
            eprintln!("record: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(argv: impl IntoIterator<Item = String>) -> Result<(), Failure> {
    let opts = match args::parse(argv)? {
        Command::Help => {
            print!("{}", args::HELP);
            return Ok(());
        }
        Command::Run(o) => *o,
    };
    let spec = build_spec(&opts)?;
    // An object store is checked by the library; parts share their path.
    let local = !zarrstream::remote::is_url(&opts.out.to_string_lossy()) && opts.part_of.is_none();
    if opts.save_frames.is_none() && local {
        check_out_path(&opts)?;
        if let Some(p) = &opts.report {
            check_report_path(p)?;
        }
    }

    let input = open_input(&opts, &spec)?;
    let frames = match (opts.frames, &input) {
        (Some(n), _) => n,
        (None, Some(i)) => i.frames,
        (None, None) => args::default_frames(spec.shape()),
    };
    let capacity = spec.shape()[0].saturating_mul(spec.frames_per_step());
    if spec.shape()[0] != 0 && frames > capacity {
        return Err(Failure::Usage(format!(
            "--frames {frames} exceeds the array's capacity of {capacity} frames (--shape {})",
            join(spec.shape())
        )));
    }
    // --resume opens the store first: where it ends decides which synthetic frames
    // come next (and whether --frames still fits).
    let (early, resumed_from) = if opts.resume {
        let target = open_target(&opts, &spec)?;
        let counts = target.frames_pushed()?;
        if let Some(&done) = counts.iter().max()
            && spec.shape()[0] != 0
            && done.saturating_add(frames) > capacity
        {
            return Err(Failure::Usage(format!(
                "--frames {frames} after the {done} frames recorded exceeds the array's capacity of {capacity} frames (--shape {})",
                join(spec.shape())
            )));
        }
        (Some(target), Some(counts))
    } else {
        (None, None)
    };
    // A plate's one camera takes every field's frames in turn.
    let plate = plate_of(&opts);
    let images = match &plate {
        Some(p) => p.images()?.len() as u64,
        None => 1,
    };
    let camera_frames = frames.saturating_mul(images);
    let prep = Instant::now();
    let (pool, source) = match input {
        Some(i) => load_input(i, camera_frames)?,
        None => {
            let first = resumed_from.as_ref().map_or(0, |c| c[0]);
            render_frames(&opts, &spec, camera_frames, first)?
        }
    };
    let prep_seconds = prep.elapsed().as_secs_f64();
    if let Some(path) = &opts.save_frames {
        return save_frames(path, &pool, camera_frames, opts.quiet);
    }
    if !opts.quiet {
        eprintln!(
            "record: {} distinct frame(s) ready in {prep_seconds:.2} s ({source}); recording {frames} frame(s) to {}",
            pool.len(),
            opts.out.display()
        );
    }

    let estimate = memory_estimate(&opts, &spec)?;
    if opts.estimate_memory && !opts.quiet {
        eprintln!("record: memory estimate {estimate}");
    }

    // The frames stay resident; what the acquisition adds on top is what matters.
    let peak_reset = report::reset_peak_rss();
    let baseline_rss_kib = report::proc_status_kib("VmRSS");

    let target = match early {
        Some(t) => t,
        None => open_target(&opts, &spec)?,
    };
    let (run, stats, arrays) = match target {
        Target::One(mut writer) => {
            let order = acquisition_order(&opts, &spec)?;
            let lead = &spec.shape()[..spec.rank() - 2];
            let run = acquire(
                &mut writer,
                &pool,
                frames,
                opts.fps,
                opts.progress,
                opts.frame_meta,
                order.as_ref().map(|o| (o.axes(), lead)),
            )?;
            (run, writer.finish()?, None)
        }
        Target::Many(rec) => {
            let run = if let Some(p) = &plate {
                acquire_plate(&rec, p, &pool, frames, spec.frames_per_step(), &opts)?
            } else if opts.camera_threads {
                acquire_threads(&rec, &pool, frames, &opts)?
            } else {
                acquire_round_robin(&rec, &pool, frames, &opts)?
            };
            let stats = rec.finish()?;
            (run, stats.total, Some(stats.arrays))
        }
    };
    let seconds = run.started.elapsed().as_secs_f64();

    let peak_rss_kib = report::proc_status_kib("VmHWM");
    let usage = usage_of(&opts.out, &stats)?;
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    let arrays = match arrays {
        Some(list) => {
            let mut with_usage = Vec::with_capacity(list.len());
            for (key, stats) in list {
                let usage = usage_of(&opts.out.join(&key), &stats)?;
                with_usage.push((key, stats, usage));
            }
            Some(with_usage)
        }
        None => None,
    };
    let measured = Measured {
        stats,
        arrays,
        resumed_from,
        seconds,
        usage,
        threads,
        peak_rss_kib,
        baseline_rss_kib,
        peak_reset,
        late_frames: run.late_frames,
        max_lateness: run.max_lateness,
        distinct_frames: pool.len(),
        prep_seconds,
        source,
        estimate,
    };
    let doc = report_json(&opts, &measured);
    if let Some(path) = &opts.report {
        let mut text = serde_json::to_string_pretty(&doc).map_err(|e| Failure::Run(Box::new(e)))?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(io_failure(format!("write report {}", path.display())))?;
    }
    if !opts.quiet {
        print_summary(&opts, &measured);
    }
    Ok(())
}

fn build_spec(o: &Options) -> Result<ArraySpec, Failure> {
    let mut builder = ArraySpec::builder()
        .shape(&o.shape)
        .chunk_shape(&o.chunk)
        .shard_shape(&o.shard)
        .dtype(o.dtype)
        .codec(o.codec)
        .crc32c(o.crc32c)
        .index_location(o.index_location)
        .fill_value(o.fill_value);
    if let Some(names) = &o.dim_names {
        builder = builder.dimension_names(names.iter().cloned());
    }
    let mut attrs = serde_json::Map::new();
    let source = match &o.input {
        Some(p) => json!({"input": p.display().to_string()}),
        None => {
            let cam = synthetic_camera(o)?;
            let model = "peers/make_frames.py";
            json!({"synthetic_camera": {"model": model, "seed": cam.seed, "blobs": cam.blobs}})
        }
    };
    attrs.insert("record".into(), source);
    Ok(builder.attributes(attrs).build()?)
}

/// The library's OME-Zarr options from `--pixel-size`, `--z-step`, `--frame-interval`,
/// `--channels` and `--window` (micrometers and milliseconds). The `omero` metadata is
/// always written, so viewers open the image at the contrast of its data.
fn ome_options(a: &OmeArgs, dtype: zarrstream::DataType) -> Ome {
    let mut ome = Ome::new().name("record");
    if let Some((y, x)) = a.pixel_size {
        ome = ome.pixel_size(y, x);
    }
    if let Some(z) = a.z_step {
        ome = ome.z_step(z);
    }
    if let Some(ms) = a.frame_interval_ms {
        ome = ome.frame_interval(std::time::Duration::from_secs_f64(ms / 1e3));
    }
    if let Some(c) = &a.channels {
        ome = ome.channels(c.iter().cloned());
    }
    ome = ome.omero(match a.window {
        Some((start, end)) => Omero::AutoWindow(zarrstream::Window::of_type(dtype, start, end)),
        None => Omero::Auto,
    });
    if let Some(l) = a.levels {
        ome = ome.levels(l);
    }
    if let Some(m) = a.downsample {
        ome = ome.downsample(m);
    }
    ome.downsample_z(a.downsample_z)
}

/// What the frames go to: one array (the path without `--arrays`), or the arrays
/// `cam0..` of one recording. There is one per run, so its size does not matter; the
/// writer stays unboxed so that the single-array push loop is exactly as before.
#[allow(clippy::large_enum_variant)]
enum Target {
    One(Writer),
    Many(Recording),
}

impl Target {
    /// Frames each array holds so far (before the first push: what a resumed array
    /// already had).
    fn frames_pushed(&self) -> Result<Vec<u64>, Failure> {
        Ok(match self {
            Target::One(w) => vec![w.frames_pushed()],
            Target::Many(r) => (0..r.keys().count())
                .map(|a| r.frames_pushed(a))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The key of array `k` with `--arrays`.
fn array_key(k: usize) -> String {
    format!("cam{k}")
}

/// The plate of `--plate ROWSxCOLS --fields F` (rows A, B, …; columns 1, 2, …).
fn plate_of(o: &Options) -> Option<Plate> {
    o.plate
        .map(|(rows, columns)| Plate::grid(rows, columns).fields(o.fields))
}

/// What the store at `out` holds: measured on disk, or for an object store what the
/// writer stored (its staging directory is gone once everything is uploaded).
fn usage_of(out: &Path, stats: &zarrstream::Stats) -> Result<report::DiskUsage, Failure> {
    if zarrstream::remote::is_url(&out.to_string_lossy()) {
        return Ok(report::DiskUsage {
            bytes: stats.bytes_stored,
            allocated: stats.bytes_stored,
            files: stats.shards,
        });
    }
    report::disk_usage(out).map_err(io_failure(format!("measure {}", out.display())))
}

/// `--out` as the writer takes it: with `--part-of`, a local path becomes a `file://`
/// URL (the processes share it through the object-store path, each writing only its own
/// shards).
fn destination(opts: &Options) -> Result<PathBuf, Failure> {
    let out = opts.out.to_string_lossy();
    if opts.part_of.is_none() || zarrstream::remote::is_url(&out) {
        return Ok(opts.out.clone());
    }
    let abs = std::path::absolute(&opts.out)
        .map_err(io_failure(format!("resolve {}", opts.out.display())))?;
    Ok(PathBuf::from(format!("file://{}", abs.display())))
}

/// `--acquisition-order` against the array: the loop order over its leading axes.
fn acquisition_order(
    opts: &Options,
    spec: &ArraySpec,
) -> Result<Option<AcquisitionOrder>, Failure> {
    let Some(axes) = &opts.acquisition_order else {
        return Ok(None);
    };
    let lead = spec.rank().saturating_sub(2);
    let order = match axes
        .iter()
        .map(|a| a.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(numbers) => AcquisitionOrder::new(numbers),
        Err(_) => {
            let names = spec.dimension_names().unwrap_or_default();
            AcquisitionOrder::from_names(axes, &names[..lead.min(names.len())])
                .map_err(|e| Failure::Usage(format!("--acquisition-order: {e}")))?
        }
    };
    Ok(Some(order))
}

/// The writer options the flags ask for.
fn writer_options(opts: &Options, spec: &ArraySpec) -> Result<WriterOptions, Failure> {
    let options = WriterOptions::default()
        .threads(opts.threads)
        .pin_threads(opts.pin)
        .sink(opts.sink)
        .pool_frames(opts.pool_frames)
        .backpressure(opts.backpressure)
        .durability(opts.durability)
        .packing(opts.packing)
        .chunk_order(opts.chunk_order)
        .overwrite(opts.overwrite);
    let mut remote = RemoteOptions::default().coordinate(opts.coordinate);
    if let Some(d) = &opts.staging {
        remote = remote.staging_dir(d);
    }
    if let Some(mib) = opts.staging_budget_mib {
        remote = remote.staging_budget(mib << 20);
    }
    if let Some((k, _)) = opts.part_of {
        remote = remote.part(k);
    }
    let options = options.remote(remote);
    let options = if opts.resume {
        options.resume(true)
    } else {
        options
    };
    let options = match acquisition_order(opts, spec)? {
        Some(order) => options.acquisition_order(order),
        None => options,
    };
    Ok(if opts.frame_meta && opts.arrays.is_none() {
        options.frame_meta(synthetic_meta_spec())
    } else {
        options
    })
}

/// The arrays of `--arrays`.
fn array_configs(opts: &Options, spec: &ArraySpec, n: usize) -> Vec<ArrayConfig> {
    (0..n)
        .map(|k| {
            let mut a = ArrayConfig::new(array_key(k), spec.clone());
            if let Some(o) = &opts.ome {
                a = a.ome(ome_options(o, spec.dtype()));
            }
            if opts.frame_meta {
                a = a.frame_meta(synthetic_meta_spec());
            }
            a
        })
        .collect()
}

/// The most memory the writer (or recording) of these flags will use.
fn memory_estimate(opts: &Options, spec: &ArraySpec) -> Result<MemoryEstimate, Failure> {
    let options = writer_options(opts, spec)?;
    if let Some(plate) = plate_of(opts) {
        let ome = ome_options(&opts.ome.clone().unwrap_or_default(), spec.dtype());
        return Ok(Recording::estimate_plate_memory(
            &plate, spec, &ome, &options,
        )?);
    }
    Ok(match (opts.arrays, &opts.ome) {
        (Some(n), _) => Recording::estimate_memory(&array_configs(opts, spec, n), &options)?,
        (None, Some(a)) => estimate_memory_ome(spec, &ome_options(a, spec.dtype()), &options)?,
        (None, None) => estimate_memory(spec, &options)?,
    })
}

/// Creates (or with `--resume`, reopens) the writer or recording at `--out`.
fn open_target(opts: &Options, spec: &ArraySpec) -> Result<Target, Failure> {
    let options = writer_options(opts, spec)?;
    if let Some(plate) = plate_of(opts) {
        let ome = ome_options(&opts.ome.clone().unwrap_or_default(), spec.dtype());
        let rec = Recording::create_plate(&opts.out, &plate, spec.clone(), &ome, options)?;
        return Ok(Target::Many(rec));
    }
    let Some(n) = opts.arrays else {
        let spec = spec.clone();
        return Ok(Target::One(match &opts.ome {
            Some(a) => {
                let ome = ome_options(a, spec.dtype());
                Writer::create_ome(&opts.out, spec, &ome, options)?
            }
            None => Writer::create(destination(opts)?, spec, options)?,
        }));
    };
    let arrays = array_configs(opts, spec, n);
    Ok(Target::Many(Recording::create(&opts.out, arrays, options)?))
}

/// Fails before the acquisition, not after it, if the report cannot be written there.
fn check_report_path(path: &Path) -> Result<(), Failure> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if path.is_dir() {
        return Err(Failure::Usage(format!(
            "--report {}: is a directory",
            path.display()
        )));
    }
    if !parent.is_dir() {
        return Err(Failure::Usage(format!(
            "--report {}: directory {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    Ok(())
}

/// Refuses an existing `--out` unless `--overwrite`, and even then a non-empty directory
/// that is not a Zarr store (the writer would delete it recursively).
fn check_out_path(o: &Options) -> Result<(), Failure> {
    let meta = match std::fs::symlink_metadata(&o.out) {
        Ok(_) if o.resume => return check_resumable(o),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && o.resume => {
            return Err(Failure::Usage(format!(
                "--resume: {} does not exist",
                o.out.display()
            )));
        }
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_failure(format!("inspect {}", o.out.display()))(e)),
    };
    if !o.overwrite {
        return Err(Failure::Usage(exists_message(&o.out)));
    }
    if meta.is_dir() {
        let empty = std::fs::read_dir(&o.out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty && !o.out.join("zarr.json").is_file() {
            return Err(Failure::Usage(format!(
                "refusing to overwrite {}: it is a non-empty directory without zarr.json, not a Zarr store",
                o.out.display()
            )));
        }
    }
    Ok(())
}

/// `--resume`: refuses, as a usage error, a store at `--out` that is not what the
/// options describe (a recording's group without `--arrays`, a missing array with it),
/// before the library meets it.
fn check_resumable(o: &Options) -> Result<(), Failure> {
    let node_type = |dir: &Path| -> Option<String> {
        let text = std::fs::read(dir.join("zarr.json")).ok()?;
        let doc: Value = serde_json::from_slice(&text).ok()?;
        doc.get("node_type")?.as_str().map(str::to_owned)
    };
    match o.arrays {
        None if o.ome.is_none() && node_type(&o.out).as_deref() == Some("group") => {
            Err(Failure::Usage(format!(
                "--resume: {} is a group, not an array (recorded with --arrays or --ome?)",
                o.out.display()
            )))
        }
        None => Ok(()),
        Some(n) => match (0..n)
            .map(|k| o.out.join(array_key(k)))
            .find(|d| !d.exists())
        {
            Some(missing) => Err(Failure::Usage(format!(
                "--resume --arrays {n}: {} does not exist",
                missing.display()
            ))),
            None => Ok(()),
        },
    }
}

/// An opened `--input` file holding `frames` whole frames of `frame_bytes`.
struct Input {
    path: PathBuf,
    file: File,
    frames: u64,
    frame_bytes: usize,
}

fn open_input(o: &Options, spec: &ArraySpec) -> Result<Option<Input>, Failure> {
    let Some(path) = &o.input else {
        return Ok(None);
    };
    let fb = spec.frame_bytes();
    let what = format!("open input {}", path.display());
    let file = File::open(path).map_err(io_failure(what.clone()))?;
    let len = file.metadata().map_err(io_failure(what))?.len();
    if len == 0 || len % fb as u64 != 0 {
        let rank = spec.rank();
        return Err(Failure::Usage(format!(
            "--input {}: {len} bytes is not a whole number of {} x {} {} frames ({fb} bytes each)",
            path.display(),
            spec.shape()[rank - 2],
            spec.shape()[rank - 1],
            spec.dtype()
        )));
    }
    Ok(Some(Input {
        path: path.clone(),
        file,
        frames: len / fb as u64,
        frame_bytes: fb,
    }))
}

/// Reads the first `min(frames, frames in the file)` frames; they are cycled if the file
/// holds fewer than `frames`. Returns them and a description.
fn load_input(mut input: Input, frames: u64) -> Result<(Vec<Vec<u8>>, String), Failure> {
    let load = frames.min(input.frames);
    let mut pool = Vec::with_capacity(load as usize);
    for _ in 0..load {
        let mut buf = vec![0u8; input.frame_bytes];
        input
            .file
            .read_exact(&mut buf)
            .map_err(io_failure(format!("read input {}", input.path.display())))?;
        pool.push(buf);
    }
    if pool.is_empty() {
        // `--frames 0`: nothing is pushed; one frame keeps the push loop uniform.
        pool.push(vec![0u8; input.frame_bytes]);
    }
    let cycled = if frames > input.frames {
        ", cycled"
    } else {
        ""
    };
    let desc = format!(
        "{load} of {} frames of {}{cycled}",
        input.frames,
        input.path.display()
    );
    Ok((pool, desc))
}

/// The synthetic camera for the options' frame size and data type.
fn synthetic_camera(o: &Options) -> Result<camera::Camera, Failure> {
    let rank = o.shape.len();
    let to_usize = |v: u64| {
        usize::try_from(v).map_err(|_| Failure::Usage(format!("frame edge {v} is too large")))
    };
    let (height, width) = (to_usize(o.shape[rank - 2])?, to_usize(o.shape[rank - 1])?);
    Ok(camera::Camera {
        height,
        width,
        blobs: o
            .blobs
            .unwrap_or_else(|| camera::default_blobs(height, width)),
        seed: o.seed,
        dtype: o.dtype,
    })
}

/// Renders at most `SYNTHETIC_POOL_BYTES` of distinct synthetic frames (cycled while
/// pushing). Returns them and a description.
///
/// The camera's frame `g` is its frame `g % P` (`P` frames fit in the pool): what the
/// pool of a recording of any length holds at the index frame `g` is pushed from. So a
/// recording resumed after `first` frames starts at the camera's frame `first`, and
/// continues an uninterrupted one exactly.
fn render_frames(
    o: &Options,
    spec: &ArraySpec,
    frames: u64,
    first: u64,
) -> Result<(Vec<Vec<u8>>, String), Failure> {
    let fb = spec.frame_bytes() as u64;
    let period = (SYNTHETIC_POOL_BYTES / fb).max(1);
    let distinct = frames.clamp(1, period) as usize;
    let cam = synthetic_camera(o)?;
    if !o.quiet {
        eprintln!(
            "record: rendering {distinct} synthetic {} x {} {} frame(s) ({:.0} MiB)...",
            cam.height,
            cam.width,
            spec.dtype(),
            mib(distinct as u64 * fb)
        );
    }
    let pool = if first == 0 {
        cam.render(distinct)
    } else {
        let at: Vec<u64> = (0..distinct as u64)
            .map(|j| (first % period + j) % period)
            .collect();
        cam.render_at(&at)
    };
    let cycled = if frames > distinct as u64 {
        ", cycled"
    } else {
        ""
    };
    let from = if first == 0 {
        String::new()
    } else {
        format!(", from frame {first}")
    };
    let desc = format!(
        "synthetic camera, seed {}, {} blobs{from}{cycled}",
        cam.seed, cam.blobs
    );
    Ok((pool, desc))
}

/// `--save-frames`: writes the `frames` frames `acquire` would push (cycling through
/// `pool`) as headerless raw bytes, through a temporary file renamed into place so that
/// an interrupted run never leaves a short file behind.
fn save_frames(path: &Path, pool: &[Vec<u8>], frames: u64, quiet: bool) -> Result<(), Failure> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let what = format!("write frames to {}", tmp.display());
    let file = File::create(&tmp).map_err(io_failure(what.clone()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 22, file);
    let mut bytes = 0u64;
    for k in 0..frames {
        let frame = &pool[(k % pool.len() as u64) as usize];
        out.write_all(frame).map_err(io_failure(what.clone()))?;
        bytes += frame.len() as u64;
    }
    let file = out
        .into_inner()
        .map_err(|e| io_failure(what.clone())(e.into_error()))?;
    file.sync_all().map_err(io_failure(what))?;
    std::fs::rename(&tmp, path).map_err(io_failure(format!(
        "rename {} to {}",
        tmp.display(),
        path.display()
    )))?;
    if !quiet {
        eprintln!(
            "record: wrote {frames} frame(s), {:.1} MiB, to {}",
            mib(bytes),
            path.display()
        );
    }
    Ok(())
}

struct Acquisition {
    started: Instant,
    late_frames: u64,
    max_lateness: Duration,
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
fn acquire(
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
    let period = (fps > 0.0).then(|| 1.0 / fps);
    let mut late_frames = 0;
    let mut max_lateness = Duration::ZERO;
    let started = Instant::now();
    for k in 0..frames {
        let frame = &pool[(k % pool.len() as u64) as usize];
        let scheduled = match period {
            Some(p) => {
                // Camera clock: computed from t0 so rounding never accumulates.
                let due = started + Duration::from_secs_f64(k as f64 * p);
                wait_until(due);
                let lateness = Instant::now().saturating_duration_since(due);
                max_lateness = max_lateness.max(lateness);
                if lateness.as_secs_f64() > p {
                    late_frames += 1;
                }
                due
            }
            None => Instant::now(),
        };
        // A frame dropped under --backpressure drop is counted by the writer.
        if let Some((order, extent)) = order {
            let index = loop_point(k, order, extent);
            let _ = writer.write_frame_bytes(&index, frame, scheduled)?;
        } else if frame_meta {
            let meta = synthetic_meta(k, scheduled.duration_since(started));
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
    Ok(Acquisition {
        started,
        late_frames,
        max_lateness,
    })
}

/// The camera clock of one pushing thread: frame `k` is due at `started + k / fps`.
struct Pacer {
    started: Instant,
    period: Option<f64>,
    late_frames: u64,
    max_lateness: Duration,
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
        let _ = rec.push_with(a, frame, scheduled, &meta)?;
    } else {
        let _ = rec.push_bytes(a, frame, scheduled)?;
    }
    Ok(())
}

/// `--progress` with `--arrays` or `--plate`: prints `encoded KEY N` when array `a`'s
/// count grew.
fn report_progress(rec: &Recording, a: usize, seen: &mut u64) -> zarrstream::Result<()> {
    let now = rec.frames_encoded(a)?;
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
fn acquire_plate(
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
    Ok(Acquisition {
        started: pacer.started,
        late_frames: pacer.late_frames,
        max_lateness: pacer.max_lateness,
    })
}

/// `--arrays` from one thread: frame `k` of every array in turn (all due at the same
/// camera time), `frames` rounds.
fn acquire_round_robin(
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
    Ok(Acquisition {
        started: pacer.started,
        late_frames: pacer.late_frames,
        max_lateness: pacer.max_lateness,
    })
}

/// `--arrays --camera-threads`: one thread per array, each pushing its array on its
/// own camera clock (all started at the same time). The first failure stops the
/// other threads.
fn acquire_threads(
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
fn synthetic_meta_spec() -> FrameMetaSpec {
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

struct Measured {
    /// The array's, or with `--arrays` the recording's total.
    stats: Stats,
    /// With `--arrays`: each array's key, statistics and disk usage.
    arrays: Option<Vec<(String, Stats, report::DiskUsage)>>,
    /// With `--resume`: the frames each array held before this run.
    resumed_from: Option<Vec<u64>>,
    seconds: f64,
    usage: report::DiskUsage,
    threads: usize,
    peak_rss_kib: Option<u64>,
    baseline_rss_kib: Option<u64>,
    peak_reset: bool,
    late_frames: u64,
    max_lateness: Duration,
    distinct_frames: usize,
    prep_seconds: f64,
    source: String,
    /// The memory estimate made before the writer was created.
    estimate: MemoryEstimate,
}

impl Measured {
    fn throughput_mib_s(&self) -> f64 {
        if self.seconds > 0.0 {
            mib(self.stats.bytes_in) / self.seconds
        } else {
            0.0
        }
    }

    fn ratio(&self) -> f64 {
        if self.usage.bytes > 0 {
            self.stats.bytes_in as f64 / self.usage.bytes as f64
        } else {
            0.0
        }
    }
}

fn report_json(o: &Options, m: &Measured) -> Value {
    let s = &m.stats;
    let kib_to_mib = |k: Option<u64>| k.map(|k| round(k as f64 / 1024.0, 1));
    let extra_rss = match (m.peak_rss_kib, m.baseline_rss_kib) {
        (Some(p), Some(b)) => Some(round(p.saturating_sub(b) as f64 / 1024.0, 1)),
        _ => None,
    };
    let mut doc = json!({
        "frames": s.frames_pushed,
        "dropped": s.frames_dropped,
        "raw_bytes": s.bytes_in,
        "stored_bytes": m.usage.bytes,
        "seconds": round(m.seconds, 6),
        "throughput_mib_s": round(m.throughput_mib_s(), 2),
        "push_latency_us": report::percentiles_us(&s.push_latency_ns),
        "frame_latency_us": report::percentiles_us(&s.frame_latency_ns),
        "peak_rss_mib": kib_to_mib(m.peak_rss_kib),
        // Extras.
        "frames_written": s.frames_written,
        "compression_ratio": round(m.ratio(), 4),
        "codec": o.codec.label(),
        "crc32c": o.crc32c,
        "sink": s.sink.as_str(),
        "threads": m.threads,
        "dtype": o.dtype.zarr_name(),
        "shape": o.shape,
        "chunk": o.chunk,
        "shard": o.shard,
        "index_location": o.index_location.as_str(),
        "packing": o.packing.to_string(),
        "chunk_order": o.chunk_order.as_str(),
        "durability": match o.durability {
            Durability::Shard => "shard",
            Durability::None => "none",
            Durability::Periodic { .. } => "periodic",
            // The flags only make the modes above.
            _ => "other",
        },
        "backpressure": match o.backpressure {
            Backpressure::Block => "block",
            Backpressure::Drop => "drop",
            _ => "other",
        },
        "fps": o.fps,
        "late_frames": m.late_frames,
        "max_lateness_us": round(m.max_lateness.as_secs_f64() * 1e6, 3),
        "pool_mib": round(mib(s.pool_bytes as u64), 1),
        "staging_mib": round(mib(s.staging_bytes as u64), 1),
        "shards": s.shards,
        "shard_bytes": s.bytes_stored,
        "stored_files": m.usage.files,
        "stored_allocated_bytes": m.usage.allocated,
        "baseline_rss_mib": kib_to_mib(m.baseline_rss_kib),
        "extra_rss_mib": extra_rss,
        "peak_rss_reset_after_frames": m.peak_reset,
        "writer_seconds": round(s.seconds, 6),
        "distinct_frames": m.distinct_frames,
        "prepare_seconds": round(m.prep_seconds, 3),
        "source": m.source,
        "out": o.out.display().to_string(),
    });
    if let Value::Object(map) = &mut doc {
        map.insert("memory_estimate_mib".into(), memory_json(&m.estimate));
        map.insert(
            "writer_memory_peak_mib".into(),
            json!(round(mib(s.memory.peak), 1)),
        );
        if let Some(arrays) = &m.arrays {
            map.insert(
                "arrays".into(),
                arrays_json(arrays, m.resumed_from.as_deref()),
            );
            map.insert(
                "total".into(),
                json!({
                    "frames": s.frames_pushed,
                    "frames_written": s.frames_written,
                    "frames_dropped": s.frames_dropped,
                    "bytes_in": s.bytes_in,
                    "bytes_stored": s.bytes_stored,
                    "stored_bytes": m.usage.bytes,
                    "seconds": round(m.seconds, 6),
                    "throughput_mib_s": round(m.throughput_mib_s(), 2),
                    "push_latency_us": report::percentiles_us(&s.push_latency_ns),
                    "frame_latency_us": report::percentiles_us(&s.frame_latency_ns),
                }),
            );
            map.insert("camera_threads".into(), json!(o.camera_threads));
        }
        if let Some((rows, columns)) = o.plate {
            map.insert(
                "plate".into(),
                json!({"rows": rows, "columns": columns, "fields": o.fields,
                       "images": m.arrays.as_ref().map_or(0, Vec::len)}),
            );
        }
        if let Some(counts) = &m.resumed_from {
            map.insert("resumed_from".into(), json!(counts.iter().sum::<u64>()));
        }
    }
    doc
}

/// The estimate's parts in MiB, with `resident` (the bound on the extra RSS) and
/// `total` (with the page cache).
fn memory_json(e: &MemoryEstimate) -> Value {
    let m = |b: u64| round(mib(b), 1);
    json!({
        "resident": m(e.resident()),
        "total": m(e.total()),
        "frame_pool": m(e.frame_pool),
        "staging": m(e.staging),
        "encoders": m(e.encoders),
        "mapped_shards": m(e.mapped_shards),
        "pyramid": m(e.pyramid),
        "bookkeeping": m(e.bookkeeping),
        "page_cache": m(e.page_cache),
    })
}

/// The `"arrays"` list of the report: one entry per array of `--arrays`.
fn arrays_json(arrays: &[(String, Stats, report::DiskUsage)], resumed: Option<&[u64]>) -> Value {
    let entries = arrays
        .iter()
        .enumerate()
        .map(|(a, (key, s, usage))| {
            let mut entry = json!({
                "key": key,
                "frames": s.frames_pushed,
                "frames_written": s.frames_written,
                "frames_dropped": s.frames_dropped,
                "bytes_in": s.bytes_in,
                "bytes_stored": s.bytes_stored,
                "stored_bytes": usage.bytes,
                "shards": s.shards,
                "writer_seconds": round(s.seconds, 6),
                "push_latency_us": report::percentiles_us(&s.push_latency_ns),
                "frame_latency_us": report::percentiles_us(&s.frame_latency_ns),
            });
            if let (Some(r), Value::Object(map)) = (resumed, &mut entry) {
                map.insert("resumed_from".into(), json!(r.get(a).copied().unwrap_or(0)));
            }
            entry
        })
        .collect();
    Value::Array(entries)
}

fn print_summary(o: &Options, m: &Measured) {
    let s = &m.stats;
    let rank = o.shape.len();
    let ms = |h: &zarrstream::LatencySummary| h.p99 as f64 / 1e6;
    println!(
        "record: {} frame(s) of {}x{} {} ({} dropped) -> {}",
        s.frames_pushed,
        o.shape[rank - 2],
        o.shape[rank - 1],
        o.dtype,
        s.frames_dropped,
        o.out.display()
    );
    println!(
        "  codec {}, sink {}, {} thread(s), chunk {}, shard {}",
        o.codec.label(),
        s.sink.as_str(),
        m.threads,
        join(&o.chunk),
        join(&o.shard)
    );
    println!(
        "  {:.1} MiB raw in {:.3} s = {:.1} MiB/s; stored {:.1} MiB in {} file(s), ratio {:.3}",
        mib(s.bytes_in),
        m.seconds,
        m.throughput_mib_s(),
        mib(m.usage.bytes),
        m.usage.files,
        m.ratio()
    );
    let rss = match (m.peak_rss_kib, m.baseline_rss_kib) {
        (Some(p), Some(b)) => format!(
            "; peak RSS {:.0} MiB ({:.0} MiB over the loaded frames)",
            p as f64 / 1024.0,
            p.saturating_sub(b) as f64 / 1024.0
        ),
        _ => String::new(),
    };
    println!(
        "  p99 push latency {:.3} ms, p99 frame latency {:.3} ms{rss}",
        ms(&s.push_latency_ns),
        ms(&s.frame_latency_ns)
    );
    for (key, a, usage) in m.arrays.iter().flatten() {
        println!(
            "  {key}: {} frame(s) ({} dropped), {:.1} MiB raw, stored {:.1} MiB, p99 push {:.3} ms, p99 frame {:.3} ms",
            a.frames_pushed,
            a.frames_dropped,
            mib(a.bytes_in),
            mib(usage.bytes),
            ms(&a.push_latency_ns),
            ms(&a.frame_latency_ns)
        );
    }
    if let Some(counts) = &m.resumed_from {
        println!("  resumed after {} frame(s)", join(counts));
    }
    if o.estimate_memory {
        let e = m.estimate.resident();
        let measured = match (m.peak_rss_kib, m.baseline_rss_kib) {
            (Some(p), Some(b)) => {
                let extra = p.saturating_sub(b) * 1024;
                format!(
                    "measured peak {:.1} MiB over the loaded frames ({:.3} of the estimate), ",
                    mib(extra),
                    extra as f64 / e.max(1) as f64
                )
            }
            _ => String::new(),
        };
        println!(
            "  memory: estimate {:.1} MiB resident (+{:.1} MiB page cache), {measured}writer's own count peaked at {:.1} MiB",
            mib(e),
            mib(m.estimate.page_cache),
            mib(s.memory.peak)
        );
    }
    if o.fps > 0.0 {
        println!(
            "  paced at {} fps: {} frame(s) pushed more than one period late (max {:.3} ms)",
            o.fps,
            m.late_frames,
            m.max_lateness.as_secs_f64() * 1e3
        );
    }
}
