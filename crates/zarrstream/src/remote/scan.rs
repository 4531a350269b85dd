//! What the staging directory holds: its documents (read children first, so a
//! document is never older than one below it), its shards, the other data files
//! (per-frame metadata chunks), the arrays a crash left temporary shards in, and its
//! marker.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::document::ArrayDocument;
use crate::error::{Error, RemoteError, Result};
use crate::store::{self, METADATA_FILE};

/// The hidden file in a staging directory's root that names its destination, so
/// [`upload_staged`](super::upload_staged) knows where the data goes.
pub(crate) const MARKER: &str = ".zarrstream-destination.json";

/// The destination a staging directory belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub(crate) struct Marker {
    pub(crate) url: String,
    /// `(K, N)` for one part of a several-process array.
    pub(crate) part: Option<(u64, u64)>,
    pub(crate) coordinate: bool,
}

impl Marker {
    pub(crate) fn write(&self, staging: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| Error::Internal(e.to_string()))?;
        Ok(store::publish_bytes(staging, MARKER, &bytes)?)
    }

    pub(crate) fn read(staging: &Path) -> Result<Self> {
        let path = staging.join(MARKER);
        let bytes = fs::read(&path).map_err(|e| Error::io("read", &path, e, 0))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            Error::Remote(RemoteError::Staging {
                path: staging.to_path_buf(),
                reason: format!("{MARKER} is not readable: {e}"),
            })
        })
    }
}

/// A file of the staging directory: its key (relative path with `/`) and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    pub(crate) rel: String,
    pub(crate) path: PathBuf,
}

/// Hidden entries are the writer's and the publisher's own (`.zarrstream-partial/`,
/// temporary files `.name.tmp`, the marker): never uploaded.
fn hidden(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// Whether the document at `dir` is a sharded array: its `c/` holds shards.
fn sharded(doc: &[u8]) -> bool {
    serde_json::from_slice::<ArrayDocument>(doc).is_ok_and(|d| {
        d.codecs
            .first()
            .is_some_and(|c| c.name == "sharding_indexed")
    })
}

/// `path` below `root` as a store key (components joined with `/`).
pub(crate) fn rel_of(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `zarr.json` below `root` with its bytes, in the order to upload them: a
/// directory's document before those below it (the order the writer publishes in).
/// Read in the reverse order, children first, so a reader never sees a per-frame
/// metadata document longer than its array's.
pub(crate) fn read_docs(root: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs)?;
    let mut docs = Vec::new();
    for dir in dirs.iter().rev() {
        let path = dir.join(METADATA_FILE);
        match fs::read(&path) {
            Ok(bytes) => docs.push((rel_of(root, &path), bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("read", &path, e, 0)),
        }
    }
    docs.reverse();
    Ok(docs)
}

/// Directories below `root` in pre-order, without hidden ones and without shard trees.
fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    out.push(dir.to_path_buf());
    let skip_c = fs::read(dir.join(METADATA_FILE)).is_ok_and(|d| sharded(&d));
    for e in read_dir(dir)? {
        let name = e.file_name();
        if hidden(&name) || (skip_c && name == "c") {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), out)?;
        }
    }
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(it) => Ok(it.flatten().collect()),
        // Removed meanwhile (the writer prunes empty directories).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("read directory", dir, e, 0)),
    }
}

/// The files below `root` that are neither documents nor shards (per-frame metadata
/// chunks): uploaded whenever they change, kept locally.
pub(crate) fn other_files(root: &Path) -> Result<Vec<(Staged, fs::Metadata)>> {
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs)?;
    let mut out = Vec::new();
    for dir in dirs {
        for e in read_dir(&dir)? {
            let name = e.file_name();
            if hidden(&name) || name == METADATA_FILE {
                continue;
            }
            if let Ok(meta) = e
                .metadata()
                .map_err(|_| ())
                .and_then(|m| if m.is_file() { Ok(m) } else { Err(()) })
            {
                let path = e.path();
                out.push((
                    Staged {
                        rel: rel_of(root, &path),
                        path,
                    },
                    meta,
                ));
            }
        }
    }
    Ok(out)
}

/// Every shard file below `root` (the `c/` trees of sharded arrays) with its length:
/// what an earlier run left, uploaded before anything new.
pub(crate) fn shards(root: &Path) -> Result<Vec<(Staged, u64)>> {
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs)?;
    let mut out = Vec::new();
    for dir in dirs {
        if fs::read(dir.join(METADATA_FILE)).is_ok_and(|d| sharded(&d)) {
            walk_files(root, &dir.join("c"), &mut out)?;
        }
    }
    Ok(out)
}

fn walk_files(root: &Path, dir: &Path, out: &mut Vec<(Staged, u64)>) -> Result<()> {
    for e in read_dir(dir)? {
        let name = e.file_name();
        if hidden(&name) {
            continue;
        }
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk_files(root, &path, out)?,
            Ok(t) if t.is_file() => {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((
                    Staged {
                        rel: rel_of(root, &path),
                        path,
                    },
                    len,
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The arrays below `root` whose `.zarrstream-partial/` holds temporary shards.
pub(crate) fn crashed_arrays(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs)?;
    Ok(dirs
        .into_iter()
        .filter(|d| {
            fs::read_dir(d.join(store::PARTIAL_DIR)).is_ok_and(|mut it| {
                it.any(|e| {
                    e.is_ok_and(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .ends_with(store::PARTIAL_SUFFIX)
                    })
                })
            })
        })
        .collect())
}
