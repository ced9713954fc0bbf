//! The raw shard format: one self-describing file per material.
//!
//! Owns the byte layout of a shard (header fields, checksums, the value
//! area) and its validation; does no file-system I/O (see `store`) and never
//! touches the solver or the index numbering. docs/FORMAT.md is the
//! reader's reference; keep the two in step.
//!
//! A shard is a header followed by the values of one material: a value byte
//! per state (`layouts * 30` bytes, format version 1), or a little-endian
//! value word per state for tables too deep for bytes (`layouts * 30 * 2`,
//! format version 2, the header otherwise the same); see `value` and
//! `index`. All integers are little-endian. Compressed shards are version 1
//! only: their packing is of bytes.
//! Each `*_OFFSET` constant below is the previous offset plus the previous
//! field's size, so the layout can be read off top to bottom.

use crate::index::{Material, MaterialIndex};
use crate::rules::{BASE_CARDS, CARD_STATES, CARDS_PER_GAME, Card, CardSet, MAX_PIECES_PER_SIDE, NoMoveRule, Rules};
use crate::table::SolvedMaterial;
use crate::value::ValueWidth;
use rayon::prelude::*;
use thiserror::Error;

/// First bytes of every shard.
pub const MAGIC: [u8; 8] = *b"ONITBRAW";
/// Version of this byte layout with a value byte per state.
pub const FORMAT_VERSION: u16 = 1;
/// Version of this byte layout with a value word per state: the header is
/// version 1's, the value area twice as long.
pub const FORMAT_VERSION_WORDS: u16 = 2;
/// Version of the position numbering (`index`) the value bytes follow.
/// Bump it whenever `MaterialIndex` numbers layouts differently.
pub const INDEX_SCHEME_VERSION: u16 = 2;
/// Bytes of value area covered by one block checksum (the last block may be
/// shorter).
pub const BLOCK_BYTES: u32 = 1 << 22;
/// Bytes of a card name field (ASCII, NUL-padded).
pub const CARD_NAME_BYTES: usize = 16;
/// Most (dx, dy) offsets a card record holds.
pub const MAX_CARD_OFFSETS: usize = 8;
/// Largest |dx| or |dy| of a card offset: anything more leaves the board.
const MAX_STEP: i8 = 4;

const MAGIC_OFFSET: usize = 0;
const MAGIC_SIZE: usize = MAGIC.len();
const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC_SIZE;
const VERSION_SIZE: usize = 2;
const INDEX_SCHEME_OFFSET: usize = VERSION_OFFSET + VERSION_SIZE;
const INDEX_SCHEME_SIZE: usize = 2;
const NO_MOVE_OFFSET: usize = INDEX_SCHEME_OFFSET + INDEX_SCHEME_SIZE;
const NO_MOVE_SIZE: usize = 1;
const MAX_PER_SIDE_OFFSET: usize = NO_MOVE_OFFSET + NO_MOVE_SIZE;
const MAX_PER_SIDE_SIZE: usize = 1;
const MOVER_OFFSET: usize = MAX_PER_SIDE_OFFSET + MAX_PER_SIDE_SIZE;
const MOVER_SIZE: usize = 1;
const OPPONENT_OFFSET: usize = MOVER_OFFSET + MOVER_SIZE;
const OPPONENT_SIZE: usize = 1;
const CARDS_OFFSET: usize = OPPONENT_OFFSET + OPPONENT_SIZE;
// One card record: name, offset count, offset pairs.
const CARD_NAME_OFFSET: usize = 0;
const CARD_COUNT_OFFSET: usize = CARD_NAME_OFFSET + CARD_NAME_BYTES;
const CARD_COUNT_SIZE: usize = 1;
const CARD_PAIRS_OFFSET: usize = CARD_COUNT_OFFSET + CARD_COUNT_SIZE;
const CARD_PAIRS_SIZE: usize = 2 * MAX_CARD_OFFSETS;
const CARD_RECORD_SIZE: usize = CARD_PAIRS_OFFSET + CARD_PAIRS_SIZE;
const CARDS_SIZE: usize = CARDS_PER_GAME * CARD_RECORD_SIZE;
const LAYOUTS_OFFSET: usize = CARDS_OFFSET + CARDS_SIZE;
const LAYOUTS_SIZE: usize = 8;
const BLOCK_SIZE_OFFSET: usize = LAYOUTS_OFFSET + LAYOUTS_SIZE;
const BLOCK_SIZE_SIZE: usize = 4;
const BLOCK_COUNT_OFFSET: usize = BLOCK_SIZE_OFFSET + BLOCK_SIZE_SIZE;
const BLOCK_COUNT_SIZE: usize = 4;
/// Bytes before the block checksums; enough to learn the header's length.
pub const FIXED_HEADER_BYTES: usize = BLOCK_COUNT_OFFSET + BLOCK_COUNT_SIZE;
const CRC_SIZE: usize = 4;

