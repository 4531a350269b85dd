//! The side the tests talk to: the S3 endpoint and credentials, keys and buckets, the
//! `garage` CLI, the environment an S3 client needs, and reading arrays in a bucket back.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{Garage, REGION, tail};

impl Garage {
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

    /// The bucket created at start-up ([`DEFAULT_BUCKET`](super::DEFAULT_BUCKET)).
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
    let size: usize = descr
        .get(2..)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{descr:?} is not a NumPy type string such as <u2"));
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
    let len = u16::try_from(header.len()).unwrap_or_else(|_| {
        panic!(
            "format 1.0 holds a header under 64 KiB, not {} bytes (shape {shape:?})",
            header.len()
        )
    });
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}
