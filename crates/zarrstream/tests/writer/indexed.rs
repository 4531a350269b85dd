//! Frames written by index (`Writer::write_frame`) in every loop order of the leading
//! axes, with and without the order declared, with frame-deep and deeper chunks, shards
//! of several frames, and frames that never come: every element read back with `zarrs`
//! equals the model (the frame at C-order index `k` of the leading axes holds frame `k`'s
//! content, frames not written read as fill), the shard files and their indexes are what
//! the design says, and bad indices are refused without touching what was written.

use crate::common;

use std::time::{Duration, Instant};

use common::{Case, Model, check_files, check_read, frame};
use zarrstream::{
    AcquisitionOrder, Error, FrameIndexError, OrderError, SinkChoice, Writer, WriterOptions,
};

/// Every point of a grid of `extent`, visited in nested loops over `order` (outermost
/// first).
fn points(extent: &[u64], order: &[usize]) -> Vec<Vec<u64>> {
    let total: u64 = extent.iter().product();
    let mut c = vec![0u64; extent.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        out.push(c.clone());
        for &a in order.iter().rev() {
            c[a] += 1;
            if c[a] < extent[a] {
                break;
            }
            c[a] = 0;
        }
    }
    out
}

/// The C-order frame index of leading coordinates `c`.
fn c_index(extent: &[u64], c: &[u64]) -> u64 {
    c.iter().zip(extent).fold(0, |acc, (&ci, &e)| acc * e + ci)
}

/// What happens to a frame of the acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Written,
    /// `skip_frame`: it will not come.
    Skipped,
    /// Never mentioned: `finish` fills it.
    Missing,
}

/// Writes the frames of `case` at the points `order` visits (or skips or leaves them out,
/// as `fate` says), declaring the order when `declare`; finishes and checks everything
/// against the model.
fn write_in_order(case: &Case, order: &[usize], declare: bool, fate: impl Fn(&[u64]) -> Fate) {
    let name = case.name;
    let dir = zarrstream_testkit::scratch!("indexed");
    let path = dir.path().join("a.zarr");
    let lead = &case.shape[..case.rank() - 2];
    let mut options = case.options();
    if declare {
        options = options.acquisition_order(AcquisitionOrder::new(order));
    }
    let mut w = Writer::create(&path, case.spec::<u16>(), options)
        .unwrap_or_else(|e| panic!("[{name} {order:?}] create: {e}"));
    if case.sink == SinkChoice::Direct {
        assert_eq!(
            w.sink(),
            zarrstream::SinkKind::Direct,
            "[{name}] the direct sink"
        );
    }
    let total: u64 = lead.iter().product();
    let mut accepted = vec![false; total as usize];
    let mut skipped = 0;
    for c in points(lead, order) {
        match fate(&c) {
            Fate::Written => {}
            Fate::Missing => continue,
            Fate::Skipped => {
                w.skip_frame(&c)
                    .unwrap_or_else(|e| panic!("[{name} {order:?}] skip_frame {c:?}: {e}"));
                skipped += 1;
                continue;
            }
        }
        let k = c_index(lead, &c);
        let out = w
            .write_frame(&c, &frame::<u16>(k, case.plane()))
            .unwrap_or_else(|e| panic!("[{name} {order:?}] write_frame {c:?}: {e}"));
        assert!(out.is_accepted(), "[{name} {order:?}] {c:?} dropped");
        accepted[k as usize] = true;
    }
    let stats = w
        .finish()
        .unwrap_or_else(|e| panic!("[{name} {order:?}] finish: {e}"));
    let written = accepted.iter().filter(|a| **a).count() as u64;
    assert_eq!(
        stats.frames_written, written,
        "[{name} {order:?}] frames_written"
    );
    assert_eq!(
        stats.frames_dropped, skipped,
        "[{name} {order:?}] frames_dropped"
    );
    assert_eq!(
        stats.frames_pushed,
        written + skipped,
        "[{name} {order:?}] frames_pushed"
    );
    let m = Model::new(case, &accepted);
    let (files, bytes) = check_files(case, &m, &path, 2);
    assert_eq!(stats.shards, files, "[{name} {order:?}] shards");
    assert_eq!(stats.bytes_stored, bytes, "[{name} {order:?}] bytes_stored");
    check_read::<u16>(&m, &path);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap();
    let ours = &meta["attributes"]["zarrstream"];
    assert_eq!(ours["state"], "finished", "[{name} {order:?}] {meta}");
    assert_eq!(
        ours["frames_committed"], written,
        "[{name} {order:?}] {meta}"
    );
    assert_eq!(meta["shape"], serde_json::json!(case.shape), "[{name}]");
}

