//! Latency under a paced camera.
//!
//! Method, all in one process:
//! 1. The maximum rate is measured closed loop (no pacing, `Backpressure::Block`): the
//!    median over `--runs` runs of frames written per second, from the first push until
//!    `finish` returned (data durable).
//! 2. The writer is then paced at 50 %, 80 % and 95 % of that rate like a camera: frame k
//!    is due at t0 + k / fps, and a camera cannot wait, so the paced runs use
//!    `Backpressure::Drop` (dropped frames are counted). Frame latency is open loop, from
//!    the frame's scheduled time until all its chunks are in their slots; push latency is
//!    the time spent inside `push`. Both come from the writer's latency summaries. With
//!    `--paced-runs N` each load is run N times and the run with the median frame p99 kept.
//!
//! Before every run the disk is left to settle (`sync` and one second), so a run does not
//! pay for the previous run's writeback and deletion.
//!
//! The report (stdout and `target/bench-out/latency.md`) gives, per load, target and
//! achieved fps, frames pushed/written/dropped, late pusher frames, and p50/p90/p99/p99.9/max
//! of both latencies, then the targets at 80 % (zero drops, push p99 ≤ 2 ms, frame p99.9
//! ≤ 20 ms) — printed, not asserted. The percentile curves are drawn to an SVG
//! (`target/bench-out/latency.svg` by default) on a "nines" axis, -log10(1 - q).
//!
//! `cargo bench --bench latency -- [--workload C1] [--codec lz4:1] [--sink auto|pwrite|mmap]
//! [--frames 1024] [--runs 3] [--paced-runs 3] [--threads 0] [--backpressure drop|block]
//! [--feed copy|zero-copy] [--svg PATH] [--md PATH]`
//!
//! `--feed copy` pushes with `push_bytes` (the frame copy is inside push latency);
//! `--feed zero-copy` fills a pool buffer first, as a camera driver's DMA would, and
//! hands it over with `push_buffer` (the fill counts in frame latency, not push latency).
//!
//! `$ZARRSTREAM_BENCH_DIR` moves the scratch store and the outputs off `target/bench-out`.

mod support;

use std::error::Error;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use zarrstream::{Backpressure, Codec, LatencySummary, SinkChoice, WriterOptions};

use support::{Args, Run, Workload};

/// Paced loads, as fractions of the measured maximum rate.
const LOADS: [f64; 3] = [0.5, 0.8, 0.95];
/// The load the targets are checked at.
const TARGET_LOAD: f64 = 0.8;
/// Distinct frames rendered; the runs cycle through them.
const RENDERED: usize = 64;
/// Quantiles reported besides the maximum.
const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The command-line options.
struct Config {
    workload: Workload,
    codec_name: String,
    codec: Codec,
    sink: SinkChoice,
    frames: usize,
    runs: usize,
    paced_runs: usize,
    threads: usize,
    backpressure: Backpressure,
    feed: support::Feed,
    svg: PathBuf,
    md: PathBuf,
}

impl Config {
    fn from_args(args: &Args) -> Config {
        let workload_name = args.get("--workload").unwrap_or("C1");
        let codec_name = args.get("--codec").unwrap_or("lz4:1").to_owned();
        let sink_name = args.get("--sink").unwrap_or("auto");
        let backpressure = match args.get("--backpressure").unwrap_or("drop") {
            "drop" => Backpressure::Drop,
            "block" => Backpressure::Block,
            other => panic!("--backpressure: expected drop or block, got {other:?}"),
        };
        Config {
            workload: Workload::by_name(workload_name)
                .unwrap_or_else(|| panic!("--workload: unknown {workload_name:?} (C1, C2)")),
            codec: codec_name
                .parse()
                .unwrap_or_else(|e| panic!("--codec: cannot parse {codec_name:?}: {e}")),
            codec_name,
            sink: sink_name
                .parse::<SinkChoice>()
                .unwrap_or_else(|e| panic!("--sink: {e}")),
            frames: args.num("--frames", 1024),
            runs: args.num("--runs", 3usize).max(1),
            paced_runs: args.num("--paced-runs", 3usize).max(1),
            threads: args.num("--threads", 0),
            backpressure,
            feed: match args.get("--feed").unwrap_or("copy") {
                "copy" => support::Feed::Copy,
                "zero-copy" => support::Feed::ZeroCopy,
                other => panic!("--feed: expected copy or zero-copy, got {other:?}"),
            },
            svg: args
                .get("--svg")
                .map_or_else(|| support::out_dir().join("latency.svg"), PathBuf::from),
            md: args
                .get("--md")
                .map_or_else(|| support::out_dir().join("latency.md"), PathBuf::from),
        }
    }

