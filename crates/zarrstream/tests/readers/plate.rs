//! OME-Zarr 0.5 high-content screening plates (`Recording::create_plate`): the plate,
//! well and image metadata we expect, typed errors for bad layouts (nothing written),
//! the plate's own `ome` attribute refused, resume of the same plate and refusal of a
//! different one; and, in the pinned Python environment, validation with
//! `ome-zarr-models`' HCS model and reads with the `ome-zarr` reader (the plate's grid of
//! first fields, a well's grid of fields) and zarr-python, equal to the frames pushed
//! (`tests/interop/ome_check.py plate`).

use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use zarrstream::{
    Acquisition, ArraySpec, Error, Levels, Ome, Plate, PlateError, PlateImage, Recording,
    WriterOptions,
};

use zarrstream_testkit::python as pyenv;

const T: u64 = 3;
const H: u64 = 24;
const W: u64 = 20;

fn spec() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, H, W])
        .chunk_shape([1, 16, 16])
        .shard_shape([2, 32, 32])
        .build()
        .expect("spec")
}

fn options() -> WriterOptions {
    WriterOptions::default().threads(2).pin_threads(false)
}

/// A 2 x 3 plate without well B/2, two fields per well, two acquisitions.
fn plate() -> Plate {
    Plate::new(["A", "B"], ["1", "2", "3"])
        .name("screen 7")
        .wells([("A", "1"), ("A", "2"), ("A", "3"), ("B", "1"), ("B", "3")])
        .fields(2)
        .acquisitions([
            Acquisition::new(0)
                .name("first pass")
                .start_time(1_700_000_000)
                .end_time(1_700_000_600),
            Acquisition::new(5)
                .name("second pass")
                .description("after staining"),
        ])
}

/// Frame `t` of image `i` (in `Plate::images` order).
fn frame(i: usize, t: u64) -> Vec<u16> {
    (0..H * W)
        .map(|p| (i as u64 * 1000 + t * 37 + p * 13) as u16)
        .collect()
}

/// Records `T` frames into every field image, as a microscope visits them: one pass of
/// the plate per time point, each well's fields in turn.
fn write(root: &Path, plate: &Plate, ome: &Ome) -> Vec<PlateImage> {
    let rec = Recording::create_plate(root, plate, spec(), ome, options()).expect("create");
    let images = plate.images().expect("images");
    for t in 0..T {
        for (i, image) in images.iter().enumerate() {
            assert!(
                rec.array(image.key.as_str())
                    .and_then(|mut w| w.push(&frame(i, t)))
                    .expect("push")
                    .is_accepted()
            );
        }
    }
    let stats = rec.finish().expect("finish");
    assert_eq!(stats.arrays.len(), images.len());
    assert_eq!(stats.total.frames_written, T * images.len() as u64);
    images
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("json")
}

