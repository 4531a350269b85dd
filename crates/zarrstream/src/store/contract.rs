//! The names a store is made of on disk. The writer creates these files and `recover`
//! and the tools look for them, so every side takes them from here: renaming one in a
//! single place cannot silently break the others.

/// The array metadata document at the root of an array.
pub const METADATA_FILE: &str = "zarr.json";

/// The directory holding the shard files (`c/0/1/2`): the first component of every
/// shard key (the Zarr v3 default chunk key encoding with separator `/`).
pub const CHUNK_DIR: &str = "c";

/// The directory of temporary shards (and the writer's lock), outside the key space.
pub const PARTIAL_DIR: &str = ".zarrstream-partial";

/// Name of the writer's lock file inside [`PARTIAL_DIR`].
pub const LOCK_FILE: &str = "writer.lock";

/// Suffix of a temporary shard the writer is filling: `c.0.1.2.partial`.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// Extension a temporary shard has while it is created (before it is reserved and its
/// working index initialised): `c.0.1.2.creating`.
pub const CREATING_EXTENSION: &str = "creating";

/// Extension of a finished shard being compacted into a fresh file, renamed over its
/// temporary shard once complete: `c.0.1.2.compacting`.
pub const COMPACTING_EXTENSION: &str = "compacting";

/// Suffix of a shard `recover` is rebuilding (removed and redone if a recovery was
/// interrupted): `c.0.1.2.partial.recovering`.
pub const REBUILD_SUFFIX: &str = ".recovering";

/// Suffix `recover` gives a temporary shard that holds nothing readable (kept for
/// inspection): `c.0.1.2.partial.unrecoverable`.
pub const UNRECOVERABLE_SUFFIX: &str = ".unrecoverable";

/// The file name in [`PARTIAL_DIR`] of the temporary shard for `key` (`c/0/1/2` →
/// `c.0.1.2.partial`): the key with `/` as `.`, so that all temporary shards sit in one
/// flat directory.
///
/// ```
/// use zarrstream::store::{partial_file_name, partial_key};
/// assert_eq!(partial_file_name("c/0/1/2"), "c.0.1.2.partial");
/// assert_eq!(partial_key("c.0.1.2.partial"), Some(vec![0, 1, 2]));
/// assert_eq!(partial_key("c.0.0.0..partial"), None);
/// assert_eq!(partial_key("c..0.0.partial"), None);
/// assert_eq!(partial_key("c.+1.0.partial"), None);
/// ```
pub fn partial_file_name(key: &str) -> String {
    format!("{}{PARTIAL_SUFFIX}", key.replace('/', "."))
}

/// The shard coordinates a temporary shard's file name stands for, if it is one
/// (the inverse of [`partial_file_name`]).
pub fn partial_key(name: &str) -> Option<Vec<u64>> {
    let stem = name.strip_suffix(PARTIAL_SUFFIX)?;
    let rest = stem.strip_prefix(CHUNK_DIR)?.strip_prefix('.')?;
    // Exactly the form `partial_file_name` writes: a stray name with an empty part
    // (`c.0..1.partial`) is no shard of ours, and recover must leave it alone rather
    // than rebuild it over a finished shard.
    coords(rest.split('.'))
}

/// Why `name` cannot be the name of a node (a group or array directory) we create
/// inside a store: empty, `.`/`..` or dot-prefixed (our temporary names), [`CHUNK_DIR`]
/// (an array's chunks) or [`METADATA_FILE`] (a node's document); `None` if it can.
pub(crate) fn bad_node_name(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.starts_with('.') {
        Some("empty, or starting with `.` (`.`, `..` and temporary names)")
    } else if name == CHUNK_DIR || name == METADATA_FILE {
        Some("`c` and `zarr.json` name an array's chunks and a node's document")
    } else {
        None
    }
}

/// Whether a file in [`PARTIAL_DIR`] is left over by an interrupted step and holds no
/// data of its own: a rebuild interrupted before its rename (redone from its
/// `.partial`), a temporary shard killed while it was created (it holds no chunks yet),
/// or a compaction killed before its rename (its `.partial` is untouched).
pub fn is_leftover(name: &str) -> bool {
    let ext = |ext: &str| {
        name.strip_suffix(ext)
            .is_some_and(|stem| stem.ends_with('.'))
    };
    name.ends_with(REBUILD_SUFFIX) || ext(CREATING_EXTENSION) || ext(COMPACTING_EXTENSION)
}

/// Grid coordinates from the parts of a key: each part plain decimal digits (no sign,
/// no empty part), or `None`.
pub(super) fn coords<'a>(parts: impl Iterator<Item = &'a str>) -> Option<Vec<u64>> {
    parts
        .map(|p| {
            let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| p.parse::<u64>().ok()).flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::shard_key;

    #[test]
    fn partial_names_round_trip() {
        let key = shard_key([3, 0, 12]);
        let name = partial_file_name(&key);
        assert_eq!(name, "c.3.0.12.partial");
        assert_eq!(partial_key(&name), Some(vec![3, 0, 12]));
        for stranger in [
            "notes.txt",
            "c.0.x.partial",
            "d.0.0.partial",
            "c.0.0",
            "c..partial",
        ] {
            assert_eq!(partial_key(stranger), None, "{stranger}");
        }
    }

    #[test]
    fn leftovers_are_creating_and_rebuilding_files() {
        let partial = Path::new(&partial_file_name("c/0/0/0")).to_path_buf();
        let creating = partial.with_extension(CREATING_EXTENSION);
        assert!(is_leftover(&creating.to_string_lossy()));
        let compacting = partial.with_extension(COMPACTING_EXTENSION);
        assert_eq!(compacting.to_string_lossy(), "c.0.0.0.compacting");
        assert!(is_leftover(&compacting.to_string_lossy()));
        assert!(is_leftover(&format!("c.0.0.0.partial{REBUILD_SUFFIX}")));
        assert!(!is_leftover("c.0.0.0.partial"));
        assert!(!is_leftover(LOCK_FILE));
    }
}
