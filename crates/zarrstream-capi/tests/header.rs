//! `include/zarrstream.h` must be what cbindgen generates from this crate now: a stale
//! header would declare functions or constants the library does not have.

// Driven from Linux (the Windows build is exercised by windows*.rs); the Windows build of
// this package leaves it out.
#![cfg(target_os = "linux")]

use std::path::Path;

const UPDATE: &str = "ZARRSTREAM_UPDATE_HEADER";

#[test]
fn header_is_current() {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = krate.join("../../include/zarrstream.h");
    let config =
        cbindgen::Config::from_file(krate.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(krate)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");

    if std::env::var_os(UPDATE).is_some_and(|v| v == "1") {
        std::fs::write(&header, &generated).expect("write include/zarrstream.h");
        eprintln!("wrote {}", header.display());
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || committed.lines().count().min(generated.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "include/zarrstream.h is stale (first difference at line {line}).\n\
             Regenerate it with\n    {UPDATE}=1 cargo test -p zarrstream-capi --test header\n\
             and commit it.\n--- committed line ---\n{}\n--- generated line ---\n{}",
            committed.lines().nth(line - 1).unwrap_or("(end of file)"),
            generated.lines().nth(line - 1).unwrap_or("(end of file)"),
        );
    }
    // What the C side relies on.
    for needed in [
        "#ifndef ZARRSTREAM_H",
        "typedef struct zs_writer zs_writer;",
        "typedef struct zs_recording zs_recording;",
        "ZS_E_UNSUPPORTED = -14,",
        "ZS_E_INVALID_PLATE = -15,",
        "int zs_recording_create(",
        "ZS_E_INTERNAL = -6,",
        "int zs_writer_create(",
        "const char *zs_last_error(void);",
        "extern \"C\"",
    ] {
        assert!(generated.contains(needed), "the header lacks {needed:?}");
    }
}
