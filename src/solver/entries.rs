//! (layout, card states) entries, what the decision log and the capture
//! schedule store, and the zstd frames they are stored in.
//!
//! Owns the entry and frame byte layouts; knows nothing of files, steps or
//! groups. An entry is `layout: u32` (within its group), `states: u32` (a
//! set of card states), little-endian. A frame is `entries: u32,
//! compressed: u32, first_layout: u32` (its first entry's layout), then a
//! zstd frame (with its content checksum) of `compressed` bytes that
//! unpacks to `entries` entries, at most [`FRAME_ENTRIES`], stored
//! *compact*, one after another: a LEB128 varint
//! of twice the entry's layout difference from the entry before (the first
//! from 0, wrapping), plus one if its states are the entry before's, then
//! the states (4 bytes) unless they are (the first entry's always follow).
//!
//! Why the first layout in the header: a frame's entries come in ascending
//! layouts, so the headers alone say which frames of a chunk hold entries
//! in a range of layouts, and finishing applies a large group's log in
//! pieces, in parallel, each unpacking only the frames of its range
//! (`DecisionLog::apply`).
//!
//! Why compressed: at 8 men the decision log of 4v4 would be about 26 GB
//! raw, next to 24 GB of planes, on a disk that must also hold the rest of
//! the table. zstd level 1 made the 6-men 3v3 decision log 2.45 times
//! smaller and its capture schedule 2.44 times (level 3 was no better on a
//! part of the log, with the zstd tool), for about 13% more CPU time in a
//! streamed 6-men run; the frames are packed at level -1 since session 72
//! ([`FRAME_LEVEL`]).
//!
//! Why layouts as differences: entries come in ascending layouts, so the
//! differences are small and repeat, which zstd finds at once. On the
//! first 6 plies of 8-men 3v4's decision log (2.19 GB of entries), level 1
//! packed 3.19 times at 238 MB/s and unpacked at 708 MB/s before; with
//! differences 6.95 times, 436 MB/s and 1,057 MB/s
//! (`tools/entry_codec.rs`, docs/BENCHMARKS.md).
//!
//! Why compact: most differences are below 64 and many an entry has the
//! states of the one before, so zstd gets under half the bytes, and packs
//! and unpacks them faster than 8-byte entries (the log's, sessions 20-48)
//! or their bytes transposed into eight byte planes (the schedule's,
//! sessions 33-48, chosen then over 8-byte entries for its long runs of
//! equal high bytes). On the first 300 MiB of 8-men 4v4's log (depths
//! 1-8, 3.28 GB of entries, one thread): 13.95 times smaller instead of
//! 10.43, packed at 782-800 MB/s instead of 525-533, unpacked (the varints
//! undone included) at 1,262-1,288 MB/s instead of 1,015-1,063. On one
//! frame in eight of 4v4's whole schedule: 5.04 times instead of 4.06 in
//! byte planes, packed at 456-459 MB/s instead of 373-375, unpacked at
//! 1,089-1,096 instead of 845-851 (`tools/entry_codec.rs`,
//! docs/BENCHMARKS.md, session 49).

use std::cell::{Cell, RefCell};

/// Bytes of an entry.
pub(super) const ENTRY_BYTES: usize = 8;
/// Most bytes an entry is stored in: a varint of a 33-bit number (five
/// bytes of seven bits) and the states.
const STORED_ENTRY_BYTES: usize = 9;
/// Most entries in one frame (128 KiB of them raw): bounds what encoding
/// and unpacking hold in memory, whatever the size of a group.
pub(super) const FRAME_ENTRIES: usize = 16 << 10;
pub(super) const FRAME_HEADER_BYTES: usize = 12;
/// zstd level of the frames: -1 (`--fast=1`). Against level 1, at 8 men
/// under 1 GiB, 4v4's schedule is 30% larger (2.62 GB against 2.02) and
/// its log at depth 10 17%, but a run to 4v4's depth 10 took 2% less wall
/// time and 3% less CPU time, 3v4+4v3 5-10 s less (docs/BENCHMARKS.md,
/// session 72). Level 3 packed no smaller than level 1.
const FRAME_LEVEL: i32 = -1;

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

