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
//! count: u32, bytes: u32`, then `bytes` bytes of frames (see
//! [`super::entries`]) holding `count` entries `(layout, states)`: the
//! group's layouts that decided anything, ascending, and the card states
//! they decided. A step's chunks are consecutive (its *segment*) and in the
//! order the step visits groups, the schedule's order, which finishing
//! follows too: so finishing reads each segment front to back, a batch of
//! groups at a time.
//!
//! The log is also where streamed `fresh` lives: a loss step's chunks are
//! exactly its new losses (initialisation's, the no-move losses, form a
//! segment at depth 0), and a win step reads the landing slice's `fresh`
//! from the mirror's last loss-step segment ([`LandingChunks`]) instead of
//! from a plane lane. So no `fresh` plane is stored: at 8 men 4v4's took
//! 4.8 GB a copy, and sat at almost two copies between checkpoints.

use super::disk::{Appender, DiskError, io_error};
use super::entries::{self, FRAME_HEADER_BYTES, FrameHeader, Unpacker};
use super::flags::PlacementFlags;
use super::lanes::{LaneLayout, SEGMENT_ALIGN_BYTES};
use crate::rules::ALL_CARD_STATES;
use rayon::prelude::*;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The fewest bytes a log gathers before it writes them (with O_DIRECT,
/// see [`Appender`]), and the most: see [`buffer_bytes`].
pub(super) const MIN_BUFFER_BYTES: usize = 256 << 10;
const MAX_BUFFER_BYTES: usize = 2 << 20;

/// Bytes a log gathers before it writes them, for a run whose streamed
/// I/O blocks are `io_block_bytes` (two buffers of it per streamed
/// material: part of the fixed overhead that DESIGN.md states). A step's
/// job appends its decisions in one go while it settles, on the workers'
/// chain, and each buffer's write waits behind the window's requests in
/// flight, which are as large as the I/O blocks (a 128th of the budget,
/// up to 1 MiB). So twice an I/O block, within 256 KiB and 2 MiB: at 8
/// men with 1 GiB, 256 KiB buffers had 4v4's steps to depth 10 settle in
/// 10.3-10.8 s, 2 MiB ones in 4.5-5.1 s (docs/BENCHMARKS.md, session 91),
/// and small budgets keep the small buffers they had.
pub(super) fn buffer_bytes(io_block_bytes: usize) -> usize {
    let bytes = (2 * io_block_bytes).clamp(MIN_BUFFER_BYTES, MAX_BUFFER_BYTES);
    assert!(bytes.is_multiple_of(SEGMENT_ALIGN_BYTES as usize), "an O_DIRECT buffer is whole units");
    bytes
}
const HEADER_BYTES: usize = 16;

/// Where a log stands at a checkpoint: its length and the start of each
/// step's segment, with the step's depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LogMark {
    pub bytes: u64,
    pub segments: Vec<(u16, u64)>,
}

pub(super) struct DecisionLog {
    /// Read (finishing, and the chunks a win step lands on).
    file: File,
    path: PathBuf,
    /// Writes the log: what the file holds once flushed.
    appender: Appender,
    /// Start of each step's segment, with the step's depth.
    segments: Vec<(u16, u64)>,
    /// Per segment, where applying it has got to (finishing only).
    cursors: Vec<u64>,
    /// Per group, where its chunk in the last loss step's segment (the
    /// last even depth, 0 for initialisation) starts, if it has one.
    landing: Vec<Option<u64>>,
}

impl DecisionLog {
    /// Creates an empty log (a fresh start of the pair) of a material with
    /// `groups` groups, gathering `buffer_bytes` ([`buffer_bytes`]) before
    /// it writes them.
    pub fn create(path: &Path, groups: usize, buffer_bytes: usize) -> Result<DecisionLog, DiskError> {
        let appender = Appender::create(path, buffer_bytes)?;
        let file = File::open(path).map_err(|e| io_error("open", path, e))?;
        Ok(DecisionLog::with((file, appender), path, LogMark { bytes: 0, segments: Vec::new() }, groups))
    }

