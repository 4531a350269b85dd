//! Command-line options of the `record` example, parsed by hand with `std`.

use std::fmt;
use std::path::PathBuf;

use zarrstream::{
    Backpressure, ChunkOrder, Codec, DataType, Durability, IndexLocation, Packing, SinkChoice,
};

/// Elements per shard when the shard shape is derived (32 frames of 2048 x 2048).
const SHARD_ELEMENTS: u64 = 1 << 27;
/// Elements pushed by default (128 frames of 2048 x 2048: 1 GiB of `u16`).
const DEFAULT_ELEMENTS: u64 = 1 << 29;
/// Largest inner chunk edge (y, x) when the chunk shape is derived.
const CHUNK_EDGE: u64 = 512;

pub(crate) const HELP: &str = "\
record: stream camera frames into a sharded Zarr v3 array with zarrstream

USAGE:
    cargo run --release --example record -- [OPTIONS]

ARRAY:
    --out PATH              store to create [default: ./record.zarr]; an existing
                            path is refused unless --overwrite is given
    --overwrite             replace an existing store at --out (a non-empty
                            directory without zarr.json is never removed)
    --frame-meta            attach synthetic per-frame metadata to every frame
                            (timestamp s, exposure ms, stage x/y/z um, and a
                            JSON object), stored under --out/frame_meta/
    --shape D0,...,Y,X      array shape; D0 = 0 is an unbounded append axis
                            [default: 0,2048,2048]
    --chunk C0,...,CY,CX    inner chunk shape, same rank [default: 1,...,1,512,512
                            for 2048x2048 frames; otherwise derived: leading axes 1,
                            y/x split into near-equal chunks of at most 512]
    --shard S0,...,SY,SX    shard shape, same rank, a multiple of --chunk [default:
                            32,2048,2048 for the default shape; otherwise the whole
                            frame and about 2^27 elements per shard]
    --dtype T               i8 | u8 | i16 | u16 | i32 | u32 | i64 | u64 | f32 | f64
                            [default: u16]
    --codec C               none | zstd[:LEVEL] | lz4[:CLEVEL[:SHUFFLE]] |
                            blosc-zstd[:CLEVEL[:SHUFFLE]] [default: lz4:1]
                            (lz4 = blosc-lz4: blosc with cname lz4; blosc-zstd: cname
                            zstd, as ome-writers names it; SHUFFLE: shuffle (byte, the
                            default), bitshuffle or noshuffle)
    --no-crc32c             leave out the per-chunk crc32c codec (on by default)
    --index-location L      end | start [default: end]
    --fill-value V          fill value, representable in --dtype [default: 0]
    --dim-names N0,...      dimension names, or 'none' [default: t,y,x for rank 3,
                            t,z,y,x for rank 4, t,c,z,y,x for rank 5]

OME-ZARR:
    --ome                   write an OME-Zarr 0.5 image: --out is a group whose
                            zarr.json holds attributes.ome (axes t, [c], [z], y, x),
                            the array is its level 0 at --out/0 (point zarrstream
                            recover/inspect/verify at --out/0)
    --pixel-size UM         pixel size in micrometers (y and x), or Y,X (needs --ome)
    --z-step UM             z step in micrometers (needs --ome and a z axis)
    --frame-interval MS     time between frames (time axis) in milliseconds
                            (needs --ome) [default with --fps: 1000/F]
    --channels A,B,...      channel names, one per entry of the channel axis; with
                            rank 4 and no --dim-names the axes become t,c,y,x, and
                            the omero channels are labelled with them (needs --ome)
    --window START,END      every channel's omero display window (needs --ome)
                            [default: each channel's 0.1 % to 99.9 % quantiles of
                            the frames recorded, republished while recording]
    --levels N|auto         resolution levels, level 0 included, built while
                            recording by 2x2 reduction in y,x at --out/1, /2, ...;
                            auto: until a level fits in one inner chunk (needs
                            --ome) [default: 1]
    --downsample M          mean|decimate|min|max (needs --ome) [default: mean]
    --downsample-z          levels also halve z (2x2x2 blocks of consecutive z
                            planes; needs --ome, --levels and a z axis)

FRAMES:
    --frames N              frames (2-D planes) to push; with rank > 3 they fill the
                            leading axes in C order [default: 2^29 elements' worth,
                            128 for 2048x2048; with --input, the frames in the file]
    --acquisition-order O   the camera's loop order over the leading axes, outermost
                            first, as dimension names or axis numbers (c,t,z or
                            1,0,2): frame k of the camera is written by index at the
                            k-th point of that loop (Writer::write_frame, the order
                            declared) instead of appended in storage order; needs a
                            bounded axis 0 unless it comes first; not with --arrays,
                            --plate, --frame-meta or --resume
    --input FILE            headerless little-endian raw frames of --dtype (frame-
                            major, C order), loaded into memory before timing;
                            cycled if --frames asks for more than the file holds
    --fps F                 pace frames at F per second from a camera clock: frame k
                            is due at t0 + k/F and its latency is measured from
                            then (0 = as fast as possible) [default: 0]
    --seed N                synthetic camera seed [default: 20240611]
    --blobs N               synthetic camera blob count [default: 400 per 2048 x 2048
                            frame, scaled with the frame area]

  Without --input a synthetic sCMOS-like camera (a port of make_frames.py) renders
  the frames before timing starts: at most 1 GiB of distinct frames, cycled.

    --save-frames FILE      write the --frames frames that would be pushed (synthetic
                            or from --input) to FILE as headerless little-endian raw
                            (frame-major, C order; readable by --input) and exit 0
                            without recording; --out is not touched

