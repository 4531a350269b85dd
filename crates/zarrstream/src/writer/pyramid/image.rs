//! The group of an OME-Zarr image: the one publisher of its `zarr.json` after creation
//! (the caller's group attributes and the display windows taken from the data, so the
//! two never overwrite each other), and the sampling of level 0's frames for those
//! windows.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use crate::dtype::DataType;
use crate::error::Result;
use crate::ome::{DisplayEstimate, Ome, Window};
use crate::spec::ArraySpec;
use crate::writer::state::grid::Grid;
use crate::writer::state::job::Batch;
use crate::writer::state::published;

/// An OME-Zarr image group written by a [`Writer`](crate::writer::Writer).
#[derive(Debug)]
pub(crate) struct ImageGroup {
    root: PathBuf,
    /// Held while the group's document is read, edited and published; holds the
    /// windows last published.
    published: Mutex<Published>,
    display: Option<Display>,
}

#[derive(Debug, Default)]
struct Published {
    changes: u64,
    windows: Vec<Option<(f64, f64)>>,
}

/// The channels whose `omero` window follows the data, and where a frame's channel is.
#[derive(Debug)]
struct Display {
    estimate: DisplayEstimate,
    dtype: DataType,
    /// The channel axis among level 0's leading axes (the grid's, hidden axis counted).
    channel_axis: Option<usize>,
    /// Within a staging group (C order over the inner chunk's leading extent): frames per
    /// step along the channel axis, and the steps a group spans.
    group_stride: usize,
    group_channels: usize,
    /// A resumed image's windows from the frames of its earlier runs (`None` where the
    /// window still spans the type's range, i.e. nothing was sampled).
    prior: Vec<Option<(f64, f64)>>,
}

impl ImageGroup {
    /// The group at `root` of an image with `ome`'s options whose level 0 is stored as
    /// `spec` (its grid `grid`); `resumed`: the image holds frames of earlier runs,
    /// whose windows the new frames' widen.
    pub(crate) fn new(
        root: &Path,
        ome: &Ome,
        spec: &ArraySpec,
        grid: &Grid,
        resumed: bool,
    ) -> Result<Self> {
        let from_data: Vec<bool> = (ome.omero_channels(spec).unwrap_or_default().iter())
            .map(|c| c.window.is_none())
            .collect();
        let display = if from_data.contains(&true) {
            let channel_axis = ome.channel_axis(spec)?.map(|a| a + grid.hidden);
            let lead = &grid.chunk_lead;
            let (group_stride, group_channels) = match channel_axis {
                Some(a) => (
                    lead[a + 1..].iter().product::<u64>() as usize,
                    lead[a] as usize,
                ),
                None => (1, 1),
            };
            let prior = if resumed {
                prior_windows(root, spec.dtype())
            } else {
                Vec::new()
            };
            Some(Display {
                prior,
                estimate: DisplayEstimate::new(spec.dtype(), &from_data),
                dtype: spec.dtype(),
                channel_axis,
                group_stride,
                group_channels,
            })
        } else {
            None
        };
        Ok(ImageGroup {
            root: root.to_path_buf(),
            published: Mutex::new(Published::default()),
            display,
        })
    }

    /// Whether level 0's frames are sampled for display windows.
    pub(crate) fn samples(&self) -> bool {
        self.display.is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Published> {
        // A panic while publishing leaves the document on disk complete.
        (self.published.lock()).unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets (`Some`) or removes (`None`) the group attribute `name` (never `"ome"`).
    pub(crate) fn set_attribute(&self, name: &str, value: Option<Value>) -> Result<()> {
        let _held = self.lock();
        published::set_group_attribute(&self.root, name, value, "ome")
    }

    /// The channel of the frame at leading coordinates `c` (0 without a channel axis).
    pub(crate) fn channel_of(&self, c: &[u64]) -> usize {
        let axis = self.display.as_ref().and_then(|d| d.channel_axis);
        axis.and_then(|a| c.get(a)).map_or(0, |&ch| ch as usize)
    }

    /// Called by the worker that completed `batch` at `now`: samples its pixels when its
    /// channel is due.
    pub(crate) fn offer(&self, grid: &Grid, batch: &Batch, now: Instant) {
        let Some(d) = &self.display else { return };
        if !d.estimate.claim(batch.channel, now) {
            return;
        }
        let es = d.dtype.size();
        if !batch.staged {
            let n = grid.y * grid.x;
            d.estimate
                .sample(&batch.buf[..n * es], n, |_| Some(batch.channel));
            return;
        }
        // Tile-major: each tile's inner chunk holds its frames' planes one after the other,
        // padded to the chunk's size at the frame's right and bottom edges.
        let chunk = grid.chunk_bytes / es;
        let plane = grid.cy * grid.cx;
        let pick = |i: usize| {
            let (t, within) = (i / chunk, i % chunk);
            let local = within / plane;
            if !batch.received.get(local).copied().unwrap_or(false) {
                return None;
            }
            let p = within % plane;
            let y = (t / grid.tiles_x) * grid.cy + p / grid.cx;
            let x = (t % grid.tiles_x) * grid.cx + p % grid.cx;
            (y < grid.y && x < grid.x)
                .then(|| batch.channel + (local / d.group_stride) % d.group_channels)
        };
        let n = grid.tiles * chunk;
        d.estimate.sample(&batch.buf[..n * es], n, pick);
    }

    /// Republishes the group's `zarr.json` with the windows of the frames sampled so far,
    /// if they changed since the last time.
    pub(crate) fn publish_windows(&self) -> Result<()> {
        let Some(d) = &self.display else {
            return Ok(());
        };
        let mut last = self.lock();
        let changes = d.estimate.changes();
        if changes == last.changes {
            return Ok(());
        }
        let mut windows = d.estimate.windows();
        for (w, p) in windows.iter_mut().zip(&d.prior) {
            if let (Some((s, e)), Some((ps, pe))) = (w.as_mut(), p) {
                (*s, *e) = (s.min(*ps), e.max(*pe));
            }
        }
        if windows == last.windows {
            last.changes = changes;
            return Ok(());
        }
        published::edit_group(&self.root, |attributes| {
            let channels = attributes
                .get_mut("ome")
                .and_then(|o| o.get_mut("omero"))
                .and_then(|o| o.get_mut("channels"))
                .and_then(Value::as_array_mut);
            for (c, w) in channels.into_iter().flatten().zip(&windows) {
                if let (Some((start, end)), Some(map)) = (w, c.as_object_mut()) {
                    map.insert(
                        "window".into(),
                        Window::of_type(d.dtype, *start, *end).json(),
                    );
                }
            }
        })?;
        *last = Published { changes, windows };
        Ok(())
    }
}

/// The `start`/`end` of each `omero` channel of the group document at `root`, `None` for
/// a window that spans the range of `dtype` (nothing sampled yet) or cannot be read.
fn prior_windows(root: &Path, dtype: DataType) -> Vec<Option<(f64, f64)>> {
    let (min, max) = crate::ome::dtype_range(dtype);
    let doc: Option<Value> = std::fs::read(root.join(crate::store::METADATA_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let channels = doc
        .as_ref()
        .and_then(|d| {
            d["attributes"]["ome"]["omero"]["channels"]
                .as_array()
                .cloned()
        })
        .unwrap_or_default();
    channels
        .iter()
        .map(|c| {
            let (s, e) = (c["window"]["start"].as_f64()?, c["window"]["end"].as_f64()?);
            (s != min || e != max).then_some((s, e))
        })
        .collect()
}
