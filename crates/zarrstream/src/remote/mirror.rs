//! The uploader: a thread with its own async runtime that sends the staging directory's
//! finished shards and documents to the store, in passes.
//!
//! One pass reads every document first, then takes the shards the finishers handed
//! over, uploads them (and changed per-frame metadata chunks) `uploads_in_flight` at a
//! time, deletes each shard's local copy once the store reports it at its full length,
//! and publishes the documents only when all of that succeeded. A document read before
//! the shards are taken covers only shards renamed before it was published, so the
//! store never shows a shape ahead of its data. A failed pass keeps everything for the
//! next one; failures that last past `upload_timeout` are reported to the writer.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};

use super::keys::KeyMap;
use super::options::RemoteOptions;
use super::parts;
use super::scan::{self, Marker, Staged};
use super::staging::Staging;
use super::target::{Existing, Target};
use crate::error::{Error, RemoteError, Result};

/// How long the uploader waits for a finished shard before looking again.
const IDLE: Duration = Duration::from_millis(50);

/// The most often a coordinator republishes the shared `zarr.json` while recording.
const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// Multipart parts of one object in flight at once.
const PARTS_IN_FLIGHT: usize = 2;

/// The upload state of one staging directory.
pub(crate) struct Uploads {
    target: Target,
    root: PathBuf,
    keys: KeyMap,
    coordinate: bool,
    part_size: usize,
    in_flight: usize,
    gate: Arc<Staging>,
    /// Shards taken from the gate (or found) and not yet uploaded.
    queue: Vec<(Staged, u64)>,
    /// What was last stored for each document and other file.
    docs: HashMap<String, Vec<u8>>,
    files: HashMap<String, (u64, Option<SystemTime>)>,
    /// Whether the shards already in staging were taken (a recording starts with an
    /// empty staging directory; `upload_staged` takes what a failed run left).
    scanned: bool,
    last_publish: Option<Instant>,
    report: UploadReport,
}

impl Uploads {
    pub(crate) fn new(
        target: Target,
        root: PathBuf,
        marker: &Marker,
        options: &RemoteOptions,
        gate: Arc<Staging>,
        leftovers: bool,
    ) -> Self {
        Uploads {
            target,
            root,
            keys: KeyMap { part: marker.part },
            coordinate: marker.coordinate,
            part_size: options.part_size,
            in_flight: options.uploads_in_flight,
            gate,
            queue: Vec::new(),
            docs: HashMap::new(),
            files: HashMap::new(),
            scanned: !leftovers,
            last_publish: None,
            report: UploadReport::default(),
        }
    }

