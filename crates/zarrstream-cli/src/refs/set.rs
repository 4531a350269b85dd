//! The reference set in memory: metadata documents and one `(shard, offset, nbytes)` per
//! present inner chunk, numbered in C order over the v2 chunk grid.

use serde_json::Value;

/// One present inner chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ChunkRef {
    /// C-order number of the chunk in the v2 grid (what the parquet layout indexes by).
    pub number: u64,
    /// Index into [`RefSet::shard_keys`].
    pub shard: usize,
    /// Offset of the referenced bytes in the shard file.
    pub offset: u64,
    /// Number of referenced bytes.
    pub nbytes: u64,
}

/// Everything a reference file holds, before it is written in one format or the other.
#[derive(Debug, Clone)]
pub(super) struct RefSet {
    /// The array's name inside the reference set (`<name>/.zarray`, `<name>/0.0.0`).
    pub name: String,
    /// `.zgroup`, `<name>/.zarray`, `<name>/.zattrs` as JSON documents.
    pub metadata: Vec<(String, Value)>,
    /// Chunks per axis of the v2 grid: `ceil(shape / chunks)`.
    pub grid: Vec<u64>,
    /// Shard keys relative to the store root (`c/0/0/0`).
    pub shard_keys: Vec<String>,
    /// The present chunks, sorted by `number`.
    pub refs: Vec<ChunkRef>,
}

impl RefSet {
    /// Number of chunks in the v2 grid, present or not.
    pub(super) fn total_chunks(&self) -> u64 {
        self.grid.iter().product()
    }

    /// The key of chunk `number`: `<name>/i.j.k`.
    pub(super) fn key(&self, number: u64) -> String {
        let mut coords = vec![0u64; self.grid.len()];
        let mut rest = number;
        for (c, n) in coords.iter_mut().zip(&self.grid).rev() {
            *c = rest % n;
            rest /= n;
        }
        let parts: Vec<String> = coords.iter().map(u64::to_string).collect();
        format!("{}/{}", self.name, parts.join("."))
    }
}

/// The C-order number of `coords` in `grid`, or `None` when they lie outside it.
pub(super) fn ravel(coords: &[u64], grid: &[u64]) -> Option<u64> {
    let mut number = 0u64;
    for (c, n) in coords.iter().zip(grid) {
        if c >= n {
            return None;
        }
        number = number.checked_mul(*n)?.checked_add(*c)?;
    }
    Some(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ravel_and_key_are_inverse() {
        let set = RefSet {
            name: "a".into(),
            metadata: vec![],
            grid: vec![3, 2, 5],
            shard_keys: vec![],
            refs: vec![],
        };
        assert_eq!(ravel(&[2, 1, 4], &set.grid), Some(29));
        assert_eq!(set.key(29), "a/2.1.4");
        assert_eq!(ravel(&[3, 0, 0], &set.grid), None);
        assert_eq!(set.total_chunks(), 30);
    }
}
