//! The checks of what the C examples print (statistics, memory counts, a recording's
//! counts), shared by the Linux tests (`c_api.rs`) and the Windows ones under Wine
//! (`windows_dll.rs`) of the C API package.

/// The statistics JSON a record example printed on its last line.
pub fn stats_of(stdout: &str) -> serde_json::Value {
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("stats JSON ({e}): {last:?}"))
}

/// Checks the statistics a record example printed: `frames` pushed, all of them written.
pub fn check_stats(stdout: &str, frames: u64) {
    let s = stats_of(stdout);
    assert_eq!(s["frames_pushed"], frames, "{s}");
    assert_eq!(s["frames_written"], frames, "{s}");
    assert_eq!(s["frames_dropped"], 0, "{s}");
    assert_eq!(s["bytes_in"], frames * 256 * 256 * 2, "{s}");
    assert_eq!(s["shards"], frames.div_ceil(16), "{s}");
    assert_eq!(s["push_latency_ns"]["count"], frames, "{s}");
    check_memory(stdout, &s);
}

/// The estimate record.c printed bounds what the writer counted before finishing and
/// at its peak, and nothing is left counted after `zs_writer_finish`.
pub fn check_memory(stdout: &str, stats: &serde_json::Value) {
    let line = |prefix: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {stdout}"))
    };
    let est: serde_json::Value = serde_json::from_str(line("estimate: "))
        .unwrap_or_else(|e| panic!("record.c prints zs_estimate_memory's JSON ({e}): {stdout}"));
    // Every field below is a byte count in the library's `MemoryEstimate` (and the
    // statistics' `memory`): a missing or non-integer one is a changed C API.
    let field = |v: &serde_json::Value, path: &str| -> u64 {
        v.pointer(path)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{path} is a byte count in {v}"))
    };
    let resident = field(&est, "/resident");
    let parts: u64 = [
        "frame_pool",
        "staging",
        "encoders",
        "mapped_shards",
        "pyramid",
        "bookkeeping",
    ]
    .iter()
    .map(|k| field(&est, &format!("/{k}")))
    .sum();
    assert_eq!(parts, resident, "{est}");
    assert_eq!(
        est["total"].as_u64(),
        Some(resident + field(&est, "/page_cache"))
    );
    let live: Vec<u64> = line("memory: ")
        .split(' ')
        .map(|v| {
            v.parse()
                .unwrap_or_else(|e| panic!("record.c's memory line holds byte counts ({e}): {v:?}"))
        })
        .collect();
    let peak = field(stats, "/memory/peak");
    assert!(
        live[0] > 0 && live[0] <= live[1] && live[1] <= peak,
        "{live:?} {stats}"
    );
    assert!(peak <= resident, "peak {peak} > estimate {est}");
    // The pools were counted.
    assert!(peak >= field(stats, "/pool_bytes"), "{stats}");
    assert_eq!(stats["memory"]["current"], 0, "{stats}");
}

/// The frame counts recording.c reports (`counts: N0 N1 NI NW`).
pub fn recording_counts(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("counts: "))
        .unwrap_or_else(|| panic!("no counts line: {stdout}"));
    let counts: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    assert_eq!(counts.len(), 4, "{line}");
    counts
}

/// The statistics of recording.c's first finish: per array and in total.
pub fn check_recording_stats(stdout: &str) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("stats: "))
        .unwrap_or_else(|| panic!("no stats line: {stdout}"));
    let s: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("stats JSON ({e}): {line}"));
    let arrays = s["arrays"]
        .as_object()
        .unwrap_or_else(|| panic!("a Recording's statistics hold `arrays` by name: {s}"));
    // The object's key order is serde_json's (sorted, or insertion order when another
    // crate of the build enables its `preserve_order` feature): compare as a set.
    let mut keys: Vec<&str> = arrays.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["cam0", "img", "stage/cam1"], "{s}");
    let (cam0, cam1, img) = (
        &s["arrays"]["cam0"],
        &s["arrays"]["stage/cam1"],
        &s["arrays"]["img"],
    );
    assert_eq!(cam0["frames_written"], 9, "{s}");
    assert_eq!(cam0["bytes_in"], 9 * 48 * 64 * 2, "{s}");
    assert_eq!(cam1["frames_written"], 11, "{s}");
    assert_eq!(cam1["bytes_in"], 11 * 32 * 40, "{s}");
    assert_eq!(img["frames_written"], 3, "{s}");
    let total = &s["total"];
    assert_eq!(total["frames_written"], 9 + 11 + 3, "{s}");
    assert_eq!(total["frames_dropped"], 0, "{s}");
    assert_eq!(
        total["bytes_in"],
        9 * 48 * 64 * 2 + 11 * 32 * 40 + 3 * 16 * 16 * 2,
        "{s}"
    );
    assert_eq!(total["push_latency_ns"]["count"], 9 + 11 + 3, "{s}");
    check_memory(stdout, total);
    for a in arrays.values() {
        assert_eq!(a["memory"]["current"], 0, "{s}");
    }
}