    fn options(&self, backpressure: Backpressure) -> WriterOptions {
        WriterOptions::default()
            .threads(self.threads)
            .sink(self.sink)
            .backpressure(backpressure)
    }

    fn backpressure_name(&self) -> &'static str {
        match self.backpressure {
            Backpressure::Drop => "drop",
            Backpressure::Block => "block",
            _ => "other",
        }
    }
}

/// One paced load and the run kept for it.
struct Paced {
    load: f64,
    target_fps: f64,
    run: Run,
}

impl Paced {
    fn achieved_fps(&self) -> f64 {
        self.run.stats.frames_written as f64 / self.run.seconds
    }
}

fn main() {
    let cfg = Config::from_args(&Args::parse());
    let started = Instant::now();
    let [h, w] = cfg.workload.frame;
    let frames = support::render(RENDERED, h, w);

    let samples = max_rates(&cfg, &frames);
    let max_fps = support::median(&mut samples.clone());
    eprintln!("max rate: {max_fps:.1} fps (median of {samples:.1?})");

    let paced: Vec<Paced> = LOADS
        .iter()
        .map(|&load| paced(&cfg, &frames, load, max_fps))
        .collect();

    let report = report(
        &cfg,
        max_fps,
        &samples,
        &paced,
        started.elapsed().as_secs_f64(),
    );
    println!("{report}");
    let md = &cfg.md;
    std::fs::write(md, &report).expect("write the latency report");
    plot(&cfg, max_fps, &paced).expect("draw the latency SVG");
    eprintln!("wrote {} and {}", md.display(), cfg.svg.display());
}

/// The scratch store of every run.
fn store() -> PathBuf {
    support::out_dir().join("latency.zarr")
}

/// Waits for the previous run's writeback and file deletion (`sync`, then a second), so
/// every run starts from a quiet disk rather than inheriting the last one's tail.
fn settle() {
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(Duration::from_secs(1));
}

/// Closed-loop rates (frames/s) of `--runs` unpaced runs under `Block`.
fn max_rates(cfg: &Config, frames: &[Vec<u8>]) -> Vec<f64> {
    (0..cfg.runs)
        .map(|i| {
            settle();
            let run = support::run_writer(
                &store(),
                cfg.workload.spec(cfg.codec),
                None,
                cfg.options(Backpressure::Block),
                frames,
                cfg.frames,
                0.0,
                cfg.feed,
            );
            let fps = run.stats.frames_written as f64 / run.seconds;
            eprintln!("closed loop {}/{}: {fps:.1} fps", i + 1, cfg.runs);
            fps
        })
        .collect()
}

