//! The JSON the bindings hand out: a writer's or a recording's statistics (the C API's
//! `stats_json`, the Python `Stats`) and memory estimates. One serialisation, so the
//! two bindings cannot drift apart.

use zarrstream::config::{Config, RecordingConfig};
use zarrstream::{MemoryEstimate, RecordingStats, Stats};

use crate::BindError;

/// A serialisation failure: a bug, as every type serialised here is plain data.
fn internal(what: &str, e: &serde_json::Error) -> BindError {
    BindError::Library(zarrstream::Error::Internal(format!("{what} to JSON: {e}")))
}

/// A writer's statistics as one line of JSON: the library's serialisation of [`Stats`]
/// (the field names of the Rust struct, latency summaries in nanoseconds).
pub fn stats(s: &Stats) -> Result<String, BindError> {
    serde_json::to_string(s).map_err(|e| internal("statistics", &e))
}

/// A recording's statistics as one line of JSON: `{"arrays": {"<key>": <stats>, ...},
/// "total": <stats>}` (the library's serialisation, arrays in their order), each
/// `<stats>` as [`stats`] writes it.
pub fn recording_stats(s: &RecordingStats) -> Result<String, BindError> {
    serde_json::to_string(s).map_err(|e| internal("statistics", &e))
}

/// A memory estimate as one line of JSON: its parts (the library's field names), then
/// `resident` and `total`, in bytes.
pub fn estimate(e: &MemoryEstimate) -> Result<String, BindError> {
    let mut v = serde_json::to_value(e).map_err(|e| internal("memory estimate", &e))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("resident".into(), e.resident().into());
        o.insert("total".into(), e.total().into());
    }
    Ok(v.to_string())
}

/// The memory estimate of the writer that `config_json` (the `zarrstream::config` JSON)
/// describes, as [`estimate`] writes it.
pub fn estimate_writer(config_json: &str) -> Result<String, BindError> {
    let parsed = Config::parse(config_json)?.into_parsed()?;
    estimate(&parsed.estimate_memory()?)
}

/// The memory estimate of the recording that `config_json` (the
/// `zarrstream::config::RecordingConfig` JSON) describes, as [`estimate`] writes it.
pub fn estimate_recording(config_json: &str) -> Result<String, BindError> {
    estimate(&RecordingConfig::parse(config_json)?.estimate_memory()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Array, Session};
    use serde_json::Value;
    use std::time::Instant;

    const WRITER: &str = r#"{"array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
        "shard_shape": [2, 8, 8], "dtype": "uint8"}, "writer": {"threads": 1}}"#;

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
        let now = Instant::now();
        for _ in 0..3 {
            let outcome = rec.array("a").unwrap().push_bytes(&[7; 64], now).unwrap();
            assert!(outcome.is_accepted());
        }
        let outcome = rec.array(1).unwrap().push_bytes(&[1; 32], now).unwrap();
        assert!(outcome.is_accepted());
        let json = recording_stats(&rec.finish().unwrap()).unwrap();
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

    /// What a session's finish hands out parses back to the numbers of the frames
    /// pushed, with every field of the library's `Stats`.
    #[test]
    fn writer_stats_json_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (session, _) = Session::create_writer(&dir.path().join("w.zarr"), WRITER).unwrap();
        for i in 0..3u8 {
            assert!(session.push(None, &[i; 64], None).unwrap().is_accepted());
        }
        session.skip(None, 1).unwrap();
        let json = session.finish().unwrap();
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["frames_pushed"], 4, "{v}");
        assert_eq!(v["frames_written"], 3, "{v}");
        assert_eq!(v["frames_dropped"], 1, "{v}");
        assert_eq!(v["bytes_in"], 3 * 64, "{v}");
        assert_eq!(v["frame_latency_ns"]["count"], 3, "{v}");
        // Every field of the library's `Stats`, none added or lost on the way.
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bytes_in",
                "bytes_stored",
                "frame_latency_ns",
                "frames_dropped",
                "frames_pushed",
                "frames_written",
                "memory",
                "pool_bytes",
                "push_latency_ns",
                "seconds",
                "shards",
                "sink",
                "staging_bytes"
            ],
            "{v}"
        );
        // A recording's session hands out the recording's form.
        let rec = format!(
            r#"{{"writer": {{"threads": 1}}, "arrays": [{{"key": "k", "array": {}}}]}}"#,
            serde_json::from_str::<Value>(WRITER).unwrap()["array"]
        );
        let (session, _) = Session::create_recording(&dir.path().join("r.zarr"), &rec).unwrap();
        let pushed = session.push(Some(Array::Key("k")), &[9; 64], None).unwrap();
        assert!(pushed.is_accepted());
        let v: Value = serde_json::from_str(&session.finish().unwrap()).unwrap();
        assert_eq!(v["arrays"]["k"]["frames_written"], 1, "{v}");
        assert_eq!(v["total"]["frames_written"], 1, "{v}");
    }

    #[test]
    fn an_estimate_has_its_sums() {
        let v: Value = serde_json::from_str(&estimate_writer(WRITER).unwrap()).unwrap();
        let total = v["total"].as_u64().unwrap();
        let resident = v["resident"].as_u64().unwrap();
        assert!(total > 0 && resident > 0 && resident <= total, "{v}");
        let err = estimate_writer("{").unwrap_err();
        assert_eq!(err.kind(), zarrstream::ErrorKind::InvalidConfig, "{err}");
    }
}
