//! Layout oracles that do not take their answers from the library: the shard index read
//! by the format's written rule (`16 n + 4` bytes, crc32c last) and the reserved layout of
//! a temporary shard computed from the rule the book's format chapter states, so a test
//! that checks the writer's sizes or index does not ask the writer.

use zarrstream::{ArraySpec, Codec, IndexLocation};

/// Parsed shard index: `(offset, nbytes)` per inner chunk, `None` when empty.
pub fn parse_index(
    bytes: &[u8],
    n: usize,
    location: IndexLocation,
) -> Result<Vec<Option<(u64, u64)>>, String> {
    let size = 16 * n + 4;
    if bytes.len() < size {
        return Err(format!(
            "file of {} bytes is shorter than its index ({size})",
            bytes.len()
        ));
    }
    let index = match location {
        IndexLocation::End => &bytes[bytes.len() - size..],
        IndexLocation::Start => &bytes[..size],
        other => return Err(format!("index location {other} not covered")),
    };
    // Invariant: `index` is `16 n + 4` bytes (read with the layout's size), so the tail
    // after the entries is exactly the 4-byte crc32c.
    let crc = u32::from_le_bytes(
        index[16 * n..]
            .try_into()
            .expect("the index is `size` = 16 × n + 4 bytes: the last 4 are its crc32c"),
    );
    if crc32c::crc32c(&index[..16 * n]) != crc {
        return Err("index crc32c mismatch".into());
    }
    Ok(index[..16 * n]
        .chunks_exact(16)
        .map(|e| {
            // `chunks_exact(16)`: each entry is an 8-byte offset then an 8-byte length.
            let o = u64::from_le_bytes(e[..8].try_into().expect("the first 8 of 16 bytes"));
            let b = u64::from_le_bytes(e[8..].try_into().expect("the last 8 of 16 bytes"));
            (o != u64::MAX || b != u64::MAX).then_some((o, b))
        })
        .collect())
}

/// Where a temporary shard's working index starts and how large the file is reserved,
/// computed from the rule the book's format chapter states, so a test that checks the
/// writer's sizes does not take them from the writer:
/// a slot is a chunk's worst case (raw bytes for no codec; c-blosc's `BLOSC_MAX_OVERHEAD`
/// of 16 bytes more for Blosc) plus 4 bytes of crc32c, rounded up to 4 KiB from 64 KiB
/// on and to 64 bytes below; the index is `16 n + 4` bytes, after the slots (index at the
/// end) or before them, rounded up like a slot (index at the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// Chunks per shard.
    pub n: u64,
    /// Offset of the working index.
    pub index_offset: u64,
    /// The reserved file size.
    pub file_size: u64,
}

/// The reserved layout of a temporary shard of `spec` (see [`Reserved`]). Panics for a
/// codec or index location the rule does not cover here.
pub fn reserved(spec: &ArraySpec) -> Reserved {
    let chunk: u64 = spec.chunk_shape().iter().product::<u64>() * spec.dtype().size() as u64;
    let n: u64 = spec
        .shard_shape()
        .iter()
        .zip(spec.chunk_shape())
        .map(|(s, c)| s / c)
        .product();
    let overhead = match spec.codec() {
        Codec::None => 0,
        Codec::Blosc { .. } => 16,
        other => panic!("no written worst case for {other} here"),
    };
    let crc = if spec.crc32c() { 4 } else { 0 };
    let raw = chunk + overhead + crc;
    let align = if raw >= 64 * 1024 { 4096 } else { 64 };
    let slot = raw.div_ceil(align) * align;
    let index = 16 * n + 4;
    match spec.index_location() {
        IndexLocation::End => Reserved {
            n,
            index_offset: n * slot,
            file_size: n * slot + index,
        },
        IndexLocation::Start => Reserved {
            n,
            index_offset: 0,
            file_size: index.div_ceil(align) * align + n * slot,
        },
        other => panic!("no written layout for index location {other}"),
    }
}
