//! Probing a table on disk: the value of one position and of its moves.
//!
//! Owns [`Tablebase`]: lazy access to a table directory (raw or compressed
//! shards) through a small LRU cache of checked blocks. Opening reads the
//! shard headers only; a probe reads, decompresses and unpacks only the
//! block that holds the position. Values a compressed shard does not store
//! (wins in one ply) are recomputed from the rules. Shards of value words
//! (format version 2, raw only) are probed as those of bytes; only
//! [`Tablebase::layout_bytes`], which hands out bytes, refuses them
//! ([`Tablebase::layout_words`] reads either width).

use crate::format::{Content, FormatError};
use crate::index::{Layout, Material, MaterialIndex};
use crate::rules::{CARD_STATES, Move, Outcome, Position, Rules};
use crate::shard::{Context, TableFiles};
use crate::store::StoreError;
use crate::value::{Value, ValueWidth};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use thiserror::Error;

/// Blocks kept in memory by default (4 MiB each).
pub const DEFAULT_CACHE_BLOCKS: usize = 16;

#[derive(Debug, Error)]
pub enum ProbeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("not a position: boards overlap, a master is missing or a side has no piece or too many")]
    Malformed,
    #[error("the game is already over: a master stands on the opponent's temple")]
    GameOver,
    #[error("material {material} is not in this table of up to {max_per_side} pieces per side")]
    NotInTable { material: Material, max_per_side: usize },
    #[error("material {material} has no layout {layout}")]
    OutOfRange { material: Material, layout: u64 },
    #[error("the table holds win/draw/loss only, not the values probing and checking need")]
    WdlOnly,
    #[error("the table is wrong: material {material} layout {layout} card state {card_state} holds byte {byte}")]
    WrongValue { material: Material, layout: u64, card_state: usize, byte: u8 },
    #[error("the table is wrong: material {material} layout {layout} card state {card_state} holds word {word}")]
    WrongWord { material: Material, layout: u64, card_state: usize, word: u16 },
}

/// A legal move and its value for the side that makes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveValue {
    pub played: Move,
    pub value: Value,
}

/// A table directory opened for probing.
pub struct Tablebase {
    files: TableFiles,
    /// Indexes for ranking positions, and what unpacking compressed blocks
    /// needs.
    context: Context,
    cache: Mutex<BlockCache>,
}

impl Tablebase {
    /// Opens a table directory, reading and checking every shard's header
    /// (not the values).
    pub fn open(dir: &Path) -> Result<Tablebase, ProbeError> {
        Tablebase::with_cache(dir, DEFAULT_CACHE_BLOCKS)
    }

    /// [`Tablebase::open`] with a cache of `blocks` blocks (at least one).
    pub fn with_cache(dir: &Path, blocks: usize) -> Result<Tablebase, ProbeError> {
        let files = TableFiles::open(dir)?;
        if files.shards.iter().any(|s| s.content() != Content::Values) {
            return Err(ProbeError::WdlOnly);
        }
        let context = Context::new(files.rules, files.max_per_side);
        let cache = Mutex::new(BlockCache::new(blocks.max(1)));
        Ok(Tablebase { files, context, cache })
    }

    pub fn rules(&self) -> &Rules {
        &self.files.rules
    }

    pub fn max_per_side(&self) -> usize {
        self.files.max_per_side
    }

    /// Win / draw / loss and plies to the end for the side to move.
    pub fn probe(&self, position: &Position) -> Result<Value, ProbeError> {
        if !position.is_well_formed() {
            return Err(ProbeError::Malformed);
        }
        if position.is_game_over() {
            return Err(ProbeError::GameOver);
        }
        let material = Material::new(position.mover.count_ones() as usize, position.opponent.count_ones() as usize);
        let slot = self.slot(material)?;
        let shard = &self.files.shards[slot];
        let recomputes = shard.is_compressed();
        if recomputes && position.has_winning_move(self.rules()) {
            return Ok(Value::Win(1));
        }
        let index = self.context.index(material);
        let layout = Layout {
            mover: position.mover,
            opponent: position.opponent,
            mover_master: position.mover_master,
            opponent_master: position.opponent_master,
        };
        let layout_number = index.rank(&layout);
        let state = layout_number * CARD_STATES as u64 + position.cards.index() as u64;
        let width = shard.header().width;
        // A word's two bytes are in one block: blocks are an even number
        // of bytes.
        let at = state * width.bytes() as u64;
        let block_bytes = crate::format::BLOCK_BYTES as u64;
        let block = self.block(slot, (at / block_bytes) as usize)?;
        let at = (at % block_bytes) as usize;
        let card_state = position.cards.index();
        if width == ValueWidth::Word {
            let word = u16::from_le_bytes([block[at], block[at + 1]]);
            return Value::from_word(word).ok_or(ProbeError::WrongWord {
                material,
                layout: layout_number,
                card_state,
                word,
            });
        }
        let byte = block[at];
        let wrong = || ProbeError::WrongValue { material, layout: layout_number, card_state, byte };
        match Value::from_byte(byte) {
            None => Err(wrong()),
            // A compressed shard recomputes every win in one.
            Some(Value::Win(1)) if recomputes => Err(wrong()),
            Some(value) => Ok(value),
        }
    }

    /// The index of `material`.
    ///
    /// # Panics
    /// If the table does not hold `material`.
    pub fn index(&self, material: Material) -> Arc<MaterialIndex> {
        self.context.index(material)
    }

