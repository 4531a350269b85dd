#![no_main]
//! See `zarrstream_fuzz::blosc_decode`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| zarrstream_fuzz::blosc_decode(data));
