//! The two halves of per-frame metadata: [`MetaRows`] on the caller's thread checks each
//! frame's values against the spec and sends them on; [`MetaStore`] on the finisher's
//! side appends them to the columns and publishes them after the array's own `zarr.json`.
//! The channel between them keeps file I/O (and its fsyncs) off the camera's thread.

use std::path::Path;

use crossbeam_channel::{Receiver, Sender, unbounded};
use serde_json::{Value, json};

use super::column::{CHUNK, Column};
use super::{FrameMeta, FrameMetaSpec, MetaType, MetaValue};
use crate::error::{Error, Result};
use crate::metadata;

/// The directory of the metadata group under the array.
pub(crate) const FRAME_META_DIR: &str = "frame_meta";

/// One frame's values, in the spec's field order (`None`: not given, the fill value;
/// no values at all: a frame pushed without metadata).
#[derive(Debug)]
pub(crate) struct Row {
    numbers: Vec<Option<[u8; 8]>>,
    json: Option<Vec<u8>>,
}

/// The caller's half: validates and sends.
#[derive(Debug)]
pub(crate) struct MetaRows {
    spec: FrameMetaSpec,
    tx: Sender<Row>,
}

impl MetaRows {
    /// The row of a frame pushed without metadata (allocates nothing: it is on the path
    /// of every plain push).
    pub(crate) fn empty(&self) -> Row {
        Row {
            numbers: Vec::new(),
            json: None,
        }
    }

    /// Checks `meta` against the spec (every name known, every value of its field's
    /// type) before the frame is pushed, so a frame is stored with its metadata or
    /// refused with it, never half.
    pub(crate) fn row(&self, meta: &FrameMeta) -> Result<Row> {
        let mut row = Row {
            numbers: vec![None; self.spec.fields.len()],
            json: None,
        };
        for (name, value) in &meta.values {
            let Some(i) = self.spec.fields.iter().position(|(n, _)| n == name) else {
                return Err(Error::FrameMeta {
                    field: name.clone(),
                    reason: "is not a field of this writer's frame metadata".into(),
                });
            };
            let bytes = match (self.spec.fields[i].1, *value) {
                (MetaType::Float64, MetaValue::Float(v)) => v.to_le_bytes(),
                (MetaType::Float64, MetaValue::Int(v)) => (v as f64).to_le_bytes(),
                (MetaType::Int64, MetaValue::Int(v)) => v.to_le_bytes(),
                (MetaType::Int64, MetaValue::Float(v)) => {
                    return Err(Error::FrameMeta {
                        field: name.clone(),
                        reason: format!("is int64, got the float {v}"),
                    });
                }
            };
            row.numbers[i] = Some(bytes);
        }
        if let Some(json) = &meta.json {
            if !self.spec.json {
                return Err(Error::FrameMeta {
                    field: "json".into(),
                    reason: "this writer stores no JSON per frame".into(),
                });
            }
            let text = serde_json::to_vec(json).map_err(|e| Error::FrameMeta {
                field: "json".into(),
                reason: e.to_string(),
            })?;
            row.json = Some(text);
        }
        Ok(row)
    }

    /// Sends a frame's row (the store is gone only after a failure, reported elsewhere).
    pub(crate) fn send(&self, row: Row) {
        let _ = self.tx.send(row);
    }
}

/// The finisher's half: the columns.
#[derive(Debug)]
pub(crate) struct MetaStore {
    rx: Receiver<Row>,
    numbers: Vec<Column>,
    /// `json_offset`, `json_length`, `json_bytes`.
    json: Option<[Column; 3]>,
    bytes_so_far: u64,
    /// Frames received so far.
    rows: u64,
    /// End offsets in `json_bytes` of the frames not yet published, oldest first.
    ends: std::collections::VecDeque<u64>,
    /// `json_bytes` covering every published frame's text.
    text_published: u64,
}

/// Creates the metadata group under `array_dir` (published at once, with empty arrays)
/// and returns both halves.
pub(crate) fn open(array_dir: &Path, spec: &FrameMetaSpec) -> Result<(MetaRows, MetaStore)> {
    let dir = array_dir.join(FRAME_META_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e, 0))?;
    let fields: Vec<Value> = spec
        .fields
        .iter()
        .map(|(n, t)| json!({"name": n, "data_type": t.zarr_name()}))
        .collect();
    metadata::publish(
        &dir,
        &json!({
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {"zarrstream_frame_meta": {
                "fields": fields,
                "json": spec.json,
                "aligned_with": "axis 0 of the array one level up",
            }},
        }),
    )?;
    let numbers = spec
        .fields
        .iter()
        .map(|(name, kind)| match kind {
            MetaType::Float64 => Column::new(
                dir.join(name),
                kind.zarr_name(),
                json!("NaN"),
                f64::NAN.to_le_bytes().to_vec(),
                CHUNK,
            ),
            MetaType::Int64 => Column::new(
                dir.join(name),
                kind.zarr_name(),
                json!(0),
                vec![0; 8],
                CHUNK,
            ),
        })
        .collect();
    let json = spec.json.then(|| {
        [
            Column::new(
                dir.join("json_offset"),
                "uint64",
                json!(0),
                vec![0; 8],
                CHUNK,
            ),
            Column::new(
                dir.join("json_length"),
                "uint64",
                json!(0),
                vec![0; 8],
                CHUNK,
            ),
            // 64 KiB chunks of text: the partial chunk is rewritten at each publication.
            Column::new(dir.join("json_bytes"), "uint8", json!(0), vec![0], 1 << 16),
        ]
    });
    let (tx, rx) = unbounded();
    let mut store = MetaStore {
        rx,
        numbers,
        json,
        bytes_so_far: 0,
        rows: 0,
        ends: std::collections::VecDeque::new(),
        text_published: 0,
    };
    store.publish(0)?;
    Ok((
        MetaRows {
            spec: spec.clone(),
            tx,
        },
        store,
    ))
}

impl MetaStore {
    /// Takes the rows sent so far, writes them and publishes every metadata array with
    /// `shape[0] = min(extent, rows)`: called right after the array's own `zarr.json`
    /// was published with `extent` frames.
    pub(crate) fn publish(&mut self, extent: u64) -> Result<()> {
        while let Ok(row) = self.rx.try_recv() {
            for (i, column) in self.numbers.iter_mut().enumerate() {
                match row.numbers.get(i).copied().flatten() {
                    Some(bytes) => column.push(&bytes),
                    None => column.push_fill(),
                }
            }
            if let Some([offset, length, bytes]) = &mut self.json {
                let text = row.json.unwrap_or_default();
                offset.push(&self.bytes_so_far.to_le_bytes());
                length.push(&(text.len() as u64).to_le_bytes());
                bytes.extend(&text);
                self.bytes_so_far += text.len() as u64;
                self.ends.push_back(self.bytes_so_far);
            }
            self.rows += 1;
        }
        for column in &mut self.numbers {
            column.publish(extent)?;
        }
        if let Some([offset, length, bytes]) = &mut self.json {
            // The text of the frames now published, and no more.
            let unpublished = self.rows.saturating_sub(extent.min(self.rows));
            while self.ends.len() as u64 > unpublished {
                if let Some(end) = self.ends.pop_front() {
                    self.text_published = end;
                }
            }
            bytes.publish(self.text_published)?;
            offset.publish(extent)?;
            length.publish(extent)?;
        }
        Ok(())
    }
}
