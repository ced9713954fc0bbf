//! The capture schedule of a streamed material: for each group and each
//! depth at which capture values of its states fall due, which states they
//! are. Written once, by initialisation; a step at depth d then reads only
//! the (group, d) part instead of the group's 30 value bytes per layout.
//!
//! Owns the schedule file's byte layout, its index and the index file;
//! knows nothing of moves, planes or the value encoding.
//!
//! `<material>.captures`: per group (in the order initialisation writes
//! them), per depth in increasing order, a *chunk*: frames (see
//! [`super::entries`]) of entries `(layout, states)` (layout within the
//! group, in increasing order; the card states whose capture value falls
//! due at that depth). zstd makes the 6-men 3v3 schedule 2.44 times smaller.
//! `<material>.captures-index`: where each group's chunks are and how many
//! entries each holds (see [`ScheduleIndex::to_bytes`]), with a crc32,
//! written and synced at the end of initialisation.

use super::disk::{Appender, DiskError, io_error};
use super::entries::{self, ENTRY_BYTES, FRAME_BYTES, FRAME_ENTRIES, FRAME_HEADER_BYTES, Unpacker, put_entry};
use super::lanes::carve_mut;
use crate::rules::{ALL_CARD_STATES, CARD_STATES};
use rayon::prelude::*;
use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const INDEX_MAGIC: &[u8; 8] = b"onitbcs2";

/// Where each group's chunks are in the schedule file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ScheduleIndex {
    /// Per group, the file offset of its first chunk.
    group_offset: Vec<u64>,
    /// Per group, the range of its chunks in `chunk_depth`,
    /// `chunk_entries` and `chunk_bytes` (groups are written in schedule
    /// order, so the ranges are not in group order).
    group_chunks: Vec<(u32, u32)>,
    chunk_depth: Vec<u16>,
    chunk_entries: Vec<u32>,
    chunk_bytes: Vec<u32>,
}

impl ScheduleIndex {
    fn new(groups: usize) -> ScheduleIndex {
        ScheduleIndex {
            group_offset: vec![0; groups],
            group_chunks: vec![(0, 0); groups],
            chunk_depth: Vec::new(),
            chunk_entries: Vec::new(),
            chunk_bytes: Vec::new(),
        }
    }

    /// File byte range of group `g`'s chunk at `depth_plies` and the number
    /// of entries it holds (empty and 0 if none).
    pub fn chunk(&self, g: usize, depth_plies: u16) -> (Range<u64>, usize) {
        let chunks = self.group_chunks[g].0 as usize..self.group_chunks[g].1 as usize;
        let mut at = self.group_offset[g];
        for c in chunks {
            let bytes = self.chunk_bytes[c] as u64;
            if self.chunk_depth[c] == depth_plies {
                return (at..at + bytes, self.chunk_entries[c] as usize);
            }
            at += bytes;
        }
        (at..at, 0)
    }

    /// The index as bytes: magic, group count, chunk count (u64 each after
    /// the magic), then the five arrays little-endian, then a crc32 of all
    /// before it.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = INDEX_MAGIC.to_vec();
        out.extend_from_slice(&(self.group_offset.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.chunk_depth.len() as u64).to_le_bytes());
        self.group_offset.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        for (first, end) in &self.group_chunks {
            out.extend_from_slice(&first.to_le_bytes());
            out.extend_from_slice(&end.to_le_bytes());
        }
        self.chunk_depth.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        self.chunk_entries.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        self.chunk_bytes.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses [`ScheduleIndex::to_bytes`]; None if the bytes are not an
    /// index of `groups` groups.
    fn from_bytes(bytes: &[u8], groups: usize) -> Option<ScheduleIndex> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32fast::hash(body).to_le_bytes() != crc || !body.starts_with(INDEX_MAGIC) {
            return None;
        }
        let mut rest = &body[INDEX_MAGIC.len()..];
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let group_count = word(take(8)?);
        let chunk_count = word(take(8)?) as usize;
        if group_count != groups as u64 || chunk_count > body.len() {
            return None;
        }
        let group_offset = take(8 * groups)?.chunks(8).map(word).collect();
        let pair = |b: &[u8]| {
            let half = |h: &[u8]| u32::from_le_bytes(h.try_into().expect("4 bytes"));
            (half(&b[..4]), half(&b[4..]))
        };
        let group_chunks: Vec<(u32, u32)> = take(8 * groups)?.chunks(8).map(pair).collect();
        let chunk_depth = take(2 * chunk_count)?.chunks(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
        let u32s = |b: &[u8]| b.chunks(4).map(|b| u32::from_le_bytes(b.try_into().expect("4"))).collect();
        let chunk_entries = u32s(take(4 * chunk_count)?);
        let chunk_bytes = u32s(take(4 * chunk_count)?);
        let in_bounds = group_chunks.iter().all(|&(first, end)| first <= end && end as usize <= chunk_count);
        if !rest.is_empty() || !in_bounds {
            return None;
        }
        Some(ScheduleIndex { group_offset, group_chunks, chunk_depth, chunk_entries, chunk_bytes })
    }
}

/// A frame's entries before they are packed, with the number of its
/// chunk among those [`CaptureSchedule::write_chunks`] writes.
type RawFrame<'a> = (usize, &'a [u8]);

/// Bytes the schedule's appender gathers before it writes them: few
/// writes (2,000 for 8-men 4v4's 2 GB schedule), little memory.
const APPEND_STAGING_BYTES: usize = 1 << 20;