const _: () = assert!(CARDS_OFFSET == 16 && CARD_RECORD_SIZE == 33 && FIXED_HEADER_BYTES == 197);

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("truncated: needs at least {needed} bytes, has {got}")]
    Truncated { needed: u64, got: u64 },
    #[error("{extra} unexpected bytes after the value area")]
    TrailingBytes { extra: u64 },
    #[error("not an onitb raw shard (bad magic bytes)")]
    BadMagic,
    #[error("not an onitb compressed shard (bad magic bytes)")]
    BadCompressedMagic,
    #[error(
        "format version {0} is not supported (this build reads versions {FORMAT_VERSION} and {FORMAT_VERSION_WORDS})"
    )]
    Version(u16),
    #[error("index scheme {0} is not supported (this build numbers positions with scheme {INDEX_SCHEME_VERSION})")]
    IndexScheme(u16),
    #[error("unknown no-move rule code {0} (0 = pass, 1 = loss)")]
    NoMoveRule(u8),
    #[error("max pieces per side {0} is outside 1..={MAX_PIECES_PER_SIDE}")]
    MaxPerSide(u8),
    #[error("material {mover}v{opponent} does not belong to a table of up to {max_per_side} pieces per side")]
    Material { mover: u8, opponent: u8, max_per_side: u8 },
    #[error("card {slot}: {problem}")]
    Card { slot: usize, problem: String },
    #[error("card '{0}' appears twice")]
    DuplicateCard(String),
    #[error("material {material} has {expected} layouts, header says {got}")]
    Layouts { material: Material, expected: u64, got: u64 },
    #[error(
        "block size {0} is not the {BLOCK_BYTES} bytes of format versions {FORMAT_VERSION} and {FORMAT_VERSION_WORDS}"
    )]
    BlockSize(u32),
    #[error("block count {got} does not fit the value area ({expected} blocks expected)")]
    BlockCount { expected: u64, got: u32 },
    #[error("header checksum mismatch (stored {stored:08x}, computed {computed:08x})")]
    HeaderCrc { stored: u32, computed: u32 },
    #[error(
        "value block {block} (value bytes {start}..{end}) is damaged: checksum {computed:08x}, stored {stored:08x}"
    )]
    BlockCrc { block: usize, start: u64, end: u64, stored: u32, computed: u32 },
    #[error(
        "compressed block {block} (file bytes {start}..{end}) is damaged: checksum {computed:08x}, stored {stored:08x}"
    )]
    FrameCrc { block: usize, start: u64, end: u64, stored: u32, computed: u32 },
    #[error("compressed block {block} does not decompress: {problem}")]
    Decompress { block: usize, problem: String },
    #[error("compressed block {block} decompresses to damaged bytes: checksum {computed:08x}, stored {stored:08x}")]
    ContentCrc { block: usize, stored: u32, computed: u32 },
    #[error("material {material} layout {layout} card state {card_state}: stored value {stored}: {problem}")]
    WrongValue { material: Material, layout: u64, card_state: u8, stored: u16, problem: String },
    #[error("the shard holds win/draw/loss only, not the values this needs")]
    WdlOnly,
    #[error(
        "content code {0} in a compressed shard of two-byte values (format version 2), which holds values densely packed (code 2) only"
    )]
    WordContent(u8),
    #[error("value area has {got} bytes, the material needs {expected}")]
    ValuesLength { expected: u64, got: u64 },
    #[error("unknown content code {0} (0 and 2 = values, 1 and 3 = win/draw/loss only)")]
    Content(u8),
    #[error("zstd level {0} is out of range")]
    Level(i32),
    #[error("block {block}: frame length {len} is not in 1..={MAX_FRAME_BYTES}")]
    FrameLength { block: usize, len: u32 },
    #[error("cannot be stored: {0}")]
    Unrepresentable(String),
    /// What is not done yet with value words (e.g. "compressing"), read
    /// before "tables with two-byte values".
    #[error("{0} tables with two-byte values (format version {FORMAT_VERSION_WORDS}) is not supported yet")]
    WordValues(&'static str),
}

/// One card as a shard records it: its name and its moves, so that a table
/// of user-defined cards describes itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardRecord {
    pub name: String,
    pub offsets: Vec<(i8, i8)>,
}

/// Everything in a shard's header. Fields are checked on the way in and out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardHeader {
    pub no_move: NoMoveRule,
    /// Max pieces per side of the whole table the shard belongs to.
    pub max_per_side: u8,
    pub material: Material,
    /// The five cards in slot order (the order card states are numbered in).
    pub cards: [CardRecord; CARDS_PER_GAME],
    pub layouts: u64,
    /// Bytes per state of the value area: a byte (format version 1) or a
    /// word (version 2).
    pub width: ValueWidth,
    /// crc32 of each [`BLOCK_BYTES`] block of the value area.
    pub block_crcs: Vec<u32>,
}

/// Bytes of the whole header for a value area of `block_count` blocks.
pub fn header_len(block_count: usize) -> usize {
    FIXED_HEADER_BYTES + CRC_SIZE * block_count + CRC_SIZE
}

/// The whole shard of one material in memory (header and values), of the
/// format version of its width.
pub fn encode(rules: &Rules, max_per_side: usize, solved: &SolvedMaterial) -> Result<Vec<u8>, FormatError> {
    let mut bytes = ShardHeader::new(rules, max_per_side, solved)?.to_bytes();
    bytes.extend_from_slice(&solved.values);
    Ok(bytes)
}

/// Checks a whole shard in memory, value checksums included; returns the
/// header and the value bytes.
pub fn decode(bytes: &[u8]) -> Result<(ShardHeader, &[u8]), FormatError> {
    let header_bytes = ShardHeader::total_len(bytes)?;
    if bytes.len() < header_bytes {
        return Err(FormatError::Truncated { needed: header_bytes as u64, got: bytes.len() as u64 });
    }
    let header = ShardHeader::from_bytes(&bytes[..header_bytes])?;
    let values = &bytes[header_bytes..];
    header.check_values(values)?;
    Ok((header, values))
}

impl ShardHeader {
    /// The header of one material of a table.
    pub fn new(rules: &Rules, max_per_side: usize, solved: &SolvedMaterial) -> Result<ShardHeader, FormatError> {
        let mut header = ShardHeader::for_material(rules, max_per_side, solved.index.material, solved.width)?;
        let expected = header.values_len();
        if solved.values.len() as u64 != expected {
            return Err(FormatError::ValuesLength { expected, got: solved.values.len() as u64 });
        }
        header.block_crcs = block_crcs(&solved.values);
        Ok(header)
    }

    /// The header of one material of a table whose values are `width`
    /// wide, with every block checksum 0 (to be filled in by whoever writes
    /// the values).
    pub fn for_material(
        rules: &Rules,
        max_per_side: usize,
        material: Material,
        width: ValueWidth,
    ) -> Result<ShardHeader, FormatError> {
        let max = u8::try_from(max_per_side)
            .ok()
            .filter(|m| (1..=MAX_PIECES_PER_SIDE as u8).contains(m))
            .ok_or_else(|| FormatError::Unrepresentable(format!("max pieces per side {max_per_side}")))?;
        if material.mover > max || material.opponent > max {
            return Err(FormatError::Material {
                mover: material.mover,
                opponent: material.opponent,
                max_per_side: max,
            });
        }
        let cards =
            rules.cards.cards().map(|card| CardRecord { name: card.name.to_string(), offsets: card.offsets.to_vec() });
        for (slot, card) in cards.iter().enumerate() {
            check_card(slot, card).map_err(|e| match e {
                FormatError::Card { slot, problem } => FormatError::Unrepresentable(format!("card {slot}: {problem}")),
                other => other,
            })?;
        }
        check_distinct(&cards)?;
        let layouts = MaterialIndex::new(material).layouts();
        let blocks = values_len(layouts, width)?.div_ceil(BLOCK_BYTES as u64) as usize;
        Ok(ShardHeader {
            no_move: rules.no_move,
            max_per_side: max,
            material,
            cards,
            layouts,
            width,
            block_crcs: vec![0; blocks],
        })
    }