/// Raw bytes of a full frame.
pub(super) const FRAME_BYTES: usize = FRAME_ENTRIES * ENTRY_BYTES;

thread_local! {
    /// Per thread (rayon workers encode groups in parallel), made once: the
    /// compressor, and one frame's entries as stored, before compression.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static STORED_FRAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Per thread, made once: the unpacker [`Unpacker::lend`] lends.
    static KEPT_UNPACKER: Cell<Option<Unpacker>> = const { Cell::new(None) };
}

/// Most bytes a frame of `entries` entries takes, header included.
fn frame_bound(entries: usize) -> usize {
    FRAME_HEADER_BYTES + zstd::zstd_safe::compress_bound(entries * STORED_ENTRY_BYTES)
}

/// Most bytes [`encode`] writes for up to `entries` entries.
pub(super) fn frames_bound(entries: usize) -> usize {
    let full = entries / FRAME_ENTRIES;
    full * frame_bound(FRAME_ENTRIES) + frame_bound(entries % FRAME_ENTRIES)
}

/// What a frame's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameHeader {
    pub entries: usize,
    /// Bytes of the zstd frame after the header.
    pub compressed: usize,
    /// The layout of the frame's first entry (0 if it has none).
    pub first_layout: u32,
}

/// What a frame header gives, if a frame can have it.
pub(super) fn frame_header(header: [u8; FRAME_HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
    let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let (entries, compressed) = (word(0) as usize, word(4) as usize);
    let fits = entries <= FRAME_ENTRIES && FRAME_HEADER_BYTES + compressed <= frame_bound(entries);
    if fits { Ok(FrameHeader { entries, compressed, first_layout: word(8) }) } else { Err(FrameError::Header) }
}

/// Bytes past a frame's stored entries that [`Unpacker::for_each`] reads
/// (zeros): it reads a varint as 8 bytes and the states after it as 4,
/// whether or not the entry keeps them, so that it needs no bounds check
/// per byte (as [`CompactWriter::push`] writes them).
pub const STORED_SLACK_BYTES: usize = 16;
/// Room for a full frame's entries as stored, and the slack.
const STORED_FRAME_BYTES: usize = FRAME_ENTRIES * STORED_ENTRY_BYTES + STORED_SLACK_BYTES;

/// Appends entries to a frame's stored bytes (compact), remembering the
/// entry before; a frame starts with a new one. Writes into a buffer with
/// room for [`STORED_ENTRY_BYTES`] per entry: a one-byte varint (most
/// are) is one store, and the states are stored whether or not the entry
/// keeps them, the end moved past them only if it does. (Byte by byte into
/// a growing `Vec`, entries were stored at 2.8-3.0 GB/s, this way at
/// 5.3-5.5, and frames packed 1.14 times as fast: 4v4's log at 8 men,
/// `tools/entry_codec.rs`, docs/BENCHMARKS.md, session 90.)
#[derive(Default)]
struct CompactWriter {
    last: u32,
    last_states: Option<u32>,
    /// Bytes written.
    len: usize,
}

impl CompactWriter {
    #[inline(always)]
    fn push(&mut self, stored: &mut [u8], layout: usize, states: u32) {
        let same = self.last_states == Some(states);
        let rest = u64::from((layout as u32).wrapping_sub(self.last)) << 1 | u64::from(same);
        let out = &mut stored[self.len..self.len + STORED_ENTRY_BYTES];
        let varint = if rest < 0x80 {
            out[0] = rest as u8;
            1
        } else {
            put_long_varint(rest, out)
        };
        out[varint..varint + 4].copy_from_slice(&states.to_le_bytes());
        self.len += varint + 4 * usize::from(!same);
        (self.last, self.last_states) = (layout as u32, Some(states));
    }
}

/// Writes `rest` (at most 33 bits) as a LEB128 varint at the front of
/// `out`; returns its bytes (at most 5).
#[inline(never)]
fn put_long_varint(mut rest: u64, out: &mut [u8]) -> usize {
    let mut n = 0;
    while rest >= 0x80 {
        out[n] = rest as u8 | 0x80;
        rest >>= 7;
        n += 1;
    }
    out[n] = rest as u8;
    n + 1
}

/// The entries `raw` as a frame stores them (compact), into `stored`.
pub fn entries_to_stored(raw: &[u8], stored: &mut Vec<u8>) {
    let len = store_compact(raw, stored);
    stored.truncate(len);
}

/// [`entries_to_stored`] into the front of `stored`, grown if it has not
/// the room (never shrunk: the frame buffers are made once); returns the
/// bytes stored.
fn store_compact(raw: &[u8], stored: &mut Vec<u8>) -> usize {
    let room = raw.len() / ENTRY_BYTES * STORED_ENTRY_BYTES;
    if stored.len() < room {
        stored.resize(room, 0);
    }
    let mut writer = CompactWriter::default();
    for e in raw.chunks_exact(ENTRY_BYTES) {
        let (layout, states) = entry(e);
        writer.push(stored, layout, states);
    }
    writer.len
}

/// Undoes [`entries_to_stored`]: the `entries` entries in `stored` into
/// `raw`, or `None` if `stored` does not hold exactly that many. The plain
/// definition of what frames hold, byte by byte; frames are read by
/// [`Unpacker::for_each`], which the tests hold to this.
pub fn stored_to_entries(stored: &[u8], entries: usize, raw: &mut Vec<u8>) -> Option<()> {
    raw.clear();
    let (mut at, mut last, mut last_states) = (0, 0u32, None);
    for _ in 0..entries {
        let mut word = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = *stored.get(at)?;
            at += 1;
            word |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
            if shift == 28 {
                return None;
            }
        }
        // A difference is 32 bits: more is damage, not a wrapped layout.
        if word >> 33 != 0 {
            return None;
        }
        let states = if word & 1 == 1 {
            last_states?
        } else {
            let bytes = stored.get(at..at + 4)?;
            at += 4;
            u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
        };
        last = last.wrapping_add((word >> 1) as u32);
        last_states = Some(states);
        raw.extend_from_slice(&last.to_le_bytes());
        raw.extend_from_slice(&states.to_le_bytes());
    }
    (at == stored.len()).then_some(())
}

