//! `zarrstream`: command-line tools for stores written by the zarrstream library.
//!
//! ```text
//! zarrstream recover STORE [--json]
//! ```
//!
//! Exit status: 0 on success, 1 when the command failed, 2 for invalid usage.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use zarrstream::recover::{RecoveryReport, ShardOutcome, recover_store};

#[derive(Parser)]
#[command(
    name = "zarrstream",
    version,
    about = "Tools for zarrstream Zarr v3 stores"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // --help and --version print and exit 0; usage errors exit 2.
        Err(e) => e.exit(),
    };
    match cli.command {
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
        let relocated = if s.chunks_relocated > 0 {
            format!(
                " ({} found at their compacted position)",
                s.chunks_relocated
            )
        } else {
            String::new()
        };
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
