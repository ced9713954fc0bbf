//! Lanes on disk: one file per lane of each material in the work directory,
//! and the aligned memory that segments are read into.
//!
//! Owns the work files' names and their I/O (O_DIRECT where the file system
//! allows it, so that the page cache does not quietly hold the table and the
//! memory budget stays honest). Knows nothing of moves or values.

use super::lanes::{Lane, SEGMENT_ALIGN_BYTES};
use crate::blockio::{
    ALIGN_BYTES, BlockIo, Buffer, BufferPool, Completion, DirectAppender, FileId, IoBackendKind, IoChoice, IoError,
    IoStats,
};
use crate::index::Material;
use memmap2::MmapMut;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum DiskError {
    #[error("the disk holding '{}' is full; free space and rerun with --resume", path.display())]
    Full { path: PathBuf },
    #[error("cannot {action} '{}': {cause}", path.display())]
    Io { action: &'static str, path: PathBuf, cause: io::Error },
    #[error("work file '{}' has {found} bytes, not the {expected} its lane needs; the work directory is damaged", path.display())]
    Size { path: PathBuf, found: u64, expected: u64 },
    #[error("work file '{}' is damaged ({what}); the work directory is damaged", path.display())]
    Damaged { path: PathBuf, what: &'static str },
    #[error("cannot allocate {bytes} bytes of aligned memory")]
    Memory { bytes: usize },
    #[error(transparent)]
    Block(IoError),
}

pub(super) fn io_error(action: &'static str, path: &Path, cause: io::Error) -> DiskError {
    match cause.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => DiskError::Full { path: path.to_path_buf() },
        _ => DiskError::Io { action, path: path.to_path_buf(), cause },
    }
}

/// A transparent huge page on x86_64 Linux: an [`AlignedBuf`] at least
/// this large asks for them (a smaller one could not hold one).
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Zeroed memory aligned for O_DIRECT, allocated once and never grown.
///
/// An anonymous mapping of its own (memmap2), not the heap: its pages cost
/// memory only once touched and go back to the system when it is dropped.
/// From the heap, the allocator kept the windows of a finished pair as free
/// but resident memory next to the next pair's (measured: 14 MiB over the
/// 32 MiB budget at 6 men), and zeroed reused heap memory by touching it.
/// Its pages are transparent huge pages where the kernel gives them.
pub struct AlignedBuf {
    map: MmapMut,
}

impl AlignedBuf {
    pub fn zeroed(bytes: usize) -> Result<AlignedBuf, DiskError> {
        let bytes = (bytes as u64).div_ceil(SEGMENT_ALIGN_BYTES).max(1) as usize * SEGMENT_ALIGN_BYTES as usize;
        let map = MmapMut::map_anon(bytes).map_err(|_| DiskError::Memory { bytes })?;
        // Mappings start on a page, and pages are at least 4096 bytes.
        assert_eq!(map.as_ptr() as u64 % SEGMENT_ALIGN_BYTES, 0);
        if bytes >= HUGE_PAGE_BYTES {
            // The kernels read the window's buffers all over (a 4v4
            // landing slice is 69 MB on average): with huge pages 8-men
            // 4v4's steps computed 8-14% faster (docs/BENCHMARKS.md,
            // session 87; which reads gained is not pinned down). Only a
            // hint: where the kernel gives none (disabled, or none free),
            // nothing changes.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(AlignedBuf { map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    pub fn words(&self) -> &[u32] {
        // SAFETY: the mapping is 4096-aligned, its length a multiple of 4,
        // and every bit pattern is a valid u32.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr() as *const u32, self.map.len() / 4) }
    }

    pub fn words_mut(&mut self) -> &mut [u32] {
        // SAFETY: as for `words`, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr() as *mut u32, self.map.len() / 4) }
    }
}

/// The name of a lane's work file.
pub fn lane_path(dir: &Path, material: Material, lane: Lane) -> PathBuf {
    dir.join(format!("{material}.{}", lane.name()))
}

/// The name of slot `slot` (0 or 1) of a plane lane's work files (see
/// [`super::work_files`]).
pub fn slot_path(dir: &Path, material: Material, lane: Lane, slot: usize) -> PathBuf {
    dir.join(format!("{material}.{}.{slot}", lane.name()))
}

/// One lane's work file.
pub struct LaneFile {
    file: File,
    path: PathBuf,
    /// Opened with O_DIRECT (false on file systems that refuse it, e.g. tmpfs).
    pub direct: bool,
}

impl LaneFile {
    /// Opens (or creates, sized to `bytes` of zeros) a lane file. An
    /// existing file of another size is refused: it is not this lane's.
    pub fn open(path: &Path, create: bool, bytes: u64) -> Result<LaneFile, DiskError> {
        let open = |direct: bool| {
            let mut options = OpenOptions::new();
            options.read(true).write(true).create(create).truncate(create);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            options.open(path)
        };
        let (file, direct) = match open(true) {
            Ok(file) => (file, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                (open(false).map_err(|e| io_error("open", path, e))?, false)
            }
            Err(e) => return Err(io_error("open", path, e)),
        };
        if create {
            file.set_len(bytes).map_err(|e| io_error("size", path, e))?;
        } else {
            let found = file.metadata().map_err(|e| io_error("inspect", path, e))?.len();
            if found != bytes {
                return Err(DiskError::Size { path: path.to_path_buf(), found, expected: bytes });
            }
        }
        Ok(LaneFile { file, path: path.to_path_buf(), direct })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `range` of the file into `into` (same length; the range starts
    /// and, but for the file's end, ends on a segment boundary).
    pub fn read(&self, range: Range<u64>, into: &mut [u8]) -> Result<(), DiskError> {
        debug_assert_eq!(range.start % SEGMENT_ALIGN_BYTES, 0);
        debug_assert_eq!((range.end - range.start) as usize, into.len());
        self.file.read_exact_at(into, range.start).map_err(|e| io_error("read", &self.path, e))
    }

    pub fn write(&self, offset: u64, from: &[u8]) -> Result<(), DiskError> {
        debug_assert_eq!(offset % SEGMENT_ALIGN_BYTES, 0);
        self.file.write_all_at(from, offset).map_err(|e| io_error("write", &self.path, e))
    }

    pub fn sync(&self) -> Result<(), DiskError> {
        self.file.sync_data().map_err(|e| io_error("sync", &self.path, e))
    }

    /// Gives `range` (segment-aligned) back to the file system: it reads as
    /// zeros from now on and takes no disk. The file keeps its size. On a
    /// file system that cannot punch holes the bytes stay (and take disk),
    /// which is harmless: whoever calls this no longer reads them, or wants
    /// zeros and has written none elsewhere, so they must be written.
    pub fn punch(&self, range: Range<u64>) -> Result<Punched, DiskError> {
        punch(&self.file, &self.path, range)
    }

    /// Bytes of the file.
    pub fn size_bytes(&self) -> Result<u64, DiskError> {
        Ok(self.file.metadata().map_err(|e| io_error("inspect", &self.path, e))?.len())
    }
}

/// Gives `range` of `file` (at `path`) back to the file system, as
/// [`LaneFile::punch`] does.
pub(super) fn punch(file: &File, path: &Path, range: Range<u64>) -> Result<Punched, DiskError> {
    debug_assert_eq!(range.start % SEGMENT_ALIGN_BYTES, 0);
    if range.is_empty() {
        return Ok(Punched::Yes);
    }
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let (offset, len) = (range.start as libc::off_t, (range.end - range.start) as libc::off_t);
    // SAFETY: fallocate on an open file descriptor; no memory is passed.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) };
    if done == 0 {
        return Ok(Punched::Yes);
    }
    let cause = io::Error::last_os_error();
    match cause.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(Punched::Unsupported),
        _ => Err(io_error("free part of", path, cause)),
    }
}

/// Whether [`LaneFile::punch`] freed the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Punched {
    Yes,
    /// The file system keeps the bytes (they are not zeroed either).
    Unsupported,
}

/// The hot-path I/O of a streamed solve: reads and writes of lane ranges
/// through the block I/O layer, several requests of one block each in
/// flight. Writes return as soon as their bytes are copied into a block
/// buffer, so they overlap with what comes next; `drain` waits for them
/// (at the end of every pass, before anything reads what they wrote).
pub struct DiskIo {
    io: BlockIo,
    pool: BufferPool,
    pending_writes: usize,
}

/// Tags of write requests; read tags are chunk numbers below this.
const WRITE_TAG: u64 = u64::MAX;

/// Reads into lent memory that the kernel has not given back yet.
/// `read_many` settles them before it drops this, so only a panic drops it
/// with reads in flight: the kernel could then write into memory the
/// unwinding frees, and the process aborts instead.
#[derive(Default)]
struct LentReads {
    in_flight: usize,
}

impl Drop for LentReads {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            eprintln!("error: a panic with reads into the window in flight; aborting");
            std::process::abort();
        }
    }
}

