//! Appending to a file a staging buffer at a time, with O_DIRECT.
//!
//! Owns one file's writes while it is appended to: bytes are gathered in
//! an aligned buffer and written a whole buffer at a time at aligned
//! offsets, so that O_DIRECT takes them. Readers open their own handles.
//! Knows nothing of what the bytes are.
//!
//! Through the page cache, appending was slow next to the solver's
//! O_DIRECT traffic: 8-men 4v4's 2 GB capture schedule, a frame at a time,
//! took 12.4 s of its initialisation's thread (163 MB/s, where the disk
//! takes O_DIRECT writes at 1.5-2 GB/s); appended so, the initialisation
//! took 20 s less (docs/BENCHMARKS.md, session 51).
//!
//! A full staging buffer is written behind, on a thread of the appender's
//! own, while the caller stages into a second buffer: an O_DIRECT write
//! waits behind whatever else the disk has queued (a streamed step's 4 MiB
//! window reads), and the caller, who settles a step's job on the
//! workers' chain, need not wait with it. At 8 men the decision log's
//! appends took 11.1 s of 4v4's first steps' settling so (docs/BENCHMARKS.md,
//! session 69). A failed write is reported by the next call that needs its
//! buffer back, at the latest by [`DirectAppender::flush`].
//!
//! A file made with [`DirectAppender::create_new`] is written under a hidden
//! sibling name ([`unfinished_path`]) and renamed into place once it is
//! whole and synced, so that its own name never shows a part of it: a run
//! killed while writing leaves only the hidden file, and a resumed run can
//! keep every file that has its own name (`store::OutputDir`).

use super::ALIGN_BYTES;
use memmap2::MmapMut;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::{self, JoinHandle};

/// Ends the hidden name a new file has until it is whole.
const UNFINISHED_SUFFIX: &str = ".unfinished";

/// Where [`DirectAppender::create_new`] writes the file for `path` until
/// it is whole: `.<name>.unfinished` beside it.
pub fn unfinished_path(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}{UNFINISHED_SUFFIX}"))
}

/// Appends to one file (see the module docs).
pub struct DirectAppender {
    file: File,
    /// Page-aligned, as O_DIRECT needs (an anonymous mapping).
    staging: MmapMut,
    /// Bytes of `staging` holding appended data.
    staged: usize,
    /// The file offset of `staging`'s first byte (a multiple of
    /// [`ALIGN_BYTES`]).
    at: u64,
    /// The file's first units as appended (whole units), kept for
    /// [`DirectAppender::finish_with_head`]; empty if none are kept.
    head: Vec<u8>,
    /// For a file made by [`DirectAppender::create_new`] and not finished:
    /// where it is being written (removed if the appender is dropped) and
    /// the name it gets when whole.
    unfinished: Option<(PathBuf, PathBuf)>,
    /// The thread that writes full buffers behind, from the first one on.
    behind: Option<WriteBehind>,
    /// Tests: writes behind at or after this offset fail as on a full disk.
    #[cfg(test)]
    fail_from: Option<u64>,
}

/// A full staging buffer for the writer thread: its bytes and where they go.
struct FullBuffer {
    bytes: MmapMut,
    at: u64,
}

/// The writer thread of a [`DirectAppender`] and the buffer it does not
/// stage into: at most one write is in flight, so two buffers in all.
struct WriteBehind {
    /// Closed (None) only on drop, which ends the thread.
    to_write: Option<Sender<FullBuffer>>,
    /// In a mutex only so that the appender is `Sync` (as the work files
    /// that hold one are shared by the workers); reached through
    /// `get_mut`, never locked.
    written: Mutex<Receiver<(MmapMut, io::Result<()>)>>,
    thread: Option<JoinHandle<()>>,
    /// The other buffer, unless it is being written.
    spare: Option<MmapMut>,
    /// A write failed (its OS error, else its kind): every later call
    /// fails too, so that no later flush leaves a hole in the file unsaid.
    failed: Option<(Option<i32>, io::ErrorKind)>,
}

impl WriteBehind {
    /// Starts the thread; `write_at` writes a buffer at an offset of the
    /// file (a test's may fail).
    fn start(
        buffer_bytes: usize,
        write_at: impl Fn(&[u8], u64) -> io::Result<()> + Send + 'static,
    ) -> io::Result<WriteBehind> {
        let spare = MmapMut::map_anon(buffer_bytes)?;
        let (to_write, full) = channel::<FullBuffer>();
        let (done, written) = channel();
        let thread = thread::Builder::new().name("appender".into()).spawn(move || {
            for FullBuffer { bytes, at } in full {
                let result = write_at(&bytes, at);
                if done.send((bytes, result)).is_err() {
                    return;
                }
            }
        })?;
        Ok(WriteBehind {
            to_write: Some(to_write),
            written: Mutex::new(written),
            thread: Some(thread),
            spare: Some(spare),
            failed: None,
        })
    }