    /// The value bytes of the 30 card states of layout `layout` of
    /// `material`, as the table holds them (a compressed shard's recomputed
    /// values included; a game-over layout's are 0), in card-state order.
    /// For checking tables; [`Tablebase::probe`] is the way to ask for a
    /// position's value. Refuses a shard of value words
    /// ([`Tablebase::layout_words`] reads those).
    pub fn layout_bytes(&self, material: Material, layout: u64) -> Result<[u8; CARD_STATES], ProbeError> {
        let slot = self.slot(material)?;
        let shard = &self.files.shards[slot];
        if shard.header().width != ValueWidth::Byte {
            let cause = FormatError::WordValues("reading value bytes from");
            return Err(StoreError::Format { path: shard.path().to_path_buf(), cause }.into());
        }
        let mut bytes = [0u8; CARD_STATES];
        self.read_layout(slot, material, layout, &mut bytes)?;
        Ok(bytes)
    }

    /// [`Tablebase::layout_bytes`] as value words, from a shard of either
    /// width (bytes widened: `value::widen`).
    pub fn layout_words(&self, material: Material, layout: u64) -> Result<[u16; CARD_STATES], ProbeError> {
        let slot = self.slot(material)?;
        let width = self.files.shards[slot].header().width;
        let mut bytes = [0u8; 2 * CARD_STATES];
        let layout_bytes = &mut bytes[..CARD_STATES * width.bytes()];
        self.read_layout(slot, material, layout, layout_bytes)?;
        Ok(std::array::from_fn(|k| width.word_at(layout_bytes, k)))
    }

    /// Reads layout `layout`'s values (`out.len()` bytes of them) from the
    /// shard in `slot`.
    fn read_layout(&self, slot: usize, material: Material, layout: u64, out: &mut [u8]) -> Result<(), ProbeError> {
        if layout >= self.context.index(material).layouts() {
            return Err(ProbeError::OutOfRange { material, layout });
        }
        let block_bytes = crate::format::BLOCK_BYTES as u64;
        let mut at = layout * out.len() as u64;
        let mut filled = 0;
        // A layout's values may straddle two blocks.
        while filled < out.len() {
            let block = self.block(slot, (at / block_bytes) as usize)?;
            let offset = (at % block_bytes) as usize;
            let n = (out.len() - filled).min(block.len() - offset);
            out[filled..filled + n].copy_from_slice(&block[offset..offset + n]);
            (filled, at) = (filled + n, at + n as u64);
        }
        Ok(())
    }

    /// Every legal move with its value for the mover, best first. Moves of
    /// equal value keep the order of [`Position::moves`].
    pub fn probe_moves(&self, position: &Position) -> Result<Vec<MoveValue>, ProbeError> {
        self.probe(position)?;
        let mut out = Vec::new();
        for played in position.moves(self.rules()) {
            let value = match played.outcome {
                Outcome::Win => Value::Win(1),
                Outcome::Continue(next) => self.probe(&next)?.before_move(),
            };
            out.push(MoveValue { played, value });
        }
        out.sort_by_key(|m| std::cmp::Reverse(m.value.goodness()));
        Ok(out)
    }

    /// The place of `material`'s shard.
    fn slot(&self, material: Material) -> Result<usize, ProbeError> {
        let found = self.files.shards.iter().position(|s| s.material() == material);
        found.ok_or(ProbeError::NotInTable { material, max_per_side: self.max_per_side() })
    }

    /// A checked block, from the cache or the disk.
    fn block(&self, slot: usize, block: usize) -> Result<Arc<Vec<u8>>, ProbeError> {
        if let Some(bytes) = self.lock().get((slot, block)) {
            return Ok(bytes);
        }
        // Read without holding the lock; two threads may read the same
        // block, which is harmless.
        let bytes = Arc::new(self.files.shards[slot].read_values(block, &self.context)?);
        self.lock().insert((slot, block), bytes.clone());
        Ok(bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BlockCache> {
        // A panic elsewhere cannot leave the cache inconsistent: every
        // method leaves it whole.
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Empties the block cache (for measuring cold probes).
    pub fn clear_cache(&self) {
        self.lock().blocks.clear();
    }
}

/// (shard slot, block number).
type BlockKey = (usize, usize);

/// Least recently used blocks, keyed by (shard slot, block number).
struct BlockCache {
    capacity: usize,
    tick: u64,
    /// (shard slot, block) -> (tick of last use, bytes).
    blocks: HashMap<BlockKey, (u64, Arc<Vec<u8>>)>,
}

impl BlockCache {
    fn new(capacity: usize) -> BlockCache {
        BlockCache { capacity, tick: 0, blocks: HashMap::with_capacity(capacity + 1) }
    }

    fn get(&mut self, key: (usize, usize)) -> Option<Arc<Vec<u8>>> {
        self.tick += 1;
        let tick = self.tick;
        self.blocks.get_mut(&key).map(|(used, bytes)| {
            *used = tick;
            bytes.clone()
        })
    }

    fn insert(&mut self, key: (usize, usize), bytes: Arc<Vec<u8>>) {
        self.tick += 1;
        self.blocks.insert(key, (self.tick, bytes));
        if self.blocks.len() > self.capacity {
            let oldest = self.blocks.iter().min_by_key(|(_, (used, _))| *used).map(|(key, _)| *key);
            if let Some(oldest) = oldest {
                self.blocks.remove(&oldest);
            }
        }
        debug_assert!(self.blocks.len() <= self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_the_most_recently_used_blocks() {
        let mut cache = BlockCache::new(2);
        let block = |n: u8| Arc::new(vec![n]);
        cache.insert((0, 0), block(0));
        cache.insert((0, 1), block(1));
        assert!(cache.get((0, 0)).is_some());
        cache.insert((1, 0), block(2));
        assert!(cache.get((0, 1)).is_none(), "the least recently used block goes");
        assert_eq!(cache.get((0, 0)).unwrap()[0], 0);
        assert_eq!(cache.get((1, 0)).unwrap()[0], 2);
    }
}