/// Reads stored entries one after another, as [`stored_to_entries`]
/// defines them, from a buffer with [`STORED_SLACK_BYTES`] of zeros past
/// its `len` stored bytes.
struct CompactReader<'a> {
    stored: &'a [u8],
    len: usize,
    at: usize,
    last: u32,
    /// The states of the entry before, if there was one.
    last_states: u32,
    has_last: bool,
}

impl<'a> CompactReader<'a> {
    fn new(stored: &'a [u8], len: usize) -> CompactReader<'a> {
        assert!(stored.len() >= len + STORED_SLACK_BYTES, "stored bytes come with their slack");
        CompactReader { stored, len, at: 0, last: 0, last_states: 0, has_last: false }
    }

    /// The next entry (layout, states), or `None` if the bytes left do not
    /// hold one: never one read from the slack.
    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u32)> {
        let at = self.at;
        debug_assert!(at <= self.len);
        let word = u64::from_le_bytes(self.stored[at..at + 8].try_into().expect("8 bytes"));
        let (rest, varint) = if word & 0x80 == 0 { (word & 0x7f, 1) } else { long_varint(word)? };
        let next = u32::from_le_bytes(self.stored[at + varint..at + varint + 4].try_into().expect("4 bytes"));
        let same = rest & 1 == 1;
        // Whether an entry keeps the states of the one before follows no
        // pattern a branch could predict.
        let states = std::hint::select_unpredictable(same, self.last_states, next);
        self.at = at + varint + 4 * usize::from(!same);
        if (same & !self.has_last) | (self.at > self.len) {
            return None;
        }
        self.last = self.last.wrapping_add((rest >> 1) as u32);
        (self.last_states, self.has_last) = (states, true);
        Some((self.last as usize, states))
    }

    /// Whether every stored byte has been read.
    fn is_done(&self) -> bool {
        self.at == self.len
    }
}

/// Calls `visit(layout, states)` for each of the `entries` entries stored
/// in `padded[..len]`, which [`STORED_SLACK_BYTES`] of zeros follow, as
/// [`stored_to_entries`] reads them; `None` if the bytes do not hold
/// exactly that many (`visit` may have seen those before the damage).
pub fn visit_stored(padded: &[u8], len: usize, entries: usize, mut visit: impl FnMut(usize, u32)) -> Option<()> {
    let mut reader = CompactReader::new(padded, len);
    for _ in 0..entries {
        let (layout, states) = reader.next()?;
        visit(layout, states);
    }
    reader.is_done().then_some(())
}

