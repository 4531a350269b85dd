//! Injected panics, for the tests of the poison policy in both bindings.

/// The environment variable that makes the bindings panic at named places, in debug
/// builds only: a comma-separated list of C entry point names (e.g. `zs_writer_create`:
/// a panic on entry) and `writer` or `recording` (a panic inside a call on a session of
/// that kind, which poisons it). It lets the tests prove that a panic comes back as an
/// internal error, never crossing into C, and that the session is refused afterwards.
/// Read once per process. (The name is the C API's, which its tests and users know.)
pub const INJECT_PANIC_ENV: &str = "ZARRSTREAM_CAPI_INJECT_PANIC";

/// Panics if [`INJECT_PANIC_ENV`] names `place`.
#[cfg(debug_assertions)]
pub fn inject_panic(place: &str) {
    use std::sync::OnceLock;
    // Read once: entry points run at frame rate.
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        std::env::var(INJECT_PANIC_ENV)
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default()
    });
    if names.iter().any(|n| n == place) {
        panic!("{INJECT_PANIC_ENV} asked for a panic in {place}");
    }
}

/// Release builds have no injected panics.
#[cfg(not(debug_assertions))]
pub fn inject_panic(_place: &str) {}
