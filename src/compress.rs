//! Compressed shards: what each block stores, and its zstd frame.
//!
//! Owns the transform between value bytes and the bytes a compressed shard
//! stores, and writing compressed tables. The byte layout is `format`'s;
//! reading blocks back is `shard`'s.
//!
//! Some value bytes are cheap to recompute from the rules, so a compressed
//! shard stores whatever compresses best in their place and readers
//! recompute them:
//! - game-over layouts (a master on its target square): value byte 0;
//! - wins in one ply (the mover can capture the opponent's master or step
//!   its master onto the opponent's temple): value byte 255. About half of
//!   all states.
//!
//! This writer stores [`FILLER`] (255) in each of them. On the 4-men table
//! at zstd level 19 that beat the other fillers tried (bits per state, full
//! values / WDL): the previous byte 1.175 / 0.218, the byte 30 places
//! earlier (same card state of the previous layout) 1.397 / 0.275, draw
//! (128) 1.144 / 0.230, 255 1.144 / 0.203. Wins in one are mostly among
//! wins, so 255 continues the runs around them.

use crate::format::{BLOCK_BYTES, CompressedHeader, Content, FormatError, Frame, LEVELS, ShardHeader};
use crate::index::MaterialIndex;
use crate::rules::{CARD_STATES, CardTables, Rules, masters_end_game, winning_slots};
use crate::shard::{Context, TableFiles};
use crate::store::{OutputDir, StoreError, check_room, compressed_shard_name};
use crate::value::{DRAW, NO_VALUE};

use rayon::prelude::*;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Value byte of a win in one ply.
pub const WIN_IN_1: u8 = 255;
/// Value byte a WDL projection stores for every loss.
pub const WDL_LOSS: u8 = 1;
/// Marks a byte that is stored as it is (loss in 0 plies is never
/// recomputed, so this code cannot collide with a recomputed value).
const STORED: u8 = 1;
/// What this writer stores in place of a recomputable byte.
pub const FILLER: u8 = WIN_IN_1;
/// Blocks compressed at once per worker thread.
const BLOCKS_PER_THREAD: usize = 8;
/// zstd level `onitb compress` uses unless told otherwise.
pub const DEFAULT_LEVEL: i32 = 19;

/// For each value byte of `range` (offsets in the material's value area):
/// [`STORED`] if it must be stored, else the byte the rules give it
/// (0 for game-over layouts, [`WIN_IN_1`]).
fn recomputed(index: &MaterialIndex, rules: &Rules, tables: &CardTables, range: Range<u64>) -> Vec<u8> {
    let mut out = vec![STORED; (range.end - range.start) as usize];
    if range.is_empty() {
        return out;
    }
    let states = CARD_STATES as u64;
    for layout_number in range.start / states..range.end.div_ceil(states) {
        let layout = index.unrank(layout_number);
        let words: [u8; CARD_STATES] = if masters_end_game(layout.mover_master, layout.opponent_master) {
            [NO_VALUE; CARD_STATES]
        } else {
            let slots = winning_slots(&rules.cards, layout.mover, layout.mover_master, layout.opponent_master);
            let mut wins = 0u32;
            for (slot, holds) in tables.holds.iter().enumerate() {
                if slots & (1 << slot) != 0 {
                    wins |= holds;
                }
            }
            std::array::from_fn(|k| if wins & (1 << k) != 0 { WIN_IN_1 } else { STORED })
        };
        let first = layout_number * states;
        for (k, &byte) in words.iter().enumerate() {
            let at = first + k as u64;
            if range.contains(&at) {
                out[(at - range.start) as usize] = byte;
            }
        }
    }
    out
}

/// Puts the recomputable values of one block back in place.
pub fn restore(index: &MaterialIndex, rules: &Rules, tables: &CardTables, range: Range<u64>, bytes: &mut [u8]) {
    let fixed = recomputed(index, rules, tables, range);
    for (byte, &fix) in bytes.iter_mut().zip(&fixed) {
        if fix != STORED {
            *byte = fix;
        }
    }
}

