//! One legacy shard → one standard shard: the same bytes followed by the crc32c of the
//! index (the legacy index is already the last `16 n` bytes, so every offset stays
//! valid and no chunk is decoded or recompressed).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use zarrstream::IoError;

use zarrstream::read::index::{EMPTY, raw_entries};

use super::error::ConvertError;

/// What one converted shard holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ShardStats {
    /// Inner chunks present (non-empty index entries).
    pub chunks: u64,
    /// Bytes of the new shard file.
    pub bytes: u64,
}

fn corrupt(path: &Path, why: String) -> ConvertError {
    ConvertError::CorruptShard {
        path: path.to_path_buf(),
        why,
    }
}

/// Converts the legacy shard `src` (with `n` inner chunks) into `dst`. Returns `None`
/// when `src` does not exist (the whole shard reads as the fill value).
pub(super) fn convert_shard(
    src: &Path,
    dst: &Path,
    n: u64,
) -> Result<Option<ShardStats>, ConvertError> {
    let meta = match fs::metadata(src) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(IoError::new("stat", src, e).into()),
    };
    if !meta.is_file() {
        return Err(corrupt(src, "not a regular file".into()));
    }
    let index = read_index(src, meta.len(), n)?;
    let chunks = check_entries(src, &index, meta.len() - index.len() as u64)?;
    fs::copy(src, dst).map_err(IoError::with("copy to", dst))?;
    // The copy's length as the file system has it: on Windows `fs::copy`'s count comes
    // from CopyFileExW's progress callback, which Wine never calls (it returns 0).
    let copied = fs::metadata(dst).map_err(IoError::with("stat", dst))?.len();
    if copied != meta.len() {
        return Err(corrupt(
            src,
            format!(
                "changed while being copied ({} → {copied} bytes)",
                meta.len()
            ),
        ));
    }
    let mut out = OpenOptions::new()
        .append(true)
        .open(dst)
        .map_err(IoError::with("open", dst))?;
    out.write_all(&crc32c::crc32c(&index).to_le_bytes())
        .map_err(IoError::with("write", dst))?;
    out.sync_all().map_err(IoError::with("fsync", dst))?;
    Ok(Some(ShardStats {
        chunks,
        bytes: copied + 4,
    }))
}

/// Reads the last `16 n` bytes of a shard of `len` bytes.
fn read_index(src: &Path, len: u64, n: u64) -> Result<Vec<u8>, ConvertError> {
    let index_len = n.saturating_mul(16);
    if len < index_len {
        return Err(corrupt(
            src,
            format!("{len} bytes, shorter than its {index_len}-byte index ({n} inner chunks × 16)"),
        ));
    }
    let mut index = vec![0u8; index_len as usize];
    let mut file = File::open(src).map_err(IoError::with("open", src))?;
    file.seek(SeekFrom::Start(len - index_len))
        .and_then(|_| file.read_exact(&mut index))
        .map_err(IoError::with("read", src))?;
    Ok(index)
}

/// Checks every index entry against the `body` bytes before the index; returns the
/// number of present inner chunks.
fn check_entries(src: &Path, index: &[u8], body: u64) -> Result<u64, ConvertError> {
    let mut present = 0;
    for (i, (offset, nbytes)) in raw_entries(index).enumerate() {
        match (offset == EMPTY, nbytes == EMPTY) {
            (true, true) => continue,
            (false, false) => {}
            _ => {
                return Err(corrupt(
                    src,
                    format!("index entry {i} is half empty (offset {offset}, nbytes {nbytes})"),
                ));
            }
        }
        if offset.checked_add(nbytes).is_none_or(|end| end > body) {
            return Err(corrupt(
                src,
                format!(
                    "inner chunk {i} (offset {offset}, {nbytes} bytes) lies outside the {body} data bytes before the index"
                ),
            ));
        }
        present += 1;
    }
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(e: &[(u64, u64)]) -> Vec<u8> {
        e.iter()
            .flat_map(|(o, b)| o.to_le_bytes().into_iter().chain(b.to_le_bytes()))
            .collect()
    }

    #[test]
    fn entries_are_checked_against_the_body() {
        let p = Path::new("s");
        assert_eq!(
            check_entries(p, &entries(&[(0, 10), (EMPTY, EMPTY)]), 10).unwrap(),
            1
        );
        assert!(check_entries(p, &entries(&[(0, 11)]), 10).is_err());
        assert!(check_entries(p, &entries(&[(EMPTY, 3)]), 10).is_err());
        assert!(check_entries(p, &entries(&[(u64::MAX - 1, 5)]), 10).is_err());
    }

    #[test]
    fn appends_the_index_crc() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("a"), dir.path().join("b"));
        let mut bytes = b"hello".to_vec();
        let index = entries(&[(0, 5), (EMPTY, EMPTY)]);
        bytes.extend(&index);
        fs::write(&src, &bytes).unwrap();
        let stats = convert_shard(&src, &dst, 2).unwrap().unwrap();
        assert_eq!(
            stats,
            ShardStats {
                chunks: 1,
                bytes: bytes.len() as u64 + 4
            }
        );
        let out = fs::read(&dst).unwrap();
        assert_eq!(&out[..bytes.len()], &bytes[..]);
        assert_eq!(out[bytes.len()..], crc32c::crc32c(&index).to_le_bytes());
        assert!(
            convert_shard(&dir.path().join("none"), &dst, 2)
                .unwrap()
                .is_none()
        );
        fs::write(&src, b"short").unwrap();
        assert!(convert_shard(&src, &dst, 2).is_err());
    }
}
