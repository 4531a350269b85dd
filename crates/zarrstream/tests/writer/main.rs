//! The writer's tests, one module per topic: what it stores (round trips, resume, indexed
//! writes, chunk order, attributes, per-frame metadata, codecs against the reference C
//! libraries, saved fuzz inputs, memory, a long run with a data mover) and how it fails
//! (bad input, a full disk, a hostile environment, power loss, kills in its crash windows).
//! One binary: cargo links each test binary on its own, and these share the round-trip
//! model (`common`) and the file-system children (`support_fs`).
//!
//! What is process-wide stays out of this process: every scenario that mounts a file
//! system, lowers a resource limit, changes a signal's disposition, configures a fail point
//! or mounts the power-loss FUSE file system runs in a child, this binary re-executed with
//! `--exact <module>::<entry test>` (`support_fs`, `crash_windows`). `recording` counts the
//! process's worker threads and stays a binary of its own (`tests/recording.rs`).

mod common;
mod support_fs;

mod attributes;
mod bad_input;
mod chunk_order;
mod codec_properties;
mod codec_reference;
mod crash_windows;
mod durability;
mod frame_meta;
mod full_disk;
mod fuzz_regressions;
mod hostile;
mod indexed;
mod long_run;
mod memory;
mod power_loss;
mod resume;
mod roundtrip;
