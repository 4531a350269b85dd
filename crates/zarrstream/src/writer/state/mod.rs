//! What the threads of one array share: its state (`Shared`), the published document,
//! the chunk grid, a job, the frame pools, the resume point and the destination.

pub(in crate::writer) mod destination;
pub(in crate::writer) mod grid;
pub(in crate::writer) mod job;
pub(in crate::writer) mod pool;
pub(in crate::writer) mod published;
pub(in crate::writer) mod resume;
pub(in crate::writer) mod shared;