    /// Number of value blocks.
    pub fn block_count(&self) -> usize {
        self.values_len().div_ceil(BLOCK_BYTES as u64) as usize
    }

    /// The value bytes block `block` covers (offsets in the value area).
    pub fn block_range(&self, block: usize) -> std::ops::Range<u64> {
        let start = block as u64 * BLOCK_BYTES as u64;
        start..(start + BLOCK_BYTES as u64).min(self.values_len())
    }

    /// Length of the value area in bytes.
    pub fn values_len(&self) -> u64 {
        self.layouts * (CARD_STATES * self.width.bytes()) as u64
    }

    /// The format version the header says: that of its values' width.
    pub fn version(&self) -> u16 {
        version_of(self.width)
    }

    /// Length of the whole header, from a prefix of at least
    /// [`FIXED_HEADER_BYTES`] bytes (checks every fixed field first).
    pub fn total_len(prefix: &[u8]) -> Result<usize, FormatError> {
        let fixed = read_fixed(prefix, &MAGIC)?;
        Ok(header_len(fixed.block_count))
    }

    /// Parses and checks a header: `bytes` must be exactly the header.
    pub fn from_bytes(bytes: &[u8]) -> Result<ShardHeader, FormatError> {
        let fixed = read_fixed(bytes, &MAGIC)?;
        let len = header_len(fixed.block_count);
        if bytes.len() < len {
            return Err(FormatError::Truncated { needed: len as u64, got: bytes.len() as u64 });
        }
        if bytes.len() > len {
            return Err(FormatError::TrailingBytes { extra: (bytes.len() - len) as u64 });
        }
        check_seal(bytes)?;
        let block_crcs = (0..fixed.block_count).map(|i| u32_at(bytes, FIXED_HEADER_BYTES + CRC_SIZE * i)).collect();
        Ok(ShardHeader {
            no_move: fixed.no_move,
            max_per_side: fixed.max_per_side,
            material: fixed.material,
            cards: fixed.cards,
            layouts: fixed.layouts,
            width: fixed.width,
            block_crcs,
        })
    }

    /// The header bytes, checksum included.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; header_len(self.block_crcs.len())];
        self.write_fixed(&mut out, &MAGIC, self.block_crcs.len());
        for (i, crc) in self.block_crcs.iter().enumerate() {
            out[FIXED_HEADER_BYTES + CRC_SIZE * i..][..CRC_SIZE].copy_from_slice(&crc.to_le_bytes());
        }
        seal(&mut out);
        out
    }

    /// Writes the fixed fields (offsets `0..FIXED_HEADER_BYTES`).
    fn write_fixed(&self, out: &mut [u8], magic: &[u8; MAGIC_SIZE], block_count: usize) {
        out[MAGIC_OFFSET..][..MAGIC_SIZE].copy_from_slice(magic);
        out[VERSION_OFFSET..][..VERSION_SIZE].copy_from_slice(&self.version().to_le_bytes());
        out[INDEX_SCHEME_OFFSET..][..INDEX_SCHEME_SIZE].copy_from_slice(&INDEX_SCHEME_VERSION.to_le_bytes());
        out[NO_MOVE_OFFSET] = no_move_code(self.no_move);
        out[MAX_PER_SIDE_OFFSET] = self.max_per_side;
        out[MOVER_OFFSET] = self.material.mover;
        out[OPPONENT_OFFSET] = self.material.opponent;
        for (slot, card) in self.cards.iter().enumerate() {
            let record = &mut out[CARDS_OFFSET + slot * CARD_RECORD_SIZE..][..CARD_RECORD_SIZE];
            let name = card.name.as_bytes();
            let name_len = name.len().min(CARD_NAME_BYTES);
            record[CARD_NAME_OFFSET..][..name_len].copy_from_slice(&name[..name_len]);
            let count = card.offsets.len().min(MAX_CARD_OFFSETS);
            record[CARD_COUNT_OFFSET] = count as u8;
            for (i, &(dx, dy)) in card.offsets.iter().take(count).enumerate() {
                record[CARD_PAIRS_OFFSET + 2 * i] = dx as u8;
                record[CARD_PAIRS_OFFSET + 2 * i + 1] = dy as u8;
            }
        }
        out[LAYOUTS_OFFSET..][..LAYOUTS_SIZE].copy_from_slice(&self.layouts.to_le_bytes());
        out[BLOCK_SIZE_OFFSET..][..BLOCK_SIZE_SIZE].copy_from_slice(&BLOCK_BYTES.to_le_bytes());
        let blocks = block_count as u32;
        out[BLOCK_COUNT_OFFSET..][..BLOCK_COUNT_SIZE].copy_from_slice(&blocks.to_le_bytes());
    }

    /// Checks the value area's length and every block checksum.
    pub fn check_values(&self, values: &[u8]) -> Result<(), FormatError> {
        let expected = self.values_len();
        let got = values.len() as u64;
        if got < expected {
            return Err(FormatError::Truncated { needed: expected, got });
        }
        if got > expected {
            return Err(FormatError::TrailingBytes { extra: got - expected });
        }
        let computed = block_crcs(values);
        match computed.iter().zip(&self.block_crcs).position(|(c, s)| c != s) {
            None => Ok(()),
            Some(block) => {
                let start = block as u64 * BLOCK_BYTES as u64;
                let end = (start + BLOCK_BYTES as u64).min(got);
                Err(FormatError::BlockCrc {
                    block,
                    start,
                    end,
                    stored: self.block_crcs[block],
                    computed: computed[block],
                })
            }
        }
    }

    /// The rules the shard was built under. Cards that match a base card
    /// exactly are the base card; others are user-defined and live for the
    /// rest of the program (a few bytes each).
    pub fn rules(&self) -> Result<Rules, FormatError> {
        let catalogue: Vec<Card> = self.cards.iter().map(card_of_record).collect();
        let names: Vec<&str> = catalogue.iter().map(|c| c.name).collect();
        let cards = CardSet::from_names_in(&names, &catalogue)
            .map_err(|e| FormatError::Card { slot: 0, problem: e.to_string() })?;
        Ok(Rules { cards, no_move: self.no_move })
    }
}

