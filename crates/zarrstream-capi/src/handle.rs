//! The writer behind the opaque `zs_writer` handle and the recording behind
//! `zs_recording`.

use std::sync::atomic::{AtomicBool, Ordering};

use zarrstream::{Recording, RecordingStats, Writer};

use crate::error::{CapiError, ZsCode};

/// An open writer (opaque): made by `zs_writer_create`, freed by `zs_writer_finish` or
/// `zs_writer_abort`.
pub struct ZsWriter {
    writer: Writer,
    /// Set while a call runs and cleared when it returns normally: still set at the next
    /// call means the previous one panicked, and the writer's state cannot be trusted.
    in_call: bool,
}

// A handle may be created on one thread and used on another (one at a time).
const _: fn() = || {
    fn send<T: Send>() {}
    send::<ZsWriter>();
};

impl ZsWriter {
    /// Wraps a new writer.
    pub fn new(writer: Writer) -> Self {
        ZsWriter {
            writer,
            in_call: false,
        }
    }

    /// Runs `f` on the writer unless an earlier call panicked.
    pub fn call<T>(
        &mut self,
        f: impl FnOnce(&mut Writer) -> Result<T, CapiError>,
    ) -> Result<T, CapiError> {
        if self.in_call {
            return Err(CapiError::Poisoned);
        }
        self.in_call = true;
        crate::error::inject_panic("writer");
        let r = f(&mut self.writer);
        self.in_call = false;
        r
    }

    /// Pushes one frame of raw bytes; `ZS_DROPPED` if back-pressure dropped it.
    pub fn push(writer: &mut Writer, frame: &[u8]) -> Result<ZsCode, CapiError> {
        let outcome = writer.push_bytes(frame, std::time::Instant::now())?;
        Ok(if outcome.is_accepted() {
            ZsCode::ZS_OK
        } else {
            ZsCode::ZS_DROPPED
        })
    }

    /// Pushes one frame with its metadata; `ZS_DROPPED` if back-pressure dropped it.
    pub fn push_with(
        writer: &mut Writer,
        frame: &[u8],
        meta: &zarrstream::FrameMeta,
    ) -> Result<ZsCode, CapiError> {
        let outcome = writer.push_with(frame, std::time::Instant::now(), meta)?;
        Ok(if outcome.is_accepted() {
            ZsCode::ZS_OK
        } else {
            ZsCode::ZS_DROPPED
        })
    }

    /// The error for a frame of `got` bytes, if that is not the frame size. Checked
    /// before the caller's pointer is turned into a slice of `got` bytes, which must not
    /// happen for a length the caller may not own.
    pub fn check_size(writer: &Writer, got: usize) -> Result<(), CapiError> {
        let expected = writer.spec().frame_bytes();
        if got == expected {
            return Ok(());
        }
        Err(zarrstream::Error::FrameSize {
            frame: writer.frames_pushed(),
            expected,
            got,
        }
        .into())
    }

    /// Finishes the writer; the statistics as JSON.
    pub fn finish(self) -> Result<String, CapiError> {
        if self.in_call {
            // Dropping still tries to publish what was accepted.
            drop(self.writer);
            return Err(CapiError::Poisoned);
        }
        let stats = self.writer.finish()?;
        crate::stats::to_json(&stats)
            .map_err(|e| zarrstream::Error::Internal(format!("statistics to JSON: {e}")).into())
    }

    /// Stops the writer, keeping what it wrote (`Writer::abort`); errors are dropped,
    /// as `zs_writer_abort` has no way to return them.
    pub fn abort(self) {
        if self.in_call {
            drop(self.writer);
        } else {
            let _ = self.writer.abort("aborted by the caller (zs_writer_abort)");
        }
    }
}

