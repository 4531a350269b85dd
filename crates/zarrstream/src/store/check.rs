//! Checks of what a shard holds: its index entries against the file, and each chunk's
//! bytes by crc32c or by decoding.

use crate::platform::FileExt;
use std::fs::File;

use super::reader::{Shard, StoreReader};
use crate::codec::Codec;
use crate::read::index::EMPTY;
use crate::read::{ReadError, blosc, zstd};
use crate::spec::ArraySpec;

/// Why an index entry of a finished shard is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryFault {
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
#[non_exhaustive]
pub enum ChunkFault {
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
pub enum CheckedBy {
    /// Its crc32c matched.
    Crc32c,
    /// Its crc32c matched and it decoded to exactly the chunk size.
    Crc32cAndDecode,
    /// It decoded to exactly the chunk size (the array has no crc32c).
    Decode,
}

impl StoreReader {
    /// The largest number of bytes one encoded chunk (with its crc32c) can have.
    pub fn chunk_bound(&self) -> u64 {
        let spec = self.spec();
        let crc = if spec.crc32c() { 4 } else { 0 };
        spec.codec().bound(spec.chunk_bytes()) as u64 + crc
    }

    /// Checks every present entry of a shard's index against the file: not torn, not
    /// empty, within the codec's bound, inside the file, clear of the index and of each
    /// other. Returns the faults as `(inner chunk number, fault)`, in chunk order.
    pub fn entry_faults(
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
            match entry_fault(shard.len, index, bound, offset, nbytes) {
                Some(f) => faults.push((i, f)),
                None => placed.push((offset, offset + nbytes, i)),
            }
        }
        placed.sort_unstable();
        for w in placed.windows(2) {
            let ((_, end_a, a), (offset, end, b)) = (w[0], w[1]);
            if offset < end_a {
                let other = self.inner_coords(a as u64);
                faults.push((b, EntryFault::Overlaps { offset, end, other }));
            }
        }
        faults.sort_by_key(|(i, _)| *i);
        faults
    }

    /// Checks one chunk's stored bytes: its crc32c when the array has one; a full decode
    /// to exactly `chunk_bytes` when it has none or when `decode` is set.
    pub fn check_chunk(&self, bytes: &[u8], decode: bool) -> Result<CheckedBy, ChunkFault> {
        check_chunk(self.spec(), bytes, decode)
    }
}

fn entry_fault(
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

/// [`StoreReader::check_chunk`] for an array of `spec`.
pub(crate) fn check_chunk(
    spec: &ArraySpec,
    bytes: &[u8],
    decode: bool,
) -> Result<CheckedBy, ChunkFault> {
    let nbytes = bytes.len() as u64;
    let body = if spec.crc32c {
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
    decode_size(spec, body)?;
    Ok(if spec.crc32c {
        CheckedBy::Crc32cAndDecode
    } else {
        CheckedBy::Decode
    })
}

/// Decodes an encoded chunk (without crc32c) and checks its decoded size.
fn decode_size(spec: &ArraySpec, body: &[u8]) -> Result<(), ChunkFault> {
    let expected = spec.chunk_bytes;
    let got = match spec.codec {
        Codec::None => body.len(),
        Codec::Zstd { .. } => zstd::decompress(body, expected)
            .map_err(ChunkFault::Decode)?
            .len(),
        Codec::Blosc { .. } => blosc::decompress(body, expected)
            .map_err(ChunkFault::Decode)?
            .len(),
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

/// The stored length (with its crc32c) of the encoded chunk that starts `head`, read
/// off the chunk itself: Blosc's `cbytes`, the zstd frame's size, the fixed size of an
/// uncompressed chunk. `None` if `head` holds no whole chunk header of the codec. Used
/// by `recover` for a working-index entry torn after its offset was stored; the length
/// it gives is only trusted once the chunk verifies.
pub(crate) fn stored_len(spec: &ArraySpec, head: &[u8]) -> Option<u64> {
    let body = match spec.codec {
        Codec::None => spec.chunk_bytes as u64,
        Codec::Zstd { .. } => ::zstd::zstd_safe::find_frame_compressed_size(head).ok()? as u64,
        Codec::Blosc { .. } => {
            // Blosc1 header: version, versionlz, flags, typesize, nbytes, blocksize,
            // cbytes (the whole container), each u32 little-endian after the first four.
            let cbytes = head.get(12..16)?;
            u64::from(u32::from_le_bytes(cbytes.try_into().ok()?))
        }
    };
    Some(body + if spec.crc32c { 4 } else { 0 })
}

/// Reads `nbytes` at `offset` of `file` (bounds already checked against its length).
pub fn read_chunk(file: &File, offset: u64, nbytes: u64) -> Result<Vec<u8>, ChunkFault> {
    let len = usize::try_from(nbytes).map_err(|_| ChunkFault::TooShort { nbytes })?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)
        .map_err(|e| ChunkFault::Read(e.to_string()))?;
    Ok(buf)
}
