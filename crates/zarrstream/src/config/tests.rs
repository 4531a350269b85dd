use super::*;
use crate::{
    Acquisition, AcquisitionOrder, Backpressure, ChunkOrder, Codec, DataType, Downsample,
    Durability, IndexLocation, Levels, Omero, OmeroChannel, Packing, SinkChoice, SpaceUnit,
    TimeUnit, Window,
};
use std::time::Duration;

const BASE: &str =
    r#""shape": [0, 64, 64], "chunk_shape": [1, 32, 32], "shard_shape": [4, 64, 64]"#;

/// BASE's array with the array keys `array` added, and the other sections `rest`.
fn parse_with(array: &str, rest: &str) -> Result<Parsed, ConfigError> {
    let sep = |s: &str| if s.is_empty() { "" } else { ", " };
    let text = format!(
        "{{\"array\": {{{BASE}{}{array}}}{}{rest}}}",
        sep(array),
        sep(rest)
    );
    Config::parse(&text)?.into_parsed()
}

/// BASE's array and the sections `rest`.
fn parse(rest: &str) -> Result<Parsed, ConfigError> {
    parse_with("", rest)
}

fn err(array: &str) -> String {
    parse_with(array, "").unwrap_err().to_string()
}

#[test]
fn defaults_are_the_rust_apis() {
    let p = parse("").unwrap();
    let want = ArraySpec::builder()
        .shape([0, 64, 64])
        .chunk_shape([1, 32, 32])
        .shard_shape([4, 64, 64])
        .build()
        .unwrap();
    assert_eq!(p.spec, want);
    assert_eq!(p.options, WriterOptions::default());
    assert!(p.ome.is_none());
}

