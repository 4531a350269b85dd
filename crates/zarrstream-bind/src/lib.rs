//! # zarrstream binding core
//!
//! What the C API (`zarrstream-capi`) and the Python module (`zarrstream-python`) have
//! in common, written once: the [`Session`] handle (a writer or a recording) with its
//! one poison policy, the frame-size check made before any slice is formed
//! ([`Session::check_len`]), the per-array calls through one path
//! ([`Session::with_array`]), one attribute-target convention ([`Target`]), and the
//! JSON the bindings hand out ([`json`]: statistics and memory estimates).
//!
//! Each binding keeps only its own skin: the C API its pointers, C strings and
//! out-parameters; the Python module its buffers, the interpreter lock and the class
//! glue. Errors carry the library's [`ErrorKind`](zarrstream::ErrorKind), which each
//! binding already maps to its codes or exception classes.
//!
//! ## The poison policy
//!
//! A panic caught inside a call on a session (a bug in the library) marks the session
//! poisoned: its state cannot be trusted, so every later call is refused with
//! [`BindError::Poisoned`] (kind [`Closed`](zarrstream::ErrorKind::Closed)) except
//! abort and free, which drop what is left without using it. The same panic thus leaves
//! a C handle and a Python object in the same state.

#![deny(unsafe_code)]

mod error;
pub mod json;
mod panic;
mod session;

pub use error::BindError;
pub use panic::{INJECT_PANIC_ENV, inject_panic};
pub use session::{Array, ArrayInfo, Session, Target};
