//! The level chain of an OME-Zarr image: the group, level 0 and one writer per level
//! below it, each fed by a pyramid thread of the level above.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::metadata;
use crate::ome::Ome;
use crate::spec::ArraySpec;
use crate::store::prepare_dir;
use crate::writer::api::options::{Backpressure, WriterOptions};
use crate::writer::level::Level;
use crate::writer::level::start::{Workers, thread_count};
use crate::writer::pyramid::image::ImageGroup;
use crate::writer::pyramid::reduction::Reduction;
use crate::writer::pyramid::thread as pyramid_thread;
use crate::writer::state::grid::Grid;
use crate::writer::threads::priority;

/// Creates the image at `root`: the group's `zarr.json`, level 0 at `root/0` and the
/// levels below it. A store that could not be set up completely is removed. `root` is
/// prepared (made, or replaced with `overwrite`) unless `root_made`: it exists, empty.
pub(in crate::writer) fn create_image(
    root: &Path,
    spec: ArraySpec,
    ome: &Ome,
    options: WriterOptions,
    workers: &Workers,
    root_made: bool,
) -> Result<(Level, Arc<ImageGroup>)> {
    let (level_specs, group) = image_levels(spec, ome, &options)?;
    let n_levels = level_specs.len();
    let spec = level_specs[0].clone();
    if !root_made && !options.resume {
        prepare_dir(root, options.overwrite)?;
    }
    let level0 = root.join(crate::ome::LEVEL0_PATH);
    let made = if options.resume {
        Ok(())
    } else {
        std::fs::create_dir(&level0).map_err(|e| Error::io("create directory", &level0, e, 0))
    };
    let made = made
        .and_then(|()| Level::start(level0, spec, options.clone(), n_levels > 1, workers))
        .and_then(|level| start_levels(level, root, &level_specs[1..], ome, &options, workers))
        .and_then(|level| {
            // After the level's zarr.json, so the group never names a missing array. A
            // resumed image keeps its group document (and whatever others added to it).
            if !options.resume {
                metadata::publish(root, &group)?;
            }
            let image = Arc::new(ImageGroup::new(
                root,
                ome,
                &level.shared.spec,
                &level.shared.grid,
                options.resume,
            )?);
            if image.samples() {
                // Before any frame: from here on the workers sample level 0's frames.
                let _ = level.shared.image.set(Arc::clone(&image));
            }
            Ok((level, image))
        });
    made.inspect_err(|_| {
        if !options.resume {
            let _ = std::fs::remove_dir_all(root);
        }
    })
}

/// Checks an image's options and OME metadata as creating it does, and returns the
/// spec of each level (level 0 first, with dimension names from the axes) and the
/// group's document.
pub(in crate::writer) fn image_levels(
    mut spec: ArraySpec,
    ome: &Ome,
    options: &WriterOptions,
) -> Result<(Vec<ArraySpec>, serde_json::Value)> {
    options.validate()?;
    let axes = ome.axes(&spec)?;
    if spec.dimension_names.is_none() {
        spec.dimension_names = Some(axes.into_iter().map(|a| a.name).collect());
    }
    let group = crate::store::group_document(ome.attributes(&spec)?);
    let n_levels = ome.level_count(&spec)?;
    let z = ome.z_axis(&spec)?;
    let mut level_specs = vec![spec];
    for _ in 1..n_levels {
        let mut next = crate::pyramid::next_level_spec(&level_specs[level_specs.len() - 1], z)?;
        next.lz4_acceleration = Some(ome.level_acceleration());
        level_specs.push(next);
    }
    if options.resume && n_levels > 1 {
        return Err(Error::ResumeUnsupported("an OME-Zarr image with a pyramid"));
    }
    Ok((level_specs, group))
}