/// First bytes of every compressed shard.
pub const COMPRESSED_MAGIC: [u8; 8] = *b"ONITBZST";
const CONTENT_OFFSET: usize = FIXED_HEADER_BYTES;
const CONTENT_SIZE: usize = 1;
const LEVEL_OFFSET: usize = CONTENT_OFFSET + CONTENT_SIZE;
const LEVEL_SIZE: usize = 4;
/// Bytes of a compressed shard before its seek table.
pub const COMPRESSED_FIXED_HEADER_BYTES: usize = LEVEL_OFFSET + LEVEL_SIZE;
// One seek-table entry: frame length, frame checksum, content checksum.
const FRAME_ENTRY_SIZE: usize = 12;
/// Largest zstd frame a block may compress to (above zstd's compress bound
/// for one block, 4 MiB + 16 KiB).
pub const MAX_FRAME_BYTES: u32 = BLOCK_BYTES + BLOCK_BYTES / 128;
/// zstd levels a header may record.
pub const LEVELS: std::ops::RangeInclusive<i32> = -131072..=22;

const _: () = assert!(COMPRESSED_FIXED_HEADER_BYTES == 202);

/// What the bytes of a compressed shard hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// The value bytes (win / draw / loss and plies).
    Values,
    /// Only win / draw / loss: every win byte is stored as 255 (win in 1),
    /// every loss as 1 (loss in 0), draws as 128.
    Wdl,
}

/// How a compressed block's stored bytes are laid out (docs/FORMAT.md,
/// "Stored bytes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// One byte per state, recomputable states filled with any byte
    /// (what writers before 2026-11-22 wrote; still read).
    Filled,
    /// Only what the rules cannot recompute: the value bytes of the stored
    /// states (values), or a loss and a draw bit plane per layout (WDL).
    Dense,
}

/// The content byte of a compressed header: content and packing.
pub(crate) fn content_code(content: Content, packing: Packing) -> u8 {
    let content = match content {
        Content::Values => 0,
        Content::Wdl => 1,
    };
    match packing {
        Packing::Filled => content,
        Packing::Dense => content + 2,
    }
}

fn content_of_code(code: u8) -> Result<(Content, Packing), FormatError> {
    Ok(match code {
        0 => (Content::Values, Packing::Filled),
        1 => (Content::Wdl, Packing::Filled),
        2 => (Content::Values, Packing::Dense),
        3 => (Content::Wdl, Packing::Dense),
        code => return Err(FormatError::Content(code)),
    })
}

/// One block of a compressed shard as the seek table records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the zstd frame from the start of the file.
    pub offset: u64,
    /// Length of the zstd frame in bytes.
    pub len: u32,
    /// CRC-32 of the frame's bytes as stored.
    pub crc: u32,
    /// CRC-32 of the frame's decompressed bytes.
    pub content_crc: u32,
}

/// Everything in a compressed shard's header. `shard.block_crcs` is empty:
/// checksums are per frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressedHeader {
    pub shard: ShardHeader,
    pub content: Content,
    pub packing: Packing,
    /// zstd level the frames were written with (informative).
    pub level: i32,
    /// One per block, in block order; frames follow the header back to back.
    pub frames: Vec<Frame>,
}

/// Bytes of a compressed shard's header for `block_count` blocks.
pub fn compressed_header_len(block_count: usize) -> usize {
    COMPRESSED_FIXED_HEADER_BYTES + FRAME_ENTRY_SIZE * block_count + CRC_SIZE
}

impl CompressedHeader {
    /// Length of the whole header, from a prefix of at least
    /// [`FIXED_HEADER_BYTES`] bytes (checks every fixed field first).
    pub fn total_len(prefix: &[u8]) -> Result<usize, FormatError> {
        let fixed = read_fixed(prefix, &COMPRESSED_MAGIC)?;
        Ok(compressed_header_len(fixed.block_count))
    }

    /// The length the whole file must have.
    pub fn file_len(&self) -> u64 {
        match self.frames.last() {
            Some(last) => last.offset + last.len as u64,
            None => compressed_header_len(0) as u64,
        }
    }

    /// Parses and checks a header: `bytes` must be exactly the header.
    pub fn from_bytes(bytes: &[u8]) -> Result<CompressedHeader, FormatError> {
        let fixed = read_fixed(bytes, &COMPRESSED_MAGIC)?;
        let len = compressed_header_len(fixed.block_count);
        if bytes.len() < len {
            return Err(FormatError::Truncated { needed: len as u64, got: bytes.len() as u64 });
        }
        if bytes.len() > len {
            return Err(FormatError::TrailingBytes { extra: (bytes.len() - len) as u64 });
        }
        check_seal(bytes)?;
        let (content, packing) = content_of_code(bytes[CONTENT_OFFSET])?;
        if fixed.width == ValueWidth::Word && (content, packing) != (Content::Values, Packing::Dense) {
            return Err(FormatError::WordContent(bytes[CONTENT_OFFSET]));
        }
        let level = u32_at(bytes, LEVEL_OFFSET) as i32;
        if !LEVELS.contains(&level) {
            return Err(FormatError::Level(level));
        }
        let mut frames = Vec::with_capacity(fixed.block_count);
        let mut offset = len as u64;
        for block in 0..fixed.block_count {
            let at = COMPRESSED_FIXED_HEADER_BYTES + FRAME_ENTRY_SIZE * block;
            let frame_len = u32_at(bytes, at);
            if frame_len == 0 || frame_len > MAX_FRAME_BYTES {
                return Err(FormatError::FrameLength { block, len: frame_len });
            }
            frames.push(Frame {
                offset,
                len: frame_len,
                crc: u32_at(bytes, at + 4),
                content_crc: u32_at(bytes, at + 8),
            });
            offset += frame_len as u64;
        }
        let shard = ShardHeader {
            no_move: fixed.no_move,
            max_per_side: fixed.max_per_side,
            material: fixed.material,
            cards: fixed.cards,
            layouts: fixed.layouts,
            width: fixed.width,
            block_crcs: Vec::new(),
        };
        Ok(CompressedHeader { shard, content, packing, level, frames })
    }

