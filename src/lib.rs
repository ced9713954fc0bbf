//! onitb: Onitama endgame tablebases.
pub mod index;
pub mod rules;
pub mod solver;
pub mod table;
pub mod value;

pub use table::{Stats, Table};
pub use value::Value;
