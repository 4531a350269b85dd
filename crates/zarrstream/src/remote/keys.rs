//! Where a file of the staging directory goes in the store: the same key, or for one
//! part of a several-process array, the shard key with the part's index on axis 1 and
//! the array document as the part's progress object.

use serde_json::{Value, json};

/// The folder of the parts' progress objects below the array's prefix.
pub(crate) const PARTS_DIR: &str = ".zarrstream-parts";

/// Maps staging keys (relative paths with `/`) to store keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMap {
    /// `(K, N)`: this process writes part `K` of `N` (axis 1).
    pub(crate) part: Option<(u64, u64)>,
}

impl KeyMap {
    /// The store key of staging key `rel`.
    pub(crate) fn key(&self, rel: &str) -> String {
        let Some((k, _)) = self.part else {
            return rel.to_string();
        };
        if rel == crate::store::METADATA_FILE {
            return progress_key(k);
        }
        // `c/<t>/0/<rest>` → `c/<t>/<k>/<rest>`: the part records axis 1 as extent 1.
        if let Some(rest) = rel.strip_prefix("c/") {
            let mut it = rest.splitn(3, '/');
            if let (Some(t), Some("0"), Some(tail)) = (it.next(), it.next(), it.next()) {
                return format!("c/{t}/{k}/{tail}");
            }
        }
        rel.to_string()
    }

    /// The bytes stored for staging file `rel` whose content is `bytes`: the array
    /// document of a part is wrapped as its progress object.
    pub(crate) fn body(&self, rel: &str, bytes: Vec<u8>) -> Vec<u8> {
        match self.part {
            Some((k, n)) if rel == crate::store::METADATA_FILE => {
                let array: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let wrapped = json!({"part": k, "parts": n, "array": array});
                serde_json::to_vec_pretty(&wrapped).unwrap_or(bytes)
            }
            _ => bytes,
        }
    }
}

/// The key of part `k`'s progress object below the array's prefix.
pub(crate) fn progress_key(k: u64) -> String {
    format!("{PARTS_DIR}/{k}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_moves_its_shards_to_its_index_on_axis_1() {
        let m = KeyMap { part: Some((2, 3)) };
        assert_eq!(m.key("c/5/0/1/0"), "c/5/2/1/0");
        assert_eq!(m.key("zarr.json"), ".zarrstream-parts/2.json");
        let plain = KeyMap { part: None };
        assert_eq!(plain.key("c/5/0/1/0"), "c/5/0/1/0");
        assert_eq!(plain.key("zarr.json"), "zarr.json");
        let body: Value =
            serde_json::from_slice(&m.body("zarr.json", br#"{"shape": [4, 1, 8, 8]}"#.to_vec()))
                .unwrap();
        assert_eq!(body["part"], 2);
        assert_eq!(body["parts"], 3);
        assert_eq!(body["array"]["shape"][0], 4);
    }
}
