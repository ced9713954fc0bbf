//! Block I/O: aligned buffers, O_DIRECT files, and an io_uring or pread back
//! end behind one submit / wait interface.
//!
//! The out-of-core solver keeps its table on disk and holds only a budget of
//! blocks in RAM. This module moves whole blocks between files and buffers
//! and knows nothing about tables: no block numbering, no formats, no cache
//! policy. It owns the open files, the I/O back end and the requests in
//! flight; the buffers belong to a `BufferPool` allocated once, up front.
//!
//! **Why O_DIRECT.** A buffered write leaves its pages in the page cache, so
//! a "1 GiB budget" run could quietly keep the whole table in kernel memory
//! and look faster than it is on a machine without spare RAM. O_DIRECT skips
//! the cache: what is in RAM is what the caller's pool holds. Filesystems
//! that refuse O_DIRECT (tmpfs before Linux 6.6: EINVAL at open) get a plain
//! open instead; `BlockIo::direct` tells the caller, to warn once.
//!
//! **Back ends.** `IoChoice::Uring` keeps up to `queue_depth` requests in
//! flight through io_uring, with the pool's buffers registered (READ_FIXED /
//! WRITE_FIXED; plain READ / WRITE if registration is refused, e.g. over
//! RLIMIT_MEMLOCK). `IoChoice::Pread` does each request with pread / pwrite
//! at submit and queues its completion: simple, always available, one request
//! at a time. `IoChoice::Auto` uses io_uring if a ring can be created and
//! completes a no-op, else pread, with a note (`fallback_note`) to print once.
//!
//! **Ownership.** `submit_read` / `submit_write` take the `Buffer` by value;
//! it comes back from `wait` in a `Completion`, or, if the request failed,
//! from `reclaim`. Dropping a `BlockIo` waits for every request in flight.
//! A read may also go straight into the caller's memory, lent as a `Buffer`
//! (`Buffer::lend`, unsafe: the caller keeps away from it till it is back).
//!
//! **Fault injection.** `ONITB_IO_URING_FAIL=1` in the environment makes
//! io_uring setup fail as if the kernel refused it, so whole-program tests
//! can check the Auto fallback and the Uring error. Unit tests use
//! `BlockIo::with_uring_failure` instead (no shared environment).

mod append;
mod buffer;
mod size;
mod sync_io;
mod uring;

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use append::{DirectAppender, unfinished_path};
pub use buffer::{ALIGN_BYTES, BUFFER_BYTES_MAX, BUFFER_COUNT_MAX, Buffer, BufferPool};
pub use size::{SizeError, format_size, parse_size};

/// Most requests in flight on one io_uring.
pub const QUEUE_DEPTH_MAX: u32 = 1024;

/// Most EINTR / EAGAIN results one request may see before it fails.
const REQUEST_RETRIES_MAX: u32 = 100;

/// Environment variable that makes io_uring setup fail (see module docs).
pub const URING_FAIL_ENV: &str = "ONITB_IO_URING_FAIL";

/// Which I/O back end to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoChoice {
    /// io_uring if it works here, else pread.
    #[default]
    Auto,
    /// io_uring or an error.
    Uring,
    /// pread / pwrite, one request at a time.
    Pread,
}

impl FromStr for IoChoice {
    type Err = String;
    fn from_str(text: &str) -> Result<IoChoice, String> {
        match text {
            "auto" => Ok(IoChoice::Auto),
            "uring" => Ok(IoChoice::Uring),
            "pread" => Ok(IoChoice::Pread),
            _ => Err(format!("unknown I/O back end {text:?} (use auto, uring or pread)")),
        }
    }
}

impl fmt::Display for IoChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoChoice::Auto => "auto",
            IoChoice::Uring => "uring",
            IoChoice::Pread => "pread",
        })
    }
}

/// The back end a `BlockIo` ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackendKind {
    Uring,
    Pread,
}

impl fmt::Display for IoBackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoBackendKind::Uring => "uring",
            IoBackendKind::Pread => "pread",
        })
    }
}

/// A file opened by a `BlockIo`; valid only with that `BlockIo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId(u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    Read,
    Write,
}

/// A finished request: its tag and buffer back.
#[derive(Debug)]
pub struct Completion {
    pub tag: u64,
    pub buf: Buffer,
    pub kind: IoKind,
}