    /// The spare buffer, once the write in flight (if any) is done.
    fn take_spare(&mut self) -> io::Result<MmapMut> {
        if let Some((os, kind)) = self.failed {
            return Err(os.map_or_else(|| io::Error::from(kind), io::Error::from_raw_os_error));
        }
        if let Some(spare) = self.spare.take() {
            return Ok(spare);
        }
        let written = self.written.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (bytes, result) = written.recv().map_err(|_| io::Error::other("the appender's writer thread ended"))?;
        self.spare = Some(bytes);
        if let Err(e) = result {
            self.failed = Some((e.raw_os_error(), e.kind()));
            return Err(e);
        }
        Ok(self.spare.take().expect("just returned"))
    }

    /// Waits for the write in flight, if any; its error, if it failed.
    fn wait(&mut self) -> io::Result<()> {
        let spare = self.take_spare()?;
        self.spare = Some(spare);
        Ok(())
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        // The write in flight ends before the file can be opened again (a
        // resumed run cuts it): closing the channel ends the thread.
        self.to_write = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How [`DirectAppender::open`] treats a file already at the path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// Cut to nothing (created if missing).
    Truncate,
    /// Kept up to the given length, the rest cut off.
    KeepUpTo(u64),
}

impl DirectAppender {
    /// Appends to the empty file at `path` (created, or cut to nothing),
    /// gathering `staging_bytes` (a multiple of [`ALIGN_BYTES`]) before
    /// each write.
    pub fn create(path: &Path, staging_bytes: usize) -> io::Result<DirectAppender> {
        DirectAppender::open(path, Existing::Truncate, staging_bytes, true)
    }

    /// Appends to a new file for `path` (which must not exist), keeping a
    /// copy of its first `head_bytes` for [`DirectAppender::finish_with_head`],
    /// which gives it its name: until then it is [`unfinished_path`]`(path)`
    /// (cut to nothing if a killed run left one), removed if the appender
    /// is dropped.
    pub fn create_new(path: &Path, staging_bytes: usize, head_bytes: usize) -> io::Result<DirectAppender> {
        if fs::symlink_metadata(path).is_ok() {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        let hidden = unfinished_path(path);
        let mut appender = DirectAppender::open(&hidden, Existing::Truncate, staging_bytes, true)?;
        appender.head = vec![0; head_bytes.next_multiple_of(ALIGN_BYTES)];
        appender.unfinished = Some((hidden, path.to_path_buf()));
        Ok(appender)
    }

    /// Appends to the file at `path` from byte `len` on (what it holds
    /// after is cut off).
    pub fn reopen(path: &Path, len: u64, staging_bytes: usize) -> io::Result<DirectAppender> {
        DirectAppender::open(path, Existing::KeepUpTo(len), staging_bytes, true)
    }

    fn open(path: &Path, existing: Existing, staging_bytes: usize, direct: bool) -> io::Result<DirectAppender> {
        assert!(staging_bytes > 0 && staging_bytes.is_multiple_of(ALIGN_BYTES), "whole units of staging");
        let len = match existing {
            Existing::KeepUpTo(len) => len,
            _ => 0,
        };
        // Created without O_DIRECT first: a file system that refuses it
        // may have created the file before refusing.
        match existing {
            Existing::Truncate => drop(File::create(path)?),
            Existing::KeepUpTo(_) => {}
        }
        let open = |direct: bool| {
            let mut options = OpenOptions::new();
            options.write(true);
            if direct {
                options.custom_flags(libc::O_DIRECT);
            }
            options.open(path)
        };
        let file = match open(direct) {
            Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => open(false),
            opened => opened,
        }?;
        file.set_len(len)?;
        let mut staging = MmapMut::map_anon(staging_bytes)?;
        // The last partial unit is staged again: appends complete it.
        let at = len / ALIGN_BYTES as u64 * ALIGN_BYTES as u64;
        let staged = (len - at) as usize;
        if staged > 0 {
            File::open(path)?.read_exact_at(&mut staging[..staged], at)?;
        }
        Ok(DirectAppender {
            file,
            staging,
            staged,
            at,
            head: Vec::new(),
            unfinished: None,
            behind: None,
            #[cfg(test)]
            fail_from: None,
        })
    }

    /// Bytes appended so far (the file's length once flushed).
    pub fn len(&self) -> u64 {
        self.at + self.staged as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn append(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = bytes.len().min(self.staging.len() - self.staged);
            self.staging[self.staged..self.staged + n].copy_from_slice(&bytes[..n]);
            (self.staged, bytes) = (self.staged + n, &bytes[n..]);
            if self.staged == self.staging.len() {
                self.write_full_behind()?;
                self.at += self.staged as u64;
                self.staged = 0;
            }
        }
        Ok(())
    }

    /// Appends `count` zero bytes.
    pub fn append_zeros(&mut self, mut count: usize) -> io::Result<()> {
        let zeros = [0u8; ALIGN_BYTES];
        while count > 0 {
            let n = count.min(zeros.len());
            self.append(&zeros[..n])?;
            count -= n;
        }
        Ok(())
    }

    /// Writes what is staged, padded with zeros to a whole unit, and cuts
    /// the file to the bytes appended, so that readers see them all. The
    /// staged bytes stay staged: the next appends fill the same unit, which
    /// is written again.
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(behind) = &mut self.behind {
            behind.wait()?;
        }
        if self.staged > 0 {
            self.write_staged()?;
        }
        self.file.set_len(self.len())
    }

