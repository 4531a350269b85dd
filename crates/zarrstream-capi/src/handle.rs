//! The opaque `zs_writer` and `zs_recording` handles: each a [`Session`] of the binding
//! core (`zarrstream-bind`), which holds the writer or recording, the poison policy and
//! the frame-size check. Two types only so that C sees two distinct handle types.

use zarrstream_bind::Session;

/// An open writer (opaque): made by `zs_writer_create`, freed by `zs_writer_finish` or
/// `zs_writer_abort`.
pub struct ZsWriter(pub(crate) Session);

/// An open recording of several arrays (opaque): made by `zs_recording_create`, freed by
/// `zs_recording_finish` or `zs_recording_abort`. Every call but finish and abort
/// takes it by shared reference: the session serialises calls on one array with the
/// array's own lock, so calls on different arrays run in parallel.
pub struct ZsRecording(pub(crate) Session);