    /// One pass (see the module docs). `Ok(true)` when it stored anything.
    async fn pass(&mut self, last: bool) -> Result<bool> {
        let docs = scan::read_docs(&self.root)?;
        if !self.scanned {
            // Before the gate's shards: what an earlier run left is uploaded first.
            for (s, len) in scan::shards(&self.root)? {
                self.gate.found(len);
                self.queue.push((s, len));
            }
            self.scanned = true;
        }
        for (path, len) in self.gate.take_finished() {
            if !self.queue.iter().any(|(s, _)| s.path == path) {
                let rel = scan::rel_of(&self.root, &path);
                self.queue.push((Staged { rel, path }, len));
            }
        }
        let others: Vec<Staged> = scan::other_files(&self.root)?
            .into_iter()
            .filter(|(s, m)| self.files.get(&s.rel) != Some(&(m.len(), m.modified().ok())))
            .map(|(s, _)| s)
            .collect();
        let mut stored = false;

        let shards = std::mem::take(&mut self.queue);
        let results: Vec<_> = futures::stream::iter(shards.into_iter().map(|(s, len)| {
            let t = &self.target;
            let k = self.keys;
            let ps = self.part_size;
            async move {
                let r = upload_file(t, &k.key(&s.rel), &s.path, ps).await;
                (s, len, r)
            }
        }))
        .buffer_unordered(self.in_flight)
        .collect()
        .await;
        let mut first_err = None;
        for (s, len, r) in results {
            match r {
                Ok(()) => {
                    // Confirmed at full length: the local copy can go.
                    match fs::remove_file(&s.path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io("remove", &s.path, e, 0)),
                    }
                    self.gate.released(len);
                    self.report.shards += 1;
                    self.report.bytes += len;
                    stored = true;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                    self.queue.push((s, len));
                }
            }
        }
        let results: Vec<_> = futures::stream::iter(others.into_iter().map(|s| {
            let t = &self.target;
            let k = self.keys;
            let ps = self.part_size;
            async move {
                let meta = fs::metadata(&s.path).ok();
                let r = upload_file(t, &k.key(&s.rel), &s.path, ps).await;
                (s, meta, r)
            }
        }))
        .buffer_unordered(self.in_flight)
        .collect()
        .await;
        for (s, meta, r) in results {
            match r {
                Ok(()) => {
                    if let Some(m) = meta {
                        self.files.insert(s.rel, (m.len(), m.modified().ok()));
                    }
                    stored = true;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        // Every shard the documents cover is in the store now.
        for (rel, bytes) in docs {
            if self.docs.get(&rel) == Some(&bytes) {
                continue;
            }
            let key = self.keys.key(&rel);
            let body = self.keys.body(&rel, bytes.clone());
            self.target
                .store
                .put(&self.target.path(&key), PutPayload::from(body))
                .await
                .map_err(|e| self.target.error(&key, &e))?;
            self.docs.insert(rel, bytes);
            self.report.documents += 1;
            stored = true;
        }
        let due = self
            .last_publish
            .is_none_or(|t| t.elapsed() >= PUBLISH_EVERY);
        if self.coordinate && (last || (stored && due)) {
            parts::publish(&self.target).await?;
            self.last_publish = Some(Instant::now());
        }
        Ok(stored)
    }

    /// Passes until one succeeds with nothing left, retrying failures with backoff for
    /// up to `timeout` in a row.
    pub(crate) async fn run_to_end(&mut self, timeout: Duration) -> Result<UploadReport> {
        let mut failing: Option<Instant> = None;
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.pass(true).await {
                Ok(_) if self.queue.is_empty() => return Ok(self.report.clone()),
                Ok(_) => failing = None,
                Err(e) => {
                    let since = *failing.get_or_insert_with(Instant::now);
                    if since.elapsed() >= timeout {
                        return Err(Error::Remote(self.with_staging(e)));
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Any failure of a pass as the upload error that names the staging directory
    /// keeping the data.
    fn with_staging(&self, e: Error) -> RemoteError {
        let (key, message) = match e {
            Error::Remote(RemoteError::Upload { key, message, .. }) => (key, message),
            other => (String::new(), other.to_string()),
        };
        RemoteError::Upload {
            url: self.target.url.clone(),
            key,
            message,
            staging: self.root.clone(),
        }
    }
}

/// Uploads the file at `path` as `key`: one PUT up to one part, else a multipart upload
/// with at most [`PARTS_IN_FLIGHT`] parts in flight, aborted on failure; then checks
/// that the store reports the object at the file's length.
async fn upload_file(t: &Target, key: &str, path: &Path, part_size: usize) -> Result<()> {
    let location = t.path(key);
    let err = |e: object_store::Error| Error::Remote(t.error(key, &e));
    let mut file = File::open(path).map_err(|e| Error::io("open", path, e, 0))?;
    let len = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e, 0))?
        .len();
    let read_part = |file: &mut File| -> Result<Bytes> {
        let mut buf = Vec::with_capacity(part_size);
        file.by_ref()
            .take(part_size as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", path, e, 0))?;
        Ok(Bytes::from(buf))
    };
    if len <= part_size as u64 {
        let body = read_part(&mut file)?;
        t.store
            .put(&location, PutPayload::from(body))
            .await
            .map_err(err)?;
    } else {
        let upload = t.store.put_multipart(&location).await.map_err(err)?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, part_size);
        let mut sent = 0u64;
        let streamed: Result<()> = async {
            while sent < len {
                w.wait_for_capacity(PARTS_IN_FLIGHT).await.map_err(err)?;
                let part = read_part(&mut file)?;
                if part.is_empty() {
                    break;
                }
                sent += part.len() as u64;
                w.put(part);
            }
            Ok(())
        }
        .await;
        match streamed {
            // Completing the upload makes the object appear whole, at once.
            Ok(()) => {
                w.finish().await.map_err(err)?;
            }
            Err(e) => {
                // Never completed, so never visible; abort frees the parts.
                let _ = w.abort().await;
                return Err(e);
            }
        }
    }
    let head = t.store.head(&location).await.map_err(err)?;
    if head.size != len {
        return Err(Error::Remote(RemoteError::Upload {
            url: t.url.clone(),
            key: key.to_string(),
            message: format!("the store reports {} bytes, {} were sent", head.size, len),
            staging: PathBuf::new(),
        }));
    }
    Ok(())
}

/// What [`upload_staged`](super::upload_staged) sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadReport {
    /// The destination, from the staging directory's marker.
    pub url: String,
    /// Shards uploaded (and deleted locally).
    pub shards: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Documents (`zarr.json`, progress objects) published.
    pub documents: u64,
}

/// A writer's uploader: the thread that mirrors its staging directory to the store.
pub(crate) struct Mirror {
    gate: Arc<Staging>,
    marker: Marker,
    root: PathBuf,
    url: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<UploadReport>>>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").field("url", &self.url).finish()
    }
}

impl Mirror {
    /// Opens `url`, checks it (credentials, bucket, nothing there unless `overwrite`),
    /// prepares the staging directory and starts the uploader. Returns the mirror and
    /// the local directory the writer records into.
    pub(crate) fn start(
        url: &str,
        options: &RemoteOptions,
        overwrite: bool,
        part: Option<(u64, u64)>,
    ) -> Result<Self> {
        let target = Target::open(url, options)?;
        let existing = match (part, overwrite) {
            (Some(_), _) => Existing::Keep,
            (None, true) => Existing::Replace,
            (None, false) => Existing::Refuse,
        };
        target.check(existing)?;
        let root = match &options.staging_dir {
            Some(d) => d.clone(),
            None => {
                let base = std::env::var_os("ZARRSTREAM_STAGING")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| std::env::temp_dir().join("zarrstream-staging"));
                let mut d = base.join(&target.staging_name);
                if let Some((k, _)) = part {
                    d.push(format!("part-{k}"));
                }
                d
            }
        };
        let marker = Marker {
            url: url.to_string(),
            part,
            coordinate: options.coordinate,
        };
        prepare_staging(&root, &marker)?;
        let gate = Arc::new(Staging::new(options.staging_budget));
        let stop = Arc::new(AtomicBool::new(false));
        // `prepare_staging` left no shard behind: every one comes from the finishers.
        let mut uploads = Uploads::new(
            target,
            root.clone(),
            &marker,
            options,
            Arc::clone(&gate),
            false,
        );
        let timeout = options.upload_timeout;
        let thread = {
            let stop = Arc::clone(&stop);
            let gate = Arc::clone(&gate);
            std::thread::Builder::new()
                .name("zarrstream-uploader".into())
                .spawn(move || run(&mut uploads, &gate, &stop, timeout))
                .map_err(|e| Error::Internal(format!("start the uploader thread: {e}")))?
        };
        Ok(Mirror {
            gate,
            marker,
            root,
            url: url.to_string(),
            stop,
            thread: Some(thread),
        })
    }

    /// Names the destination in the staging directory (which the writer has created),
    /// for `zarrstream upload`.
    pub(crate) fn mark(&self) -> Result<()> {
        self.marker.write(&self.root)
    }

    /// The local directory the writer records into.
    pub(crate) fn staging(&self) -> &Path {
        &self.root
    }

    /// The gate the writer's finishers and pushes use.
    pub(crate) fn gate(&self) -> &Arc<Staging> {
        &self.gate
    }

    /// Called after the writer finished: uploads what is left and publishes the final
    /// documents, then removes the staging directory. On failure the directory keeps
    /// what was not uploaded.
    pub(crate) fn finish(mut self) -> Result<UploadReport> {
        self.join()
    }

    fn join(&mut self) -> Result<UploadReport> {
        self.stop.store(true, Ordering::Release);
        let Some(t) = self.thread.take() else {
            return Err(Error::Closed);
        };
        let report = t
            .join()
            .map_err(|p| Error::panicked("the uploader thread", p.as_ref()))??;
        Self::clean(&self.root);
        Ok(UploadReport {
            url: self.url.clone(),
            ..report
        })
    }

    /// Removes a fully uploaded staging directory: kept while it holds temporary
    /// shards (a crashed writer's, for `zarrstream recover`) or any shard.
    pub(crate) fn clean(root: &Path) {
        if scan::shards(root).is_ok_and(|s| s.is_empty()) && !has_partials(root) {
            let _ = fs::remove_dir_all(root);
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.join();
        }
    }
}

fn has_partials(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|it| {
        it.flatten().any(|e| {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                has_partials(&p)
            } else {
                p.to_string_lossy().ends_with(crate::store::PARTIAL_SUFFIX)
            }
        })
    })
}

