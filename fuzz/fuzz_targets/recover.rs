#![no_main]
//! See `zarrstream_fuzz::recover`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zarrstream_fuzz::recover(data));