    /// Flushes and syncs the file's data to the disk.
    pub fn sync_data(&mut self) -> io::Result<()> {
        self.flush()?;
        self.file.sync_data()
    }

    /// Flushes, writes `head` over the file's first bytes (at most the
    /// `head_bytes` that [`DirectAppender::create_new`] kept), syncs the
    /// file, its length included, and renames it to its own name: a file
    /// whose header is written last, and that has its name only whole. The
    /// directory is not synced: after a power cut the file may be back
    /// under its hidden name, never under its own name with less in it.
    pub fn finish_with_head(mut self, head: &[u8]) -> io::Result<()> {
        assert!(head.len() <= self.head.len(), "the head was kept");
        self.flush()?;
        let len = self.len();
        self.head[..head.len()].copy_from_slice(head);
        // The kept units again, through the staging buffer (aligned).
        let staging_len = self.staging.len();
        for (k, part) in self.head.chunks(staging_len).enumerate() {
            self.staging[..part.len()].copy_from_slice(part);
            self.file.write_all_at(&self.staging[..part.len()], (k * staging_len) as u64)?;
        }
        // Past a short file's end, the kept units are zeros: cut them off.
        self.file.set_len(len)?;
        self.file.sync_all()?;
        if let Some((hidden, named)) = &self.unfinished {
            fs::rename(hidden, named)?;
            self.unfinished = None;
        }
        Ok(())
    }

    /// Writes what is staged, padded to a whole unit, and waits for it.
    fn write_staged(&mut self) -> io::Result<()> {
        let padded = self.staged.next_multiple_of(ALIGN_BYTES);
        self.staging[self.staged..padded].fill(0);
        keep_head(&mut self.head, self.at, &self.staging[..padded]);
        self.file.write_all_at(&self.staging[..padded], self.at)
    }

    /// Hands the full staging buffer to the writer thread (started the
    /// first time) and stages into the other one from then on.
    fn write_full_behind(&mut self) -> io::Result<()> {
        debug_assert_eq!(self.staged, self.staging.len());
        let behind = match &mut self.behind {
            Some(behind) => behind,
            None => {
                let file = self.file.try_clone()?;
                #[cfg(test)]
                let fail_from = self.fail_from;
                let write_at = move |bytes: &[u8], at: u64| {
                    #[cfg(test)]
                    if fail_from.is_some_and(|from| at >= from) {
                        return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                    }
                    file.write_all_at(bytes, at)
                };
                self.behind.insert(WriteBehind::start(self.staging.len(), write_at)?)
            }
        };
        let spare = behind.take_spare()?;
        let bytes = std::mem::replace(&mut self.staging, spare);
        let to_write = behind.to_write.as_ref().expect("open until dropped");
        keep_head(&mut self.head, self.at, &bytes);
        let full = FullBuffer { bytes, at: self.at };
        to_write.send(full).map_err(|_| io::Error::other("the appender's writer thread ended"))
    }
}

/// Copies into `head` (the file's kept first bytes) those of `bytes`,
/// written at file offset `at`, that fall in it.
fn keep_head(head: &mut [u8], at: u64, bytes: &[u8]) {
    let at = at as usize;
    if at < head.len() {
        let end = head.len().min(at + bytes.len());
        head[at..end].copy_from_slice(&bytes[..end - at]);
    }
}

impl Drop for DirectAppender {
    fn drop(&mut self) {
        // Its write done before the hidden file goes.
        self.behind = None;
        // Not finished: nothing of it may be taken for the whole file.
        if let Some((hidden, _)) = &self.unfinished {
            let _ = fs::remove_file(hidden);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect()
    }

    /// The file holds exactly what was appended, in pieces of any size
    /// across the staging buffer, after each flush (later appends rewrite
    /// the unit a flush padded) and at the end; reopened inside a unit, it
    /// completes that unit; through O_DIRECT (where the temporary directory
    /// allows it) and buffered.
    #[test]
    fn appended_bytes_are_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let staging_bytes = 64 << 10;
        let data = pattern(3 * staging_bytes + 12_345);
        for direct in [true, false] {
            let path = dir.path().join(format!("appended-{direct}"));
            let mut appender = DirectAppender::open(&path, Existing::Truncate, staging_bytes, direct).unwrap();
            let (mut at, mut step, mut flushes) = (0, 1, 0);
            for k in 0.. {
                if at == data.len() {
                    break;
                }
                let end = (at + step).min(data.len());
                appender.append(&data[at..end]).unwrap();
                at = end;
                assert_eq!(appender.len(), at as u64);
                if k % 3 == 1 {
                    flushes += 1;
                    appender.flush().unwrap();
                    assert!(std::fs::read(&path).unwrap() == data[..at], "flushed at {at}, direct {direct}");
                }
                step = step * 3 + 1;
            }
            assert!(flushes > 3);
            appender.sync_data().unwrap();
            assert!(std::fs::read(&path).unwrap() == data, "direct {direct}");
            let len = 2 * staging_bytes + 5000;
            let mut appender =
                DirectAppender::open(&path, Existing::KeepUpTo(len as u64), staging_bytes, direct).unwrap();
            appender.append(&data[len..len + 10_000]).unwrap();
            appender.sync_data().unwrap();
            assert!(std::fs::read(&path).unwrap() == data[..len + 10_000], "reopened, direct {direct}");
        }
    }

