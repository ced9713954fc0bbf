//! onitb: Onitama endgame tablebases.
pub mod blockio;
mod cache_hint;
pub mod compress;
pub mod format;
pub mod index;
pub mod notation;
pub mod probe;
pub mod publish;
pub mod rules;
pub mod shard;
pub mod solver;
pub mod store;
pub mod table;
pub mod value;
pub mod verify;

pub use probe::{ProbeError, Tablebase};
pub use table::{Stats, Table};
pub use value::Value;