/// An open recording of several arrays (opaque): made by `zs_recording_create`, freed by
/// `zs_recording_finish` or `zs_recording_abort`.
///
/// Unlike a [`ZsWriter`], it is used through shared references: every call but finish
/// and abort takes `&ZsRecording`, and the [`Recording`] serialises calls on one array
/// with its own per-array lock, so calls on different arrays run in parallel.
pub struct ZsRecording {
    recording: Recording,
    /// Each array's frame size in bytes, checked before the caller's pointer is turned
    /// into a slice (cached: the recording's `spec` clones the whole specification).
    frame_bytes: Vec<usize>,
    /// Set when a call panicked (by [`PanicFlag`] while unwinding): the state of the
    /// recording cannot be trusted, and every later call is refused.
    poisoned: AtomicBool,
}

// Calls on one handle may come from several threads at once (on different arrays).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ZsRecording>();
};

/// Sets the flag it holds if it is dropped while its thread unwinds from a panic.
struct PanicFlag<'a>(&'a AtomicBool);

impl Drop for PanicFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

impl ZsRecording {
    /// Wraps a new recording.
    pub fn new(recording: Recording) -> Result<Self, CapiError> {
        let frame_bytes = (0..recording.keys().count())
            .map(|i| recording.spec(i).map(|s| s.frame_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(ZsRecording {
            recording,
            frame_bytes,
            poisoned: AtomicBool::new(false),
        })
    }

    /// Runs `f` on the recording unless an earlier call panicked; a panic in `f`
    /// poisons the handle (for every thread) before it unwinds further.
    pub fn call<T>(
        &self,
        f: impl FnOnce(&Recording) -> Result<T, CapiError>,
    ) -> Result<T, CapiError> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(CapiError::Poisoned);
        }
        let _flag = PanicFlag(&self.poisoned);
        crate::error::inject_panic("recording");
        f(&self.recording)
    }

    /// The error for a frame of `got` bytes pushed into array `array`, if that is not
    /// its frame size (or there is no such array).
    pub fn check_size(
        recording: &Recording,
        frame_bytes: &[usize],
        array: usize,
        got: usize,
    ) -> Result<(), CapiError> {
        let expected = *frame_bytes
            .get(array)
            .ok_or_else(|| zarrstream::Error::UnknownArray {
                key: array.to_string(),
            })?;
        if got == expected {
            return Ok(());
        }
        Err(zarrstream::Error::FrameSize {
            frame: recording.frames_pushed(array)?,
            expected,
            got,
        }
        .into())
    }

    /// Each array's frame size in bytes, by index.
    pub fn frame_bytes(&self) -> &[usize] {
        &self.frame_bytes
    }

    /// Pushes one frame of raw bytes into array `array` (with its metadata, if any);
    /// `ZS_DROPPED` if back-pressure dropped it.
    pub fn push(
        recording: &Recording,
        array: usize,
        frame: &[u8],
        meta: Option<&zarrstream::FrameMeta>,
    ) -> Result<ZsCode, CapiError> {
        let now = std::time::Instant::now();
        let outcome = match meta {
            Some(meta) => recording.push_with(array, frame, now, meta)?,
            None => recording.push_bytes(array, frame, now)?,
        };
        Ok(if outcome.is_accepted() {
            ZsCode::ZS_OK
        } else {
            ZsCode::ZS_DROPPED
        })
    }

    /// Finishes every array; the statistics as JSON
    /// (`{"arrays": {"<key>": {...}}, "total": {...}}`).
    pub fn finish(self) -> Result<String, CapiError> {
        if self.poisoned.load(Ordering::SeqCst) {
            // Dropping still finishes every array, ignoring errors.
            drop(self.recording);
            return Err(CapiError::Poisoned);
        }
        let stats: RecordingStats = self.recording.finish()?;
        crate::stats::recording_to_json(&stats)
            .map_err(|e| zarrstream::Error::Internal(format!("statistics to JSON: {e}")).into())
    }

    /// Stops every array (`Recording::abort`) with `reason`; errors are dropped, as
    /// `zs_recording_abort` has no way to return them.
    pub fn abort(self, reason: String) {
        if self.poisoned.load(Ordering::SeqCst) {
            drop(self.recording);
        } else {
            let _ = self.recording.abort(reason);
        }
    }
}
