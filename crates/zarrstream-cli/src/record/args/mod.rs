//! `zarrstream record`'s options. clap parses each value (`value_parser` functions keep
//! the messages of the hand-written parser this replaced); what depends on several options
//! (derived shapes, combinations that are refused) is [`Options::resolve`]'s.

mod geometry;
mod parse;

use std::path::PathBuf;

use clap::{ArgAction, Args};
use zarrstream::{
    Backpressure, ChunkOrder, Codec, DataType, Downsample, Durability, IndexLocation, Levels,
    Packing, SinkChoice,
};

pub(crate) use geometry::{default_frames, join};
use geometry::{derive_chunk, derive_chunk_from_shard, derive_shard};
use parse::*;

/// A comma-separated list taken as one value: clap reads a field spelled `Vec<_>` as an
/// option given several times, and an alias is not spelled so.
type Dims = Vec<u64>;
/// See [`Dims`].
type Names = Vec<String>;

const AFTER_HELP: &str = "\
Without --input a synthetic sCMOS-like camera (zarrstream-camera, a port of
peers/make_frames.py) renders the frames before timing starts: at most 1 GiB of distinct
frames, cycled.

Object stores (--out s3://bucket/prefix): endpoint, region and credentials come from
AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; an http://
endpoint allows plain HTTP.

Exit status: 0 on success, 2 for invalid options (including an existing --out without
--overwrite), 1 for any other failure.";

/// A problem with the command line that clap cannot see (exit status 2).
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Everything `record` takes. The fields marked `skip` are derived by
/// [`resolve`](Self::resolve), which must run before anything reads them.
#[derive(Debug, Clone, Args)]
#[command(after_help = AFTER_HELP, allow_negative_numbers = true)]
pub(crate) struct Options {
    /// Store to create: a local path or an object-store URL (s3://bucket/prefix); an
    /// existing path is refused unless --overwrite is given
    #[arg(long, value_name = "PATH", default_value = "./record.zarr", value_parser = nonempty_path, help_heading = "Array")]
    pub out: PathBuf,
    /// Replace an existing store at --out (a non-empty directory without zarr.json is
    /// never removed)
    #[arg(long, help_heading = "Array")]
    pub overwrite: bool,
    /// Attach synthetic per-frame metadata to every frame (timestamp s, exposure ms,
    /// stage x/y/z um, and a JSON object), stored under --out/frame_meta/
    #[arg(long, help_heading = "Array")]
    pub frame_meta: bool,
    /// Array shape; D0 = 0 is an unbounded append axis [default: 0,2048,2048]
    #[arg(long = "shape", value_name = "D0,...,Y,X", value_parser = dims, help_heading = "Array")]
    shape_arg: Option<Dims>,
    /// Inner chunk shape, same rank [default: 1,...,1,512,512 for 2048x2048 frames;
    /// otherwise derived: leading axes 1, y/x split into near-equal chunks of at most 512]
    #[arg(long = "chunk", value_name = "C0,...,CY,CX", value_parser = dims, help_heading = "Array")]
    chunk_arg: Option<Dims>,
    /// Shard shape, same rank, a multiple of --chunk [default: 32,2048,2048 for the
    /// default shape; otherwise the whole frame and about 2^27 elements per shard]
    #[arg(long = "shard", value_name = "S0,...,SY,SX", value_parser = dims, help_heading = "Array")]
    shard_arg: Option<Dims>,
    /// Element type: i8 | u8 | i16 | u16 | i32 | u32 | i64 | u64 | f32 | f64
    #[arg(long, value_name = "T", default_value = "u16", value_parser = dtype, help_heading = "Array")]
    pub dtype: DataType,
    /// Inner codec: none | zstd[:LEVEL] | lz4[:CLEVEL[:SHUFFLE]] |
    /// blosc-zstd[:CLEVEL[:SHUFFLE]] (lz4 = blosc-lz4: blosc with cname lz4; blosc-zstd:
    /// cname zstd, as ome-writers names it; SHUFFLE: shuffle (byte, the default),
    /// bitshuffle or noshuffle)
    #[arg(long, value_name = "C", default_value = "lz4:1", value_parser = codec, help_heading = "Array")]
    pub codec: Codec,
    /// Leave out the per-chunk crc32c codec (on by default)
    #[arg(long = "no-crc32c", action = ArgAction::SetFalse, help_heading = "Array")]
    pub crc32c: bool,
    /// Shard index place: end | start
    #[arg(long, value_name = "L", default_value = "end", value_parser = index_location, help_heading = "Array")]
    pub index_location: IndexLocation,
    /// Fill value, representable in --dtype (nan, inf and -inf too)
    #[arg(long, value_name = "V", default_value = "0", allow_hyphen_values = true, value_parser = fill_value, help_heading = "Array")]
    pub fill_value: f64,
    /// Dimension names, or 'none' [default: t,y,x for rank 3, t,z,y,x for rank 4,
    /// t,c,z,y,x for rank 5]
    #[arg(long = "dim-names", value_name = "N0,...", value_parser = dim_names, help_heading = "Array")]
    dim_names_arg: Option<Names>,

    /// Write an OME-Zarr 0.5 image: --out is a group whose zarr.json holds
    /// attributes.ome (axes t, [c], [z], y, x), the array is its level 0 at --out/0
    /// (point zarrstream recover/inspect/verify at --out/0)
    #[arg(long = "ome", help_heading = "OME-Zarr")]
    ome_flag: bool,
    #[command(flatten)]
    ome_args: OmeArgs,

    /// Frames (2-D planes) to push; with rank > 3 they fill the leading axes in C order
    /// [default: 2^29 elements' worth, 128 for 2048x2048; with --input, the frames in the
    /// file]
    #[arg(long, value_name = "N", value_parser = num::<u64>, help_heading = "Frames")]
    pub frames: Option<u64>,
    /// The camera's loop order over the leading axes, outermost first, as dimension names
    /// or axis numbers (c,t,z or 1,0,2): frame k of the camera is written by index at the
    /// k-th point of that loop (Writer::write_frame, the order declared) instead of
    /// appended in storage order; needs a bounded axis 0 unless it comes first; not with
    /// --arrays, --plate, --frame-meta or --resume
    #[arg(long, value_name = "O", value_parser = axes, help_heading = "Frames")]
    pub acquisition_order: Option<Names>,
    /// Headerless little-endian raw frames of --dtype (frame-major, C order), loaded into
    /// memory before timing; cycled if --frames asks for more than the file holds
    #[arg(long, value_name = "FILE", value_parser = nonempty_path, help_heading = "Frames")]
    pub input: Option<PathBuf>,
    /// Pace frames at F per second from a camera clock: frame k is due at t0 + k/F and its
    /// latency is measured from then (0 = as fast as possible)
    #[arg(long, value_name = "F", default_value = "0", value_parser = fps, help_heading = "Frames")]
    pub fps: f64,
    /// Synthetic camera seed
    #[arg(long, value_name = "N", default_value_t = zarrstream_camera::DEFAULT_SEED, value_parser = num::<u64>, help_heading = "Frames")]
    pub seed: u64,
    /// Synthetic camera blob count [default: 400 per 2048 x 2048 frame, scaled with the
    /// frame area]
    #[arg(long, value_name = "N", value_parser = num::<usize>, help_heading = "Frames")]
    pub blobs: Option<usize>,
    /// Write the --frames frames that would be pushed (synthetic or from --input) to FILE
    /// as headerless little-endian raw (frame-major, C order; readable by --input) and exit
    /// 0 without recording; --out is not touched
    #[arg(long, value_name = "FILE", value_parser = nonempty_path, help_heading = "Frames")]
    pub save_frames: Option<PathBuf>,

    /// Worker threads, 0 = one per core
    #[arg(long, value_name = "N", default_value = "0", value_parser = num::<usize>, help_heading = "Writer")]
    pub threads: usize,
    /// Sink: auto | mmap | pwrite | direct
    #[arg(long, value_name = "S", default_value = "auto", value_parser = sink, help_heading = "Writer")]
    pub sink: SinkChoice,
    /// What push does when the frame pool is full: block | drop
    #[arg(long, value_name = "B", default_value = "block", value_parser = backpressure, help_heading = "Writer")]
    pub backpressure: Backpressure,
    /// Frame buffers in the pool, 0 = 2 x threads + 2
    #[arg(long, value_name = "N", default_value = "0", value_parser = num::<usize>, help_heading = "Writer")]
    pub pool_frames: usize,
    /// compact | sparse: finished shard files without gaps, or sparse files with the gaps
    /// punched out
    #[arg(long, value_name = "P", default_value = "compact", value_parser = packing, help_heading = "Writer")]
    pub packing: Packing,
    /// c | morton: order of the inner chunks inside each shard file (Morton keeps spatial
    /// blocks together; selects the mmap sink under --sink auto, not with --sink direct)
    #[arg(long, value_name = "O", default_value = "c", value_parser = chunk_order, help_heading = "Writer")]
    pub chunk_order: ChunkOrder,
    /// shard | periodic:MS | none: fdatasync each shard before it becomes visible, flush
    /// all shards every MS milliseconds (group commit), or no syncs
    #[arg(long, value_name = "D", default_value = "shard", value_parser = durability, help_heading = "Writer")]
    pub durability: Durability,
    /// Do not pin worker threads to cores
    #[arg(long = "no-pin", action = ArgAction::SetFalse, help_heading = "Writer")]
    pub pin: bool,

    /// Record N synthetic cameras (or N copies of --input) into one group at --out:
    /// arrays cam0..cam{N-1} (with --ome, each an OME-Zarr image), one zarrstream
    /// Recording with one pool of workers; --frames counts per array and --pool-frames is
    /// the total frame budget. The cameras share one pool of synthetic frames: camera k
    /// starts k/N of the way into it. Frames are pushed round-robin from one thread
    /// [default: one array, one Writer]
    #[arg(long, value_name = "N", value_parser = arrays, help_heading = "Recording")]
    pub arrays: Option<usize>,
    /// One pushing thread per array (needs --arrays), each paced at --fps like a camera of
    /// its own
    #[arg(long, help_heading = "Recording")]
    pub camera_threads: bool,
    /// Record an OME-Zarr 0.5 high-content screening plate at --out (implies --ome): ROWS
    /// x COLS wells (rows A, B, ..., columns 1, 2, ...), each with --fields fields of view,
    /// every field an OME-Zarr image at --out/ROW/COL/FIELD and an array of one Recording;
    /// --out holds the plate metadata, each well ROW/COL its list of fields. One camera,
    /// pushed as a screening microscope visits the plate: the stage moves well by well (row
    /// by row) and takes each well's fields one after another, one time point (all
    /// channels and z planes of it) per visit; --frames counts per field. The camera's
    /// frames (synthetic, or --input cycled) go to the fields in that order.
    #[arg(long, value_name = "ROWSxCOLS", value_parser = plate, help_heading = "Recording")]
    pub plate: Option<(usize, usize)>,
    /// Fields of view per well (needs --plate) [default: 1]
    #[arg(long = "fields", value_name = "F", value_parser = num::<u32>, help_heading = "Recording")]
    fields_arg: Option<u32>,
    /// Record camera K of N into one array of shape [T, N, Y, X] (axis 1 of chunk and
    /// shard extent 1, so each process writes only its own shards); --out must be an
    /// object-store URL or a path every process shares (then used as file://); run
    /// `zarrstream publish URL` any time (and at the end), or give one process
    /// --coordinate, to publish the shared zarr.json
    #[arg(long, value_name = "K/N", value_parser = part_of, help_heading = "Recording")]
    pub part_of: Option<(u64, u64)>,
    /// With --part-of: this process also publishes the shared zarr.json from every part's
    /// progress
    #[arg(long, help_heading = "Recording")]
    pub coordinate: bool,
    /// Append to the finished array (with --arrays, the recording) at --out, which must
    /// exist: the first new frame follows the last one recorded (with --input, it is the
    /// input's first frame; synthetic frames continue the camera's sequence); the options
    /// must describe the array as it is on disk (not with --overwrite)
    #[arg(long, help_heading = "Recording")]
    pub resume: bool,

    /// Local directory shards are finished in before upload to an object store [default:
    /// $ZARRSTREAM_STAGING or the temporary directory, under zarrstream-staging/]
    #[arg(long, value_name = "DIR", value_parser = nonempty_path, help_heading = "Object stores")]
    pub staging: Option<PathBuf>,
    /// Finished MiB that may wait for upload before frames block or drop [default: 2048]
    #[arg(long = "staging-budget", value_name = "MIB", value_parser = num::<u64>, help_heading = "Object stores")]
    pub staging_budget_mib: Option<u64>,

    /// Print the memory estimate (zarrstream::estimate_memory) before the run, and after it
    /// the estimate against the measured peak RSS over the loaded frames and the writer's
    /// own count (the report always has them: memory_estimate_mib, extra_rss_mib,
    /// writer_memory_peak_mib)
    #[arg(long, help_heading = "Output")]
    pub estimate_memory: bool,
    /// Write the JSON report to FILE
    #[arg(long, value_name = "FILE", value_parser = nonempty_path, help_heading = "Output")]
    pub report: Option<PathBuf>,
    /// Print nothing but errors
    #[arg(long, help_heading = "Output")]
    pub quiet: bool,
    /// Print `encoded N` to stderr whenever the number of frames whose chunks are all in
    /// their shard slots grows (polled after each push; for crash tests), after one `sink
    /// S` line (the sink in use); with --arrays, `encoded KEY N` per array
    #[arg(long, help_heading = "Output")]
    pub progress: bool,

    /// The array shape (`--shape` or its default; with `--part-of`, the camera axis too).
    #[arg(skip)]
    pub shape: Vec<u64>,
    /// The inner chunk shape, given or derived.
    #[arg(skip)]
    pub chunk: Vec<u64>,
    /// The shard shape, given or derived.
    #[arg(skip)]
    pub shard: Vec<u64>,
    /// Dimension names, given or the default of the rank (`None`: unnamed).
    #[arg(skip)]
    pub dim_names: Option<Vec<String>>,
    /// Write an OME-Zarr image (`--ome`, or implied by `--plate`), with these options.
    #[arg(skip)]
    pub ome: Option<OmeArgs>,
    /// `--fields`, 1 unless given.
    #[arg(skip)]
    pub fields: u32,
}

/// The OME-Zarr options (`--ome`'s companions).
#[derive(Debug, Clone, Default, PartialEq, Args)]
pub(crate) struct OmeArgs {
    /// Pixel size in micrometers (y and x), or Y,X (needs --ome)
    #[arg(long, value_name = "UM", value_parser = pixel_size, help_heading = "OME-Zarr")]
    pub pixel_size: Option<(f64, f64)>,
    /// z step in micrometers (needs --ome and a z axis)
    #[arg(long, value_name = "UM", value_parser = positive, help_heading = "OME-Zarr")]
    pub z_step: Option<f64>,
    /// Time between frames (time axis) in milliseconds (needs --ome) [default with --fps:
    /// 1000/F]
    #[arg(long = "frame-interval", value_name = "MS", value_parser = positive, help_heading = "OME-Zarr")]
    pub frame_interval_ms: Option<f64>,
    /// Channel names, one per entry of the channel axis; with rank 4 and no --dim-names the
    /// axes become t,c,y,x, and the omero channels are labelled with them (needs --ome)
    #[arg(long, value_name = "A,B,...", value_parser = channels, help_heading = "OME-Zarr")]
    pub channels: Option<Names>,
    /// Every channel's omero display window (needs --ome) [default: each channel's 0.1 % to
    /// 99.9 % quantiles of the frames recorded, republished while recording]
    #[arg(long, value_name = "START,END", allow_hyphen_values = true, value_parser = window, help_heading = "OME-Zarr")]
    pub window: Option<(f64, f64)>,
    /// Resolution levels, level 0 included, built while recording by 2x2 reduction in y,x
    /// at --out/1, /2, ...; auto: until a level fits in one inner chunk (needs --ome)
    /// [default: 1]
    #[arg(long, value_name = "N|auto", value_parser = levels, help_heading = "OME-Zarr")]
    pub levels: Option<Levels>,
    /// mean | decimate | min | max (needs --ome) [default: mean]
    #[arg(long, value_name = "M", value_parser = downsample, help_heading = "OME-Zarr")]
    pub downsample: Option<Downsample>,
    /// Levels also halve z (2x2x2 blocks of consecutive z planes; needs --ome, --levels and
    /// a z axis)
    #[arg(long, help_heading = "OME-Zarr")]
    pub downsample_z: bool,
}

impl OmeArgs {
    /// The first OME option given, for "needs --ome".
    fn first_given(&self) -> Option<&'static str> {
        [
            ("--pixel-size", self.pixel_size.is_some()),
            ("--z-step", self.z_step.is_some()),
            ("--frame-interval", self.frame_interval_ms.is_some()),
            ("--channels", self.channels.is_some()),
            ("--window", self.window.is_some()),
            ("--levels", self.levels.is_some()),
            ("--downsample", self.downsample.is_some()),
            ("--downsample-z", self.downsample_z),
        ]
        .into_iter()
        .find_map(|(name, given)| given.then_some(name))
    }
}

