//! Opening a store written by zarrstream and walking its shards: what every subcommand
//! that reads a store shares.

use std::fs::File;
use std::io::IsTerminal;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zarrstream::read::ReadError;
use zarrstream::read::index::{EMPTY, parse_index};
use zarrstream::read::metadata::{StoreMetadata, parse_array_json};
use zarrstream::read::{blosc, zstd};
use zarrstream::{Codec, IndexLocation, ShardLayout};

/// Why a store could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The path does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(PathBuf),
    /// The path exists but holds no Zarr v3 array metadata.
    #[error("{path}: not a Zarr v3 array ({why})")]
    NotAStore {
        /// The store path.
        path: PathBuf,
        /// What is missing or wrong.
        why: String,
    },
    /// `zarr.json` describes an array this tool does not handle (e.g. an unsupported codec).
    #[error("{path}: {source}")]
    Metadata {
        /// The `zarr.json` path.
        path: PathBuf,
        /// The parser's reason.
        source: ReadError,
    },
    /// A shard index that does not parse (wrong length, bad crc32c).
    #[error("shard {key}: {source}")]
    Index {
        /// The shard key.
        key: String,
        /// The parser's reason.
        source: ReadError,
    },
    /// A shard key that names no shard file of the store.
    #[error("{store}: no shard {key} (expected a key like c/0/0/0 with one index per axis)")]
    NoSuchShard {
        /// The store path.
        store: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// An I/O error with what was being done to which path.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// An opened store: its metadata and the layout of its shards.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    /// The array directory.
    pub root: PathBuf,
    /// What `zarr.json` says.
    pub meta: StoreMetadata,
    /// Where the index of each shard is and how large it is.
    pub layout: ShardLayout,
    /// `zarr.json` as read (for the codec lists and attributes, shown as they are).
    pub doc: serde_json::Value,
}

/// One shard file under `c/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shard {
    /// The key relative to the store root, e.g. `c/0/1/0`.
    pub key: String,
    /// Shard grid coordinates.
    pub coords: Vec<u64>,
    /// The file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub len: u64,
}