    /// Opens the log a checkpoint names, cut back to its length there (a
    /// killed run may have appended more; the resumed run appends it again).
    pub fn reopen(path: &Path, mark: LogMark, groups: usize, buffer_bytes: usize) -> Result<DecisionLog, DiskError> {
        let file = File::open(path).map_err(|e| io_error("open", path, e))?;
        let found = file.metadata().map_err(|e| io_error("inspect", path, e))?.len();
        let sorted = mark.segments.windows(2).all(|w| w[0].1 <= w[1].1);
        if found < mark.bytes || !sorted || mark.segments.last().is_some_and(|s| s.1 > mark.bytes) {
            let what = "shorter than the checkpoint records";
            return Err(DiskError::Damaged { path: path.to_path_buf(), what });
        }
        let appender = Appender::reopen(path, mark.bytes, buffer_bytes)?;
        let mut log = DecisionLog::with((file, appender), path, mark, groups);
        // Where the last loss step's chunks are, from their headers.
        let last_loss = log.segments.iter().rposition(|s| s.0 % 2 == 0);
        if let Some(s) = last_loss {
            let end = log.segments.get(s + 1).map_or(log.len(), |next| next.1);
            let mut at = log.segments[s].1;
            while at < end {
                let (group, _, _, bytes) = chunk_header((&log.file, &log.path), at)?;
                if group >= groups || at + (HEADER_BYTES as u64) + bytes > end {
                    let what = "a chunk names a group the material lacks or runs past its step";
                    return Err(DiskError::Damaged { path: path.to_path_buf(), what });
                }
                log.landing[group] = Some(at);
                at += HEADER_BYTES as u64 + bytes;
            }
        }
        Ok(log)
    }

    fn with((file, appender): (File, Appender), path: &Path, mark: LogMark, groups: usize) -> DecisionLog {
        debug_assert_eq!(appender.len(), mark.bytes);
        DecisionLog {
            file,
            path: path.to_path_buf(),
            appender,
            segments: mark.segments,
            cursors: Vec::new(),
            landing: vec![None; groups],
        }
    }

    /// The deepest step that decided anything (0 if none).
    pub fn deepest_decided_plies(&self) -> u16 {
        let ends = self.segments.iter().skip(1).map(|s| s.1).chain([self.len()]);
        self.segments.iter().zip(ends).filter(|(s, end)| *end > s.1).map(|(s, _)| s.0).max().unwrap_or(0)
    }

    /// Starts the segment of the step at `depth_plies` (0: initialisation).
    pub fn begin_step(&mut self, depth_plies: u16) {
        if depth_plies.is_multiple_of(2) {
            self.landing.fill(None);
        }
        self.segments.push((depth_plies, self.len()));
    }

    /// The chunks of the last loss step, for a win step to read its landing
    /// `fresh` from (on any thread, while this log is appended to).
    pub fn landing_chunks(&mut self) -> Result<LandingChunks, DiskError> {
        self.flush()?;
        let file = self.file.try_clone().map_err(|e| io_error("open", &self.path, e))?;
        Ok(LandingChunks { file, path: self.path.clone(), at: self.landing.clone() })
    }

    fn len(&self) -> u64 {
        self.appender.len()
    }

    /// Most bytes [`DecisionLog::encode`] writes for a group of `layouts`
    /// layouts.
    pub fn encoded_bound(layouts: usize) -> usize {
        entries::frames_bound(layouts)
    }

    /// Encodes the decisions of placements `part` (`block_words` layouts
    /// each) of one group in a step (`decided[n]`: the card states of the
    /// group's layout n decided) as frames into `into`, which must hold
    /// [`DecisionLog::encoded_bound`] bytes of the part's layouts; returns
    /// the bytes written and the entries they hold. Only the placements in
    /// the runs `live` gives (their numbers in the group, increasing,
    /// within `part`) are read: the others decided nothing, and their words
    /// need not be clear. Touches nothing else, so that parts are encoded in
    /// parallel (serially it was 3.9% of an 8-men run, on the thread that
    /// drives the step while the workers wait). A group's chunk is the
    /// frames of its parts in order ([`DecisionLog::append_encoded`]):
    /// frames hold entries in ascending layouts, each frame's first from 0,
    /// so where a part ends a frame changes nothing else.
    pub fn encode(
        decided: &[u32],
        block_words: usize,
        part: Range<usize>,
        live: impl IntoIterator<Item = Range<usize>>,
        into: &mut [u8],
    ) -> (usize, u32) {
        assert!(decided.len() <= u32::MAX as usize, "group too large for the log");
        assert!(part.end * block_words <= decided.len(), "the part lies in the group");
        assert!(into.len() >= DecisionLog::encoded_bound(part.len() * block_words), "room for the part's frames");
        debug_assert!(decided.len().is_multiple_of(block_words), "a group holds whole placements");
        let entries = live.into_iter().flat_map(|run| {
            debug_assert!(part.start <= run.start && run.end <= part.end, "live run {run:?} outside the part {part:?}");
            let first = run.start * block_words;
            nonzero_words(&decided[first..run.end * block_words]).map(move |(n, states)| (first + n, states))
        });
        entries::encode(entries, into)
    }

