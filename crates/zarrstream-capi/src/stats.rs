//! The statistics `zs_writer_finish` hands back: the library's own serialisation of
//! `Stats` (field names of the Rust struct, latency summaries in nanoseconds).

use zarrstream::Stats;

/// The statistics as one line of JSON.
pub fn to_json(s: &Stats) -> Result<String, serde_json::Error> {
    serde_json::to_string(s)
}
