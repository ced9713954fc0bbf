//! The decision log of a streamed material: the states each step decided,
//! appended as the steps go, so that steps neither read nor write the value
//! lane (30 of the 42 bytes per layout a step moved before). Finishing the
//! material applies the log to the value bytes.
//!
//! Owns the log file's byte layout and the cursors that apply it group by
//! group; knows nothing of moves, planes or the value encoding.
//!
//! Layout, little-endian: a sequence of *chunks*, one per (step, group)
//! that decided anything: `group: u32, depth_plies: u16, 0: u16,
//! count: u32`, then `count` entries `layout: u32` (within the group),
//! `states: u32` (the card states decided). A step's chunks are
//! consecutive (its *segment*) and in the order the step visits groups,
//! the schedule's order, which finishing follows too: so finishing reads
//! each segment front to back, a batch of groups at a time.

use super::disk::{DiskError, io_error};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes buffered before they are written, and read at a time when the log
/// is applied: allocated once per streamed material (part of the fixed
/// overhead that DESIGN.md states). Writes go through the page cache, so a
/// larger buffer saves only system calls.
const BUFFER_BYTES: usize = 256 << 10;
const HEADER_BYTES: usize = 12;
/// Bytes of an entry (here and in the capture schedule): layout within its
/// group, then card states, u32 each, little-endian.
pub(super) const ENTRY_BYTES: usize = 8;

/// Writes the entry (`layout`, `states`) into the first [`ENTRY_BYTES`] of
/// `into`.
#[inline]
pub(super) fn put_entry(into: &mut [u8], layout: usize, states: u32) {
    into[..4].copy_from_slice(&(layout as u32).to_le_bytes());
    into[4..ENTRY_BYTES].copy_from_slice(&states.to_le_bytes());
}

/// The entry (layout, states) in the first [`ENTRY_BYTES`] of `bytes`.
#[inline]
pub(super) fn entry(bytes: &[u8]) -> (usize, u32) {
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    (word(&bytes[..4]) as usize, word(&bytes[4..ENTRY_BYTES]))
}

/// Where a log stands at a checkpoint: its length and the start of each
/// step's segment, with the step's depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LogMark {
    pub bytes: u64,
    pub segments: Vec<(u16, u64)>,
}

pub(super) struct DecisionLog {
    file: File,
    path: PathBuf,
    /// Bytes in the file; the buffer's bytes follow them.
    written: u64,
    /// Start of each step's segment, with the step's depth.
    segments: Vec<(u16, u64)>,
    buffer: Vec<u8>,
    /// Per segment, where applying it has got to (finishing only).
    cursors: Vec<u64>,
}