/// A value byte that disagrees with the rules: the table is wrong.
fn disagreement(index: &MaterialIndex, at: u64, stored: u8, expected: Option<u8>) -> FormatError {
    let problem = match expected {
        Some(NO_VALUE) => "a game-over position holds a value".to_string(),
        Some(_) => "a position with a winning move is not stored as a win in 1 ply".to_string(),
        None => "a position without a winning move is stored as a win in 1 ply, or without value".to_string(),
    };
    FormatError::WrongValue {
        material: index.material,
        layout: at / CARD_STATES as u64,
        card_state: (at % CARD_STATES as u64) as u8,
        byte: stored,
        problem,
    }
}

/// The bytes a compressed shard stores for one block of values: checks
/// that the recomputable bytes are what the rules say, projects to WDL if
/// asked, and fills the recomputable bytes.
pub fn stored_bytes(
    index: &MaterialIndex,
    context: &Context,
    range: Range<u64>,
    values: &[u8],
    content: Content,
) -> Result<Vec<u8>, FormatError> {
    let fixed = recomputed(index, &context.rules, &context.tables, range.clone());
    let mut out = Vec::with_capacity(values.len());
    for (i, (&value, &fix)) in values.iter().zip(&fixed).enumerate() {
        let at = range.start + i as u64;
        if fix != STORED {
            if value != fix {
                return Err(disagreement(index, at, value, Some(fix)));
            }
            out.push(FILLER);
            continue;
        }
        if value == WIN_IN_1 || value == NO_VALUE {
            return Err(disagreement(index, at, value, None));
        }
        out.push(match content {
            Content::Values => value,
            Content::Wdl => wdl_byte(value),
        });
    }
    Ok(out)
}

/// The byte a WDL projection stores for a value byte.
pub fn wdl_byte(value: u8) -> u8 {
    match value {
        NO_VALUE => NO_VALUE,
        1..DRAW => WDL_LOSS,
        DRAW => DRAW,
        _ => WIN_IN_1,
    }
}

/// One zstd frame and its seek-table entry (offset filled in by the writer).
pub fn compress_frame(stored: &[u8], level: i32) -> Result<(Vec<u8>, Frame), FormatError> {
    let frame = zstd::bulk::compress(stored, level).map_err(|e| FormatError::Unrepresentable(e.to_string()))?;
    let entry = Frame {
        offset: 0,
        len: u32::try_from(frame.len()).map_err(|_| FormatError::Unrepresentable("frame too long".into()))?,
        crc: crc32fast::hash(&frame),
        content_crc: crc32fast::hash(stored),
    };
    Ok((frame, entry))
}

/// Decompresses one frame whose bytes already passed their checksum, and
/// checks the result's length and checksum.
pub fn decompress_frame(frame: &[u8], len: usize, content_crc: u32, block: usize) -> Result<Vec<u8>, FormatError> {
    let bytes =
        zstd::bulk::decompress(frame, len).map_err(|e| FormatError::Decompress { block, problem: e.to_string() })?;
    if bytes.len() != len {
        let problem = format!("{} bytes instead of {len}", bytes.len());
        return Err(FormatError::Decompress { block, problem });
    }
    let computed = crc32fast::hash(&bytes);
    if computed != content_crc {
        return Err(FormatError::ContentCrc { block, stored: content_crc, computed });
    }
    Ok(bytes)
}

/// Sizes of one compressed shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSizes {
    pub material: crate::index::Material,
    /// Positions with a value (game-over holes excluded).
    pub states: u64,
    /// Value bytes in (game-over holes included).
    pub value_bytes: u64,
    /// Bytes of the compressed file, header included.
    pub file_bytes: u64,
}

/// Refuses a zstd level that `format` does not allow or zstd lacks.
pub fn check_level(level: i32, path: &Path) -> Result<(), StoreError> {
    if !LEVELS.contains(&level) || level > *zstd::compression_level_range().end() {
        return Err(StoreError::Format { path: path.to_path_buf(), cause: FormatError::Level(level) });
    }
    Ok(())
}