/// A varint of more than one byte at the front of `word` (its first 8
/// bytes): (value, bytes), or `None` if it is longer than 5 bytes or more
/// than 33 bits (damage, not a wrapped layout).
#[inline(never)]
fn long_varint(word: u64) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for n in 0..5 {
        let byte = (word >> (8 * n)) as u8;
        value |= u64::from(byte & 0x7f) << (7 * n);
        if byte < 0x80 {
            return (value >> 33 == 0).then_some((value, n + 1));
        }
    }
    None
}

/// Packs `raw`, at most [`FRAME_ENTRIES`] entries as bytes, as one frame
/// into `into` (which must hold [`frames_bound`] of them); returns the
/// bytes written.
pub(super) fn pack_frame(raw: &[u8], into: &mut [u8]) -> usize {
    debug_assert!(raw.len() <= FRAME_BYTES && raw.len().is_multiple_of(ENTRY_BYTES));
    STORED_FRAME.with_borrow_mut(|stored| {
        let len = store_compact(raw, stored);
        let first_layout = raw.get(..ENTRY_BYTES).map_or(0, |e| entry(e).0 as u32);
        pack_stored(&stored[..len], (raw.len() / ENTRY_BYTES, first_layout), into)
    })
}

/// Packs the stored bytes of `entries` entries, the first of `first_layout`,
/// as one frame into `into`; returns the bytes written.
fn pack_stored(stored: &[u8], (entries, first_layout): (usize, u32), into: &mut [u8]) -> usize {
    debug_assert!(entries <= FRAME_ENTRIES && stored.len() <= entries * STORED_ENTRY_BYTES);
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = compressor.get_or_insert_with(|| {
            let mut compressor = zstd::bulk::Compressor::new(FRAME_LEVEL).expect("zstd level -1 exists");
            // A frame checks itself when unpacked (4 bytes): the files
            // have no other checksum.
            let checksum = zstd::zstd_safe::CParameter::ChecksumFlag(true);
            compressor.set_parameter(checksum).expect("zstd frames have checksums");
            compressor
        });
        let payload = &mut into[FRAME_HEADER_BYTES..];
        assert!(payload.len() >= zstd::zstd_safe::compress_bound(stored.len()), "room for the frame's bound");
        let compressed = compressor.compress_to_buffer(stored, payload).expect("room for the frame");
        into[..4].copy_from_slice(&(entries as u32).to_le_bytes());
        into[4..8].copy_from_slice(&(compressed as u32).to_le_bytes());
        into[8..FRAME_HEADER_BYTES].copy_from_slice(&first_layout.to_le_bytes());
        FRAME_HEADER_BYTES + compressed
    })
}

/// Encodes `entries` as frames into `into`, which must hold
/// [`frames_bound`] of their number; returns the bytes written and the
/// number of entries. Entries go straight into a frame's stored bytes.
pub(super) fn encode(entries: impl Iterator<Item = (usize, u32)>, into: &mut [u8]) -> (usize, u32) {
    STORED_FRAME.with_borrow_mut(|stored| {
        if stored.len() < STORED_FRAME_BYTES {
            stored.resize(STORED_FRAME_BYTES, 0);
        }
        let (mut len, mut count, mut in_frame, mut first_layout) = (0, 0u32, 0, 0);
        let mut writer = CompactWriter::default();
        for (layout, states) in entries {
            if in_frame == 0 {
                first_layout = layout as u32;
            }
            writer.push(stored, layout, states);
            (in_frame, count) = (in_frame + 1, count + 1);
            if in_frame == FRAME_ENTRIES {
                len += pack_stored(&stored[..writer.len], (in_frame, first_layout), &mut into[len..]);
                (in_frame, writer) = (0, CompactWriter::default());
            }
        }
        if in_frame > 0 {
            len += pack_stored(&stored[..writer.len], (in_frame, first_layout), &mut into[len..]);
        }
        (len, count)
    })
}