impl Options {
    /// Refuses the combinations clap let through, applies the defaults that depend on
    /// other options and derives the chunk and shard shapes left out.
    pub(crate) fn resolve(&mut self) -> Result<(), UsageError> {
        if self.camera_threads && self.arrays.is_none() {
            return usage("--camera-threads needs --arrays");
        }
        if self.fields_arg.is_some() && self.plate.is_none() {
            return usage("--fields needs --plate");
        }
        self.fields = self.fields_arg.unwrap_or(1);
        let mut ome = self.ome_flag;
        if self.plate.is_some() {
            if self.arrays.is_some() {
                return usage(
                    "--plate and --arrays cannot be combined (a plate's arrays are its fields)",
                );
            }
            if self.resume {
                return usage("--resume is not supported with --plate");
            }
            // Every field of a plate is an OME-Zarr image.
            ome = true;
        }
        if self.resume && self.overwrite {
            return usage(
                "--resume and --overwrite cannot be combined (--resume appends to the store at --out)",
            );
        }
        if self.acquisition_order.is_some() {
            for (flag, given) in [
                ("--arrays", self.arrays.is_some()),
                ("--plate", self.plate.is_some()),
                ("--frame-meta", self.frame_meta),
                ("--resume", self.resume),
            ] {
                if given {
                    return usage(format!(
                        "--acquisition-order cannot be combined with {flag}"
                    ));
                }
            }
        }
        if self.resume && self.save_frames.is_some() {
            return usage("--save-frames cannot be combined with --resume");
        }
        if !ome && let Some(name) = self.ome_args.first_given() {
            return usage(format!("{name} needs --ome"));
        }
        if ome {
            let mut a = self.ome_args.clone();
            if a.frame_interval_ms.is_none() && self.fps > 0.0 {
                a.frame_interval_ms = Some(1000.0 / self.fps);
            }
            self.ome = Some(a);
        }
        self.resolve_shapes()
    }

