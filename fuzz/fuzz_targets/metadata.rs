#![no_main]
//! See `zarrstream_fuzz::metadata`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zarrstream_fuzz::metadata(data));