impl DecisionLog {
    /// Creates an empty log (a fresh start of the pair).
    pub fn create(path: &Path) -> Result<DecisionLog, DiskError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io_error("create", path, e))?;
        Ok(DecisionLog::with(file, path, LogMark { bytes: 0, segments: Vec::new() }))
    }

    /// Opens the log a checkpoint names, cut back to its length there (a
    /// killed run may have appended more; the resumed run appends it again).
    pub fn reopen(path: &Path, mark: LogMark) -> Result<DecisionLog, DiskError> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| io_error("open", path, e))?;
        let found = file.metadata().map_err(|e| io_error("inspect", path, e))?.len();
        let sorted = mark.segments.windows(2).all(|w| w[0].1 <= w[1].1);
        if found < mark.bytes || !sorted || mark.segments.last().is_some_and(|s| s.1 > mark.bytes) {
            let what = "shorter than the checkpoint records";
            return Err(DiskError::Damaged { path: path.to_path_buf(), what });
        }
        file.set_len(mark.bytes).map_err(|e| io_error("truncate", path, e))?;
        Ok(DecisionLog::with(file, path, mark))
    }

    fn with(file: File, path: &Path, mark: LogMark) -> DecisionLog {
        DecisionLog {
            file,
            path: path.to_path_buf(),
            written: mark.bytes,
            segments: mark.segments,
            buffer: Vec::with_capacity(BUFFER_BYTES),
            cursors: Vec::new(),
        }
    }

    /// Starts the segment of the step at `depth_plies`.
    pub fn begin_step(&mut self, depth_plies: u16) {
        self.segments.push((depth_plies, self.len()));
    }

    fn len(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }

    /// Encodes one group's decisions in a step (`decided[n]`: the card
    /// states of its layout n decided) as the entries of a chunk into
    /// `into`, which must hold 8 bytes per nonzero word; returns the bytes
    /// written. Touches nothing else, so that the groups of a batch are
    /// encoded in parallel (serially it was 3.9% of an 8-men run, on the
    /// thread that drives the step while the workers wait).
    pub fn encode(decided: &[u32], into: &mut [u8]) -> usize {
        assert!(decided.len() <= u32::MAX as usize, "group too large for the log");
        let mut len = 0;
        for (n, &states) in decided.iter().enumerate() {
            if states != 0 {
                put_entry(&mut into[len..], n, states);
                len += ENTRY_BYTES;
            }
        }
        len
    }

    /// Appends the chunk of `group` in the current step, its entries as
    /// [`DecisionLog::encode`] made them (nothing if there are none).
    pub fn append_encoded(&mut self, group: usize, entries: &[u8]) -> Result<(), DiskError> {
        let &(depth_plies, _) = self.segments.last().expect("a step has begun");
        if entries.is_empty() {
            return Ok(());
        }
        assert!(group <= u32::MAX as usize, "group too large for the log");
        let mut header = [0u8; HEADER_BYTES];
        header[0..4].copy_from_slice(&(group as u32).to_le_bytes());
        header[4..6].copy_from_slice(&depth_plies.to_le_bytes());
        header[8..12].copy_from_slice(&((entries.len() / ENTRY_BYTES) as u32).to_le_bytes());
        self.put(&header)?;
        if entries.len() <= BUFFER_BYTES / 2 {
            return self.put(entries);
        }
        // Large chunks go straight to the file, not through the buffer.
        self.flush()?;
        self.file.write_all_at(entries, self.written).map_err(|e| io_error("write", &self.path, e))?;
        self.written += entries.len() as u64;
        Ok(())
    }

    /// [`DecisionLog::encode`] and [`DecisionLog::append_encoded`] in one.
    #[cfg(test)]
    fn append(&mut self, group: usize, decided: &[u32]) -> Result<(), DiskError> {
        let mut entries = vec![0u8; decided.len() * ENTRY_BYTES];
        let len = DecisionLog::encode(decided, &mut entries);
        self.append_encoded(group, &entries[..len])
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), DiskError> {
        if self.buffer.len() + bytes.len() > BUFFER_BYTES {
            self.flush()?;
        }
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), DiskError> {
        self.file.write_all_at(&self.buffer, self.written).map_err(|e| io_error("write", &self.path, e))?;
        self.written += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    /// Writes out what is buffered and syncs the file; returns the mark a
    /// checkpoint taken now must record.
    pub fn sync(&mut self) -> Result<LogMark, DiskError> {
        self.flush()?;
        self.file.sync_data().map_err(|e| io_error("sync", &self.path, e))?;
        Ok(LogMark { bytes: self.written, segments: self.segments.clone() })
    }

    /// Applies the log to a batch of groups: calls `visit(group, depth,
    /// layout, states)` for every entry of the groups in `batch`, step by
    /// step. Batches must come in the order the steps visited groups
    /// (`is_later(g)`: does group g come after every group of the batch in
    /// that order?); each segment is read from where the last batch left it.
    pub fn apply(
        &mut self,
        batch: &[usize],
        is_later: impl Fn(usize) -> bool,
        mut visit: impl FnMut(usize, u16, usize, u32),
    ) -> Result<(), DiskError> {
        self.flush()?;
        if self.cursors.is_empty() {
            self.cursors = self.segments.iter().map(|s| s.1).collect();
        }
        for s in 0..self.segments.len() {
            let end = self.segments.get(s + 1).map_or(self.written, |next| next.1);
            while self.cursors[s] < end {
                let mut header = [0u8; HEADER_BYTES];
                self.read_at(&mut header, self.cursors[s])?;
                let group = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
                let depth = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
                let count = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes")) as u64;
                if !batch.contains(&group) {
                    // A chunk of a group the batches passed would be lost.
                    assert!(is_later(group), "decision log of group {group} out of the schedule's order");
                    break;
                }
                let mut at = self.cursors[s] + HEADER_BYTES as u64;
                let chunk_end = at + count * ENTRY_BYTES as u64;
                assert!(chunk_end <= end, "decision log chunk runs past its step");
                while at < chunk_end {
                    let len = ((chunk_end - at) as usize).min(BUFFER_BYTES / ENTRY_BYTES * ENTRY_BYTES);
                    let mut buffer = std::mem::take(&mut self.buffer);
                    buffer.resize(len, 0);
                    let read = self.read_at(&mut buffer, at);
                    for bytes in buffer.chunks_exact(ENTRY_BYTES) {
                        let (layout, states) = entry(bytes);
                        visit(group, depth, layout, states);
                    }
                    buffer.clear();
                    self.buffer = buffer;
                    read?;
                    at += len as u64;
                }
                self.cursors[s] = chunk_end;
            }
        }
        Ok(())
    }

    fn read_at(&self, into: &mut [u8], at: u64) -> Result<(), DiskError> {
        self.file.read_exact_at(into, at).map_err(|e| io_error("read", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two steps over groups 3, 5 and 8 (schedule order 8, 3, 5), applied
    /// in two batches, after a reopen that cuts off a killed run's tail.
    #[test]
    fn entries_come_back_per_batch_in_step_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path).unwrap();
        log.begin_step(1);
        log.append(8, &[0, 5, 0]).unwrap();
        log.append(3, &[0, 0]).unwrap();
        log.append(5, &[7]).unwrap();
        let mark = log.sync().unwrap();
        log.begin_step(2);
        log.append(3, &[1, 2]).unwrap();
        log.append(5, &[9]).unwrap();
        // A resumed run starts again from the mark.
        let mut log = DecisionLog::reopen(&path, mark.clone()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), mark.bytes);
        log.begin_step(2);
        log.append(3, &[1, 2]).unwrap();
        log.append(5, &[9]).unwrap();
        let rank = |g: usize| [8, 3, 5].iter().position(|&x| x == g).unwrap();
        let mut seen = Vec::new();
        log.apply(&[8], |g| rank(g) > 0, |g, d, n, s| seen.push((g, d, n, s))).unwrap();
        assert_eq!(seen, vec![(8, 1, 1, 5)]);
        seen.clear();
        log.apply(&[3, 5], |g| rank(g) > 2, |g, d, n, s| seen.push((g, d, n, s))).unwrap();
        assert_eq!(seen, vec![(5, 1, 0, 7), (3, 2, 0, 1), (3, 2, 1, 2), (5, 2, 0, 9)]);
    }

    /// A chunk longer than the append batch and the buffer comes back whole.
    #[test]
    fn long_chunks_come_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::create(&dir.path().join("log")).unwrap();
        let decided: Vec<u32> = (0..100_000u32).map(|n| if n % 3 == 1 { 0 } else { n | 1 }).collect();
        log.begin_step(7);
        log.append(4, &decided).unwrap();
        let mut seen = Vec::new();
        log.apply(&[4], |_| false, |g, d, n, s| seen.push((g, d, n, s))).unwrap();
        let wanted: Vec<_> = (0..decided.len()).filter(|&n| decided[n] != 0).map(|n| (4, 7, n, decided[n])).collect();
        assert_eq!(seen, wanted);
    }

    #[test]
    fn a_log_shorter_than_its_mark_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path).unwrap();
        log.begin_step(1);
        log.append(0, &[1]).unwrap();
        let mut mark = log.sync().unwrap();
        mark.bytes += 1;
        assert!(matches!(DecisionLog::reopen(&path, mark), Err(DiskError::Damaged { .. })));
    }
}
