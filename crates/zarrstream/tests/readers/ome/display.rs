//! Display windows from the data: each `omero` channel's `window.start`/`end` follow the
//! frames recorded (robust to hot pixels and to frames that never arrived), are
//! republished while recording, and a window the caller gives is kept as given.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use zarrstream::{
    ArraySpec, Codec, DataType, Ome, Omero, OmeroChannel, Window, Writer, WriterOptions,
};

use super::{options, read_json};

const H: usize = 100;
const W: usize = 100;

/// Channel `c`'s frame: background `base + 0..9`, a bright square `bright` covering 9 %
/// of it at rows and columns 40..70, and two hot pixels at 65000.
fn frame(base: u16, bright: u16, k: usize) -> Vec<u16> {
    let mut f: Vec<u16> = (0..H * W)
        .map(|i| base + ((i * 7 + k) % 10) as u16)
        .collect();
    for y in 40..70 {
        for x in 40..70 {
            f[y * W + x] = bright;
        }
    }
    f[3] = 65_000;
    f[H * W - 5] = 65_000;
    f
}

/// Channel 0: background 100, square 2000; channel 1: background 1000, square 30000.
const CHANNELS: [(u16, u16); 2] = [(100, 2000), (1000, 30_000)];

fn windows(image: &Path) -> Vec<Value> {
    let group = read_json(&image.join("zarr.json"));
    let chs = group["attributes"]["ome"]["omero"]["channels"]
        .as_array()
        .expect("omero channels")
        .clone();
    chs.iter().map(|c| c["window"].clone()).collect()
}

fn assert_from_data(w: &Value, (base, bright): (u16, u16), what: &str) {
    let start = w["start"].as_f64().expect("start");
    let end = w["end"].as_f64().expect("end");
    let base = f64::from(base);
    assert!(
        (base..base + 10.0).contains(&start),
        "{what}: start {start} is not the background ({w})"
    );
    assert_eq!(end, f64::from(bright), "{what}: end ({w})");
    assert_eq!(
        (w["min"].as_f64(), w["max"].as_f64()),
        (Some(0.0), Some(65535.0))
    );
}

fn spec(chunk_lead: [u64; 2], shard_t: u64) -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 2, H as u64, W as u64])
        .chunk_shape([chunk_lead[0], chunk_lead[1], 64, 64])
        .shard_shape([shard_t, 2, 128, 128])
        .dimension_names(["t", "c", "y", "x"])
        .dtype(DataType::UInt16)
        .codec(Codec::blosc_lz4(1))
        .build()
        .expect("spec")
}

/// Frames of one chunk (shallow) and of staging groups spanning both channels and two
/// time points, with padding at the frame's edges (100 is not a multiple of 64) and
/// frames skipped (their place in the group is fill, 0, which must not set the window).
#[test]
fn windows_follow_each_channels_data_whatever_the_chunking() {
    let dir = tempfile::tempdir().expect("tmp");
    for (name, lead) in [("shallow", [1, 1]), ("staged", [2, 2])] {
        let path = dir.path().join(format!("{name}.ome.zarr"));
        let ome = Ome::new().channels(["A", "B"]).omero(Omero::Auto);
        let mut w = Writer::create_ome(&path, spec(lead, 4), &ome, options()).expect("create");
        for t in 0..12usize {
            for (c, &(base, bright)) in CHANNELS.iter().enumerate() {
                if t % 5 == 4 && c == 1 {
                    w.skip().expect("skip");
                } else {
                    assert!(w.push(&frame(base, bright, t)).expect("push").is_accepted());
                }
            }
        }
        w.finish().expect("finish");
        let ws = windows(&path);
        assert_eq!(ws.len(), 2);
        for (c, w) in ws.iter().enumerate() {
            assert_from_data(w, CHANNELS[c], &format!("{name}, channel {c}"));
        }
    }
}

