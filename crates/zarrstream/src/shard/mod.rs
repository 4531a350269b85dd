//! Shard files: the fixed slot layout, the order of the chunks in the file, the shard
//! index, and the finished layout.

mod index;
mod layout;
mod order;
mod plan;

pub(crate) use index::{IndexEntries, encode_index, entry_bytes, store_entry};
pub use layout::{LayoutOverflow, ShardLayout};
pub use order::ChunkOrder;
pub(crate) use order::SlotOrder;
pub use plan::Packing;
pub(crate) use plan::{FinalLayout, packed, plan};
