//! The statistics `zs_writer_finish` and `zs_recording_finish` hand back: the library's
//! own serialisation of `Stats` (field names of the Rust struct, latency summaries in
//! nanoseconds).

use zarrstream::{MemoryEstimate, RecordingStats, Stats};

/// The statistics as one line of JSON.
pub fn to_json(s: &Stats) -> Result<String, serde_json::Error> {
    serde_json::to_string(s)
}

/// A recording's statistics as one line of JSON: `{"arrays": {"<key>": <stats>, ...},
/// "total": <stats>}` (the library's serialisation, arrays in their order), each
/// `<stats>` as [`to_json`] writes it.
pub fn recording_to_json(s: &RecordingStats) -> Result<String, serde_json::Error> {
    serde_json::to_string(s)
}

/// A memory estimate as one line of JSON: its parts (the library's field names), then
/// `resident` and `total`, in bytes.
pub fn estimate_to_json(e: &MemoryEstimate) -> Result<String, serde_json::Error> {
    let mut v = serde_json::to_value(e)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("resident".into(), e.resident().into());
        o.insert("total".into(), e.total().into());
    }
    serde_json::to_string(&v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use zarrstream::config::RecordingConfig;

    #[test]
    fn recording_stats_are_keyed_by_array_with_a_total() {
        let dir = tempfile::tempdir().unwrap();
        let rec = RecordingConfig::parse(
            r#"{"writer": {"threads": 1}, "arrays": [
                {"key": "a", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                 "shard_shape": [2, 8, 8], "dtype": "uint8"}},
                {"key": "b/d", "array": {"shape": [0, 4, 4], "chunk_shape": [1, 4, 4],
                 "shard_shape": [2, 4, 4]}}]}"#,
        )
        .unwrap()
        .create(&dir.path().join("r.zarr"))
        .unwrap();
        let now = std::time::Instant::now();
        for _ in 0..3 {
            assert!(rec.push_bytes("a", &[7; 64], now).unwrap().is_accepted());
        }
        assert!(rec.push_bytes(1, &[1; 32], now).unwrap().is_accepted());
        let json = recording_to_json(&rec.finish().unwrap()).unwrap();
        let v: Value = serde_json::from_str(&json).unwrap();
        // The arrays in the recording's order, whatever map serde_json builds.
        let (a, bd) = (json.find("\"a\":{"), json.find("\"b/d\":{"));
        assert!(a.is_some() && a < bd, "{json}");
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
        assert_eq!(v["arrays"].as_object().unwrap().len(), 2, "{v}");
        assert_eq!(v["arrays"]["a"]["frames_written"], 3, "{v}");
        assert_eq!(v["arrays"]["a"]["bytes_in"], 3 * 64, "{v}");
        assert_eq!(v["arrays"]["b/d"]["frames_written"], 1, "{v}");
        assert_eq!(v["total"]["frames_written"], 4, "{v}");
        assert_eq!(v["total"]["bytes_in"], 3 * 64 + 32, "{v}");
        // Every object has the fields of a writer's statistics.
        let keys = |o: &Value| o.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&v["arrays"]["a"]), keys(&v["total"]));
        assert!(
            keys(&v["total"]).contains(&"push_latency_ns".to_string()),
            "{v}"
        );
    }
}
