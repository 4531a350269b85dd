//! What became of a pushed frame.

/// What a push did with its frame.
///
/// Under [`Backpressure::Block`](crate::Backpressure::Block) (the default) every frame a
/// push returns `Ok` for is accepted; under [`Backpressure::Drop`](crate::Backpressure::Drop)
/// a frame pushed while every buffer is in use is dropped and counted, and its place in
/// the array reads as the fill value.
///
/// ```no_run
/// use zarrstream::{ArraySpec, Backpressure, Writer, WriterOptions};
/// let spec = ArraySpec::builder()
///     .shape([0, 512, 512])
///     .chunk_shape([1, 256, 256])
///     .shard_shape([16, 512, 512])
///     .build()?;
/// let options = WriterOptions::default().backpressure(Backpressure::Drop);
/// let mut writer = Writer::create("run.zarr", spec, options)?;
/// let frame = vec![0u16; 512 * 512];
/// if writer.push(&frame)?.is_dropped() {
///     eprintln!("the encoders are behind: a frame was dropped");
/// }
/// # Ok::<(), zarrstream::Error>(())
/// ```
#[must_use = "a frame may have been dropped (Backpressure::Drop)"]
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushOutcome {
    /// The frame will be written.
    Accepted,
    /// The frame was dropped by the [`Backpressure::Drop`](crate::Backpressure::Drop)
    /// policy (no free buffer); it is counted in
    /// [`Stats::frames_dropped`](crate::Stats::frames_dropped).
    Dropped,
}

impl PushOutcome {
    /// Whether the frame will be written.
    pub fn is_accepted(self) -> bool {
        self == PushOutcome::Accepted
    }

    /// Whether the frame was dropped.
    pub fn is_dropped(self) -> bool {
        self == PushOutcome::Dropped
    }

    pub(in crate::writer) fn accepted_if(accepted: bool) -> Self {
        if accepted {
            PushOutcome::Accepted
        } else {
            PushOutcome::Dropped
        }
    }
}
