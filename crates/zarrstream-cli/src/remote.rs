//! `upload` (send what a recording left in its staging directory) and `publish` (the
//! shared `zarr.json` of an array recorded in parts), both thin over
//! `zarrstream::remote`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use zarrstream::remote::{RemoteOptions, publish_parts, upload_staged};

use crate::Outcome;

/// `zarrstream upload STAGING`.
#[derive(clap::Args)]
pub(crate) struct UploadArgs {
    /// The staging directory (named in the recording's upload error).
    staging: PathBuf,
    /// Seconds uploads may keep failing before giving up.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `zarrstream publish URL`.
#[derive(clap::Args)]
pub(crate) struct PublishArgs {
    /// The array recorded in parts (`s3://bucket/prefix`, `file:///shared/path`).
    url: String,
    /// Publish again every SECONDS until every part has finished (or one aborted).
    #[arg(long, value_name = "SECONDS")]
    watch: Option<f64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn upload(args: UploadArgs) -> Outcome {
    let options = RemoteOptions::default().upload_timeout(Duration::from_secs(args.timeout));
    let r = upload_staged(&args.staging, &options)?;
    if args.json {
        let doc =
            json!({"url": r.url, "shards": r.shards, "bytes": r.bytes, "documents": r.documents});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "uploaded {} shard(s), {} bytes, and {} document(s) to {}",
            r.shards, r.bytes, r.documents, r.url
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn publish(args: PublishArgs) -> Outcome {
    let options = RemoteOptions::default();
    loop {
        let r = publish_parts(&args.url, &options)?;
        if args.json {
            let doc = json!({"url": args.url, "parts": r.parts, "parts_found": r.parts_found,
                             "extent0": r.extent0, "state": r.state, "published": r.published});
            println!("{}", serde_json::to_string(&doc)?);
        } else {
            println!(
                "{}: {} of {} part(s) reported, {} step(s) on axis 0 published, {}",
                args.url, r.parts_found, r.parts, r.extent0, r.state
            );
        }
        match args.watch {
            Some(s) if r.state == "running" => {
                std::thread::sleep(Duration::from_secs_f64(s.max(0.1)))
            }
            _ => return Ok(ExitCode::SUCCESS),
        }
    }
}