/// What is wrong with a frame (the files that hold frames name it in
/// their own errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FrameError {
    Header,
    Unpack,
}

impl FrameError {
    pub fn what(self) -> &'static str {
        match self {
            FrameError::Header => "a frame header is out of bounds",
            FrameError::Unpack => "a frame does not unpack to its entries, the first at its header's layout",
        }
    }
}

/// Unpacks frames: one frame's entries as stored (and their slack), and
/// the decompressor, made once.
pub(super) struct Unpacker {
    stored: Vec<u8>,
    decompressor: zstd::bulk::Decompressor<'static>,
}

impl Unpacker {
    pub fn new() -> Unpacker {
        // zstd fails here only if it cannot allocate, which aborts
        // everywhere else too.
        let decompressor = zstd::bulk::Decompressor::new().expect("zstd allocates a decompression context");
        Unpacker { stored: Vec::with_capacity(STORED_FRAME_BYTES), decompressor }
    }

    /// This thread's unpacker, made at its first use, lent until the
    /// [`Lent`] is dropped and then kept for the next. Making one (a zstd
    /// decompression context and a frame's buffer) for each job that reads
    /// a log or a schedule took 0.7% of a streamed 6-men run's CPU samples
    /// (`ZSTD_createDCtx`, docs/BENCHMARKS.md, session 93). While one is
    /// lent, another lend on the thread makes a new one.
    pub fn lend() -> Lent {
        Lent(Some(KEPT_UNPACKER.take().unwrap_or_else(Unpacker::new)))
    }

    /// Calls `visit(layout, states)` for each entry of a frame with
    /// `header` whose compressed bytes are `compressed`, in order, read
    /// straight from the stored bytes (not written out as 8-byte entries
    /// first, to be read again). A frame that
    /// does not hold its header's entries, the first at its header's
    /// layout, is refused; `visit` may have seen its entries up to the
    /// damage (callers drop what they wrote on an error).
    #[inline(always)]
    pub fn for_each(
        &mut self,
        header: &FrameHeader,
        compressed: &[u8],
        mut visit: impl FnMut(usize, u32),
    ) -> Result<(), FrameError> {
        let stored = &mut self.stored;
        stored.clear();
        // Room for what the frame may hold (made when the unpacker was):
        // a frame that unpacks to more is refused by zstd or below.
        stored.reserve(header.entries * STORED_ENTRY_BYTES + STORED_SLACK_BYTES);
        self.decompressor.decompress_to_buffer(compressed, stored).map_err(|_| FrameError::Unpack)?;
        let len = stored.len();
        stored.resize(len + STORED_SLACK_BYTES, 0);
        let mut reader = CompactReader::new(stored, len);
        if header.entries > 0 {
            let (first, states) = reader.next().ok_or(FrameError::Unpack)?;
            if first as u32 != header.first_layout {
                return Err(FrameError::Unpack);
            }
            visit(first, states);
        }
        for _ in 1..header.entries {
            let (layout, states) = reader.next().ok_or(FrameError::Unpack)?;
            visit(layout, states);
        }
        if reader.is_done() { Ok(()) } else { Err(FrameError::Unpack) }
    }
}

/// An [`Unpacker`] lent by [`Unpacker::lend`], given back to its thread
/// when dropped.
pub(super) struct Lent(Option<Unpacker>);