    /// Appends the chunk of `group` in the current step: `count` entries in
    /// the frames of `parts`, one after another, as [`DecisionLog::encode`]
    /// made them (nothing if there are none).
    pub fn append_encoded(&mut self, group: usize, (parts, count): (&[&[u8]], u32)) -> Result<(), DiskError> {
        let &(depth_plies, _) = self.segments.last().expect("a step has begun");
        if count == 0 {
            return Ok(());
        }
        assert!(group <= u32::MAX as usize, "group too large for the log");
        let bytes: usize = parts.iter().map(|part| part.len()).sum();
        let mut header = [0u8; HEADER_BYTES];
        header[0..4].copy_from_slice(&(group as u32).to_le_bytes());
        header[4..6].copy_from_slice(&depth_plies.to_le_bytes());
        header[8..12].copy_from_slice(&count.to_le_bytes());
        header[12..16].copy_from_slice(&u32::try_from(bytes).expect("a chunk's bytes fit 32 bits").to_le_bytes());
        if depth_plies.is_multiple_of(2) {
            self.landing[group] = Some(self.len());
        }
        self.appender.append(&header)?;
        parts.iter().try_for_each(|frames| self.appender.append(frames))
    }

    /// [`DecisionLog::encode`] and [`DecisionLog::append_encoded`] in one.
    #[cfg(test)]
    fn append(&mut self, group: usize, decided: &[u32]) -> Result<(), DiskError> {
        let mut frames = vec![0u8; DecisionLog::encoded_bound(decided.len())];
        let (len, count) =
            DecisionLog::encode(decided, 1, 0..decided.len(), std::iter::once(0..decided.len()), &mut frames);
        self.append_encoded(group, (&[&frames[..len]], count))
    }

    /// Writes what is gathered, so that the file's readers see it.
    fn flush(&mut self) -> Result<(), DiskError> {
        self.appender.flush()
    }

    /// Writes out what is buffered and syncs the file; returns the mark a
    /// checkpoint taken now must record.
    pub fn sync(&mut self) -> Result<LogMark, DiskError> {
        self.appender.sync()?;
        Ok(LogMark { bytes: self.len(), segments: self.segments.clone() })
    }

    /// Applies the log to a batch of groups, in pieces: `targets` holds
    /// each piece of the batch's groups as `(group, first layout, what its
    /// entries go to)`, a group's pieces one after another in ascending
    /// first layouts, the first at 0; a piece takes its group's layouts up
    /// to the next piece's first, the group's last piece all the rest.
    /// `visit(target, depth, layout, states)` is called for every entry of
    /// a piece, step by step, `layout` counted from the piece's first; it
    /// returns false for an entry that does not fit the target (a layout
    /// outside the group), which is refused as damage. Pieces are applied
    /// in parallel (an entry of one piece touches only its own target),
    /// each unpacking only the frames that hold its layouts (the frame
    /// headers say where they start): on one thread, unpacking the log and
    /// writing the values was the larger part of finishing at 8 men, and
    /// as a task per group a batch's largest group kept one worker busy
    /// alone. Batches must come in the order the steps visited groups
    /// (`is_later(g)`: does group g come after every group of the batch in
    /// that order?); each segment is read from where the last batch left
    /// it.
    pub fn apply<T: Send>(
        &mut self,
        targets: &mut [(usize, usize, T)],
        is_later: impl Fn(usize) -> bool,
        visit: impl Fn(&mut T, u16, usize, u32) -> bool + Sync,
    ) -> Result<(), DiskError> {
        self.flush()?;
        if self.cursors.is_empty() {
            self.cursors = self.segments.iter().map(|s| s.1).collect();
        }
        let written = self.len();
        let DecisionLog { file, path, segments, cursors, .. } = self;
        let damaged = |what| DiskError::Damaged { path: path.clone(), what };
        // The batch's groups, and per piece its group's place among them
        // and the layout its range ends at.
        let mut groups: Vec<usize> = Vec::new();
        let mut slots = Vec::with_capacity(targets.len());
        for (k, &(g, first, _)) in targets.iter().enumerate() {
            if groups.last() != Some(&g) {
                assert_eq!(first, 0, "a group's first piece starts at its first layout");
                groups.push(g);
            }
            let next = targets.get(k + 1).filter(|next| next.0 == g);
            assert!(next.is_none_or(|next| next.1 > first), "a group's pieces in ascending layouts");
            slots.push((groups.len() - 1, next.map_or(usize::MAX, |next| next.1)));
        }
        // Per group, its chunks step by step: (depth, entries, frames).
        let mut chunks: Vec<Vec<(u16, u32, Range<u64>)>> = vec![Vec::new(); groups.len()];
        for (s, cursor) in cursors.iter_mut().enumerate() {
            let end = segments.get(s + 1).map_or(written, |next| next.1);
            while *cursor < end {
                let (group, depth, count, bytes) = chunk_header((file, path), *cursor)?;
                let Some(slot) = groups.iter().position(|&g| g == group) else {
                    if is_later(group) {
                        break;
                    }
                    // A chunk of a group the batches passed would be lost.
                    return Err(damaged("a chunk is out of the schedule's order"));
                };
                let frames = *cursor + HEADER_BYTES as u64..*cursor + HEADER_BYTES as u64 + bytes;
                if frames.end > end {
                    return Err(damaged("a chunk runs past its step"));
                }
                *cursor = frames.end;
                chunks[slot].push((depth, count, frames));
            }
        }
        let log = (&*file, path.as_path());
        // Per piece, the entries it took of each of its group's chunks.
        let seen: Vec<Vec<u64>> = (targets.par_iter_mut().zip(&slots))
            .map_init(
                || (Unpacker::lend(), Vec::new()),
                |(unpacker, buffer), ((_, first, target), &(slot, end))| {
                    let mut seen = Vec::with_capacity(chunks[slot].len());
                    for (depth, _, frames) in &chunks[slot] {
                        let mut fits = true;
                        let layouts = *first..end;
                        seen.push(visit_frames(log, frames.clone(), layouts, (unpacker, buffer), |n, states| {
                            fits &= visit(target, *depth, n - *first, states)
                        })?);
                        if !fits {
                            return Err(damaged("an entry's layout is outside its group"));
                        }
                    }
                    Ok(seen)
                },
            )
            .collect::<Result<_, DiskError>>()?;
        for (slot, chunks) in chunks.iter().enumerate() {
            for (c, &(_, count, _)) in chunks.iter().enumerate() {
                let took: u64 = slots.iter().zip(&seen).filter(|((s, _), _)| *s == slot).map(|(_, seen)| seen[c]).sum();
                if took != u64::from(count) {
                    return Err(damaged("a chunk holds another number of entries than its header says"));
                }
            }
        }
        Ok(())
    }
}

