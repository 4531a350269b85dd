//! OME-Zarr 0.5 image output: the group and level-0 metadata we
//! expect (axis order, names, types, units, scales, `dimension_names`), typed errors for
//! bad options, the writer lock and overwrite with the array at `<store>/0`, recovery of
//! the level array, and — in the pinned Python environment — validation with
//! `ome-zarr-models`, reading with the `ome-zarr` reader and zarr-python
//! (`tests/interop/ome_check.py`); reads while `zarrstream record --ome` records are the
//! CLI's `tests/record_ome.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use zarrstream::{
    ArraySpec, Codec, DataType, Downsample, Error, Levels, Ome, OmeError, Omero, SpaceUnit,
    TimeUnit, Writer, WriterOptions,
};

use zarrstream_testkit::python as pyenv;

/// One test image: shape (axis 0 = frames' steps), dimension names (or none) and options.
struct Image {
    name: &'static str,
    shape: Vec<u64>,
    names: Option<Vec<&'static str>>,
    ome: Ome,
    axes: Vec<(&'static str, &'static str, Option<&'static str>)>,
    scale: Vec<f64>,
    /// Frames `k` with `k % n == n - 1` are dropped (`Writer::skip`): fill at every level.
    drop_every: Option<u64>,
    /// Inner chunk edge in y and x.
    chunk: u64,
    codec: Codec,
}

mod display;

fn images() -> Vec<Image> {
    vec![
        Image {
            name: "r3_tyx",
            shape: vec![0, 48, 40],
            names: None,
            ome: Ome::new()
                .pixel_size(0.65, 0.5)
                .frame_interval(Duration::from_millis(40)),
            axes: vec![
                ("t", "time", Some("millisecond")),
                ("y", "space", Some("micrometer")),
                ("x", "space", Some("micrometer")),
            ],
            scale: vec![40.0, 0.65, 0.5],
            drop_every: None,
            chunk: 16,
            codec: Codec::blosc_lz4(1),
        },
        Image {
            name: "r4_tzyx",
            shape: vec![0, 3, 32, 32],
            names: None,
            ome: Ome::new()
                .pixel_size(100.0, 100.0)
                .space_unit(SpaceUnit::Nanometer)
                .z_step(250.0)
                .frame_interval(Duration::from_secs(2))
                .time_unit(TimeUnit::Second),
            axes: vec![
                ("t", "time", Some("second")),
                ("z", "space", Some("nanometer")),
                ("y", "space", Some("nanometer")),
                ("x", "space", Some("nanometer")),
            ],
            scale: vec![2.0, 250.0, 100.0, 100.0],
            drop_every: None,
            chunk: 16,
            codec: Codec::blosc_lz4(1),
        },
        Image {
            name: "r4_tcyx",
            shape: vec![0, 2, 32, 48],
            names: Some(vec!["t", "c", "y", "x"]),
            ome: Ome::new().channels(["GFP", "mCherry"]).omero(Omero::Auto),
            axes: vec![
                ("t", "time", None),
                ("c", "channel", None),
                ("y", "space", None),
                ("x", "space", None),
            ],
            scale: vec![1.0, 1.0, 1.0, 1.0],
            drop_every: None,
            chunk: 16,
            codec: Codec::blosc_lz4(1),
        },
        Image {
            name: "r5_tczyx",
            shape: vec![0, 2, 3, 32, 32],
            names: None,
            ome: Ome::new()
                .pixel_size(0.2, 0.2)
                .z_step(1.5)
                .frame_interval(Duration::from_millis(500))
                .channels(["a", "b"])
                .omero(Omero::Auto),
            axes: vec![
                ("t", "time", Some("millisecond")),
                ("c", "channel", None),
                ("z", "space", Some("micrometer")),
                ("y", "space", Some("micrometer")),
                ("x", "space", Some("micrometer")),
            ],
            scale: vec![500.0, 1.0, 1.5, 0.2, 0.2],
            drop_every: None,
            chunk: 16,
            codec: Codec::blosc_lz4(1),
        },
    ]
}

/// Images with a pyramid: odd and even sizes, every method, levels given and automatic.
fn pyramid_images() -> Vec<Image> {
    let mut v = images();
    let odd = Image {
        name: "p3_odd_mean",
        shape: vec![0, 45, 39],
        names: None,
        ome: Ome::new().pixel_size(0.65, 0.5).levels(Levels::Count(4)),
        axes: vec![("t", "", None), ("y", "", None), ("x", "", None)],
        scale: vec![1.0, 0.65, 0.5],
        drop_every: Some(4),
        chunk: 16,
        codec: Codec::blosc_lz4(1),
    };
    v[0].name = "p3_tyx_max";
    v[0].ome = v[0]
        .ome
        .clone()
        .levels(Levels::Count(3))
        .downsample(Downsample::Max);
    v[1].name = "p4_tzyx_decimate_auto";
    v[1].ome = v[1]
        .ome
        .clone()
        .levels(Levels::Auto)
        .downsample(Downsample::Decimate);
    v[2].name = "p4_tcyx_min_drops";
    v[2].drop_every = Some(3);
    v[2].ome = v[2]
        .ome
        .clone()
        .levels(Levels::Count(3))
        .downsample(Downsample::Min);
    v[3].name = "p5_tczyx_mean";
    v[3].ome = v[3].ome.clone().levels(Levels::Count(2));
    v.push(odd);
    // z halved too: 5 planes (odd: the last one of each stack is reduced alone), and
    // with the max of 2x2x2 blocks on a 5-D image.
    let z_mean = Image {
        name: "p4_tzyx_mean_z",
        shape: vec![0, 5, 20, 18],
        names: None,
        ome: Ome::new()
            .pixel_size(0.5, 0.5)
            .z_step(2.0)
            .levels(Levels::Count(3))
            .downsample_z(true),
        axes: vec![
            ("t", "", None),
            ("z", "", None),
            ("y", "", None),
            ("x", "", None),
        ],
        scale: vec![1.0, 2.0, 0.5, 0.5],
        drop_every: None,
        chunk: 16,
        codec: Codec::blosc_lz4(1),
    };
    let z_max = Image {
        name: "p5_tczyx_max_z",
        shape: vec![0, 2, 4, 16, 16],
        names: None,
        ome: Ome::new()
            .channels(["a", "b"])
            .levels(Levels::Count(3))
            .downsample(Downsample::Max)
            .downsample_z(true),
        axes: vec![
            ("t", "", None),
            ("c", "", None),
            ("z", "", None),
            ("y", "", None),
            ("x", "", None),
        ],
        scale: vec![1.0, 1.0, 1.0, 1.0, 1.0],
        drop_every: None,
        chunk: 16,
        codec: Codec::blosc_lz4(1),
    };
    v.push(z_mean);
    v.push(z_max);
    // Tiles of 250 x 250 (two blosc blocks of 64 KiB, the first ending inside row 131)
    // whose level 1 the encoding workers reduce as blosc reads each block; partial
    // tiles at the right and bottom edges.
    v.push(Image {
        name: "p3_big_tiles_mean",
        shape: vec![0, 600, 530],
        names: None,
        ome: Ome::new().levels(Levels::Count(4)),
        axes: vec![("t", "", None), ("y", "", None), ("x", "", None)],
        scale: vec![1.0, 1.0, 1.0],
        drop_every: None,
        chunk: 250,
        codec: Codec::blosc_lz4(1),
    });
    // The same with zstd, which reports no blocks: each tile is reduced after encoding.
    v.push(Image {
        name: "p3_big_tiles_zstd_max",
        shape: vec![0, 600, 530],
        names: None,
        ome: Ome::new()
            .levels(Levels::Count(3))
            .downsample(Downsample::Max),
        axes: vec![("t", "", None), ("y", "", None), ("x", "", None)],
        scale: vec![1.0, 1.0, 1.0],
        drop_every: None,
        chunk: 250,
        codec: Codec::zstd(1),
    });
    v
}

const STEPS: u64 = 5;

impl Image {
    fn rank(&self) -> usize {
        self.shape.len()
    }
    fn spec(&self) -> ArraySpec {
        let rank = self.rank();
        let mut chunk = vec![1; rank];
        chunk[rank - 2] = self.chunk;
        chunk[rank - 1] = self.chunk;
        let mut shard = self.shape.clone();
        shard[0] = 2;
        for (s, d) in shard.iter_mut().zip(&self.shape).skip(rank - 2) {
            *s = d.div_ceil(self.chunk) * self.chunk;
        }
        let mut b = ArraySpec::builder()
            .codec(self.codec)
            .shape(&self.shape)
            .chunk_shape(&chunk)
            .shard_shape(&shard);
        if let Some(n) = &self.names {
            b = b.dimension_names(n.iter().copied());
        }
        b.build().expect("spec")
    }
    fn frames(&self) -> u64 {
        STEPS * self.shape[1..self.rank() - 2].iter().product::<u64>()
    }
    fn plane(&self) -> usize {
        (self.shape[self.rank() - 2] * self.shape[self.rank() - 1]) as usize
    }
    /// Every frame in order: the expected level-0 data, C order, u16.
    fn data(&self) -> Vec<u16> {
        let n = self.plane();
        (0..self.frames())
            .flat_map(|k| {
                let kept = !self.dropped(k);
                (0..n).map(move |i| {
                    if kept {
                        (k as usize * 7919 + i * 13) as u16
                    } else {
                        0
                    }
                })
            })
            .collect()
    }
    fn dropped(&self, k: u64) -> bool {
        self.drop_every.is_some_and(|n| k % n == n - 1)
    }
    fn write(&self, root: &Path, options: WriterOptions) -> PathBuf {
        let path = root.join(format!("{}.ome.zarr", self.name));
        let mut w = Writer::create_ome(&path, self.spec(), &self.ome, options).expect("create");
        for (k, frame) in (0..).zip(self.data().chunks(self.plane())) {
            if self.dropped(k) {
                w.skip().expect("skip");
            } else {
                assert!(w.push(frame).expect("push").is_accepted());
            }
        }
        w.finish().expect("finish");
        path
    }
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("json")
}

fn options() -> WriterOptions {
    WriterOptions::default().threads(2).pin_threads(false)
}

#[test]
fn group_and_level0_metadata_follow_ngff_0_5() {
    let dir = tempfile::tempdir().expect("tmp");
    for im in images() {
        let path = im.write(dir.path(), options());
        let group = read_json(&path.join("zarr.json"));
        assert_eq!(group["zarr_format"], 3, "{}", im.name);
        assert_eq!(group["node_type"], "group");
        let keys: Vec<&String> = group.as_object().expect("object").keys().collect();
        assert_eq!(
            keys.len(),
            3,
            "only zarr_format, node_type, attributes: {keys:?}"
        );
        let ome = &group["attributes"]["ome"];
        assert_eq!(ome["version"], "0.5");
        let ms = ome["multiscales"].as_array().expect("multiscales");
        assert_eq!(ms.len(), 1);
        let ms = &ms[0];
        for key in ["name", "type", "metadata"] {
            assert!(!ms[key].is_null(), "{}: multiscale {key}", im.name);
        }
        // Axes: names, types, units, and the order time -> channel -> space.
        let axes = ms["axes"].as_array().expect("axes");
        let got: Vec<(&str, &str, Option<&str>)> = axes
            .iter()
            .map(|a| {
                (
                    a["name"].as_str().expect("name"),
                    a["type"].as_str().expect("type"),
                    a["unit"].as_str(),
                )
            })
            .collect();
        assert_eq!(got, im.axes, "{}", im.name);
        let order = |t: &str| ["time", "channel", "space"].iter().position(|x| *x == t);
        assert!(
            got.windows(2).all(|w| order(w[0].1) <= order(w[1].1)),
            "{}: axis order {got:?}",
            im.name
        );
        // One dataset, level 0, exactly one scale of the physical pixel size.
        let ds = ms["datasets"].as_array().expect("datasets");
        assert_eq!(ds.len(), 1);
        assert_eq!(ds[0]["path"], "0");
        assert_eq!(
            ds[0]["coordinateTransformations"],
            json!([{"type": "scale", "scale": im.scale}]),
            "{}",
            im.name
        );
        // The level array: sharded, dimension_names = axis names, progress attributes.
        let level = read_json(&path.join("0/zarr.json"));
        assert_eq!(level["node_type"], "array");
        let names: Vec<&str> = im.axes.iter().map(|a| a.0).collect();
        assert_eq!(level["dimension_names"], json!(names), "{}", im.name);
        assert_eq!(level["codecs"][0]["name"], "sharding_indexed");
        assert_eq!(level["shape"][0], STEPS);
        assert_eq!(level["attributes"]["zarrstream"]["state"], "finished");
        assert!(!path.join("0").join(".zarrstream-partial").exists());
        if im.name == "r4_tcyx" {
            let ch = &ome["omero"]["channels"];
            assert_eq!(ch[0]["label"], "GFP");
            assert_eq!(ch[1]["label"], "mCherry");
        }
    }
}

#[test]
fn pyramid_levels_are_listed_with_scales_and_capped_chunks() {
    let dir = tempfile::tempdir().expect("tmp");
    for im in pyramid_images() {
        let path = im.write(dir.path(), options());
        let spec = im.spec();
        let n = im.ome.level_count(&spec).expect("levels");
        let group = read_json(&path.join("zarr.json"));
        let ms = &group["attributes"]["ome"]["multiscales"][0];
        let method = im.ome.downsample_method();
        assert_eq!(ms["type"], method.as_str(), "{}", im.name);
        let ds = ms["datasets"].as_array().expect("datasets");
        assert_eq!(ds.len(), n, "{}", im.name);
        let rank = im.rank();
        // The axes each level halves: y, x, and z when asked.
        let z = im.ome.halves_z().then_some(rank - 3);
        let halved = |i: usize| i + 2 >= rank || Some(i) == z;
        let mut shape = im.shape.clone();
        shape[0] = STEPS;
        for (k, d) in ds.iter().enumerate() {
            assert_eq!(d["path"], k.to_string());
            let f = (1u64 << k) as f64;
            let scale: Vec<f64> = (im.scale.iter().enumerate())
                .map(|(i, s)| if halved(i) { s * f } else { *s })
                .collect();
            let t = &d["coordinateTransformations"];
            assert_eq!(
                t[0],
                json!({"type": "scale", "scale": scale}),
                "{}",
                im.name
            );
            if k > 0 && method != Downsample::Decimate {
                let shift: Vec<f64> = (im.scale.iter().enumerate())
                    .map(|(i, s)| if halved(i) { s * (f - 1.0) / 2.0 } else { 0.0 })
                    .collect();
                assert_eq!(t[1], json!({"type": "translation", "translation": shift}));
            } else {
                assert_eq!(t.as_array().map(Vec::len), Some(1), "{}", im.name);
            }
            let level = read_json(&path.join(k.to_string()).join("zarr.json"));
            assert_eq!(level["shape"], json!(shape), "{} level {k}", im.name);
            let inner = &level["codecs"][0]["configuration"]["chunk_shape"];
            let (h, w) = (shape[rank - 2], shape[rank - 1]);
            let c = im.chunk;
            assert_eq!(inner[rank - 2], json!(h.min(c)), "{} level {k}", im.name);
            assert_eq!(inner[rank - 1], json!(w.min(c)), "{} level {k}", im.name);
            assert_eq!(level["attributes"]["zarrstream"]["state"], "finished");
            // A frame dropped at level 0 is dropped at every level (no z pairs here).
            let dropped = (0..im.frames()).filter(|&f| im.dropped(f)).count() as u64;
            let progress = &level["attributes"]["zarrstream"];
            assert_eq!(progress["frames_dropped"], dropped, "{} level {k}", im.name);
            assert_eq!(
                progress["frames_committed"],
                shape[..rank - 2].iter().product::<u64>() - dropped,
                "{} level {k}",
                im.name
            );
            assert!(
                !path
                    .join(k.to_string())
                    .join(".zarrstream-partial")
                    .exists()
            );
            for (i, s) in shape.iter_mut().enumerate() {
                if halved(i) {
                    *s = s.div_ceil(2);
                }
            }
        }
        if method == Downsample::Decimate {
            // Auto: the last level is the first that fits in one 16 x 16 inner chunk.
            assert_eq!(n, 2, "{}: 32x32 in 16x16 chunks", im.name);
        }
    }
}

#[test]
fn bad_options_are_typed_errors_and_leave_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("bad.ome.zarr");
    let ims = images();
    let r5 = &ims[3];
    let cases = [
        (
            Ome::new().channels(["only one"]),
            OmeError::ChannelCount {
                field: "channels",
                got: 1,
                axis_size: 2,
            },
        ),
        (
            Ome::new().pixel_size(-0.1, 0.1),
            OmeError::NotPositive {
                field: "pixel_size (y)",
                value: -0.1,
            },
        ),
    ];
    for (ome, want) in cases {
        match Writer::create_ome(&path, r5.spec(), &ome, options()) {
            Err(Error::Ome(e)) => assert_eq!(e, want),
            other => panic!("expected {want:?}, got {:?}", other.map(|_| ())),
        }
        assert!(!path.exists(), "a refused image leaves nothing on disk");
    }
    // The array's own dimension names must not contradict the axes.
    let spec = ArraySpec::builder()
        .shape([0, 2, 16, 16])
        .chunk_shape([1, 1, 16, 16])
        .shard_shape([1, 1, 16, 16])
        .dimension_names(["t", "z", "y", "x"])
        .build()
        .expect("spec");
    let err = Writer::create_ome(&path, spec, &Ome::new().channels(["a", "b"]), options());
    assert!(matches!(
        err,
        Err(Error::Ome(OmeError::NoAxis {
            field: "channels",
            ..
        }))
    ));
}