/// `--paced-runs` runs at `load × max_fps`, keeping the one with the median frame p99.
fn paced(cfg: &Config, frames: &[Vec<u8>], load: f64, max_fps: f64) -> Paced {
    let target_fps = load * max_fps;
    let mut runs: Vec<Run> = (0..cfg.paced_runs)
        .map(|_| {
            settle();
            let run = support::run_writer(
                &store(),
                cfg.workload.spec(cfg.codec),
                None,
                cfg.options(cfg.backpressure),
                frames,
                cfg.frames,
                target_fps,
                cfg.feed,
            );
            eprintln!(
                "paced {:.0} % ({target_fps:.1} fps): dropped {}, frame p99.9 {:.2} ms",
                load * 100.0,
                run.stats.frames_dropped,
                ms(run.stats.frame_latency_ns.quantile(0.999))
            );
            run
        })
        .collect();
    runs.sort_by_key(|r| r.stats.frame_latency_ns.quantile(0.99));
    let run = runs.swap_remove(runs.len() / 2);
    Paced {
        load,
        target_fps,
        run,
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// `p50 / p90 / p99 / p99.9 / max` in milliseconds.
fn quantiles_ms(h: &LatencySummary) -> String {
    let mut parts: Vec<String> = QUANTILES
        .iter()
        .map(|&q| format!("{:.2}", ms(h.quantile(q))))
        .collect();
    parts.push(format!("{:.2}", ms(h.max)));
    parts.join(" / ")
}

/// The markdown report: setup, one table row per load, the targets at 80 %.
fn report(cfg: &Config, max_fps: f64, samples: &[f64], paced: &[Paced], secs: f64) -> String {
    let used_sink = paced.first().map_or("?", |p| p.run.stats.sink.as_str());
    let mut out = format!(
        "## Latency: {} {}, sink {} ({}), {} frames per run\n\n\
         - max rate (closed loop, block): **{max_fps:.1} fps** = {:.0} MiB/s, median of {samples:.1?}\n\
         - frames fed by {}\n\
         - paced runs: backpressure {}, threads {} (0 = one per core; the direct sink adds two write-behind threads to each), {} run(s) per load\n\
         - machine: {}\n\
         - benchmark time: {secs:.0} s\n\n",
        cfg.workload.name,
        cfg.codec_name,
        support::sink_name(cfg.sink),
        used_sink,
        cfg.frames,
        max_fps * cfg.workload.frame_bytes() as f64 / (1u64 << 20) as f64,
        cfg.feed.name(),
        cfg.backpressure_name(),
        cfg.threads,
        cfg.paced_runs,
        support::machine(),
    );
    out.push_str(
        "| load | target fps | achieved fps | pushed | written | dropped | late | \
         push ms p50 / p90 / p99 / p99.9 / max | frame ms p50 / p90 / p99 / p99.9 / max |\n\
         |---|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for p in paced {
        let s = &p.run.stats;
        out.push_str(&format!(
            "| {:.0} % | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} |\n",
            p.load * 100.0,
            p.target_fps,
            p.achieved_fps(),
            s.frames_pushed,
            s.frames_written,
            s.frames_dropped,
            p.run.late,
            quantiles_ms(&s.push_latency_ns),
            quantiles_ms(&s.frame_latency_ns),
        ));
    }
    out.push_str(
        "\nAchieved fps: frames written / (first push → `finish` returned). Late: frames the \
         pusher reached more than 1 ms after their scheduled time. Push: time inside `push` \
         (copy into a pool buffer, or the drop). Frame: scheduled time → all chunks in their \
         slots (open loop); dropped frames have none.\n",
    );
    if let Some(p) = paced.iter().find(|p| p.load == TARGET_LOAD) {
        out.push_str(&targets(p));
    }
    out
}

/// The targets at 80 % of the maximum rate, met or missed.
fn targets(p: &Paced) -> String {
    let s = &p.run.stats;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    let dropped = s.frames_dropped;
    let push_p99 = ms(s.push_latency_ns.quantile(0.99));
    let frame_p999 = ms(s.frame_latency_ns.quantile(0.999));
    format!(
        "\nTargets at {:.0} % of the maximum rate:\n\n\
         - dropped frames: {dropped} (target 0) — {}\n\
         - push p99: {push_p99:.2} ms (target ≤ 2 ms) — {}\n\
         - frame latency p99.9: {frame_p999:.2} ms (target ≤ 20 ms) — {}\n",
        p.load * 100.0,
        verdict(dropped == 0),
        verdict(push_p99 <= 2.0),
        verdict(frame_p999 <= 20.0),
    )
}

/// Percentile axis: x = -log10(1 - q), so 1, 2, 3, 4 are p90, p99, p99.9, p99.99.
const NINES_MAX: f64 = 4.0;
/// Where the maximum is drawn, right of p99.99.
const MAX_X: f64 = 4.5;

fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

fn nines_label(x: &f64) -> String {
    if (*x - MAX_X).abs() < 1e-9 {
        return "max".into();
    }
    let pct = 100.0 * (1.0 - 10f64.powf(-x));
    let s = format!("{pct:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The percentile axis with ticks at p50, p90, p99, p99.9, p99.99 and max only.
struct NinesAxis;

impl Ranged for NinesAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, x: &f64, (from, to): (i32, i32)) -> i32 {
        let span = MAX_X + 0.1;
        from + ((to - from) as f64 * x / span).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            vec![nines(0.5), 1.0, 2.0, 3.0, 4.0, MAX_X]
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..MAX_X + 0.1
    }
}

/// The percentile curve of `h` in (nines, ms), ending at the maximum; values are
/// clamped to `floor_ms` for the log axis.
fn curve(h: &LatencySummary, floor_ms: f64) -> Vec<(f64, f64)> {
    let steps = 200;
    let mut points: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let x = NINES_MAX * i as f64 / steps as f64;
            let q = 1.0 - 10f64.powf(-x);
            (x, ms(h.quantile(q)).max(floor_ms))
        })
        .collect();
    points.push((MAX_X, ms(h.max).max(floor_ms)));
    points
}