/// The capture schedule of one material.
pub(super) struct CaptureSchedule {
    /// Read (by the steps) and punched (once they are over).
    file: File,
    path: PathBuf,
    index_path: PathBuf,
    index: ScheduleIndex,
    /// What initialisation writes the frames through (its length is the
    /// bytes written so far); none once the schedule is sealed or reopened.
    appender: Option<Appender>,
    /// Entries of the chunk being written not yet in a frame, and one
    /// frame, packed (initialisation): a chunk's frames are full but for
    /// its last, so that a chunk takes at most [`entries::frames_bound`] of
    /// its entries whatever the pieces it comes in.
    pending: Vec<u8>,
    frame: Vec<u8>,
    /// Where [`CaptureSchedule::write_chunks`] packs frames when the
    /// caller lends it no memory (initialisation with one window): room
    /// for two full frames per thread, made at its first such call.
    packed: Vec<u8>,
}

fn paths(dir: &Path, material: impl std::fmt::Display) -> (PathBuf, PathBuf) {
    (dir.join(format!("{material}.captures")), dir.join(format!("{material}.captures-index")))
}

impl CaptureSchedule {
    /// Frees the schedule's disk (the file keeps its size, reads as zeros):
    /// once a pair's steps are over and recorded, nothing reads it again.
    pub fn release(&self) -> Result<(), DiskError> {
        let len = self.file.metadata().map_err(|e| io_error("inspect", &self.path, e))?.len();
        super::disk::punch(&self.file, &self.path, 0..len).map(drop)
    }
}

/// Removes a material's schedule files (missing files are fine).
pub(super) fn remove(dir: &Path, material: impl std::fmt::Display) {
    let (path, index_path) = paths(dir, material);
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(index_path);
}

