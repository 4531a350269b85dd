//! The server processes: each node's config, starting, stopping and killing its process,
//! and waiting (with a deadline) until it answers.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{DEFAULT_BUCKET, Garage, Node, READY_TIMEOUT, REGION, garage_binary, shout, tail};

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
            .map(|_| {
                TcpListener::bind("127.0.0.1:0")
                    .unwrap_or_else(|e| panic!("bind a free port on 127.0.0.1 for a node: {e}"))
            })
            .collect();
        let ports: Vec<u16> = probes
            .iter()
            .map(|l| {
                l.local_addr()
                    .unwrap_or_else(|e| panic!("a socket bound just above has an address: {e}"))
                    .port()
            })
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
            fs::create_dir_all(&home)
                .unwrap_or_else(|e| panic!("create node {i}'s directory {}: {e}", home.display()));
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
            .unwrap_or_else(|e| panic!("write node {i}'s config {}: {e}", config.display()));
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
        g.lay_out();
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

    pub(super) fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .unwrap_or_else(|e| panic!("open node {i}'s log {}: {e}", node.log.display()));
        let log2 = log
            .try_clone()
            .unwrap_or_else(|e| panic!("a second descriptor of node {i}'s log (stderr): {e}"));
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

    /// Polls until `check` gives `Ok`, panicking after [`READY_TIMEOUT`] with the last error
    /// and node `i`'s log; also fails at once if the node's process has exited.
    pub(super) fn wait_for(
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
    pub(super) fn wait_rpc(&mut self, i: usize) {
        self.wait_for(i, "RPC up (`garage status`)", |g| {
            g.try_cli(i, &["status"]).map(drop)
        });
    }

    /// Until node `i`'s S3 API answers a request for the default bucket with an HTTP status
    /// below 500 (an unsigned request gets 403; what matters is that S3 is served).
    pub(super) fn wait_s3(&mut self, i: usize) {
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
        .unwrap_or_else(|e| panic!("read {bytes} random bytes from /dev/urandom (Unix): {e}"));
    buf.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
