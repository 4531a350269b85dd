use super::*;

/// `zarrstream record ARGS` as `main` parses it: clap, then `resolve`; an error as
/// it is printed.
fn parse(args: &[&str]) -> Result<Options, String> {
    let argv = ["zarrstream", "record"].iter().chain(args);
    let cli = <crate::Cli as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
    let crate::Command::Record(mut o) = cli.command else {
        panic!("not the record subcommand");
    };
    o.resolve().map_err(|e| e.0)?;
    Ok(*o)
}

fn run(args: &[&str]) -> Options {
    parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn err(args: &[&str]) -> String {
    match parse(args) {
        Err(e) => e,
        Ok(o) => panic!("{args:?} parsed: {o:?}"),
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
    assert!(err(&["--frobnicate"]).contains("unexpected argument '--frobnicate' found"));
    assert!(err(&["--frames"]).contains("a value is required for '--frames <N>'"));
    assert!(err(&["--codec", "gzip"]).contains("expected none"));
    assert!(err(&["--codec", "blosc-zstd:3:bits"]).contains("blosc-zstd:CLEVEL"));
    assert!(err(&["--shape", "0,0,4"]).contains("axis 1 is 0"));
    assert!(err(&["--chunk", "1,512"]).contains("has 2 entries"));
    assert!(err(&["--chunk", "1,300,512", "--shard", "1,2048,2048"]).contains("does not divide"));
    assert!(err(&["--quiet=1"]).contains("unexpected value '1' for '--quiet'"));
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

#[test]
fn arrays_flag() {
    let o = run(&[]);
    assert_eq!(o.arrays, None);
    assert!(!o.camera_threads && !o.resume);
    assert_eq!(run(&["--arrays", "3"]).arrays, Some(3));
    assert_eq!(run(&["--arrays=1"]).arrays, Some(1));
    assert!(
        err(&["--arrays", "0"])
            .contains("invalid value '0' for '--arrays <N>': expected at least 1")
    );
    assert!(err(&["--arrays", "-2"]).contains("non-negative integer"));
    assert!(err(&["--arrays"]).contains("a value is required for '--arrays <N>'"));
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
    assert!(
        err(&["--camera-threads=1", "--arrays", "2"])
            .contains("unexpected value '1' for '--camera-threads'")
    );
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
    assert!(err(&["--resume=yes"]).contains("unexpected value 'yes' for '--resume'"));
}

#[test]
fn chunk_order_flag() {
    assert_eq!(run(&[]).chunk_order, ChunkOrder::C);
    assert_eq!(
        run(&["--chunk-order", "morton"]).chunk_order,
        ChunkOrder::Morton
    );
    assert_eq!(run(&["--chunk-order=c"]).chunk_order, ChunkOrder::C);
    assert!(
        err(&["--chunk-order", "z"])
            .contains("invalid value 'z' for '--chunk-order <O>': expected c or morton")
    );
    assert!(err(&["--chunk-order"]).contains("a value is required for '--chunk-order <O>'"));
}