impl CaptureSchedule {
    /// An empty schedule, to be written by initialisation.
    pub fn create(dir: &Path, material: impl std::fmt::Display, groups: usize) -> Result<CaptureSchedule, DiskError> {
        let (path, index_path) = paths(dir, material);
        let appender = Some(Appender::create(&path, APPEND_STAGING_BYTES)?);
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| io_error("open", &path, e))?;
        let (pending, frame) = (Vec::with_capacity(FRAME_BYTES), vec![0; entries::frames_bound(FRAME_ENTRIES)]);
        let index = ScheduleIndex::new(groups);
        let packed = Vec::new();
        Ok(CaptureSchedule { file, path, index_path, index, appender, pending, frame, packed })
    }

    /// The schedule an earlier run's initialisation wrote.
    pub fn reopen(dir: &Path, material: impl std::fmt::Display, groups: usize) -> Result<CaptureSchedule, DiskError> {
        let (path, index_path) = paths(dir, material);
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(|e| io_error("open", &path, e))?;
        let bytes = std::fs::read(&index_path).map_err(|e| io_error("read", &index_path, e))?;
        let found = file.metadata().map_err(|e| io_error("inspect", &path, e))?.len();
        let index = ScheduleIndex::from_bytes(&bytes, groups)
            .ok_or_else(|| DiskError::Damaged { path: index_path.clone(), what: "not a capture schedule index" })?;
        let end = (0..groups).map(|g| index.chunk(g, u16::MAX).0.end).max().unwrap_or(0);
        if found < end {
            return Err(DiskError::Size { path, found, expected: end });
        }
        let (pending, frame, packed) = (Vec::new(), Vec::new(), Vec::new());
        Ok(CaptureSchedule { file, path, index_path, index, appender: None, pending, frame, packed })
    }

    /// Starts writing group `g`'s chunks (each group once, by
    /// initialisation).
    pub fn begin_group(&mut self, g: usize) -> Result<(), DiskError> {
        self.write_frame()?;
        let first = self.index.chunk_depth.len() as u32;
        self.index.group_offset[g] = self.appender.as_ref().expect("a schedule being written").len();
        self.index.group_chunks[g] = (first, first);
        Ok(())
    }

    /// Appends entries (as bytes) of the group begun last at `depth_plies`.
    /// Depths come in increasing order; one depth's entries may come in
    /// several pieces.
    pub fn write(&mut self, g: usize, depth_plies: u16, entries: &[u8]) -> Result<(), DiskError> {
        debug_assert_eq!(entries.len() % ENTRY_BYTES, 0);
        let (first, end) = self.index.group_chunks[g];
        debug_assert_eq!(end as usize, self.index.chunk_depth.len(), "group {g} is the one begun last");
        if !(end > first && self.index.chunk_depth[end as usize - 1] == depth_plies) {
            self.write_frame()?;
            let index = &mut self.index;
            assert!(end == first || index.chunk_depth[end as usize - 1] < depth_plies, "chunks in increasing depth");
            index.chunk_depth.push(depth_plies);
            index.chunk_entries.push(0);
            index.chunk_bytes.push(0);
            index.group_chunks[g].1 += 1;
        }
        let mut rest = entries;
        while !rest.is_empty() {
            let (now, later) = rest.split_at((FRAME_BYTES - self.pending.len()).min(rest.len()));
            self.pending.extend_from_slice(now);
            rest = later;
            if self.pending.len() == FRAME_BYTES {
                self.write_frame()?;
            }
        }
        Ok(())
    }

    /// Writes chunks of the group begun last: `(depth_plies, entries as
    /// bytes)`, depths in increasing order and with no entries written yet,
    /// packing their frames in parallel in `lent` (the idle second window's
    /// memory, at initialisation), or in a buffer of the schedule's own if
    /// none is lent or it is smaller than two full frames. The frames are
    /// those [`CaptureSchedule::write`] makes of the same entries.
    ///
    /// The area's halves take turns: while the workers pack a wave of
    /// frames (as many as one half holds by their bounds) into one, the
    /// frames packed into the other are appended to the file. (Packed a
    /// chunk at a time, packing ran on one thread and the schedule took
    /// more than half of 8-men 4v4's initialisation; in waves of four
    /// frames, with appending after each wave, it still took 44 s of its
    /// 92, the appends 13 s of them: docs/BENCHMARKS.md, session 51.)
    pub fn write_chunks(
        &mut self,
        g: usize,
        chunks: &[(u16, &[u8])],
        lent: Option<&mut [u8]>,
    ) -> Result<(), DiskError> {
        debug_assert!(chunks.iter().all(|(_, entries)| entries.len() % ENTRY_BYTES == 0));
        let smallest = 2 * entries::frames_bound(FRAME_ENTRIES);
        let mut own = std::mem::take(&mut self.packed);
        let area = match lent {
            Some(area) if area.len() >= smallest => area,
            _ => {
                if own.is_empty() {
                    own = vec![0; rayon::current_num_threads().max(1) * smallest];
                }
                &mut own[..]
            }
        };
        let written = self.pack_and_append(g, chunks, area);
        self.packed = own;
        written
    }

    /// [`CaptureSchedule::write_chunks`] in `area`.
    fn pack_and_append(&mut self, g: usize, chunks: &[(u16, &[u8])], area: &mut [u8]) -> Result<(), DiskError> {
        // In file order.
        let frames: Vec<RawFrame> = (chunks.iter().enumerate())
            .flat_map(|(c, (_, entries))| entries.chunks(FRAME_BYTES).map(move |frame| (c, frame)))
            .collect();
        let bound = |raw: &[u8]| entries::frames_bound(raw.len() / ENTRY_BYTES);
        let half = (area.len() / 2).min(WAVE_FULL_FRAMES * entries::frames_bound(FRAME_ENTRIES));
        assert!(half >= entries::frames_bound(FRAME_ENTRIES), "half the area holds a full frame");
        // Waves: runs of frames whose bounds fit a half together.
        let mut waves: Vec<Range<usize>> = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, &(_, raw)) in frames.iter().enumerate() {
            if bytes + bound(raw) > half {
                waves.push(start..i);
                (start, bytes) = (i, 0);
            }
            bytes += bound(raw);
        }
        waves.push(start..frames.len());
        let (first, second) = area.split_at_mut(half);
        let mut halves = [first, second];
        // Chunks before `opened` are begun (an empty one has no frame).
        let mut opened = 0;
        // The wave packed last, with its frames' lengths, in `halves[w % 2]`.
        let mut packed: Option<(usize, Vec<usize>)> = None;
        for (w, wave) in waves.iter().enumerate() {
            let [first, second] = &mut halves;
            let (now, before) = if w % 2 == 0 { (first, &*second) } else { (second, &*first) };
            let frames_now = &frames[wave.clone()];
            let pack = || -> Vec<usize> {
                let mut regions = Vec::with_capacity(frames_now.len());
                let mut rest = &mut now[..];
                for &(_, raw) in frames_now {
                    let (region, after) = rest.split_at_mut(bound(raw));
                    regions.push(region);
                    rest = after;
                }
                regions
                    .into_par_iter()
                    .zip(frames_now)
                    .map(|(into, &(_, raw))| entries::pack_frame(raw, into))
                    .collect()
            };
            let last = packed.take();
            let append = || match last {
                Some((w, lens)) => self.append_wave(g, chunks, (&frames[waves[w].clone()], before, &lens), &mut opened),
                None => Ok(()),
            };
            let (lens, appended) = rayon::join(pack, append);
            appended?;
            packed = Some((w, lens));
        }
        if let Some((w, lens)) = packed {
            let [first, second] = &halves;
            let area = if w % 2 == 0 { first } else { second };
            self.append_wave(g, chunks, (&frames[waves[w].clone()], area, &lens), &mut opened)?;
        }
        chunks[opened..].iter().try_for_each(|&(depth, _)| self.begin_chunk(g, depth))
    }

    /// Appends a wave of frames packed side by side in `area` (each at the
    /// start of a region of its bound, `lens` bytes long), beginning their
    /// chunks and any empty ones before them.
    fn append_wave(
        &mut self,
        g: usize,
        chunks: &[(u16, &[u8])],
        (frames, area, lens): (&[RawFrame], &[u8], &[usize]),
        opened: &mut usize,
    ) -> Result<(), DiskError> {
        let mut at = 0;
        for (&(c, raw), &len) in frames.iter().zip(lens) {
            for &(depth, _) in &chunks[*opened..=c] {
                self.begin_chunk(g, depth)?;
            }
            *opened = (*opened).max(c + 1);
            self.append_frame(&area[at..at + len], raw.len() / ENTRY_BYTES)?;
            at += entries::frames_bound(raw.len() / ENTRY_BYTES);
        }
        Ok(())
    }

    /// Begins group `g`'s chunk at `depth_plies`, one with no entries yet.
    fn begin_chunk(&mut self, g: usize, depth_plies: u16) -> Result<(), DiskError> {
        self.write(g, depth_plies, &[])?;
        debug_assert!(self.pending.is_empty(), "a new chunk starts with no pending entries");
        debug_assert_eq!(self.index.chunk_entries.last(), Some(&0), "the chunk is new");
        Ok(())
    }

    /// Writes the pending entries as a frame of the last chunk.
    fn write_frame(&mut self) -> Result<(), DiskError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let count = self.pending.len() / ENTRY_BYTES;
        let mut frame = std::mem::take(&mut self.frame);
        let len = entries::pack_frame(&self.pending, &mut frame);
        self.pending.clear();
        let appended = self.append_frame(&frame[..len], count);
        self.frame = frame;
        appended
    }

    /// Appends a packed frame of `count` entries to the last chunk.
    fn append_frame(&mut self, frame: &[u8], count: usize) -> Result<(), DiskError> {
        self.appender.as_mut().expect("a schedule being written").append(frame)?;
        let last = self.index.chunk_depth.len() - 1;
        let index = &mut self.index;
        let count = u32::try_from(count).expect("a frame's entries fit a u32");
        index.chunk_entries[last] = index.chunk_entries[last].checked_add(count).expect("entries fit a u32");
        index.chunk_bytes[last] = index.chunk_bytes[last].checked_add(frame.len() as u32).expect("a chunk fits 4 GB");
        Ok(())
    }

    /// Syncs the schedule and writes (and syncs) its index: the end of
    /// initialisation.
    pub fn seal(&mut self) -> Result<(), DiskError> {
        self.write_frame()?;
        self.appender.take().expect("a schedule being written").sync()?;
        let temp = self.index_path.with_extension("tmp");
        std::fs::write(&temp, self.index.to_bytes()).map_err(|e| io_error("write", &temp, e))?;
        File::open(&temp).and_then(|f| f.sync_all()).map_err(|e| io_error("sync", &temp, e))?;
        std::fs::rename(&temp, &self.index_path).map_err(|e| io_error("rename", &self.index_path, e))
    }

    #[cfg(test)]
    pub fn index(&self) -> &ScheduleIndex {
        &self.index
    }

    /// Most bytes a chunk of a group of `layouts` layouts takes: what
    /// [`CaptureSchedule::read_due`] reads it into.
    pub fn chunk_bound(layouts: usize) -> usize {
        entries::frames_bound(layouts)
    }

    /// Calls `visit(layout, states)` for each entry of group `g`'s chunk
    /// at `depth_plies`, read into `scratch` (which must hold
    /// [`CaptureSchedule::chunk_bound`] of the group's `layouts`); returns
    /// the bytes read.
    #[cfg(test)]
    pub fn for_each_due(
        &self,
        at: (usize, u16),
        layouts: usize,
        scratch: &mut [u8],
        unpacker: &mut Unpacker,
        visit: impl FnMut(usize, u32),
    ) -> Result<u64, DiskError> {
        let read = self.read_due(at, scratch)?;
        self.unpack_due(at, layouts, scratch, unpacker, visit)?;
        Ok(read)
    }

    /// Reads group `g`'s chunk at `depth_plies` into the front of `scratch`
    /// (which must hold [`CaptureSchedule::chunk_bound`] of the group's
    /// layouts), for [`CaptureSchedule::unpack_due`]; returns the bytes
    /// read. (Streamed steps read on the thread that stores and reads, and
    /// unpack on the workers.)
    pub fn read_due(&self, (g, depth_plies): (usize, u16), scratch: &mut [u8]) -> Result<u64, DiskError> {
        let (range, _) = self.index.chunk(g, depth_plies);
        let len = (range.end - range.start) as usize;
        let damaged = |what| DiskError::Damaged { path: self.path.clone(), what };
        let bytes = scratch.get_mut(..len).ok_or(damaged("a chunk is longer than its group allows"))?;
        self.file.read_exact_at(bytes, range.start).map_err(|e| io_error("read", &self.path, e))?;
        Ok(len as u64)
    }

    /// Calls `visit(layout, states)` for each entry of group `g`'s chunk
    /// at `depth_plies`, which [`CaptureSchedule::read_due`] read into
    /// `scratch`. Every layout visited is below the group's `layouts`, and
    /// its states are card states (not none): an entry that is not is
    /// refused as damage, not passed on to index a segment.
    pub fn unpack_due(
        &self,
        (g, depth_plies): (usize, u16),
        layouts: usize,
        scratch: &[u8],
        unpacker: &mut Unpacker,
        mut visit: impl FnMut(usize, u32),
    ) -> Result<(), DiskError> {
        let (range, count) = self.index.chunk(g, depth_plies);
        let len = (range.end - range.start) as usize;
        let damaged = |what| DiskError::Damaged { path: self.path.clone(), what };
        let bytes = scratch.get(..len).ok_or(damaged("a chunk is longer than its group allows"))?;
        let (mut at, mut seen) = (0, 0);
        while at < len {
            let header = bytes.get(at..at + FRAME_HEADER_BYTES).ok_or(damaged("a frame runs past its chunk"))?;
            let header =
                entries::frame_header(header.try_into().expect("a frame header")).map_err(|e| damaged(e.what()))?;
            let start = at + FRAME_HEADER_BYTES;
            let packed = bytes.get(start..start + header.compressed).ok_or(damaged("a frame runs past its chunk"))?;
            // Each entry is checked before it is visited (a visit writes at
            // its layout), and none after a bad one is.
            let mut wrong = None;
            let check = |n: usize, states: u32| {
                if n >= layouts {
                    Some("an entry names a layout beyond its group")
                } else if states == 0 || states & !ALL_CARD_STATES != 0 {
                    Some("an entry names card states that do not exist")
                } else {
                    None
                }
            };
            let visit_checked = |n, states| {
                if wrong.is_none() {
                    wrong = check(n, states);
                    if wrong.is_none() {
                        visit(n, states);
                    }
                }
            };
            unpacker.for_each(&header, packed, visit_checked).map_err(|e| damaged(e.what()))?;
            if let Some(what) = wrong {
                return Err(damaged(what));
            }
            seen += header.entries;
            at = start + header.compressed;
        }
        if seen != count {
            return Err(damaged("a chunk holds another number of entries than its index says"));
        }
        Ok(())
    }
}

