//! Reading our own stores back, defensively: the shard index, the inner codecs and
//! `zarr.json`. Used by [`recover`](crate::recover) and by tools; every parser here is
//! a pure function on a byte slice (or a JSON value) that never panics and never
//! allocates more than a size it has checked against a caller-given limit, so it can be
//! fed arbitrary bytes (and fuzzed).

pub mod blosc;
pub mod index;
pub mod metadata;
pub mod zstd;

/// Why bytes read back from a store were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A shard index of the wrong length.
    #[error("shard index is {got} bytes, expected {expected} (16 per inner chunk + 4)")]
    IndexLength {
        /// `16 n + 4`.
        expected: u64,
        /// Bytes given.
        got: u64,
    },
    /// The shard index does not match its crc32c.
    #[error("shard index crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    IndexChecksum {
        /// The crc32c stored after the entries.
        stored: u32,
        /// The crc32c of the entries.
        computed: u32,
    },
    /// A frame shorter than its fixed header or than a length it declares.
    #[error("{codec}: truncated: {what}")]
    Truncated {
        /// Codec name.
        codec: &'static str,
        /// What was cut off.
        what: &'static str,
    },
    /// A header field out of its allowed range.
    #[error("{codec}: invalid header: {what}")]
    InvalidHeader {
        /// Codec name.
        codec: &'static str,
        /// Which check failed.
        what: &'static str,
    },
    /// A feature this reader does not implement (another Blosc compressor, bitshuffle, ...).
    #[error("{codec}: unsupported: {what}")]
    Unsupported {
        /// Codec name.
        codec: &'static str,
        /// What is not supported.
        what: &'static str,
    },
    /// The decoded size a frame declares exceeds the caller's limit.
    #[error("{codec}: frame declares {nbytes} decoded bytes, more than the limit of {limit}")]
    TooLarge {
        /// Codec name.
        codec: &'static str,
        /// Declared decoded size.
        nbytes: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// A compressed stream is corrupt or does not decode to its declared size.
    #[error("{codec}: corrupt data: {what}")]
    Corrupt {
        /// Codec name.
        codec: &'static str,
        /// What went wrong.
        what: String,
    },
    /// `zarr.json` is not an array this library wrote (or could have written).
    #[error("zarr.json: {0}")]
    Metadata(String),
}
