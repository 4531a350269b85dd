use std::sync::Arc;
use std::time::Instant;

use zarrs::array::Array;
use zarrs::array::ArraySubset;
use zarrs::filesystem::FilesystemStore;
use zarrstream::{ArraySpec, Codec, Writer, WriterOptions};

#[test]
fn smoke() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.zarr");
    let spec = ArraySpec::builder()
        .shape([0, 100, 70])
        .chunk_shape([1, 32, 32])
        .shard_shape([4, 64, 64])
        .codec(Codec::lz4(1))
        .build()
        .unwrap();
    let mut w = Writer::create(&path, spec, WriterOptions::default()).unwrap();
    let mut all = Vec::new();
    for k in 0..10u16 {
        let f: Vec<u16> = (0..100 * 70).map(|i| (i as u16).wrapping_mul(k + 1) / 7).collect();
        w.push_at(&f, Instant::now()).unwrap();
        all.extend(f);
    }
    let stats = w.finish().unwrap();
    assert_eq!(stats.frames_written, 10);
    let store = Arc::new(FilesystemStore::new(&path).unwrap());
    let array = Array::open(store, "/").unwrap();
    assert_eq!(array.shape(), &[10, 100, 70]);
    let got: Vec<u16> =
        array.retrieve_array_subset_elements(&ArraySubset::new_with_shape(vec![10, 100, 70])).unwrap();
    assert_eq!(got, all);
}