/// All permutations of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// t=5, c=2, z=3 frames of 20 × 24 in chunks of 8 × 8 (edge tiles), every loop order.
fn cases() -> Vec<Case> {
    let shape = [5, 2, 3, 20, 24];
    let mut shallow = Case::new(
        "frame-deep chunks, sets of 2 t",
        &shape,
        &[1, 1, 1, 8, 8],
        &[2, 1, 3, 16, 24],
        0,
    );
    shallow.sink = SinkChoice::Pwrite;
    let deep = Case::new(
        "chunks 2 t × 3 z deep",
        &shape,
        &[2, 1, 3, 8, 8],
        &[4, 2, 3, 16, 16],
        0,
    );
    let mut one = Case::new(
        "one shard set",
        &shape,
        &[1, 2, 1, 8, 8],
        &[5, 2, 3, 24, 24],
        0,
    );
    one.codec = zarrstream::Codec::None;
    let mut direct = Case::new(
        "direct",
        &[5, 2, 3, 128, 512],
        &[1, 1, 1, 128, 256],
        &[2, 2, 1, 128, 512],
        0,
    );
    direct.sink = SinkChoice::Direct;
    // Under Wine a shard's reservation does not take its blocks, so every shard falls
    // back from the direct sink to pwrite (`sink::open`) and the direct layout checked by
    // `check_files` does not apply; windows.rs covers `zarrstream.exe record`'s direct sink there.
    if cfg!(windows) {
        return vec![shallow, deep, one];
    }
    vec![shallow, deep, one, direct]
}

#[test]
fn every_loop_order_declared_reads_back() {
    for case in cases() {
        for order in permutations(3) {
            write_in_order(&case, &order, true, |_| Fate::Written);
        }
    }
}

#[test]
fn undeclared_orders_within_the_open_shards_read_back() {
    // Shard sets one t deep: any order inside a t step stays within what appending
    // keeps open (every (c, z) set of one t).
    let case = Case::new(
        "sets of one t",
        &[4, 2, 3, 16, 16],
        &[1, 1, 1, 8, 8],
        &[1, 2, 1, 16, 16],
        0,
    );
    for order in [[0, 2, 1], [0, 1, 2]] {
        write_in_order(&case, &order, false, |_| Fate::Written);
    }
}

#[test]
fn skipped_frames_read_as_fill() {
    for case in cases() {
        for order in [[1, 0, 2], [2, 1, 0]] {
            // Channel 1 only at even t, and z = 1 never.
            write_in_order(&case, &order, true, |c| {
                if c[2] != 1 && (c[1] == 0 || c[0] % 2 == 0) {
                    Fate::Written
                } else {
                    Fate::Skipped
                }
            });
        }
    }
}

#[test]
fn frames_that_never_come_are_filled_at_finish() {
    for case in cases() {
        // Channel-first, the last time point of channel 0 missing: its sets stay open
        // until `finish`.
        write_in_order(&case, &[1, 0, 2], true, |c| {
            if c[1] == 0 && c[0] == 4 {
                Fate::Missing
            } else {
                Fate::Written
            }
        });
    }
}

#[test]
fn unbounded_axis_0_within_its_window() {
    // Sets 2 t deep: within each window of rows, the frames come channel-first.
    let mut case = Case::new(
        "unbounded",
        &[0, 2, 16, 16],
        &[1, 1, 8, 8],
        &[2, 1, 16, 16],
        0,
    );
    case.threads = 1;
    let dir = zarrstream_testkit::scratch!("indexed-unbounded");
    let path = dir.path().join("a.zarr");
    let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
    let t_max = 7u64;
    let mut accepted = vec![false; (t_max * 2) as usize];
    for row in 0..t_max.div_ceil(2) {
        for c in [1u64, 0] {
            for t in (row * 2..(row * 2 + 2).min(t_max)).rev() {
                let k = t * 2 + c;
                assert!(
                    w.write_frame(&[t, c], &frame::<u16>(k, case.plane()))
                        .unwrap()
                        .is_accepted()
                );
                accepted[k as usize] = true;
            }
        }
        // Row `row` is complete: the next two rows are in the window, the one after is
        // not.
        let ahead = (row + 3) * 2;
        let e = w
            .write_frame(&[ahead, 0], &frame::<u16>(0, case.plane()))
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::FrameIndex {
                    problem: FrameIndexError::OutsideWindow { .. },
                    ..
                }
            ),
            "{e}"
        );
    }
    w.finish().unwrap();
    let m = Model::new(&case, &accepted);
    check_files(&case, &m, &path, 2);
    check_read::<u16>(&m, &path);
}

