//! A real S3-compatible object store for the object-store tests: Garage 2.5.0
//! (<https://garagehq.deuxfleurs.fr>) started as child processes on 127.0.0.1, one node or a
//! cluster, with a key and a bucket ready. Unix only.
//!
//! ```ignore
//! use zarrstream_testkit::garage;
//! if garage::require("S3 RECORDING").is_none() { return; } // skipped loudly outside CI
//! let dir = tempfile::tempdir().expect("a scratch directory for the nodes");
//! let g = garage::Garage::single(dir.path());
//! // g.endpoint(), g.region(), g.key_id(), g.secret(), g.bucket(), g.env() ...
//! ```
//!
//! The binary is `$ZARRSTREAM_GARAGE`, else `${ZARRSTREAM_CACHE:-$HOME/.cache/zarrstream}/
//! garage-2.5.0-o1/bin/garage` (`garage-2.5.0` for the benchmark: [`use_release_build`]),
//! built there by `tools/garage/build` when missing (`cargo install` with the features the
//! tests use; once per machine, serialised across test binaries and `.ci/run`'s background
//! installs by a lock file).
//! Outside CI a binary that cannot be had skips the test loudly; with `CI=true` it panics.
//!
//! Facts about Garage the tests rely on: path-style addressing, region `garage`, no
//! enforcement of conditional writes (`If-None-Match`/`If-Match` overwrite), and with
//! replication factor 3 reads and writes keep working with one of three nodes down (quorum 2).
//!
//! By job: `binary` finds, builds and checks the `garage` binary; `server` writes the
//! nodes' configs and starts, stops and waits for their processes; `cluster` connects the
//! nodes, applies the layout and follows which node sees which; `client` is the side the
//! tests talk to (endpoint, keys, buckets, the `garage` CLI, the S3 environment, reading
//! arrays back with `s3_read.py`).

mod binary;
mod client;
mod cluster;
mod server;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

pub use binary::{garage_binary, require, use_release_build};
pub use client::{npy, s3_read};

/// The Garage release the tests are written against (`tools/garage/VERSION`, which
/// `tools/garage/build` builds).
pub const VERSION: &str = include_str!("../../../../tools/garage/VERSION").trim_ascii();

/// The S3 region every server here is configured with.
pub const REGION: &str = "garage";

/// The name of the bucket [`Garage`] creates at start-up (S3 rules: lowercase, 3–63 chars).
pub const DEFAULT_BUCKET: &str = "zarrstream-test";

/// How long a node may take to boot, join or come back before the harness gives up. Generous
/// because the tests share two cores with compilers.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub use crate::python::in_ci;
use crate::python::shout;

/// One Garage server process and what is needed to restart it.
struct Node {
    config: PathBuf,
    log: PathBuf,
    // The node's ports as its configuration names them; kept with it for a debugger's
    // view, the S3 port is the one the tests use.
    #[allow(dead_code)]
    rpc_port: u16,
    s3_port: u16,
    #[allow(dead_code)]
    admin_port: u16,
    /// `HEXID@127.0.0.1:RPC_PORT`, known once the node has booted.
    id: String,
    child: Option<Child>,
}

impl Node {
    /// The node's full hexadecimal id (without the `@address`).
    fn hex_id(&self) -> &str {
        self.id.split('@').next().unwrap_or_default()
    }
}

/// A running Garage cluster of one or more nodes on 127.0.0.1 (replication factor = number
/// of nodes), with an access key that owns [`DEFAULT_BUCKET`]. Every node serves S3 for the
/// whole cluster. Dropping it kills every node; the data stay in the directory given.
pub struct Garage {
    bin: PathBuf,
    dir: PathBuf,
    nodes: Vec<Node>,
    key_id: String,
    secret: String,
    bucket: String,
}

/// The last `n` lines of a file (for error messages).
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
