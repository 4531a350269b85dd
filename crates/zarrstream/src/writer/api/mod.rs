//! The public face of the writer: [`Recording`](crate::Recording), the options, what a push
//! returns, the memory estimate and the acquisition order.

pub(in crate::writer) mod array;
pub(in crate::writer) mod memory;
pub(in crate::writer) mod options;
pub(in crate::writer) mod order;
pub(in crate::writer) mod outcome;
pub(in crate::writer) mod recording;
