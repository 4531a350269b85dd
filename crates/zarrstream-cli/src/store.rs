//! What the subcommands share on top of the library's store reader
//! ([`zarrstream::store::StoreReader`]): a progress bar and coordinates as text.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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

/// The progress callback of the library's shard walks (`summarise`, `verify`), moving
/// `bar`: the walk tells the shard count with its first call, so the bar is made with
/// length 0 and takes `total` from each call.
pub(crate) fn advance(bar: &ProgressBar) -> impl FnMut(u64, u64) + Send + '_ {
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    }
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
