//! The io_uring back end: several requests in flight, buffers registered
//! with the ring when the kernel allows it (READ_FIXED / WRITE_FIXED).
//!
//! All of the buffer-lifetime `unsafe` of the block I/O layer is here. The
//! rule that makes it sound: a request's `Buffer` sits in `slots[user_data]`
//! from the moment its submission entry is pushed until the kernel posted
//! the completion with that `user_data`; nothing hands out a reference to a
//! slot, and `Drop` waits for every slot to empty (or leaks the buffers if
//! the ring itself fails, so memory the kernel may still write is never
//! freed or reused; with lent memory in flight it aborts, as that memory is
//! its lender's to reuse).

use std::io;
use std::sync::Arc;

use io_uring::{IoUring, opcode, types};

use super::buffer::Region;
use super::{IoError, IoKind, Request};

/// Most `io_uring_enter` calls in a row that may fail with EINTR / EAGAIN /
/// EBUSY before `reap` gives up with an error.
const ENTER_RETRIES_MAX: u32 = 1000;

/// `user_data` of the probe no-op; request slots are numbered from 0.
const PROBE_USER_DATA: u64 = u64::MAX;

pub(super) struct Uring {
    // Dropped first (fields drop in declaration order): the ring is closed
    // while `registered` still keeps the buffer memory alive.
    ring: IoUring,
    /// Requests owned by the kernel, indexed by `user_data`.
    slots: Vec<Option<Request>>,
    free_slots: Vec<usize>,
    /// The pool whose buffers are registered, if registration worked.
    registered: Option<Arc<Region>>,
}

impl Uring {
    /// Creates a ring for `depth` requests in flight, checks that it works
    /// with a no-op, and registers the pool's buffers (falling back to plain
    /// READ / WRITE if the kernel refuses, e.g. over RLIMIT_MEMLOCK).
    /// On failure, returns why io_uring cannot be used.
    pub(super) fn new(depth: usize, region: &Arc<Region>) -> Result<Uring, String> {
        let entries = u32::try_from(depth.next_power_of_two()).map_err(|_| "queue too deep")?;
        let mut ring = IoUring::new(entries).map_err(|error| explain_setup_error(&error))?;
        probe_nop(&mut ring)?;
        let registered = register_buffers(&ring, region).then(|| Arc::clone(region));
        Ok(Uring {
            ring,
            slots: (0..depth).map(|_| None).collect(),
            free_slots: (0..depth).rev().collect(),
            registered,
        })
    }