/// Makes way for a staging directory (the writer creates it): none there, or one left
/// by an earlier run of the same destination with nothing but documents (everything
/// else uploaded), which is removed. Data not yet uploaded, or another destination's,
/// is refused: `zarrstream upload` first.
fn prepare_staging(root: &Path, marker: &Marker) -> Result<()> {
    if root.exists() {
        let refuse = |reason: String| {
            Err(Error::Remote(RemoteError::Staging {
                path: root.to_path_buf(),
                reason,
            }))
        };
        match Marker::read(root) {
            Ok(m) if m.url != marker.url => {
                return refuse(format!("it stages data for {}", m.url));
            }
            Ok(_) => {}
            Err(_) if fs::read_dir(root).is_ok_and(|mut d| d.next().is_none()) => {}
            Err(_) => {
                return refuse(
                    "it is not an empty directory nor a zarrstream staging directory".into(),
                );
            }
        }
        if !scan::shards(root)?.is_empty() || has_partials(root) {
            return refuse(format!(
                "it holds data not yet uploaded to {}: run `zarrstream upload {}` first",
                marker.url,
                root.display()
            ));
        }
        fs::remove_dir_all(root).map_err(|e| Error::io("remove", root, e, 0))?;
    }
    Ok(())
}

/// The uploader thread: passes while the writer records, then passes to the end.
fn run(
    uploads: &mut Uploads,
    gate: &Staging,
    stop: &AtomicBool,
    timeout: Duration,
) -> Result<UploadReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("zarrstream-upload-io")
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("start the upload runtime: {e}")))?;
    let mut failing: Option<Instant> = None;
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Ordering::Acquire) {
        if gate.failure().is_some() {
            // Given up: wait for the writer to finish, then try once more to the end.
            std::thread::sleep(IDLE);
            continue;
        }
        match rt.block_on(uploads.pass(false)) {
            Ok(stored) => {
                failing = None;
                backoff = Duration::from_millis(100);
                if !stored {
                    gate.wait_finished(IDLE);
                }
            }
            Err(e) => {
                let since = *failing.get_or_insert_with(Instant::now);
                if since.elapsed() >= timeout {
                    gate.fail(uploads.with_staging(e));
                } else {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
    rt.block_on(uploads.run_to_end(timeout))
}
