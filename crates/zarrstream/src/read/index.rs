//! The shard index: `n` entries of `(offset, nbytes)` as u64 little-endian (both
//! `u64::MAX` for an empty inner chunk), followed by the crc32c of those `16 n` bytes.

use super::ReadError;

/// Marker of an empty inner chunk (both fields).
pub const EMPTY: u64 = u64::MAX;

/// Parses a final shard index of exactly `16 n + 4` bytes and checks its crc32c.
/// Returns `(offset, nbytes)` per inner chunk, `None` for empty ones (both fields
/// `u64::MAX`). Entries are not checked against any file size: that is the caller's.
pub fn parse_index(bytes: &[u8], n: usize) -> Result<Vec<Option<(u64, u64)>>, ReadError> {
    let expected = n.checked_mul(16).and_then(|b| b.checked_add(4));
    let Some(size) = expected.filter(|&s| s == bytes.len()) else {
        return Err(ReadError::IndexLength {
            expected: expected.map_or(u64::MAX, |s| s as u64),
            got: bytes.len() as u64,
        });
    };
    let (body, crc) = bytes.split_at(size - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(ReadError::IndexChecksum { stored, computed });
    }
    Ok(raw_entries(body)
        .map(|(o, b)| (o != EMPTY || b != EMPTY).then_some((o, b)))
        .collect())
}

/// The raw `(offset, nbytes)` pairs of index bytes without looking at any crc32c (the
/// working index of an unfinished shard has none); a trailing partial entry is ignored.
pub fn raw_entries(bytes: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    bytes
        .chunks_exact(16)
        .map(|e| (le_u64(&e[..8]), le_u64(&e[8..])))
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(entries: &[(u64, u64)]) -> Vec<u8> {
        let mut v: Vec<u8> = entries
            .iter()
            .flat_map(|(o, b)| o.to_le_bytes().into_iter().chain(b.to_le_bytes()))
            .collect();
        let crc = crc32c::crc32c(&v);
        v.extend(crc.to_le_bytes());
        v
    }

    #[test]
    fn parses_entries_and_empty_markers() {
        let b = index(&[(0, 10), (EMPTY, EMPTY), (10, 5), (EMPTY, 3)]);
        assert_eq!(
            parse_index(&b, 4).unwrap(),
            vec![Some((0, 10)), None, Some((10, 5)), Some((EMPTY, 3))]
        );
        assert_eq!(parse_index(&index(&[]), 0).unwrap(), vec![]);
    }

    #[test]
    fn rejects_wrong_lengths() {
        let b = index(&[(0, 10), (10, 5)]);
        for (bytes, n) in [
            (&b[..], 1),
            (&b[..], 3),
            (&b[..b.len() - 1], 2),
            (&[][..], 0),
        ] {
            assert!(
                matches!(parse_index(bytes, n), Err(ReadError::IndexLength { .. })),
                "{} bytes, n = {n}",
                bytes.len()
            );
        }
        assert!(matches!(
            parse_index(&b, usize::MAX),
            Err(ReadError::IndexLength {
                expected: u64::MAX,
                ..
            })
        ));
    }

    #[test]
    fn rejects_any_flipped_bit() {
        let b = index(&[(0, 10), (10, 5)]);
        for i in 0..b.len() * 8 {
            let mut d = b.clone();
            d[i / 8] ^= 1 << (i % 8);
            assert!(
                matches!(parse_index(&d, 2), Err(ReadError::IndexChecksum { .. })),
                "bit {i}"
            );
        }
    }

    #[test]
    fn raw_entries_ignore_a_partial_tail() {
        let b = index(&[(1, 2), (EMPTY, EMPTY)]);
        let e: Vec<_> = raw_entries(&b).collect();
        assert_eq!(e, vec![(1, 2), (EMPTY, EMPTY)]);
    }
}
