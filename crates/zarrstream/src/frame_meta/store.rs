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

/// The columns' fixed parameters: directory name, dtype, fill value and its bytes,
/// values per chunk.
type ColumnKind = (String, &'static str, Value, Vec<u8>, u64);

fn column_kinds(spec: &FrameMetaSpec) -> (Vec<ColumnKind>, Option<[ColumnKind; 3]>) {
    let numbers = spec
        .fields
        .iter()
        .map(|(name, kind)| match kind {
            MetaType::Float64 => (
                name.clone(),
                kind.zarr_name(),
                json!("NaN"),
                f64::NAN.to_le_bytes().to_vec(),
                CHUNK,
            ),
            MetaType::Int64 => (name.clone(), kind.zarr_name(), json!(0), vec![0; 8], CHUNK),
        })
        .collect();
    let json = spec.json.then(|| {
        [
            ("json_offset".into(), "uint64", json!(0), vec![0; 8], CHUNK),
            ("json_length".into(), "uint64", json!(0), vec![0; 8], CHUNK),
            // 64 KiB chunks of text: the partial chunk is rewritten at each publication.
            ("json_bytes".into(), "uint8", json!(0), vec![0], 1 << 16),
        ]
    });
    (numbers, json)
}

/// The group's attributes (`zarrstream_frame_meta`), naming the fields.
fn group_attributes(spec: &FrameMetaSpec) -> Value {
    let fields: Vec<Value> = spec
        .fields
        .iter()
        .map(|(n, t)| json!({"name": n, "data_type": t.zarr_name()}))
        .collect();
    json!({
        "fields": fields,
        "json": spec.json,
        "aligned_with": "axis 0 of the array one level up",
    })
}

/// Fails with [`Error::ResumeMismatch`] unless the per-frame metadata an earlier writer
/// left under `array_dir` (if any) stores what `spec` asks for (if anything): the same
/// fields, in any order, and the same JSON choice. Called before a resumed array is
/// touched.
pub(crate) fn check_resumable(array_dir: &Path, spec: Option<&FrameMetaSpec>) -> Result<()> {
    let path = array_dir
        .join(FRAME_META_DIR)
        .join(crate::store::METADATA_FILE);
    let on_disk = std::fs::read(&path)
        .ok()
        .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
        .and_then(|d| d.pointer("/attributes/zarrstream_frame_meta").cloned());
    let requested = spec.map(group_attributes);
    // Field order is not part of the format (a config's `fields` object may list them
    // in any order).
    let sorted = |v: Option<Value>| {
        v.map(|mut v| {
            if let Some(fields) = v.get_mut("fields").and_then(Value::as_array_mut) {
                fields.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            }
            v
        })
    };
    let (on_disk, requested) = (sorted(on_disk), sorted(requested));
    if on_disk != requested {
        let describe = |v: Option<Value>| v.map_or_else(|| "none".into(), |v| v.to_string());
        return Err(Error::ResumeMismatch {
            path: array_dir.to_path_buf(),
            field: "frame_meta",
            on_disk: describe(on_disk),
            requested: describe(requested),
        });
    }
    Ok(())
}

/// Creates the metadata group under `array_dir` (published at once, with empty arrays)
/// and returns both halves. With `resume = Some(frame)`, continues the group an earlier
/// writer left instead (checked by [`check_resumable`] before): the values for frames
/// before `frame` that every column holds are kept, and the frames they lack read as
/// fill.
pub(crate) fn open(
    array_dir: &Path,
    spec: &FrameMetaSpec,
    resume: Option<u64>,
) -> Result<(MetaRows, MetaStore)> {
    let dir = array_dir.join(FRAME_META_DIR);
    let group = crate::store::group_document(json!({
        "zarrstream_frame_meta": group_attributes(spec),
    }));
    let (numbers, json) = column_kinds(spec);
    let (tx, rx) = unbounded();
    let rows = MetaRows {
        spec: spec.clone(),
        tx,
    };
    let Some(frame) = resume else {
        // Durably, as the columns' directories (see `Column::publish`).
        crate::store::create_dirs_durably(&dir)?;
        metadata::publish(&dir, &group)?;
        let new = |(name, dtype, fill, bytes, chunk): ColumnKind| {
            Column::new(dir.join(name), dtype, fill, bytes, chunk)
        };
        let mut store = MetaStore {
            rx,
            numbers: numbers.into_iter().map(new).collect(),
            json: json.map(|j| j.map(new)),
            bytes_so_far: 0,
            rows: 0,
            ends: std::collections::VecDeque::new(),
            text_published: 0,
        };
        store.publish(0)?;
        return Ok((rows, store));
    };
    // The frames every column holds: columns published in one pass may differ in
    // length after a crash, and each must continue at the same frame.
    let offsets = json.as_ref().map(|[o, l, _]| [o.0.as_str(), l.0.as_str()]);
    let mut kept = frame;
    for name in numbers
        .iter()
        .map(|k| k.0.as_str())
        .chain(offsets.into_iter().flatten())
    {
        kept = kept.min(Column::published_len(&dir.join(name))?);
    }
    let reopen = |(name, dtype, fill, bytes, chunk): ColumnKind, keep: u64| {
        let column = dir.join(name);
        let published = Column::published_len(&column)?;
        Column::reopen(column, dtype, fill, bytes, chunk, (keep, published))
    };
    let columns = numbers
        .into_iter()
        .map(|kind| reopen(kind, kept))
        .collect::<Result<Vec<_>>>()?;
    let (json, bytes_so_far) = match json {
        None => (None, 0),
        Some([offset, length, bytes]) => {
            // All the text published: the frames kept reference no more.
            let text = Column::published_len(&dir.join(&bytes.0))?;
            let bytes = reopen(bytes, text)?;
            (
                Some([reopen(offset, kept)?, reopen(length, kept)?, bytes]),
                text,
            )
        }
    };
    let mut store = MetaStore {
        rx,
        numbers: columns,
        json,
        bytes_so_far,
        rows: kept,
        ends: std::collections::VecDeque::new(),
        text_published: bytes_so_far,
    };
    // Frames the earlier writer never described (a partial last step, values a crash
    // lost) read as fill, so the next row is frame `frame`'s.
    for _ in kept..frame {
        store.append(Row {
            numbers: Vec::new(),
            json: None,
        });
    }
    Ok((rows, store))
}

impl MetaStore {
    /// Appends one frame's row to the columns (in memory until published).
    fn append(&mut self, row: Row) {
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

    /// Takes the rows sent so far, writes them and publishes every metadata array with
    /// `shape[0] = min(extent, rows)`: called right after the array's own `zarr.json`
    /// was published with `extent` frames.
    pub(crate) fn publish(&mut self, extent: u64) -> Result<()> {
        while let Ok(row) = self.rx.try_recv() {
            self.append(row);
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