WRITER:
    --threads N             worker threads, 0 = one per core [default: 0]
    --sink S                auto | mmap | pwrite | direct [default: auto]
    --backpressure B        block | drop: what push does when the frame pool is
                            full [default: block]
    --pool-frames N         frame buffers in the pool, 0 = 2 x threads + 2 [default: 0]
    --packing P             compact | sparse: finished shard files without gaps, or
                            sparse files with the gaps punched out [default: compact]
    --chunk-order O         c | morton: order of the inner chunks inside each shard
                            file (Morton keeps spatial blocks together; selects the
                            mmap sink under --sink auto, not with --sink direct)
                            [default: c]
    --durability D          shard | periodic:MS | none: fdatasync each shard before it
                            becomes visible, flush all shards every MS milliseconds
                            (group commit), or no syncs [default: shard]
    --no-pin                do not pin worker threads to cores

RECORDING:
    --arrays N              record N synthetic cameras (or N copies of --input)
                            into one group at --out: arrays cam0..cam{N-1} (with
                            --ome, each an OME-Zarr image), one zarrstream
                            Recording with one pool of workers; --frames counts per
                            array and --pool-frames is the total frame budget. The
                            cameras share one pool of synthetic frames: camera k
                            starts k/N of the way into it. Frames are pushed
                            round-robin from one thread [default: one array, one
                            Writer]
    --camera-threads        one pushing thread per array (needs --arrays), each
                            paced at --fps like a camera of its own
    --plate ROWSxCOLS       record an OME-Zarr 0.5 high-content screening plate at
                            --out (implies --ome): ROWS x COLS wells (rows A, B, ...,
                            columns 1, 2, ...), each with --fields fields of view, every
                            field an OME-Zarr image at --out/ROW/COL/FIELD and an array
                            of one Recording; --out holds the plate metadata, each
                            well ROW/COL its list of fields. One camera, pushed as a
                            screening microscope visits the plate: the stage moves
                            well by well (row by row) and takes each well's fields one
                            after another, one time point (all channels and z planes
                            of it) per visit; --frames counts per field, so the plate
                            is passed over --frames / (frames per time point) times.
                            The camera's frames (synthetic, or --input cycled) go to
                            the fields in that order.
    --fields F              fields of view per well (needs --plate) [default: 1]
    --part-of K/N           record camera K of N into one array of shape
                            [T, N, Y, X] (axis 1 of chunk and shard extent 1, so
                            each process writes only its own shards); --out must be
                            an object-store URL or a path every process shares
                            (then used as file://); run `zarrstream publish URL`
                            any time (and at the end), or give one process
                            --coordinate, to publish the shared zarr.json
    --coordinate            with --part-of: this process also publishes the shared
                            zarr.json from every part's progress
    --resume                append to the finished array (with --arrays, the
                            recording) at --out, which must exist: the first new
                            frame follows the last one recorded (with --input, it
                            is the input's first frame; synthetic frames continue
                            the camera's sequence); the options must describe the
                            array as it is on disk (not with --overwrite)

OBJECT STORES (--out s3://bucket/prefix; endpoint, region and credentials from
AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; an http://
endpoint allows plain HTTP):
    --staging DIR           local directory shards are finished in before upload
                            [default: $ZARRSTREAM_STAGING or the temporary directory,
                            under zarrstream-staging/]
    --staging-budget MIB    finished MiB that may wait for upload before frames
                            block or drop [default: 2048]

OUTPUT:
    --estimate-memory       print the memory estimate (zarrstream::estimate_memory)
                            before the run, and after it the estimate against the
                            measured peak RSS over the loaded frames and the
                            writer's own count (the report always has them:
                            memory_estimate_mib, extra_rss_mib,
                            writer_memory_peak_mib)
    --report FILE           write the JSON report to FILE
    --quiet                 print nothing but errors
    --progress              print `encoded N` to stderr whenever the number of
                            frames whose chunks are all in their shard slots grows
                            (polled after each push; for crash tests), after one
                            `sink S` line (the sink in use); with --arrays,
                            `encoded KEY N` per array
    -h, --help              print this help

Exit status: 0 on success, 2 for invalid options (including an existing --out
without --overwrite), 1 for any other failure.
";

/// A problem with the command line (exit status 2).
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Everything the example needs, with defaults applied and shapes derived.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// A local path, or an object-store URL (`s3://bucket/prefix`).
    pub out: PathBuf,
    /// `--part-of K/N`: this process records camera `K` of `N` into axis 1.
    pub part_of: Option<(u64, u64)>,
    /// `--coordinate`: with `--part-of`, also publish the shared `zarr.json`.
    pub coordinate: bool,
    /// `--staging DIR`: the staging directory of an object-store destination.
    pub staging: Option<PathBuf>,
    /// `--staging-budget MIB`: finished bytes that may wait for upload.
    pub staging_budget_mib: Option<u64>,
    pub overwrite: bool,
    /// Attach synthetic per-frame metadata (`--frame-meta`).
    pub frame_meta: bool,
    pub shape: Vec<u64>,
    pub chunk: Vec<u64>,
    pub shard: Vec<u64>,
    pub dtype: DataType,
    pub codec: Codec,
    pub crc32c: bool,
    pub index_location: IndexLocation,
    pub fill_value: f64,
    pub dim_names: Option<Vec<String>>,
    /// Write an OME-Zarr image (`--ome`), with these options.
    pub ome: Option<OmeArgs>,
    /// `None` until resolved against the input file (see `main`).
    pub frames: Option<u64>,
    /// `--acquisition-order`: the camera's loop order, as given (names or numbers).
    pub acquisition_order: Option<Vec<String>>,
    pub input: Option<PathBuf>,
    /// Write the frames to this raw file and exit instead of recording.
    pub save_frames: Option<PathBuf>,
    pub fps: f64,
    pub seed: u64,
    /// `None`: 400 per 2048 x 2048, scaled with the frame area.
    pub blobs: Option<usize>,
    pub threads: usize,
    pub sink: SinkChoice,
    pub backpressure: Backpressure,
    pub pool_frames: usize,
    pub packing: Packing,
    pub chunk_order: ChunkOrder,
    pub durability: Durability,
    pub pin: bool,
    pub report: Option<PathBuf>,
    pub quiet: bool,
    /// Print `encoded N` to stderr as `Writer::frames_encoded` grows.
    pub progress: bool,
    /// `--estimate-memory`: print the estimate and the measured peak.
    pub estimate_memory: bool,
    /// `--arrays N`: N arrays `cam0..` in one `Recording` (`None`: one `Writer`).
    pub arrays: Option<usize>,
    /// `--camera-threads`: one pushing thread per array.
    pub camera_threads: bool,
    /// `--resume`: continue the finished array or recording at `out`.
    pub resume: bool,
    /// `--plate ROWSxCOLS`: an OME-Zarr plate of this many rows and columns.
    pub plate: Option<(usize, usize)>,
    /// `--fields F`: fields of view per well.
    pub fields: u32,
}