/// Compresses the table in `input` (raw or compressed) into a new directory
/// `output` of compressed shards, checking every block read and every
/// recomputable value. `report` is called after each shard.
pub fn compress_table(
    input: &Path,
    output: &Path,
    level: i32,
    content: Content,
    report: &(dyn Fn(ShardSizes) + Sync),
) -> Result<Vec<ShardSizes>, StoreError> {
    check_level(level, output)?;
    let table = TableFiles::open(input)?;
    let out = OutputDir::prepare(output)?;
    let context = Context::new(table.rules, table.max_per_side);
    let mut sizes = Vec::with_capacity(table.shards.len());
    for shard in &table.shards {
        if shard.content() != Content::Values {
            return Err(StoreError::Format { path: shard.path().to_path_buf(), cause: FormatError::WdlOnly });
        }
        let path = out.path_for(&compressed_shard_name(shard.material()));
        let header = ShardHeader { block_crcs: Vec::new(), ..shard.header().clone() };
        let mut writer =
            CompressedShardWriter::create(&path, header, &context, level, content)?.values_from(shard.path());
        for block in 0..shard.block_count() {
            writer.write_values(&shard.read_values(block, &context)?)?;
        }
        let written = writer.finish()?;
        report(written);
        sizes.push(written);
    }
    out.finish()?;
    Ok(sizes)
}

/// Writes a compressed shard from a material's value bytes, given in layout
/// order in chunks of any size (from a raw shard, or straight from the
/// solver): cuts them into blocks, compresses a batch of blocks at a time in
/// parallel (checking recomputable values), writes the frames, and on
/// `finish` the header with the seek table, then syncs. Holds at most a
/// batch of blocks and their frames.
pub struct CompressedShardWriter<'c> {
    path: PathBuf,
    /// Named in errors about the values themselves (a recomputable value
    /// that disagrees with the rules): the input shard, when compressing one.
    source: PathBuf,
    file: File,
    /// The shard's header, without block checksums (frames carry theirs).
    header: ShardHeader,
    context: &'c Context,
    index: std::sync::Arc<MaterialIndex>,
    level: i32,
    content: Content,
    /// Full blocks not compressed yet, and the block being filled.
    pending: Vec<Vec<u8>>,
    current: Vec<u8>,
    /// Blocks compressed and written so far, and where the next frame goes.
    frames: Vec<Frame>,
    offset: u64,
    written: u64,
    states: u64,
}

impl<'c> CompressedShardWriter<'c> {
    /// Creates `path` (which must not exist), with room for the header.
    pub fn create(
        path: &Path,
        header: ShardHeader,
        context: &'c Context,
        level: i32,
        content: Content,
    ) -> Result<Self, StoreError> {
        check_level(level, path)?;
        let header_len = crate::format::compressed_header_len(header.block_count());
        let mut file = File::create_new(path).map_err(write_error("create shard", path))?;
        file.write_all(&vec![0u8; header_len]).map_err(write_error("write shard", path))?;
        Ok(CompressedShardWriter {
            path: path.to_path_buf(),
            source: path.to_path_buf(),
            file,
            index: context.index(header.material),
            header,
            context,
            level,
            content,
            pending: Vec::new(),
            current: Vec::with_capacity(BLOCK_BYTES as usize),
            frames: Vec::new(),
            offset: header_len as u64,
            written: 0,
            states: 0,
        })
    }

    /// Names `source` instead of the output in errors about the values.
    pub fn values_from(mut self, source: &Path) -> Self {
        self.source = source.to_path_buf();
        self
    }

    /// Appends the next value bytes.
    pub fn write_values(&mut self, values: &[u8]) -> Result<(), StoreError> {
        check_room(&self.path, self.written, values.len(), self.header.values_len())?;
        let mut rest = values;
        while !rest.is_empty() {
            let block = self.frames.len() + self.pending.len();
            let block_len = (self.header.block_range(block).end - self.header.block_range(block).start) as usize;
            let take = rest.len().min(block_len - self.current.len());
            self.current.extend_from_slice(&rest[..take]);
            self.written += take as u64;
            rest = &rest[take..];
            if self.current.len() == block_len {
                self.pending.push(std::mem::replace(&mut self.current, Vec::with_capacity(BLOCK_BYTES as usize)));
                if self.pending.len() >= (BLOCKS_PER_THREAD * rayon::current_num_threads()).max(1) {
                    self.flush()?;
                }
            }
        }
        Ok(())
    }

