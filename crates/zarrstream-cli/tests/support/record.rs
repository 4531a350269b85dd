//! `zarrstream record` for the tests that drive it: the binary cargo built for this
//! package's tests (`CARGO_BIN_EXE_zarrstream`), so no test builds anything itself.
//! Included with `#[path = "support/record.rs"] mod record_cli;`.

use std::process::Command;

/// `zarrstream record`, to which a test adds its options.
pub(crate) fn record() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zarrstream"));
    cmd.arg("record");
    cmd
}
