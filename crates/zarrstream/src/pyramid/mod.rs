//! Multiscale pyramid: 2×2 reduction of frames in y and x, and the level arrays' specs.
//!
//! Level `k` (k ≥ 1) is the reduction of level `k - 1`: each output pixel `(i, j)` is
//! computed from the input pixels `(2i..2i+2, 2j..2j+2)` that exist. A frame of odd
//! height or width gives `ceil(n / 2)` rows or columns; the last one is reduced over the
//! one or two input rows/columns that exist (averaged over 2 or 1 pixels, not padded).
//!
//! Methods ([`Downsample`]):
//! - `Mean`: integer types round the exact mean half up, `floor(sum / n + 1/2)` with `n`
//!   the number of existing pixels (4, 2 or 1); `float32` sums in `f64` and rounds the
//!   mean to the nearest `f32`. Each level rounds once, from the previous level's values.
//! - `Decimate`: the top-left pixel of each block (`level[i, j] = prev[2i, 2j]`).
//! - `Min`, `Max`: the smallest / largest existing pixel (NaN handling is unspecified).
//!
//! This module holds the pyramid's public types and its reduction kernels; the writer
//! builds the chain of level writers and the thread that feeds them.

mod downsample;
mod level_specs;
mod pixel;
mod reduce;
mod region;

pub use downsample::Downsample;
pub use level_specs::{Levels, MAX_LEVELS};
pub(crate) use level_specs::{level_count, next_level_spec};
pub(crate) use reduce::{reduce, reduce_pair};
pub(crate) use region::Region;