    /// Compresses the pending blocks in parallel and writes their frames.
    fn flush(&mut self) -> Result<(), StoreError> {
        let first = self.frames.len();
        let (index, context, header) = (&self.index, self.context, &self.header);
        let (level, content) = (self.level, self.content);
        self.states +=
            self.pending.par_iter().map(|v| v.iter().filter(|&&b| b != NO_VALUE).count() as u64).sum::<u64>();
        let compressed: Vec<(Vec<u8>, Frame)> = self
            .pending
            .par_iter()
            .enumerate()
            .map(|(i, values)| {
                let stored = stored_bytes(index, context, header.block_range(first + i), values, content)?;
                compress_frame(&stored, level)
            })
            .collect::<Result<_, _>>()
            .map_err(|cause| StoreError::Format { path: self.source.clone(), cause })?;
        self.pending.clear();
        for (bytes, mut frame) in compressed {
            self.file.write_all(&bytes).map_err(write_error("write shard", &self.path))?;
            frame.offset = self.offset;
            self.offset += frame.len as u64;
            self.frames.push(frame);
        }
        Ok(())
    }

    /// Checks that every value byte was given, writes the last frames and
    /// the header, and syncs the file.
    pub fn finish(mut self) -> Result<ShardSizes, StoreError> {
        let expected = self.header.values_len();
        if self.written != expected {
            let cause = FormatError::ValuesLength { expected, got: self.written };
            return Err(StoreError::Format { path: self.path.clone(), cause });
        }
        self.flush()?;
        let material = self.header.material;
        let compressed =
            CompressedHeader { shard: self.header, content: self.content, level: self.level, frames: self.frames };
        let bytes = compressed.to_bytes();
        self.file.seek(SeekFrom::Start(0)).map_err(write_error("write shard", &self.path))?;
        self.file.write_all(&bytes).map_err(write_error("write shard", &self.path))?;
        self.file.sync_all().map_err(write_error("sync shard", &self.path))?;
        Ok(ShardSizes { material, states: self.states, value_bytes: expected, file_bytes: self.offset })
    }
}

fn write_error(action: &'static str, path: &Path) -> impl Fn(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |cause| StoreError::Io { action, path: path.clone(), cause }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;
    use crate::rules::{CardState, Position};

    #[test]
    fn recomputed_bytes_follow_the_rules_across_block_edges() {
        let rules = Rules::default();
        let tables = CardTables::new();
        let index = MaterialIndex::new(Material::new(2, 1));
        let len = index.layouts() * CARD_STATES as u64;
        // Ranges that start and end inside layouts.
        for range in [0..len, 7..len - 11, 31..59] {
            let fixed = recomputed(&index, &rules, &tables, range.clone());
            for (i, &fix) in fixed.iter().enumerate() {
                let at = range.start + i as u64;
                let layout = index.unrank(at / 30);
                let position = Position {
                    mover: layout.mover,
                    opponent: layout.opponent,
                    mover_master: layout.mover_master,
                    opponent_master: layout.opponent_master,
                    cards: CardState::new((at % 30) as usize),
                };
                let expected = if position.is_game_over() {
                    NO_VALUE
                } else if position.moves(&rules).iter().any(|m| m.outcome == crate::rules::Outcome::Win) {
                    WIN_IN_1
                } else {
                    STORED
                };
                assert_eq!(fix, expected, "state {at}");
            }
        }
    }

    #[test]
    fn frames_round_trip_and_damage_is_caught() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i / 1000) as u8).collect();
        let (frame, entry) = compress_frame(&bytes, 3).unwrap();
        assert!(frame.len() < bytes.len() / 10);
        assert_eq!(decompress_frame(&frame, bytes.len(), entry.content_crc, 0).unwrap(), bytes);
        assert!(decompress_frame(&frame, bytes.len() - 1, entry.content_crc, 0).is_err());
        assert!(matches!(
            decompress_frame(&frame, bytes.len(), entry.content_crc ^ 1, 4),
            Err(FormatError::ContentCrc { block: 4, .. })
        ));
        assert!(decompress_frame(&frame[..frame.len() / 2], bytes.len(), entry.content_crc, 0).is_err());
        assert!(
            zstd::zstd_safe::compress_bound(crate::format::BLOCK_BYTES as usize)
                <= crate::format::MAX_FRAME_BYTES as usize
        );
    }
}
