//! What the array's `zarr.json` says, and the one lock every publication of it takes.
//!
//! The finisher republishes the document as the visible extent grows; the caller may
//! replace an attribute at any time ([`Writer::set_attribute`](crate::writer::Writer::set_attribute)).
//! Both go through [`Published`], so the two never race on the temporary file, an
//! attribute change keeps the extent and progress last published (it never shows frames
//! ahead of the data), and an extent change keeps the attributes last set.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Map, Value};

use crate::document::GroupDocument;
use crate::error::{Error, Result};
use crate::frame_meta::MetaStore;
use crate::metadata::{self, Progress};
use crate::spec::ArraySpec;

/// The namespace of the writer's own attributes (`attributes.zarrstream`).
pub(crate) const OURS: &str = crate::document::WRITER_ATTRIBUTES;

/// The attributes of the array and the last extent and progress published.
#[derive(Debug)]
pub(crate) struct Published {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    attributes: Map<String, Value>,
    last: Option<(u64, Progress)>,
    /// Per-frame metadata, published right after the array's document.
    frame_meta: Option<MetaStore>,
}

impl Published {
    pub(crate) fn new(attributes: Map<String, Value>) -> Self {
        Published {
            inner: Mutex::new(Inner {
                attributes,
                last: None,
                frame_meta: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while publishing leaves the last complete state, still correct.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Attaches the per-frame metadata, published from now on after each document.
    pub(crate) fn attach_frame_meta(&self, store: MetaStore) {
        self.lock().frame_meta = Some(store);
    }

    /// Publishes `dir/zarr.json` with `shape[0] = shape0` and `progress`, then the
    /// per-frame metadata of the frames in the `extent0` visible steps of axis 0 (never
    /// more).
    pub(crate) fn publish(
        &self,
        dir: &Path,
        spec: &ArraySpec,
        (shape0, extent0): (u64, u64),
        progress: &Progress,
    ) -> Result<()> {
        let mut inner = self.lock();
        let doc = metadata::array_json_with(spec, shape0, progress, &inner.attributes);
        metadata::publish(dir, &doc)?;
        inner.last = Some((shape0, progress.clone()));
        if let Some(meta) = &mut inner.frame_meta {
            // One value per frame: every frame of the visible steps of axis 0.
            meta.publish(extent0.saturating_mul(spec.frames_per_step()))?;
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) the attribute `name` and republishes the last
    /// extent and progress with it. Other attributes are kept.
    pub(crate) fn set_attribute(
        &self,
        dir: &Path,
        spec: &ArraySpec,
        name: &str,
        value: Option<Value>,
    ) -> Result<()> {
        check_name(name, OURS)?;
        let mut inner = self.lock();
        let previous = match value {
            Some(v) => inner.attributes.insert(name.to_string(), v),
            None => inner.attributes.remove(name),
        };
        if let Some((shape0, progress)) = inner.last.clone() {
            let doc = metadata::array_json_with(spec, shape0, &progress, &inner.attributes);
            if let Err(e) = metadata::publish(dir, &doc) {
                // Not published: the document on disk still has the old value.
                match previous {
                    Some(v) => inner.attributes.insert(name.to_string(), v),
                    None => inner.attributes.remove(name),
                };
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Refuses an empty attribute name and the namespace the writer keeps for itself.
pub(crate) fn check_name(name: &str, reserved: &str) -> Result<()> {
    if name.is_empty() || name == reserved {
        return Err(Error::Attribute {
            name: name.to_string(),
            reason: if name.is_empty() {
                "an attribute needs a name"
            } else {
                "the writer keeps this namespace for itself"
            },
        });
    }
    Ok(())
}

/// Sets (`Some`) or removes (`None`) the attribute `name` of the group at `dir`, keeping
/// every other key of its `zarr.json` (written by us or anyone), published atomically.
/// `reserved` names the namespace whose owner writes it otherwise (`"ome"` for an image).
pub(crate) fn set_group_attribute(
    dir: &Path,
    name: &str,
    value: Option<Value>,
    reserved: &str,
) -> Result<()> {
    check_name(name, reserved)?;
    edit_group(dir, |attributes| {
        match value {
            Some(v) => attributes.insert(name.to_string(), v),
            None => attributes.remove(name),
        };
    })
}

/// Applies `edit` to the attributes of the group document at `dir` as it is on disk
/// (keeping every key someone else wrote) and publishes the result atomically.
pub(crate) fn edit_group(dir: &Path, edit: impl FnOnce(&mut Map<String, Value>)) -> Result<()> {
    let path = dir.join(crate::store::METADATA_FILE);
    let text = std::fs::read(&path).map_err(|e| Error::io("read", &path, e, 0))?;
    let invalid = |why: String| {
        Error::io(
            "parse",
            &path,
            std::io::Error::new(std::io::ErrorKind::InvalidData, why),
            0,
        )
    };
    let mut doc: GroupDocument = serde_json::from_slice(&text)
        .map_err(|e| invalid(format!("not a Zarr group document: {e}")))?;
    edit(&mut doc.attributes);
    metadata::publish(dir, &doc)
}
