//! The pread back end: each request is done at submit, with pread / pwrite,
//! continuing short transfers the same way the io_uring back end does.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::{IoKind, Progress, Request};

/// Does `request` to the end; returns it with its error, if any.
pub(super) fn run(file: &File, mut request: Request) -> (Request, Option<io::Error>) {
    loop {
        let (start, end) = (request.done_bytes, request.len);
        let position = request.offset + start as u64;
        let outcome = match request.kind {
            IoKind::Read => file.read_at(&mut request.buf[start..end], position),
            IoKind::Write => file.write_at(&request.buf[start..end], position),
        };
        // Each round either moves `done_bytes` forward or counts a retry,
        // and both are bounded, so the loop ends.
        match request.advance(outcome) {
            Progress::Again => {}
            Progress::Complete => return (request, None),
            Progress::Failed(error) => return (request, Some(error)),
        }
    }
}