impl Store {
    /// Opens the array at `root` (the directory holding `zarr.json`).
    pub(crate) fn open(root: &Path) -> Result<Store, StoreError> {
        if !root.exists() {
            return Err(StoreError::NotFound(root.to_path_buf()));
        }
        if !root.is_dir() {
            return Err(StoreError::NotAStore {
                path: root.to_path_buf(),
                why: "not a directory".into(),
            });
        }
        let meta_path = root.join("zarr.json");
        let text = match std::fs::read_to_string(&meta_path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotAStore {
                    path: root.to_path_buf(),
                    why: "no zarr.json".into(),
                });
            }
            Err(e) => return Err(io("read", &meta_path)(e)),
        };
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| StoreError::NotAStore {
                path: root.to_path_buf(),
                why: format!("zarr.json is not JSON: {e}"),
            })?;
        if doc.get("zarr_format").and_then(serde_json::Value::as_u64) != Some(3)
            || doc.get("node_type").and_then(serde_json::Value::as_str) != Some("array")
        {
            return Err(StoreError::NotAStore {
                path: root.to_path_buf(),
                why: "zarr.json is not a Zarr v3 array (zarr_format 3, node_type array)".into(),
            });
        }
        let meta = parse_array_json(&doc).map_err(|source| StoreError::Metadata {
            path: meta_path.clone(),
            source,
        })?;
        let layout = ShardLayout::new(&meta.spec).map_err(|_| StoreError::Metadata {
            path: meta_path,
            source: ReadError::Metadata("shard geometry overflows".into()),
        })?;
        Ok(Store {
            root: root.to_path_buf(),
            meta,
            layout,
            doc,
        })
    }

    /// Inner chunks per shard along each axis.
    pub(crate) fn chunks_per_shard(&self) -> Vec<u64> {
        let spec = &self.meta.spec;
        spec.shard_shape()
            .iter()
            .zip(spec.chunk_shape())
            .map(|(s, c)| s / c)
            .collect()
    }

    /// Coordinates (within its shard) of inner chunk `i` of a shard index (C order).
    pub(crate) fn inner_coords(&self, mut i: u64) -> Vec<u64> {
        let per = self.chunks_per_shard();
        let mut c = vec![0; per.len()];
        for (d, n) in per.iter().enumerate().rev() {
            c[d] = i % n;
            i /= n;
        }
        c
    }

    /// Every shard file under `c/`, sorted by coordinates. Files whose names are not
    /// shard keys of this array's rank are ignored.
    pub(crate) fn shards(&self) -> Result<Vec<Shard>, StoreError> {
        let rank = self.meta.spec.rank();
        let mut out = Vec::new();
        let base = self.root.join("c");
        if !base.is_dir() {
            return Ok(out);
        }
        let mut stack = vec![(base, Vec::<u64>::new())];
        while let Some((dir, prefix)) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(io("list", &dir))? {
                let entry = entry.map_err(io("list", &dir))?;
                let name = entry.file_name();
                let Some(n) = name.to_str().and_then(|s| s.parse::<u64>().ok()) else {
                    continue;
                };
                let mut coords = prefix.clone();
                coords.push(n);
                let path = entry.path();
                let meta = entry.metadata().map_err(io("stat", &path))?;
                if meta.is_dir() && coords.len() < rank {
                    stack.push((path, coords));
                } else if meta.is_file() && coords.len() == rank {
                    let key = std::iter::once("c".to_string())
                        .chain(coords.iter().map(u64::to_string))
                        .collect::<Vec<_>>()
                        .join("/");
                    out.push(Shard {
                        key,
                        coords,
                        path,
                        len: meta.len(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.coords.cmp(&b.coords));
        Ok(out)
    }

    /// The byte range of a shard's index: the first or last `16 n + 4` bytes.
    pub(crate) fn index_range(&self, shard: &Shard) -> Option<(u64, u64)> {
        let size = self.layout.index_size;
        if shard.len < size {
            return None;
        }
        Some(match self.layout.location {
            IndexLocation::Start => (0, size),
            IndexLocation::End => (shard.len - size, size),
            // A location this tool does not know: no index it can find.
            _ => return None,
        })
    }

    /// Reads and checks a shard's index (length and crc32c): `(offset, nbytes)` per inner
    /// chunk in C order, `None` for an absent chunk.
    pub(crate) fn read_index(
        &self,
        shard: &Shard,
        file: &File,
    ) -> Result<Vec<Option<(u64, u64)>>, StoreError> {
        let (at, size) = self.index_range(shard).ok_or_else(|| StoreError::Index {
            key: shard.key.clone(),
            source: ReadError::IndexLength {
                expected: self.layout.index_size,
                got: shard.len,
            },
        })?;
        let mut buf = vec![0u8; size as usize];
        file.read_exact_at(&mut buf, at)
            .map_err(io("read", &shard.path))?;
        parse_index(&buf, self.layout.n as usize).map_err(|source| StoreError::Index {
            key: shard.key.clone(),
            source,
        })
    }
}

/// Why an index entry of a finished shard is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EntryFault {
    /// One of offset and nbytes is the empty marker, the other is not.
    #[error("torn index entry (offset {offset:#x}, nbytes {nbytes:#x})")]
    Torn {
        /// Stored offset.
        offset: u64,
        /// Stored nbytes.
        nbytes: u64,
    },
    /// A stored chunk of zero bytes.
    #[error("index entry of 0 bytes at offset {offset}")]
    Zero {
        /// Stored offset.
        offset: u64,
    },
    /// More bytes than the codec can produce for one chunk.
    #[error("{nbytes} bytes, more than the codec's bound of {bound}")]
    TooLarge {
        /// Stored nbytes.
        nbytes: u64,
        /// Largest possible encoded chunk.
        bound: u64,
    },
    /// The chunk ends past the end of the file.
    #[error("bytes {offset}..{end} lie past the end of the {len}-byte file")]
    PastEnd {
        /// Stored offset.
        offset: u64,
        /// offset + nbytes (saturated).
        end: u64,
        /// The file length.
        len: u64,
    },
    /// The chunk overlaps the shard index.
    #[error("bytes {offset}..{end} overlap the shard index at {index_at}..{index_end}")]
    OverIndex {
        /// Stored offset.
        offset: u64,
        /// offset + nbytes.
        end: u64,
        /// Where the index starts.
        index_at: u64,
        /// Where it ends.
        index_end: u64,
    },
    /// The chunk overlaps another chunk.
    #[error("bytes {offset}..{end} overlap inner chunk {other:?}")]
    Overlaps {
        /// Stored offset.
        offset: u64,
        /// offset + nbytes.
        end: u64,
        /// The other chunk's coordinates within the shard.
        other: Vec<u64>,
    },
}

/// Why the bytes of one inner chunk are not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChunkFault {
    /// The chunk does not match its crc32c.
    #[error("crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The crc32c stored after the chunk.
        stored: u32,
        /// The crc32c of the chunk's bytes.
        computed: u32,
    },
    /// Too short to hold the crc32c and any data.
    #[error("{nbytes} bytes, too short for data and its crc32c")]
    TooShort {
        /// Stored nbytes.
        nbytes: u64,
    },
    /// The codec refused the bytes.
    #[error("does not decode: {0}")]
    Decode(ReadError),
    /// The array's codec is one this tool cannot decode.
    #[error("codec {0} is not supported by this tool")]
    UnknownCodec(Codec),
    /// The chunk decodes to the wrong number of bytes.
    #[error("decodes to {got} bytes, expected {expected}")]
    WrongSize {
        /// `chunk_bytes` of the array.
        expected: u64,
        /// What it decoded to.
        got: u64,
    },
    /// The bytes could not be read.
    #[error("read failed: {0}")]
    Read(String),
}

