//! # zarrstream C API
//!
//! A small, stable C ABI over [`zarrstream`]: create a writer from a store path and a
//! JSON configuration, push frames as raw bytes, finish (statistics as JSON) or abort.
//! Built as `libzarrstream.so` and `libzarrstream.a`; the header `include/zarrstream.h`
//! is generated from this crate by cbindgen (`capi/cbindgen.toml`) and checked by
//! `capi/tests/header.rs`.
//!
//! Return codes are `ZS_OK` (0), `ZS_DROPPED` (1, a frame dropped by back-pressure) and
//! negative `ZS_E_*` constants, one per kind of error ([`error`]); the message of the
//! last failure on a thread is `zs_last_error()`. Every entry point catches panics.
//!
//! All `unsafe` code is in [`ffi`], the exported functions. What the C API shares with
//! the Python module (the handles' session, the poison policy, the frame-size check, the
//! statistics and estimate JSON) is the binding core, `zarrstream-bind`; this crate keeps
//! only pointers, C strings and out-parameters.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
#[allow(unsafe_code)]
pub mod ffi;
pub mod handle;
mod path;