impl DiskIo {
    /// `blocks` buffers of `block_bytes` each: the I/O part of the budget.
    pub fn new(choice: IoChoice, block_bytes: usize, blocks: usize) -> Result<DiskIo, DiskError> {
        let pool = BufferPool::new(blocks, block_bytes).map_err(DiskError::Block)?;
        let io = BlockIo::new(choice, &pool, blocks as u32).map_err(DiskError::Block)?;
        Ok(DiskIo { io, pool, pending_writes: 0 })
    }

    pub fn backend(&self) -> IoBackendKind {
        self.io.backend()
    }

    pub fn fallback_note(&self) -> Option<&str> {
        self.io.fallback_note()
    }

    pub fn stats(&self) -> IoStats {
        self.io.stats()
    }

    /// Opens a lane file for the hot path.
    pub fn open(&mut self, file: &LaneFile) -> Result<FileId, DiskError> {
        self.io.open(&file.path, false).map_err(DiskError::Block)
    }

    /// The bytes of each buffer, the most one request moves.
    pub fn block_bytes(&self) -> usize {
        self.pool.buffer_bytes()
    }

    /// Takes a free buffer, waiting for an in-flight write if needed.
    fn take(&mut self) -> Result<Buffer, DiskError> {
        loop {
            if let Some(buf) = self.pool.take() {
                return Ok(buf);
            }
            let done = self.io.wait().map_err(DiskError::Block)?;
            debug_assert_eq!(done.tag, WRITE_TAG, "reads are waited for by `read`");
            self.pending_writes -= 1;
            self.pool.give(done.buf);
        }
    }