/// Most full frames in a wave of [`CaptureSchedule::write_chunks`]: few
/// enough that a big group's frames come in several waves, so that
/// appending one wave overlaps packing the next (4.7 MB a wave).
const WAVE_FULL_FRAMES: usize = 32;

/// Layouts per part of a group that [`write_group`] sorts in parallel
/// (parts are at most [`MAX_PARTS`]).
const PART_LAYOUTS: usize = 4096;
const MAX_PARTS: usize = 64;

/// Writes group `g`'s chunks from its capture plane (`capture[n]`: card
/// states of layout n with a capture value), its value bytes (30 per
/// layout) and the depth at which a capture value falls due
/// (`depth_of(byte)`, None for a draw: never; distinct bytes fall due at
/// distinct depths), using `scratch` to sort entries by depth (several
/// passes over the group if they do not fit at once), and `packing` to
/// pack them in if lent (see [`CaptureSchedule::write_chunks`]). Parts of
/// the group are counted and placed in parallel (a counting sort: each
/// part's entries of a depth go to their own range, parts in order, so a
/// depth's entries stay in layout order).
pub(super) fn write_group(
    schedule: &mut CaptureSchedule,
    g: usize,
    (capture, values): (&[u32], &[u8]),
    depth_of: impl Fn(u8) -> Option<u16>,
    scratch: &mut [u8],
    mut packing: Option<&mut [u8]>,
) -> Result<(), DiskError> {
    debug_assert_eq!(values.len(), capture.len() * CARD_STATES);
    schedule.begin_group(g)?;
    // Entries are counted and placed by value byte, not by depth: a byte is
    // one depth, looked up once per group instead of once per entry.
    let part_len = capture.len().div_ceil(MAX_PARTS).max(PART_LAYOUTS);
    let parts: Vec<Range<usize>> =
        (0..capture.len()).step_by(part_len).map(|s| s..(s + part_len).min(capture.len())).collect();
    // Per part, entries by value byte (draws too: counted, never placed).
    let part_counts: Vec<[u64; 256]> = parts
        .par_iter()
        .map(|part| {
            let mut counts = [0u64; 256];
            for n in part.clone().filter(|&n| capture[n] != 0) {
                for_each_entry(&values[n * CARD_STATES..][..CARD_STATES], capture[n], |byte, _| {
                    counts[byte as usize] += 1
                });
            }
            counts
        })
        .collect();
    // Entries by depth, and the depths with any, in increasing order.
    let (mut counts, mut byte_of_depth) = (vec![0u64; 256], [None; 256]);
    for byte in 0..=u8::MAX {
        let entries: u64 = part_counts.iter().map(|c| c[byte as usize]).sum();
        let Some(depth) = depth_of(byte).filter(|_| entries > 0) else { continue };
        assert!(depth < 256, "a capture value falls due within 255 plies");
        assert!(byte_of_depth[depth as usize].replace(byte).is_none(), "one value byte per depth");
        counts[depth as usize] = entries;
    }
    let capacity = (scratch.len() / ENTRY_BYTES) as u64;
    assert!(capacity > 0, "scratch holds an entry");
    let depths: Vec<u16> = (0..counts.len()).filter(|&d| counts[d] > 0).map(|d| d as u16).collect();
    let mut i = 0;
    while i < depths.len() {
        // The next run of depths whose entries fit the scratch together
        // (at least one depth: one too big for it is written in pieces).
        let mut end = i + 1;
        let mut total = counts[depths[i] as usize];
        while end < depths.len() && total + counts[depths[end] as usize] <= capacity {
            total += counts[depths[end] as usize];
            end += 1;
        }
        let run = &depths[i..end];
        let byte_of = |depth: u16| byte_of_depth[depth as usize].expect("a depth with entries has a byte");
        if total > capacity {
            write_depth_in_pieces(schedule, g, (capture, values), (run[0], byte_of(run[0])), scratch)?;
            i = end;
            continue;
        }
        // Scratch ranges (in entries) by depth of the run, then by part.
        let mut ranges = Vec::with_capacity(run.len() * parts.len());
        let mut at = 0usize;
        for &depth in run {
            for counts in &part_counts {
                let len = counts[byte_of(depth) as usize] as usize;
                ranges.push(at * ENTRY_BYTES..(at + len) * ENTRY_BYTES);
                at += len;
            }
        }
        // Each byte's place in the run (a lookup per entry; a binary search
        // of the run took 4v4's initialisation, resumed from its start,
        // from 203 to 210 s, medians of 3 pairs).
        let mut place = [usize::MAX; 256];
        for (j, &depth) in run.iter().enumerate() {
            place[byte_of(depth) as usize] = j;
        }
        let mut per_part: Vec<Vec<&mut [u8]>> = parts.iter().map(|_| Vec::with_capacity(run.len())).collect();
        for (r, slice) in carve_mut(&mut scratch[..at * ENTRY_BYTES], ranges).into_iter().enumerate() {
            per_part[r % parts.len()].push(slice);
        }
        per_part.par_iter_mut().zip(&parts).for_each(|(slices, part)| {
            let mut filled = vec![0usize; run.len()];
            for n in part.clone().filter(|&n| capture[n] != 0) {
                for_each_entry(&values[n * CARD_STATES..][..CARD_STATES], capture[n], |byte, states| {
                    let j = place[byte as usize];
                    if j != usize::MAX {
                        put_entry(&mut slices[j][filled[j] * ENTRY_BYTES..], n, states);
                        filled[j] += 1;
                    }
                });
            }
        });
        let mut at = 0usize;
        let chunks: Vec<(u16, &[u8])> = (run.iter())
            .map(|&depth| {
                let len = counts[depth as usize] as usize;
                at += len;
                (depth, &scratch[(at - len) * ENTRY_BYTES..at * ENTRY_BYTES])
            })
            .collect();
        schedule.write_chunks(g, &chunks, packing.as_deref_mut())?;
        i = end;
    }
    Ok(())
}

