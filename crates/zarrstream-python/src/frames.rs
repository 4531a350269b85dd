//! Frames from a Python buffer (a numpy array, `bytes`, a `memoryview`, …) into a
//! writer, with the interpreter lock released.
//!
//! A C-contiguous buffer is pushed where it lies: the writer's one copy (into its frame
//! pool) is the only one. Any other layout is gathered row by row straight into a pool
//! buffer ([`Writer::buffer`]), so it too is copied once. The writer is a writer's own
//! or a recording's array, lent by the binding core's `Session::with_array`: a
//! recording's arrays get the pool buffers too.

use std::time::Instant;

use pyo3::buffer::PyUntypedBuffer;
use zarrstream::{PushOutcome, Writer};

use crate::errors::Failure;
use zarrstream::ErrorKind;

/// Pushes frame `f` of a strided buffer, gathered straight into a pool buffer (one
/// copy, as for contiguous frames); `None` when it was dropped (and counted as skipped)
/// for want of a free buffer.
fn push_gathered(
    w: &mut Writer,
    frames: &Frames,
    f: usize,
) -> zarrstream::Result<Option<PushOutcome>> {
    let scheduled = Instant::now();
    let frame_bytes = w.spec().frame_bytes();
    let Some(mut dest) = w.buffer()? else {
        w.skip()?;
        return Ok(None);
    };
    frames.gather(f, &mut dest[..frame_bytes]);
    w.push_buffer(dest, scheduled).map(Some)
}

/// Writes the one frame of a strided buffer at `index`, gathered straight into a pool
/// buffer; with no free buffer (`Backpressure::Drop`) the frame is dropped as
/// `write_frame` would drop it: its place skipped.
fn write_gathered_at(
    w: &mut Writer,
    frames: &Frames,
    index: &[u64],
) -> zarrstream::Result<PushOutcome> {
    let scheduled = Instant::now();
    let frame_bytes = w.spec().frame_bytes();
    let Some(mut dest) = w.buffer()? else {
        w.skip_frame(index)?;
        return Ok(PushOutcome::Dropped);
    };
    frames.gather(0, &mut dest[..frame_bytes]);
    w.write_frame_buffer(index, dest, scheduled)
}

/// Frames accepted and dropped by one call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pushed {
    pub(crate) accepted: u64,
    pub(crate) dropped: u64,
}

impl Pushed {
    /// Counts one frame's outcome.
    pub(crate) fn count(&mut self, outcome: PushOutcome) {
        if outcome.is_accepted() {
            self.accepted += 1;
        } else {
            self.dropped += 1;
        }
    }
}

/// The frames held by `buf`, checked against the writer's frame size and element size
/// while the interpreter lock is still held (the checks only read the buffer's header).
pub(crate) struct Frames {
    buf: PyUntypedBuffer,
    frames: usize,
}

impl Frames {
    /// Checks that `buf` holds whole frames of `frame_bytes` bytes, of `item_size`-byte
    /// elements; a layout that is not C-contiguous must end in the frame's two axes.
    pub(crate) fn new(
        buf: PyUntypedBuffer,
        frame_bytes: usize,
        frame_shape: [usize; 2],
        item_size: usize,
    ) -> Result<Frames, Failure> {
        let len = buf.len_bytes();
        if buf.item_size() != item_size {
            return Err(Failure::new(
                ErrorKind::InvalidFrame,
                format!(
                    "elements of {} bytes do not match the array's {item_size}-byte data type",
                    buf.item_size()
                ),
            ));
        }
        if len == 0 || !len.is_multiple_of(frame_bytes) {
            return Err(Failure::new(
                ErrorKind::InvalidFrame,
                format!("{len} bytes are not a whole number of {frame_bytes}-byte frames"),
            ));
        }
        if !buf.is_c_contiguous() {
            // `gather` walks the last two axes by their strides: they must be the frame's,
            // and the buffer must be strided (no PIL-style indirection).
            let shape = buf.shape();
            let ok = shape.len() >= 2
                && shape[shape.len() - 2..] == frame_shape
                && buf.suboffsets().is_none();
            if !ok {
                return Err(Failure::new(
                    ErrorKind::InvalidFrame,
                    format!(
                        "a non-contiguous buffer of shape {shape:?} does not end in the frame's \
                         shape {frame_shape:?} (or is indirect)"
                    ),
                ));
            }
        }
        Ok(Frames {
            frames: len / frame_bytes,
            buf,
        })
    }

    /// The buffer's bytes, if it is C-contiguous.
    fn contiguous(&self) -> Option<&[u8]> {
        if !self.buf.is_c_contiguous() {
            return None;
        }
        // SAFETY: the buffer is C-contiguous, so its `len_bytes()` bytes start at
        // `buf_ptr()`; the exporter keeps that memory alive and in place until the
        // `PyUntypedBuffer` is released, which happens after this borrow ends (`self`
        // owns it). Not covered by this reasoning: another Python thread writing into
        // the same array while the lock is released would race with this read (as with
        // any extension that reads a buffer without the lock, numpy's own included);
        // the documented contract is that a frame is not modified while it is appended.
        Some(unsafe {
            std::slice::from_raw_parts(self.buf.buf_ptr().cast::<u8>(), self.buf.len_bytes())
        })
    }