/// Starts one internal writer per level below 0 (at `root/1`, `root/2`, …), each
/// fed by a pyramid thread of the level above: a chain, so that the workers encoding
/// level `k` also reduce level `k + 1`, from the rows they have just read.
fn start_levels(
    mut level0: Level,
    root: &Path,
    specs: &[ArraySpec],
    ome: &Ome,
    options: &WriterOptions,
    workers: &Workers,
) -> Result<Level> {
    if specs.is_empty() {
        return Ok(level0);
    }
    let threads = thread_count(options.threads);
    let nice = options.background_nice;
    let reducers = match workers {
        Workers::Shared {
            reducers: Some(r), ..
        } => Arc::clone(r),
        _ => reduction_pool(threads, nice)?,
    };
    let z = ome.z_axis(&level0.shared.spec)?;
    let opts = level_options(
        level0.in_flight(),
        &level0.shared.grid,
        specs,
        z,
        threads,
        options,
    );
    for k in 1..=specs.len() {
        let dir = root.join(k.to_string());
        std::fs::create_dir(&dir).map_err(|e| Error::io("create directory", &dir, e, 0))?;
    }
    // Bottom up: each level starts with the writer of the level below attached.
    let mut below: Option<Level> = None;
    for (i, (spec, opts)) in specs.iter().zip(opts).enumerate().rev() {
        let dir = root.join((i + 1).to_string());
        let mut level = Level::start(dir, spec.clone(), opts, below.is_some(), workers)?;
        if let Some(b) = below.take() {
            attach(&mut level, b, ome, z, &reducers, nice)?;
        }
        below = Some(level);
    }
    if let Some(b) = below {
        attach(&mut level0, b, ome, z, &reducers, nice)?;
    }
    Ok(level0)
}

/// The rayon pool `zarrstream-reduce-i` that reduces large frames for pyramid threads.
pub(in crate::writer) fn reduction_pool(
    threads: usize,
    nice: u8,
) -> Result<Arc<rayon::ThreadPool>> {
    let reducers = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("zarrstream-reduce-{i}"))
        .start_handler(move |_| priority::lower_priority(nice))
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the reduction workers: {e}")))?;
    Ok(Arc::new(reducers))
}

/// The options of each level below level 0 (whose buffers in flight are `in_flight0`
/// and whose grid is `grid0`), top down. With a shared engine only their pool sizes
/// matter.
pub(in crate::writer) fn level_options(
    in_flight0: usize,
    grid0: &Grid,
    specs: &[ArraySpec],
    z: Option<usize>,
    threads: usize,
    options: &WriterOptions,
) -> Vec<WriterOptions> {
    // Pool sizes, top down: frames of level k in flight at once (each message to the
    // pyramid thread below it holds one) and, when level k's workers reduce level
    // k + 1, one level-(k + 1) buffer for each of them on top of that level's own.
    let mut in_flight = in_flight0;
    let mut above = grid0.clone();
    let mut opts = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        // Level k holds a 4^k-th of the data: fewer workers, not pinned (level 0's
        // workers are), always waiting (a drop is decided at level 0 only).
        let level_threads = (threads >> (2 * (i + 1))).max(1);
        let own = 2 * level_threads + 2;
        let pool_frames = if Reduction::fits(&above, z) {
            in_flight + own
        } else {
            own
        };
        in_flight = pool_frames;
        above = Grid::new(spec);
        opts.push(WriterOptions {
            threads: level_threads,
            pin_threads: false,
            pool_frames,
            backpressure: Backpressure::Block,
            overwrite: false,
            ..options.clone()
        });
    }
    opts
}

/// Makes `below` the next pyramid level of `level` (a pyramid thread feeds it).
fn attach(
    level: &mut Level,
    below: Level,
    ome: &Ome,
    z: Option<usize>,
    reducers: &Arc<rayon::ThreadPool>,
    nice: u8,
) -> Result<()> {
    level.pyramid = Some(pyramid_thread::spawn(
        below,
        Arc::clone(&level.shared),
        ome.downsample_method(),
        z,
        level.in_flight(),
        Arc::clone(reducers),
        nice,
    )?);
    Ok(())
}
