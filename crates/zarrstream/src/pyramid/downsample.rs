//! The reduction methods.

/// How level `k` is computed from level `k - 1` (2×2 blocks in y and x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Downsample {
    /// Block mean (integers: rounded half up; see the module docs).
    #[default]
    Mean,
    /// The top-left pixel of each block.
    Decimate,
    /// The block minimum.
    Min,
    /// The block maximum.
    Max,
}

impl Downsample {
    /// The name written into `multiscales[0].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Downsample::Mean => "mean",
            Downsample::Decimate => "decimate",
            Downsample::Min => "min",
            Downsample::Max => "max",
        }
    }

    /// Whether a level's pixel is centred on its block (shifted by half a block), as
    /// opposed to on the block's first pixel (decimation).
    pub(crate) fn centred(self) -> bool {
        self != Downsample::Decimate
    }
}

impl std::str::FromStr for Downsample {
    type Err = crate::error::ParseError;
    /// Parses `mean`, `decimate`, `min`, `max`, the names [`Display`](std::fmt::Display)
    /// prints.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mean" => Ok(Downsample::Mean),
            "decimate" => Ok(Downsample::Decimate),
            "min" => Ok(Downsample::Min),
            "max" => Ok(Downsample::Max),
            _ => Err(crate::error::ParseError::new(
                "downsampling method",
                s,
                "mean, decimate, min, max",
            )),
        }
    }
}

impl std::fmt::Display for Downsample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
