//! onitb: Onitama endgame tablebases.
pub mod blockio;
pub mod format;
pub mod index;
pub mod rules;
pub mod solver;
pub mod store;
pub mod table;
pub mod value;

pub use table::{Stats, Table};
pub use value::Value;