/// [`write_group`] for value words (`values`: 60 bytes per layout;
/// `depth_of(word)`), for tables deeper than a byte holds. Such tables are
/// few, so this is plain and on one thread: entries are counted by depth,
/// then placed in `scratch` a run of depths at a time (a depth too big for
/// it alone is written in pieces), with a scan of the group per run.
pub(super) fn write_group_words(
    schedule: &mut CaptureSchedule,
    g: usize,
    (capture, values): (&[u32], &[u8]),
    depth_of: impl Fn(u16) -> Option<u16>,
    scratch: &mut [u8],
    mut packing: Option<&mut [u8]>,
) -> Result<(), DiskError> {
    debug_assert_eq!(values.len(), capture.len() * WORD_LAYOUT_BYTES);
    schedule.begin_group(g)?;
    let layouts = || (0..capture.len()).filter(|&n| capture[n] != 0);
    let entries_of =
        |n: usize| layout_word_entries(&values[n * WORD_LAYOUT_BYTES..][..WORD_LAYOUT_BYTES], capture[n], &depth_of);
    let mut counts: std::collections::BTreeMap<u16, usize> = std::collections::BTreeMap::new();
    for n in layouts() {
        let (entries, count) = entries_of(n);
        for &(depth, _) in &entries[..count] {
            *counts.entry(depth).or_default() += 1;
        }
    }
    let depths: Vec<(u16, usize)> = counts.into_iter().collect();
    let capacity = scratch.len() / ENTRY_BYTES;
    assert!(capacity > 0, "scratch holds an entry");
    let mut i = 0;
    while i < depths.len() {
        let (mut end, mut total) = (i + 1, depths[i].1);
        while end < depths.len() && total + depths[end].1 <= capacity {
            total += depths[end].1;
            end += 1;
        }
        let run = &depths[i..end];
        i = end;
        if total > capacity {
            let depth = run[0].0;
            let mut at = 0;
            for n in layouts() {
                let (entries, count) = entries_of(n);
                for &(_, states) in entries[..count].iter().filter(|e| e.0 == depth) {
                    if at + ENTRY_BYTES > scratch.len() {
                        schedule.write(g, depth, &scratch[..at])?;
                        at = 0;
                    }
                    put_entry(&mut scratch[at..], n, states);
                    at += ENTRY_BYTES;
                }
            }
            schedule.write(g, depth, &scratch[..at])?;
            continue;
        }
        // Each depth's entries in its own range, in layout order.
        let mut next: Vec<usize> =
            run.iter().scan(0, |at, &(_, count)| Some(std::mem::replace(at, *at + count))).collect();
        for n in layouts() {
            let (entries, count) = entries_of(n);
            for &(depth, states) in &entries[..count] {
                if let Ok(j) = run.binary_search_by_key(&depth, |&(d, _)| d) {
                    put_entry(&mut scratch[next[j] * ENTRY_BYTES..], n, states);
                    next[j] += 1;
                }
            }
        }
        let mut at = 0;
        let chunks: Vec<(u16, &[u8])> = run
            .iter()
            .map(|&(depth, count)| {
                at += count;
                (depth, &scratch[(at - count) * ENTRY_BYTES..at * ENTRY_BYTES])
            })
            .collect();
        schedule.write_chunks(g, &chunks, packing.as_deref_mut())?;
    }
    Ok(())
}

