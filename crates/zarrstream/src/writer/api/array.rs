//! The arrays of a [`Recording`](crate::Recording): [`ArrayConfig`] (key, spec, OME
//! settings, per-frame metadata), [`ArrayId`] (an array named by index or key), and the
//! checks of a recording's keys, shared by the recording and its memory estimate.

use crate::error::{Error, Result};
use crate::frame_meta::FrameMetaSpec;
use crate::ome::Ome;
use crate::spec::ArraySpec;
use crate::store;

/// One array of a [`Recording`](crate::Recording): where it goes in the group, its specification and,
/// for an OME-Zarr image (a group with its levels at `<key>/0`, `<key>/1`, …), its
/// OME settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ArrayConfig {
    /// Relative `/` path of the array (or image group) under the recording's root.
    pub key: String,
    /// The array's specification (of level 0 for an image).
    pub spec: ArraySpec,
    /// OME-Zarr image settings; `None` writes a plain array.
    pub ome: Option<Ome>,
    /// Per-frame metadata stored beside the array (of level 0 for an image); `None`
    /// takes the recording options' [`frame_meta`](crate::WriterOptions::frame_meta).
    pub frame_meta: Option<FrameMetaSpec>,
}

impl ArrayConfig {
    /// A plain array at `key`.
    pub fn new(key: impl Into<String>, spec: ArraySpec) -> Self {
        ArrayConfig {
            key: key.into(),
            spec,
            ome: None,
            frame_meta: None,
        }
    }

    /// Stores per-frame metadata beside this array (pushed with
    /// [`Writer::push_with`](crate::Writer::push_with) on the array's
    /// [`Recording::array`](crate::Recording::array)).
    #[must_use]
    pub fn frame_meta(mut self, spec: FrameMetaSpec) -> Self {
        self.frame_meta = Some(spec);
        self
    }

    /// Makes the array an OME-Zarr image with `ome`'s settings.
    #[must_use]
    pub fn ome(mut self, ome: Ome) -> Self {
        self.ome = Some(ome);
        self
    }
}

/// Names an array of a [`Recording`](crate::Recording): by key (`&str`, `String`) or by index (`usize`,
/// the order given to [`Recording::create`](crate::Recording::create)).
pub trait ArrayId {
    /// The array's index among `keys`, or [`Error::UnknownArray`].
    fn index_in(&self, keys: &[String]) -> Result<usize>;
}

impl ArrayId for usize {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        (*self < keys.len())
            .then_some(*self)
            .ok_or_else(|| Error::UnknownArray {
                key: self.to_string(),
            })
    }
}

impl ArrayId for &str {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        keys.iter()
            .position(|k| k == self)
            .ok_or_else(|| Error::UnknownArray {
                key: (*self).to_string(),
            })
    }
}

impl ArrayId for &String {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        self.as_str().index_in(keys)
    }
}

impl ArrayId for String {
    fn index_in(&self, keys: &[String]) -> Result<usize> {
        self.as_str().index_in(keys)
    }
}

/// Checks every key: a relative path of plain names, given once, never inside another.
fn check_keys(arrays: &[ArrayConfig]) -> Result<()> {
    let bad = |key: &str, reason| Error::ArrayKey {
        key: key.to_string(),
        reason,
    };
    if arrays.is_empty() {
        return Err(bad("", "a recording needs at least one array"));
    }
    for (i, a) in arrays.iter().enumerate() {
        let key = a.key.as_str();
        if key.is_empty() || key.starts_with('/') || key.ends_with('/') {
            return Err(bad(key, "not a relative path"));
        }
        if let Some(reason) = key.split('/').find_map(store::bad_node_name) {
            return Err(bad(key, reason));
        }
        for b in &arrays[..i] {
            if b.key == a.key {
                return Err(bad(key, "given twice"));
            }
            let (short, long) = if b.key.len() < key.len() {
                (b.key.as_str(), key)
            } else {
                (key, b.key.as_str())
            };
            if long.starts_with(short) && long.as_bytes()[short.len()] == b'/' {
                return Err(bad(key, "one array's key is inside another's"));
            }
        }
    }
    Ok(())
}
/// Checks every key and every array's per-frame metadata spec.
pub(in crate::writer) fn check_arrays(arrays: &[ArrayConfig]) -> Result<()> {
    check_keys(arrays)?;
    for a in arrays {
        if let Some(spec) = &a.frame_meta {
            spec.validate().map_err(|reason| Error::FrameMeta {
                field: format!("(spec of {})", a.key),
                reason,
            })?;
        }
    }
    Ok(())
}