    /// Most requests in flight.
    pub(super) fn depth(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn in_flight(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }

    pub(super) fn buffers_registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Whether any request on `file` is in flight.
    pub(super) fn in_flight_on(&self, file: super::FileId) -> bool {
        self.slots.iter().flatten().any(|request| request.file == file)
    }

    /// Whether a write to `file` is in flight.
    pub(super) fn writing(&self, file: super::FileId) -> bool {
        self.slots.iter().flatten().any(|request| request.kind == IoKind::Write && request.file == file)
    }

    /// Hands the rest of `request` (from `request.done_bytes`) to the kernel.
    ///
    /// # Panics
    /// If `depth` requests are already in flight.
    pub(super) fn start(&mut self, request: Request) {
        let slot = self.free_slots.pop().expect("a free request slot");
        let remaining_bytes = request.len - request.done_bytes;
        assert!(remaining_bytes > 0 && request.len <= request.buf.len());
        let length = u32::try_from(remaining_bytes).expect("buffers are at most 1 GiB");
        // SAFETY: done_bytes < len <= buffer length, so the pointer stays
        // inside the buffer.
        let address = unsafe { request.buf.raw_ptr().add(request.done_bytes) };
        let offset = request.offset + request.done_bytes as u64;
        let fd = types::Fd(request.fd);
        let fixed_index = match &self.registered {
            Some(region) if request.buf.is_in(region) => {
                Some(u16::try_from(request.buf.index()).expect("at most 16384 buffers"))
            }
            _ => None,
        };
        let entry = match (request.kind, fixed_index) {
            (IoKind::Read, Some(index)) => opcode::ReadFixed::new(fd, address, length, index).offset(offset).build(),
            (IoKind::Write, Some(index)) => {
                opcode::WriteFixed::new(fd, address.cast_const(), length, index).offset(offset).build()
            }
            (IoKind::Read, None) => opcode::Read::new(fd, address, length).offset(offset).build(),
            (IoKind::Write, None) => opcode::Write::new(fd, address.cast_const(), length).offset(offset).build(),
        }
        .user_data(slot as u64);
        self.slots[slot] = Some(request);
        // SAFETY: the entry points into the buffer of the request now stored
        // in `slots[slot]`. Nobody can reach that buffer until `reap` takes
        // it out after the kernel posted the completion for this slot, and
        // `Drop` waits for every slot, so the memory stays valid and
        // unaliased for the whole operation. The file descriptor stays open:
        // `BlockIo` closes a file only with nothing in flight on it, and
        // drops its back end (which waits) before its files.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        pushed.expect("room in the submission queue: in-flight requests never exceed its size");
        // An error here leaves the entry in the queue; the enter in `reap`
        // submits it again and reports a lasting failure.
        let _ = self.ring.submit();
    }

    /// Blocks until a request completes; returns it with the kernel's result
    /// (bytes transferred, or the error).
    pub(super) fn reap(&mut self) -> Result<(Request, io::Result<usize>), IoError> {
        assert!(self.in_flight() > 0, "reap with nothing in flight");
        let mut retries = 0;
        loop {
            if let Some(entry) = self.ring.completion().next() {
                let slot = usize::try_from(entry.user_data()).expect("a slot number");
                let request = self.slots[slot].take().expect("a completion for a used slot");
                self.free_slots.push(slot);
                let result = entry.result();
                let outcome = if result < 0 { Err(io::Error::from_raw_os_error(-result)) } else { Ok(result as usize) };
                return Ok((request, outcome));
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(error) if is_transient(&error) && retries < ENTER_RETRIES_MAX => retries += 1,
                Err(source) => {
                    return Err(IoError::Ring { op: "io_uring_enter", source });
                }
            }
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        while self.in_flight() > 0 {
            if self.reap().is_err() {
                // The kernel may still own these buffers: never free them.
                // Lent memory is not ours to keep from its lender, who will
                // reuse or free it: stop before the kernel writes into it.
                if self.slots.iter().flatten().any(|request| request.buf.is_lent()) {
                    eprintln!("error: io_uring failed with reads into lent memory in flight; aborting");
                    std::process::abort();
                }
                for slot in &mut self.slots {
                    std::mem::forget(slot.take());
                }
                // Keep the registered memory alive too.
                std::mem::forget(self.registered.take());
                return;
            }
        }
    }
}

fn is_transient(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY))
}

/// Submits a no-op and waits for it: a ring that can be created can still be
/// useless (some sandboxes filter io_uring_enter).
fn probe_nop(ring: &mut IoUring) -> Result<(), String> {
    let entry = opcode::Nop::new().build().user_data(PROBE_USER_DATA);
    // SAFETY: a no-op references no memory.
    unsafe { ring.submission().push(&entry) }.map_err(|_| "submission queue full")?;
    ring.submit_and_wait(1).map_err(|error| format!("io_uring_enter failed: {error}"))?;
    let completion = ring.completion().next().ok_or("no completion for a no-op")?;
    if completion.user_data() != PROBE_USER_DATA || completion.result() < 0 {
        return Err(format!("no-op failed: {}", io::Error::from_raw_os_error(-completion.result())));
    }
    Ok(())
}

/// Registers every buffer of the pool; false if the kernel refuses.
fn register_buffers(ring: &IoUring, region: &Arc<Region>) -> bool {
    let iovecs: Vec<libc::iovec> = (0..region.count())
        .map(|index| libc::iovec { iov_base: region.buffer_ptr(index).cast(), iov_len: region.buffer_bytes() })
        .collect();
    // SAFETY: the iovecs cover the pool's allocation, which `Uring` keeps
    // alive through `registered` (an `Arc`) until after the ring is closed.
    // Fixed operations are issued only for buffers of this region, at their
    // own addresses.
    unsafe { ring.submitter().register_buffers(&iovecs) }.is_ok()
}

/// Names the likely cause of a failed `io_uring_setup`.
fn explain_setup_error(error: &io::Error) -> String {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|text| text.trim().to_string())
        .unwrap_or_default();
    match error.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".to_string(),
        Some(libc::EPERM) if disabled == "2" => {
            "io_uring is disabled (kernel.io_uring_disabled = 2, EPERM)".to_string()
        }
        Some(libc::EPERM) if disabled == "1" => {
            "io_uring is limited to kernel.io_uring_group (kernel.io_uring_disabled = 1, EPERM)".to_string()
        }
        Some(libc::EPERM) => "io_uring_setup refused (EPERM): blocked by seccomp or a container policy".to_string(),
        Some(libc::ENOMEM) => "io_uring_setup failed with ENOMEM (RLIMIT_MEMLOCK too low for the ring?)".to_string(),
        _ => format!("io_uring_setup failed: {error}"),
    }
}
