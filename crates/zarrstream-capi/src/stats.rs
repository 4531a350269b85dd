//! The statistics `zs_writer_finish` and `zs_recording_finish` hand back: the library's
//! own serialisation of `Stats` (field names of the Rust struct, latency summaries in
//! nanoseconds).

use serde_json::{Map, Value, json};
use zarrstream::{RecordingStats, Stats};

/// The statistics as one line of JSON.
pub fn to_json(s: &Stats) -> Result<String, serde_json::Error> {
    serde_json::to_string(s)
}

/// A recording's statistics as one line of JSON: `{"arrays": {"<key>": <stats>, ...},
/// "total": <stats>}`, each `<stats>` as [`to_json`] writes it.
pub fn recording_to_json(s: &RecordingStats) -> Result<String, serde_json::Error> {
    let arrays = s
        .arrays
        .iter()
        .map(|(key, stats)| Ok((key.clone(), serde_json::to_value(stats)?)))
        .collect::<Result<Map<String, Value>, serde_json::Error>>()?;
    serde_json::to_string(&json!({"arrays": arrays, "total": s.total}))
}
