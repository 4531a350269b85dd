//! A real S3-compatible object store for the object-store tests: Garage 2.5.0
//! (<https://garagehq.deuxfleurs.fr>) started as child processes on 127.0.0.1, one node or a
//! cluster, with a key and a bucket ready. Unix only.
//!
//! ```ignore
//! use zarrstream_testkit::garage;
//! if garage::require("S3 RECORDING").is_none() { return; } // skipped loudly outside CI
//! let dir = tempfile::tempdir().unwrap();
//! let g = garage::Garage::single(dir.path());
//! // g.endpoint(), g.region(), g.key_id(), g.secret(), g.bucket(), g.env() ...
//! ```
//!
//! The binary is `$ZARRSTREAM_GARAGE`, else `${ZARRSTREAM_CACHE:-$HOME/.cache/zarrstream}/
//! garage-2.5.0/bin/garage`, built there with `cargo install` when missing (about nine
//! minutes on two cores; once per machine, serialised across test binaries by a lock file).
//! Outside CI a binary that cannot be had skips the test loudly; with `CI=true` it panics.
//!
//! Facts about Garage the tests rely on: path-style addressing, region `garage`, no
//! enforcement of conditional writes (`If-None-Match`/`If-Match` overwrite), and with
//! replication factor 3 reads and writes keep working with one of three nodes down (quorum 2).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The Garage release the tests are written against.
pub const VERSION: &str = "2.5.0";

/// The S3 region every server here is configured with.
pub const REGION: &str = "garage";

/// The name of the bucket [`Garage`] creates at start-up (S3 rules: lowercase, 3–63 chars).
pub const DEFAULT_BUCKET: &str = "zarrstream-test";

/// How long a node may take to boot, join or come back before the harness gives up. Generous
/// because the tests share two cores with compilers.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub use crate::python::in_ci;
use crate::python::shout;

// ------------------------------------------------------------------------- the binary

/// Where the Garage binary is expected: `$ZARRSTREAM_GARAGE`, else the cache's build.
pub fn garage_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ZARRSTREAM_GARAGE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    cache_root().join("bin/garage")
}

/// `${ZARRSTREAM_CACHE:-$HOME/.cache/zarrstream}/garage-2.5.0`: the `cargo install` root.
fn cache_root() -> PathBuf {
    let cache = std::env::var_os("ZARRSTREAM_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
            PathBuf::from(home).join(".cache/zarrstream")
        });
    cache.join(format!("garage-{VERSION}"))
}

/// The Garage binary, built first if it is missing (see the module docs), and checked with
/// `garage --version`. Worked out once per process; the error says why it cannot be had.
pub fn garage_binary() -> Result<PathBuf, String> {
    static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BINARY.get_or_init(find_or_build).clone()
}