/// How a chunk was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckedBy {
    /// Its crc32c matched.
    Crc32c,
    /// Its crc32c matched and it decoded to exactly the chunk size.
    Crc32cAndDecode,
    /// It decoded to exactly the chunk size (the array has no crc32c).
    Decode,
}

impl Store {
    /// The shard file for `key` (`c/0/1/0`, or `0/1/0` without the `c/` prefix).
    pub(crate) fn shard(&self, key: &str) -> Result<Shard, StoreError> {
        let missing = || StoreError::NoSuchShard {
            store: self.root.clone(),
            key: key.to_string(),
        };
        let rest = key.trim_matches('/');
        let rest = rest.strip_prefix("c/").unwrap_or(rest);
        let coords = rest
            .split('/')
            .map(|p| p.parse::<u64>().ok())
            .collect::<Option<Vec<u64>>>()
            .filter(|c| c.len() == self.meta.spec.rank())
            .ok_or_else(missing)?;
        self.shards()?
            .into_iter()
            .find(|s| s.coords == coords)
            .ok_or_else(missing)
    }

    /// Offset where chunk data begins in a dense shard: after a start index, else 0.
    pub(crate) fn data_start(&self) -> u64 {
        // Data follows an index only at the start.
        if self.layout.location == IndexLocation::Start {
            self.layout.index_size
        } else {
            0
        }
    }

    /// The number of shards along each axis that the array's current shape covers.
    pub(crate) fn shard_grid(&self) -> Vec<u64> {
        let spec = &self.meta.spec;
        spec.shape()
            .iter()
            .zip(spec.shard_shape())
            .map(|(n, s)| n.div_ceil(*s))
            .collect()
    }

    /// Whether inner chunk `inner` of the shard at `shard` holds any element of the
    /// array's current shape (chunks wholly outside it are always empty).
    pub(crate) fn chunk_in_array(&self, shard: &[u64], inner: &[u64]) -> bool {
        let spec = &self.meta.spec;
        shard
            .iter()
            .zip(inner)
            .zip(spec.shard_shape().iter().zip(spec.chunk_shape()))
            .zip(spec.shape())
            .all(|(((s, i), (ss, cs)), n)| s * ss + i * cs < *n)
    }

    /// The largest number of bytes one encoded chunk (with its crc32c) can have.
    pub(crate) fn chunk_bound(&self) -> u64 {
        let spec = &self.meta.spec;
        let crc = if spec.crc32c() { 4 } else { 0 };
        spec.codec().bound(spec.chunk_bytes()) as u64 + crc
    }

