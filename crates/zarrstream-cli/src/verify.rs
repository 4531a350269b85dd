//! `zarrstream verify STORE [--decode] [--json]`: checks every shard of a store — the
//! index's crc32c, every entry inside the file and clear of the index and of the other
//! chunks, every inner chunk's crc32c (or a full decode when the array has none, or with
//! `--decode`) — and reports each problem with its shard key and inner-chunk
//! coordinates. Shards are checked in parallel. Exit status 1 on any problem.

use std::path::PathBuf;
use std::process::ExitCode;

use zarrstream::store::{CheckedBy, Report, StoreReader, verify};

use crate::store;

/// Options of `zarrstream verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The array directory (holding zarr.json).
    pub store: PathBuf,
    /// Decode every chunk completely, also where its crc32c already verified it.
    #[arg(long)]
    pub decode: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `verify`.
pub(crate) fn run(args: Args) -> crate::Outcome {
    let store = StoreReader::open(&args.store)?;
    let bar = store::progress(0, "verify", args.json);
    let report = verify(&store, args.decode, store::advance(&bar))?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    match report.problems.first() {
        None => Ok(ExitCode::SUCCESS),
        Some(first) => Err(format!(
            "{} problem(s) in {}; first: {first}",
            report.problems.len(),
            report.store.display()
        )
        .into()),
    }
}

fn print_text(r: &Report) {
    let how = match r.checked_by {
        CheckedBy::Crc32c => "crc32c",
        CheckedBy::Crc32cAndDecode => "crc32c and full decode",
        CheckedBy::Decode => "full decode (no crc32c)",
    };
    println!(
        "{}: {} shards, {} chunks checked by {how}, {} empty",
        r.store.display(),
        r.shards,
        r.chunks_checked,
        r.chunks_empty
    );
    for p in &r.problems {
        println!("  {p}");
    }
    if r.problems.is_empty() {
        println!("  OK: no problems");
    }
}
