//! Shard files: the fixed slot layout, the shard index, and the finished layout.

mod index;
mod layout;
mod plan;

pub(crate) use index::{IndexEntries, encode_index, entry_bytes};
pub use layout::{LayoutOverflow, ShardLayout};
pub use plan::Packing;
pub(crate) use plan::{FinalLayout, packed, plan};
