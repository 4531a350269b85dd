//! The text form of a codec: `none`, `zstd[:LEVEL[:checksum]]`,
//! `blosc-lz4[:CLEVEL[:SHUFFLE]]` (alias `lz4[...]`), `blosc-zstd[:CLEVEL[:SHUFFLE]]`
//! with SHUFFLE one of `noshuffle`, `shuffle`, `bitshuffle`, as typed on command lines
//! and in the C API's configuration.

use std::fmt;
use std::str::FromStr;

use super::{BloscCompressor, BloscShuffle, Codec};
use crate::error::ParseError;

const EXPECTED: &str = "none, zstd, zstd:LEVEL, zstd:LEVEL:checksum, blosc-lz4, \
     blosc-lz4:CLEVEL, blosc-lz4:CLEVEL:SHUFFLE, lz4, lz4:CLEVEL, lz4:CLEVEL:SHUFFLE, \
     blosc-zstd, blosc-zstd:CLEVEL, blosc-zstd:CLEVEL:SHUFFLE \
     (SHUFFLE: noshuffle, shuffle, bitshuffle)";

const SHUFFLES: &str = "noshuffle, shuffle, bitshuffle";

/// Levels when the name has none: the fastest setting that still compresses. For
/// blosc-zstd that is clevel 1 (zstd level 1 on 32 KiB blocks), which on camera chunks
/// is also smaller than ome-writers' and acquire-zarr's clevel 3 (zstd level 5 on
/// 128 KiB blocks), itself 6–9× slower (BENCHMARKS.md §1).
const DEFAULT_ZSTD_LEVEL: i32 = 1;
const DEFAULT_BLOSC_CLEVEL: u8 = 1;

impl FromStr for Codec {
    type Err = ParseError;

    /// Parses `none`, `zstd[:LEVEL]` (level 1 by default), `zstd:LEVEL:checksum` (with
    /// zstd's own content checksum), `blosc-lz4[:CLEVEL[:SHUFFLE]]` and its alias
    /// `lz4[:CLEVEL[:SHUFFLE]]`, and `blosc-zstd[:CLEVEL[:SHUFFLE]]` (clevel 1 by default;
    /// SHUFFLE `noshuffle`, `shuffle` or `bitshuffle`, the element size's default when
    /// left out). Levels are checked against their ranges, and shuffles against the
    /// element size, when the [`ArraySpec`](crate::ArraySpec) is built, not here.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new("codec", s, EXPECTED);
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        let compressor = match name {
            "none" if params.is_none() => return Ok(Codec::None),
            "zstd" => {
                let Some(p) = params else {
                    return Ok(Codec::zstd(DEFAULT_ZSTD_LEVEL));
                };
                let (level, checksum) = match p.strip_suffix(":checksum") {
                    Some(level) => (level, true),
                    None => (p, false),
                };
                let level = level.parse::<i32>().map_err(|_| bad())?;
                return Ok(Codec::Zstd { level, checksum });
            }
            "blosc-lz4" | "lz4" => BloscCompressor::Lz4,
            "blosc-zstd" => BloscCompressor::Zstd,
            _ => return Err(bad()),
        };
        let (clevel, shuffle) = match params {
            None => (DEFAULT_BLOSC_CLEVEL, None),
            Some(p) => {
                let (clevel, shuffle) = match p.split_once(':') {
                    Some((c, s)) => (c, Some(s.parse::<BloscShuffle>().map_err(|_| bad())?)),
                    None => (p, None),
                };
                // A clevel must fit the codec's u8; the builder checks its range 0..=9.
                (clevel.parse::<u8>().map_err(|_| bad())?, shuffle)
            }
        };
        Ok(Codec::Blosc {
            compressor,
            clevel,
            shuffle,
        })
    }
}

impl fmt::Display for Codec {
    /// The canonical name, which [`FromStr`] parses back to the same codec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Codec::None => f.write_str("none"),
            Codec::Zstd {
                level,
                checksum: false,
            } => write!(f, "zstd:{level}"),
            Codec::Zstd {
                level,
                checksum: true,
            } => write!(f, "zstd:{level}:checksum"),
            Codec::Blosc {
                compressor,
                clevel,
                shuffle: None,
            } => write!(f, "{compressor}:{clevel}"),
            Codec::Blosc {
                compressor,
                clevel,
                shuffle: Some(shuffle),
            } => write!(f, "{compressor}:{clevel}:{shuffle}"),
        }
    }
}

impl fmt::Display for BloscCompressor {
    /// `blosc-` and the `cname`: `blosc-lz4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blosc-{}", self.cname())
    }
}

impl fmt::Display for BloscShuffle {
    /// [`BloscShuffle::name`]: `noshuffle`, `shuffle`, `bitshuffle`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BloscShuffle {
    type Err = ParseError;