/// Reads `into.len()` bytes of the log `file` (at `path`) from `at`.
fn read_at((file, path): (&File, &Path), into: &mut [u8], at: u64) -> Result<(), DiskError> {
    file.read_exact_at(into, at).map_err(|e| io_error("read", path, e))
}

/// The header of the chunk at `at`: (group, depth, entries, bytes).
fn chunk_header(log: (&File, &Path), at: u64) -> Result<(usize, u16, u32, u64), DiskError> {
    let mut header = [0u8; HEADER_BYTES];
    read_at(log, &mut header, at)?;
    Ok(parse_header(&header))
}

/// Calls `visit(layout, states)` for every entry in `layouts` of the
/// frames that lie in `frames` of the log (a chunk's bytes after its
/// header), reading one frame at a time into `buffer`; returns how many
/// entries it visited. A chunk's entries come in ascending layouts, so a
/// frame holds layouts from its header's first up to the next frame's
/// first: frames wholly outside `layouts` are not read (an unpacked
/// frame's first entry is checked against its header).
fn visit_frames(
    log: (&File, &Path),
    frames: Range<u64>,
    layouts: Range<usize>,
    (unpacker, buffer): (&mut Unpacker, &mut Vec<u8>),
    mut visit: impl FnMut(usize, u32),
) -> Result<u64, DiskError> {
    let damaged = |what| DiskError::Damaged { path: log.1.to_path_buf(), what };
    let header_at = |at: u64| -> Result<Option<FrameHeader>, DiskError> {
        if at >= frames.end {
            return Ok(None);
        }
        let mut header = [0u8; FRAME_HEADER_BYTES];
        read_at(log, &mut header, at)?;
        entries::frame_header(header).map(Some).map_err(|e| damaged(e.what()))
    };
    let (mut at, mut seen) = (frames.start, 0u64);
    let mut header = header_at(at)?;
    while let Some(this) = header {
        if this.first_layout as usize >= layouts.end {
            break;
        }
        let next = at + (FRAME_HEADER_BYTES + this.compressed) as u64;
        if next > frames.end {
            return Err(damaged("a frame runs past its chunk"));
        }
        header = header_at(next)?;
        at = next;
        if header.is_some_and(|following| following.first_layout as usize <= layouts.start) {
            continue;
        }
        buffer.resize(this.compressed, 0);
        read_at(log, buffer, next - this.compressed as u64)?;
        let visit_in = |n, states| {
            if layouts.contains(&n) {
                visit(n, states);
                seen += 1;
            }
        };
        unpacker.for_each(&this, buffer, visit_in).map_err(|e| damaged(e.what()))?;
    }
    Ok(seen)
}

/// (group, depth, entries, bytes) of a chunk header.
fn parse_header(header: &[u8; HEADER_BYTES]) -> (usize, u16, u32, u64) {
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let depth = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
    (word(0) as usize, depth, word(8), word(12) as u64)
}

/// Where a material's last loss step put its chunks, and a handle to read
/// them: the `fresh` a win step of the mirror lands in.
pub(super) struct LandingChunks {
    file: File,
    path: PathBuf,
    at: Vec<Option<u64>>,
}