    /// The header bytes, checksum included.
    ///
    /// # Panics
    /// If there is not one frame per block, the level is out of range or
    /// value words are not stored as values, densely packed (the only way
    /// they are written).
    pub fn to_bytes(&self) -> Vec<u8> {
        assert!(
            self.shard.width == ValueWidth::Byte || (self.content, self.packing) == (Content::Values, Packing::Dense),
            "compressed shards of value words hold values, densely packed"
        );
        assert_eq!(self.frames.len(), self.shard.block_count(), "one frame per block");
        assert!(LEVELS.contains(&self.level));
        let mut out = vec![0u8; compressed_header_len(self.frames.len())];
        self.shard.write_fixed(&mut out, &COMPRESSED_MAGIC, self.frames.len());
        out[CONTENT_OFFSET] = content_code(self.content, self.packing);
        out[LEVEL_OFFSET..][..LEVEL_SIZE].copy_from_slice(&self.level.to_le_bytes());
        for (block, frame) in self.frames.iter().enumerate() {
            let at = COMPRESSED_FIXED_HEADER_BYTES + FRAME_ENTRY_SIZE * block;
            out[at..at + 4].copy_from_slice(&frame.len.to_le_bytes());
            out[at + 4..at + 8].copy_from_slice(&frame.crc.to_le_bytes());
            out[at + 8..at + 12].copy_from_slice(&frame.content_crc.to_le_bytes());
        }
        seal(&mut out);
        out
    }
}

/// The fixed part of a header, checked.
struct Fixed {
    no_move: NoMoveRule,
    max_per_side: u8,
    material: Material,
    cards: [CardRecord; CARDS_PER_GAME],
    layouts: u64,
    width: ValueWidth,
    block_count: usize,
}

fn read_fixed(bytes: &[u8], magic: &[u8; MAGIC_SIZE]) -> Result<Fixed, FormatError> {
    let bad_magic = if magic == &MAGIC { FormatError::BadMagic } else { FormatError::BadCompressedMagic };
    if bytes.len() < FIXED_HEADER_BYTES {
        // Name a bad magic even in a short file: it says more.
        let magic_len = bytes.len().min(MAGIC_SIZE);
        if bytes[..magic_len] != magic[..magic_len] {
            return Err(bad_magic);
        }
        return Err(FormatError::Truncated { needed: FIXED_HEADER_BYTES as u64, got: bytes.len() as u64 });
    }
    if bytes[MAGIC_OFFSET..][..MAGIC_SIZE] != magic[..] {
        return Err(bad_magic);
    }
    let width = match u16_at(bytes, VERSION_OFFSET) {
        FORMAT_VERSION => ValueWidth::Byte,
        FORMAT_VERSION_WORDS => ValueWidth::Word,
        version => return Err(FormatError::Version(version)),
    };
    let scheme = u16_at(bytes, INDEX_SCHEME_OFFSET);
    if scheme != INDEX_SCHEME_VERSION {
        return Err(FormatError::IndexScheme(scheme));
    }
    let no_move = match bytes[NO_MOVE_OFFSET] {
        0 => NoMoveRule::Pass,
        1 => NoMoveRule::Loss,
        code => return Err(FormatError::NoMoveRule(code)),
    };
    let max_per_side = bytes[MAX_PER_SIDE_OFFSET];
    if !(1..=MAX_PIECES_PER_SIDE as u8).contains(&max_per_side) {
        return Err(FormatError::MaxPerSide(max_per_side));
    }
    let (mover, opponent) = (bytes[MOVER_OFFSET], bytes[OPPONENT_OFFSET]);
    if !(1..=max_per_side).contains(&mover) || !(1..=max_per_side).contains(&opponent) {
        return Err(FormatError::Material { mover, opponent, max_per_side });
    }
    let material = Material::new(mover as usize, opponent as usize);
    let mut cards = Vec::with_capacity(CARDS_PER_GAME);
    for slot in 0..CARDS_PER_GAME {
        let record = &bytes[CARDS_OFFSET + slot * CARD_RECORD_SIZE..][..CARD_RECORD_SIZE];
        cards.push(read_card(slot, record)?);
    }
    let cards: [CardRecord; CARDS_PER_GAME] = cards.try_into().expect("five records");
    check_distinct(&cards)?;
    let layouts = u64_at(bytes, LAYOUTS_OFFSET);
    let expected = MaterialIndex::new(material).layouts();
    if layouts != expected {
        return Err(FormatError::Layouts { material, expected, got: layouts });
    }
    let block_size = u32_at(bytes, BLOCK_SIZE_OFFSET);
    if block_size != BLOCK_BYTES {
        return Err(FormatError::BlockSize(block_size));
    }
    let block_count = u32_at(bytes, BLOCK_COUNT_OFFSET);
    let expected_blocks = values_len(layouts, width)?.div_ceil(BLOCK_BYTES as u64);
    if block_count as u64 != expected_blocks {
        return Err(FormatError::BlockCount { expected: expected_blocks, got: block_count });
    }
    Ok(Fixed { no_move, max_per_side, material, cards, layouts, width, block_count: block_count as usize })
}

