#![no_main]
//! See `zarrstream_fuzz::shard_index`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zarrstream_fuzz::shard_index(data));