#[test]
fn plate_well_and_image_metadata() {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("plate.ome.zarr");
    let images = write(&root, &plate(), &Ome::new().pixel_size(0.5, 0.5));
    assert_eq!(images.len(), 5 * 2 * 2);
    let doc = read_json(&root.join("zarr.json"));
    assert_eq!(doc["node_type"], "group");
    let attrs = &doc["attributes"];
    // The recording's mark and the plate's metadata side by side.
    let keys: Vec<&str> = images.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(attrs["zarrstream"]["recording"]["arrays"], json!(keys));
    assert_eq!(attrs["ome"]["version"], "0.5");
    let p = &attrs["ome"]["plate"];
    assert_eq!(p["name"], "screen 7");
    assert_eq!(p["field_count"], 4);
    assert_eq!(p["rows"], json!([{"name": "A"}, {"name": "B"}]));
    assert_eq!(
        p["columns"],
        json!([{"name": "1"}, {"name": "2"}, {"name": "3"}])
    );
    assert_eq!(
        p["wells"][4],
        json!({"path": "B/3", "rowIndex": 1, "columnIndex": 2})
    );
    assert_eq!(p["wells"].as_array().map(Vec::len), Some(5));
    assert_eq!(
        p["acquisitions"],
        json!([
            {"id": 0, "maximumfieldcount": 2, "name": "first pass",
             "starttime": 1_700_000_000u64, "endtime": 1_700_000_600u64},
            {"id": 5, "maximumfieldcount": 2, "name": "second pass",
             "description": "after staining"}
        ])
    );
    // Wells list their images with the acquisition each belongs to; rows are plain.
    let well = read_json(&root.join("B/3/zarr.json"));
    assert_eq!(
        well["attributes"]["ome"],
        json!({"version": "0.5", "well": {"images": [
            {"path": "0", "acquisition": 0}, {"path": "1", "acquisition": 0},
            {"path": "2", "acquisition": 5}, {"path": "3", "acquisition": 5}]}})
    );
    assert_eq!(
        read_json(&root.join("A/zarr.json"))["attributes"],
        json!({})
    );
    assert!(!root.join("B/2").exists(), "an absent well has no group");
    // Each field is an OME image whose level 0 is an ordinary zarrstream array.
    let image = read_json(&root.join("A/2/3/zarr.json"));
    assert_eq!(
        image["attributes"]["ome"]["multiscales"][0]["axes"][1]["unit"],
        "micrometer"
    );
    let level = read_json(&root.join("A/2/3/0/zarr.json"));
    assert_eq!(level["shape"], json!([T, H, W]));
    assert_eq!(level["attributes"]["zarrstream"]["state"], "finished");
    // The pixels: image i got frames(i, 0..T), read back with zarrs.
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&root).expect("store"));
    for (i, image) in images.iter().enumerate() {
        let array = zarrs::array::Array::open(store.clone(), &format!("/{}/0", image.key))
            .expect("zarrs opens the field");
        let all = zarrs::array::ArraySubset::new_with_shape(vec![T, H, W]);
        let got = array
            .retrieve_array_subset::<Vec<u16>>(&all)
            .expect("zarrs reads the field");
        let want: Vec<u16> = (0..T).flat_map(|t| frame(i, t)).collect();
        assert!(got == want, "{}: pixels differ", image.key);
    }
}

#[test]
fn bad_plates_are_typed_errors_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("bad.ome.zarr");
    let cases = [
        (
            Plate::grid(2, 3).wells([("A", "1"), ("C", "1")]),
            PlateError::WellOutside {
                row: "C".into(),
                column: "1".into(),
                axis: "row",
                missing: "C".into(),
            },
        ),
        (
            Plate::grid(2, 3).wells([("B", "4")]),
            PlateError::WellOutside {
                row: "B".into(),
                column: "4".into(),
                axis: "column",
                missing: "4".into(),
            },
        ),
        (Plate::grid(2, 3).fields(0), PlateError::NoFields),
        (
            Plate::grid(2, 3).wells([("A", "1"), ("A", "1")]),
            PlateError::DuplicateWell {
                row: "A".into(),
                column: "1".into(),
            },
        ),
        (
            Plate::new(["A", "B-1"], ["1"]),
            PlateError::Name {
                axis: "row",
                name: "B-1".into(),
                reason: "only the letters A-Z, a-z and digits 0-9 are allowed",
            },
        ),
        (Plate::grid(2, 0), PlateError::Empty("columns")),
    ];
    for (plate, want) in cases {
        match Recording::create_plate(&root, &plate, spec(), &Ome::new(), options()) {
            Err(Error::Plate(e)) => assert_eq!(e, want),
            other => panic!("expected {want:?}, got {:?}", other.map(|_| ())),
        }
        assert!(!root.exists(), "a refused plate leaves nothing on disk");
    }
    let e = Recording::create_plate(
        &root,
        &Plate::grid(1, 1).fields(0),
        spec(),
        &Ome::new(),
        options(),
    )
    .map(|_| ())
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid plate: plate field count 0: every well needs at least one field of view"
    );
    // The root group is the plate's: joining someone else's is refused.
    assert!(matches!(
        Recording::create_plate(
            &root,
            &Plate::grid(1, 1),
            spec(),
            &Ome::new(),
            options().existing_group(true)
        ),
        Err(Error::ConflictingOptions("plate", "existing_group"))
    ));
    assert!(!root.exists());
}

