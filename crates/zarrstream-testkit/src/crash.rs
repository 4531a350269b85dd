//! What the crash tests share (`crash_recovery.rs`, `kill_campaign.rs`): the known
//! frames they record, `zarrstream record` run as a child that reports its progress and
//! is killed with SIGKILL, and child processes that cannot hang a test. Unix only.

// Each test uses a part of this module.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The signal number of SIGKILL (the same on every Unix the tests run on).
pub const SIGKILL: i32 = 9;

/// Element `i` (C order) of input frame `k`: never the fill value 0, so a chunk reads
/// either as its input or as fill; a third of each frame is noise so the codecs take
/// their incompressible paths too.
pub fn sample(k: u64, i: usize) -> u16 {
    let smooth = (i as u64 / 3 + k * 1009) as u16;
    let v = if (i / 64 + k as usize).is_multiple_of(3) {
        let mut z = (k << 32 ^ i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u16
    } else {
        smooth
    };
    v.max(1)
}

/// Writes `frames` input frames of `pixels` elements each as raw little-endian `u16`
/// (what `record --input` reads).
pub fn write_input(path: &Path, frames: u64, pixels: usize) {
    let mut bytes = Vec::with_capacity(frames as usize * pixels * 2);
    for k in 0..frames {
        for i in 0..pixels {
            bytes.extend(sample(k, i).to_le_bytes());
        }
    }
    std::fs::write(path, bytes)
        .unwrap_or_else(|e| panic!("write the input frames to {}: {e}", path.display()));
}

/// Every file under `store` whose name says it is a temporary shard.
pub fn partial_files(store: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![store.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains(".partial") {
                found.push(p);
            }
        }
    }
    found
}

/// What a `record --progress` child has said on stderr so far.
#[derive(Debug, Default, Clone)]
pub struct Progress {
    /// The largest `encoded N`: frames whose chunks were all in their shard files.
    pub encoded: u64,
    /// How many `encoded` lines.
    pub lines: u64,
    /// `sink S`: the sink the writer uses.
    pub sink: Option<String>,
    /// Every other line (errors, panics).
    pub other: Vec<String>,
}

impl Progress {
    fn take(&mut self, line: String) {
        if let Some(Ok(n)) = line.strip_prefix("encoded ").map(str::parse::<u64>) {
            self.encoded = self.encoded.max(n);
            self.lines += 1;
        } else if let Some(s) = line.strip_prefix("sink ") {
            self.sink = Some(s.to_string());
        } else {
            self.other.push(line);
        }
    }
}

/// Why [`Recorder::wait_for`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The condition holds.
    Reached,
    /// Stderr closed: the process has ended (or is ending).
    Ended,
    /// The deadline passed first.
    Deadline,
}

/// A `record --progress` child. Killed and reaped when dropped, so a failing test
/// leaves no process behind.
pub struct Recorder {
    child: Option<Child>,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
    /// What the child reported so far.
    pub progress: Progress,
    /// When the child was started.
    pub started: Instant,
}

impl Recorder {
    /// Starts `cmd` (`zarrstream record --progress`) with stderr read by a
    /// thread, so the pipe never fills and the lines printed before a kill are kept.
    pub fn spawn(mut cmd: Command) -> Recorder {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", cmd.get_program()));
        // Invariant: the command's stderr is `Stdio::piped()` above.
        let stderr = child
            .stderr
            .take()
            .expect("stderr was set to a pipe just above");
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Recorder {
            child: Some(child),
            lines,
            reader: Some(reader),
            progress: Progress::default(),
            started: Instant::now(),
        }
    }

    /// Reads progress until `until` holds, the child's stderr closes or `deadline`.
    pub fn wait_for(&mut self, deadline: Instant, until: impl Fn(&Progress) -> bool) -> Wait {
        loop {
            if until(&self.progress) {
                return Wait::Reached;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.progress.take(line),
                Err(RecvTimeoutError::Timeout) => return Wait::Deadline,
                Err(RecvTimeoutError::Disconnected) => return Wait::Ended,
            }
        }
    }

    /// Sends SIGKILL (a no-op for a process that has already ended), reaps the child
    /// and reads what it printed before it died. Returns its exit status (a signal 9 if
    /// the kill ended it, its own status if it had ended before).
    pub fn kill(mut self) -> (ExitStatus, Progress) {
        // Invariant: `child` is `Some` until `kill` (which consumes self) or `Drop`.
        let mut child = self
            .child
            .take()
            .expect("the child is taken only here and in Drop, and `kill` consumes the Recorder");
        let _ = child.kill();
        let status = child
            .wait()
            .unwrap_or_else(|e| panic!("reap the killed record (our own child): {e}"));
        // The pipe closes with the process (`record` starts no processes of its own).
        while let Ok(line) = self.lines.recv() {
            self.progress.take(line);
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        (status, std::mem::take(&mut self.progress))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether `status` is the end of a process killed by SIGKILL.
pub fn killed(status: &ExitStatus) -> bool {
    status.signal() == Some(SIGKILL)
}

/// A finished child process: its status and output.
#[derive(Debug)]
pub struct Ran {
    /// How the child ended.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

impl Ran {
    /// Whether it panicked: Rust's panic message, or the exit code a panic leaves.
    pub fn panicked(&self) -> bool {
        String::from_utf8_lossy(&self.stderr).contains("panicked")
            || self.status.code() == Some(101)
            || self.status.signal().is_some()
    }
}

/// Runs `cmd` to its end, or kills it after `timeout` (an error then): a hung tool
/// fails the test instead of hanging it.
pub fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Ran, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("spawn {cmd:?}: {e}"))?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?} did not end within {timeout:?}; killed"));
            }
        }
    };
    Ok(Ran {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}