    /// Parses `noshuffle`, `shuffle` or `bitshuffle`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        [
            BloscShuffle::NoShuffle,
            BloscShuffle::Shuffle,
            BloscShuffle::BitShuffle,
        ]
        .into_iter()
        .find(|v| v.name() == s)
        .ok_or_else(|| ParseError::new("blosc shuffle", s, SHUFFLES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_codec_names() {
        let parse = |s: &str| s.parse::<Codec>().ok();
        assert_eq!(parse("none"), Some(Codec::None));
        assert_eq!(parse("zstd"), Some(Codec::zstd(1)));
        assert_eq!(parse("zstd:-5"), Some(Codec::zstd(-5)));
        assert_eq!(parse("lz4:5"), Some(Codec::blosc_lz4(5)));
        assert_eq!(parse("lz4:-1"), None);
        assert_eq!(parse("blosc-zstd"), Some(Codec::blosc_zstd(1)));
        assert_eq!(parse("blosc-zstd:5"), Some(Codec::blosc_zstd(5)));
        assert_eq!(
            parse("blosc-zstd:5:noshuffle"),
            Some(Codec::blosc_zstd(5).with_shuffle(BloscShuffle::NoShuffle))
        );
        assert_eq!(
            parse("lz4:1:bitshuffle"),
            Some(Codec::blosc_lz4(1).with_shuffle(BloscShuffle::BitShuffle))
        );
        assert_eq!(
            parse("blosc-lz4:9:shuffle"),
            Some(Codec::blosc_lz4(9).with_shuffle(BloscShuffle::Shuffle))
        );
        assert_eq!(parse("gzip"), None);
    }

    #[test]
    fn display_round_trips() {
        let codecs = [
            Codec::none(),
            Codec::zstd(1),
            Codec::zstd(-131072),
            Codec::zstd(22),
            Codec::Zstd {
                level: 3,
                checksum: true,
            },
            Codec::blosc_lz4(0),
            Codec::blosc_lz4(1),
            Codec::blosc_lz4(9),
            Codec::blosc_zstd(0),
            Codec::blosc_zstd(1),
            Codec::blosc_zstd(9),
        ];
        let shuffles = [
            BloscShuffle::NoShuffle,
            BloscShuffle::Shuffle,
            BloscShuffle::BitShuffle,
        ];
        let codecs =
            codecs.into_iter().chain(shuffles.into_iter().flat_map(|s| {
                [Codec::blosc_lz4(3), Codec::blosc_zstd(7)].map(|c| c.with_shuffle(s))
            }));
        for c in codecs {
            assert_eq!(c.to_string().parse::<Codec>(), Ok(c), "{c}");
        }
        assert_eq!(Codec::blosc_lz4(1).to_string(), "blosc-lz4:1");
        assert_eq!(Codec::zstd(3).to_string(), "zstd:3");
        assert_eq!(Codec::none().to_string(), "none");
        assert_eq!(Codec::blosc_zstd(3).to_string(), "blosc-zstd:3");
        assert_eq!(
            Codec::blosc_zstd(3)
                .with_shuffle(BloscShuffle::BitShuffle)
                .to_string(),
            "blosc-zstd:3:bitshuffle"
        );
    }

    #[test]
    fn aliases_and_defaults() {
        for s in ["lz4", "lz4:1", "blosc-lz4", "blosc-lz4:1"] {
            assert_eq!(s.parse::<Codec>(), Ok(Codec::blosc_lz4(1)), "{s}");
        }
        assert_eq!("zstd:0".parse::<Codec>(), Ok(Codec::zstd(0)));
        // Out-of-range levels parse; the builder rejects them with their range.
        assert_eq!("lz4:10".parse::<Codec>(), Ok(Codec::blosc_lz4(10)));
        assert_eq!("zstd:99".parse::<Codec>(), Ok(Codec::zstd(99)));
        assert_eq!("blosc-zstd:10".parse::<Codec>(), Ok(Codec::blosc_zstd(10)));
        // A shuffle that does not fit the element size parses; the builder refuses it.
        assert_eq!(
            "blosc-zstd:1:shuffle".parse::<Codec>(),
            Ok(Codec::blosc_zstd(1).with_shuffle(BloscShuffle::Shuffle))
        );
    }

    #[test]
    fn errors_name_the_input() {
        for s in [
            "gzip",
            "",
            "none:1",
            "zstd:",
            "zstd:x",
            "zstd:3:crc",
            "lz4:256",
            "blosc-lz4:1.5",
            "blosc",
            "LZ4",
            "blosc-zstd:",
            "blosc-zstd:3:",
            "blosc-zstd:3:bits",
            "blosc-zstd:3:shuffle:1",
            "blosc-zstd::shuffle",
            "blosc-zstd:10x",
            "zstd:3:shuffle",
            "blosc-lz4:1:SHUFFLE",
        ] {
            let e = s.parse::<Codec>().unwrap_err();
            assert_eq!((e.what, e.input.as_str()), ("codec", s));
            assert_eq!(
                e.to_string(),
                format!("{s:?} is not a codec ({EXPECTED})"),
                "{s}"
            );
        }
    }
}