fn read_card(slot: usize, record: &[u8]) -> Result<CardRecord, FormatError> {
    let problem = |problem: String| FormatError::Card { slot, problem };
    let raw_name = &record[CARD_NAME_OFFSET..][..CARD_NAME_BYTES];
    let name_len = raw_name.iter().position(|&b| b == 0).unwrap_or(CARD_NAME_BYTES);
    if raw_name[name_len..].iter().any(|&b| b != 0) {
        return Err(problem("name field has bytes after its NUL padding".into()));
    }
    if !raw_name[..name_len].iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return Err(problem("name is not printable ASCII".into()));
    }
    let name = String::from_utf8_lossy(&raw_name[..name_len]).into_owned();
    let count = record[CARD_COUNT_OFFSET] as usize;
    if count > MAX_CARD_OFFSETS {
        return Err(problem(format!("{count} moves, at most {MAX_CARD_OFFSETS} fit")));
    }
    let pairs = &record[CARD_PAIRS_OFFSET..][..CARD_PAIRS_SIZE];
    if pairs[2 * count..].iter().any(|&b| b != 0) {
        return Err(problem("unused move slots are not zero".into()));
    }
    let offsets = pairs[..2 * count].chunks_exact(2).map(|p| (p[0] as i8, p[1] as i8)).collect();
    let card = CardRecord { name, offsets };
    check_card(slot, &card)?;
    Ok(card)
}

/// What any card record must satisfy, on the way in or out.
fn check_card(slot: usize, card: &CardRecord) -> Result<(), FormatError> {
    let problem = |problem: String| Err(FormatError::Card { slot, problem });
    let name = card.name.as_bytes();
    if name.is_empty() || name.len() > CARD_NAME_BYTES {
        return problem(format!("name '{}' must have 1..={CARD_NAME_BYTES} bytes", card.name));
    }
    if !name.iter().all(|&b| (0x20..0x7f).contains(&b)) || name[0] == b' ' || name[name.len() - 1] == b' ' {
        return problem(format!("name '{}' must be printable ASCII without outer spaces", card.name));
    }
    if card.offsets.len() > MAX_CARD_OFFSETS {
        return problem(format!("'{}' has {} moves, at most {MAX_CARD_OFFSETS} fit", card.name, card.offsets.len()));
    }
    for (i, &(dx, dy)) in card.offsets.iter().enumerate() {
        let on_board = |d: i8| (-MAX_STEP..=MAX_STEP).contains(&d);
        if (dx, dy) == (0, 0) || !on_board(dx) || !on_board(dy) {
            return problem(format!("'{}' has an impossible move ({dx}, {dy})", card.name));
        }
        if card.offsets[..i].contains(&(dx, dy)) {
            return problem(format!("'{}' lists the move ({dx}, {dy}) twice", card.name));
        }
    }
    Ok(())
}

fn check_distinct(cards: &[CardRecord]) -> Result<(), FormatError> {
    for (i, card) in cards.iter().enumerate() {
        if cards[..i].iter().any(|c| c.name.eq_ignore_ascii_case(&card.name)) {
            return Err(FormatError::DuplicateCard(card.name.clone()));
        }
    }
    Ok(())
}

fn card_of_record(record: &CardRecord) -> Card {
    let base = BASE_CARDS.iter().find(|c| c.name == record.name && c.offsets == record.offsets.as_slice());
    match base {
        Some(card) => *card,
        None => Card {
            name: Box::leak(record.name.clone().into_boxed_str()),
            offsets: Box::leak(record.offsets.clone().into_boxed_slice()),
        },
    }
}

fn no_move_code(rule: NoMoveRule) -> u8 {
    match rule {
        NoMoveRule::Pass => 0,
        NoMoveRule::Loss => 1,
    }
}

/// The format version of a shard whose values are `width` wide.
pub fn version_of(width: ValueWidth) -> u16 {
    match width {
        ValueWidth::Byte => FORMAT_VERSION,
        ValueWidth::Word => FORMAT_VERSION_WORDS,
    }
}

fn values_len(layouts: u64, width: ValueWidth) -> Result<u64, FormatError> {
    layouts
        .checked_mul((CARD_STATES * width.bytes()) as u64)
        .filter(|&len| usize::try_from(len).is_ok())
        .ok_or_else(|| FormatError::Unrepresentable(format!("{layouts} layouts do not fit in memory")))
}

/// Writes the CRC-32 of everything before the last four bytes into them.
fn seal(out: &mut [u8]) {
    let crc_at = out.len() - CRC_SIZE;
    let crc = crc32fast::hash(&out[..crc_at]);
    out[crc_at..].copy_from_slice(&crc.to_le_bytes());
}

/// Checks the CRC-32 in the last four bytes of a header.
fn check_seal(bytes: &[u8]) -> Result<(), FormatError> {
    let crc_at = bytes.len() - CRC_SIZE;
    let stored = u32_at(bytes, crc_at);
    let computed = crc32fast::hash(&bytes[..crc_at]);
    if stored != computed {
        return Err(FormatError::HeaderCrc { stored, computed });
    }
    Ok(())
}