#[test]
fn acquisition_orders_by_number_or_name() {
    let base = r#""array": {"shape": [4, 2, 3, 64, 64], "chunk_shape": [1, 1, 1, 32, 32],
            "shard_shape": [1, 1, 1, 64, 64], "dimension_names": ["t", "c", "z", "y", "x"]}"#;
    let parse = |extra: &str| Config::parse(&format!("{{{base}, {extra}}}"))?.into_parsed();
    let p =
        parse(r#""writer": {"acquisition_order": ["c", "t", 2], "max_open_shards": 7}"#).unwrap();
    assert_eq!(
        p.options.acquisition_order,
        Some(AcquisitionOrder::new([1, 0, 2]))
    );
    assert_eq!(p.options.max_open_shards, 7);
    let e = parse(r#""writer": {"acquisition_order": ["c", "q", "z"]}"#).unwrap_err();
    assert!(e.to_string().contains("\"q\" is not one of"), "{e}");
    assert!(e.to_string().contains("writer.acquisition_order"), "{e}");
}

#[test]
fn every_key_reaches_the_library() {
    let p = parse_with(
        r#""dtype": "float32", "fill_value": "NaN", "dimension_names": ["t", "y", "x"],
               "codec": "zstd:3", "crc32c": false, "index_location": "start",
               "attributes": {"instrument": "scope 1"}"#,
        r#""writer": {"threads": 3, "pin_threads": false, "background_nice": 0,
               "sink": "mmap", "pool_frames": 9, "spare_groups": 2, "backpressure": "drop",
               "durability": {"periodic": {"interval_ms": 250}}, "packing": "sparse",
               "chunk_order": "morton", "overwrite": true}"#,
    )
    .unwrap();
    let s = &p.spec;
    assert_eq!(s.dtype(), DataType::Float32);
    assert!(s.fill_value().is_nan());
    assert_eq!(s.dimension_names().unwrap(), ["t", "y", "x"]);
    assert_eq!(s.codec(), Codec::zstd(3));
    assert!(!s.crc32c());
    assert_eq!(s.index_location(), IndexLocation::Start);
    let o = p.options;
    let want = WriterOptions::default()
        .threads(3)
        .pin_threads(false)
        .background_nice(0)
        .sink(SinkChoice::Mmap)
        .pool_frames(9)
        .spare_groups(2)
        .backpressure(Backpressure::Drop)
        .durability(Durability::Periodic {
            interval: Duration::from_millis(250),
        })
        .packing(Packing::Sparse)
        .chunk_order(ChunkOrder::Morton)
        .overwrite(true);
    assert_eq!(o, want);
    assert_eq!(
        parse(r#""writer": {"durability": "none"}"#)
            .unwrap()
            .options
            .durability,
        Durability::None
    );
    assert_eq!(
        parse_with(r#""fill_value": 7"#, "")
            .unwrap()
            .spec
            .fill_value(),
        7.0
    );
    assert_eq!(
        parse_with(r#""dtype": "u8""#, "").unwrap().spec.dtype(),
        DataType::UInt8
    );
    assert_eq!(
        parse_with(r#""codec": "none""#, "").unwrap().spec.codec(),
        Codec::none()
    );
    assert_eq!(
        parse(r#""writer": {"sink": "direct"}"#)
            .unwrap()
            .options
            .sink,
        SinkChoice::Direct
    );
}

#[test]
fn remote_keys_make_the_same_options_as_the_builder() {
    let p = parse(
        r#""remote": {"staging_dir": "/scratch/staging", "staging_budget": 4294967296,
               "part_size": 16777216, "uploads_in_flight": 8, "upload_timeout_ms": 2500,
               "part": 1, "coordinate": true,
               "store_options": {"aws_endpoint": "http://127.0.0.1:3900",
                                 "aws_region": "garage"}}"#,
    )
    .unwrap();
    let want = RemoteOptions::default()
        .staging_dir("/scratch/staging")
        .staging_budget(4 << 30)
        .part_size(16 << 20)
        .uploads_in_flight(8)
        .upload_timeout(Duration::from_millis(2500))
        .part(1)
        .coordinate(true)
        .store_option("aws_endpoint", "http://127.0.0.1:3900")
        .store_option("aws_region", "garage");
    assert_eq!(p.options.remote, want);
    assert_eq!(p.options, WriterOptions::default().remote(want));
    // A recording takes them in its own `remote`, shared by every array.
    let c = RecordingConfig::parse(
        r#"{"remote": {"staging_budget": 1024, "store_options": {"aws_region": "eu"}},
                "arrays": [{"key": "a", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                            "shard_shape": [2, 8, 8]}}]}"#,
    )
    .unwrap();
    let want = RemoteOptions::default()
        .staging_budget(1024)
        .store_option("aws_region", "eu");
    assert_eq!(c.options.remote, want);
    let e = RecordingConfig::parse(
        r#"{"arrays": [{"key": "a", "part_size": 5242880, "shape": [0, 8, 8]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("\"part_size\" is a recording option"), "{e}");
    let e =
        RecordingConfig::parse(r#"{"arrays": [{"key": "a", "remote": {"part_size": 5242880}}]}"#)
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("arrays[0]") && e.contains("unknown field `remote`"),
        "{e}"
    );
}

#[test]
fn ome_keys_make_the_same_ome_as_the_builder() {
    let p = Config::parse(
        r#"{"array": {"shape": [0, 2, 64, 64], "chunk_shape": [1, 1, 32, 32],
                "shard_shape": [4, 1, 64, 64]},
                "ome": {"name": "run", "pixel_size": [0.5, 0.25], "frame_interval_ms": 20,
                        "space_unit": "nanometer", "time_unit": "second",
                        "channels": ["GFP", "RFP"], "omero": "auto"}}"#,
    )
    .unwrap()
    .into_parsed()
    .unwrap();
    let want = Ome::new()
        .name("run")
        .pixel_size(0.5, 0.25)
        .frame_interval(Duration::from_millis(20))
        .space_unit(SpaceUnit::Nanometer)
        .time_unit(TimeUnit::Second)
        .channels(["GFP", "RFP"])
        .omero(Omero::Auto);
    assert_eq!(p.ome.unwrap(), want);
    let pyramid = Config::parse(
        r#"{"ome": {"levels": 3, "downsample": "max", "downsample_z": true,
                        "level_lz4_acceleration": 9}}"#,
    )
    .unwrap();
    let want = Ome::new()
        .levels(Levels::Count(3))
        .downsample(Downsample::Max)
        .downsample_z(true)
        .level_lz4_acceleration(9);
    assert_eq!(pyramid.ome.unwrap(), want);
    let auto = Config::parse(r#"{"ome": {"levels": "auto"}}"#).unwrap();
    let want = Ome::new().levels(Levels::Auto);
    assert_eq!(auto.ome.unwrap(), want);
    let o = Config::parse(
        r##"{"ome": {"z_step": 2, "omero": {"channels": [{"label": "a", "color": "FF0000",
                 "window": {"min": 0, "max": 10, "start": 1, "end": 9}, "active": true}]}}}"##,
    )
    .unwrap();
    let ome = o.ome.unwrap();
    let want = Ome::new()
        .z_step(2.0)
        .omero(Omero::Channels(vec![OmeroChannel::new(
            "a",
            "FF0000",
            Window {
                min: 0.0,
                max: 10.0,
                start: 1.0,
                end: 9.0,
            },
        )]));
    assert_eq!(ome, want);
    // A channel without a window, and a window for every channel of `auto`.
    let o = Config::parse(
        r##"{"ome": {"omero": {"channels": [{"label": "a", "color": "FF0000",
                 "active": false}]}}}"##,
    )
    .unwrap();
    let want = Ome::new().omero(Omero::Channels(vec![
        OmeroChannel::from_data("a", "FF0000").active(false),
    ]));
    assert_eq!(o.ome.unwrap(), want);
    let o = Config::parse(
        r#"{"ome": {"omero": {"window": {"min": 0, "max": 255, "start": 3, "end": 99}}}}"#,
    )
    .unwrap();
    let w = Window {
        min: 0.0,
        max: 255.0,
        start: 3.0,
        end: 99.0,
    };
    let want = Ome::new().omero(Omero::AutoWindow(w));
    assert_eq!(o.ome.unwrap(), want);
}

