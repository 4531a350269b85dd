//! Units of the image's axes (UDUNITS-2 names, as OME-Zarr requires).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ParseError;

/// Unit of the spatial axes (a UDUNITS-2 name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SpaceUnit {
    /// `micrometer`.
    #[default]
    Micrometer,
    /// `nanometer`.
    Nanometer,
}

impl SpaceUnit {
    /// The UDUNITS-2 name written into `axes[].unit`.
    pub fn as_str(self) -> &'static str {
        match self {
            SpaceUnit::Micrometer => "micrometer",
            SpaceUnit::Nanometer => "nanometer",
        }
    }
}

impl FromStr for SpaceUnit {
    type Err = ParseError;
    /// Parses `micrometer` or `nanometer`, the names [`Display`](fmt::Display) prints.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "micrometer" => Ok(SpaceUnit::Micrometer),
            "nanometer" => Ok(SpaceUnit::Nanometer),
            _ => Err(ParseError::new("space unit", s, "micrometer, nanometer")),
        }
    }
}

impl fmt::Display for SpaceUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Unit of the time axis (a UDUNITS-2 name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimeUnit {
    /// `second`.
    Second,
    /// `millisecond`.
    #[default]
    Millisecond,
}

impl TimeUnit {
    /// The UDUNITS-2 name written into `axes[].unit`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Second => "second",
            TimeUnit::Millisecond => "millisecond",
        }
    }

    pub(super) fn of(self, d: Duration) -> f64 {
        match self {
            TimeUnit::Second => d.as_secs_f64(),
            TimeUnit::Millisecond => d.as_secs_f64() * 1e3,
        }
    }
}

impl FromStr for TimeUnit {
    type Err = ParseError;
    /// Parses `second` or `millisecond`, the names [`Display`](fmt::Display) prints.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "second" => Ok(TimeUnit::Second),
            "millisecond" => Ok(TimeUnit::Millisecond),
            _ => Err(ParseError::new("time unit", s, "second, millisecond")),
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_round_trip() {
        for u in [SpaceUnit::Micrometer, SpaceUnit::Nanometer] {
            assert_eq!(u.to_string().parse::<SpaceUnit>(), Ok(u));
        }
        for u in [TimeUnit::Second, TimeUnit::Millisecond] {
            assert_eq!(u.to_string().parse::<TimeUnit>(), Ok(u));
        }
        let e = "um".parse::<SpaceUnit>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"um\" is not a space unit (micrometer, nanometer)"
        );
        let e = "ms".parse::<TimeUnit>().unwrap_err();
        assert_eq!((e.what, e.input.as_str()), ("time unit", "ms"));
    }
}
