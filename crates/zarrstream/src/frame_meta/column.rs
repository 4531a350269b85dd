//! One 1-D metadata array: values appended in memory a chunk at a time, chunk files
//! written and the array's `zarr.json` published by the finisher.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::document::{ArrayDocument, ArrayNode, Endian, Named, ZarrFormat};
use crate::error::{Error, Result};
use crate::metadata;
use crate::store::publish_bytes;

/// Values per chunk file (32 KiB of 8-byte values; a million frames are 245 files).
pub(super) const CHUNK: u64 = 4096;

/// A 1-D array of little-endian `item`-byte values.
#[derive(Debug)]
pub(super) struct Column {
    dir: PathBuf,
    dtype: &'static str,
    fill: Value,
    /// One value's fill bytes (the first `item`), padding a partial chunk (the `bytes`
    /// codec needs whole chunks).
    fill_bytes: [u8; 8],
    item: usize,
    chunk: u64,
    /// Chunks filled so far (moved to `full` or already on disk).
    done_chunks: u64,
    /// The bytes of the chunk being filled (values `len - len % chunk ..`).
    current: Vec<u8>,
    /// Chunks filled and not yet on disk: (chunk index, bytes).
    full: Vec<(u64, Vec<u8>)>,
    /// Values on disk in chunk files (the partial chunk included as last written).
    written: u64,
    /// `shape[0]` last published.
    published: Option<u64>,
}

impl Column {
    pub(super) fn new(
        dir: PathBuf,
        dtype: &'static str,
        fill: Value,
        fill_bytes: Vec<u8>,
        chunk: u64,
    ) -> Self {
        Column {
            dir,
            dtype,
            fill,
            item: fill_bytes.len().min(8),
            fill_bytes: {
                let mut b = [0u8; 8];
                let n = fill_bytes.len().min(8);
                b[..n].copy_from_slice(&fill_bytes[..n]);
                b
            },
            chunk,
            done_chunks: 0,
            current: Vec::new(),
            full: Vec::new(),
            written: 0,
            published: None,
        }
    }

    /// `shape[0]` of the column an earlier writer published at `dir`.
    pub(super) fn published_len(dir: &Path) -> Result<u64> {
        let meta = dir.join(crate::store::METADATA_FILE);
        let text = fs::read(&meta).map_err(|e| Error::io("read", &meta, e, 0))?;
        serde_json::from_slice::<Value>(&text)
            .ok()
            .and_then(|d| d.pointer("/shape/0").and_then(Value::as_u64))
            .ok_or_else(|| Error::NeedsRecovery {
                path: meta.clone(),
                reason: "per-frame metadata array without a readable shape".into(),
            })
    }

    /// The column at `dir` as an earlier writer left it with `published` values,
    /// keeping the first `keep` of them (`keep <= published`): the partial last chunk is
    /// read back, so the next value lands after them.
    pub(super) fn reopen(
        dir: PathBuf,
        dtype: &'static str,
        fill: Value,
        fill_bytes: Vec<u8>,
        chunk: u64,
        (keep, published): (u64, u64),
    ) -> Result<Self> {
        let mut column = Column::new(dir, dtype, fill, fill_bytes, chunk);
        let keep = keep.min(published);
        column.done_chunks = keep / chunk;
        let rest = (keep % chunk) as usize * column.item;
        if rest > 0 {
            let path = column.dir.join("c").join(column.done_chunks.to_string());
            let bytes = fs::read(&path).map_err(|e| Error::io("read", &path, e, 0))?;
            let kept = bytes.get(..rest).ok_or_else(|| Error::NeedsRecovery {
                path: path.clone(),
                reason: "per-frame metadata chunk shorter than its array says".into(),
            })?;
            column.current = kept.to_vec();
        }
        column.written = keep;
        column.published = Some(published);
        Ok(column)
    }

    /// Appends one value's little-endian bytes.
    pub(super) fn push(&mut self, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.item);
        self.extend(bytes);
    }

    /// Appends the fill value.
    pub(super) fn push_fill(&mut self) {
        // A copy of the array (no allocation): `extend` needs `&mut self`.
        let fill = self.fill_bytes;
        self.push(&fill[..self.item]);
    }

    /// Appends whole values' bytes, moving each chunk to `full` as it fills.
    pub(super) fn extend(&mut self, mut bytes: &[u8]) {
        let chunk_bytes = self.chunk as usize * self.item;
        while !bytes.is_empty() {
            let room = chunk_bytes - self.current.len();
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.current.extend_from_slice(now);
            bytes = rest;
            if self.current.len() == chunk_bytes {
                self.full
                    .push((self.done_chunks, std::mem::take(&mut self.current)));
                self.done_chunks += 1;
            }
        }
    }

    /// Values appended.
    pub(super) fn len(&self) -> u64 {
        self.done_chunks * self.chunk + (self.current.len() / self.item) as u64
    }

    /// Writes what is not on disk yet (full chunks, then the partial one) and publishes
    /// `zarr.json` with `shape = [min(upto, len)]`. Chunk files are flushed before the
    /// document that makes them visible.
    pub(super) fn publish(&mut self, upto: u64) -> Result<()> {
        let shape0 = upto.min(self.len());
        if self.published == Some(shape0) && self.written == self.len() {
            return Ok(());
        }
        let chunks = self.dir.join("c");
        if !chunks.is_dir() {
            // Durably: the column's `zarr.json` below syncs the column's directory, not
            // its name in the metadata group, and a power cut even after `finish` lost
            // every column (found by `tests/writer/power_loss.rs`).
            crate::store::create_dirs_durably(&chunks)?;
        }
        for (index, bytes) in std::mem::take(&mut self.full) {
            write_chunk(&chunks, index, &bytes)?;
        }
        if !self.len().is_multiple_of(self.chunk) && self.written != self.len() {
            let missing = (self.chunk - self.len() % self.chunk) as usize;
            let padded = [
                self.current.as_slice(),
                &self.fill_bytes[..self.item].repeat(missing),
            ]
            .concat();
            write_chunk(&chunks, self.len() / self.chunk, &padded)?;
        }
        self.written = self.len();
        if self.published != Some(shape0) {
            metadata::publish(&self.dir, &self.document(shape0))?;
            self.published = Some(shape0);
        }
        Ok(())
    }

    fn document(&self, shape0: u64) -> ArrayDocument {
        ArrayDocument {
            zarr_format: ZarrFormat,
            node_type: ArrayNode,
            shape: vec![shape0],
            data_type: self.dtype.into(),
            chunk_grid: Named::regular_grid(vec![self.chunk]),
            chunk_key_encoding: Named::default_keys(),
            fill_value: self.fill.clone(),
            codecs: vec![Named::bytes(Endian::Little)],
            attributes: Map::new(),
            storage_transformers: None,
            dimension_names: None,
            extra: Map::new(),
        }
    }
}

/// Writes chunk `index` as `store::publish_bytes` publishes any file (temporary file,
/// fsync, rename, fsync of the directory), so a reader sees the old or the new chunk and
/// the `zarr.json` published after it never names a chunk a power loss could take.
fn write_chunk(dir: &Path, index: u64, bytes: &[u8]) -> Result<()> {
    publish_bytes(dir, &index.to_string(), bytes)
        .map_err(|e| Error::io(e.op, e.path, e.source, bytes.len() as u64))
}
