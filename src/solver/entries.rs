//! (layout, card states) entries, what the decision log and the capture
//! schedule store, and the zstd frames they are stored in.
//!
//! Owns the entry and frame byte layouts; knows nothing of files, steps or
//! groups. An entry is `layout: u32` (within its group), `states: u32` (a
//! set of card states), little-endian. A frame is `entries: u32,
//! compressed: u32`, then a zstd frame (with its content checksum) of
//! `compressed` bytes that unpacks to `entries` entries, at most
//! [`FRAME_ENTRIES`].
//!
//! Why compressed: at 8 men the decision log of 4v4 would be about 26 GB
//! raw, next to 24 GB of planes, on a disk that must also hold the rest of
//! the table. zstd level 1 makes the 6-men 3v3 decision log 2.45 times
//! smaller and its capture schedule 2.44 times (level 3 was no better on a
//! part of the log, with the zstd tool), for about 13% more CPU time in a
//! streamed 6-men run.

use std::cell::RefCell;

/// Bytes of an entry.
pub(super) const ENTRY_BYTES: usize = 8;
/// Most entries in one frame (128 KiB of them raw): bounds what encoding
/// and unpacking hold in memory, whatever the size of a group.
pub(super) const FRAME_ENTRIES: usize = 16 << 10;
pub(super) const FRAME_HEADER_BYTES: usize = 8;
/// zstd level of the frames: the fastest, and no worse than level 3 here.
const FRAME_LEVEL: i32 = 1;

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

/// Most bytes a frame of `entries` entries takes, header included.
fn frame_bound(entries: usize) -> usize {
    FRAME_HEADER_BYTES + zstd::zstd_safe::compress_bound(entries * ENTRY_BYTES)
}

/// Most bytes [`encode`] writes for up to `entries` entries.
pub(super) fn frames_bound(entries: usize) -> usize {
    let full = entries / FRAME_ENTRIES;
    full * frame_bound(FRAME_ENTRIES) + frame_bound(entries % FRAME_ENTRIES)
}

/// Raw bytes of a full frame.
pub(super) const FRAME_BYTES: usize = FRAME_ENTRIES * ENTRY_BYTES;

thread_local! {
    /// Per thread (rayon workers encode groups in parallel), made once: the
    /// compressor, and one frame's entries before compression.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static RAW_FRAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Packs `raw`, at most [`FRAME_ENTRIES`] entries as bytes, as one frame
/// into `into` (which must hold [`frames_bound`] of them); returns the
/// bytes written.
pub(super) fn pack_frame(raw: &[u8], into: &mut [u8]) -> usize {
    debug_assert!(raw.len() <= FRAME_BYTES && raw.len().is_multiple_of(ENTRY_BYTES));
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = compressor.get_or_insert_with(|| {
            let mut compressor = zstd::bulk::Compressor::new(FRAME_LEVEL).expect("zstd level 1 exists");
            // A frame checks itself when unpacked (4 bytes): the files
            // have no other checksum.
            let checksum = zstd::zstd_safe::CParameter::ChecksumFlag(true);
            compressor.set_parameter(checksum).expect("zstd frames have checksums");
            compressor
        });
        let payload = &mut into[FRAME_HEADER_BYTES..];
        assert!(payload.len() >= zstd::zstd_safe::compress_bound(raw.len()), "room for the frame's bound");
        let compressed = compressor.compress_to_buffer(raw, payload).expect("room for the frame");
        into[..4].copy_from_slice(&((raw.len() / ENTRY_BYTES) as u32).to_le_bytes());
        into[4..FRAME_HEADER_BYTES].copy_from_slice(&(compressed as u32).to_le_bytes());
        FRAME_HEADER_BYTES + compressed
    })
}

/// Encodes `entries` as frames into `into`, which must hold
/// [`frames_bound`] of their number; returns the bytes written and the
/// number of entries.
pub(super) fn encode(entries: impl Iterator<Item = (usize, u32)>, into: &mut [u8]) -> (usize, u32) {
    RAW_FRAME.with_borrow_mut(|raw| {
        raw.resize(FRAME_BYTES, 0);
        let (mut len, mut count, mut at) = (0, 0u32, 0);
        for (layout, states) in entries {
            put_entry(&mut raw[at..], layout, states);
            (at, count) = (at + ENTRY_BYTES, count + 1);
            if at == FRAME_BYTES {
                len += pack_frame(raw, &mut into[len..]);
                at = 0;
            }
        }
        if at > 0 {
            len += pack_frame(&raw[..at], &mut into[len..]);
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
            FrameError::Unpack => "a frame does not unpack to its entries",
        }
    }
}

/// The (entries, compressed bytes) a frame header gives, if a frame can
/// have them.
pub(super) fn frame_header(header: [u8; FRAME_HEADER_BYTES]) -> Result<(usize, usize), FrameError> {
    let entries = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
    let compressed = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes")) as usize;
    let fits = entries <= FRAME_ENTRIES && FRAME_HEADER_BYTES + compressed <= frame_bound(entries);
    if fits { Ok((entries, compressed)) } else { Err(FrameError::Header) }
}

/// Unpacks frames: one frame's entries and the decompressor, made once.
pub(super) struct Unpacker {
    raw: Vec<u8>,
    decompressor: zstd::bulk::Decompressor<'static>,
}

impl Unpacker {
    pub fn new() -> Unpacker {
        // zstd fails here only if it cannot allocate, which aborts
        // everywhere else too.
        let decompressor = zstd::bulk::Decompressor::new().expect("zstd allocates a decompression context");
        Unpacker { raw: Vec::with_capacity(FRAME_BYTES), decompressor }
    }

    /// The entries of a frame whose header gave `entries` and whose
    /// compressed bytes are `compressed`.
    pub fn unpack(&mut self, compressed: &[u8], entries: usize) -> Result<&[u8], FrameError> {
        self.raw.clear();
        let unpacked = self.decompressor.decompress_to_buffer(compressed, &mut self.raw);
        if unpacked.ok() != Some(entries * ENTRY_BYTES) {
            return Err(FrameError::Unpack);
        }
        Ok(&self.raw[..])
    }
}