impl std::ops::Deref for Lent {
    type Target = Unpacker;
    fn deref(&self) -> &Unpacker {
        self.0.as_ref().expect("lent until dropped")
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut Unpacker {
        self.0.as_mut().expect("lent until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        KEPT_UNPACKER.set(self.0.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator from `seed`: the tests' random entries.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// A lent unpacker is the thread's kept one once the last lend has
    /// ended; a lend while another is out gets one of its own.
    #[test]
    fn a_lent_unpacker_is_kept_for_the_next_lend() {
        let kept = Unpacker::lend().stored.as_ptr();
        let again = Unpacker::lend();
        assert_eq!(again.stored.as_ptr(), kept, "the kept unpacker, not a new one");
        let nested = Unpacker::lend();
        assert_ne!(nested.stored.as_ptr(), kept, "a second unpacker while the first is lent");
    }

    /// Frames give back their entries whatever the order of the layouts
    /// (differences wrap), across frame boundaries too.
    #[test]
    fn frames_round_trip_entries_in_any_order() {
        let mut random = xorshift(0x2545_f491_4f6c_dd1d);
        let mut next = || random() as u32;
        let ascending: Vec<(usize, u32)> = (0..FRAME_ENTRIES + 77).map(|n| (3 * n + 1, next() >> 2)).collect();
        let scattered: Vec<(usize, u32)> = (0..1000).map(|_| (next() as usize, next())).collect();
        // Runs of consecutive layouts with the same states, as a log has.
        let runs: Vec<(usize, u32)> = (0..3000).map(|n| (n + n / 7 * 50, (n / 13) as u32 & 3)).collect();
        let lists =
            [ascending, scattered, runs, vec![(0, 5)], vec![(u32::MAX as usize, 1), (0, 2)], vec![(1, 0), (2, 0)]];
        for entries in &lists {
            let mut packed = vec![0u8; frames_bound(entries.len())];
            let (len, count) = encode(entries.iter().copied(), &mut packed);
            assert_eq!(count as usize, entries.len());
            let (mut unpacker, mut at, mut back) = (Unpacker::new(), 0, Vec::new());
            while at < len {
                let header = packed[at..at + FRAME_HEADER_BYTES].try_into().expect("a header");
                let header = frame_header(header).expect("a frame encode wrote");
                assert_eq!(header.first_layout as usize, entries[back.len()].0, "the header's first layout");
                let payload = &packed[at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + header.compressed];
                back.extend(unpacked(&mut unpacker, &header, payload).expect("unpacks"));
                at += FRAME_HEADER_BYTES + header.compressed;
            }
            assert_eq!(&back, entries);
        }
    }

    /// Stored bytes that do not hold exactly the entries their frame
    /// header gives are refused, never read past or taken in part.
    #[test]
    fn damaged_frames_are_refused() {
        let entries = [(3usize, 7u32), (4, 7), (9, 1 << 29)];
        let mut raw = Vec::new();
        for &(layout, states) in &entries {
            raw.extend_from_slice(&(layout as u32).to_le_bytes());
            raw.extend_from_slice(&states.to_le_bytes());
        }
        let mut stored = Vec::new();
        entries_to_stored(&raw, &mut stored);
        // 3 * 2 + states; 1 * 2 + 1 (the states of the one before); 5 * 2 + states.
        assert_eq!(stored.len(), 1 + 4 + 1 + 1 + 4);
        let mut back = Vec::new();
        assert_eq!(stored_to_entries(&stored, 3, &mut back), Some(()));
        assert_eq!(back, raw);
        let refused = |bytes: &[u8], n: usize| stored_to_entries(bytes, n, &mut Vec::new()).is_none();
        assert!(refused(&stored, 2), "bytes left over");
        assert!(refused(&stored, 4), "an entry missing");
        assert!(refused(&stored[..stored.len() - 1], 3), "cut in the states");
        assert!(refused(&[0x03], 1), "the first entry's states repeat no entry");
        assert!(refused(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0], 1), "a varint over five bytes");
        assert!(refused(&[0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0], 1), "a difference over 32 bits");
        assert!(refused(&[0xff, 0xff, 0xff, 0xff, 0xff], 1), "a varint over five bytes, nothing after");
        assert!(refused(&[0x80], 1), "a varint cut short");
        // Through zstd as well: an unpacker refuses the frame.
        let mut packed = vec![0u8; frames_bound(3)];
        let len = pack_frame(&raw, &mut packed);
        let header = packed[..FRAME_HEADER_BYTES].try_into().expect("a header");
        let header = frame_header(header).expect("a frame pack_frame wrote");
        assert_eq!(header, FrameHeader { entries: 3, compressed: len - FRAME_HEADER_BYTES, first_layout: 3 });
        let payload = &packed[FRAME_HEADER_BYTES..len];
        let mut unpacker = Unpacker::new();
        assert_eq!(unpacked(&mut unpacker, &FrameHeader { entries: 2, ..header }, payload), Err(FrameError::Unpack));
        let more = FrameHeader { entries: 4, ..header };
        assert_eq!(unpacked(&mut unpacker, &more, payload), Err(FrameError::Unpack), "an entry missing");
        let elsewhere = FrameHeader { first_layout: 4, ..header };
        assert_eq!(unpacked(&mut unpacker, &elsewhere, payload), Err(FrameError::Unpack), "another first layout");
        assert_eq!(unpacked(&mut unpacker, &header, payload), Ok(entries.to_vec()));
    }

    /// A frame's entries through [`Unpacker::for_each`].
    fn unpacked(
        unpacker: &mut Unpacker,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<Vec<(usize, u32)>, FrameError> {
        let mut entries = Vec::new();
        unpacker.for_each(header, payload, |layout, states| entries.push((layout, states)))?;
        Ok(entries)
    }

    /// The entries [`CompactReader`] reads from `stored` (given with its
    /// slack), or `None` if they are not exactly `entries` of them.
    fn read_stored(stored: &[u8], entries: usize) -> Option<Vec<u8>> {
        let mut padded = stored.to_vec();
        padded.resize(stored.len() + STORED_SLACK_BYTES, 0);
        let mut raw = Vec::new();
        visit_stored(&padded, stored.len(), entries, |layout, states| {
            raw.extend_from_slice(&(layout as u32).to_le_bytes());
            raw.extend_from_slice(&states.to_le_bytes());
        })?;
        Some(raw)
    }

    /// The writer stores what the plain byte-by-byte definition does, and
    /// the reader reads back what [`stored_to_entries`] does, from stored
    /// bytes whole, cut, grown, with bytes changed, or random, for the
    /// entry counts around theirs.
    #[test]
    fn the_fast_writer_and_reader_agree_with_their_definitions() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let plain_store = |entries: &[(usize, u32)]| {
            let (mut stored, mut last, mut last_states) = (Vec::new(), 0u32, None);
            for &(layout, states) in entries {
                let same = last_states == Some(states);
                let mut rest = u64::from((layout as u32).wrapping_sub(last)) << 1 | u64::from(same);
                while rest >= 0x80 {
                    stored.push(rest as u8 | 0x80);
                    rest >>= 7;
                }
                stored.push(rest as u8);
                if !same {
                    stored.extend_from_slice(&states.to_le_bytes());
                }
                (last, last_states) = (layout as u32, Some(states));
            }
            stored
        };
        for round in 0..2000 {
            let n = (next() % 40) as usize;
            // Small steps and few distinct states most often, as logs have;
            // any layout and states now and then.
            let wide = round % 5 == 0;
            let mut layout = 0u64;
            let entries: Vec<(usize, u32)> = (0..n)
                .map(|_| {
                    let r = next();
                    layout += if wide { r >> 40 } else { r % 70 };
                    let states = if wide { (r >> 8) as u32 } else { (r >> 20) as u32 % 3 };
                    (layout as u32 as usize, states)
                })
                .collect();
            let mut raw = Vec::new();
            for &(layout, states) in &entries {
                raw.extend_from_slice(&(layout as u32).to_le_bytes());
                raw.extend_from_slice(&states.to_le_bytes());
            }
            let mut stored = vec![0xa5; 3];
            entries_to_stored(&raw, &mut stored);
            assert_eq!(stored, plain_store(&entries), "round {round}");
            let mut variants = vec![stored.clone()];
            if !stored.is_empty() {
                let cut = (next() as usize) % stored.len();
                variants.push(stored[..cut].to_vec());
                let mut changed = stored.clone();
                changed[(next() as usize) % stored.len()] ^= 1 << (next() % 8);
                variants.push(changed);
                let mut ones = stored.clone();
                ones[(next() as usize) % stored.len()] |= 0x80;
                variants.push(ones);
            }
            let mut grown = stored.clone();
            grown.push(next() as u8);
            variants.push(grown);
            variants.push((0..(next() % 30)).map(|_| next() as u8 | if wide { 0 } else { 0x80 }).collect());
            for bytes in &variants {
                for count in n.saturating_sub(1)..=n + 1 {
                    let mut back = Vec::new();
                    let plain = stored_to_entries(bytes, count, &mut back).map(|()| back);
                    assert_eq!(read_stored(bytes, count), plain, "round {round}, {count} entries of {bytes:02x?}");
                }
            }
        }
    }
}