/// Bytes of a layout's value words.
const WORD_LAYOUT_BYTES: usize = 2 * CARD_STATES;

/// A layout's schedule entries from its value words: per distinct word
/// among the card states `capture` that falls due (`depth_of`), its depth
/// and the states holding it; the first `count` of the array.
fn layout_word_entries(
    words: &[u8],
    capture: u32,
    depth_of: impl Fn(u16) -> Option<u16>,
) -> ([(u16, u32); CARD_STATES], usize) {
    let word = |k: u32| u16::from_le_bytes([words[2 * k as usize], words[2 * k as usize + 1]]);
    let (mut entries, mut count) = ([(0, 0); CARD_STATES], 0);
    let mut rest = capture;
    while rest != 0 {
        let first = word(rest.trailing_zeros());
        let mut states = 0;
        let mut left = rest;
        while left != 0 {
            let k = left.trailing_zeros();
            left &= left - 1;
            if word(k) == first {
                states |= 1 << k;
            }
        }
        rest &= !states;
        if let Some(depth) = depth_of(first) {
            entries[count] = (depth, states);
            count += 1;
        }
    }
    (entries, count)
}

/// Calls `entry(byte, states)` for each distinct value byte among the
/// card states `capture` of one layout's 30 value `bytes`, with the states
/// (of `capture`) that hold it: a layout's schedule entries, found a byte at
/// a time rather than a state at a time (this was 6% of a streamed 6-men
/// run).
#[inline]
fn for_each_entry(bytes: &[u8], capture: u32, mut entry: impl FnMut(u8, u32)) {
    let bytes: &[u8; CARD_STATES] = bytes.try_into().expect("a layout's value bytes");
    let mut rest = capture;
    while rest != 0 {
        let byte = bytes[rest.trailing_zeros() as usize];
        let states = states_with_byte(bytes, byte) & rest;
        rest &= !states;
        entry(byte, states);
    }
}