impl LandingChunks {
    /// Fills `words`, the plane-lane span (laid out as `layout`) of the
    /// groups `groups`, with their `fresh`: the card states each layout
    /// lost in the last loss step. Of `blocks`, the flags of the span's
    /// blocks, numbered from element `words_at` for `words[0]`, sets those
    /// of the blocks with a loss and clears the others; only the flagged
    /// blocks are written (their layouts that lost nothing zero), the
    /// others are to be read as zero. Returns the bytes read.
    pub fn fill(
        &self,
        groups: Range<usize>,
        layout: &LaneLayout,
        words: &mut [u32],
        (blocks, words_at): (&mut PlacementFlags, usize),
    ) -> Result<u64, DiskError> {
        // Only the blocks that get a loss are laid (zeroed, then their
        // entries written): the kernels read no block whose flag is clear,
        // and zeroing every word was a pass over the whole mirror plane
        // per win step. Debug builds fill the rest with every card state,
        // which reads as a loss everywhere, so that a read past a clear
        // flag fails the tests.
        if cfg!(debug_assertions) {
            words.fill(ALL_CARD_STATES);
        }
        blocks.clear_segments(words_at..words_at + words.len());
        let damaged = |what| DiskError::Damaged { path: self.path.clone(), what };
        let log = (&self.file, self.path.as_path());
        let start = layout.span(groups.clone()).start;
        let (mut unpacker, mut buffer, mut bytes_read) = (Unpacker::lend(), Vec::new(), 0u64);
        for g in groups {
            let Some(at) = self.at[g] else { continue };
            let (group, _, count, bytes) = chunk_header(log, at)?;
            if group != g {
                return Err(damaged("a loss step's chunk is not where it was written"));
            }
            let segment = layout.segment(g);
            let first = ((segment.start - start) / 4) as usize;
            let group_words = &mut words[first..first + ((segment.end - segment.start) / 4) as usize];
            let mut stray = false;
            let frames = at + HEADER_BYTES as u64..at + HEADER_BYTES as u64 + bytes;
            let mut marker = blocks.marker(words_at + first);
            let seen = visit_frames(log, frames, 0..usize::MAX, (&mut unpacker, &mut buffer), |n, states| {
                if n >= group_words.len() {
                    stray = true;
                    return;
                }
                if let Some(block) = marker.mark(n) {
                    group_words[block].fill(0);
                }
                group_words[n] = states;
            })?;
            if stray {
                return Err(damaged("an entry names a layout its group lacks"));
            }
            if seen != count as u64 {
                return Err(damaged("a chunk holds another number of entries than its header says"));
            }
            bytes_read += HEADER_BYTES as u64 + bytes;
        }
        Ok(bytes_read)
    }
}

/// Words looked at together by [`nonzero_words`]: a step decides few of
/// the layouts it walks, so most such runs are all zeros and are passed
/// over with one vector compare. (Word by word, the walk and the live
/// placements' flags were about 5% of a streamed 6-men run's samples.)
const SCAN_WORDS: usize = 16;