fn shape0(level: &Path) -> u64 {
    std::fs::read(level.join("zarr.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|d| d["shape"][0].as_u64())
        .unwrap_or(0)
}

/// A viewer that opens the image while it is recorded finds windows from the data as
/// soon as the first shard is published, not the type's range.
#[test]
fn windows_are_published_with_the_first_shard() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("live.ome.zarr");
    let ome = Ome::new().channels(["A", "B"]).omero(Omero::Auto);
    let mut w = Writer::create_ome(&path, spec([1, 1], 2), &ome, options()).expect("create");
    let before = windows(&path);
    assert_eq!(
        (before[0]["start"].as_f64(), before[0]["end"].as_f64()),
        (Some(0.0), Some(65535.0)),
        "no frame yet: the type's range"
    );
    for t in 0..2 {
        for &(base, bright) in &CHANNELS {
            assert!(w.push(&frame(base, bright, t)).expect("push").is_accepted());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while shape0(&path.join("0")) < 2 {
        assert!(
            Instant::now() < deadline,
            "the first shard was never published"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The group is republished right after the level's document.
    let deadline = Instant::now() + Duration::from_secs(5);
    let live = loop {
        let ws = windows(&path);
        if ws[0]["end"].as_f64() != Some(65535.0) || Instant::now() > deadline {
            break ws;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    for (c, w) in live.iter().enumerate() {
        assert_from_data(w, CHANNELS[c], &format!("live, channel {c}"));
    }
    // The caller's group attributes and the windows do not overwrite each other.
    w.set_group_attribute("experiment", Value::from("live"))
        .expect("attribute");
    for t in 2..6 {
        for &(base, bright) in &CHANNELS {
            assert!(w.push(&frame(base, bright, t)).expect("push").is_accepted());
        }
    }
    w.finish().expect("finish");
    let group = read_json(&path.join("zarr.json"));
    assert_eq!(group["attributes"]["experiment"], "live");
    assert_from_data(&windows(&path)[1], CHANNELS[1], "after finish");
}

/// A window given (per channel, or one for all) is written as given; a channel without
/// one still follows the data.
#[test]
fn a_given_window_is_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let given = Window {
        min: 0.0,
        max: 65535.0,
        start: 500.0,
        end: 600.0,
    };
    let cases = [
        (
            "per-channel",
            Omero::Channels(vec![
                OmeroChannel::new("A", "00FF00", given),
                OmeroChannel::from_data("B", "FF00FF"),
            ]),
        ),
        ("all", Omero::AutoWindow(given)),
    ];
    for (name, omero) in cases {
        let path = dir.path().join(format!("{name}.ome.zarr"));
        let ome = Ome::new().channels(["A", "B"]).omero(omero);
        let mut w = Writer::create_ome(&path, spec([1, 1], 2), &ome, options()).expect("create");
        for t in 0..4 {
            for &(base, bright) in &CHANNELS {
                assert!(w.push(&frame(base, bright, t)).expect("push").is_accepted());
            }
        }
        w.finish().expect("finish");
        let ws = windows(&path);
        let as_given = |w: &Value| {
            (
                w["min"].as_f64(),
                w["max"].as_f64(),
                w["start"].as_f64(),
                w["end"].as_f64(),
            )
        };
        assert_eq!(
            as_given(&ws[0]),
            (Some(0.0), Some(65535.0), Some(500.0), Some(600.0)),
            "{name}"
        );
        if name == "all" {
            assert_eq!(as_given(&ws[1]), as_given(&ws[0]), "{name}");
        } else {
            assert_from_data(&ws[1], CHANNELS[1], name);
        }
    }
}

/// Floating-point data has no type range: the slider range takes the data's window.
#[test]
fn float_windows_widen_the_slider_range() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("float.ome.zarr");
    let spec = ArraySpec::builder()
        .shape([0, H as u64, W as u64])
        .chunk_shape([1, 64, 64])
        .shard_shape([4, 128, 128])
        .dtype(DataType::Float32)
        .build()
        .expect("spec");
    let ome = Ome::new().omero(Omero::Auto);
    let mut w =
        Writer::create_ome(&path, spec, &ome, WriterOptions::default().threads(1)).expect("create");
    for t in 0..4 {
        let f: Vec<f32> = frame(100, 2000, t)
            .iter()
            .map(|&v| f32::from(v) * 0.5)
            .collect();
        assert!(w.push(&f).expect("push").is_accepted());
    }
    w.finish().expect("finish");
    let ws = windows(&path);
    let (start, end) = (
        ws[0]["start"].as_f64().unwrap(),
        ws[0]["end"].as_f64().unwrap(),
    );
    assert!((50.0..55.0).contains(&start), "{start}");
    assert_eq!(end, 1000.0);
    assert_eq!(ws[0]["min"].as_f64(), Some(0.0));
    assert_eq!(ws[0]["max"].as_f64(), Some(1000.0));
}

/// A resumed image widens the window of its earlier frames with the new ones' (the
/// earlier frames are still there to be seen).
#[test]
fn a_resumed_image_widens_the_earlier_window() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("resumed.ome.zarr");
    let ome = Ome::new().channels(["A", "B"]).omero(Omero::Auto);
    let runs = [
        (options(), (100, 2000)),
        (options().resume(true), (1000, 5000)),
    ];
    for (opts, (base, bright)) in runs {
        let mut w = Writer::create_ome(&path, spec([1, 1], 2), &ome, opts).expect("create");
        for t in 0..4 {
            for _ in 0..2 {
                assert!(w.push(&frame(base, bright, t)).expect("push").is_accepted());
            }
        }
        w.finish().expect("finish");
    }
    let ws = windows(&path);
    for w in &ws {
        let (start, end) = (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
        assert!(
            (100.0..110.0).contains(&start),
            "start {start}: the first run's background"
        );
        assert_eq!(end, 5000.0, "the second run's square");
    }
}
