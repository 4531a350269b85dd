//! The Windows build for the tests that run it under Wine: `tools/windows/cargo` (Debian's
//! rustc-web with `-Z build-std` for `x86_64-pc-windows-gnu`, mingw-w64, Wine 8, all
//! installed on first use; builds cached in `${ZARRSTREAM_CACHE:-~/.cache/zarrstream}/
//! windows`).
//!
//! Outside CI a toolchain that cannot be had (not root, no network) skips the test
//! loudly; with `CI=true` it panics. Every child process runs under a deadline.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// The target the Windows build is for.
pub const TARGET: &str = "x86_64-pc-windows-gnu";

/// How long a cold build of the Windows dependencies may take here (about 25 minutes on
/// two busy cores: std, object_store's TLS stack, zarrs and blosc for the tests).
pub const BUILD_DEADLINE: Duration = Duration::from_secs(60 * 60);

pub use crate::python::{in_ci, shout};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Windows toolchain's environment, as `tools/windows/cargo --env` prints it.
#[derive(Debug, Clone)]
pub struct Win {
    /// The variables and their values.
    pub env: HashMap<String, String>,
}

impl Win {
    /// The profile `tools/windows/cargo` builds with unless told otherwise (`wine`:
    /// Cargo.toml's dev profile with dependencies at opt-level 1).
    pub fn profile(&self) -> &str {
        &self.env["ZARRSTREAM_WINDOWS_PROFILE"]
    }

    /// Where `tools/windows/cargo build` puts the Windows binaries.
    pub fn profile_dir(&self) -> PathBuf {
        PathBuf::from(&self.env["CARGO_TARGET_DIR"])
            .join(TARGET)
            .join(self.profile())
    }

    /// Wine's runner (`/usr/lib/wine/wine64`).
    pub fn wine(&self) -> PathBuf {
        PathBuf::from(&self.env["ZARRSTREAM_WINE"])
    }

    /// `tools/windows/cargo ARGS`, with its output, under `deadline`.
    pub fn cargo(&self, args: &[&str], deadline: Duration) -> Output {
        let mut cmd = Command::new(repo().join("tools/windows/cargo"));
        cmd.args(args).current_dir(repo());
        run(
            &mut cmd,
            deadline,
            &format!("tools/windows/cargo {}", args.join(" ")),
        )
    }

