//! The writer behind the opaque `zs_writer` handle.

use zarrstream::Writer;

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