    /// Reads `range` (block-aligned start, length a multiple of 4096) into
    /// `into`, with as many block requests in flight as there are buffers.
    pub fn read(&mut self, file: FileId, range: Range<u64>, into: &mut [u8]) -> Result<(), DiskError> {
        self.read_many(&mut [(file, range, into)])
    }

    /// Reads several ranges (each as for `read`) into their slices, with
    /// block requests of all of them in flight together: small segments
    /// cost one disk latency per batch rather than one each.
    ///
    /// A block-sized piece whose slice starts on a 4096-byte boundary and
    /// is a multiple of 4096 long (all of a window's, whose segments are
    /// aligned) is read straight into it, lent to the kernel; any other
    /// goes through a pool buffer and is copied. Copying every piece, 4v4's
    /// steps 3-18 took 5% longer (docs/BENCHMARKS.md, session 32).
    pub fn read_many(&mut self, requests: &mut [(FileId, Range<u64>, &mut [u8])]) -> Result<(), DiskError> {
        let block = self.block_bytes();
        // (request, byte offset within it) of every block-sized piece.
        let mut pieces = Vec::new();
        for (r, (_, range, into)) in requests.iter().enumerate() {
            let len = (range.end - range.start) as usize;
            debug_assert_eq!(into.len(), len);
            pieces.extend((0..len.div_ceil(block)).map(|c| (r, c * block)));
        }
        // Lent pieces in flight: while there are any, this must not return
        // (nor unwind) before the kernel is done with them.
        let mut lent = LentReads::default();
        let result = self.read_pieces(requests, &pieces, block, &mut lent);
        if lent.in_flight > 0 {
            // An error left pieces out.
            self.settle_lent(&mut lent);
        }
        result
    }