/// BASE's array with the keys of `extra` (a JSON object's inside) added to (or
/// replacing those of) `section`.
fn with(section: &str, extra: &str) -> String {
    let base: Map<String, Value> = serde_json::from_str(&format!("{{{BASE}}}")).unwrap();
    let mut top = Map::new();
    top.insert("array".into(), Value::Object(base));
    let extra: Map<String, Value> = serde_json::from_str(&format!("{{{extra}}}")).unwrap();
    if let Value::Object(m) = top
        .entry(section)
        .or_insert_with(|| Value::Object(Map::new()))
    {
        m.extend(extra);
    }
    Value::Object(top).to_string()
}

#[test]
fn bad_configs_name_the_problem() {
    let cases = [
        // unknown keys, also inside nested objects, named with their section
        (
            "array",
            r#""shapes": [1]"#,
            "array.shapes: unknown field `shapes`",
        ),
        (
            "ome",
            r#""pixelsize": [1, 1]"#,
            "ome.pixelsize: unknown field `pixelsize`",
        ),
        (
            "writer",
            r#""durability": {"periodic": {"interval": 5}}"#,
            "writer.durability.periodic.interval: unknown field `interval`",
        ),
        // a key in the wrong section
        (
            "array",
            r#""threads": 2"#,
            "array.threads: unknown field `threads`",
        ),
        (
            "writer",
            r#""codec": "zstd:1""#,
            "writer.codec: unknown field `codec`",
        ),
        (
            "remote",
            r#""sink": "mmap""#,
            "remote.sink: unknown field `sink`",
        ),
        (
            "writer",
            r#""part": 1"#,
            "writer.part: unknown field `part`",
        ),
        (
            "writer",
            r#""frame_meta": {}"#,
            "writer.frame_meta: unknown field `frame_meta`",
        ),
        (
            "writer",
            r#""remote": {}"#,
            "writer.remote: unknown field `remote`",
        ),
        (
            "remote",
            r#""upload_timeout": 5"#,
            "remote.upload_timeout: unknown field `upload_timeout`",
        ),
        // types and names
        (
            "writer",
            r#""threads": -1"#,
            "writer.threads: invalid value: integer `-1`",
        ),
        (
            "array",
            r#""crc32c": "yes""#,
            "array.crc32c: invalid type: string \"yes\", expected a boolean",
        ),
        (
            "writer",
            r#""sink": "disk""#,
            "writer.sink: \"disk\" is not a sink (auto, mmap, pwrite, direct)",
        ),
        (
            "array",
            r#""dtype": "complex64""#,
            "array.dtype: \"complex64\" is not a data type",
        ),
        (
            "array",
            r#""codec": "gzip""#,
            "array.codec: \"gzip\" is not a codec",
        ),
        (
            "writer",
            r#""chunk_order": "hilbert""#,
            "writer.chunk_order: \"hilbert\" is not a chunk order (c, morton)",
        ),
        (
            "writer",
            r#""backpressure": "wait""#,
            "unknown variant `wait`",
        ),
        (
            "writer",
            r#""durability": "periodic""#,
            "writer.durability.periodic: invalid type: unit variant, expected struct variant",
        ),
        (
            "array",
            r#""fill_value": true"#,
            "array.fill_value: true is not a number",
        ),
        (
            "array",
            r#""dtype": "uint64", "fill_value": 9007199254740993"#,
            "array.fill_value: fill value 9007199254740993 is not exactly representable",
        ),
        (
            "writer",
            r#""durability": {"periodic": {"interval_ms": 0}}"#,
            "writer.durability.periodic.interval_ms: 0 is not a positive number",
        ),
        (
            "remote",
            r#""upload_timeout_ms": -1"#,
            "remote.upload_timeout_ms: -1 is not a number of milliseconds ≥ 0",
        ),
        (
            "remote",
            r#""store_options": {"aws_region": 5}"#,
            "invalid type: integer `5`, expected a string",
        ),
        (
            "remote",
            r#""store_options": ["aws_region", "eu"]"#,
            "invalid type: sequence, expected a map",
        ),
        ("remote", r#""staging_dir": 1"#, "invalid type: integer `1`"),
        ("remote", r#""part": -1"#, "invalid value: integer `-1`"),
        ("remote", r#""coordinate": 1"#, "expected a boolean"),
        (
            "remote",
            r#""stage_dir": "/x""#,
            "unknown field `stage_dir`",
        ),
        (
            "ome",
            r#""frame_interval_ms": -5"#,
            "frame_interval = -5 must be a positive",
        ),
        (
            "ome",
            r#""levels": "many""#,
            "ome.levels: \"many\" is not a level count or \"auto\"",
        ),
        (
            "ome",
            r#""downsample": "median""#,
            "ome.downsample: unknown downsampling method \"median\"",
        ),
        // the builder's own checks
        (
            "array",
            r#""shard_shape": [4, 64, 48]"#,
            "does not divide shard",
        ),
        (
            "array",
            r#""shape": [0, 0, 64]"#,
            "only axis 0 (the append axis) may be 0",
        ),
        (
            "array",
            r#""codec": "zstd:99""#,
            "zstd level 99 is out of range",
        ),
        (
            "array",
            r#""fill_value": -1"#,
            "fill value -1 is not representable as uint16",
        ),
    ];
    for (section, extra, want) in cases {
        let text = with(section, extra);
        let got = Config::parse(&text)
            .and_then(Config::into_parsed)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            got.contains(want),
            "{text}\n  got: {got}\n  want: ...{want}..."
        );
    }
    let syntax = Config::parse(r#"{"array": {"shape": }}"#)
        .unwrap_err()
        .to_string();
    assert!(
        syntax.starts_with("config_json: expected value at line 1"),
        "{syntax}"
    );
    assert!(err(r#""shape": [0, 64, 64]"#).contains("duplicate field `shape`"));
    let top = Config::parse(r#"{"array": {}, "writers": {}}"#).unwrap_err();
    assert!(top.to_string().contains("unknown field `writers`"), "{top}");
    let missing = Config::parse("{}").unwrap().into_parsed().unwrap_err();
    assert_eq!(
        missing.to_string(),
        "invalid array specification: shape was not set"
    );
    let not_object = Config::parse("[[0, 64, 64], [1, 32, 32], [4, 64, 64]]");
    assert_eq!(
        not_object.unwrap_err().to_string(),
        "config_json: (top level): not a JSON object"
    );
    let empty = Config::parse("").unwrap_err().to_string();
    assert!(empty.contains("EOF while parsing"), "{empty}");
}

/// The flat form of 0.1, key for key the sectioned one.
#[test]
fn the_flat_form_parses_to_the_sectioned_result_and_warns() {
    let flat = r#"{"shape": [0, 64, 64], "chunk_shape": [1, 32, 32],
            "shard_shape": [4, 64, 64], "dtype": "uint8", "dimension_names": ["t", "y", "x"],
            "attributes": {"a": 1}, "threads": 3, "sink": "pwrite",
            "durability": {"periodic": {"interval_ms": 250}}, "acquisition_order": ["t"],
            "staging_budget": 1024, "upload_timeout": 2.5, "store_options": {"k": "v"},
            "ome": {"frame_interval_ms": 20}, "frame_meta": {"fields": {"x": "int64"}}}"#;
    let sectioned = r#"{"array": {"shape": [0, 64, 64], "chunk_shape": [1, 32, 32],
            "shard_shape": [4, 64, 64], "dtype": "uint8", "dimension_names": ["t", "y", "x"],
            "attributes": {"a": 1}},
            "writer": {"threads": 3, "sink": "pwrite",
              "durability": {"periodic": {"interval_ms": 250}}, "acquisition_order": ["t"]},
            "remote": {"staging_budget": 1024, "upload_timeout_ms": 2500,
              "store_options": {"k": "v"}},
            "ome": {"frame_interval_ms": 20}, "frame_meta": {"fields": {"x": "int64"}}}"#;
    let f = Config::parse(flat).unwrap().into_parsed().unwrap();
    let s = Config::parse(sectioned).unwrap().into_parsed().unwrap();
    assert_eq!(f.spec, s.spec);
    assert_eq!(f.options, s.options);
    assert_eq!(f.ome, s.ome);
    assert_eq!(f.options.remote.upload_timeout, Duration::from_millis(2500));
    assert_eq!(f.deprecated.as_deref(), Some(FLAT_DEPRECATED));
    assert!(s.deprecated.is_none());
    // The old error messages still name the key.
    let e = Config::parse(r#"{"sink": "disk"}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("writer.sink: \"disk\" is not a sink"), "{e}");
    let e = Config::parse(r#"{"shapes": [1]}"#).unwrap_err().to_string();
    assert!(e.contains("unknown field `shapes`"), "{e}");
    let e = Config::parse(r#"{"upload_timeout": -1}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("remote.upload_timeout_ms: -1000 is not"), "{e}");

    let rec_flat = r#"{"threads": 2, "part_size": 5242880, "frame_meta": {"fields": {"t": "float64"}},
            "attributes": {"p": 1},
            "arrays": [{"key": "a", "shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                        "shard_shape": [2, 8, 8], "ome": {"levels": 1}}]}"#;
    let rec_sectioned = r#"{"writer": {"threads": 2}, "remote": {"part_size": 5242880},
            "frame_meta": {"fields": {"t": "float64"}}, "attributes": {"p": 1},
            "arrays": [{"key": "a", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
                        "shard_shape": [2, 8, 8]}, "ome": {"levels": 1}}]}"#;
    let f = RecordingConfig::parse(rec_flat).unwrap();
    let s = RecordingConfig::parse(rec_sectioned).unwrap();
    assert_eq!(f.options, s.options);
    assert_eq!(f.attributes, s.attributes);
    assert_eq!(f.arrays.len(), 1);
    assert_eq!(f.arrays[0].spec, s.arrays[0].spec);
    assert_eq!(f.arrays[0].ome, s.arrays[0].ome);
    assert_eq!(f.arrays[0].frame_meta, s.arrays[0].frame_meta);
    assert_eq!(f.deprecated.as_deref(), Some(FLAT_DEPRECATED));
    assert!(s.deprecated.is_none());
}

/// `docs/config.schema.json` is generated from the types; this holds the file to
/// them too: every object of the schema has exactly the keys its type deserializes,
/// and refuses others.
#[test]
fn the_schema_matches_the_types() {
    let schema: Value =
        serde_json::from_str(include_str!("../../../../docs/config.schema.json")).unwrap();
    let types: [(&str, &[&str]); 10] = [
        ("writer_config", fields_of::<Config>()),
        ("recording_config", fields_of::<RecordingKeys>()),
        ("recording_array", fields_of::<ArrayKeys>()),
        ("plate_image", fields_of::<ImageKeys>()),
        ("array", fields_of::<ArraySpecBuilder>()),
        ("writer", fields_of::<WriterOptions>()),
        ("remote", fields_of::<RemoteOptions>()),
        ("ome", fields_of::<Ome>()),
        ("frame_meta", fields_of::<FrameMetaSpec>()),
        ("plate", fields_of::<Plate>()),
    ];
    for (name, fields) in types {
        let def = &schema["$defs"][name];
        let mut in_schema: Vec<&str> = def["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("$defs.{name} has no properties"))
            .keys()
            .map(String::as_str)
            .collect();
        let mut in_type = fields.to_vec();
        in_schema.sort_unstable();
        in_type.sort_unstable();
        assert_eq!(
            in_schema, in_type,
            "docs/config.schema.json $defs.{name} differs from its Rust type: edit the \
                 schema to the type's fields"
        );
        assert_eq!(def["additionalProperties"], false, "$defs.{name}");
    }
}

/// The committed `docs/config.schema.json` is what the types generate now.
#[test]
fn the_committed_schema_is_generated_from_the_types() {
    let committed = include_str!("../../../../docs/config.schema.json");
    assert!(
        committed == schema_text(),
        "docs/config.schema.json differs from the schema the Rust types generate: \
             regenerate it with\n  cargo run -p zarrstream --example config_schema > \
             docs/config.schema.json"
    );
}

/// The book's examples (`json` blocks of the configuration chapter) are accepted as
/// they are, in the sectioned form.
#[test]
fn the_books_examples_parse() {
    let book = include_str!("../../../../docs/book/src/reference/config.md");
    let blocks: Vec<&str> = book
        .split("```json")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 3, "the chapter shows its examples");
    for block in blocks {
        let top: Map<String, Value> = serde_json::from_str(block).unwrap();
        let deprecated = if top.contains_key("array") {
            let parsed = Config::parse(block).and_then(Config::into_parsed);
            parsed.unwrap_or_else(|e| panic!("{block}: {e}")).deprecated
        } else {
            let parsed = RecordingConfig::parse(block);
            parsed.unwrap_or_else(|e| panic!("{block}: {e}")).deprecated
        };
        assert!(deprecated.is_none(), "{block}");
    }
}

/// Each section's keys come from its type: the shim's split cannot miss a field.
#[test]
fn the_sections_field_lists_come_from_the_types() {
    let writer = fields_of::<WriterOptions>();
    assert!(writer.contains(&"spare_groups") && writer.contains(&"acquisition_order"));
    assert!(!writer.contains(&"remote") && !writer.contains(&"staging"));
    assert!(fields_of::<RemoteOptions>().contains(&"upload_timeout_ms"));
    assert!(fields_of::<ArraySpecBuilder>().contains(&"chunk_shape"));
}

#[test]
fn a_recording_config_puts_each_key_in_its_place() {
    let arrays = r#""arrays": [
            {"key": "cam0", "array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
             "shard_shape": [2, 8, 8], "attributes": {"camera": 0}}},
            {"key": "cam1", "array": {"shape": [0, 4, 4], "chunk_shape": [1, 4, 4],
             "shard_shape": [2, 4, 4], "dtype": "uint8"}, "ome": {"levels": 1},
             "frame_meta": {"fields": {"x": "int64"}}}]"#;
    let c = RecordingConfig::parse(&format!(
        r#"{{"writer": {{"threads": 2, "resume": true, "existing_group": true}},
                "frame_meta": {{"fields": {{"t": "float64"}}}},
                "attributes": {{"plate": "P1"}}, {arrays}}}"#
    ))
    .unwrap();
    assert_eq!(c.options.threads, 2);
    assert!(c.options.resume && c.options.existing_group);
    assert_eq!(c.attributes["plate"], "P1");
    let [a, b] = &c.arrays[..] else {
        panic!("two arrays")
    };
    assert_eq!((a.key.as_str(), b.key.as_str()), ("cam0", "cam1"));
    assert_eq!(a.spec.frame_bytes(), 128);
    assert_eq!(a.spec.attributes["camera"], 0);
    assert!(a.ome.is_none() && b.ome.is_some());
    // The top level's frame_meta is the default; an array's own replaces it.
    assert_eq!(a.frame_meta.as_ref().unwrap().fields()[0].0, "t");
    assert_eq!(b.frame_meta.as_ref().unwrap().fields()[0].0, "x");

    let bad = |text: &str| RecordingConfig::parse(text).unwrap_err().to_string();
    assert!(bad(r#"{"writer": {"threads": 2}}"#).contains("arrays"));
    assert!(bad(r#"{"arrays": []}"#).contains("non-empty"));
    let e = bad(r#"{"array": {"shape": [0, 8, 8]}, "arrays": [{"key": "a"}]}"#);
    assert!(e.contains("unknown field `array`"), "{e}");
    // The flat form's misplaced keys are still named with where they go.
    let e = bad(r#"{"shape": [0, 8, 8], "arrays": [{"key": "a"}]}"#);
    assert!(e.contains("shape") && e.contains("each entry"), "{e}");
    let e = bad(
        r#"{"arrays": [{"key": "a", "threads": 2, "shape": [0, 8, 8],
                "chunk_shape": [1, 8, 8], "shard_shape": [2, 8, 8]}]}"#,
    );
    assert!(e.contains("\"threads\" is a recording option"), "{e}");
    let e = bad(r#"{"arrays": [{"key": "a", "writer": {"threads": 2}}]}"#);
    assert!(
        e.contains("arrays[0].writer: unknown field `writer`"),
        "{e}"
    );
    let e = bad(r#"{"arrays": [{"key": "a", "array": {"threads": 2}}]}"#);
    assert!(
        e.contains("arrays[0].array.threads: unknown field `threads`"),
        "{e}"
    );
    let e = bad(r#"{"arrays": [{"array": {"shape": [0, 8, 8]}}]}"#);
    assert!(e.contains("key"), "{e}");
    let e = bad(r#"{"arrays": [{"key": "a", "array": {"shap": [0, 8, 8]}}]}"#);
    assert!(e.contains("shap"), "{e}");
    let e = bad(r#"{"writer": {"thread": 1}, "arrays": [{"key": "a"}]}"#);
    assert!(e.contains("writer.thread: unknown field `thread`"), "{e}");
}

#[test]
fn a_plate_config_makes_the_plate() {
    let image = r#""image": {"array": {"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
            "shard_shape": [2, 8, 8]}, "ome": {"pixel_size": [0.5, 0.5]},
            "frame_meta": {"fields": {"x": "float64"}}}"#;
    let c = RecordingConfig::parse(&format!(
            r#"{{"writer": {{"threads": 2}}, "plate": {{"name": "P", "rows": 2, "columns": ["01", "02", "03"],
                "wells": ["A/01", "B/03"], "fields": 2,
                "acquisitions": [{{"id": 4, "name": "a", "description": "d",
                                   "start_time": 10, "end_time": 20}}]}}, {image}}}"#
        ))
        .unwrap();
    let p = c.plate.as_ref().unwrap();
    let want = Plate::new(["A", "B"], ["01", "02", "03"])
        .name("P")
        .wells([("A", "01"), ("B", "03")])
        .fields(2)
        .acquisitions([Acquisition::new(4)
            .name("a")
            .description("d")
            .start_time(10)
            .end_time(20)]);
    assert_eq!(p.plate, want);
    assert_eq!(p.ome, Ome::new().pixel_size(0.5, 0.5));
    assert_eq!(p.spec.frame_bytes(), 128);
    assert!(c.arrays.is_empty());
    assert_eq!(c.options.frame_meta.as_ref().unwrap().fields()[0].0, "x");

    let bad = |text: &str| RecordingConfig::parse(text).unwrap_err();
    let plate_err = |plate: &str| match bad(&format!(r#"{{"plate": {plate}, {image}}}"#)) {
        ConfigError::Plate(e) => e,
        e => panic!("{plate}: {e}"),
    };
    assert!(matches!(
        plate_err(r#"{"rows": 2, "columns": 2, "wells": ["A/1", "C/1"]}"#),
        PlateError::WellOutside { axis: "row", .. }
    ));
    assert_eq!(
        plate_err(r#"{"rows": 1, "columns": 1, "fields": 0}"#),
        PlateError::NoFields
    );
    let e = bad(&format!(
        r#"{{"plate": {{"rows": 1, "columns": 1, "wells": ["A1"]}}, {image}}}"#
    ));
    assert!(e.to_string().contains("\"A1\" is not a well path"), "{e}");
    let e = bad(r#"{"plate": {"rows": 1, "columns": 1}}"#);
    assert!(e.to_string().contains("a plate needs `image`"), "{e}");
    let e = bad(&format!(
        r#"{{"plate": {{"rows": 1, "columns": 1}}, "arrays": [], {image}}}"#
    ));
    assert!(e.to_string().contains("give `image`"), "{e}");
    let e = bad(&format!(r#"{{{image}}}"#));
    assert!(e.to_string().contains("give `plate` too"), "{e}");
    let e = bad(&format!(
        r#"{{"plate": {{"rows": 1, "columns": 1, "field": 2}}, {image}}}"#
    ));
    assert!(
        e.to_string().contains("plate.field: unknown field `field`"),
        "{e}"
    );
    let e = bad(r#"{"plate": {"rows": 1, "columns": 1}, "image": {"array": {}, "key": "x"}}"#);
    assert!(
        e.to_string().contains("image.key: unknown field `key`"),
        "{e}"
    );
}