/// A log-axis range covering every curve, in whole decades.
fn y_range(hs: &[&LatencySummary]) -> (f64, f64) {
    let lo = hs
        .iter()
        .map(|h| ms(h.min))
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let hi = hs.iter().map(|h| ms(h.max)).fold(20.0, f64::max);
    (
        10f64.powf(lo.log10().floor()),
        10f64.powf(hi.log10().ceil()),
    )
}

const COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// Two panels, frame latency and push latency, one curve per load, with the target.
fn plot(cfg: &Config, max_fps: f64, paced: &[Paced]) -> Result<(), Box<dyn Error>> {
    if let Some(dir) = cfg.svg.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(&cfg.svg, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let sink = paced.first().map_or("?", |p| p.run.stats.sink.as_str());
    let root = root.titled(
        &format!(
            "{} {}, sink {sink}, {}, max {max_fps:.0} fps, backpressure {}",
            cfg.workload.name,
            cfg.codec_name,
            cfg.feed.name(),
            cfg.backpressure_name()
        ),
        ("sans-serif", 20),
    )?;
    let (left, right) = root.split_horizontally(600);
    let frame: Vec<_> = paced
        .iter()
        .map(|p| &p.run.stats.frame_latency_ns)
        .collect();
    let push: Vec<_> = paced.iter().map(|p| &p.run.stats.push_latency_ns).collect();
    panel(
        &left,
        "frame latency (from scheduled time)",
        paced,
        &frame,
        (20.0, "p99.9"),
    )?;
    panel(&right, "push latency", paced, &push, (2.0, "p99"))?;
    root.present()?;
    Ok(())
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    paced: &[Paced],
    hs: &[&LatencySummary],
    (target_ms, target_q): (f64, &str),
) -> Result<(), Box<dyn Error>> {
    let (lo, hi) = y_range(hs);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(NinesAxis, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("ms")
        .x_label_formatter(&nines_label)
        .y_label_formatter(&|y| format!("{y}"))
        .draw()?;
    for (i, (p, h)) in paced.iter().zip(hs).enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(curve(h, lo), color.stroke_width(2)))?
            .label(format!("{:.0} % ({:.0} fps)", p.load * 100.0, p.target_fps))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    let target = DashedLineSeries::new([(0.0, target_ms), (MAX_X, target_ms)], 6, 4, BLACK.into());
    chart
        .draw_series(target)?
        .label(format!("target {target_q} ≤ {target_ms} ms at 80 %"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}