/// `Ok` as `Some`; an error is a panic in CI and a loud skip of `what` elsewhere.
pub fn require(what: &str) -> Option<PathBuf> {
    match garage_binary() {
        Ok(p) => Some(p),
        Err(e) if in_ci() => panic!("{what}: the Garage S3 server is missing: {e}"),
        Err(e) => {
            shout(&format!(
                "\n{bar}\n{what} SKIPPED: no Garage S3 server.\n{e}\n\
                 (With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            None
        }
    }
}

fn find_or_build() -> Result<PathBuf, String> {
    let bin = garage_path();
    if std::env::var_os("ZARRSTREAM_GARAGE").is_some_and(|p| !p.is_empty()) {
        // A binary the user named is used as it is, never built over.
        return check_version(&bin).map(|()| bin);
    }
    if !bin.exists() {
        let root = cache_root();
        let parent = root.parent().ok_or("no cache directory")?;
        fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        // Concurrent test binaries wait here for the one that builds; the lock goes with the
        // file descriptor when this function returns (or the process dies).
        let lock_path = parent.join(format!("garage-{VERSION}.lock"));
        let lock =
            File::create(&lock_path).map_err(|e| format!("create {}: {e}", lock_path.display()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
        if !bin.exists() {
            build(&root)?;
        }
    }
    check_version(&bin).map(|()| bin)
}

/// `cargo install garage --locked --version 2.5.0 --root ROOT`, its output in a log beside.
fn build(root: &Path) -> Result<(), String> {
    // Beside the root, not inside it: `cargo install` owns the root's contents.
    let beside = |what: &str| root.with_file_name(format!("garage-{VERSION}.{what}"));
    let (log_path, scratch) = (beside("build.log"), beside("build-target"));
    shout(&format!(
        "\n{bar}\nBUILDING Garage {VERSION} (the S3 server of the object-store tests) into {}\n\
         with `cargo install`: about 9 minutes on 2 cores, once per machine. Log: {}\n\
         (Set ZARRSTREAM_GARAGE=/path/to/garage to use a binary you have.)\n{bar}\n",
        root.display(),
        log_path.display(),
        bar = "=".repeat(78)
    ));
    let log = File::create(&log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let status = Command::new(&cargo)
        .args([
            "install",
            "garage",
            "--locked",
            "--version",
            VERSION,
            "--root",
        ])
        .arg(root)
        .arg("--target-dir")
        .arg(&scratch)
        // The running `cargo test` holds its own target directory's lock: a nested cargo
        // pointed there would wait for it forever.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .status()
        .map_err(|e| format!("cannot run {} ({e}); install Rust's cargo", cargo.display()));
    let _ = fs::remove_dir_all(&scratch);
    let status = status?;
    if !status.success() {
        return Err(format!(
            "`cargo install garage --version {VERSION}` failed ({status}); the end of {}:\n{}",
            log_path.display(),
            tail(&log_path, 30)
        ));
    }
    shout(&format!(
        "Garage {VERSION} built in {:.0} s.",
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}

fn check_version(bin: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} ({e})", bin.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} --version failed ({}): {said}{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if !said.contains(VERSION) {
        shout(&format!(
            "warning: {} is `{}`, the tests are written against Garage {VERSION}",
            bin.display(),
            said.trim()
        ));
    }
    Ok(())
}

/// The last `n` lines of a file (for error messages).
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ------------------------------------------------------------------------- the servers

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

impl Garage {
    /// One node (replication factor 1) with its files under `dir`.
    ///
    /// Panics, with the node's log, when the binary is missing or the node does not come up.
    pub fn single(dir: &Path) -> Garage {
        Garage::cluster(dir, 1)
    }

    /// `nodes` nodes (replication factor `nodes`, all in zone `dc1`, 1 GB each) connected to
    /// each other, the layout applied and every node reporting a healthy cluster; node `i`
    /// keeps its config, metadata, data and log in `dir/node<i>/`.
    ///
    /// Panics, with the logs, when the binary is missing or the cluster does not come up.
    pub fn cluster(dir: &Path, nodes: usize) -> Garage {
        assert!(nodes >= 1, "a Garage cluster needs at least one node");
        let bin = garage_binary().unwrap_or_else(|e| panic!("no Garage binary: {e}"));
        let secret = random_hex(32);
        // All ports are picked while every probe socket is still open, so no two coincide.
        let probes: Vec<TcpListener> = (0..nodes * 3)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a probe port"))
            .collect();
        let ports: Vec<u16> = probes
            .iter()
            .map(|l| l.local_addr().expect("probe port").port())
            .collect();
        drop(probes);
        let mut g = Garage {
            bin,
            dir: dir.to_path_buf(),
            nodes: Vec::with_capacity(nodes),
            key_id: String::new(),
            secret: String::new(),
            bucket: DEFAULT_BUCKET.to_string(),
        };
        for i in 0..nodes {
            let home = dir.join(format!("node{i}"));
            fs::create_dir_all(&home).expect("create the node's directory");
            let (rpc_port, s3_port, admin_port) =
                (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]);
            let config = home.join("garage.toml");
            fs::write(
                &config,
                format!(
                    "metadata_dir = \"{meta}\"\n\
                     data_dir = \"{data}\"\n\
                     db_engine = \"sqlite\"\n\
                     replication_factor = {nodes}\n\
                     rpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
                     rpc_public_addr = \"127.0.0.1:{rpc_port}\"\n\
                     rpc_secret = \"{secret}\"\n\
                     \n\
                     [s3_api]\n\
                     s3_region = \"{REGION}\"\n\
                     api_bind_addr = \"127.0.0.1:{s3_port}\"\n\
                     \n\
                     [admin]\n\
                     api_bind_addr = \"127.0.0.1:{admin_port}\"\n",
                    meta = home.join("meta").display(),
                    data = home.join("data").display(),
                ),
            )
            .expect("write the node's config");
            g.nodes.push(Node {
                config,
                log: home.join("garage.log"),
                rpc_port,
                s3_port,
                admin_port,
                id: String::new(),
                child: None,
            });
        }
        let started = Instant::now();
        for i in 0..nodes {
            g.spawn(i);
        }
        for i in 0..nodes {
            g.wait_rpc(i);
            let id = g.cli(i, &["node", "id", "-q"]);
            g.nodes[i].id = id.trim().to_string();
        }
        for i in 1..nodes {
            let peer = g.nodes[i].id.clone();
            g.cli(0, &["node", "connect", &peer]);
        }
        // Every node in one assignment: the layout's first version holds them all.
        let ids: Vec<String> = g.nodes.iter().map(|n| n.hex_id().to_string()).collect();
        let mut assign = vec!["layout", "assign", "-z", "dc1", "-c", "1G"];
        assign.extend(ids.iter().map(String::as_str));
        g.cli(0, &assign);
        g.cli(0, &["layout", "apply", "--version", "1"]);
        for i in 0..nodes {
            g.wait_healthy(i);
        }
        let (key_id, key_secret) = g.create_key("zarrstream-test");
        g.key_id = key_id;
        g.secret = key_secret;
        g.create_bucket(DEFAULT_BUCKET);
        for i in 0..nodes {
            g.wait_s3(i);
        }
        shout(&format!(
            "garage: {nodes} node(s) ready in {:.1} s under {}",
            started.elapsed().as_secs_f64(),
            dir.display()
        ));
        g
    }

    /// The S3 endpoint of node 0, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.endpoint_of(0)
    }

    /// The S3 endpoint of node `i`.
    pub fn endpoint_of(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i].s3_port)
    }

    /// The S3 region, `garage`.
    pub fn region(&self) -> &str {
        REGION
    }

    /// The access key id that owns [`Garage::bucket`] and every bucket of
    /// [`Garage::create_bucket`].
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The secret of [`Garage::key_id`].
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The bucket created at start-up ([`DEFAULT_BUCKET`]).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The number of nodes (never zero: a harness starts at least one).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The directory holding the nodes' files (`node<i>/garage.toml`, `garage.log`, ...).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates bucket `name` with read, write and owner permission for [`Garage::key_id`].
    pub fn create_bucket(&self, name: &str) {
        self.cli(0, &["bucket", "create", name]);
        self.cli(
            0,
            &[
                "bucket",
                "allow",
                "--read",
                "--write",
                "--owner",
                name,
                "--key",
                &self.key_id,
            ],
        );
    }

    /// Creates an access key named `name` with no permission on any bucket (for the
    /// refused-credential tests) and returns `(key id, secret)`.
    pub fn create_key(&self, name: &str) -> (String, String) {
        let payload = serde_json::json!({ "name": name }).to_string();
        let out = self.cli(0, &["json-api", "CreateKey", &payload]);
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("garage json-api CreateKey: not JSON ({e}): {out}"));
        let field = |k: &str| {
            v[k].as_str()
                .unwrap_or_else(|| panic!("garage json-api CreateKey: no {k} in {out}"))
                .to_string()
        };
        (field("accessKeyId"), field("secretAccessKey"))
    }

    /// The environment an S3 client (object_store's `AmazonS3Builder::from_env`, botocore,
    /// tensorstore's `environment` credentials) needs to reach node 0 with the owner key:
    /// `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP=true`.
    pub fn env(&self) -> Vec<(String, String)> {
        self.env_of(0)
    }

    /// Like [`Garage::env`], through node `i`.
    pub fn env_of(&self, i: usize) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint_of(i)),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_DEFAULT_REGION", REGION.to_string()),
            ("AWS_ACCESS_KEY_ID", self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Stops node `i` the way an operator does (SIGTERM, then SIGKILL after 10 s) and waits
    /// for it to exit. Its data stay; [`Garage::start_node`] brings it back. The other nodes
    /// may see it up a while longer (see [`Garage::wait_seen_down`]).
    pub fn stop_node(&mut self, i: usize) {
        self.halt(i, true);
    }

    /// Kills node `i` at once (SIGKILL, a crash) and waits for it to exit.
    pub fn kill_node(&mut self, i: usize) {
        self.halt(i, false);
    }

    /// Restarts a stopped node `i` with the same config and data and waits until it and
    /// every running node see each other up again and it answers S3 requests.
    pub fn start_node(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "garage node {i} is running");
        let started = Instant::now();
        self.spawn(i);
        self.wait_rpc(i);
        self.wait_mesh(i);
        self.wait_s3(i);
        shout(&format!(
            "garage: node {i} back in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
    }

    /// Runs `garage -c CONFIG_OF_NODE_i ARGS...` and returns its stdout; panics with the
    /// command's output and the node's log if it fails.
    pub fn cli(&self, i: usize, args: &[&str]) -> String {
        self.try_cli(i, args).unwrap_or_else(|e| {
            panic!(
                "{e}\n--- end of node {i}'s log ({}):\n{}",
                self.nodes[i].log.display(),
                tail(&self.nodes[i].log, 40)
            )
        })
    }

    /// Like [`Garage::cli`], the failure returned.
    pub fn try_cli(&self, i: usize, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.nodes[i].config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {} ({e})", self.bin.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "`garage {}` on node {i} failed ({}):\n{stdout}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("open the node's log");
        let log2 = log.try_clone().expect("open the node's log");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&node.config)
            .arg("server")
            .env("RUST_LOG", "garage=info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e})", self.bin.display()));
        node.child = Some(child);
    }

    fn halt(&mut self, i: usize, gently: bool) {
        let Some(mut child) = self.nodes[i].child.take() else {
            return;
        };
        let started = Instant::now();
        let mut exited = false;
        if gently {
            let pid = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let until = Instant::now() + Duration::from_secs(10);
            while !exited && Instant::now() < until {
                exited = matches!(child.try_wait(), Ok(Some(_)));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
        }
        shout(&format!(
            "garage: node {i} {} in {:.1} s",
            if gently { "stopped" } else { "killed" },
            started.elapsed().as_secs_f64()
        ));
    }

    /// Waits until every running node sees node `i` down. Garage notices a dead peer only
    /// when it next sends to it (its ping comes every 15 s), so this can take that long;
    /// until then requests routed to the dead node fail over to the other replicas anyway.
    pub fn wait_seen_down(&mut self, i: usize) {
        let gone = self.nodes[i].hex_id().to_string();
        for j in self.running() {
            self.wait_for(j, &format!("node {i} seen down"), |g| {
                match g.sees(j)?.iter().find(|(id, _)| *id == gone) {
                    Some((_, true)) => Err(format!("node {j} still sees node {i} up")),
                    _ => Ok(()),
                }
            });
        }
    }

    /// The indices of the nodes whose server is running.
    fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&j| self.nodes[j].child.is_some())
            .collect()
    }

    /// Every node node `j` knows, as (hex id, up).
    fn sees(&self, j: usize) -> Result<Vec<(String, bool)>, String> {
        let out = self.try_cli(j, &["json-api", "GetClusterStatus"])?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| format!("not JSON ({e}): {out}"))?;
        let nodes = v["nodes"]
            .as_array()
            .ok_or_else(|| format!("no nodes in {out}"))?;
        Ok(nodes
            .iter()
            .map(|n| {
                let id = n["id"].as_str().unwrap_or_default().to_string();
                (id, n["isUp"] == true)
            })
            .collect())
    }

    /// Until node `i` and every other running node see each other up. Garage's peers open
    /// their own connections to a restarted node only at their next retry (seen taking 3 to
    /// 30 s), so each is asked to connect now.
    fn wait_mesh(&mut self, i: usize) {
        let running = self.running();
        for &j in &running {
            for &k in &running {
                if (j == i) != (k == i) {
                    let _ = self.try_cli(j, &["node", "connect", &self.nodes[k].id]);
                }
            }
        }
        for &j in &running {
            let others: Vec<(usize, String)> = running
                .iter()
                .filter(|&&k| k != j && (j == i || k == i))
                .map(|&k| (k, self.nodes[k].hex_id().to_string()))
                .collect();
            self.wait_for(j, "connected again", |g| {
                let seen = g.sees(j)?;
                for (k, id) in &others {
                    if !seen.iter().any(|(s, up)| s == id && *up) {
                        return Err(format!("node {j} does not see node {k} up"));
                    }
                }
                Ok(())
            });
        }
    }

    /// Polls until `check` gives `Ok`, panicking after [`READY_TIMEOUT`] with the last error
    /// and node `i`'s log; also fails at once if the node's process has exited.
    fn wait_for(
        &mut self,
        i: usize,
        what: &str,
        mut check: impl FnMut(&Garage) -> Result<(), String>,
    ) {
        let until = Instant::now() + READY_TIMEOUT;
        let mut pause = Duration::from_millis(50);
        loop {
            let last = match check(self) {
                Ok(()) => return,
                Err(e) => e,
            };
            let exited = self.nodes[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() >= until {
                let why = match exited {
                    Some(status) => format!("the server exited ({status})"),
                    None => format!("no success within {} s", READY_TIMEOUT.as_secs()),
                };
                panic!(
                    "garage node {i}: {what}: {why}; last error: {last}\n--- end of its log ({}):\n{}",
                    self.nodes[i].log.display(),
                    tail(&self.nodes[i].log, 40)
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Until the node's RPC answers the CLI.
    fn wait_rpc(&mut self, i: usize) {
        self.wait_for(i, "RPC up (`garage status`)", |g| {
            g.try_cli(i, &["status"]).map(drop)
        });
    }

    /// Until node `i` reports the cluster `healthy`: connected to every storage node of
    /// the layout, every partition with all its nodes.
    fn wait_healthy(&mut self, i: usize) {
        self.wait_for(i, "cluster healthy (json-api GetClusterHealth)", |g| {
            let out = g.try_cli(i, &["json-api", "GetClusterHealth"])?;
            let v: serde_json::Value =
                serde_json::from_str(&out).map_err(|e| format!("not JSON ({e}): {out}"))?;
            let all = |k: &str| v[k].as_u64().is_some() && v[k] == v["partitions"];
            if v["status"] == "healthy"
                && v["storageNodesUp"].as_u64() == Some(g.nodes.len() as u64)
                && all("partitionsAllOk")
            {
                Ok(())
            } else {
                Err(out)
            }
        });
    }

    /// Until node `i`'s S3 API answers a request for the default bucket with an HTTP status
    /// below 500 (an unsigned request gets 403; what matters is that S3 is served).
    fn wait_s3(&mut self, i: usize) {
        let port = self.nodes[i].s3_port;
        let bucket = self.bucket.clone();
        self.wait_for(i, "S3 API answering", |_| {
            let status = http_status(port, &bucket)?;
            if status < 500 {
                Ok(())
            } else {
                Err(format!("HTTP {status}"))
            }
        });
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // A failing test usually removes the directory next: the servers' side of the
        // story goes to stderr first.
        if std::thread::panicking() {
            for (i, node) in self.nodes.iter().enumerate() {
                shout(&format!(
                    "--- end of garage node {i}'s log ({}):\n{}",
                    node.log.display(),
                    tail(&node.log, 25)
                ));
            }
        }
    }
}

/// The status code of `GET /BUCKET` on 127.0.0.1:`port`, spoken by hand: the probe needs
/// only the status line, and no HTTP client is a dependency of the tests.
fn http_status(port: u16, bucket: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 64];
    let mut got = 0;
    while got < 12 {
        match s.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&head[..got]);
    line.strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {line:?}"))
}

/// `bytes` random bytes as hex, from the kernel (the tests need no random-number crate).
fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("read /dev/urandom");
    buf.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

// ------------------------------------------------------------ checking arrays in a bucket

/// Runs `tests/interop/s3_read.py` with the interop interpreter `py` against `bucket`/
/// `prefix` on `g`'s node 0 (credentials: the owner key), `args` being the expectation, e.g.
/// `["--expect", "frames.npy"]` or `["--expect-prefix-of", "frames.npy"]` (see the script's
/// docstring). Returns whether every reader passed and the script's output (one
/// `PASS`/`FAIL` line per reader); the output is also printed for `--nocapture` runs.
pub fn s3_read(
    py: &Path,
    g: &Garage,
    bucket: &str,
    prefix: &str,
    args: &[&std::ffi::OsStr],
) -> (bool, String) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../zarrstream/tests/interop/s3_read.py");
    let out = Command::new(py)
        .arg(script)
        .args([
            "--endpoint",
            &g.endpoint(),
            "--bucket",
            bucket,
            "--key-prefix",
            prefix,
        ])
        .args(["--region", g.region()])
        .args(args)
        .envs(g.env())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run s3_read.py with {}: {e}", py.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("s3_read.py {prefix}:\n{text}");
    (out.status.success(), text)
}

/// A `.npy` file (NumPy format 1.0) of C-order elements `data` with type `descr` (a NumPy
/// type string such as `<u2`, `|u1`, `<f4`) and `shape`, the expected-data format of
/// `s3_read.py`. Panics if `data` does not hold `shape`'s elements of `descr`'s size.
pub fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let size: usize = descr[2..].parse().expect("a NumPy type string such as <u2");
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>() * size,
        "{descr} data of shape {shape:?}"
    );
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let dims = match dims.len() {
        1 => format!("{},", dims[0]),
        _ => dims.join(", "),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}");
    // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64
    // and ended by a newline, as the format asks.
    let pad = (64 - (10 + header.len() + 1) % 64) % 64;
    header.extend(std::iter::repeat_n(' ', pad));
    header.push('\n');
    let len = u16::try_from(header.len()).expect("npy header under 64 KiB");
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}
