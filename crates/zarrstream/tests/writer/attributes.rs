//! Attributes set while recording: published at once and atomically, kept by every later
//! publication, never ahead of the data, and never clobbering keys the writer did not set.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use zarrstream::{ArraySpec, Error, Ome, Writer, WriterOptions};

fn doc(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("zarr.json")).expect("zarr.json")).expect("json")
}

fn spec() -> ArraySpec {
    ArraySpec::builder()
        .shape([0, 32, 32])
        .chunk_shape([1, 32, 32])
        .shard_shape([2, 32, 32])
        .attributes(
            json!({"given": {"at": "creation"}})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
        .build()
        .expect("spec")
}

/// Attributes as zarrs (a reader we did not write) sees them.
fn zarrs_attributes(dir: &Path) -> serde_json::Map<String, Value> {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(dir).expect("store"));
    let array = zarrs::array::Array::open(store, "/").expect("zarrs opens the array");
    array.attributes().clone()
}

#[test]
fn attributes_set_while_recording_survive_every_publication() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("a.zarr");
    let mut w = Writer::create(&dir, spec(), WriterOptions::default().threads(1)).expect("create");
    let frame = vec![7u16; 32 * 32];
    for _ in 0..4 {
        assert!(w.push(&frame).expect("push").is_accepted());
    }
    let before = doc(&dir);
    w.set_attribute("stage", json!({"x_um": 1200.5, "y_um": -30.0}))
        .expect("set");
    let after = doc(&dir);
    assert_eq!(after["attributes"]["stage"]["x_um"], 1200.5);
    assert_eq!(after["attributes"]["given"], json!({"at": "creation"}));
    // The attribute change republishes no further than the data already published.
    let committed = |d: &Value| d["attributes"]["zarrstream"]["frames_committed"].as_u64();
    // Present in both documents: `None` would pass every comparison below.
    for d in [&before, &after] {
        assert!(
            d["shape"][0].as_u64().is_some() && committed(d).is_some(),
            "{d}"
        );
    }
    assert!(after["shape"][0].as_u64() <= Some(w.frames_encoded()));
    assert!(committed(&after) >= committed(&before));
    assert!(after["shape"][0].as_u64() >= before["shape"][0].as_u64());

    w.set_attribute("stage", json!({"x_um": 1.0}))
        .expect("replace");
    w.set_attribute("given", json!("replaced"))
        .expect("replace the creation value");
    for _ in 0..6 {
        assert!(w.push(&frame).expect("push").is_accepted());
    }
    w.finish().expect("finish");
    let last = doc(&dir);
    assert_eq!(last["shape"][0], 10);
    assert_eq!(last["attributes"]["stage"], json!({"x_um": 1.0}));
    assert_eq!(last["attributes"]["given"], "replaced");
    assert_eq!(last["attributes"]["zarrstream"]["state"], "finished");
    let seen = zarrs_attributes(&dir);
    assert_eq!(seen["stage"], json!({"x_um": 1.0}));
    assert_eq!(seen["zarrstream"]["frames_committed"], 10);
}

#[test]
fn removing_an_attribute_keeps_the_others() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("r.zarr");
    let w = Writer::create(&dir, spec(), WriterOptions::default()).expect("create");
    w.set_attribute("a", json!(1)).expect("set");
    w.set_attribute("b", json!(2)).expect("set");
    w.remove_attribute("a").expect("remove");
    let d = doc(&dir);
    assert!(d["attributes"].get("a").is_none());
    assert_eq!(d["attributes"]["b"], 2);
    w.finish().expect("finish");
    assert_eq!(doc(&dir)["attributes"]["b"], 2);
}

#[test]
fn the_writers_own_namespace_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("o.zarr");
    let w = Writer::create(&dir, spec(), WriterOptions::default()).expect("create");
    for name in ["zarrstream", ""] {
        let e = w.set_attribute(name, json!({})).expect_err("refused");
        assert!(matches!(e, Error::Attribute { .. }), "{e}");
        assert!(e.to_string().contains(&format!("{name:?}")), "{e}");
    }
    assert!(matches!(
        w.set_group_attribute("x", json!(1)),
        Err(Error::NotAnImage(_))
    ));
    w.finish().expect("finish");
    assert_eq!(doc(&dir)["attributes"]["zarrstream"]["state"], "finished");
}

#[test]
fn image_group_attributes_keep_the_ome_metadata_and_foreign_keys() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("img.ome.zarr");
    let spec = ArraySpec::builder()
        .shape([0, 2, 32, 32])
        .chunk_shape([1, 1, 32, 32])
        .shard_shape([2, 2, 32, 32])
        .build()
        .expect("spec");
    let ome = Ome::new().channels(["GFP", "RFP"]);
    let mut w = Writer::create_ome(&root, spec, &ome, WriterOptions::default()).expect("create");
    // Someone else's key in the group document, e.g. an acquisition program's.
    let mut group = doc(&root);
    group["attributes"]["theirs"] = json!({"keep": true});
    std::fs::write(
        root.join("zarr.json"),
        serde_json::to_vec(&group).expect("json"),
    )
    .expect("write");
    let ome_before = group["attributes"]["ome"].clone();
    w.set_group_attribute("acquisition", json!({"operator": "ada"}))
        .expect("set");
    let e = w
        .set_group_attribute("ome", json!({}))
        .expect_err("refused");
    assert!(matches!(e, Error::Attribute { .. }), "{e}");
    assert!(w.push(&vec![1u16; 32 * 32]).expect("push").is_accepted());
    w.finish().expect("finish");
    let after = doc(&root);
    assert_eq!(after["attributes"]["acquisition"]["operator"], "ada");
    assert_eq!(after["attributes"]["theirs"], json!({"keep": true}));
    assert_eq!(after["attributes"]["ome"], ome_before);
    assert_eq!(after["node_type"], "group");
}