/// CRC-32 of each [`BLOCK_BYTES`] block of `values`, in parallel.
pub fn block_crcs(values: &[u8]) -> Vec<u32> {
    values.par_chunks(BLOCK_BYTES as usize).map(crc32fast::hash).collect()
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("two bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rules: &Rules) -> (SolvedMaterial, Vec<u8>) {
        let index = MaterialIndex::new(Material::new(1, 2));
        let values: Vec<u8> = (0..index.layouts() * CARD_STATES as u64).map(|i| (i * 7 % 251) as u8).collect();
        let solved = SolvedMaterial { index, values, width: ValueWidth::Byte };
        let bytes = encode(rules, 2, &solved).unwrap();
        (solved, bytes)
    }

    #[test]
    fn shards_round_trip() {
        let rules = Rules { no_move: NoMoveRule::Loss, ..Rules::default() };
        let (solved, bytes) = sample(&rules);
        let (header, values) = decode(&bytes).unwrap();
        assert_eq!(values, solved.values.as_slice());
        assert_eq!(header.material, Material::new(1, 2));
        assert_eq!(header.max_per_side, 2);
        assert_eq!(header.rules().unwrap(), rules);
        assert_eq!(header.to_bytes(), bytes[..header_len(header.block_crcs.len())]);
        assert_eq!(&bytes[..8], b"ONITBRAW");
    }

    #[test]
    fn user_defined_cards_keep_their_moves_and_order() {
        static MINE: [Card; 5] = [
            Card { name: "Zed", offsets: &[(0, 1)] },
            Card { name: "Sea Snake", offsets: &[(-4, 4), (1, -1), (2, 0)] },
            Card { name: "Boar", offsets: &[(0, 2)] },
            Card { name: "Still", offsets: &[] },
            Card { name: "Ox", offsets: &[(0, 1), (1, 0), (0, -1)] },
        ];
        let names: Vec<&str> = MINE.iter().map(|c| c.name).collect();
        let rules = Rules { cards: CardSet::from_names_in(&names, &MINE).unwrap(), no_move: NoMoveRule::Pass };
        let (_, bytes) = sample(&rules);
        let back = decode(&bytes).unwrap().0.rules().unwrap();
        assert_eq!(back, rules);
        assert_eq!(back.cards.names(), names);
    }

    #[test]
    fn any_flipped_header_bit_is_rejected() {
        let (_, bytes) = sample(&Rules::default());
        let len = header_len(decode(&bytes).unwrap().0.block_crcs.len());
        for bit in 0..len * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&damaged).is_err(), "flipping bit {bit} went unnoticed");
        }
    }

    #[test]
    fn flipped_value_bytes_name_their_block() {
        let (_, mut bytes) = sample(&Rules::default());
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        assert!(matches!(decode(&bytes), Err(FormatError::BlockCrc { block: 0, .. })));
    }

    #[test]
    fn truncation_and_trailing_bytes_are_rejected() {
        let (_, bytes) = sample(&Rules::default());
        for len in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len} accepted");
        }
        assert!(matches!(decode(&bytes[..3]), Err(FormatError::Truncated { .. })));
        assert!(matches!(decode(b"PK\x03\x04"), Err(FormatError::BadMagic)));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer).unwrap_err(), FormatError::TrailingBytes { extra: 1 });
    }

    #[test]
    fn multi_block_value_areas_check_each_block() {
        let index = MaterialIndex::new(Material::new(2, 2));
        let values = vec![DRAW_BYTE; (index.layouts() * CARD_STATES as u64) as usize];
        let solved = SolvedMaterial { index, values, width: ValueWidth::Byte };
        let mut bytes = encode(&Rules::default(), 2, &solved).unwrap();
        let header = decode(&bytes).unwrap().0;
        assert!(header.block_crcs.len() > 1, "2v2 should span several blocks");
        let at = header_len(header.block_crcs.len()) + BLOCK_BYTES as usize + 5;
        bytes[at] = 0;
        assert!(matches!(decode(&bytes), Err(FormatError::BlockCrc { block: 1, .. })));
    }

    const DRAW_BYTE: u8 = crate::value::DRAW;

    /// `sample`'s values widened to words, and their shard.
    fn word_sample(rules: &Rules) -> (SolvedMaterial, Vec<u8>) {
        let solved = sample(rules).0.widened();
        let bytes = encode(rules, 2, &solved).unwrap();
        (solved, bytes)
    }

    #[test]
    fn word_shards_are_version_2_and_round_trip() {
        let (bytes_solved, bytes_shard) = sample(&Rules::default());
        let (solved, bytes) = word_sample(&Rules::default());
        assert_eq!(u16::from_le_bytes([bytes_shard[8], bytes_shard[9]]), 1, "byte shards stay version 1");
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 2);
        let (header, values) = decode(&bytes).unwrap();
        assert_eq!((header.width, header.version()), (ValueWidth::Word, FORMAT_VERSION_WORDS));
        assert_eq!(values, solved.values.as_slice());
        assert_eq!(header.values_len(), 2 * bytes_solved.values.len() as u64);
        assert_eq!(header.to_bytes(), bytes[..header_len(header.block_crcs.len())]);
        // Header fields but the version are those of the byte shard.
        let byte_header = decode(&bytes_shard).unwrap().0;
        assert_eq!(
            ShardHeader { width: ValueWidth::Byte, block_crcs: Vec::new(), ..header.clone() },
            ShardHeader { block_crcs: Vec::new(), ..byte_header }
        );
        let mut damaged = bytes.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(matches!(decode(&damaged), Err(FormatError::BlockCrc { block: 0, .. })));
    }

    /// Rewrites the version field of a whole shard and seals its header again.
    fn with_version(bytes: &[u8], version: u16) -> Vec<u8> {
        let mut bytes = bytes.to_vec();
        bytes[VERSION_OFFSET..][..VERSION_SIZE].copy_from_slice(&version.to_le_bytes());
        let len =
            ShardHeader::total_len(&bytes).unwrap_or_else(|_| header_len(u32_at(&bytes, BLOCK_COUNT_OFFSET) as usize));
        seal(&mut bytes[..len]);
        bytes
    }

    #[test]
    fn a_version_that_does_not_fit_the_value_area_is_refused() {
        // A byte shard relabelled version 2: its value area is half a
        // word area (one block either way).
        let (_, bytes) = sample(&Rules::default());
        let relabelled = with_version(&bytes, FORMAT_VERSION_WORDS);
        assert!(matches!(decode(&relabelled), Err(FormatError::Truncated { .. })), "{:?}", decode(&relabelled));
        // ... and a word shard relabelled version 1 has twice the bytes.
        let (_, words) = word_sample(&Rules::default());
        let relabelled = with_version(&words, FORMAT_VERSION);
        assert!(matches!(decode(&relabelled), Err(FormatError::TrailingBytes { .. })));
        // Over several blocks the block count says so already.
        let index = MaterialIndex::new(Material::new(2, 2));
        let values = vec![DRAW_BYTE; (index.layouts() * CARD_STATES as u64) as usize];
        let bytes = encode(&Rules::default(), 2, &SolvedMaterial { index, values, width: ValueWidth::Byte }).unwrap();
        let relabelled = with_version(&bytes, FORMAT_VERSION_WORDS);
        assert!(matches!(ShardHeader::total_len(&relabelled), Err(FormatError::BlockCount { .. })));
        let unknown = with_version(&bytes, 3);
        let error = decode(&unknown).unwrap_err();
        assert_eq!(error, FormatError::Version(3));
        assert!(error.to_string().contains("versions 1 and 2"), "{error}");
    }

    /// A compressed shard of value words holds values, densely packed:
    /// such a header round-trips; any other content code is refused.
    #[test]
    fn compressed_headers_of_words_hold_dense_values_only() {
        let shard = ShardHeader::for_material(&Rules::default(), 2, Material::new(2, 2), ValueWidth::Word).unwrap();
        let frames = (0..shard.block_count() as u32).map(|i| Frame { offset: 0, len: 100 + i, crc: i, content_crc: i });
        let header = CompressedHeader {
            shard: ShardHeader { block_crcs: Vec::new(), ..shard },
            content: Content::Values,
            packing: Packing::Dense,
            level: 3,
            frames: frames.collect(),
        };
        let mut bytes = header.to_bytes();
        let back = CompressedHeader::from_bytes(&bytes).unwrap();
        assert_eq!((back.shard.width, back.content, back.packing), (ValueWidth::Word, Content::Values, Packing::Dense));
        for code in [0, 1, 3] {
            bytes[CONTENT_OFFSET] = code;
            let len = bytes.len();
            seal(&mut bytes[..len]);
            let error = CompressedHeader::from_bytes(&bytes).unwrap_err();
            assert_eq!(error, FormatError::WordContent(code));
            assert!(error.to_string().contains("two-byte values (format version 2)"), "{error}");
        }
    }

    fn compressed_sample() -> Vec<u8> {
        let shard = ShardHeader::for_material(&Rules::default(), 2, Material::new(2, 2), ValueWidth::Byte).unwrap();
        let frames = (0..shard.block_count() as u32)
            .map(|i| Frame { offset: 0, len: 1000 + i, crc: i * 7, content_crc: i * 11 })
            .collect();
        CompressedHeader {
            shard: ShardHeader { block_crcs: Vec::new(), ..shard },
            content: Content::Wdl,
            packing: Packing::Dense,
            level: 19,
            frames,
        }
        .to_bytes()
    }

    #[test]
    fn compressed_headers_round_trip_and_any_flipped_bit_is_rejected() {
        let bytes = compressed_sample();
        let header = CompressedHeader::from_bytes(&bytes).unwrap();
        assert_eq!(header.to_bytes(), bytes);
        assert_eq!(CompressedHeader::total_len(&bytes[..FIXED_HEADER_BYTES]).unwrap(), bytes.len());
        assert_eq!(header.frames[1].offset, bytes.len() as u64 + 1000);
        assert_eq!(header.file_len(), bytes.len() as u64 + 1000 + 1001 + 1002);
        assert_eq!(&bytes[..8], b"ONITBZST");
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(CompressedHeader::from_bytes(&damaged).is_err(), "flipping bit {bit} went unnoticed");
        }
        // A raw reader refuses a compressed header and the other way round.
        assert_eq!(ShardHeader::from_bytes(&bytes).unwrap_err(), FormatError::BadMagic);
        let (_, raw) = sample(&Rules::default());
        assert_eq!(CompressedHeader::total_len(&raw).unwrap_err(), FormatError::BadCompressedMagic);
    }

    #[test]
    fn every_content_and_packing_has_its_own_code() {
        let header = CompressedHeader::from_bytes(&compressed_sample()).unwrap();
        let mut codes = Vec::new();
        for content in [Content::Values, Content::Wdl] {
            for packing in [Packing::Filled, Packing::Dense] {
                let bytes = CompressedHeader { content, packing, ..header.clone() }.to_bytes();
                let read = CompressedHeader::from_bytes(&bytes).unwrap();
                assert_eq!((read.content, read.packing), (content, packing));
                codes.push(bytes[CONTENT_OFFSET]);
            }
        }
        assert_eq!(codes, [0, 2, 1, 3]);
        let mut unknown = header.to_bytes();
        unknown[CONTENT_OFFSET] = 4;
        seal(&mut unknown);
        assert_eq!(CompressedHeader::from_bytes(&unknown).unwrap_err(), FormatError::Content(4));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn header_readers_never_panic_on_random_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = ShardHeader::total_len(&bytes);
            let _ = ShardHeader::from_bytes(&bytes);
            let _ = CompressedHeader::total_len(&bytes);
            let _ = CompressedHeader::from_bytes(&bytes);
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_headers_are_refused(
            compressed in proptest::prelude::any::<bool>(),
            changes in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), 1..=255u8), 1..4),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let good = if compressed {
                compressed_sample()
            } else {
                let (header, _) = decode(&sample(&Rules::default()).1).map(|(h, v)| (h.to_bytes(), v.len())).unwrap();
                header
            };
            let parse = |bytes: &[u8]| if compressed {
                CompressedHeader::from_bytes(bytes).map(|_| ())
            } else {
                ShardHeader::from_bytes(bytes).map(|_| ())
            };
            let mut bad = good.clone();
            for (at, xor) in &changes {
                bad[at.index(good.len())] ^= xor;
            }
            if bad != good {
                proptest::prop_assert!(parse(&bad).is_err());
            }
            let cut = cut.index(good.len());
            proptest::prop_assert!(parse(&good[..cut]).is_err());
            let _ = if compressed { CompressedHeader::total_len(&bad[..cut]).map(|_| ()) } else { ShardHeader::total_len(&bad[..cut]).map(|_| ()) };
        }
    }

    #[test]
    fn unrepresentable_tables_are_refused_on_write() {
        static LONG: [Card; 5] = [
            Card { name: "AVeryLongCardNameIndeed", offsets: &[(0, 1)] },
            Card { name: "B", offsets: &[(0, 1)] },
            Card { name: "C", offsets: &[(0, 1)] },
            Card { name: "D", offsets: &[(0, 1)] },
            Card { name: "E", offsets: &[(0, 1)] },
        ];
        let names: Vec<&str> = LONG.iter().map(|c| c.name).collect();
        let rules = Rules { cards: CardSet::from_names_in(&names, &LONG).unwrap(), no_move: NoMoveRule::Pass };
        let index = MaterialIndex::new(Material::new(1, 1));
        let values = vec![0; (index.layouts() * 30) as usize];
        let solved = SolvedMaterial { index, values, width: ValueWidth::Byte };
        assert!(matches!(encode(&rules, 1, &solved), Err(FormatError::Unrepresentable(_))));
        assert!(matches!(encode(&Rules::default(), 6, &solved), Err(FormatError::Unrepresentable(_))));
    }
}