/// Bit k set where `bytes[k] == byte`: two overlapping sixteen-byte
/// loads, a byte compare and its mask each (on x86_64). Counting and
/// sorting a group's entries ask this about three times per layout with a
/// capture: with the bytes eight at a time ([`states_with_byte_in_words`])
/// 8-men 4v4's schedule took 99-105 s of its initialisation, with SSE2
/// 81-83 s.
#[cfg(target_arch = "x86_64")]
#[inline]
fn states_with_byte(bytes: &[u8; CARD_STATES], byte: u8) -> u32 {
    // SAFETY: the only requirement of a `target_feature` function is that
    // the CPU has the feature, and SSE2 is part of x86_64's baseline.
    unsafe { states_with_byte_sse2(bytes, byte) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn states_with_byte_sse2(bytes: &[u8; CARD_STATES], byte: u8) -> u32 {
    use std::arch::x86_64::*;
    const HIGH: usize = CARD_STATES - 16;
    let pattern = _mm_set1_epi8(byte as i8);
    // SAFETY: both loads read 16 bytes inside `bytes` (0..16 and 14..30);
    // `_mm_loadu_si128` takes any alignment.
    let (low, high) =
        unsafe { (_mm_loadu_si128(bytes.as_ptr().cast()), _mm_loadu_si128(bytes[HIGH..].as_ptr().cast())) };
    let equal = |half| _mm_movemask_epi8(_mm_cmpeq_epi8(half, pattern)) as u32;
    equal(low) | equal(high) << HIGH
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn states_with_byte(bytes: &[u8; CARD_STATES], byte: u8) -> u32 {
    states_with_byte_in_words(bytes, byte)
}

/// [`states_with_byte`] eight bytes at a time, in plain integers: the
/// equal ones found as the zero bytes of `word ^ byte` and their flags
/// gathered into a byte by one multiplication.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline]
fn states_with_byte_in_words(bytes: &[u8; CARD_STATES], byte: u8) -> u32 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut padded = [!byte; 32];
    padded[..CARD_STATES].copy_from_slice(bytes);
    let pattern = u64::from_ne_bytes([byte; 8]);
    let mut states = 0u32;
    for (w, chunk) in padded.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ pattern;
        // 0x80 in exactly the zero bytes of `word` (no carries between bytes).
        let zero = !(((word & LOW7) + LOW7) | word | LOW7);
        // Byte i's flag (bit 8i + 7) lands on bit 56 + i, and no two
        // partial products share a bit.
        states |= (((zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32) << (8 * w);
    }
    states
}

/// Writes a group's entries of one depth (and its value byte) that do not
/// fit `scratch`, a scratchful at a time (serially).
fn write_depth_in_pieces(
    schedule: &mut CaptureSchedule,
    g: usize,
    (capture, values): (&[u32], &[u8]),
    (depth, byte): (u16, u8),
    scratch: &mut [u8],
) -> Result<(), DiskError> {
    let full = scratch.len() / ENTRY_BYTES * ENTRY_BYTES;
    let mut at = 0usize;
    for n in (0..capture.len()).filter(|&n| capture[n] != 0) {
        let bytes: &[u8; CARD_STATES] = values[n * CARD_STATES..][..CARD_STATES].try_into().expect("30 bytes");
        let states = states_with_byte(bytes, byte) & capture[n];
        if states == 0 {
            continue;
        }
        if at == full {
            schedule.write(g, depth, &scratch[..at])?;
            at = 0;
        }
        put_entry(&mut scratch[at..], n, states);
        at += ENTRY_BYTES;
    }
    schedule.write(g, depth, &scratch[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_with_a_byte_are_found_both_ways() {
        let mut bytes = [0u8; CARD_STATES];
        for (k, byte) in bytes.iter_mut().enumerate() {
            *byte = [0, 1, 127, 128, 129, 255, 0x80][k % 7] ^ (k as u8 & 0x81);
        }
        for byte in 0..=255u8 {
            let wanted = (0..CARD_STATES).filter(|&k| bytes[k] == byte).fold(0u32, |m, k| m | 1 << k);
            assert_eq!(states_with_byte(&bytes, byte), wanted, "byte {byte}");
            assert_eq!(states_with_byte_in_words(&bytes, byte), wanted, "byte {byte}, in words");
        }
    }

    /// A chunk packed in parallel, in waves of frames, is the file a
    /// piecewise, serial write makes of the same entries, whatever memory
    /// the waves are packed in: the schedule's own, a lent area of two
    /// frames (a frame a wave), one that takes every frame in one wave,
    /// and one too small, which is not used.
    #[test]
    fn chunks_packed_in_parallel_are_the_serial_bytes() {
        let dir = tempfile::tempdir().unwrap();
        // About 6.2 frames per depth: more frames than buffers, and a
        // partial last frame.
        let entries: Vec<u8> = (0..100_000u32)
            .flat_map(|n| {
                let mut entry = [0u8; ENTRY_BYTES];
                put_entry(&mut entry, n as usize * 3, n.wrapping_mul(2654435761) & 0x3fff_ffff);
                entry
            })
            .collect();
        let full = entries::frames_bound(FRAME_ENTRIES);
        let lent_areas = [None, Some(2 * full), Some(40 * full), Some(2 * full - 1)];
        let mut files = Vec::new();
        for (k, lent) in std::iter::once(None).chain(lent_areas.map(Some)).enumerate() {
            let name = format!("{}v{}", 1 + k, 5 - k.min(4));
            let mut schedule = CaptureSchedule::create(dir.path(), &name, 2).unwrap();
            schedule.begin_group(1).unwrap();
            // Depth 7's chunk is one partial frame, 8's is empty.
            let depths: [(u16, &[u8]); 4] =
                [(5, &entries), (7, &entries[..300 * ENTRY_BYTES]), (8, &[]), (9, &entries)];
            match lent {
                None => {
                    for (depth, entries) in depths {
                        schedule.write(1, depth, &[]).unwrap();
                        for piece in entries.chunks(7000 * ENTRY_BYTES) {
                            schedule.write(1, depth, piece).unwrap();
                        }
                    }
                }
                Some(bytes) => {
                    let mut area = bytes.map(|bytes| vec![0xA5u8; bytes]);
                    schedule.write_chunks(1, &depths, area.as_deref_mut()).unwrap();
                }
            }
            schedule.seal().unwrap();
            files.push((
                std::fs::read(dir.path().join(format!("{name}.captures"))).unwrap(),
                std::fs::read(dir.path().join(format!("{name}.captures-index"))).unwrap(),
            ));
        }
        assert!(files[0].0.len() > FRAME_HEADER_BYTES * 14, "several frames were written");
        for (k, packed) in files.iter().enumerate().skip(1) {
            assert!(packed == &files[0], "packed in area {:?}", lent_areas[k - 1]);
        }
    }

    /// A group whose entries need several passes of a small scratch, and a
    /// depth that does not fit it alone, come back per depth, from value
    /// bytes or value words; the index survives a reopen and a damaged one
    /// is refused.
    #[test]
    fn chunks_come_back_by_depth_whatever_the_scratch() {
        let dir = tempfile::tempdir().unwrap();
        // 20,000 layouts: five parts sorted in parallel.
        let capture: Vec<u32> =
            (0..20_000u32).map(|n| if n % 3 == 0 { 0 } else { n.wrapping_mul(2654435761) & 0x3fff_ffff }).collect();
        // Value bytes 0..=5; byte b falls due at depth 2b + 3, except 4
        // (a draw: never).
        let values: Vec<u8> =
            (0..capture.len() * CARD_STATES).map(|i| ((i / 30 * 7 + i % 30 * 13) % 6) as u8).collect();
        let depth_of = |byte: u8| Some(byte as u16 * 2 + 3).filter(|_| byte != 4);
        let wanted = |depth: u16| -> Vec<(u32, u32)> {
            (0..capture.len())
                .filter_map(|n| {
                    let states =
                        (0..30).filter(|&k| capture[n] & (1 << k) != 0 && depth_of(values[n * 30 + k]) == Some(depth));
                    let mask = states.fold(0u32, |m, k| m | 1 << k);
                    (mask != 0).then_some((n as u32, mask))
                })
                .collect()
        };
        for scratch_entries in [100_000, 9000, 3] {
            let mut schedule = CaptureSchedule::create(dir.path(), "2v2", 4).unwrap();
            let mut scratch = vec![0u8; scratch_entries * ENTRY_BYTES];
            schedule.begin_group(0).unwrap();
            write_group(&mut schedule, 2, (&capture, &values), depth_of, &mut scratch, None).unwrap();
            schedule.begin_group(1).unwrap();
            schedule.seal().unwrap();
            let schedule = CaptureSchedule::reopen(dir.path(), "2v2", 4).unwrap();
            let mut unpacker = Unpacker::new();
            let mut bytes = vec![0u8; entries::frames_bound(capture.len())];
            for depth in [3, 5, 7, 9, 11, 13, 4] {
                let mut got = Vec::new();
                schedule
                    .for_each_due((2, depth), capture.len(), &mut bytes, &mut unpacker, |n, s| got.push((n as u32, s)))
                    .unwrap();
                assert_eq!(got, wanted(depth), "depth {depth}, scratch of {scratch_entries}");
                // Read as a smaller group's chunk (another table's work
                // files), a layout beyond it is refused, not visited.
                if let Some(&(last, _)) = wanted(depth).last() {
                    let last = last as usize;
                    let short = schedule.for_each_due((2, depth), last, &mut bytes, &mut unpacker, |n, _| {
                        assert!(n < last, "layout {n} of {last} visited")
                    });
                    assert!(matches!(short, Err(DiskError::Damaged { .. })), "depth {depth}");
                }
            }
            assert!(schedule.index().chunk(0, 3).0.is_empty() && schedule.index().chunk(3, 3).0.is_empty());
            // The same entries from value words, whose depths run past 255
            // (word 100b + 7 falls due at depth 2b + 303).
            let words: Vec<u8> = values.iter().flat_map(|&b| (u16::from(b) * 100 + 7).to_le_bytes()).collect();
            let word_depth = |word: u16| depth_of(((word - 7) / 100) as u8).map(|d| d + 300);
            let mut schedule = CaptureSchedule::create(dir.path(), "2v3", 4).unwrap();
            schedule.begin_group(0).unwrap();
            write_group_words(&mut schedule, 2, (&capture, &words), word_depth, &mut scratch, None).unwrap();
            schedule.seal().unwrap();
            let schedule = CaptureSchedule::reopen(dir.path(), "2v3", 4).unwrap();
            for depth in [3, 5, 7, 9, 11, 13, 4] {
                let mut got = Vec::new();
                schedule
                    .for_each_due((2, depth + 300), capture.len(), &mut bytes, &mut unpacker, |n, s| {
                        got.push((n as u32, s))
                    })
                    .unwrap();
                assert_eq!(got, wanted(depth), "words: depth {}, scratch of {scratch_entries}", depth + 300);
            }
        }
        // A flipped bit anywhere in the chunks is refused as damage.
        let path = dir.path().join("2v2.captures");
        let good = std::fs::read(&path).unwrap();
        for at in [0, good.len() / 3, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 4;
            std::fs::write(&path, &bytes).unwrap();
            let schedule = CaptureSchedule::reopen(dir.path(), "2v2", 4).unwrap();
            let (mut unpacker, mut scratch) = (Unpacker::new(), vec![0u8; entries::frames_bound(capture.len())]);
            let damaged = [3, 5, 7, 9, 11, 13].iter().any(|&depth| {
                let read = schedule.for_each_due((2, depth), capture.len(), &mut scratch, &mut unpacker, |_, _| {});
                matches!(read, Err(DiskError::Damaged { .. }))
            });
            assert!(damaged, "a flipped bit at byte {at} of {}", good.len());
        }
        let index_path = dir.path().join("2v2.captures-index");
        let mut bytes = std::fs::read(&index_path).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&index_path, bytes).unwrap();
        assert!(matches!(CaptureSchedule::reopen(dir.path(), "2v2", 4), Err(DiskError::Damaged { .. })));
    }
}
