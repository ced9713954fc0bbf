//! Block I/O: aligned buffers, O_DIRECT files, and an io_uring or pread back
//! end behind one submit / wait interface.

mod size;

pub use size::{SizeError, format_size, parse_size};
