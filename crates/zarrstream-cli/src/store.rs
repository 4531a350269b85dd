//! What the subcommands share on top of the library's store reader
//! ([`zarrstream::store::StoreReader`]): a progress bar, coordinates as text, and the
//! space a file takes on disk.

use std::io::IsTerminal;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zarrstream::IoError;

/// Bytes the filesystem has allocated for a file (less than its length when sparse).
pub(crate) fn allocated_bytes(path: &Path) -> Result<u64, IoError> {
    let meta = std::fs::metadata(path).map_err(IoError::with("stat", path))?;
    Ok(meta.blocks() * 512)
}

/// A progress bar on stderr when it is a terminal and the output is not JSON; hidden
/// otherwise.
pub(crate) fn progress(len: u64, what: &'static str, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} shards ({eta} left)",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

/// Keys of shards as text `c/i/j/…` → display of inner-chunk coordinates `[a, b, c]`.
pub(crate) fn coords_text(c: &[u64]) -> String {
    let parts: Vec<String> = c.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_as_text() {
        assert_eq!(coords_text(&[1, 0, 2]), "[1, 0, 2]");
    }
}
