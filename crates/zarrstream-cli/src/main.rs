//! `zarrstream`: record camera streams, and command-line tools for the stores the
//! zarrstream library writes.
//!
//! ```text
//! zarrstream record [--out PATH] [--shape ...] [--frames N] [--report FILE] ... (--help)
//! zarrstream recover STORE [--json]
//! zarrstream inspect STORE [--shard KEY] [--json]
//! zarrstream verify STORE [--decode] [--json]
//! zarrstream refs STORE --format json|parquet [--url-template T] [--out PATH] [--json]
//! zarrstream convert LEGACY OUT [--json]
//! zarrstream compact STORE [--order c|morton] [--json]
//! zarrstream upload STAGING [--timeout SECONDS] [--json]
//! zarrstream publish URL [--watch SECONDS] [--json]
//! ```
//!
//! Exit status: 0 on success, 1 when the command failed, 2 for invalid usage.

use std::path::PathBuf;
use std::process::ExitCode;

mod compact;
mod convert;
mod inspect;
mod record;
mod refs;
mod remote;
mod store;
mod verify;

use clap::{Parser, Subcommand};
use zarrstream::recover::{RecoveryReport, ShardOutcome, recover_store};

#[derive(Parser)]
#[command(
    name = "zarrstream",
    version,
    about = "Record camera streams into sharded Zarr v3 arrays, and tools for the stores"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Stream frames from the synthetic sCMOS camera (or a raw file) into a sharded Zarr
    /// v3 array, an OME-Zarr image, several arrays or a plate, and report throughput,
    /// compression, latency and memory (a JSON report with --report).
    ///
    /// Acquisition PCs run it; tests and benchmarks drive it. DESIGN.md §5 is the contract
    /// of its options and report.
    Record(Box<record::Options>),
    /// Rebuild the unfinished shards a crashed writer left in STORE/.zarrstream-partial/
    /// from their verified chunks, rename them into place and republish zarr.json.
    ///
    /// Refuses a store a live writer still holds (its lock on writer.lock).
    Recover {
        /// The array directory (holding zarr.json).
        store: PathBuf,
        /// Print the report as JSON instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Summarise an array: shape, dtype, chunk and shard shapes, codecs, sizes, empty
    /// chunks and gaps; with --shard KEY, that shard's index as a table.
    Inspect(inspect::Args),
    /// Check every shard: index crc32c and bounds, every chunk's crc32c (or a full
    /// decode); exits 1 on any problem.
    Verify(verify::Args),
    /// Write a kerchunk reference set for the inner-chunk view of the array.
    Refs(refs::Args),
    /// Convert an array in a pre-standard sharding layout to standard Zarr v3 sharding,
    /// without recompressing.
    Convert(convert::Args),
    /// Rewrite sparse shards (with gaps) as dense ones, and with --order put every
    /// shard's chunks in C or Morton order, in place and crash-safe.
    Compact(compact::Args),
    /// Upload what a recording to an object store left in its staging directory (the
    /// store went away, or the process died: run `recover` on its arrays first), then
    /// republish the metadata; removes the directory once everything is uploaded.
    Upload(remote::UploadArgs),
    /// Publish the shared zarr.json of an array recorded in parts (`zarrstream record --part-of`)
    /// from every part's progress: run it any time during the recording and at the end.
    Publish(remote::PublishArgs),
}

/// A subcommand's outcome: `Ok(status)` or an error printed as one line (exit 1).
type Outcome = Result<ExitCode, Box<dyn std::error::Error>>;

/// Runs a subcommand and turns an error into one line on stderr and exit status 1.
fn finish(name: &str, outcome: Outcome) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("zarrstream {name}: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // --help and --version print and exit 0; usage errors exit 2.
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Record(options) => record::main(*options),
        Command::Recover { store, json } => match recover_store(&store) {
            Ok(report) => {
                if json {
                    match serde_json::to_string_pretty(&report) {
                        Ok(text) => println!("{text}"),
                        Err(e) => {
                            eprintln!("zarrstream recover: error: {e}");
                            return ExitCode::from(1);
                        }
                    }
                } else {
                    print_summary(&report);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("zarrstream recover: error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Inspect(args) => finish("inspect", inspect::run(args)),
        Command::Verify(args) => finish("verify", verify::run(args)),
        Command::Refs(args) => finish("refs", refs::run(args)),
        Command::Convert(args) => finish("convert", convert::run(args)),
        Command::Compact(args) => finish("compact", compact::run(args)),
        Command::Upload(args) => finish("upload", remote::upload(args)),
        Command::Publish(args) => finish("publish", remote::publish(args)),
    }
}

fn print_summary(r: &RecoveryReport) {
    let store = r.store.display();
    let state = r.previous_state.as_deref().unwrap_or("unknown");
    if !r.published {
        println!(
            "{store}: nothing to recover (state {state}, {} frames committed, shape {:?})",
            r.frames_committed, r.shape
        );
        report_leftovers(r);
        return;
    }
    println!("{store}: recovered (the writer had left it in state {state})");
    println!(
        "  shards: {} temporary, {} rebuilt into place",
        r.shards.len(),
        r.shards_recovered
    );
    for s in &r.shards {
        let what = match s.outcome {
            ShardOutcome::Rebuilt => format!("rebuilt, {} bytes", s.bytes),
            ShardOutcome::Empty if s.chunks_rejected == 0 => {
                "no chunk written, removed".to_string()
            }
            ShardOutcome::Empty => "no chunk verified, removed".to_string(),
            ShardOutcome::Unrecoverable => "no readable index, set aside".to_string(),
        };
        let mut relocated = if s.chunks_relocated > 0 {
            format!(
                " ({} found at their compacted position)",
                s.chunks_relocated
            )
        } else {
            String::new()
        };
        if s.chunks_from_torn_entries > 0 {
            relocated += &format!(
                " ({} from torn index entries, length read off the chunk)",
                s.chunks_from_torn_entries
            );
        }
        println!(
            "    {}: {} chunks kept{relocated}, {} rejected: {what}",
            s.key, s.chunks_kept, s.chunks_rejected
        );
    }
    println!(
        "  chunks: {} kept, {} rejected ({})",
        r.chunks_kept,
        r.chunks_rejected,
        r.validation.describe()
    );
    for c in &r.rejected {
        println!("    {} chunk {}: {}", c.shard, c.chunk, c.reason);
    }
    let before = r
        .frames_committed_before
        .map_or_else(|| "unknown".to_string(), |n| n.to_string());
    println!(
        "  frames: {} committed ({} recovered; {before} before)",
        r.frames_committed, r.frames_recovered
    );
    println!("  shape: {:?} (was {:?})", r.shape, r.shape_before);
    report_leftovers(r);
}

fn report_leftovers(r: &RecoveryReport) {
    for d in &r.damaged_shards {
        println!("  warning: finished shard {d} has an unreadable index; left as it is");
    }
    for f in &r.skipped_files {
        println!("  warning: .zarrstream-partial/{f} is not a temporary shard; left as it is");
    }
}
