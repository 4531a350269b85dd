//! Frames from a Python buffer (a numpy array, `bytes`, a `memoryview`, …) into the
//! writer, with the interpreter lock released.
//!
//! A C-contiguous buffer is pushed where it lies: the writer's one copy (into its frame
//! pool) is the only one. Any other layout is gathered row by row straight into a pool
//! buffer ([`Writer::buffer`]), so it too is copied once; a [`Recording`] lends no pool
//! buffers, so for its arrays a strided frame is gathered into a scratch frame first.

use std::time::Instant;

use pyo3::buffer::PyUntypedBuffer;
use zarrstream::{FrameMeta, PushOutcome, Recording, Writer};

use crate::errors::Failure;
use zarrstream::ErrorKind;

/// Where frames go: a [`Writer`], or one array of a [`Recording`].
pub(crate) trait Target {
    /// Bytes of one frame.
    fn frame_bytes(&self) -> usize;
    /// Pushes one contiguous frame.
    fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> zarrstream::Result<PushOutcome>;
    /// Pushes one contiguous frame with its metadata.
    fn push_with(
        &mut self,
        frame: &[u8],
        scheduled: Instant,
        meta: &FrameMeta,
    ) -> zarrstream::Result<PushOutcome>;
    /// Pushes frame `f` of a strided buffer, gathered; `None` when it was dropped (and
    /// counted as skipped) for want of a free buffer.
    fn push_gathered(
        &mut self,
        frames: &Frames,
        f: usize,
    ) -> zarrstream::Result<Option<PushOutcome>>;
    /// Writes one contiguous frame at `index`.
    fn write_at(
        &mut self,
        index: &[u64],
        frame: &[u8],
        scheduled: Instant,
    ) -> zarrstream::Result<PushOutcome>;
    /// Writes the one frame of a strided buffer at `index`, gathered.
    fn write_gathered_at(
        &mut self,
        frames: &Frames,
        index: &[u64],
    ) -> zarrstream::Result<PushOutcome>;
}

impl Target for Writer {
    fn frame_bytes(&self) -> usize {
        self.spec().frame_bytes()
    }

    fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> zarrstream::Result<PushOutcome> {
        Writer::push_bytes(self, frame, scheduled)
    }

    fn push_with(
        &mut self,
        frame: &[u8],
        scheduled: Instant,
        meta: &FrameMeta,
    ) -> zarrstream::Result<PushOutcome> {
        Writer::push_with(self, frame, scheduled, meta)
    }

    /// Gathered straight into a pool buffer: one copy, as for contiguous frames.
    fn push_gathered(
        &mut self,
        frames: &Frames,
        f: usize,
    ) -> zarrstream::Result<Option<PushOutcome>> {
        let scheduled = Instant::now();
        let frame_bytes = self.spec().frame_bytes();
        let Some(mut dest) = self.buffer()? else {
            self.skip()?;
            return Ok(None);
        };
        frames.gather(f, &mut dest[..frame_bytes]);
        self.push_buffer(dest, scheduled).map(Some)
    }

    fn write_at(
        &mut self,
        index: &[u64],
        frame: &[u8],
        scheduled: Instant,
    ) -> zarrstream::Result<PushOutcome> {
        self.write_frame_bytes(index, frame, scheduled)
    }

    /// Gathered straight into a pool buffer; with no free buffer (`Backpressure::Drop`)
    /// the frame is dropped as `write_frame` would drop it: its place skipped.
    fn write_gathered_at(
        &mut self,
        frames: &Frames,
        index: &[u64],
    ) -> zarrstream::Result<PushOutcome> {
        let scheduled = Instant::now();
        let frame_bytes = self.spec().frame_bytes();
        let Some(mut dest) = self.buffer()? else {
            self.skip_frame(index)?;
            return Ok(PushOutcome::Dropped);
        };
        frames.gather(0, &mut dest[..frame_bytes]);
        self.write_frame_buffer(index, dest, scheduled)
    }
}

/// One array of a [`Recording`], with a scratch frame for strided buffers (the
/// recording lends no pool buffers, so a strided frame is gathered here, then copied
/// into the pool by the push).
pub(crate) struct RecordingArray<'a> {
    pub(crate) recording: &'a Recording,
    pub(crate) index: usize,
    pub(crate) frame_bytes: usize,
    pub(crate) scratch: Vec<u8>,
}

impl Target for RecordingArray<'_> {
    fn frame_bytes(&self) -> usize {
        self.frame_bytes
    }

    fn push_bytes(&mut self, frame: &[u8], scheduled: Instant) -> zarrstream::Result<PushOutcome> {
        self.recording.push_bytes(self.index, frame, scheduled)
    }

    fn push_with(
        &mut self,
        frame: &[u8],
        scheduled: Instant,
        meta: &FrameMeta,
    ) -> zarrstream::Result<PushOutcome> {
        self.recording.push_with(self.index, frame, scheduled, meta)
    }

    fn push_gathered(
        &mut self,
        frames: &Frames,
        f: usize,
    ) -> zarrstream::Result<Option<PushOutcome>> {
        let scheduled = Instant::now();
        self.scratch.resize(self.frame_bytes, 0);
        frames.gather(f, &mut self.scratch);
        self.recording
            .push_bytes(self.index, &self.scratch, scheduled)
            .map(Some)
    }

    fn write_at(
        &mut self,
        index: &[u64],
        frame: &[u8],
        scheduled: Instant,
    ) -> zarrstream::Result<PushOutcome> {
        self.recording
            .write_frame_bytes(self.index, index, frame, scheduled)
    }

    fn write_gathered_at(
        &mut self,
        frames: &Frames,
        index: &[u64],
    ) -> zarrstream::Result<PushOutcome> {
        let scheduled = Instant::now();
        self.scratch.resize(self.frame_bytes, 0);
        frames.gather(0, &mut self.scratch);
        self.recording
            .write_frame_bytes(self.index, index, &self.scratch, scheduled)
    }
}

/// Frames accepted and dropped by one call.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pushed {
    pub(crate) accepted: u64,
    pub(crate) dropped: u64,
}

impl Pushed {
    fn count(&mut self, outcome: PushOutcome) {
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

    /// Pushes every frame; call with the interpreter lock released. Stops at the first
    /// error, with the frames pushed before it counted in the writer.
    pub(crate) fn push(&self, target: &mut impl Target) -> Result<Pushed, Failure> {
        let mut pushed = Pushed::default();
        let frame_bytes = target.frame_bytes();
        if let Some(bytes) = self.contiguous() {
            for frame in bytes.chunks_exact(frame_bytes) {
                pushed.count(target.push_bytes(frame, Instant::now())?);
            }
        } else {
            for f in 0..self.frames {
                match target.push_gathered(self, f)? {
                    Some(outcome) => pushed.count(outcome),
                    // No free buffer under `Backpressure::Drop`: the frame was skipped,
                    // its place kept, exactly as a push would have dropped it.
                    None => pushed.dropped += 1,
                }
            }
        }
        Ok(pushed)
    }

    /// Pushes the one frame of this buffer with `meta` (call with the interpreter lock
    /// released); a strided frame is gathered into a contiguous copy first.
    pub(crate) fn push_with(
        &self,
        target: &mut impl Target,
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
            let mut copy = vec![0u8; target.frame_bytes()];
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
        target: &mut impl Target,
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
            Some(bytes) => target.write_at(index, bytes, Instant::now())?,
            None => target.write_gathered_at(self, index)?,
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