/// The OME-Zarr options (`--ome` and its companions).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OmeArgs {
    /// Pixel size (y, x) in micrometers.
    pub pixel_size: Option<(f64, f64)>,
    /// z step in micrometers.
    pub z_step: Option<f64>,
    /// Frame interval in milliseconds.
    pub frame_interval_ms: Option<f64>,
    /// Channel names.
    pub channels: Option<Vec<String>>,
    /// The omero display window (start, end) of every channel (`None`: from the data).
    pub window: Option<(f64, f64)>,
    /// Resolution levels (`None`: 1).
    pub levels: Option<zarrstream::Levels>,
    /// Downsampling method.
    pub downsample: Option<zarrstream::Downsample>,
    /// Levels halve z too.
    pub downsample_z: bool,
}

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Command {
    Help,
    Run(Box<Options>),
}

/// Raw values before defaults that depend on each other are applied.
#[derive(Default)]
struct Raw {
    shape: Option<Vec<u64>>,
    chunk: Option<Vec<u64>>,
    shard: Option<Vec<u64>>,
    dim_names: Option<Option<Vec<String>>>,
    ome: bool,
    ome_args: OmeArgs,
    /// The first OME option given (for "needs --ome").
    ome_option: Option<String>,
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, UsageError> {
    let mut o = Options {
        out: PathBuf::from("./record.zarr"),
        overwrite: false,
        frame_meta: false,
        shape: Vec::new(),
        chunk: Vec::new(),
        shard: Vec::new(),
        dtype: DataType::UInt16,
        codec: Codec::blosc_lz4(1),
        crc32c: true,
        index_location: IndexLocation::End,
        fill_value: 0.0,
        dim_names: None,
        ome: None,
        frames: None,
        acquisition_order: None,
        input: None,
        save_frames: None,
        fps: 0.0,
        seed: 20240611,
        blobs: None,
        threads: 0,
        sink: SinkChoice::Auto,
        backpressure: Backpressure::Block,
        pool_frames: 0,
        packing: Packing::Compact,
        chunk_order: ChunkOrder::C,
        durability: Durability::Shard,
        pin: true,
        report: None,
        quiet: false,
        progress: false,
        estimate_memory: false,
        arrays: None,
        camera_threads: false,
        resume: false,
        plate: None,
        fields: 1,
        part_of: None,
        coordinate: false,
        staging: None,
        staging_budget_mib: None,
    };
    let mut fields_given = false;
    let mut raw = Raw::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        if !arg.starts_with("--") {
            return usage(format!(
                "unexpected argument '{arg}' (options start with --; see --help)"
            ));
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        // Flags take no value.
        let flag = |o: &mut Options, raw: &mut Raw| -> Option<()> {
            match name.as_str() {
                "--overwrite" => o.overwrite = true,
                "--coordinate" => o.coordinate = true,
                "--frame-meta" => o.frame_meta = true,
                "--no-crc32c" => o.crc32c = false,
                "--no-pin" => o.pin = false,
                "--quiet" => o.quiet = true,
                "--progress" => o.progress = true,
                "--estimate-memory" => o.estimate_memory = true,
                "--camera-threads" => o.camera_threads = true,
                "--resume" => o.resume = true,
                "--ome" => raw.ome = true,
                "--downsample-z" => {
                    raw.ome_args.downsample_z = true;
                    raw.ome_option.get_or_insert_with(|| name.clone());
                }
                _ => return None,
            }
            Some(())
        };
        if flag(&mut o, &mut raw).is_some() {
            if inline.is_some() {
                return usage(format!("{name} takes no value"));
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match args.next() {
                Some(v) => v,
                None if is_option(&name) => {
                    return usage(format!("{name} needs a value (see --help)"));
                }
                None => return usage(format!("unknown option {name} (see --help)")),
            },
        };
        let v = value.as_str();
        match name.as_str() {
            "--out" => o.out = PathBuf::from(nonempty(&name, v)?),
            "--part-of" => {
                let parsed = v
                    .split_once('/')
                    .and_then(|(k, n)| Some((k.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
                match parsed {
                    Some((k, n)) if k < n => o.part_of = Some((k, n)),
                    _ => {
                        return usage(format!(
                            "--part-of {v}: expected K/N with 0 <= K < N (camera K of N)"
                        ));
                    }
                }
            }
            "--staging" => o.staging = Some(PathBuf::from(nonempty(&name, v)?)),
            "--staging-budget" => o.staging_budget_mib = Some(parse_num(&name, v)?),
            "--shape" => raw.shape = Some(parse_dims(&name, v)?),
            "--chunk" => raw.chunk = Some(parse_dims(&name, v)?),
            "--shard" => raw.shard = Some(parse_dims(&name, v)?),
            "--dtype" => {
                o.dtype = match v.parse::<DataType>() {
                    Ok(d) => d,
                    Err(_) => {
                        return usage(format!(
                            "--dtype '{v}': expected i8, u8, i16, u16, i32, u32, i64, u64, f32 or f64"
                        ));
                    }
                }
            }
            "--codec" => {
                o.codec = match v.parse::<Codec>() {
                    Ok(c) => c,
                    Err(_) => {
                        return usage(format!(
                            "--codec '{v}': expected none, zstd, zstd:LEVEL (-131072..=22), lz4, lz4:CLEVEL (0..=9), \
                             blosc-zstd or blosc-zstd:CLEVEL, each blosc one optionally with :shuffle, :bitshuffle \
                             or :noshuffle"
                        ));
                    }
                }
            }
            "--index-location" => {
                o.index_location = match v.parse::<IndexLocation>() {
                    Ok(l) => l,
                    Err(_) => {
                        return usage(format!("--index-location '{v}': expected end or start"));
                    }
                }
            }
            "--fill-value" => {
                o.fill_value = match v.to_ascii_lowercase().as_str() {
                    "nan" => f64::NAN,
                    "inf" | "infinity" | "+inf" => f64::INFINITY,
                    "-inf" | "-infinity" => f64::NEG_INFINITY,
                    _ => match v.parse::<f64>() {
                        Ok(x) => x,
                        Err(_) => return usage(format!("--fill-value '{v}': not a number")),
                    },
                }
            }
            "--dim-names" => {
                raw.dim_names = Some(if v == "none" {
                    None
                } else {
                    let names: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                    if names.iter().any(String::is_empty) {
                        return usage(format!("--dim-names '{v}': empty name"));
                    }
                    Some(names)
                })
            }
            "--pixel-size" | "--z-step" | "--frame-interval" | "--channels" | "--levels"
            | "--downsample" | "--window" => {
                raw.ome_option.get_or_insert_with(|| name.clone());
                let a = &mut raw.ome_args;
                match name.as_str() {
                    "--pixel-size" => {
                        let p: Vec<f64> = v
                            .split(',')
                            .map(|x| positive(&name, x))
                            .collect::<Result<_, _>>()?;
                        a.pixel_size = match p[..] {
                            [p] => Some((p, p)),
                            [y, x] => Some((y, x)),
                            _ => return usage(format!("--pixel-size '{v}': expected UM or Y,X")),
                        }
                    }
                    "--z-step" => a.z_step = Some(positive(&name, v)?),
                    "--window" => {
                        let w: Vec<f64> = v
                            .split(',')
                            .map(|x| x.trim().parse::<f64>())
                            .collect::<Result<_, _>>()
                            .map_err(|_| {
                                UsageError(format!("--window '{v}': expected START,END"))
                            })?;
                        a.window = match w[..] {
                            [s, e] if s.is_finite() && e.is_finite() && s < e => Some((s, e)),
                            _ => {
                                return usage(format!(
                                    "--window '{v}': expected START,END with START < END"
                                ));
                            }
                        }
                    }
                    "--levels" => {
                        a.levels = Some(if v == "auto" {
                            zarrstream::Levels::Auto
                        } else {
                            match v.parse::<usize>() {
                                Ok(n) if (1..=zarrstream::MAX_LEVELS).contains(&n) => {
                                    zarrstream::Levels::Count(n)
                                }
                                _ => {
                                    return usage(format!(
                                        "--levels '{v}': expected 1 to {} or auto",
                                        zarrstream::MAX_LEVELS
                                    ));
                                }
                            }
                        })
                    }
                    "--downsample" => {
                        a.downsample = Some(match v.parse() {
                            Ok(m) => m,
                            Err(e) => return usage(format!("--downsample: {e}")),
                        })
                    }
                    "--frame-interval" => a.frame_interval_ms = Some(positive(&name, v)?),
                    _ => {
                        let names: Vec<String> =
                            v.split(',').map(|s| s.trim().to_string()).collect();
                        if names.iter().any(String::is_empty) {
                            return usage(format!("--channels '{v}': empty name"));
                        }
                        a.channels = Some(names);
                    }
                }
            }
            "--frames" => o.frames = Some(parse_num(&name, v)?),
            "--acquisition-order" => {
                let axes: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
                if axes.iter().any(String::is_empty) {
                    return usage(format!("--acquisition-order '{v}': empty axis"));
                }
                o.acquisition_order = Some(axes);
            }
            "--input" => o.input = Some(PathBuf::from(nonempty(&name, v)?)),
            "--save-frames" => o.save_frames = Some(PathBuf::from(nonempty(&name, v)?)),
            "--fps" => {
                o.fps = match v.parse::<f64>() {
                    Ok(f) if f.is_finite() && f >= 0.0 => f,
                    _ => return usage(format!("--fps '{v}': expected a number >= 0")),
                }
            }
            "--seed" => o.seed = parse_num(&name, v)?,
            "--blobs" => o.blobs = Some(parse_num(&name, v)?),
            "--threads" => o.threads = parse_num(&name, v)?,
            "--sink" => {
                o.sink = match v.parse::<SinkChoice>() {
                    Ok(s) => s,
                    Err(_) => {
                        return usage(format!(
                            "--sink '{v}': expected auto, mmap, pwrite or direct"
                        ));
                    }
                }
            }
            "--backpressure" => {
                o.backpressure = match v {
                    "block" => Backpressure::Block,
                    "drop" => Backpressure::Drop,
                    _ => return usage(format!("--backpressure '{v}': expected block or drop")),
                }
            }
            "--pool-frames" => o.pool_frames = parse_num(&name, v)?,
            "--packing" => {
                o.packing = match v.parse::<Packing>() {
                    Ok(p) => p,
                    Err(_) => return usage(format!("--packing '{v}': expected compact or sparse")),
                }
            }
            "--chunk-order" => {
                o.chunk_order = match v.parse::<ChunkOrder>() {
                    Ok(c) => c,
                    Err(_) => return usage(format!("--chunk-order '{v}': expected c or morton")),
                }
            }
            "--durability" => {
                o.durability = match v {
                    "shard" => Durability::Shard,
                    "none" => Durability::None,
                    _ => match v
                        .strip_prefix("periodic:")
                        .and_then(|ms| ms.parse::<u64>().ok())
                    {
                        Some(ms) => Durability::Periodic {
                            interval: std::time::Duration::from_millis(ms),
                        },
                        None => {
                            return usage(format!(
                                "--durability '{v}': expected shard, periodic:MS or none"
                            ));
                        }
                    },
                }
            }
            "--report" => o.report = Some(PathBuf::from(nonempty(&name, v)?)),
            "--plate" => {
                let grid = v
                    .split_once(['x', 'X'])
                    .and_then(|(r, c)| Some((r.trim().parse().ok()?, c.trim().parse().ok()?)));
                match grid {
                    Some(rc) => o.plate = Some(rc),
                    None => {
                        return usage(format!("--plate '{v}': expected ROWSxCOLS, e.g. 8x12"));
                    }
                }
            }
            "--fields" => {
                o.fields = parse_num(&name, v)?;
                fields_given = true;
            }
            "--arrays" => {
                o.arrays = match parse_num::<usize>(&name, v)? {
                    0 => return usage(format!("--arrays '{v}': expected at least 1")),
                    n => Some(n),
                }
            }
            _ => return usage(format!("unknown option {name} (see --help)")),
        }
    }
    if o.camera_threads && o.arrays.is_none() {
        return usage("--camera-threads needs --arrays");
    }
    if fields_given && o.plate.is_none() {
        return usage("--fields needs --plate");
    }
    if o.plate.is_some() {
        if o.arrays.is_some() {
            return usage(
                "--plate and --arrays cannot be combined (a plate's arrays are its fields)",
            );
        }
        if o.resume {
            return usage("--resume is not supported with --plate");
        }
        // Every field of a plate is an OME-Zarr image.
        raw.ome = true;
    }
    if o.resume && o.overwrite {
        return usage(
            "--resume and --overwrite cannot be combined (--resume appends to the store at --out)",
        );
    }
    if o.acquisition_order.is_some() {
        for (flag, given) in [
            ("--arrays", o.arrays.is_some()),
            ("--plate", o.plate.is_some()),
            ("--frame-meta", o.frame_meta),
            ("--resume", o.resume),
        ] {
            if given {
                return usage(format!(
                    "--acquisition-order cannot be combined with {flag}"
                ));
            }
        }
    }
    if o.resume && o.save_frames.is_some() {
        return usage("--save-frames cannot be combined with --resume");
    }
    if !raw.ome
        && let Some(name) = &raw.ome_option
    {
        return usage(format!("{name} needs --ome"));
    }
    if raw.ome {
        let mut a = raw.ome_args.clone();
        if a.frame_interval_ms.is_none() && o.fps > 0.0 {
            a.frame_interval_ms = Some(1000.0 / o.fps);
        }
        o.ome = Some(a);
    }
    resolve_shapes(&mut o, raw)?;
    Ok(Command::Run(Box::new(o)))
}

/// Options that take a value (for the "needs a value" message).
fn is_option(name: &str) -> bool {
    HELP.lines()
        .any(|l| l.trim_start().starts_with(&format!("{name} ")))
}

fn positive(name: &str, v: &str) -> Result<f64, UsageError> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => usage(format!("{name} '{v}': expected a positive number")),
    }
}

fn nonempty<'a>(name: &str, v: &'a str) -> Result<&'a str, UsageError> {
    if v.is_empty() {
        usage(format!("{name}: empty value"))
    } else {
        Ok(v)
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, UsageError> {
    match v.trim().replace('_', "").parse::<T>() {
        Ok(n) => Ok(n),
        Err(_) => usage(format!("{name} '{v}': expected a non-negative integer")),
    }
}

fn parse_dims(name: &str, v: &str) -> Result<Vec<u64>, UsageError> {
    let dims: Result<Vec<u64>, _> = v.split(',').map(|d| d.trim().parse::<u64>()).collect();
    match dims {
        Ok(d) if !d.is_empty() => Ok(d),
        _ => usage(format!(
            "{name} '{v}': expected comma-separated non-negative integers, e.g. 0,2048,2048"
        )),
    }
}

/// `1,2,3`, the form the shape options take.
pub(crate) fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// Applies the shape defaults and derives the chunk and shard shapes the user left out.
fn resolve_shapes(o: &mut Options, raw: Raw) -> Result<(), UsageError> {
    let shape = raw.shape.unwrap_or_else(|| vec![0, 2048, 2048]);
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
    for (what, v) in [("--chunk", &raw.chunk), ("--shard", &raw.shard)] {
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
    let (chunk, shard) = match (raw.chunk, raw.shard) {
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
    o.dim_names = match raw.dim_names {
        Some(names) => names,
        None => {
            let names: &[&str] = match rank {
                2 => &["y", "x"],
                3 => &["t", "y", "x"],
                4 if raw.ome_args.channels.is_some() => &["t", "c", "y", "x"],
                4 => &["t", "z", "y", "x"],
                5 => &["t", "c", "z", "y", "x"],
                _ => &[],
            };
            (!names.is_empty()).then(|| names.iter().map(|s| s.to_string()).collect())
        }
    };
    o.shape = shape;
    o.chunk = chunk;
    o.shard = shard;
    if let Some((_, n)) = o.part_of {
        if raw.ome || o.arrays.is_some() || o.plate.is_some() || o.resume || o.frame_meta {
            return usage(
                "--part-of records one plain array: not with --ome, --arrays, --plate, --resume or --frame-meta",
            );
        }
        // Axis 1 is the camera: extent N, chunk and shard extent 1, so each process's
        // shards are its own.
        o.shape.insert(1, n);
        o.chunk.insert(1, 1);
        o.shard.insert(1, 1);
        if let Some(names) = &mut o.dim_names {
            names.insert(1, "camera".into());
        }
    } else if o.coordinate {
        return usage("--coordinate needs --part-of");
    }
    Ok(())
}

/// Leading axes 1; y and x split into near-equal chunks of at most `CHUNK_EDGE`.
fn derive_chunk(shape: &[u64]) -> Vec<u64> {
    let rank = shape.len();
    let mut c = vec![1; rank];
    for a in rank - 2..rank {
        let n = shape[a].div_ceil(CHUNK_EDGE);
        c[a] = shape[a].div_ceil(n);
    }
    c
}

/// Leading axes 1; y and x: the largest divisor of the shard edge that is at most
/// `CHUNK_EDGE` (or the whole edge if that divisor would be tiny).
fn derive_chunk_from_shard(shard: &[u64]) -> Vec<u64> {
    let rank = shard.len();
    let mut c = vec![1; rank];
    for a in rank - 2..rank {
        let s = shard[a];
        let best = (s.div_ceil(CHUNK_EDGE)..=s)
            .find(|n| s.is_multiple_of(*n))
            .map_or(s, |n| s / n);
        c[a] = if best < 32 && s > CHUNK_EDGE { s } else { best };
    }
    c
}

/// The whole frame (rounded up to chunks) on y and x; about `SHARD_ELEMENTS` per shard,
/// spread over the leading axes from the innermost outwards.
fn derive_shard(shape: &[u64], chunk: &[u64]) -> Vec<u64> {
    let rank = shape.len();
    let mut s = vec![0; rank];
    for a in rank - 2..rank {
        s[a] = shape[a].div_ceil(chunk[a]) * chunk[a];
    }
    let plane = s[rank - 2].saturating_mul(s[rank - 1]);
    let mut budget = (SHARD_ELEMENTS / plane.max(1)).max(1);
    let round_up = |v: u64, c: u64| v.div_ceil(c).saturating_mul(c);
    for a in (1..rank - 2).rev() {
        let whole = round_up(shape[a], chunk[a]);
        if whole <= budget {
            s[a] = whole;
            budget /= whole;
        } else {
            // Near-equal shards no larger than the budget.
            let n = shape[a].div_ceil(budget.max(1));
            s[a] = round_up(shape[a].div_ceil(n), chunk[a]);
            budget = 1;
        }
    }
    if rank == 2 {
        // A single frame: one shard row of the whole frame.
        return s;
    }
    s[0] = round_up(budget.max(1), chunk[0]);
    if shape[0] > 0 {
        s[0] = s[0].min(round_up(shape[0], chunk[0]));
    }
    s
}

/// Frames pushed when `--frames` is not given and there is no input file.
pub(crate) fn default_frames(shape: &[u64]) -> u64 {
    let rank = shape.len();
    if rank == 2 {
        return 1;
    }
    let plane = shape[rank - 2].saturating_mul(shape[rank - 1]).max(1);
    (DEFAULT_ELEMENTS / plane).clamp(1, 1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        match parse(args.iter().map(|s| s.to_string())) {
            Ok(Command::Run(o)) => *o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_single_frame_has_rank_2() {
        let o = run(&["--shape", "64,96", "--chunk", "32,32"]);
        assert_eq!(
            (o.chunk.clone(), o.shard.clone()),
            (vec![32, 32], vec![64, 96])
        );
        assert_eq!(o.dim_names, Some(vec!["y".to_string(), "x".to_string()]));
        assert_eq!(default_frames(&o.shape), 1);
        assert!(err(&["--shape", "0,96"]).contains("axis 0 is 0"));
        assert!(err(&["--shape", "96"]).contains("at least 2 axes"));
    }

    #[test]
    fn defaults_match_the_contract() {
        let o = run(&[]);
        assert_eq!(o.shape, [0, 2048, 2048]);
        assert_eq!(o.chunk, [1, 512, 512]);
        assert_eq!(o.shard, [32, 2048, 2048]);
        assert_eq!(default_frames(&o.shape), 128);
        let o = run(&["--dtype", "u8"]);
        assert_eq!(o.shard, [32, 2048, 2048]);
    }

    #[test]
    fn shapes_are_derived() {
        let o = run(&["--shape=0,2,40,2048,2048"]);
        assert_eq!(o.chunk, [1, 1, 1, 512, 512]);
        assert_eq!(o.shard, [1, 1, 20, 2048, 2048]);
        let o = run(&["--shape", "0,2000,600"]);
        assert_eq!(o.chunk, [1, 500, 300]);
        assert_eq!(o.shard, [111, 2000, 600]);
        let o = run(&["--shape", "10,100,70"]);
        assert_eq!(o.chunk, [1, 100, 70]);
        assert_eq!(o.shard, [10, 100, 70]);
        let o = run(&["--shape", "0,2048,2048", "--chunk", "16,256,256"]);
        assert_eq!(o.shard, [32, 2048, 2048]);
        let o = run(&["--shape", "0,2048,2048", "--shard", "64,2048,2048"]);
        assert_eq!(o.chunk, [1, 512, 512]);
    }

    #[test]
    fn codecs_in_every_spelling() {
        use zarrstream::BloscShuffle;
        assert_eq!(
            run(&["--codec", "blosc-zstd:5"]).codec,
            Codec::blosc_zstd(5)
        );
        assert_eq!(run(&["--codec", "blosc-zstd"]).codec, Codec::blosc_zstd(1));
        assert_eq!(
            run(&["--codec", "blosc-zstd:3:bitshuffle"]).codec,
            Codec::blosc_zstd(3).with_shuffle(BloscShuffle::BitShuffle)
        );
        assert_eq!(
            run(&["--codec", "lz4:1:noshuffle"]).codec,
            Codec::blosc_lz4(1).with_shuffle(BloscShuffle::NoShuffle)
        );
        assert_eq!(run(&["--codec", "zstd:3"]).codec, Codec::zstd(3));
    }

    #[test]
    fn errors_are_clear() {
        let err = |a: &[&str]| match parse(a.iter().map(|s| s.to_string())) {
            Err(e) => e.0,
            Ok(c) => panic!("{c:?}"),
        };
        assert!(err(&["--frobnicate"]).contains("unknown option --frobnicate"));
        assert!(err(&["--frames"]).contains("needs a value"));
        assert!(err(&["--codec", "gzip"]).contains("expected none"));
        assert!(err(&["--codec", "blosc-zstd:3:bits"]).contains("blosc-zstd:CLEVEL"));
        assert!(err(&["--shape", "0,0,4"]).contains("axis 1 is 0"));
        assert!(err(&["--chunk", "1,512"]).contains("has 2 entries"));
        assert!(
            err(&["--chunk", "1,300,512", "--shard", "1,2048,2048"]).contains("does not divide")
        );
        assert!(err(&["--quiet=1"]).contains("takes no value"));
        assert!(err(&["--pixel-size", "0.5"]).contains("needs --ome"));
        assert!(err(&["--ome", "--z-step", "0"]).contains("positive number"));
        assert!(err(&["--ome", "--pixel-size", "1,2,3"]).contains("expected UM or Y,X"));
    }

    #[test]
    fn ome_options() {
        let o = run(&[
            "--ome",
            "--shape",
            "0,2,64,64",
            "--channels",
            "a,b",
            "--fps",
            "20",
        ]);
        assert_eq!(
            o.dim_names.as_deref(),
            Some(&["t", "c", "y", "x"].map(String::from)[..])
        );
        let a = o.ome.expect("ome");
        assert_eq!(a.channels, Some(vec!["a".into(), "b".into()]));
        assert_eq!(a.frame_interval_ms, Some(50.0));
        let o = run(&["--ome", "--pixel-size", "0.5,0.25", "--z-step=2"]);
        let a = o.ome.expect("ome");
        assert_eq!((a.pixel_size, a.z_step), (Some((0.5, 0.25)), Some(2.0)));
        assert_eq!(a.window, None, "the window follows the data unless given");
        assert!(run(&[]).ome.is_none());
        let a = run(&["--ome", "--window", "90,2500"]).ome.expect("ome");
        assert_eq!(a.window, Some((90.0, 2500.0)));
        assert!(err(&["--window", "1,2"]).contains("needs --ome"));
        assert!(err(&["--ome", "--window", "5"]).contains("START,END"));
        assert!(err(&["--ome", "--window", "9,1"]).contains("START < END"));
        assert!(err(&["--ome", "--window", "a,b"]).contains("START,END"));
    }

    fn err(a: &[&str]) -> String {
        match parse(a.iter().map(|s| s.to_string())) {
            Err(e) => e.0,
            Ok(c) => panic!("{c:?}"),
        }
    }

    #[test]
    fn arrays_flag() {
        let o = run(&[]);
        assert_eq!(o.arrays, None);
        assert!(!o.camera_threads && !o.resume);
        assert_eq!(run(&["--arrays", "3"]).arrays, Some(3));
        assert_eq!(run(&["--arrays=1"]).arrays, Some(1));
        assert!(err(&["--arrays", "0"]).contains("--arrays '0': expected at least 1"));
        assert!(err(&["--arrays", "-2"]).contains("non-negative integer"));
        assert!(err(&["--arrays"]).contains("needs a value"));
    }

    #[test]
    fn camera_threads_flag() {
        let o = run(&["--arrays", "2", "--camera-threads"]);
        assert!(o.camera_threads);
        assert_eq!(o.arrays, Some(2));
        assert_eq!(
            err(&["--camera-threads"]),
            "--camera-threads needs --arrays"
        );
        assert!(err(&["--camera-threads=1", "--arrays", "2"]).contains("takes no value"));
    }

    #[test]
    fn frame_meta_with_arrays() {
        let o = run(&["--arrays", "2", "--frame-meta"]);
        assert!(o.frame_meta);
        assert_eq!(o.arrays, Some(2));
    }

    #[test]
    fn plate_flags() {
        let o = run(&["--plate", "2x3", "--fields", "4"]);
        assert_eq!((o.plate, o.fields), (Some((2, 3)), 4));
        assert!(o.ome.is_some(), "a plate's fields are OME-Zarr images");
        assert_eq!(run(&["--plate=8X12"]).plate, Some((8, 12)));
        assert_eq!(run(&["--plate", "1x1"]).fields, 1);
        assert!(err(&["--plate", "2by3"]).contains("expected ROWSxCOLS"));
        assert!(err(&["--plate", "x3"]).contains("expected ROWSxCOLS"));
        assert_eq!(err(&["--fields", "2"]), "--fields needs --plate");
        assert!(err(&["--plate", "2x2", "--arrays", "2"]).contains("cannot be combined"));
        for other in [&["--arrays", "2"][..], &["--frame-meta"], &["--resume"]] {
            let mut args = vec!["--acquisition-order", "c,t"];
            args.extend(other);
            let e = err(&args);
            assert!(
                e.contains(&format!("cannot be combined with {}", other[0])),
                "{e}"
            );
        }
        assert!(err(&["--acquisition-order", "c,,t"]).contains("empty axis"));
        assert!(err(&["--plate", "2x2", "--resume"]).contains("not supported"));
        assert!(err(&["--plate", "2x2", "--fields", "-1"]).contains("non-negative"));
    }

    #[test]
    fn resume_flag() {
        let o = run(&["--resume", "--out", "x.zarr"]);
        assert!(o.resume && !o.overwrite);
        assert!(run(&["--resume", "--arrays", "2"]).resume);
        assert!(err(&["--resume", "--overwrite"]).contains("cannot be combined"));
        assert!(err(&["--overwrite", "--resume"]).contains("cannot be combined"));
        assert!(err(&["--resume", "--save-frames", "f.raw"]).contains("--save-frames"));
        assert!(err(&["--resume=yes"]).contains("takes no value"));
    }

    #[test]
    fn chunk_order_flag() {
        assert_eq!(run(&[]).chunk_order, ChunkOrder::C);
        assert_eq!(
            run(&["--chunk-order", "morton"]).chunk_order,
            ChunkOrder::Morton
        );
        assert_eq!(run(&["--chunk-order=c"]).chunk_order, ChunkOrder::C);
        assert!(err(&["--chunk-order", "z"]).contains("--chunk-order 'z': expected c or morton"));
        assert!(err(&["--chunk-order"]).contains("needs a value"));
    }
}
