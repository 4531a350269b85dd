//! The frames `record` pushes: read from an `--input` file, or rendered by the synthetic
//! camera (and saved with `--save-frames`), all in memory before timing starts.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use zarrstream::ArraySpec;
use zarrstream_camera as camera;

use super::Options;
use super::failure::{Failure, io_failure};
use super::measure::mib;

/// An opened `--input` file holding `frames` whole frames of `frame_bytes`.
pub(super) struct Input {
    path: PathBuf,
    file: File,
    pub(super) frames: u64,
    frame_bytes: usize,
}

pub(super) fn open_input(o: &Options, spec: &ArraySpec) -> Result<Option<Input>, Failure> {
    let Some(path) = &o.input else {
        return Ok(None);
    };
    let fb = spec.frame_bytes();
    let what = format!("open input {}", path.display());
    let file = File::open(path).map_err(io_failure(what.clone()))?;
    let len = file.metadata().map_err(io_failure(what))?.len();
    if len == 0 || len % fb as u64 != 0 {
        let rank = spec.rank();
        return Err(Failure::Usage(format!(
            "--input {}: {len} bytes is not a whole number of {} x {} {} frames ({fb} bytes each)",
            path.display(),
            spec.shape()[rank - 2],
            spec.shape()[rank - 1],
            spec.dtype()
        )));
    }
    Ok(Some(Input {
        path: path.clone(),
        file,
        frames: len / fb as u64,
        frame_bytes: fb,
    }))
}

/// Reads the first `min(frames, frames in the file)` frames; they are cycled if the file
/// holds fewer than `frames`. Returns them and a description.
pub(super) fn load_input(mut input: Input, frames: u64) -> Result<(Vec<Vec<u8>>, String), Failure> {
    let load = frames.min(input.frames);
    let mut pool = Vec::with_capacity(load as usize);
    for _ in 0..load {
        let mut buf = vec![0u8; input.frame_bytes];
        input
            .file
            .read_exact(&mut buf)
            .map_err(io_failure(format!("read input {}", input.path.display())))?;
        pool.push(buf);
    }
    if pool.is_empty() {
        // `--frames 0`: nothing is pushed; one frame keeps the push loop uniform.
        pool.push(vec![0u8; input.frame_bytes]);
    }
    let cycled = if frames > input.frames {
        ", cycled"
    } else {
        ""
    };
    let desc = format!(
        "{load} of {} frames of {}{cycled}",
        input.frames,
        input.path.display()
    );
    Ok((pool, desc))
}

/// The synthetic camera for the options' frame size and data type.
pub(super) fn synthetic_camera(o: &Options) -> Result<camera::Camera, Failure> {
    let rank = o.shape.len();
    let to_usize = |v: u64| {
        usize::try_from(v).map_err(|_| Failure::Usage(format!("frame edge {v} is too large")))
    };
    let (height, width) = (to_usize(o.shape[rank - 2])?, to_usize(o.shape[rank - 1])?);
    Ok(camera::Camera {
        height,
        width,
        blobs: o
            .blobs
            .unwrap_or_else(|| camera::default_blobs(height, width)),
        seed: o.seed,
        dtype: o.dtype,
    })
}

/// The synthetic camera's pool for a recording of `frames` frames from its frame
/// `first` ([`camera::Camera::pool`]), and a description.
pub(super) fn render_frames(
    o: &Options,
    spec: &ArraySpec,
    frames: u64,
    first: u64,
) -> Result<(Vec<Vec<u8>>, String), Failure> {
    let cam = synthetic_camera(o)?;
    let distinct = frames.clamp(1, cam.pool_period());
    if !o.quiet {
        eprintln!(
            "record: rendering {distinct} synthetic {} x {} {} frame(s) ({:.0} MiB)...",
            cam.height,
            cam.width,
            spec.dtype(),
            mib(distinct * spec.frame_bytes() as u64)
        );
    }
    let pool = cam.pool(frames, first);
    let cycled = if frames > distinct { ", cycled" } else { "" };
    let from = if first == 0 {
        String::new()
    } else {
        format!(", from frame {first}")
    };
    let desc = format!(
        "synthetic camera, seed {}, {} blobs{from}{cycled}",
        cam.seed, cam.blobs
    );
    Ok((pool, desc))
}

/// `--save-frames`: the `frames` frames the recording would push, as raw bytes
/// ([`camera::save_frames`]).
pub(super) fn save_frames(
    path: &Path,
    pool: &[Vec<u8>],
    frames: u64,
    quiet: bool,
) -> Result<(), Failure> {
    let bytes = camera::save_frames(path, pool, frames).map_err(|e| Failure::Run(Box::new(e)))?;
    if !quiet {
        eprintln!(
            "record: wrote {frames} frame(s), {:.1} MiB, to {}",
            mib(bytes),
            path.display()
        );
    }
    Ok(())
}