/// A level below 0 that fails (here its temporary directory vanishes, so it cannot
/// reserve its next shard) refuses the caller's next frame with that level's error, as a
/// full disk does: level 0 still finishes and publishes every frame it accepted, and the
/// level publishes what it had finished; both read back with `zarrs`.
#[test]
// Linux only: the level fails because its temporary directory is removed under it, which
// Windows refuses while the writer has files open there.
#[cfg(target_os = "linux")]
fn a_failing_level_refuses_the_next_frame_and_level_0_keeps_its_frames() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("failing.ome.zarr");
    let spec = ArraySpec::builder()
        .shape([0, 64, 64])
        .chunk_shape([1, 32, 32])
        .shard_shape([2, 64, 64])
        .build()
        .expect("spec");
    let ome = Ome::new().levels(Levels::Count(2));
    let mut w = Writer::create_ome(&path, spec, &ome, options()).expect("create");
    let frame = |k: u64| -> Vec<u16> { (0..64 * 64).map(|i| (k * 1000 + i) as u16).collect() };
    for k in 0..6 {
        assert!(
            w.push(&frame(k))
                .expect("push before the failure")
                .is_accepted()
        );
    }
    // Once level 1 has published its first shard rows (removing the directory destroys
    // the shards it is still filling).
    let published = || read_json(&path.join("1/zarr.json"))["shape"][0].as_u64();
    let t = std::time::Instant::now();
    while published() < Some(4) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "level 1 never published"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_dir_all(path.join("1/.zarrstream-partial")).expect("remove");
    let mut accepted = 6;
    let error = loop {
        assert!(
            accepted < 400,
            "the level's failure never reached the caller"
        );
        match w.push(&frame(accepted)) {
            Ok(o) if o.is_accepted() => accepted += 1,
            Ok(_) => panic!("dropped under Block"),
            Err(e) => break e,
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(
        matches!(&error, Error::Io { path: p, .. } if p.starts_with(path.join("1"))),
        "the level's own error, naming its file: {error:?}"
    );
    assert!(matches!(w.push(&frame(accepted)), Err(Error::Closed)));
    let level0 = read_json(&path.join("0/zarr.json"));
    assert_eq!(
        level0["shape"],
        json!([accepted, 64, 64]),
        "every accepted frame"
    );
    assert_eq!(level0["attributes"]["zarrstream"]["state"], "aborted");
    let read = |level: &str, rows: u64, side: u64| -> Vec<u16> {
        let store = std::sync::Arc::new(
            zarrs::filesystem::FilesystemStore::new(path.join(level)).expect("store"),
        );
        let array = zarrs::array::Array::open(store, "/").expect("zarrs opens the level");
        let all = zarrs::array::ArraySubset::new_with_shape(vec![rows, side, side]);
        array
            .retrieve_array_subset::<Vec<u16>>(&all)
            .expect("zarrs reads the level")
    };
    let want: Vec<u16> = (0..accepted).flat_map(frame).collect();
    assert_eq!(read("0", accepted, 64), want, "level 0 reads back");
    let level1 = read_json(&path.join("1/zarr.json"));
    let rows = level1["shape"][0].as_u64().expect("level 1 shape");
    assert!(
        (4..accepted).contains(&rows),
        "level 1 keeps the {rows} frames it had published"
    );
    assert_eq!(read("1", rows, 32).len() as u64, rows * 32 * 32);
}

#[test]
fn lock_and_overwrite_refuse_a_live_image() {
    let dir = tempfile::tempdir().expect("tmp");
    let ims = images();
    let im = &ims[0];
    let path = dir.path().join("live.ome.zarr");
    let mut w = Writer::create_ome(&path, im.spec(), &im.ome, options()).expect("create");
    let _ = w.push(&im.data()[..im.plane()]).expect("push");
    assert!(path.join("0/.zarrstream-partial/writer.lock").exists());
    // Without overwrite: exists. With overwrite: locked (as image and as plain array).
    assert!(matches!(
        Writer::create_ome(&path, im.spec(), &im.ome, options()),
        Err(Error::Exists { .. })
    ));
    let over = options().overwrite(true);
    assert!(matches!(
        Writer::create_ome(&path, im.spec(), &im.ome, over.clone()),
        Err(Error::Locked { .. })
    ));
    assert!(matches!(
        Writer::create(&path, im.spec(), over.clone()),
        Err(Error::Locked { .. })
    ));
    // Recovery of the level array is refused while the writer lives.
    assert!(zarrstream::recover::recover_store(path.join("0")).is_err());
    assert!(
        path.join("zarr.json").exists(),
        "the live image is untouched"
    );
    w.finish().expect("finish");
    // Finished: overwrite replaces it.
    Writer::create_ome(&path, im.spec(), &im.ome, over)
        .expect("overwrite a finished image")
        .finish()
        .expect("finish");
    assert_eq!(
        read_json(&path.join("0/zarr.json"))["shape"][0],
        0,
        "a fresh image"
    );
}

// ---------------------------------------------------------------- Python readers

/// What a skipped reader check is called in the loud skip message.
const READERS: &str = "OME-ZARR READER TEST";

fn entry(im: &Image, path: &Path, dir: &Path) -> Value {
    let expected = dir.join(format!("{}.expected.raw", im.name));
    let bytes: Vec<u8> = im.data().iter().flat_map(|v| v.to_le_bytes()).collect();
    fs::write(&expected, bytes).expect("write expected");
    let mut shape = im.shape.clone();
    shape[0] = STEPS;
    json!({
        "name": im.name, "path": path, "expected": expected, "dtype": "<u2",
        "shape": shape, "axes": im.axes.iter().map(|a| a.0).collect::<Vec<_>>(),
        "levels": im.ome.level_count(&im.spec()).expect("levels"),
        "method": im.ome.downsample_method().as_str(),
        "z_axis": im.ome.halves_z().then(|| im.shape.len() - 3),
    })
}

#[test]
fn readers_validate_and_read_every_image() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("ome-readers-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let entries: Vec<Value> = images()
        .into_iter()
        .chain(pyramid_images())
        .collect::<Vec<_>>()
        .iter()
        .map(|im| entry(im, &im.write(dir.path(), options()), dir.path()))
        .collect();
    let manifest = dir.path().join("manifest.json");
    fs::write(&manifest, json!({ "images": entries }).to_string()).expect("manifest");
    pyenv::ome_check(&py, "images", &manifest);
}

/// Pyramid level 0 of `dtype`: step `k`'s plane `i`, over a range that makes 2x2 (and
/// 2x2x2) sums overflow the type; the 64-bit integers beyond 2^53 (where a double would
/// round) and sums beyond 64 bits; floats of few significant bits, so every sum is exact.
fn typed_value(dtype: DataType, k: usize, i: usize) -> Vec<u8> {
    let v = (k * 7919 + i * 13) as u64;
    match dtype {
        DataType::Int8 => vec![v as u8],
        DataType::UInt8 => vec![(v % 256) as u8],
        DataType::Int16 => (v as u16 as i16).to_le_bytes().to_vec(),
        DataType::UInt16 => (v as u16).to_le_bytes().to_vec(),
        DataType::Int32 => (((v % 65536) as i32 - 32768) << 16).to_le_bytes().to_vec(),
        DataType::UInt32 => ((v % 65536) as u32 * 65537).to_le_bytes().to_vec(),
        DataType::Int64 => (((v % 65536) as i64 - 32768) << 48 | 1)
            .to_le_bytes()
            .to_vec(),
        DataType::UInt64 => ((v % 65536) << 48 | 3).to_le_bytes().to_vec(),
        DataType::Float32 => ((v % 4096) as f32 * 0.25 - 300.0).to_le_bytes().to_vec(),
        DataType::Float64 => ((v % 65536) as f64 * 0.125 - 4000.0).to_le_bytes().to_vec(),
        other => panic!("no values for {other}"),
    }
}

/// Every data type's pyramid: level k equals numpy's reduction of level k-1 of the same
/// type (exact integer means, round half up), read through the ome-zarr reader and
/// zarr-python, after ome-zarr-models validated the group. 2x2 means for all, 2x2x2 for
/// the 64-bit integers and float64, min and max for a few.
#[test]
fn every_dtype_has_an_exact_pyramid_in_the_readers() {
    let Some(py) = pyenv::interop(zarrstream_testkit::target_tmp!(), READERS) else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("ome-dtypes-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let mut cases: Vec<(DataType, Downsample, bool)> = DataType::ALL
        .iter()
        .map(|&d| (d, Downsample::Mean, false))
        .collect();
    for d in [DataType::Int64, DataType::UInt64, DataType::Float64] {
        cases.push((d, Downsample::Mean, true));
    }
    cases.push((DataType::Int8, Downsample::Min, false));
    cases.push((DataType::Float64, Downsample::Max, true));
    let mut entries = Vec::new();
    for (dtype, method, z) in cases {
        let name = format!("t_{dtype}_{}{}", method.as_str(), if z { "_z" } else { "" });
        let (steps, depth, h, w) = (3usize, if z { 3 } else { 1 }, 37usize, 41usize);
        let shape: Vec<u64> = if z {
            vec![0, depth as u64, 37, 41]
        } else {
            vec![0, 37, 41]
        };
        let rank = shape.len();
        let mut chunk = vec![1u64; rank];
        chunk[rank - 2] = 16;
        chunk[rank - 1] = 16;
        let mut shard = shape.clone();
        shard[0] = 2;
        shard[rank - 2] = 48;
        shard[rank - 1] = 48;
        let spec = ArraySpec::builder()
            .dtype(dtype)
            .shape(&shape)
            .chunk_shape(&chunk)
            .shard_shape(&shard)
            .build()
            .expect("spec");
        let ome = Ome::new()
            .levels(Levels::Count(3))
            .downsample(method)
            .downsample_z(z);
        let path = dir.path().join(format!("{name}.ome.zarr"));
        let mut wr = Writer::create_ome(&path, spec, &ome, options()).expect("create");
        let mut data = Vec::new();
        for k in 0..steps * depth {
            let frame: Vec<u8> = (0..h * w).flat_map(|i| typed_value(dtype, k, i)).collect();
            let pushed = wr.push_bytes(&frame, Instant::now()).expect("push");
            assert!(pushed.is_accepted(), "{name}: frame {k} not accepted");
            data.extend(frame);
        }
        wr.finish().expect("finish");
        let expected = dir.path().join(format!("{name}.expected.raw"));
        fs::write(&expected, data).expect("write expected");
        let mut full = shape.clone();
        full[0] = steps as u64;
        let axes: &[&str] = if z {
            &["t", "z", "y", "x"]
        } else {
            &["t", "y", "x"]
        };
        entries.push(json!({
            "name": name, "path": path, "expected": expected,
            "dtype": format!("<{}{}", &dtype.short_name()[..1], dtype.size()),
            "shape": full, "axes": axes, "levels": 3, "method": method.as_str(),
            "z_axis": z.then_some(1),
        }));
    }
    let manifest = dir.path().join("manifest.json");
    fs::write(&manifest, json!({ "images": entries }).to_string()).expect("manifest");
    pyenv::ome_check(&py, "images", &manifest);
}