#[test]
fn finished_shards_are_readable_while_the_rest_is_written() {
    // Channel-first into sets of (2 t, 1 c): channel 0's sets finish while channel 1 is
    // still to come; a reader sees channel 0 and fill for channel 1.
    let mut case = Case::new("live", &[4, 2, 16, 16], &[1, 1, 8, 8], &[2, 1, 16, 16], 0);
    case.threads = 1;
    let dir = zarrstream_testkit::scratch!("indexed-live");
    let path = dir.path().join("a.zarr");
    let options = case
        .options()
        .acquisition_order(AcquisitionOrder::new([1, 0]));
    let mut w = Writer::create(&path, case.spec::<u16>(), options).unwrap();
    let mut accepted = vec![false; 8];
    for t in 0..4u64 {
        let k = t * 2;
        assert!(
            w.write_frame(&[t, 0], &frame::<u16>(k, case.plane()))
                .unwrap()
                .is_accepted()
        );
        accepted[k as usize] = true;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let shards = ["c/0/0/0/0", "c/1/0/0/0"].map(|k| path.join(k));
    while !shards.iter().all(|s| s.exists()) {
        assert!(
            Instant::now() < deadline,
            "channel 0's shards were not finished within 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = Model::new(&case, &accepted);
    check_read::<u16>(&m, &path);
    for t in 0..4u64 {
        let k = t * 2 + 1;
        assert!(
            w.write_frame(&[t, 1], &frame::<u16>(k, case.plane()))
                .unwrap()
                .is_accepted()
        );
        accepted[k as usize] = true;
    }
    w.finish().unwrap();
    let m = Model::new(&case, &accepted);
    check_files(&case, &m, &path, 2);
    check_read::<u16>(&m, &path);
}

/// Checks `e` is a `FrameIndex` error for `index` with `problem`.
fn refused(e: Error, index: &[u64], problem: FrameIndexError) {
    match &e {
        Error::FrameIndex {
            index: i,
            problem: p,
        } => {
            assert_eq!((i.as_slice(), p), (index, &problem), "{e}");
        }
        _ => panic!("want FrameIndex {problem:?}, got {e:?}"),
    }
}

#[test]
fn bad_indices_are_refused_and_nothing_written_is_touched() {
    let case = Case::new("bad", &[3, 2, 16, 16], &[1, 1, 8, 8], &[2, 2, 16, 16], 0);
    let dir = zarrstream_testkit::scratch!("indexed-bad");
    let path = dir.path().join("a.zarr");
    let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
    let f = |k: u64| frame::<u16>(k, case.plane());
    let mut accepted = vec![false; 6];
    let mut write = |w: &mut Writer, c: [u64; 2]| {
        let k = c[0] * 2 + c[1];
        assert!(w.write_frame(&c, &f(k)).unwrap().is_accepted());
        accepted[k as usize] = true;
    };
    write(&mut w, [1, 1]);
    refused(
        w.write_frame(&[1], &f(0)).unwrap_err(),
        &[1],
        FrameIndexError::Rank { got: 1, lead: 2 },
    );
    refused(
        w.write_frame(&[3, 0], &f(0)).unwrap_err(),
        &[3, 0],
        FrameIndexError::OutOfBounds {
            axis: 0,
            value: 3,
            size: 3,
        },
    );
    refused(
        w.write_frame(&[0, 2], &f(0)).unwrap_err(),
        &[0, 2],
        FrameIndexError::OutOfBounds {
            axis: 1,
            value: 2,
            size: 2,
        },
    );
    // A second frame at [1, 1], of other content: refused, the first one stays.
    refused(
        w.write_frame(&[1, 1], &f(5)).unwrap_err(),
        &[1, 1],
        FrameIndexError::Duplicate,
    );
    refused(w.push(&f(0)).unwrap_err(), &[], FrameIndexError::Indexed);
    let e = w.write_frame(&[0, 0], &frame::<u16>(0, 7)).unwrap_err();
    assert!(matches!(e, Error::FrameSize { .. }), "{e}");
    for c in [[0, 0], [0, 1], [1, 0]] {
        write(&mut w, c);
    }
    // Set (0, 0) is complete (and may be finished): its frames are still refused.
    refused(
        w.write_frame(&[0, 1], &f(9)).unwrap_err(),
        &[0, 1],
        FrameIndexError::Duplicate,
    );
    write(&mut w, [2, 0]);
    w.finish().unwrap();
    let m = Model::new(&case, &accepted);
    check_files(&case, &m, &path, 2);
    check_read::<u16>(&m, &path);

    // Appended, then indexed.
    let path = dir.path().join("b.zarr");
    let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
    assert!(w.push(&f(0)).unwrap().is_accepted());
    refused(
        w.write_frame(&[0, 1], &f(1)).unwrap_err(),
        &[0, 1],
        FrameIndexError::Appending,
    );
    w.finish().unwrap();
}

#[test]
fn orders_that_do_not_fit_are_refused_at_creation() {
    let dir = zarrstream_testkit::scratch!("indexed-orders");
    let spec = |shape: &[u64], shard: &[u64]| {
        zarrstream::ArraySpec::builder()
            .shape(shape)
            .chunk_shape([1, 1, 1, 8, 8])
            .shard_shape(shard)
            .build()
            .unwrap()
    };
    let create = |name: &str, spec, order: &[usize], max: usize| {
        let options = WriterOptions::default()
            .threads(1)
            .max_open_shards(max)
            .acquisition_order(AcquisitionOrder::new(order));
        let path = dir.path().join(name);
        let r = Writer::create(&path, spec, options);
        if r.is_err() {
            assert!(!path.exists(), "{name}: a refused writer leaves nothing");
        }
        r
    };
    // Appending t=0.. with sets 4 t deep over c=3, z=5: 15 sets (+3 spare) open.
    let s = spec(&[0, 3, 5, 8, 8], &[4, 1, 1, 8, 8]);
    assert!(create("ok", s.clone(), &[0, 1, 2], 18).is_ok());
    let e = create("few", s.clone(), &[0, 1, 2], 17)
        .err()
        .expect("refused");
    match &e {
        Error::WorkingSet {
            needed: 18,
            budget: 17,
            limit: "max_open_shards",
            ..
        } => {}
        _ => panic!("want WorkingSet 18 > 17, got {e:?}"),
    }
    assert!(
        e.to_string().contains("18 shards") && e.to_string().contains("max_open_shards allows 17"),
        "{e}"
    );
    let e = create("inside", s.clone(), &[1, 0, 2], 100)
        .err()
        .expect("refused");
    assert!(
        matches!(e, Error::Order(OrderError::UnboundedInside)),
        "{e}"
    );
    let e = create("rank", s.clone(), &[1, 0], 100)
        .err()
        .expect("refused");
    assert!(
        matches!(e, Error::Order(OrderError::Rank { got: 2, lead: 3 })),
        "{e}"
    );
    // Bounded t acquired channel-first: 5 z sets of 4 t open at once.
    let s = spec(&[8, 3, 5, 8, 8], &[4, 1, 1, 8, 8]);
    assert!(create("cfirst", s.clone(), &[1, 0, 2], 8).is_ok());
    assert!(create("cfirst-few", s, &[1, 0, 2], 7).is_err());
}

#[test]
fn an_undeclared_order_too_far_from_storage_order_is_refused() {
    // t=6 sets of one t, c=2: appending keeps 1 set (+3 spare) open; channel-first
    // without declaring it needs all 6 t sets of channel 0 open.
    let case = Case::new("far", &[6, 2, 16, 16], &[1, 1, 16, 16], &[1, 2, 16, 16], 0);
    let dir = zarrstream_testkit::scratch!("indexed-far");
    let path = dir.path().join("a.zarr");
    let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
    let mut accepted = vec![false; 12];
    let mut error = None;
    for t in 0..6u64 {
        let k = t * 2;
        match w.write_frame(&[t, 0], &frame::<u16>(k, case.plane())) {
            Ok(_) => accepted[k as usize] = true,
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let e = error.expect("refused");
    assert!(
        matches!(e, Error::WorkingSet { what: "shards", .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("acquisition_order"), "{e}");
    // The writer is still usable: complete the sets opened so far.
    let opened = accepted.iter().filter(|a| **a).count() as u64;
    for t in 0..opened {
        let k = t * 2 + 1;
        assert!(
            w.write_frame(&[t, 1], &frame::<u16>(k, case.plane()))
                .unwrap()
                .is_accepted()
        );
        accepted[k as usize] = true;
    }
    w.finish().unwrap();
    let m = Model::new(&case, &accepted);
    check_read::<u16>(&m, &path);
}

#[test]
fn resume_and_an_acquisition_order_conflict() {
    let options = WriterOptions::default()
        .resume(true)
        .acquisition_order(AcquisitionOrder::new([0, 1]));
    let dir = zarrstream_testkit::scratch!("indexed-resume");
    let spec = zarrstream::ArraySpec::builder()
        .shape([0, 2, 8, 8])
        .chunk_shape([1, 1, 8, 8])
        .shard_shape([1, 1, 8, 8])
        .build()
        .unwrap();
    let e = Writer::create(dir.path().join("a.zarr"), spec, options)
        .err()
        .expect("refused");
    assert!(
        matches!(e, Error::ConflictingOptions("resume", "acquisition_order")),
        "{e}"
    );
}

#[test]
fn a_recording_writes_each_array_by_index() {
    // Two positions, each t=3, c=2 acquired position-outermost then channel-first.
    let case = Case::new(
        "positions",
        &[3, 2, 16, 16],
        &[1, 1, 8, 8],
        &[3, 1, 16, 16],
        0,
    );
    let dir = zarrstream_testkit::scratch!("indexed-recording");
    let root = dir.path().join("r.zarr");
    let arrays = ["p0", "p1"].map(|k| zarrstream::ArrayConfig::new(k, case.spec::<u16>()));
    let options = case
        .options()
        .acquisition_order(AcquisitionOrder::new([1, 0]));
    let rec = zarrstream::Recording::create(&root, arrays.to_vec(), options).unwrap();
    for (p, key) in ["p0", "p1"].iter().enumerate() {
        for c in 0..2u64 {
            for t in 0..3u64 {
                let k = t * 2 + c;
                let f = frame::<u16>(k + 100 * p as u64, case.plane());
                let mut w = rec.array(*key).unwrap();
                assert!(w.write_frame(&[t, c], &f).unwrap().is_accepted());
            }
        }
    }
    let e = rec
        .array("p1")
        .unwrap()
        .write_frame(&[0, 0], &frame::<u16>(0, case.plane()))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::FrameIndex {
                problem: FrameIndexError::Duplicate,
                ..
            }
        ),
        "{e}"
    );
    rec.finish().unwrap();
    for (p, key) in ["p0", "p1"].iter().enumerate() {
        let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&root).unwrap());
        let array = zarrs::array::Array::open(store, &format!("/{key}")).unwrap();
        let all: Vec<u16> = array
            .retrieve_array_subset::<Vec<u16>>(&zarrs::array::ArraySubset::new_with_shape(vec![
                3, 2, 16, 16,
            ]))
            .unwrap();
        for k in 0..6u64 {
            let want = frame::<u16>(k + 100 * p as u64, case.plane());
            let got = &all[k as usize * case.plane()..][..case.plane()];
            assert!(got == want.as_slice(), "{key} frame {k}");
        }
    }
}

#[test]
fn a_single_frame_array_of_rank_2() {
    // 40 × 72 in chunks of 16 × 32 (edge tiles), shards of 32 × 64: 2 × 2 shards.
    let dir = zarrstream_testkit::scratch!("indexed-rank2");
    let spec = |names: bool| {
        let b = zarrstream::ArraySpec::builder()
            .shape([40, 72])
            .chunk_shape([16, 32])
            .shard_shape([32, 64]);
        let b = if names {
            b.dimension_names(["y", "x"])
        } else {
            b
        };
        b.build().unwrap()
    };
    let plane = 40 * 72;
    let f = frame::<u16>(7, plane);
    for (name, indexed) in [("pushed.zarr", false), ("indexed.zarr", true)] {
        let path = dir.path().join(name);
        let options = WriterOptions::default().threads(1);
        let mut w = Writer::create(&path, spec(true), options).unwrap();
        assert_eq!((w.spec().rank(), w.spec().shape()), (2, &[40, 72][..]));
        if indexed {
            refused(
                w.write_frame(&[0], &f).unwrap_err(),
                &[0],
                FrameIndexError::Rank { got: 1, lead: 0 },
            );
            assert!(w.write_frame(&[], &f).unwrap().is_accepted());
            refused(
                w.write_frame(&[], &f).unwrap_err(),
                &[],
                FrameIndexError::Duplicate,
            );
        } else {
            assert!(w.push(&f).unwrap().is_accepted());
            let e = w.push(&f).unwrap_err();
            assert!(matches!(e, Error::ArrayFull { frames: 1 }), "{e}");
        }
        let stats = w.finish().unwrap();
        assert_eq!((stats.frames_written, stats.shards), (1, 4), "{name}");
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.join("zarr.json")).unwrap()).unwrap();
        assert_eq!(meta["shape"], serde_json::json!([40, 72]), "{meta}");
        assert_eq!(
            meta["chunk_grid"]["configuration"]["chunk_shape"],
            serde_json::json!([32, 64])
        );
        assert_eq!(
            meta["codecs"][0]["configuration"]["chunk_shape"],
            serde_json::json!([16, 32])
        );
        assert_eq!(meta["dimension_names"], serde_json::json!(["y", "x"]));
        assert_eq!(meta["attributes"]["zarrstream"]["state"], "finished");
        for key in ["c/0/0", "c/0/1", "c/1/0", "c/1/1"] {
            assert!(path.join(key).is_file(), "{name}: {key}");
        }
        let store = std::sync::Arc::new(zarrs::filesystem::FilesystemStore::new(&path).unwrap());
        let array = zarrs::array::Array::open(store, "/").unwrap();
        assert_eq!(array.shape(), &[40, 72]);
        let all: Vec<u16> = array
            .retrieve_array_subset::<Vec<u16>>(&zarrs::array::ArraySubset::new_with_shape(vec![
                40, 72,
            ]))
            .unwrap();
        assert!(all == f, "{name}: zarrs reads the frame back");
    }
    // A single frame has no append axis to leave unbounded.
    let e = zarrstream::ArraySpec::builder()
        .shape([0, 72])
        .chunk_shape([16, 32])
        .shard_shape([32, 64])
        .build()
        .unwrap_err();
    assert_eq!(e, zarrstream::SpecError::ZeroExtent { axis: 0 });
}

#[test]
fn dropped_indexed_frames_are_counted_exactly_and_read_as_fill() {
    // A pool of 2 frames under Backpressure::Drop, frames written flat out channel-first:
    // whatever the writer drops is counted, reads as fill, and completes its shards.
    let mut case = Case::new(
        "drop",
        &[40, 2, 64, 64],
        &[1, 1, 32, 32],
        &[4, 1, 64, 64],
        0,
    );
    case.backpressure = zarrstream::Backpressure::Drop;
    case.pool_frames = 2;
    case.threads = 1;
    let dir = zarrstream_testkit::scratch!("indexed-drop");
    let path = dir.path().join("a.zarr");
    let options = case
        .options()
        .acquisition_order(AcquisitionOrder::new([1, 0]));
    let mut w = Writer::create(&path, case.spec::<u16>(), options).unwrap();
    let mut accepted = vec![false; 80];
    let mut dropped = 0;
    for c in 0..2u64 {
        for t in 0..40u64 {
            let k = t * 2 + c;
            if w.write_frame(&[t, c], &frame::<u16>(k, case.plane()))
                .unwrap()
                .is_accepted()
            {
                accepted[k as usize] = true;
            } else {
                dropped += 1;
            }
        }
    }
    let stats = w.finish().unwrap();
    assert_eq!(stats.frames_dropped, dropped);
    assert_eq!(stats.frames_written + stats.frames_dropped, 80);
    let m = Model::new(&case, &accepted);
    check_files(&case, &m, &path, 2);
    check_read::<u16>(&m, &path);
    println!("dropped {dropped} of 80 indexed frames");
}

#[test]
fn the_memory_estimate_follows_the_acquisition_order() {
    // t=8, c=3, z=5 into shard sets 4 deep on t, mmap sink (each open shard mapped
    // whole): appending keeps 15 sets open (+3 spare), z outermost then t then c only 3.
    let spec = zarrstream::ArraySpec::builder()
        .shape([8, 3, 5, 256, 256])
        .chunk_shape([1, 1, 1, 128, 128])
        .shard_shape([4, 1, 1, 256, 256])
        .build()
        .unwrap();
    let options = WriterOptions::default().threads(1).sink(SinkChoice::Mmap);
    let appended = zarrstream::estimate_memory(&spec, &options).unwrap();
    let z_first = zarrstream::estimate_memory(
        &spec,
        &options
            .clone()
            .acquisition_order(AcquisitionOrder::new([2, 0, 1])),
    )
    .unwrap();
    assert!(appended.mapped_shards > 0);
    assert_eq!(
        appended.mapped_shards * (3 + 3),
        z_first.mapped_shards * (15 + 3),
        "{appended} vs {z_first}"
    );
    let bad = zarrstream::estimate_memory(
        &spec,
        &options.acquisition_order(AcquisitionOrder::new([2, 0])),
    );
    assert!(matches!(
        bad,
        Err(Error::Order(OrderError::Rank { got: 2, lead: 3 }))
    ));
}

#[test]
fn an_undeclared_order_that_needs_more_staging_is_refused_not_blocked() {
    // Chunks 2 t deep, c=6, one shard set: appending keeps 6 groups open (+1 spare).
    // Writing t=0 and then t=2 of every channel would open 12: the 8th is refused
    // (waiting for a buffer would wait forever), and the writer goes on.
    let case = Case::new(
        "staging",
        &[4, 6, 16, 16],
        &[2, 1, 16, 16],
        &[4, 6, 16, 16],
        0,
    );
    let dir = zarrstream_testkit::scratch!("indexed-staging");
    let path = dir.path().join("a.zarr");
    let mut w = Writer::create(&path, case.spec::<u16>(), case.options()).unwrap();
    let mut accepted = vec![false; 24];
    let mut refused_at = None;
    'outer: for t in [0u64, 2] {
        for c in 0..6u64 {
            let k = t * 6 + c;
            match w.write_frame(&[t, c], &frame::<u16>(k, case.plane())) {
                Ok(o) => {
                    assert!(o.is_accepted());
                    accepted[k as usize] = true;
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e,
                            Error::WorkingSet {
                                needed: 8,
                                budget: 7,
                                ..
                            }
                        ),
                        "{e:?}"
                    );
                    refused_at = Some((t, c));
                    break 'outer;
                }
            }
        }
    }
    assert_eq!(refused_at, Some((2, 1)));
    // Skipping that frame needs no staging buffer: it is taken (and reads as fill).
    w.skip_frame(&[2, 1]).unwrap();
    // The rest in storage order completes every group.
    for t in 0..4u64 {
        for c in 0..6u64 {
            let k = (t * 6 + c) as usize;
            if !accepted[k] && (t, c) != (2, 1) {
                let f = frame::<u16>(k as u64, case.plane());
                assert!(w.write_frame(&[t, c], &f).unwrap().is_accepted());
                accepted[k] = true;
            }
        }
    }
    w.finish().unwrap();
    let m = Model::new(&case, &accepted);
    check_files(&case, &m, &path, 2);
    check_read::<u16>(&m, &path);
}

#[test]
fn a_single_frame_takes_the_empty_order_only() {
    let spec = zarrstream::ArraySpec::builder()
        .shape([16, 16])
        .chunk_shape([16, 16])
        .shard_shape([16, 16])
        .build()
        .unwrap();
    let dir = zarrstream_testkit::scratch!("indexed-rank2-order");
    let options = |axes: Vec<usize>| {
        WriterOptions::default()
            .threads(1)
            .acquisition_order(AcquisitionOrder::new(axes))
    };
    let mut w = Writer::create(dir.path().join("a.zarr"), spec.clone(), options(vec![])).unwrap();
    assert!(
        w.write_frame(&[], &frame::<u16>(0, 256))
            .unwrap()
            .is_accepted()
    );
    w.finish().unwrap();
    let e = Writer::create(dir.path().join("b.zarr"), spec, options(vec![0]))
        .err()
        .expect("refused");
    assert!(
        matches!(e, Error::Order(OrderError::Rank { got: 1, lead: 0 })),
        "{e}"
    );
}