    /// Applies the shape defaults and derives the chunk and shard shapes the user left out.
    fn resolve_shapes(&mut self) -> Result<(), UsageError> {
        let shape = self
            .shape_arg
            .clone()
            .unwrap_or_else(|| vec![0, 2048, 2048]);
        let rank = shape.len();
        if rank < 2 {
            return usage(format!(
                "--shape {}: at least 2 axes are needed (y, x; with an append axis first, e.g. \
                 0,2048,2048)",
                join(&shape)
            ));
        }
        // A single frame (y, x) has no append axis.
        let first = usize::from(rank > 2);
        if let Some(axis) = (first..rank).find(|&a| shape[a] == 0) {
            return usage(format!(
                "--shape {}: axis {axis} is 0; only axis 0 (the append axis) of 3 or more axes may be 0",
                join(&shape)
            ));
        }
        for (what, v) in [("--chunk", &self.chunk_arg), ("--shard", &self.shard_arg)] {
            if let Some(v) = v {
                if v.len() != rank {
                    return usage(format!(
                        "{what} {} has {} entries but --shape {} has {rank}",
                        join(v),
                        v.len(),
                        join(&shape)
                    ));
                }
                if let Some(axis) = v.iter().position(|&d| d == 0) {
                    return usage(format!("{what} {}: axis {axis} is 0", join(v)));
                }
            }
        }
        let (chunk, shard) = match (self.chunk_arg.clone(), self.shard_arg.clone()) {
            (Some(c), Some(s)) => (c, s),
            (Some(c), None) => {
                let s = derive_shard(&shape, &c);
                (c, s)
            }
            (None, Some(s)) => (derive_chunk_from_shard(&s), s),
            (None, None) => {
                let c = derive_chunk(&shape);
                let s = derive_shard(&shape, &c);
                (c, s)
            }
        };
        if let Some(axis) = (0..rank).find(|&a| shard[a] % chunk[a] != 0) {
            return usage(format!(
                "--chunk {} does not divide --shard {} on axis {axis}",
                join(&chunk),
                join(&shard)
            ));
        }
        self.dim_names = match &self.dim_names_arg {
            // `--dim-names none` (a given list is never empty).
            Some(names) if names.is_empty() => None,
            Some(names) => Some(names.clone()),
            None => {
                let names: &[&str] = match rank {
                    2 => &["y", "x"],
                    3 => &["t", "y", "x"],
                    4 if self.ome_args.channels.is_some() => &["t", "c", "y", "x"],
                    4 => &["t", "z", "y", "x"],
                    5 => &["t", "c", "z", "y", "x"],
                    _ => &[],
                };
                (!names.is_empty()).then(|| names.iter().map(|s| s.to_string()).collect())
            }
        };
        self.shape = shape;
        self.chunk = chunk;
        self.shard = shard;
        if let Some((_, n)) = self.part_of {
            if self.ome.is_some()
                || self.arrays.is_some()
                || self.plate.is_some()
                || self.resume
                || self.frame_meta
            {
                return usage(
                    "--part-of records one plain array: not with --ome, --arrays, --plate, --resume or --frame-meta",
                );
            }
            // Axis 1 is the camera: extent N, chunk and shard extent 1, so each process's
            // shards are its own.
            self.shape.insert(1, n);
            self.chunk.insert(1, 1);
            self.shard.insert(1, 1);
            if let Some(names) = &mut self.dim_names {
                names.insert(1, "camera".into());
            }
        } else if self.coordinate {
            return usage("--coordinate needs --part-of");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