    /// Builds the Windows suite (`tools/windows/cargo build --suite`: `zarrstream.exe`,
    /// `zarrstream.dll` and the test binaries, into [`profile_dir`](Self::profile_dir)),
    /// panicking with cargo's output on failure. Every test builds all of it, never a part:
    /// a part alone resolves other features of the shared dependencies and would build
    /// them again.
    pub fn build_suite(&self) {
        let out = self.cargo(&["build", "--locked", "--quiet", "--suite"], BUILD_DEADLINE);
        assert!(
            out.status.success(),
            "tools/windows/cargo build --suite failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A command that runs the Windows program `exe` under Wine, in the Wine prefix.
    pub fn command(&self, exe: &Path) -> Command {
        let mut cmd = Command::new(self.wine());
        cmd.arg(exe);
        for k in ["WINEPREFIX", "WINEDEBUG", "WINEPATH"] {
            cmd.env(k, &self.env[k]);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs `cmd` (from [`command`](Self::command)) to its end under `deadline`.
    pub fn run(&self, cmd: &mut Command, deadline: Duration, what: &str) -> Output {
        run(cmd, deadline, what)
    }

    /// Ends every process of the Wine prefix (`wineserver -k`), so that a killed test
    /// leaves nothing behind.
    pub fn kill_all(&self) {
        let server = self.wine().with_file_name("wineserver");
        let _ = Command::new(server)
            .arg("-k")
            .env("WINEPREFIX", &self.env["WINEPREFIX"])
            .status();
    }
}

/// The Windows toolchain (installed when missing), or `None` after a loud skip of `what`
/// outside CI; with `CI=true` a missing toolchain panics. Worked out once per process.
pub fn require(what: &str) -> Option<Win> {
    static WIN: OnceLock<Result<Win, String>> = OnceLock::new();
    match WIN.get_or_init(setup) {
        Ok(w) => Some(w.clone()),
        Err(e) if in_ci() => panic!("{what}: the Windows toolchain is missing: {e}"),
        Err(e) => {
            shout(&format!(
                "\n{bar}\n{what} SKIPPED: no Windows toolchain.\n{e}\n\
                 (With CI=true this is a failure.)\n{bar}\n",
                bar = "!".repeat(78)
            ));
            None
        }
    }
}

fn setup() -> Result<Win, String> {
    let mut cmd = Command::new(repo().join("tools/windows/cargo"));
    cmd.arg("--env");
    // Installing the packages (apt) takes a few minutes on a fresh machine.
    let out = try_run(&mut cmd, Duration::from_secs(1800))?;
    if !out.status.success() {
        return Err(format!(
            "tools/windows/cargo --env failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut env = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line.strip_prefix("export ") else {
            continue;
        };
        let Some((k, v)) = rest.split_once('=') else {
            continue;
        };
        env.insert(k.to_string(), unquote(v));
    }
    for k in [
        "CARGO_TARGET_DIR",
        "ZARRSTREAM_WINE",
        "WINEPREFIX",
        "WINEDEBUG",
        "ZARRSTREAM_WINDOWS_PROFILE",
    ] {
        if !env.contains_key(k) {
            return Err(format!("tools/windows/cargo --env did not set {k}"));
        }
    }
    Ok(Win { env })
}

/// A value as bash's `printf %q` wrote it: backslash escapes (`std\,panic_abort`) or single
/// quotes; the script's values are paths and words, never `$'…'` strings.
fn unquote(v: &str) -> String {
    if let Some(inner) = v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.to_string();
    }
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Runs `cmd` with piped output under `deadline`; a child past it is killed and the
/// test fails naming `what`.
pub fn run(cmd: &mut Command, deadline: Duration, what: &str) -> Output {
    try_run(cmd, deadline).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn try_run(cmd: &mut Command, deadline: Duration) -> Result<Output, String> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    wait_output(child, deadline).map_err(|(status, out)| {
        format!(
            "{cmd:?} ran past its deadline of {deadline:?} and was killed ({status:?}):\n{}",
            String::from_utf8_lossy(&out)
        )
    })
}

/// Waits for `child` (stdout and stderr piped) until `deadline`, reading its output as
/// it comes so a chatty child never blocks on a full pipe. Past the deadline the child
/// is killed and its partial output returned as the error.
pub fn wait_output(
    mut child: Child,
    deadline: Duration,
) -> Result<Output, (Option<ExitStatus>, Vec<u8>)> {
    let pump = |r: Option<Box<dyn std::io::Read + Send>>| {
        let buf = std::sync::Arc::new(Mutex::new(Vec::new()));
        let b = std::sync::Arc::clone(&buf);
        let h = std::thread::spawn(move || {
            if let Some(mut r) = r {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = r.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    // Poisoned only if this very thread panicked while holding it, which
                    // `extend_from_slice` does not do short of running out of memory.
                    b.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .extend_from_slice(&chunk[..n]);
                }
            }
        });
        (buf, h)
    };
    let (out, ho) = pump(child.stdout.take().map(|s| Box::new(s) as _));
    let (err, he) = pump(child.stderr.take().map(|s| Box::new(s) as _));
    let end = Instant::now() + deadline;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = ho.join();
    let _ = he.join();
    // The readers are joined: whatever a panicking one left is still the bytes read.
    let stdout = std::mem::take(&mut *out.lock().unwrap_or_else(PoisonError::into_inner));
    let stderr = std::mem::take(&mut *err.lock().unwrap_or_else(PoisonError::into_inner));
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err((None, [stdout, stderr].concat())),
    }
}

/// A Linux path as Wine's programs name it (`Z:` is the root of the Linux file system).
pub fn wine_path(p: &Path) -> String {
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    format!("Z:{}", abs.display()).replace('/', "\\")
}

/// The `test result:` lines of a libtest run summed: `(passed, failed, ignored, binaries)`.
pub fn test_counts(output: &str) -> (u64, u64, u64, u64) {
    let mut sum = (0, 0, 0, 0);
    for line in output.lines() {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            continue;
        };
        let num = |key: &str| -> u64 {
            rest.split(';')
                .find_map(|part| part.trim().strip_suffix(key))
                .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
                .unwrap_or(0)
        };
        sum.0 += num(" passed");
        sum.1 += num(" failed");
        sum.2 += num(" ignored");
        sum.3 += 1;
    }
    sum
}

/// `x86_64-w64-mingw32-objdump -p FILE`: the PE headers, import and export tables.
pub fn objdump_p(file: &Path) -> String {
    let mut cmd = Command::new("x86_64-w64-mingw32-objdump");
    cmd.arg("-p").arg(file);
    let out = run(&mut cmd, Duration::from_secs(120), "objdump -p");
    assert!(
        out.status.success(),
        "objdump -p {} failed ({}):\n{}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DLLs a PE file imports (objdump's `DLL Name:` lines), lowercased, in table order.
pub fn pe_imports(objdump: &str) -> Vec<String> {
    objdump
        .lines()
        .filter_map(|l| l.trim().strip_prefix("DLL Name:"))
        .map(|n| n.trim().to_ascii_lowercase())
        .collect()
}

/// The names a PE file exports (the `[Ordinal/Name Pointer] Table` of objdump -p).
pub fn pe_exports(objdump: &str) -> Vec<String> {
    objdump
        .lines()
        .skip_while(|l| !l.contains("[Ordinal/Name Pointer] Table"))
        .skip(1)
        .map_while(|l| {
            let (_, name) = l.trim().strip_prefix('[')?.split_once(']')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// Whether `dll` (lowercase) comes with every Windows 10/11 install: the DLLs that the Rust
/// standard library, zarrstream's dependencies (through windows-sys, winapi and raw-dylib
/// imports) and mingw-w64's C start-up code import, and the core API sets. Anything else
/// (a mingw runtime such as libgcc_s_seh-1.dll or libwinpthread-1.dll, a versioned
/// python3XY.dll) would have to travel with the binary.
pub fn is_system_dll(dll: &str) -> bool {
    const SYSTEM: &[&str] = &[
        "advapi32.dll",
        "bcrypt.dll",
        "bcryptprimitives.dll",
        "cfgmgr32.dll",
        "crypt32.dll",
        "dbghelp.dll",
        "kernel32.dll",
        "msvcrt.dll",
        "ntdll.dll",
        "oleaut32.dll",
        "user32.dll",
        "userenv.dll",
        "ws2_32.dll",
    ];
    SYSTEM.contains(&dll) || (dll.starts_with("api-ms-win-core-") && dll.ends_with(".dll"))
}
