//! An OME-Zarr image's pyramid: the chain of levels, the feed into the pyramid thread,
//! the thread that owns the lower levels, the reductions the workers make, and the image
//! group's document.

pub(in crate::writer) mod chain;
pub(in crate::writer) mod feed;
pub(in crate::writer) mod image;
pub(in crate::writer) mod reduction;
pub(in crate::writer) mod thread;
