//! What the workspace's tests share, once: scratch directories ([`scratch!`]), the pinned
//! Python reader environments ([`python`]), the Garage S3 server ([`garage`]), the built
//! `zarrstream` CLI ([`cli`]), the Windows build under Wine ([`windows`]), the data mover
//! of the long-run test and bench ([`mover`]), deadlines for polls ([`wait`]) and the
//! layout oracles that do not take their answers from the library ([`layout`]). Per
//! package: the C examples' output checks ([`capi`]), the CLI's crash tests ([`crash`])
//! and the Python package's wheel ([`wheel`]).
//!
//! A dev-dependency of every package with tests (not published). What depends on the test
//! binary that calls it (`CARGO_TARGET_TMPDIR`, `CARGO_BIN_EXE_*`, set only while cargo
//! compiles integration tests and benches) is a macro, expanded in that binary, or a
//! parameter: [`scratch!`], [`target_tmp!`], [`cli_record!`].

pub mod capi;
pub mod cli;
#[cfg(unix)]
pub mod crash;
#[cfg(unix)]
pub mod garage;
pub mod layout;
pub mod mover;
pub mod python;
pub mod scratch;
pub mod wait;
#[cfg(unix)]
pub mod wheel;
pub mod windows;

/// Re-exported for the macros, so that a test package needs no `tempfile` of its own to
/// use [`scratch!`].
pub use tempfile;

/// The directory cargo gives the calling test binary for its data (`CARGO_TARGET_TMPDIR`,
/// `target/tmp`), as a `&'static Path`. A macro because cargo sets the variable only while
/// it compiles integration tests and benches, not this library.
#[macro_export]
macro_rules! target_tmp {
    () => {
        ::std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
    };
}

/// A fresh scratch directory named `<prefix><random>` under the calling test binary's
/// `target/tmp` (see [`target_tmp!`]), removed when the returned `TempDir` is dropped.
#[macro_export]
macro_rules! scratch {
    ($prefix:expr) => {
        $crate::scratch::scratch_in($crate::target_tmp!(), $prefix)
    };
}

/// `zarrstream record` from the binary cargo built for the calling package's tests
/// (`CARGO_BIN_EXE_zarrstream`: the CLI package's own tests only), to which a test adds
/// its options. Other packages build the CLI with [`cli::command`].
#[macro_export]
macro_rules! cli_record {
    () => {{
        let mut cmd = ::std::process::Command::new(env!("CARGO_BIN_EXE_zarrstream"));
        cmd.arg("record");
        cmd
    }};
}
