//! `zarrstream record`: stream camera frames into a sharded Zarr v3 array and report
//! throughput, compression, latency and memory, on the synthetic camera
//! (`zarrstream-camera`) or on frames from a file.
//!
//! ```text
//! zarrstream record --out /tmp/c1.zarr --overwrite \
//!     --shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 128 \
//!     --codec lz4:1 --sink mmap --report /tmp/r.json
//! ```
//!
//! Either way the frames are in memory before timing starts. Timing runs from the first
//! push until `finish` returned (data durable per `--durability`). With `--fps F`, frame
//! k is due at t0 + k/F on a camera clock: the pusher waits until then, and the frame
//! latency is measured from that scheduled time, so a stall of the writer shows up in the
//! latency of every frame it delays (open loop). `--arrays N` records N cameras (`cam0..`)
//! into one group with a `Recording`, from one thread or (`--camera-threads`) one thread
//! per camera; `--plate ROWSxCOLS --fields F` records an OME-Zarr high-content screening
//! plate field by field; `--resume` continues a finished array or recording.
//! `zarrstream record --help` lists every option; DESIGN.md §5 is the contract of the
//! options and the report.
//!
//! - `args.rs`: the options (clap) and what depends on several of them;
//! - `acquire.rs`: the push loops (one writer, round robin, one thread per camera, plate);
//! - `frames.rs`: the frames pushed (`--input`, or the synthetic camera);
//! - `failure.rs`: why `record` failed (exit 2 or 1) and its messages;
//! - `report.rs`: the JSON report and the summary; `measure.rs` and `os.rs` what they
//!   measure.

mod acquire;
mod args;
mod failure;
mod frames;
mod measure;
mod os;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};
use zarrstream::remote::RemoteOptions;
use zarrstream::{
    AcquisitionOrder, ArrayConfig, ArraySpec, MemoryEstimate, Ome, Omero, Plate, Recording, Writer,
    WriterOptions, estimate_memory, estimate_memory_ome,
};

pub(crate) use args::Options;
use args::{OmeArgs, join};
use report::Measured;

use failure::{Failure, exists_message, io_failure};
use frames::{load_input, open_input, render_frames, save_frames, synthetic_camera};

/// Runs `zarrstream record` with the options clap parsed: exit status 0, 2 for invalid
/// options (what clap could not check), 1 for a failure while running.
pub(crate) fn main(mut opts: Options) -> ExitCode {
    os::ignore_sigxfsz();
    let outcome = match opts.resolve() {
        Ok(()) => run(&opts),
        Err(e) => Err(e.into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("zarrstream record: error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            // Our errors and the library's already include their cause in the message.
            eprintln!("zarrstream record: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(opts: &Options) -> Result<(), Failure> {
    let spec = build_spec(opts)?;
    // An object store is checked by the library; parts share their path.
    let local = !zarrstream::remote::is_url(&opts.out.to_string_lossy()) && opts.part_of.is_none();
    if opts.save_frames.is_none() && local {
        check_out_path(opts)?;
        if let Some(p) = &opts.report {
            check_report_path(p)?;
        }
    }

    let input = open_input(opts, &spec)?;
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
        let target = open_target(opts, &spec)?;
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
    let plate = plate_of(opts);
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
            render_frames(opts, &spec, camera_frames, first)?
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

    let estimate = memory_estimate(opts, &spec)?;
    if opts.estimate_memory && !opts.quiet {
        eprintln!("record: memory estimate {estimate}");
    }

    // The frames stay resident; what the acquisition adds on top is what matters.
    let peak_reset = os::reset_peak_rss();
    let baseline_rss_kib = os::proc_status_kib("VmRSS");

    let target = match early {
        Some(t) => t,
        None => open_target(opts, &spec)?,
    };
    let (run, stats, arrays) = match target {
        Target::One(mut writer) => {
            let order = acquisition_order(opts, &spec)?;
            let lead = &spec.shape()[..spec.rank() - 2];
            let run = acquire::one(
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
                acquire::plate(&rec, p, &pool, frames, spec.frames_per_step(), opts)?
            } else if opts.camera_threads {
                acquire::threads(&rec, &pool, frames, opts)?
            } else {
                acquire::round_robin(&rec, &pool, frames, opts)?
            };
            let stats = rec.finish()?;
            (run, stats.total, Some(stats.arrays))
        }
    };
    let seconds = run.started.elapsed().as_secs_f64();

    let peak_rss_kib = os::proc_status_kib("VmHWM");
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
    let doc = report::json(opts, &measured);
    if let Some(path) = &opts.report {
        let mut text = serde_json::to_string_pretty(&doc).map_err(|e| Failure::Run(Box::new(e)))?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(io_failure(format!("write report {}", path.display())))?;
    }
    if !opts.quiet {
        report::print_summary(opts, &measured);
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
pub(super) enum Target {
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
                .map(|a| r.array(a).map(|w| w.frames_pushed()))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// The key of array `k` with `--arrays`.
pub(super) fn array_key(k: usize) -> String {
    format!("cam{k}")
}

/// The plate of `--plate ROWSxCOLS --fields F` (rows A, B, …; columns 1, 2, …).
fn plate_of(o: &Options) -> Option<Plate> {
    o.plate
        .map(|(rows, columns)| Plate::grid(rows, columns).fields(o.fields))
}

/// What the store at `out` holds: measured on disk, or for an object store what the
/// writer stored (its staging directory is gone once everything is uploaded).
fn usage_of(out: &Path, stats: &zarrstream::Stats) -> Result<measure::DiskUsage, Failure> {
    if zarrstream::remote::is_url(&out.to_string_lossy()) {
        return Ok(measure::DiskUsage {
            bytes: stats.bytes_stored,
            allocated: stats.bytes_stored,
            files: stats.shards,
        });
    }
    measure::disk_usage(out).map_err(io_failure(format!("measure {}", out.display())))
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
        options.frame_meta(acquire::meta_spec())
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
                a = a.frame_meta(acquire::meta_spec());
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