    /// Checks every present entry of a shard's index against the file: not torn, not
    /// empty, within the codec's bound, inside the file, clear of the index and of each
    /// other. Returns the faults as `(inner chunk number, fault)`, in chunk order.
    pub(crate) fn entry_faults(
        &self,
        shard: &Shard,
        entries: &[Option<(u64, u64)>],
    ) -> Vec<(usize, EntryFault)> {
        let index = self.index_range(shard);
        let bound = self.chunk_bound();
        let mut faults = Vec::new();
        let mut placed = Vec::new();
        for (i, &(offset, nbytes)) in entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
        {
            match self.entry_fault(shard.len, index, bound, offset, nbytes) {
                Some(f) => faults.push((i, f)),
                None => placed.push((offset, offset + nbytes, i)),
            }
        }
        placed.sort_unstable();
        for w in placed.windows(2) {
            let ((_, end_a, a), (offset, end, b)) = (w[0], w[1]);
            if offset < end_a {
                faults.push((
                    b,
                    EntryFault::Overlaps {
                        offset,
                        end,
                        other: self.inner_coords(a as u64),
                    },
                ));
            }
        }
        faults.sort_by_key(|(i, _)| *i);
        faults
    }

    fn entry_fault(
        &self,
        len: u64,
        index: Option<(u64, u64)>,
        bound: u64,
        offset: u64,
        nbytes: u64,
    ) -> Option<EntryFault> {
        if (offset == EMPTY) != (nbytes == EMPTY) {
            return Some(EntryFault::Torn { offset, nbytes });
        }
        if nbytes == 0 {
            return Some(EntryFault::Zero { offset });
        }
        if nbytes > bound {
            return Some(EntryFault::TooLarge { nbytes, bound });
        }
        let end = offset.saturating_add(nbytes);
        if end > len {
            return Some(EntryFault::PastEnd { offset, end, len });
        }
        let (index_at, size) = index?;
        let index_end = index_at + size;
        (offset < index_end && index_at < end).then_some(EntryFault::OverIndex {
            offset,
            end,
            index_at,
            index_end,
        })
    }

    /// Checks one chunk's stored bytes: its crc32c when the array has one; a full decode
    /// to exactly `chunk_bytes` when it has none or when `decode` is set.
    pub(crate) fn check_chunk(&self, bytes: &[u8], decode: bool) -> Result<CheckedBy, ChunkFault> {
        let spec = &self.meta.spec;
        let nbytes = bytes.len() as u64;
        let body = if spec.crc32c() {
            let split = bytes
                .len()
                .checked_sub(4)
                .filter(|&s| s > 0)
                .ok_or(ChunkFault::TooShort { nbytes })?;
            let (body, crc) = bytes.split_at(split);
            let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
            let computed = crc32c::crc32c(body);
            if stored != computed {
                return Err(ChunkFault::Checksum { stored, computed });
            }
            if !decode {
                return Ok(CheckedBy::Crc32c);
            }
            body
        } else {
            bytes
        };
        self.decode_size(body)?;
        Ok(if spec.crc32c() {
            CheckedBy::Crc32cAndDecode
        } else {
            CheckedBy::Decode
        })
    }

    /// Decodes an encoded chunk (without crc32c) and checks its decoded size.
    fn decode_size(&self, body: &[u8]) -> Result<(), ChunkFault> {
        let expected = self.meta.spec.chunk_bytes();
        let got = match self.meta.spec.codec() {
            Codec::None => body.len(),
            Codec::Zstd { .. } => zstd::decompress(body, expected)
                .map_err(ChunkFault::Decode)?
                .len(),
            Codec::Blosc { .. } => blosc::decompress(body, expected)
                .map_err(ChunkFault::Decode)?
                .len(),
            other => return Err(ChunkFault::UnknownCodec(other)),
        };
        if got == expected {
            Ok(())
        } else {
            Err(ChunkFault::WrongSize {
                expected: expected as u64,
                got: got as u64,
            })
        }
    }
}

/// Reads `nbytes` at `offset` of `file` (bounds already checked against its length).
pub(crate) fn read_chunk(file: &File, offset: u64, nbytes: u64) -> Result<Vec<u8>, ChunkFault> {
    let len = usize::try_from(nbytes).map_err(|_| ChunkFault::TooShort { nbytes })?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| ChunkFault::Read(e.to_string()))?;
    Ok(buf)
}

/// Opens a shard file for reading.
pub(crate) fn open_shard(shard: &Shard) -> Result<File, StoreError> {
    File::open(&shard.path).map_err(io("open", &shard.path))
}