    fn read_pieces(
        &mut self,
        requests: &mut [(FileId, Range<u64>, &mut [u8])],
        pieces: &[(usize, usize)],
        block: usize,
        lent: &mut LentReads,
    ) -> Result<(), DiskError> {
        let (mut submitted, mut done) = (0usize, 0usize);
        while done < pieces.len() {
            while submitted < pieces.len() && self.io.in_flight() < self.pool.count() {
                let (r, at) = pieces[submitted];
                let (file, range, into) = &mut requests[r];
                let bytes = block.min(into.len() - at);
                let piece = &mut into[at..at + bytes];
                let buf = if (piece.as_ptr() as usize).is_multiple_of(ALIGN_BYTES) && bytes.is_multiple_of(ALIGN_BYTES)
                {
                    lent.in_flight += 1;
                    // SAFETY: `piece` is borrowed from `requests` for all of
                    // this call, and nothing touches it until its completion
                    // comes back below (or `settle_lent` takes it back
                    // after an error), where the `Buffer` is dropped;
                    // `LentReads` aborts if a panic cuts that short.
                    unsafe { Buffer::lend(piece) }
                } else {
                    match self.pool.take() {
                        Some(buf) => buf,
                        None => break,
                    }
                };
                let offset = range.start + at as u64;
                let outcome = self.io.submit_read(*file, offset, bytes, buf, submitted as u64);
                submitted += 1;
                outcome.map_err(DiskError::Block)?;
            }
            let completion = self.io.wait().map_err(DiskError::Block)?;
            if completion.tag == WRITE_TAG {
                self.pending_writes -= 1;
                self.pool.give(completion.buf);
                continue;
            }
            if completion.buf.is_lent() {
                lent.in_flight -= 1;
            } else {
                let (r, at) = pieces[completion.tag as usize];
                let into = &mut requests[r].2;
                let bytes = block.min(into.len() - at);
                into[at..at + bytes].copy_from_slice(&completion.buf[..bytes]);
                self.pool.give(completion.buf);
            }
            done += 1;
        }
        Ok(())
    }

    /// After an error in `read_many`, waits until the kernel has given
    /// back every lent piece still out (failed ones come back through
    /// `reclaim`): its memory is the caller's again once this returns. If
    /// the ring cannot say (it failed itself), the kernel may still write
    /// there, and the process aborts.
    fn settle_lent(&mut self, lent: &mut LentReads) {
        loop {
            while let Some(completion) = self.io.reclaim() {
                self.put_back(completion, lent);
            }
            if lent.in_flight == 0 {
                return;
            }
            let before = self.io.in_flight();
            match self.io.wait() {
                Ok(completion) => self.put_back(completion, lent),
                // A failed request: it waits in `reclaim`.
                Err(_) if self.io.in_flight() < before => {}
                Err(error) => {
                    eprintln!("error: {error}, with reads into the window in flight; aborting");
                    std::process::abort();
                }
            }
        }
    }

    /// Takes back a request's buffer after an error: lent memory goes back
    /// to its lender (dropped), a pool buffer to the pool.
    fn put_back(&mut self, completion: Completion, lent: &mut LentReads) {
        if completion.buf.is_lent() {
            lent.in_flight -= 1;
            return;
        }
        if completion.tag == WRITE_TAG {
            self.pending_writes -= 1;
        }
        self.pool.give(completion.buf);
    }

    /// Queues a write of `from` at `offset` (block-aligned, length a
    /// multiple of 4096).
    pub fn write(&mut self, file: FileId, offset: u64, from: &[u8]) -> Result<(), DiskError> {
        let block = self.block_bytes();
        for (i, chunk) in from.chunks(block).enumerate() {
            let mut buf = self.take()?;
            buf[..chunk.len()].copy_from_slice(chunk);
            self.io
                .submit_write(file, offset + (i * block) as u64, chunk.len(), buf, WRITE_TAG)
                .map_err(DiskError::Block)?;
            self.pending_writes += 1;
        }
        Ok(())
    }

