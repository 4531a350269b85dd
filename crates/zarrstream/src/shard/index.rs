//! The shard index: `(offset, nbytes)` per inner chunk, u64 little-endian, empty =
//! both `u64::MAX`, followed by the crc32c of those bytes (the sharding codec's
//! `index_codecs` `bytes(little)` + `crc32c`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Marker of an empty inner chunk (both fields).
pub(crate) const EMPTY: u64 = u64::MAX;

/// Entries filled concurrently by workers; read by the finisher once the shard's pending
/// count has reached zero (the counter's AcqRel orders these relaxed stores).
pub(crate) struct IndexEntries {
    entries: Box<[AtomicU64]>,
}

impl IndexEntries {
    pub(crate) fn new(n: usize) -> Self {
        IndexEntries {
            entries: (0..2 * n).map(|_| AtomicU64::new(EMPTY)).collect(),
        }
    }

    pub(crate) fn set(&self, i: usize, offset: u64, nbytes: u64) {
        self.entries[2 * i].store(offset, Ordering::Relaxed);
        self.entries[2 * i + 1].store(nbytes, Ordering::Relaxed);
    }

    /// `(offset, nbytes)` per chunk, `None` for empty chunks.
    pub(crate) fn snapshot(&self) -> Vec<Option<(u64, u64)>> {
        self.entries
            .chunks_exact(2)
            .map(|e| {
                let (o, n) = (e[0].load(Ordering::Relaxed), e[1].load(Ordering::Relaxed));
                (o != EMPTY).then_some((o, n))
            })
            .collect()
    }
}

/// One 16-byte working-index entry, as written next to the data for crash recovery.
pub(crate) fn entry_bytes(offset: u64, nbytes: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&offset.to_le_bytes());
    b[8..].copy_from_slice(&nbytes.to_le_bytes());
    b
}

/// Stores a working-index entry in shared memory (a mapping of the shard file) so that
/// a kill can tear it one way only: the offset is stored before the length, so a torn
/// entry reads `(offset, EMPTY)`, and `recover` takes the length from the chunk itself
/// and verifies it. A copy of [`entry_bytes`] would let the compiler store the two
/// halves in either order.
pub(crate) fn store_entry(entry: &mut [u8; 16], offset: u64, nbytes: u64) {
    let (off, len) = entry.split_at_mut(8);
    off.copy_from_slice(&offset.to_le_bytes());
    // A kill sees one thread's stores in program order; only the compiler could move
    // the length ahead of the offset.
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
    // The crash tests kill the writer here, between the two stores (and the loom model
    // its modelled kill).
    fail::fail_point!("working-entry-between-offset-and-length");
    crate::sync::kill_point();
    len.copy_from_slice(&nbytes.to_le_bytes());
}

/// Encodes a final index (`16 n + 4` bytes) into `out`.
pub(crate) fn encode_index(entries: &[Option<(u64, u64)>], out: &mut [u8]) {
    let n = entries.len();
    for (e, dst) in entries.iter().zip(out.chunks_exact_mut(16)) {
        let (o, b) = e.unwrap_or((EMPTY, EMPTY));
        dst.copy_from_slice(&entry_bytes(o, b));
    }
    let crc = crc32c::crc32c(&out[..16 * n]);
    out[16 * n..16 * n + 4].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_bytes_and_crc() {
        let mut out = vec![0u8; 16 * 2 + 4];
        encode_index(&[Some((68, 10)), None], &mut out);
        assert_eq!(&out[..8], &68u64.to_le_bytes());
        assert_eq!(&out[8..16], &10u64.to_le_bytes());
        assert!(out[16..32].iter().all(|&b| b == 0xff));
        assert_eq!(&out[32..], &crc32c::crc32c(&out[..32]).to_le_bytes());
    }

    #[test]
    fn entries_start_empty() {
        let e = IndexEntries::new(3);
        e.set(1, 5, 6);
        assert_eq!(e.snapshot(), vec![None, Some((5, 6)), None]);
    }
}