/// The words of `words` that are not zero, with their positions, in
/// order.
fn nonzero_words(words: &[u32]) -> impl Iterator<Item = (usize, u32)> + '_ {
    let chunks = words.chunks(SCAN_WORDS).enumerate();
    chunks.flat_map(|(c, chunk)| {
        // Bit j: word j of the chunk is not zero. The fold compiles to
        // compares and a mask move.
        let mut set = chunk.iter().enumerate().fold(0u32, |set, (j, &word)| set | ((word != 0) as u32) << j);
        std::iter::from_fn(move || {
            if set == 0 {
                return None;
            }
            let j = set.trailing_zeros() as usize;
            set &= set - 1;
            Some((c * SCAN_WORDS + j, chunk[j]))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twice the I/O block, within the bounds: the 8-men run's 1 MiB blocks
    /// get 2 MiB, the smallest budgets' blocks the 256 KiB of before.
    #[test]
    fn the_buffer_is_twice_the_io_block_within_bounds() {
        assert_eq!(buffer_bytes(1 << 20), 2 << 20);
        assert_eq!(buffer_bytes(256 << 10), 512 << 10);
        assert_eq!(buffer_bytes(16 << 10), MIN_BUFFER_BYTES);
        assert_eq!(buffer_bytes(0), MIN_BUFFER_BYTES);
        assert_eq!(buffer_bytes(64 << 20), MAX_BUFFER_BYTES);
    }

    /// Two steps over groups 3, 5 and 8 (schedule order 8, 3, 5), applied
    /// in two batches, after a reopen that cuts off a killed run's tail.
    #[test]
    fn entries_come_back_per_batch_in_step_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path, 16, MIN_BUFFER_BYTES).unwrap();
        log.begin_step(1);
        log.append(8, &[0, 5, 0]).unwrap();
        log.append(3, &[0, 0]).unwrap();
        log.append(5, &[7]).unwrap();
        let mark = log.sync().unwrap();
        log.begin_step(2);
        log.append(3, &[1, 2]).unwrap();
        log.append(5, &[9]).unwrap();
        // A resumed run starts again from the mark.
        let mut log = DecisionLog::reopen(&path, mark.clone(), 16, MIN_BUFFER_BYTES).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), mark.bytes);
        log.begin_step(2);
        log.append(3, &[1, 2]).unwrap();
        log.append(5, &[9]).unwrap();
        let rank = |g: usize| [8, 3, 5].iter().position(|&x| x == g).unwrap();
        let push = |seen: &mut Vec<_>, d, n, s| {
            seen.push((d, n, s));
            true
        };
        let mut targets = vec![(8, 0, Vec::new())];
        log.apply(&mut targets, |g| rank(g) > 0, push).unwrap();
        assert_eq!(targets, vec![(8, 0, vec![(1, 1, 5)])]);
        let mut targets = vec![(3, 0, Vec::new()), (5, 0, Vec::new())];
        log.apply(&mut targets, |g| rank(g) > 2, push).unwrap();
        assert_eq!(targets, vec![(3, 0, vec![(2, 0, 1), (2, 1, 2)]), (5, 0, vec![(1, 0, 7), (2, 0, 9)])]);
    }

    /// The scan finds every word that is not zero, whatever the length and
    /// wherever the words lie within and across its chunks.
    #[test]
    fn nonzero_words_are_every_word_not_zero() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 257] {
            for density in [0, 1, 8, 64] {
                let words: Vec<u32> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if (seed % 64) < density { (seed >> 32) as u32 | 1 } else { 0 }
                    })
                    .collect();
                let wanted: Vec<(usize, u32)> = words.iter().copied().enumerate().filter(|&(_, w)| w != 0).collect();
                assert_eq!(nonzero_words(&words).collect::<Vec<_>>(), wanted, "{len} words, density {density}");
            }
        }
    }

    /// A group encoded in parts, of one placement, of none decided, and
    /// large ones (longer than the appender's buffer), comes back as the entries
    /// of its live placements, in order: parts only cut frames short.
    #[test]
    fn a_chunk_encoded_in_parts_comes_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::create(&dir.path().join("log"), 4, MIN_BUFFER_BYTES).unwrap();
        let (block_words, placements) = (4, 30_000);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let decided: Vec<u32> = (0..placements * block_words)
            .map(|n| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                // Placements 5001..9000 decided nothing.
                if (5001 * block_words..9000 * block_words).contains(&n) { 0 } else { seed as u32 & 0x3fff_ffff }
            })
            .collect();
        let live = |k: &usize| k % 7 != 3;
        let cuts = [0, 1, 5000, 5001, 9000, 29_999, placements];
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let mut count = 0;
        for cut in cuts.windows(2) {
            let part = cut[0]..cut[1];
            let mut frames = vec![0u8; DecisionLog::encoded_bound(part.len() * block_words)];
            let set: Vec<usize> = part.clone().filter(live).collect();
            let runs = set.chunk_by(|a, b| a + 1 == *b).map(|run| run[0]..run[run.len() - 1] + 1);
            let (len, n) = DecisionLog::encode(&decided, block_words, part, runs, &mut frames);
            frames.truncate(len);
            parts.push(frames);
            count += n;
        }
        assert!(parts.iter().any(|frames| frames.len() > MIN_BUFFER_BYTES), "a part longer than the appender's buffer");
        log.begin_step(5);
        let frames: Vec<&[u8]> = parts.iter().map(|frames| &frames[..]).collect();
        log.append_encoded(2, (&frames, count)).unwrap();
        let mut targets = vec![(2, 0, Vec::new())];
        let push = |seen: &mut Vec<_>, _, n, s| {
            seen.push((n, s));
            true
        };
        log.apply(&mut targets, |_| false, push).unwrap();
        let wanted: Vec<_> = (0..decided.len())
            .filter(|&n| live(&(n / block_words)) && decided[n] != 0)
            .map(|n| (n, decided[n]))
            .collect();
        assert_eq!(count as usize, wanted.len());
        assert_eq!(targets[0].2, wanted);
    }

    /// A group applied in pieces gives each piece exactly the entries of
    /// its layouts, counted from its first, over several steps and frames:
    /// pieces that end inside a frame, at a part's end, in a run of
    /// layouts that decided nothing, or past the group's last entry. A
    /// frame header whose first layout is not its first entry's is refused.
    #[test]
    fn a_group_applied_in_pieces_gives_each_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path, 4, MIN_BUFFER_BYTES).unwrap();
        let layouts = 3 * entries::FRAME_ENTRIES + 1000;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let steps: Vec<Vec<u32>> = (0..3)
            .map(|step| {
                (0..layouts)
                    .map(|n| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let quiet = (20_000..30_000).contains(&n) || (step == 1 && n % 3 != 0);
                        if quiet { 0 } else { seed as u32 & 0x3fff_ffff }
                    })
                    .collect()
            })
            .collect();
        for (step, decided) in steps.iter().enumerate() {
            log.begin_step(step as u16 + 1);
            // In two parts, cut at layout 7000: a frame ends early there.
            let mut frames = Vec::new();
            let mut count = 0;
            for part in [0..7000, 7000..layouts] {
                let mut bytes = vec![0u8; DecisionLog::encoded_bound(part.len())];
                let (len, n) = DecisionLog::encode(decided, 1, part.clone(), std::iter::once(part), &mut bytes);
                bytes.truncate(len);
                frames.push(bytes);
                count += n;
            }
            let frames: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            log.append_encoded(1, (&frames, count)).unwrap();
        }
        let mark = log.sync().unwrap();
        let push = |seen: &mut Vec<_>, d, n, s| {
            seen.push((d, n, s));
            true
        };
        for firsts in [vec![0], vec![0, 7000], vec![0, 1, 16_384, 16_385, 25_000, 40_000, layouts + 5]] {
            let mut log = DecisionLog::reopen(&path, mark.clone(), 4, MIN_BUFFER_BYTES).unwrap();
            let mut targets: Vec<_> = firsts.iter().map(|&first| (1, first, Vec::new())).collect();
            log.apply(&mut targets, |_| false, push).unwrap();
            for (k, (_, first, got)) in targets.iter().enumerate() {
                let end = firsts.get(k + 1).copied().unwrap_or(layouts);
                let wanted: Vec<_> = (steps.iter().enumerate())
                    .flat_map(|(step, decided)| {
                        (*first..end.min(layouts))
                            .filter(|&n| decided[n] != 0)
                            .map(move |n| (step as u16 + 1, n - first, decided[n]))
                    })
                    .collect();
                assert_eq!(got, &wanted, "piece {k} of {firsts:?}");
            }
        }
        // The second frame's first layout, one on.
        let mut bytes = std::fs::read(&path).unwrap();
        let (_, _, _, chunk_bytes) = parse_header(bytes[..HEADER_BYTES].try_into().unwrap());
        let first_frame =
            entries::frame_header(bytes[HEADER_BYTES..][..FRAME_HEADER_BYTES].try_into().unwrap()).unwrap();
        let second = HEADER_BYTES + FRAME_HEADER_BYTES + first_frame.compressed;
        assert!(((second + FRAME_HEADER_BYTES) as u64) < HEADER_BYTES as u64 + chunk_bytes, "two frames");
        bytes[second + 8] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        for firsts in [vec![0], vec![0, 7000]] {
            let mut log = DecisionLog::reopen(&path, mark.clone(), 4, MIN_BUFFER_BYTES).unwrap();
            let mut targets: Vec<_> = firsts.iter().map(|&first| (1, first, Vec::new())).collect();
            let result = log.apply(&mut targets, |_| false, push);
            assert!(matches!(result, Err(DiskError::Damaged { .. })), "{firsts:?}: {:?}", result.err());
        }
    }

    /// A chunk longer than the append batch and the buffer comes back whole.
    #[test]
    fn long_chunks_come_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = DecisionLog::create(&dir.path().join("log"), 16, MIN_BUFFER_BYTES).unwrap();
        let decided: Vec<u32> = (0..100_000u32).map(|n| if n % 3 == 1 { 0 } else { n | 1 }).collect();
        log.begin_step(7);
        log.append(4, &decided).unwrap();
        let mut targets = vec![(4, 0, Vec::new())];
        log.apply(
            &mut targets,
            |_| false,
            |seen, d, n, s| {
                seen.push((d, n, s));
                true
            },
        )
        .unwrap();
        let wanted: Vec<_> = (0..decided.len()).filter(|&n| decided[n] != 0).map(|n| (7, n, decided[n])).collect();
        assert_eq!(targets[0].2, wanted);
    }

    /// Incompressible entries (every layout decided, states at random)
    /// over several frames fit the bound and come back; a flipped byte in
    /// a frame is refused as damage, not applied.
    #[test]
    fn incompressible_chunks_fit_their_bound_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path, 16, MIN_BUFFER_BYTES).unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let decided: Vec<u32> = (0..2 * entries::FRAME_ENTRIES + 5)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed as u32 & 0x3fff_ffff) | 1
            })
            .collect();
        log.begin_step(3);
        log.append(0, &decided).unwrap();
        log.sync().unwrap();
        let mut targets = vec![(0, 0, Vec::new())];
        log.apply(
            &mut targets,
            |_| false,
            |seen, _, n, s| {
                seen.push((n, s));
                true
            },
        )
        .unwrap();
        assert_eq!(targets[0].2, decided.iter().enumerate().map(|(n, &s)| (n, s)).collect::<Vec<_>>());

        let mark = log.sync().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let mut log = DecisionLog::reopen(&path, mark, 16, MIN_BUFFER_BYTES).unwrap();
        let result = log.apply(&mut [(0, 0, ())], |_| false, |_, _, _, _| true);
        assert!(matches!(result, Err(DiskError::Damaged { .. })), "{:?}", result.err());
    }

    #[test]
    fn a_log_shorter_than_its_mark_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = DecisionLog::create(&path, 16, MIN_BUFFER_BYTES).unwrap();
        log.begin_step(1);
        log.append(0, &[1]).unwrap();
        let mut mark = log.sync().unwrap();
        mark.bytes += 1;
        assert!(matches!(DecisionLog::reopen(&path, mark, 16, MIN_BUFFER_BYTES), Err(DiskError::Damaged { .. })));
    }

    /// A win step reads the last loss step's chunks as `fresh`, laid out
    /// like a plane lane; win steps in between leave them, a reopened log
    /// finds them again, and a chunk that is not where it was written is
    /// refused as damage.
    #[test]
    fn the_last_loss_step_is_the_landing_fresh() {
        use crate::index::{Material, MaterialIndex};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let layout = LaneLayout::new(&MaterialIndex::new(Material::new(2, 2)), 4);
        let groups = layout.groups();
        let (a, b) = (2, 5);
        let layouts = |g: usize| ((layout.segment(g).end - layout.segment(g).start) / 4) as usize;
        let decided = |g: usize, salt: u32| -> Vec<u32> {
            (0..layouts(g) as u32).map(|n| (n % 3 == 0) as u32 * (n + salt)).collect()
        };
        let mut log = DecisionLog::create(&path, groups, MIN_BUFFER_BYTES).unwrap();
        log.begin_step(0);
        log.append(a, &decided(a, 1)).unwrap();
        log.begin_step(1);
        log.append(b, &decided(b, 2)).unwrap();
        log.begin_step(2);
        log.append(b, &decided(b, 3)).unwrap();
        log.append(a, &decided(a, 4)).unwrap();
        log.begin_step(3);
        log.append(a, &decided(a, 5)).unwrap();
        let mark = log.sync().unwrap();
        let span = layout.span(0..groups);
        // Blocks of p * q = 4 layouts; flags stale from before start set.
        let flags = || PlacementFlags::all_set(((span.end - span.start) / 4) as usize, 4);
        let expect = |words: &[u32], flags: &PlacementFlags, checked: Range<usize>| {
            for g in checked {
                let first = ((layout.segment(g).start - span.start) / 4) as usize;
                let wanted = match g {
                    _ if g == a => decided(a, 4),
                    _ if g == b => decided(b, 3),
                    _ => vec![0; layouts(g)],
                };
                // A flagged block holds its words; a clear flag reads as
                // zero words, whatever the buffer holds there.
                for (k, block) in wanted.chunks(4).enumerate() {
                    let with_loss = block.iter().any(|&w| w != 0);
                    assert_eq!(flags.get(first + 4 * k), with_loss, "group {g}, block {k}");
                    if with_loss {
                        assert_eq!(&words[first + 4 * k..first + 4 * k + block.len()], block, "group {g}, block {k}");
                    }
                }
            }
        };
        let mut words = vec![7u32; ((span.end - span.start) / 4) as usize];
        let mut blocks = flags();
        let read = log.landing_chunks().unwrap().fill(0..groups, &layout, &mut words, (&mut blocks, 0)).unwrap();
        assert!(read > 0);
        expect(&words, &blocks, 0..groups);
        let mut log = DecisionLog::reopen(&path, mark.clone(), groups, MIN_BUFFER_BYTES).unwrap();
        words.fill(7);
        let mut blocks = flags();
        log.landing_chunks().unwrap().fill(0..groups, &layout, &mut words, (&mut blocks, 0)).unwrap();
        expect(&words, &blocks, 0..groups);
        // A part of the span, filled into a buffer that holds the span.
        let part = a..b + 1;
        let words_at = ((layout.segment(a).start - span.start) / 4) as usize;
        let part_words = ((layout.span(part.clone()).end - span.start) / 4) as usize;
        let mut blocks = flags();
        log.landing_chunks()
            .unwrap()
            .fill(part.clone(), &layout, &mut words[words_at..part_words], (&mut blocks, words_at))
            .unwrap();
        expect(&words, &blocks, part);
        // The next loss step starts afresh.
        log.begin_step(4);
        let mut blocks = flags();
        log.landing_chunks().unwrap().fill(0..groups, &layout, &mut words, (&mut blocks, 0)).unwrap();
        assert!((0..words.len()).step_by(4).all(|at| !blocks.get(at)));
        // A chunk header damaged on disk is refused, not read as another
        // group's chunk.
        let mut log = DecisionLog::reopen(&path, mark.clone(), groups, MIN_BUFFER_BYTES).unwrap();
        let chunks = log.landing_chunks().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let step2 = mark.segments[2].1 as usize;
        bytes[step2..step2 + 4].copy_from_slice(&(a as u32).to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let result = chunks.fill(0..groups, &layout, &mut words, (&mut flags(), 0));
        assert!(matches!(result, Err(DiskError::Damaged { .. })), "{:?}", result.err());
    }
}