/// Counts of completed requests (failed ones are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub reads: u64,
    pub writes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("disk full (no space or quota left) writing {}", path.display())]
    DiskFull { path: PathBuf },
    #[error("{op} {}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("io_uring is not available: {reason}")]
    UringUnavailable { reason: String },
    #[error("io_uring: {op}: {source}")]
    Ring {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("buffer pool of {count} x {buffer_bytes} bytes: {reason}")]
    BadPool { count: usize, buffer_bytes: usize, reason: String },
}

/// Maps an OS error to `DiskFull` (ENOSPC, EDQUOT) or `Io`.
pub fn map_io_error(source: io::Error, path: &Path, op: &'static str) -> IoError {
    match source.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => IoError::DiskFull { path: path.to_path_buf() },
        _ => IoError::Io { path: path.to_path_buf(), op, source },
    }
}

/// Bytes an unprivileged process may still write on the filesystem
/// holding `path` (`statvfs`: free blocks for users times the fragment
/// size), or None where the system does not say.
pub fn available_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that lives through the
    // call, and `statvfs` writes only the struct it is given, which is
    // read only after it returned success.
    let stats = unsafe {
        if libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) != 0 {
            return None;
        }
        stats.assume_init()
    };
    Some((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
}

/// Memory this process can still take: the kernel's estimate of what can
/// be allocated without swapping (`MemAvailable`), or the memory limit of
/// the process's cgroup (or of one above it) if lower. The limit is taken
/// whole, not less the cgroup's use, which counts page cache the kernel
/// would reclaim. `None` where the system does not say.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok();
    let machine = meminfo.as_deref().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    let cgroups = fs::read_to_string("/proc/self/cgroup").ok();
    let limit = cgroups.and_then(|text| cgroup_memory_limit(&text, Path::new("/sys/fs/cgroup")));
    match (machine, limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The lowest memory limit on the cgroups of `/proc/self/cgroup` (`text`)
/// and those above them, under `sys` (/sys/fs/cgroup): `memory.max` (v2,
/// line "0::PATH") or `memory/PATH/memory.limit_in_bytes` (v1, line
/// "N:memory:PATH"). No limit is "max" (v2) or a number near 2^63 (v1),
/// which no machine has.
fn cgroup_memory_limit(text: &str, sys: &Path) -> Option<u64> {
    let mut lowest: Option<u64> = None;
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let (root, file) = match controllers {
            "" => (sys.to_path_buf(), "memory.max"),
            "memory" => (sys.join("memory"), "memory.limit_in_bytes"),
            _ => continue,
        };
        let mut dir = root.join(path.trim_start_matches('/'));
        while dir.starts_with(&root) {
            let limit = fs::read_to_string(dir.join(file)).ok().and_then(|t| t.trim().parse::<u64>().ok());
            if let Some(limit) = limit.filter(|&l| l < 1 << 62) {
                lowest = Some(lowest.map_or(limit, |low| low.min(limit)));
            }
            if !dir.pop() {
                break;
            }
        }
    }
    lowest
}

struct OpenedFile {
    file: File,
    path: PathBuf,
    direct: bool,
}

/// One read or write, from submit to completion.
struct Request {
    file: FileId,
    fd: RawFd,
    direct: bool,
    kind: IoKind,
    offset: u64,
    len: usize,
    /// Bytes transferred so far (short transfers are continued).
    done_bytes: usize,
    retries: u32,
    buf: Buffer,
    tag: u64,
}

/// What to do with a request after the kernel answered.
enum Progress {
    Complete,
    Again,
    Failed(io::Error),
}

impl Request {
    /// Accounts for one transfer result. A read that ends early (0 bytes, or
    /// a partial block of an O_DIRECT file) met the end of the file: the rest
    /// of the buffer is zeroed and the read is complete.
    fn advance(&mut self, outcome: io::Result<usize>) -> Progress {
        let remaining_bytes = self.len - self.done_bytes;
        let transferred = match outcome {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => None,
            Err(error) if error.raw_os_error() == Some(libc::EAGAIN) => None,
            Err(error) => return Progress::Failed(error),
            Ok(bytes) => Some(bytes),
        };
        let Some(bytes) = transferred else {
            self.retries += 1;
            return if self.retries > REQUEST_RETRIES_MAX {
                Progress::Failed(io::Error::other("too many EINTR / EAGAIN retries"))
            } else {
                Progress::Again
            };
        };
        assert!(bytes <= remaining_bytes, "transferred more than asked");
        self.done_bytes += bytes;
        if self.done_bytes == self.len {
            return Progress::Complete;
        }
        let position = self.offset + self.done_bytes as u64;
        match self.kind {
            IoKind::Write if bytes == 0 => Progress::Failed(io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes")),
            IoKind::Read if bytes == 0 || (self.direct && !position.is_multiple_of(ALIGN_BYTES as u64)) => {
                let (done, len) = (self.done_bytes, self.len);
                self.buf[done..len].fill(0);
                self.done_bytes = len;
                Progress::Complete
            }
            _ => Progress::Again,
        }
    }
}

/// A request that will not go back to the kernel.
struct Finished {
    completion: Completion,
    error: Option<IoError>,
}

enum Backend {
    Uring(Box<uring::Uring>),
    Pread,
}

/// A set of files opened with O_DIRECT and one I/O back end.
pub struct BlockIo {
    // Dropped first: the io_uring back end waits for its requests, which
    // use the files below.
    backend: Backend,
    files: Vec<Option<OpenedFile>>,
    /// Finished requests not yet returned by `wait`. Bounded by the number
    /// of buffers in existence.
    ready: VecDeque<Finished>,
    /// Failed requests whose buffers wait for `reclaim`.
    failed: VecDeque<Completion>,
    fallback_note: Option<String>,
    stats: IoStats,
}

impl BlockIo {
    /// Creates the back end (see `IoChoice`). With io_uring, up to
    /// `queue_depth` requests are in flight, and the pool's buffers are
    /// registered with the ring when the kernel allows it.
    ///
    /// # Panics
    /// If `queue_depth` is 0 or above `QUEUE_DEPTH_MAX`.
    pub fn new(choice: IoChoice, pool: &BufferPool, queue_depth: u32) -> Result<BlockIo, IoError> {
        let fail = std::env::var(URING_FAIL_ENV).is_ok_and(|value| value == "1");
        BlockIo::build(choice, pool, queue_depth, fail)
    }

    /// `new`, with io_uring setup made to fail as if the kernel refused it.
    #[cfg(test)]
    fn with_uring_failure(choice: IoChoice, pool: &BufferPool, queue_depth: u32) -> Result<BlockIo, IoError> {
        BlockIo::build(choice, pool, queue_depth, true)
    }

    fn build(choice: IoChoice, pool: &BufferPool, queue_depth: u32, uring_fail: bool) -> Result<BlockIo, IoError> {
        assert!(
            (1..=QUEUE_DEPTH_MAX).contains(&queue_depth),
            "queue depth {queue_depth} outside 1..={QUEUE_DEPTH_MAX}"
        );
        let mut fallback_note = None;
        let backend = match choice {
            IoChoice::Pread => Backend::Pread,
            IoChoice::Uring | IoChoice::Auto => {
                let ring = if uring_fail {
                    Err(format!("setup failure injected ({URING_FAIL_ENV}=1)"))
                } else {
                    uring::Uring::new(queue_depth as usize, pool.region())
                };
                match (ring, choice) {
                    (Ok(ring), _) => Backend::Uring(Box::new(ring)),
                    (Err(reason), IoChoice::Uring) => {
                        return Err(IoError::UringUnavailable { reason });
                    }
                    (Err(reason), _) => {
                        fallback_note = Some(format!("io_uring is not available ({reason}); using pread"));
                        Backend::Pread
                    }
                }
            }
        };
        Ok(BlockIo {
            backend,
            files: Vec::new(),
            ready: VecDeque::new(),
            failed: VecDeque::new(),
            fallback_note,
            stats: IoStats::default(),
        })
    }

    pub fn backend(&self) -> IoBackendKind {
        match self.backend {
            Backend::Uring(_) => IoBackendKind::Uring,
            Backend::Pread => IoBackendKind::Pread,
        }
    }

    /// Why `IoChoice::Auto` fell back to pread, to print once.
    pub fn fallback_note(&self) -> Option<&str> {
        self.fallback_note.as_deref()
    }

    /// Whether the pool's buffers are registered with io_uring (fixed
    /// reads and writes). False for pread.
    pub fn buffers_registered(&self) -> bool {
        match &self.backend {
            Backend::Uring(ring) => ring.buffers_registered(),
            Backend::Pread => false,
        }
    }

    /// Most requests in flight at once (1 for pread).
    pub fn queue_depth(&self) -> usize {
        match &self.backend {
            Backend::Uring(ring) => ring.depth(),
            Backend::Pread => 1,
        }
    }

    /// Opens `path` for reading and writing, creating it if `create`.
    /// O_DIRECT if the filesystem allows it; see `direct`.
    pub fn open(&mut self, path: &Path, create: bool) -> Result<FileId, IoError> {
        self.open_with(path, create, true)
    }

    /// `open`; with `try_direct` false, without O_DIRECT (as where the
    /// filesystem refuses it).
    fn open_with(&mut self, path: &Path, create: bool, try_direct: bool) -> Result<FileId, IoError> {
        let open = |direct: bool| {
            let mut options = OpenOptions::new();
            options.read(true).write(true).create(create);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            options.open(path)
        };
        let (file, direct) = match open(try_direct) {
            Ok(file) => (file, try_direct),
            Err(error) if try_direct && error.raw_os_error() == Some(libc::EINVAL) => {
                (open(false).map_err(|source| map_io_error(source, path, "open"))?, false)
            }
            Err(source) => return Err(map_io_error(source, path, "open")),
        };
        let id = FileId(u32::try_from(self.files.len()).expect("fewer than 2^32 opens"));
        self.files.push(Some(OpenedFile { file, path: path.to_path_buf(), direct }));
        Ok(id)
    }

    /// Whether `file` was opened with O_DIRECT (false where the filesystem
    /// refused it: then the page cache holds what is written).
    pub fn direct(&self, file: FileId) -> bool {
        self.opened(file).direct
    }

    /// The path `file` was opened with.
    pub fn path(&self, file: FileId) -> &Path {
        &self.opened(file).path
    }

    /// Closes `file`. Its `FileId` must not be used again.
    ///
    /// # Panics
    /// If a request on `file` is in flight.
    pub fn close(&mut self, file: FileId) {
        if let Backend::Uring(ring) = &self.backend {
            assert!(!ring.in_flight_on(file), "close with requests in flight");
        }
        self.opened(file);
        self.files[file.0 as usize] = None;
    }

    /// Sets the file's length to `bytes` and allocates its blocks
    /// (fallocate, where the filesystem supports it), so a full disk shows
    /// up here as `DiskFull` rather than in the middle of a pass.
    pub fn set_len(&mut self, file: FileId, bytes: u64) -> Result<(), IoError> {
        let opened = self.opened(file);
        let path = &opened.path;
        opened.file.set_len(bytes).map_err(|source| map_io_error(source, path, "set length of"))?;
        if bytes == 0 {
            return Ok(());
        }
        let length = libc::off_t::try_from(bytes).expect("file sizes fit off_t");
        // SAFETY: fallocate on an open descriptor with plain integers.
        let result = unsafe { libc::fallocate(opened.file.as_raw_fd(), 0, 0, length) };
        if result == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            // Filesystem or device without fallocate: the length is set.
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::ENODEV) => Ok(()),
            _ => Err(map_io_error(error, path, "preallocate")),
        }
    }

    /// Queues a read of `len` bytes at `offset` of `file` into `buf`.
    /// `buf` belongs to this `BlockIo` until `wait` (or `reclaim`) returns
    /// it with `tag`.
    ///
    /// # Panics
    /// If `offset` or `len` is not a multiple of 4096, `len` is 0 or larger
    /// than the buffer, or `file` is not open.
    pub fn submit_read(&mut self, file: FileId, offset: u64, len: usize, buf: Buffer, tag: u64) -> Result<(), IoError> {
        self.submit(IoKind::Read, file, offset, len, buf, tag)
    }

    /// Queues a write of the first `len` bytes of `buf` at `offset` of
    /// `file`. Same rules as `submit_read`.
    pub fn submit_write(
        &mut self,
        file: FileId,
        offset: u64,
        len: usize,
        buf: Buffer,
        tag: u64,
    ) -> Result<(), IoError> {
        self.submit(IoKind::Write, file, offset, len, buf, tag)
    }

    fn submit(
        &mut self,
        kind: IoKind,
        file: FileId,
        offset: u64,
        len: usize,
        buf: Buffer,
        tag: u64,
    ) -> Result<(), IoError> {
        assert!(offset.is_multiple_of(ALIGN_BYTES as u64), "offset {offset} not 4096-aligned");
        assert!(len.is_multiple_of(ALIGN_BYTES), "length {len} not a multiple of 4096");
        assert!(len > 0 && len <= buf.len(), "length {len} outside 1..={}", buf.len());
        let opened = self.opened(file);
        let request = Request {
            file,
            fd: opened.file.as_raw_fd(),
            direct: opened.direct,
            kind,
            offset,
            len,
            done_bytes: 0,
            retries: 0,
            buf,
            tag,
        };
        if let Backend::Uring(_) = self.backend {
            return self.start_uring(request);
        }
        let (request, error) = sync_io::run(&opened.file, request);
        self.finish(request, error);
        Ok(())
    }

    /// Starts a request on the ring, first making room if `depth` requests
    /// are in flight. If that fails, the request's buffer goes to `reclaim`.
    fn start_uring(&mut self, request: Request) -> Result<(), IoError> {
        loop {
            let Backend::Uring(ring) = &mut self.backend else {
                unreachable!("start_uring on the io_uring back end");
            };
            if ring.in_flight() < ring.depth() {
                ring.start(request);
                return Ok(());
            }
            if let Err(error) = self.reap_one() {
                self.failed.push_back(Completion { tag: request.tag, buf: request.buf, kind: request.kind });
                return Err(error);
            }
        }
    }

    /// Waits for one kernel completion and either restarts the request
    /// (short or interrupted transfer) or moves it to `ready`.
    fn reap_one(&mut self) -> Result<(), IoError> {
        let Backend::Uring(ring) = &mut self.backend else {
            unreachable!("reap_one on the io_uring back end");
        };
        let (mut request, outcome) = ring.reap()?;
        match request.advance(outcome) {
            Progress::Again => ring.start(request),
            Progress::Complete => self.finish(request, None),
            Progress::Failed(error) => self.finish(request, Some(error)),
        }
        Ok(())
    }

    /// Records a request that is done, successfully or not.
    fn finish(&mut self, request: Request, error: Option<io::Error>) {
        let error = error.map(|source| {
            let op = match request.kind {
                IoKind::Read => "read",
                IoKind::Write => "write",
            };
            map_io_error(source, &self.opened(request.file).path, op)
        });
        if error.is_none() {
            let bytes = request.len as u64;
            match request.kind {
                IoKind::Read => {
                    self.stats.reads += 1;
                    self.stats.bytes_read += bytes;
                }
                IoKind::Write => {
                    self.stats.writes += 1;
                    self.stats.bytes_written += bytes;
                }
            }
        }
        self.ready.push_back(Finished {
            completion: Completion { tag: request.tag, buf: request.buf, kind: request.kind },
            error,
        });
    }

    /// Blocks until the next request completes and returns its tag and
    /// buffer. Requests complete in any order (io_uring), not necessarily
    /// the order they were submitted in. On an error (`DiskFull`, `Io`), the failed request's buffer
    /// and tag are kept for `reclaim`; other requests are unaffected.
    ///
    /// # Panics
    /// If nothing is in flight.
    pub fn wait(&mut self) -> Result<Completion, IoError> {
        loop {
            if let Some(finished) = self.ready.pop_front() {
                return match finished.error {
                    None => Ok(finished.completion),
                    Some(error) => {
                        self.failed.push_back(finished.completion);
                        Err(error)
                    }
                };
            }
            assert!(self.in_flight() > 0, "wait with nothing in flight");
            self.reap_one()?;
        }
    }

    /// The buffer and tag of a request that failed (after `wait` or a
    /// submit returned an error), oldest first; `None` when there are none.
    pub fn reclaim(&mut self) -> Option<Completion> {
        self.failed.pop_front()
    }

    /// Requests submitted and not yet returned by `wait`.
    pub fn in_flight(&self) -> usize {
        let on_ring = match &self.backend {
            Backend::Uring(ring) => ring.in_flight(),
            Backend::Pread => 0,
        };
        on_ring + self.ready.len()
    }

    /// Waits for every write to `file` in flight to reach the file (their
    /// completions stay queued for `wait`), then fdatasync.
    pub fn sync(&mut self, file: FileId) -> Result<(), IoError> {
        while matches!(&self.backend, Backend::Uring(ring) if ring.writing(file)) {
            self.reap_one()?;
        }
        let opened = self.opened(file);
        opened.file.sync_data().map_err(|source| map_io_error(source, &opened.path, "fdatasync"))
    }

    pub fn stats(&self) -> IoStats {
        self.stats
    }

    fn opened(&self, file: FileId) -> &OpenedFile {
        self.files.get(file.0 as usize).and_then(Option::as_ref).expect("a FileId of an open file of this BlockIo")
    }
}

impl fmt::Debug for BlockIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockIo")
            .field("backend", &self.backend())
            .field("in_flight", &self.in_flight())
            .field("stats", &self.stats)
            .finish()
    }
}

// The solver's block cache may move these to another thread.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<BlockIo>();
    assert_send::<Buffer>();
    assert_send::<BufferPool>();
    assert_send::<IoError>();
};

#[cfg(test)]
mod tests;
