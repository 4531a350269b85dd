//! The text form of a codec: `none`, `zstd[:LEVEL[:checksum]]`, `blosc-lz4[:CLEVEL]`
//! (alias `lz4[:CLEVEL]`), as typed on command lines and in the C API's configuration.

use std::fmt;
use std::str::FromStr;

use super::{BloscCompressor, Codec};
use crate::error::ParseError;

const EXPECTED: &str =
    "none, zstd, zstd:LEVEL, zstd:LEVEL:checksum, blosc-lz4, blosc-lz4:CLEVEL, lz4, lz4:CLEVEL";

/// Levels when the name has none: the fastest setting that still compresses.
const DEFAULT_ZSTD_LEVEL: i32 = 1;
const DEFAULT_BLOSC_CLEVEL: u8 = 1;

impl FromStr for Codec {
    type Err = ParseError;

    /// Parses `none`, `zstd[:LEVEL]` (level 1 by default), `zstd:LEVEL:checksum` (with
    /// zstd's own content checksum), `blosc-lz4[:CLEVEL]` (clevel 1 by default) and its
    /// alias `lz4[:CLEVEL]`. Levels are checked against their ranges when the
    /// [`ArraySpec`](crate::ArraySpec) is built, not here.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new("codec", s, EXPECTED);
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        match (name, params) {
            ("none", None) => Ok(Codec::None),
            ("zstd", None) => Ok(Codec::zstd(DEFAULT_ZSTD_LEVEL)),
            ("zstd", Some(p)) => {
                let (level, checksum) = match p.strip_suffix(":checksum") {
                    Some(level) => (level, true),
                    None => (p, false),
                };
                let level = level.parse::<i32>().map_err(|_| bad())?;
                Ok(Codec::Zstd { level, checksum })
            }
            ("blosc-lz4" | "lz4", None) => Ok(Codec::blosc_lz4(DEFAULT_BLOSC_CLEVEL)),
            ("blosc-lz4" | "lz4", Some(p)) => {
                // A clevel must fit the codec's u8; the builder checks its range 0..=9.
                let clevel = p.parse::<u8>().map_err(|_| bad())?;
                Ok(Codec::blosc_lz4(clevel))
            }
            _ => Err(bad()),
        }
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
            Codec::Blosc { compressor, clevel } => write!(f, "{compressor}:{clevel}"),
        }
    }
}

impl fmt::Display for BloscCompressor {
    /// `blosc-` and the `cname`: `blosc-lz4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blosc-{}", self.cname())
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
        ];
        for c in codecs {
            assert_eq!(c.to_string().parse::<Codec>(), Ok(c), "{c}");
        }
        assert_eq!(Codec::blosc_lz4(1).to_string(), "blosc-lz4:1");
        assert_eq!(Codec::zstd(3).to_string(), "zstd:3");
        assert_eq!(Codec::none().to_string(), "none");
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