/// Bytes the filesystem has allocated for a file (less than its length when sparse).
pub(crate) fn allocated_bytes(path: &Path) -> Result<u64, StoreError> {
    let meta = std::fs::metadata(path).map_err(io("stat", path))?;
    Ok(meta.blocks() * 512)
}

/// Bytes of a shard that hold neither a chunk nor the index (holes of a sparse shard
/// included): `len - index - Σ nbytes`, saturating.
pub(crate) fn gap_bytes(store: &Store, shard: &Shard, entries: &[Option<(u64, u64)>]) -> u64 {
    let used: u64 = entries.iter().flatten().map(|(_, n)| *n).sum();
    shard
        .len
        .saturating_sub(store.layout.index_size)
        .saturating_sub(used)
}

/// A progress bar on stderr when it is a terminal and the output is not JSON; hidden
/// otherwise.
pub(crate) fn progress(len: u64, what: &'static str, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} shards ({eta} left)",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}

/// Keys of shards as text `c/i/j/…` → display of inner-chunk coordinates `[a, b, c]`.
pub(crate) fn coords_text(c: &[u64]) -> String {
    let parts: Vec<String> = c.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zarrstream::read::metadata::RecordedProgress;
    use zarrstream::{ArraySpec, Checksum, ChunkEncoder, DataType};

    /// A store of `[8, 64, 64]` u16, chunks `[1, 32, 32]`, shards `[4, 64, 64]` (16
    /// chunks per shard), without files.
    fn store(codec: Codec, crc32c: bool, location: IndexLocation) -> Store {
        let spec = ArraySpec::builder()
            .shape([8, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
            .dtype(DataType::UInt16)
            .codec(codec)
            .crc32c(crc32c)
            .index_location(location)
            .build()
            .unwrap();
        Store {
            root: PathBuf::from("/nonexistent"),
            layout: ShardLayout::new(&spec).unwrap(),
            meta: StoreMetadata {
                spec,
                progress: RecordedProgress::default(),
            },
            doc: serde_json::Value::Null,
        }
    }

    fn shard(len: u64) -> Shard {
        Shard {
            key: "c/0/0/0".into(),
            coords: vec![0, 0, 0],
            path: PathBuf::from("/nonexistent/c/0/0/0"),
            len,
        }
    }

    fn encode(codec: Codec, crc32c: bool, data: &[u8]) -> Vec<u8> {
        let mut enc = ChunkEncoder::new(codec, 2, Checksum::crc32c_if(crc32c)).unwrap();
        let mut out = vec![0u8; enc.slot_bound(data.len())];
        let n = enc.encode_slice(data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn coordinates_and_grid() {
        let s = store(Codec::none(), true, IndexLocation::End);
        assert_eq!(s.chunks_per_shard(), vec![4, 2, 2]);
        assert_eq!(s.inner_coords(0), vec![0, 0, 0]);
        assert_eq!(s.inner_coords(7), vec![1, 1, 1]);
        assert_eq!(s.inner_coords(13), vec![3, 0, 1]);
        assert_eq!(s.shard_grid(), vec![2, 1, 1]);
        assert!(s.chunk_in_array(&[1, 0, 0], &[3, 1, 1]));
        assert!(!s.chunk_in_array(&[2, 0, 0], &[0, 0, 0]));
        assert_eq!(coords_text(&[1, 0, 2]), "[1, 0, 2]");
        assert_eq!(s.data_start(), 0);
        let start = store(Codec::none(), true, IndexLocation::Start);
        assert_eq!(start.data_start(), 16 * 16 + 4);
    }

    #[test]
    fn entry_faults_name_each_bad_entry() {
        let s = store(Codec::none(), true, IndexLocation::End);
        let chunk = 32 * 32 * 2 + 4;
        let len = 4 * chunk + s.layout.index_size;
        let mut entries = vec![None; 16];
        entries[0] = Some((0, chunk)); // fine
        entries[1] = Some((chunk, chunk)); // fine
        entries[2] = Some((chunk + 10, chunk)); // overlaps chunk 1
        entries[3] = Some((EMPTY, 5)); // torn
        entries[4] = Some((7, 0)); // zero bytes
        entries[5] = Some((0, chunk + 1)); // larger than the codec's bound
        entries[6] = Some((len - 10, 8)); // over the index
        entries[7] = Some((len - 2, 8)); // past the end
        let faults = s.entry_faults(&shard(len), &entries);
        let kinds: Vec<(usize, &str)> = faults
            .iter()
            .map(|(i, f)| {
                let k = match f {
                    EntryFault::Overlaps { other, .. } => {
                        assert_eq!(other, &vec![0, 0, 1]);
                        "overlap"
                    }
                    EntryFault::Torn { .. } => "torn",
                    EntryFault::Zero { .. } => "zero",
                    EntryFault::TooLarge { .. } => "large",
                    EntryFault::OverIndex { .. } => "index",
                    EntryFault::PastEnd { .. } => "end",
                };
                (*i, k)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (2, "overlap"),
                (3, "torn"),
                (4, "zero"),
                (5, "large"),
                (6, "index"),
                (7, "end")
            ]
        );
        // An index at the start is overlapped by a chunk at offset 0.
        let start = store(Codec::none(), true, IndexLocation::Start);
        let f = start.entry_faults(&shard(len), &[Some((0, 8))]);
        assert!(
            matches!(f[..], [(0, EntryFault::OverIndex { .. })]),
            "{f:?}"
        );
    }

    #[test]
    fn check_chunk_by_crc32c_and_by_decoding() {
        let data: Vec<u8> = (0..32 * 32 * 2).map(|i| (i / 7) as u8).collect();
        for codec in [Codec::none(), Codec::zstd(1), Codec::blosc_lz4(1)] {
            let s = store(codec, true, IndexLocation::End);
            let mut bytes = encode(codec, true, &data);
            assert_eq!(s.check_chunk(&bytes, false), Ok(CheckedBy::Crc32c));
            assert_eq!(s.check_chunk(&bytes, true), Ok(CheckedBy::Crc32cAndDecode));
            bytes[3] ^= 1;
            assert!(matches!(
                s.check_chunk(&bytes, false),
                Err(ChunkFault::Checksum { .. })
            ));
            assert!(matches!(
                s.check_chunk(&bytes[..4], false),
                Err(ChunkFault::TooShort { nbytes: 4 })
            ));

            let s = store(codec, false, IndexLocation::End);
            let bytes = encode(codec, false, &data);
            assert_eq!(
                s.check_chunk(&bytes, false),
                Ok(CheckedBy::Decode),
                "{codec:?}"
            );
            let short = &bytes[..bytes.len() - 1];
            assert!(s.check_chunk(short, false).is_err(), "{codec:?} cut");
        }
        // A frame of the wrong size: one decoding to half a chunk.
        let s = store(Codec::zstd(1), false, IndexLocation::End);
        let half = encode(Codec::zstd(1), false, &data[..data.len() / 2]);
        assert!(matches!(
            s.check_chunk(&half, false),
            Err(ChunkFault::WrongSize { got: 1024, .. })
        ));
    }

    #[test]
    fn gap_bytes_count_what_is_neither_chunk_nor_index() {
        let s = store(Codec::none(), true, IndexLocation::End);
        let entries = [Some((0, 100)), None, Some((4096, 50))];
        let len = 4096 + 50 + s.layout.index_size;
        assert_eq!(gap_bytes(&s, &shard(len), &entries), 4096 - 100);
        assert_eq!(gap_bytes(&s, &shard(3), &entries), 0);
    }

    #[test]
    fn shard_keys_resolve_to_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(Codec::none(), true, IndexLocation::End);
        s.root = dir.path().to_path_buf();
        std::fs::create_dir_all(dir.path().join("c/1/0")).unwrap();
        std::fs::write(dir.path().join("c/1/0/0"), b"x").unwrap();
        std::fs::write(dir.path().join("c/1/0/.0.compact-tmp"), b"x").unwrap();
        assert_eq!(s.shards().unwrap().len(), 1);
        for key in ["c/1/0/0", "1/0/0", "/c/1/0/0/"] {
            assert_eq!(s.shard(key).unwrap().coords, vec![1, 0, 0], "{key}");
        }
        for key in ["c/0/0/0", "c/1/0", "c/1/0/0/0", "c/a/0/0", ""] {
            assert!(
                matches!(s.shard(key), Err(StoreError::NoSuchShard { .. })),
                "{key}"
            );
        }
    }
}
