//! The shared `zarr.json` of an array recorded by several processes, built from the
//! parts' progress objects by one coordinator ([`publish_parts`]).

use futures::TryStreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::Deserialize;
use serde_json::{Value, json};

use super::keys::{PARTS_DIR, progress_key};
use super::options::RemoteOptions;
use super::target::{Target, block_on};
use crate::document::{ArrayDocument, WriterAttributes};
use crate::error::{Error, RemoteError, Result};
use crate::store::METADATA_FILE;

/// What [`publish_parts`] found and published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishReport {
    /// The array's number of parts (`shape[1]`).
    pub parts: u64,
    /// Parts whose progress object exists.
    pub parts_found: u64,
    /// The published extent of axis 0: the steps every part committed.
    pub extent0: u64,
    /// `running`, `finished` (every part finished) or `aborted` (any part aborted).
    pub state: String,
    /// Whether `zarr.json` changed (it is not rewritten when it would be the same).
    pub published: bool,
}

/// Publishes the shared `zarr.json` of the several-process array at `url` from its
/// parts' progress objects (`.zarrstream-parts/K.json`): the array as one part
/// described it, with `shape[1]` the number of parts and `shape[0]` the steps every
/// part has committed, so readers see only frames all parts have uploaded. Run it at
/// any time during the recording and once at the end (`zarrstream publish URL`), from
/// one place only; it is the only writer of that object. Where the store enforces
/// conditional writes, a concurrent publication by someone else is
/// [`RemoteError::Conflict`] instead of a silent overwrite.
///
/// ```no_run
/// use zarrstream::remote::{RemoteOptions, publish_parts};
/// let r = publish_parts("s3://microscope/run-42.zarr", &RemoteOptions::default())?;
/// println!("{} of {} parts, {} time points, {}", r.parts_found, r.parts, r.extent0, r.state);
/// # Ok::<(), zarrstream::Error>(())
/// ```
pub fn publish_parts(url: &str, options: &RemoteOptions) -> Result<PublishReport> {
    let target = Target::open(url, options)?;
    block_on(publish(&target))?
}

/// One part's progress object (`_parts/<k>.json`), as each part's writer uploads it.
#[derive(Deserialize)]
struct Part {
    #[serde(rename = "part")]
    index: u64,
    parts: u64,
    array: ArrayDocument,
}

impl Part {
    /// The part's own progress; a part whose document lacks it has committed nothing.
    fn progress(&self) -> WriterAttributes {
        self.array
            .writer_attributes()
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn shape0(&self) -> u64 {
        self.array.shape.first().copied().unwrap_or(0)
    }
}

pub(crate) async fn publish(t: &Target) -> Result<PublishReport> {
    let dir = t.path(PARTS_DIR);
    let listed: Vec<_> = t
        .store
        .list(Some(&dir))
        .try_collect()
        .await
        .map_err(|e| Error::Remote(t.error(PARTS_DIR, &e)))?;
    let mut parts = Vec::new();
    for meta in listed {
        let key = meta.location.as_ref().to_string();
        if !key.ends_with(".json") {
            continue;
        }
        let bytes = t
            .store
            .get(&meta.location)
            .await
            .map_err(|e| Error::Remote(t.error(&key, &e)))?
            .bytes()
            .await
            .map_err(|e| Error::Remote(t.error(&key, &e)))?;
        let part: Part =
            serde_json::from_slice(&bytes).map_err(|e| invalid(t, &key, &e.to_string()))?;
        if t.path(&progress_key(part.index)) != meta.location {
            return Err(invalid(t, &key, "its part index does not match its name"));
        }
        parts.push(part);
    }
    parts.sort_by_key(|p| p.index);
    let Some(first) = parts.first() else {
        return Err(invalid(
            t,
            PARTS_DIR,
            "no part has published its progress yet",
        ));
    };
    let n = first.parts;
    if parts.iter().any(|p| p.parts != n || p.index >= n) {
        return Err(invalid(t, PARTS_DIR, "the parts disagree on their number"));
    }
    let found = parts.len() as u64;
    // A part that has not reported yet has committed nothing.
    let extent0 = if found < n {
        0
    } else {
        parts.iter().map(Part::shape0).min().unwrap_or(0)
    };
    let states: Vec<String> = parts
        .iter()
        .map(|p| p.progress().state.unwrap_or_else(|| "running".into()))
        .collect();
    let state = if states.iter().any(|s| s == "aborted") {
        "aborted"
    } else if found == n && states.iter().all(|s| s == "finished") {
        "finished"
    } else {
        "running"
    };
    // Each part's frames that the published extent shows.
    let mut committed = 0u64;
    let mut dropped = 0u64;
    let mut summary = Vec::new();
    for p in &parts {
        let ours = p.progress();
        let c = ours.frames_committed.unwrap_or(0);
        let per_step = c.checked_div(p.shape0()).unwrap_or(0);
        committed += c.min(extent0 * per_step);
        dropped += ours.frames_dropped.unwrap_or(0);
        summary.push(json!({"part": p.index, "state": ours.state, "frames_committed": c}));
    }
    let mut doc = first.array.clone();
    if doc.shape.len() < 2 {
        return Err(invalid(
            t,
            PARTS_DIR,
            "a part's array has fewer than two axes",
        ));
    }
    doc.shape[0] = extent0;
    doc.shape[1] = n;
    let mut ours = first.progress();
    ours.state = Some(state.into());
    ours.frames_committed = Some(committed);
    ours.frames_dropped = Some(dropped);
    ours.extra.insert("parts".into(), Value::from(summary));
    doc.set_writer_attributes(&ours)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let bytes = serde_json::to_vec_pretty(&doc).map_err(|e| Error::Internal(e.to_string()))?;
    let published = put_if_changed(t, bytes).await?;
    Ok(PublishReport {
        parts: n,
        parts_found: found,
        extent0,
        state: state.to_string(),
        published,
    })
}

/// Writes `zarr.json` unless it already holds `bytes`: an update of the version read
/// (or a create where none exists) where the store checks conditions, a plain write
/// where it cannot (`object_store` says so, or the store ignores them, as Garage does).
async fn put_if_changed(t: &Target, bytes: Vec<u8>) -> Result<bool> {
    let path = t.path(METADATA_FILE);
    let mode = match t.store.get(&path).await {
        Ok(got) => {
            let version = UpdateVersion {
                e_tag: got.meta.e_tag.clone(),
                version: got.meta.version.clone(),
            };
            let old = got
                .bytes()
                .await
                .map_err(|e| Error::Remote(t.error(METADATA_FILE, &e)))?;
            if old.as_ref() == bytes.as_slice() {
                return Ok(false);
            }
            PutMode::Update(version)
        }
        Err(object_store::Error::NotFound { .. }) => PutMode::Create,
        Err(e) => return Err(Error::Remote(t.error(METADATA_FILE, &e))),
    };
    let payload = PutPayload::from(bytes);
    match t
        .store
        .put_opts(&path, payload.clone(), PutOptions::from(mode))
        .await
    {
        Ok(_) => Ok(true),
        Err(
            object_store::Error::NotImplemented { .. } | object_store::Error::NotSupported { .. },
        ) => {
            t.store
                .put(&path, payload)
                .await
                .map_err(|e| Error::Remote(t.error(METADATA_FILE, &e)))?;
            Ok(true)
        }
        Err(e) => Err(Error::Remote(t.error(METADATA_FILE, &e))),
    }
}

fn invalid(t: &Target, key: &str, why: &str) -> Error {
    Error::Remote(RemoteError::Url {
        url: t.url.clone(),
        reason: format!("{key}: {why}"),
    })
}