    /// Queues a write at `offset` (block-aligned) of `pieces` laid end to
    /// end, zero-padded to a multiple of 4096 bytes: a compacted segment
    /// gathered straight into the I/O blocks (`compact`). Returns the bytes
    /// written.
    pub fn write_pieces<'p>(
        &mut self,
        file: FileId,
        offset: u64,
        pieces: impl IntoIterator<Item = &'p [u8]>,
    ) -> Result<u64, DiskError> {
        let block = self.block_bytes();
        let (mut buf, mut filled, mut at) = (None::<Buffer>, 0, offset);
        for mut piece in pieces {
            while !piece.is_empty() {
                let to = match buf.as_mut() {
                    Some(to) => to,
                    None => buf.insert(self.take()?),
                };
                let n = piece.len().min(block - filled);
                to[filled..filled + n].copy_from_slice(&piece[..n]);
                (filled, piece) = (filled + n, &piece[n..]);
                if filled == block {
                    let full = buf.take().expect("a block being filled");
                    self.io.submit_write(file, at, block, full, WRITE_TAG).map_err(DiskError::Block)?;
                    self.pending_writes += 1;
                    (filled, at) = (0, at + block as u64);
                }
            }
        }
        if let Some(mut last) = buf {
            let len = filled.next_multiple_of(SEGMENT_ALIGN_BYTES as usize);
            last[filled..len].fill(0);
            self.io.submit_write(file, at, len, last, WRITE_TAG).map_err(DiskError::Block)?;
            self.pending_writes += 1;
            at += len as u64;
        }
        Ok(at - offset)
    }

    /// Waits for every queued write.
    pub fn drain(&mut self) -> Result<(), DiskError> {
        while self.pending_writes > 0 {
            let done = self.io.wait().map_err(DiskError::Block)?;
            debug_assert_eq!(done.tag, WRITE_TAG);
            self.pending_writes -= 1;
            self.pool.give(done.buf);
        }
        Ok(())
    }

    /// Forgets a file opened with [`DiskIo::open`]; its writes must be
    /// drained.
    pub fn close(&mut self, file: FileId) {
        debug_assert_eq!(self.pending_writes, 0);
        self.io.close(file);
    }

    /// Drains, then syncs the file to the disk.
    pub fn sync(&mut self, file: FileId) -> Result<(), DiskError> {
        self.drain()?;
        self.io.sync(file).map_err(DiskError::Block)
    }
}

/// A work file appended to with O_DIRECT (`blockio::DirectAppender`),
/// its errors naming the file.
pub(super) struct Appender {
    inner: DirectAppender,
    path: PathBuf,
}

impl Appender {
    /// Appends to the empty file at `path` (created, or cut to nothing),
    /// gathering `staging_bytes` (a multiple of [`SEGMENT_ALIGN_BYTES`])
    /// before each write.
    pub fn create(path: &Path, staging_bytes: usize) -> Result<Appender, DiskError> {
        let inner = DirectAppender::create(path, staging_bytes).map_err(|e| io_error("create", path, e))?;
        Ok(Appender { inner, path: path.to_path_buf() })
    }

    /// Appends to the file at `path` from byte `len` on (what it holds
    /// after is cut off).
    pub fn reopen(path: &Path, len: u64, staging_bytes: usize) -> Result<Appender, DiskError> {
        let inner = DirectAppender::reopen(path, len, staging_bytes).map_err(|e| io_error("open", path, e))?;
        Ok(Appender { inner, path: path.to_path_buf() })
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub fn append(&mut self, bytes: &[u8]) -> Result<(), DiskError> {
        self.inner.append(bytes).map_err(|e| io_error("write", &self.path, e))
    }

    /// Writes what is gathered, so that readers see it (see
    /// `DirectAppender::flush`).
    pub fn flush(&mut self) -> Result<(), DiskError> {
        self.inner.flush().map_err(|e| io_error("write", &self.path, e))
    }

    /// Flushes and syncs the file's data to the disk.
    pub fn sync(&mut self) -> Result<(), DiskError> {
        self.inner.sync_data().map_err(|e| io_error("sync", &self.path, e))
    }
}

/// For writers that take `io::Write` (zstd's encoder): a write appends,
/// a flush is [`Appender::flush`]. A full disk stays ENOSPC, so that
/// [`io_error`] names it.
impl io::Write for Appender {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.append(bytes).map_err(into_io)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Appender::flush(self).map_err(into_io)
    }
}

