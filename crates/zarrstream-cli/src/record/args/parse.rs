//! The `value_parser` functions of `zarrstream record`'s options: one value each, with
//! the messages of the hand-written parser they replaced.

use std::path::PathBuf;

use zarrstream::{
    Backpressure, ChunkOrder, Codec, DataType, Downsample, Durability, IndexLocation, Levels,
    Packing, SinkChoice,
};

use super::{Dims, Names};

pub(super) fn nonempty_path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        Err("empty value".into())
    } else {
        Ok(PathBuf::from(v))
    }
}

/// A count; `1_000` reads as 1000.
pub(super) fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .replace('_', "")
        .parse::<T>()
        .map_err(|_| "expected a non-negative integer".into())
}

pub(super) fn dims(v: &str) -> Result<Dims, String> {
    let dims: Result<Vec<u64>, _> = v.split(',').map(|d| d.trim().parse::<u64>()).collect();
    match dims {
        Ok(d) if !d.is_empty() => Ok(d),
        _ => Err("expected comma-separated non-negative integers, e.g. 0,2048,2048".into()),
    }
}

/// Comma-separated names, none of them empty.
pub(super) fn names(v: &str, what: &str) -> Result<Names, String> {
    let names: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(String::is_empty) {
        Err(format!("empty {what}"))
    } else {
        Ok(names)
    }
}

/// `none` is the empty list (no names); see [`Options::resolve_shapes`].
pub(super) fn dim_names(v: &str) -> Result<Names, String> {
    if v == "none" {
        Ok(Vec::new())
    } else {
        names(v, "name")
    }
}

pub(super) fn channels(v: &str) -> Result<Names, String> {
    names(v, "name")
}

pub(super) fn axes(v: &str) -> Result<Names, String> {
    names(v, "axis")
}

pub(super) fn dtype(v: &str) -> Result<DataType, String> {
    v.parse()
        .map_err(|_| "expected i8, u8, i16, u16, i32, u32, i64, u64, f32 or f64".into())
}

pub(super) fn codec(v: &str) -> Result<Codec, String> {
    v.parse().map_err(|_| {
        "expected none, zstd, zstd:LEVEL (-131072..=22), lz4, lz4:CLEVEL (0..=9), \
         blosc-zstd or blosc-zstd:CLEVEL, each blosc one optionally with :shuffle, \
         :bitshuffle or :noshuffle"
            .into()
    })
}

pub(super) fn index_location(v: &str) -> Result<IndexLocation, String> {
    v.parse().map_err(|_| "expected end or start".into())
}

pub(super) fn fill_value(v: &str) -> Result<f64, String> {
    match v.to_ascii_lowercase().as_str() {
        "nan" => Ok(f64::NAN),
        "inf" | "infinity" | "+inf" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        _ => v.parse().map_err(|_| "not a number".into()),
    }
}

pub(super) fn positive(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err("expected a positive number".into()),
    }
}

pub(super) fn pixel_size(v: &str) -> Result<(f64, f64), String> {
    let p: Vec<f64> = v.split(',').map(positive).collect::<Result<_, _>>()?;
    match p[..] {
        [p] => Ok((p, p)),
        [y, x] => Ok((y, x)),
        _ => Err("expected UM or Y,X".into()),
    }
}

pub(super) fn window(v: &str) -> Result<(f64, f64), String> {
    let w: Vec<f64> = v
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| "expected START,END")?;
    match w[..] {
        [s, e] if s.is_finite() && e.is_finite() && s < e => Ok((s, e)),
        _ => Err("expected START,END with START < END".into()),
    }
}

pub(super) fn levels(v: &str) -> Result<Levels, String> {
    if v == "auto" {
        return Ok(Levels::Auto);
    }
    match v.parse::<usize>() {
        Ok(n) if (1..=zarrstream::MAX_LEVELS).contains(&n) => Ok(Levels::Count(n)),
        _ => Err(format!("expected 1 to {} or auto", zarrstream::MAX_LEVELS)),
    }
}

pub(super) fn downsample(v: &str) -> Result<Downsample, String> {
    v.parse().map_err(|e| format!("{e}"))
}

pub(super) fn fps(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err("expected a number >= 0".into()),
    }
}

pub(super) fn sink(v: &str) -> Result<SinkChoice, String> {
    v.parse()
        .map_err(|_| "expected auto, mmap, pwrite or direct".into())
}

pub(super) fn backpressure(v: &str) -> Result<Backpressure, String> {
    v.parse()
        .map_err(|e: zarrstream::ParseError| format!("expected {}", e.expected))
}

pub(super) fn packing(v: &str) -> Result<Packing, String> {
    v.parse().map_err(|_| "expected compact or sparse".into())
}

pub(super) fn chunk_order(v: &str) -> Result<ChunkOrder, String> {
    v.parse().map_err(|_| "expected c or morton".into())
}

pub(super) fn durability(v: &str) -> Result<Durability, String> {
    v.parse()
        .map_err(|e: zarrstream::ParseError| format!("expected {}", e.expected))
}

pub(super) fn plate(v: &str) -> Result<(usize, usize), String> {
    v.split_once(['x', 'X'])
        .and_then(|(r, c)| Some((r.trim().parse().ok()?, c.trim().parse().ok()?)))
        .ok_or_else(|| "expected ROWSxCOLS, e.g. 8x12".into())
}

pub(super) fn arrays(v: &str) -> Result<usize, String> {
    match num::<usize>(v)? {
        0 => Err("expected at least 1".into()),
        n => Ok(n),
    }
}

pub(super) fn part_of(v: &str) -> Result<(u64, u64), String> {
    v.split_once('/')
        .and_then(|(k, n)| Some((k.parse::<u64>().ok()?, n.parse::<u64>().ok()?)))
        .filter(|(k, n)| k < n)
        .ok_or_else(|| "expected K/N with 0 <= K < N (camera K of N)".into())
}