    /// A head written last lands over the first bytes, whether the head is
    /// longer than the staging buffer or the file shorter than the head's
    /// units; a new file refuses an existing path, and has its name only
    /// once finished.
    #[test]
    fn a_head_written_last_is_the_files_start() {
        let dir = tempfile::tempdir().unwrap();
        let staging_bytes = 8 << 10;
        for (head_bytes, data_bytes) in [(100, 50_000), (20_000, 70_000), (5000, 1000), (3, 0)] {
            let path = dir.path().join(format!("head-{head_bytes}-{data_bytes}"));
            let data = pattern(data_bytes);
            let head: Vec<u8> = (0..head_bytes).map(|i| !(i as u8)).collect();
            let mut appender = DirectAppender::create_new(&path, staging_bytes, head_bytes).unwrap();
            appender.append_zeros(head_bytes).unwrap();
            appender.append(&data).unwrap();
            appender.flush().unwrap();
            assert!(!path.exists() && unfinished_path(&path).exists(), "hidden until finished");
            appender.finish_with_head(&head).unwrap();
            assert!(!unfinished_path(&path).exists());
            let file = std::fs::read(&path).unwrap();
            assert!(file[..head_bytes] == head[..] && file[head_bytes..] == data[..], "{head_bytes}, {data_bytes}");
            assert!(DirectAppender::create_new(&path, staging_bytes, 0).is_err(), "exists");
        }
    }

    /// A write behind that fails is reported by the next call that needs
    /// its buffer, or by a flush, as the OS error it was; and every call
    /// after it fails too, so that nothing is flushed over the hole.
    #[test]
    fn a_failed_write_behind_is_reported_and_stays_failed() {
        let dir = tempfile::tempdir().unwrap();
        let staging_bytes = 8 << 10;
        let data = pattern(10 * staging_bytes);
        for flush_first in [false, true] {
            let path = dir.path().join(format!("failing-{flush_first}"));
            let mut appender = DirectAppender::create(&path, staging_bytes).unwrap();
            appender.fail_from = Some(2 * staging_bytes as u64);
            // The first two buffers are written; the third is handed over
            // and fails behind the caller's back.
            appender.append(&data[..3 * staging_bytes]).unwrap();
            let error = if flush_first {
                appender.flush().unwrap_err()
            } else {
                appender.append(&data[3 * staging_bytes..]).unwrap_err()
            };
            assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "flush first: {flush_first}");
            assert_eq!(appender.flush().unwrap_err().raw_os_error(), Some(libc::ENOSPC));
            assert_eq!(appender.sync_data().unwrap_err().raw_os_error(), Some(libc::ENOSPC));
            assert!(appender.append(&data[..2 * staging_bytes]).is_err());
            drop(appender);
            let file = std::fs::read(&path).unwrap();
            assert!(file.len() <= 3 * staging_bytes && file[..2 * staging_bytes] == data[..2 * staging_bytes]);
        }
    }

    /// A new file dropped before it is finished leaves nothing, under
    /// either name; one a killed run left hidden is started afresh.
    #[test]
    fn a_new_file_dropped_unfinished_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard");
        std::fs::write(unfinished_path(&path), b"a killed run's").unwrap();
        let mut appender = DirectAppender::create_new(&path, 4096, 100).unwrap();
        appender.append(&pattern(10_000)).unwrap();
        appender.flush().unwrap();
        assert_eq!(std::fs::read(unfinished_path(&path)).unwrap(), pattern(10_000));
        drop(appender);
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing left");
    }
}