#[test]
fn the_plates_own_attribute_is_refused_others_are_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("p.ome.zarr");
    let plate = Plate::grid(1, 2);
    let rec =
        Recording::create_plate(&root, &plate, spec(), &Ome::new(), options()).expect("create");
    assert!(matches!(
        rec.set_root_attribute("ome", json!({})),
        Err(Error::Attribute { .. })
    ));
    assert!(matches!(
        rec.remove_root_attribute("ome"),
        Err(Error::Attribute { .. })
    ));
    rec.set_root_attribute("screen", json!({"compound": "X"}))
        .expect("another attribute");
    rec.finish().expect("finish");
    let attrs = &read_json(&root.join("zarr.json"))["attributes"];
    assert_eq!(attrs["screen"]["compound"], "X");
    assert_eq!(attrs["ome"], plate.attributes().expect("attributes"));
}

#[test]
fn resume_continues_the_same_plate_and_refuses_another() {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("r.ome.zarr");
    let plate = Plate::grid(1, 2).fields(2);
    let images = plate.images().expect("images");
    let push_round = |rec: &Recording, t: u64| {
        for (i, image) in images.iter().enumerate() {
            let mut w = rec.array(image.key.as_str()).expect("array");
            let _ = w.push(&frame(i, t)).expect("push");
        }
    };
    let rec =
        Recording::create_plate(&root, &plate, spec(), &Ome::new(), options()).expect("create");
    push_round(&rec, 0);
    rec.finish().expect("finish");
    let other = Plate::grid(1, 2).fields(2).name("another");
    match Recording::create_plate(&root, &other, spec(), &Ome::new(), options().resume(true)) {
        Err(Error::ResumeMismatch { field, .. }) => assert_eq!(field, "plate"),
        other => panic!("expected ResumeMismatch, got {:?}", other.map(|_| ())),
    }
    let rec = Recording::create_plate(&root, &plate, spec(), &Ome::new(), options().resume(true))
        .expect("resume");
    push_round(&rec, 1);
    rec.finish().expect("finish");
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(&root).expect("store"));
    for (i, image) in images.iter().enumerate() {
        let array =
            zarrs::array::Array::open(store.clone(), &format!("/{}/0", image.key)).expect("open");
        let got = array
            .retrieve_array_subset::<Vec<u16>>(&zarrs::array::ArraySubset::new_with_shape(vec![
                2, H, W,
            ]))
            .expect("read");
        let want: Vec<u16> = (0..2).flat_map(|t| frame(i, t)).collect();
        assert!(got == want, "{}: resumed pixels differ", image.key);
    }
}

// ---------------------------------------------------------------- Python readers

#[test]
fn readers_validate_and_read_the_plate() {
    let Some(py) = pyenv::interop(
        zarrstream_testkit::target_tmp!(),
        "OME-ZARR PLATE READER TEST",
    ) else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("plate-readers-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let root = dir.path().join("plate.ome.zarr");
    let plate = plate();
    let ome = Ome::new().pixel_size(0.5, 0.5).levels(Levels::Count(2));
    let images = write(&root, &plate, &ome);
    let entries: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            let expected = dir.path().join(format!("image{i}.raw"));
            let bytes: Vec<u8> = (0..T)
                .flat_map(|t| frame(i, t))
                .flat_map(u16::to_le_bytes)
                .collect();
            fs::write(&expected, bytes).expect("expected");
            json!({"key": image.key, "expected": expected, "acquisition": image.acquisition})
        })
        .collect();
    let manifest = dir.path().join("manifest.json");
    let wells: Vec<String> = plate
        .well_list()
        .into_iter()
        .map(|(r, c)| format!("{r}/{c}"))
        .collect();
    let doc = json!({"plate": {
        "path": root, "rows": plate.rows(), "columns": plate.columns(), "wells": wells,
        "acquisitions": [0, 5], "field_count": 4, "name": "screen 7", "dtype": "<u2",
        "shape": [T, H, W], "levels": 2, "method": "mean", "images": entries,
    }});
    fs::write(&manifest, doc.to_string()).expect("manifest");
    pyenv::ome_check(&py, "plate", &manifest);
}
