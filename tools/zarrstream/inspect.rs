//! `zarrstream inspect`: not written yet (issue 6).

use std::path::PathBuf;

/// Options of `zarrstream inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> crate::Outcome {
    let _ = (&args.store, args.json);
    Err("not implemented yet".into())
}