fn into_io(error: DiskError) -> io::Error {
    match error {
        DiskError::Full { .. } => io::Error::from_raw_os_error(libc::ENOSPC),
        DiskError::Io { cause, .. } => cause,
        other => io::Error::other(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small blocks, so that a few pieces make a read of several.
    const BLOCK_BYTES: usize = 16 << 10;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect()
    }

    /// `read_many` reads the file's bytes whether a piece goes straight
    /// into its slice (lent: aligned) or through a pool buffer (copied: not
    /// aligned), with a write still queued, and zero-fills past the file's
    /// end; on both back ends.
    #[test]
    fn read_many_reads_lent_and_copied_pieces_alike() {
        for choice in [IoChoice::Auto, IoChoice::Pread] {
            let dir = tempfile::tempdir().unwrap();
            let file_bytes = 5 * BLOCK_BYTES + 3 * 4096;
            let file = LaneFile::open(&dir.path().join("lane"), true, file_bytes as u64).unwrap();
            let mut disk = DiskIo::new(choice, BLOCK_BYTES, 3).unwrap();
            let id = disk.open(&file).unwrap();
            let data = pattern(file_bytes);
            let mut source = AlignedBuf::zeroed(file_bytes).unwrap();
            source.bytes_mut()[..file_bytes].copy_from_slice(&data);
            disk.write(id, 0, &source.bytes()[..file_bytes]).unwrap();
            disk.drain().unwrap();
            // The same bytes again, left queued while the reads run.
            disk.write(id, 0, &source.bytes()[..BLOCK_BYTES]).unwrap();

            let copied_bytes = 2 * BLOCK_BYTES + 4096;
            let mut lent = AlignedBuf::zeroed(file_bytes).unwrap();
            let mut copied = AlignedBuf::zeroed(copied_bytes + 4096).unwrap();
            let mut tail = AlignedBuf::zeroed(BLOCK_BYTES).unwrap();
            tail.bytes_mut().fill(0xAA);
            let tail_start = (5 * BLOCK_BYTES) as u64;
            let mut requests = [
                (id, 0..file_bytes as u64, &mut lent.bytes_mut()[..file_bytes]),
                (id, 4096..4096 + copied_bytes as u64, &mut copied.bytes_mut()[8..8 + copied_bytes]),
                (id, tail_start..tail_start + BLOCK_BYTES as u64, tail.bytes_mut()),
            ];
            disk.read_many(&mut requests).unwrap();
            disk.drain().unwrap();

            assert_eq!(&lent.bytes()[..file_bytes], &data[..], "{choice}: lent pieces");
            assert_eq!(
                &copied.bytes()[8..8 + copied_bytes],
                &data[4096..4096 + copied_bytes],
                "{choice}: copied pieces"
            );
            let (read, past_end) = tail.bytes().split_at(3 * 4096);
            assert_eq!(read, &data[5 * BLOCK_BYTES..], "{choice}: up to the end");
            assert!(past_end.iter().all(|&b| b == 0), "{choice}: zeros past the end");
            assert_eq!(disk.pool.free(), 3, "{choice}: every pool buffer is back");
        }
    }

    /// A read that fails while lent pieces are out: `read_many` returns the
    /// error only once the kernel is done with every lent piece (their bytes
    /// are in place), every pool buffer is back, and the same `DiskIo`
    /// reads again; on both back ends. (The failing piece is submitted
    /// first, so the others are still out when its error comes back.)
    #[test]
    fn a_failed_read_returns_once_every_lent_piece_is_back() {
        for choice in [IoChoice::Auto, IoChoice::Pread] {
            let dir = tempfile::tempdir().unwrap();
            let file_bytes = 2 * BLOCK_BYTES;
            let file = LaneFile::open(&dir.path().join("lane"), true, file_bytes as u64).unwrap();
            let mut disk = DiskIo::new(choice, BLOCK_BYTES, 3).unwrap();
            let id = disk.open(&file).unwrap();
            let data = pattern(file_bytes);
            let mut source = AlignedBuf::zeroed(file_bytes).unwrap();
            source.bytes_mut().copy_from_slice(&data);
            disk.write(id, 0, source.bytes()).unwrap();
            disk.drain().unwrap();

            let mut failing = AlignedBuf::zeroed(BLOCK_BYTES).unwrap();
            let mut lent = AlignedBuf::zeroed(file_bytes).unwrap();
            // An offset past i64::MAX: pread and io_uring both refuse it
            // (EINVAL).
            let refused = 1u64 << 63;
            let mut requests = [
                (id, refused..refused + BLOCK_BYTES as u64, failing.bytes_mut()),
                (id, 0..file_bytes as u64, lent.bytes_mut()),
            ];
            let error = disk.read_many(&mut requests).unwrap_err();
            assert!(
                matches!(&error, DiskError::Block(IoError::Io { op: "read", .. })),
                "{choice}: a read error, got {error}"
            );
            assert_eq!(lent.bytes(), &data[..], "{choice}: the lent pieces were read before the error returned");
            assert_eq!(disk.pool.free(), 3, "{choice}: every pool buffer is back");

            let mut again = AlignedBuf::zeroed(file_bytes).unwrap();
            disk.read_many(&mut [(id, 0..file_bytes as u64, again.bytes_mut())]).unwrap();
            assert_eq!(again.bytes(), &data[..], "{choice}: reads work after the error");
        }
    }
}
