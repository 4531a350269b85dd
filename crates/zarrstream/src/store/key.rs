//! Shard keys: `c/0/1/2`, one coordinate per axis of the shard grid.

use super::contract::{CHUNK_DIR, coords};

/// The key of the shard at grid coordinates `coords`, relative to the array root.
///
/// ```
/// assert_eq!(zarrstream::store::shard_key([0, 1, 2]), "c/0/1/2");
/// ```
pub fn shard_key(coords: impl IntoIterator<Item = u64>) -> String {
    let mut key = String::from(CHUNK_DIR);
    for c in coords {
        key.push('/');
        key.push_str(&c.to_string());
    }
    key
}

/// The grid coordinates a shard key names: `c/0/1/2`, also accepted without the `c/`
/// prefix and with leading or trailing slashes. `None` if any part is not a number.
///
/// ```
/// use zarrstream::store::parse_shard_key;
/// assert_eq!(parse_shard_key("c/0/1/2"), Some(vec![0, 1, 2]));
/// assert_eq!(parse_shard_key("/0/1/2/"), Some(vec![0, 1, 2]));
/// assert_eq!(parse_shard_key("c/a/0"), None);
/// assert_eq!(parse_shard_key("c/+1/0"), None);
/// ```
pub fn parse_shard_key(key: &str) -> Option<Vec<u64>> {
    let rest = key.trim_matches('/');
    let rest = rest
        .strip_prefix(CHUNK_DIR)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(rest);
    coords(rest.split('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        assert_eq!(shard_key([]), "c");
        assert_eq!(
            parse_shard_key(&shard_key([7, 0, 42])),
            Some(vec![7, 0, 42])
        );
        assert_eq!(parse_shard_key(""), None);
        assert_eq!(parse_shard_key("c/1//2"), None);
    }
}