    /// How many frames the buffer holds.
    pub(crate) fn len(&self) -> usize {
        self.frames
    }

    /// Pushes frame `f` (call with the interpreter lock released). A caller pushing a
    /// stack takes the array's lock per frame, not for the whole stack, so the array's
    /// counters stay readable from other threads meanwhile.
    pub(crate) fn push_one(&self, target: &mut Writer, f: usize) -> Result<PushOutcome, Failure> {
        let Some(bytes) = self.contiguous() else {
            // No free buffer under `Backpressure::Drop`: the frame was skipped, its place
            // kept, exactly as a push would have dropped it.
            return Ok(push_gathered(target, self, f)?.unwrap_or(PushOutcome::Dropped));
        };
        let frame_bytes = target.spec().frame_bytes();
        let frame = f
            .checked_mul(frame_bytes)
            .and_then(|start| bytes.get(start..start.checked_add(frame_bytes)?))
            .ok_or_else(|| {
                Failure::new(
                    ErrorKind::InvalidFrame,
                    format!("no frame {f} in a buffer of {} frames", self.frames),
                )
            })?;
        Ok(target.push_bytes(frame, Instant::now())?)
    }

    /// Pushes the one frame of this buffer with `meta` (call with the interpreter lock
    /// released); a strided frame is gathered into a contiguous copy first.
    pub(crate) fn push_with(
        &self,
        target: &mut Writer,
        meta: &zarrstream::FrameMeta,
    ) -> Result<Pushed, Failure> {
        if self.frames != 1 {
            return Err(Failure::new(
                ErrorKind::InvalidFrame,
                format!(
                    "metadata goes with one frame, not a stack of {}",
                    self.frames
                ),
            ));
        }
        let mut pushed = Pushed::default();
        let outcome = if let Some(bytes) = self.contiguous() {
            target.push_with(bytes, Instant::now(), meta)?
        } else {
            let mut copy = vec![0u8; target.spec().frame_bytes()];
            self.gather(0, &mut copy);
            target.push_with(&copy, Instant::now(), meta)?
        };
        pushed.count(outcome);
        Ok(pushed)
    }

    /// Writes the one frame of this buffer at `index`, its leading coordinates (call
    /// with the interpreter lock released); a strided frame is gathered once.
    pub(crate) fn write_at(
        &self,
        target: &mut Writer,
        index: &[u64],
    ) -> Result<PushOutcome, Failure> {
        if self.frames != 1 {
            return Err(Failure::new(
                ErrorKind::InvalidFrame,
                format!(
                    "write_frame takes one frame, not a stack of {}",
                    self.frames
                ),
            ));
        }
        let outcome = match self.contiguous() {
            Some(bytes) => target.write_frame_bytes(index, bytes, Instant::now())?,
            None => write_gathered_at(target, self, index)?,
        };
        Ok(outcome)
    }

    /// Copies frame `f` of a strided buffer into `dest`, row by row.
    pub(crate) fn gather(&self, f: usize, dest: &mut [u8]) {
        let shape = self.buf.shape();
        let strides = self.buf.strides();
        let item = self.buf.item_size();
        let n = shape.len();
        let (h, w) = (shape[n - 2], shape[n - 1]);
        // The frame's index over the leading axes, C order.
        let mut base = 0isize;
        let mut rest = f;
        for axis in (0..n - 2).rev() {
            base += (rest % shape[axis]) as isize * strides[axis];
            rest /= shape[axis];
        }
        let (row_stride, col_stride) = (strides[n - 2], strides[n - 1]);
        let start = self.buf.buf_ptr().cast::<u8>();
        for (y, row) in dest.chunks_exact_mut(w * item).take(h).enumerate() {
            let row_start = base + y as isize * row_stride;
            if col_stride == item as isize {
                // SAFETY: `row_start` addresses element (…, y, 0) of frame `f` and the
                // row's `w` elements are contiguous (stride = item size), all inside the
                // exported buffer, which stays alive and in place while `self` holds it.
                let src = unsafe { std::slice::from_raw_parts(start.offset(row_start), w * item) };
                row.copy_from_slice(src);
            } else {
                for (x, out) in row.chunks_exact_mut(item).enumerate() {
                    // SAFETY: element (…, y, x) lies inside the exported buffer at this
                    // offset by the buffer's own strides; it stays valid while `self`
                    // holds the buffer.
                    let src = unsafe {
                        std::slice::from_raw_parts(
                            start.offset(row_start + x as isize * col_stride),
                            item,
                        )
                    };
                    out.copy_from_slice(src);
                }
            }
        }
    }
}
