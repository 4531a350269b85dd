//! The check, before a shard is finished, that nobody cut its file under the writer.
//!
//! A temporary shard is created at its full reserved size and the writer never shortens
//! it before the finisher's last step, so a file that is shorter, has lost reserved
//! blocks, or reads zeros in its working index was truncated by another process. With
//! the mmap and direct sinks an access through the mapping that met the cut raised
//! SIGBUS, which the guard in `slots.rs` caught and flagged; the `pwrite` and direct
//! sinks' writes into a cut file just extend it again, so only the file shows it.

use super::TempShard;
use crate::error::{Error, Result};
use crate::platform::{FileExt, allocated_bytes};

/// What a sink knows about its shard when it finishes it.
pub(crate) struct Seen {
    /// The SIGBUS guard replaced the shard's mapping (an access met the cut).
    pub mapping_cut: bool,
    /// The sink writes through a mapping (mmap, direct), so the file is on a filesystem
    /// where reserved blocks stay allocated until written (not copy-on-write): fewer
    /// allocated bytes than reserved means a cut.
    pub mapped: bool,
    /// The working index is still in the file as the workers stored it (not yet
    /// overwritten by the final index), so it can be read back.
    pub working_index: bool,
}

/// Returns [`Error::ShardTruncated`] (and keeps the file for `recover`) when the shard
/// file was cut; `Ok` otherwise.
pub(crate) fn check(temp: &TempShard, seen: Seen) -> Result<()> {
    let reason = why_cut(temp, &seen)?;
    match reason {
        None => Ok(()),
        Some(reason) => {
            temp.keep();
            Err(Error::ShardTruncated {
                path: temp.path.clone(),
                reason,
            })
        }
    }
}

fn why_cut(temp: &TempShard, seen: &Seen) -> Result<Option<String>> {
    let l = &temp.layout;
    let meta = temp
        .file
        .metadata()
        .map_err(|e| Error::io("stat", &temp.path, e, 0))?;
    let mut reasons = Vec::new();
    if seen.mapping_cut {
        reasons.push(
            "a write through its mapping met the cut: SIGBUS, caught by the guard".to_string(),
        );
    }
    if meta.len() < l.file_size {
        reasons.push(format!(
            "it is {} bytes long, {} were reserved",
            meta.len(),
            l.file_size
        ));
    } else if seen.mapped && temp.reserved {
        let allocated =
            allocated_bytes(&temp.file).map_err(|e| Error::io("stat", &temp.path, e, 0))?;
        if allocated < l.file_size {
            reasons.push(format!(
                "{allocated} bytes are allocated to it, {} were reserved",
                l.file_size
            ));
        }
    }
    if seen.working_index && reasons.is_empty() {
        // Entries start as all ones and are written whole by the sinks; zero bytes are
        // what a cut file reads where it was extended again.
        let mut index = vec![0u8; 16 * l.n as usize];
        temp.file
            .read_exact_at(&mut index, l.index_offset)
            .map_err(|e| Error::io("read", &temp.path, e, 0))?;
        let lost = index
            .chunks_exact(16)
            .filter(|e| e.iter().all(|&b| b == 0))
            .count();
        if lost > 0 {
            reasons.push(format!("{lost} working-index entries read as zeros"));
        }
    }
    Ok((!reasons.is_empty()).then(|| reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::ShardLayout;
    use crate::{ArraySpec, Codec};

    fn temp_shard(dir: &std::path::Path) -> TempShard {
        let spec = ArraySpec::builder()
            .shape([0, 256, 256])
            .chunk_shape([1, 128, 128])
            .shard_shape([4, 256, 256])
            .codec(Codec::none())
            .build()
            .unwrap();
        let layout = ShardLayout::new(&spec).unwrap();
        TempShard::create(&dir.join("c.0.0.0.partial"), layout).unwrap()
    }

    fn seen(working_index: bool, mapped: bool) -> Seen {
        Seen {
            mapping_cut: false,
            mapped,
            working_index,
        }
    }

    #[test]
    fn an_untouched_shard_passes() {
        let dir = tempfile::tempdir().unwrap();
        let temp = temp_shard(dir.path());
        check(&temp, seen(true, true)).unwrap();
    }

    #[test]
    fn a_shorter_file_is_truncated_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let temp = temp_shard(dir.path());
        let path = temp.path.clone();
        temp.file.set_len(temp.layout.file_size / 2).unwrap();
        let e = check(&temp, seen(false, false)).unwrap_err();
        assert!(
            matches!(&e, Error::ShardTruncated { path: p, reason } if *p == path && reason.contains("bytes long")),
            "{e:?}"
        );
        drop(temp);
        assert!(path.exists(), "kept for recover");
    }

    #[test]
    fn a_file_cut_and_extended_again_is_seen() {
        // What a `pwrite` or `O_DIRECT` write past the cut does: the file is long again,
        // with a hole where the cut took the reserved blocks and the working index.
        let dir = tempfile::tempdir().unwrap();
        let temp = temp_shard(dir.path());
        let size = temp.layout.file_size;
        temp.file.set_len(0).unwrap();
        temp.file.set_len(size).unwrap();
        let e = check(&temp, seen(true, false)).unwrap_err();
        assert!(
            e.to_string()
                .contains("working-index entries read as zeros"),
            "{e}"
        );
        if temp.reserved {
            let e = check(&temp, seen(false, true)).unwrap_err();
            assert!(e.to_string().contains("allocated"), "{e}");
        }
        let mut cut = seen(false, false);
        cut.mapping_cut = true;
        let e = check(&temp, cut).unwrap_err();
        assert!(e.to_string().contains("SIGBUS"), "{e}");
    }
}
