//! The threads behind a writer: the shared encoding engine, its workers and write-behind
//! threads, the preparer that opens shards ahead, the finisher, the background
//! writeback, and their scheduling priority.

pub(in crate::writer) mod engine;
pub(in crate::writer) mod finisher;
pub(in crate::writer) mod preparer;
pub(in crate::writer) mod priority;
pub(in crate::writer) mod worker;
pub(in crate::writer) mod write_behind;
pub(in crate::writer) mod writeback;
