//! Checking tables on disk: every block's checksum, and every value
//! against its successors.
//!
//! Owns `onitb verify` and `onitb verify --deep`. The checksum pass streams
//! each shard in batches of blocks (O_DIRECT where possible) and checks the
//! blocks of a batch in parallel; it never holds more than one batch. The deep pass loads the
//! table (successors are spread over whole materials) and re-derives each
//! position's value from its successors with the rules' move generator,
//! one rayon task per run of layouts.

use crate::blockio::{ALIGN_BYTES, Buffer, BufferPool};
use crate::index::{Layout, Material, MaterialIndex};
use crate::notation::{Colour, Setup, to_notation};
use crate::rules::{CARD_STATES, CardState, NoMoveRule, Outcome, Position, Rules};
use crate::shard::{ShardFile, TableFiles};
use crate::store::{StoreError, is_shard_name, material_of_name};
use crate::table::Table;
use crate::value::{NO_VALUE, Value, negate};
use rayon::prelude::*;
use std::fmt;
use std::fs;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Most stored bytes read at once by the checksum pass.
const BATCH_BYTES_MAX: u64 = 64 << 20;
/// Layouts per task in the deep pass.
const LAYOUTS_PER_TASK: u64 = 4096;
/// Value byte of a win in one ply.
const WIN_IN_1: u8 = 255;

/// What the checksum pass found.
#[derive(Debug, Default)]
pub struct Report {
    pub shards: usize,
    pub blocks: usize,
    /// Bytes read from shards (headers excluded).
    pub bytes: u64,
    /// One entry per damaged block or unreadable shard, naming the shard
    /// (and the block).
    pub failures: Vec<StoreError>,
}

/// Checks every block of every shard named by `paths` (shard files or table
/// directories). Never stops at the first failure.
pub fn verify_paths<P: AsRef<Path>>(paths: &[P]) -> Report {
    let mut report = Report::default();
    let mut reader = BatchReader::new();
    for path in paths {
        let path = path.as_ref();
        if path.is_dir() {
            verify_dir(path, &mut reader, &mut report);
        } else {
            verify_shard(path, &mut reader, &mut report);
        }
    }
    report
}

/// Reads the checksum pass's runs of blocks, with O_DIRECT where the file
/// system allows it: buffered reads of a table that is not in the page
/// cache ran at about half the disk's speed, the rest being the kernel's
/// page-cache work (docs/BENCHMARKS.md, 8 men), and would evict other data.
/// One buffer, allocated once, for every run.
struct BatchReader {
    /// Aligned, for O_DIRECT: a run plus an alignment unit at each end.
    direct: Option<Buffer>,
    /// For files that refuse O_DIRECT (tmpfs before Linux 6.6), or if the
    /// aligned buffer could not be had.
    buffered: Vec<u8>,
}

impl BatchReader {
    fn new() -> BatchReader {
        let bytes = (BATCH_BYTES_MAX + crate::format::MAX_FRAME_BYTES as u64) as usize + 2 * ALIGN_BYTES;
        let direct = BufferPool::new(1, bytes.next_multiple_of(ALIGN_BYTES)).ok().and_then(|mut pool| pool.take());
        BatchReader { direct, buffered: Vec::new() }
    }

    /// The shard opened for O_DIRECT reads, if the file system allows it.
    fn open_direct(shard: &ShardFile) -> Option<fs::File> {
        fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(shard.path()).ok()
    }

    /// Bytes `start..end` of the shard, through `direct` (the shard opened
    /// by [`BatchReader::open_direct`]) when there is one.
    fn read(
        &mut self,
        shard: &ShardFile,
        direct: Option<&fs::File>,
        start: u64,
        end: u64,
    ) -> Result<&[u8], StoreError> {
        if let (Some(buffer), Some(file)) = (self.direct.as_mut(), direct) {
            let align = ALIGN_BYTES as u64;
            let first = start - start % align;
            let len = ((end - first).next_multiple_of(align) as usize).min(buffer.len());
            let io_error = |cause| StoreError::Io { action: "read shard", path: shard.path().to_path_buf(), cause };
            let mut got = 0;
            // Short only at the end of the file.
            while got < len {
                match file.read_at(&mut buffer[got..len], first + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io_error(e)),
                }
            }
            if (got as u64) < end - first {
                return Err(io_error(std::io::ErrorKind::UnexpectedEof.into()));
            }
            return Ok(&buffer[(start - first) as usize..(end - first) as usize]);
        }
        self.buffered.resize((end - start) as usize, 0);
        shard.read_at(start, &mut self.buffered)?;
        Ok(&self.buffered)
    }
}

fn verify_dir(dir: &Path, reader: &mut BatchReader, report: &mut Report) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(cause) => {
            report.failures.push(StoreError::Io { action: "read table directory", path: dir.into(), cause });
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| is_shard_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    paths.sort();
    if paths.is_empty() {
        report.failures.push(StoreError::NoTable(dir.to_path_buf()));
        return;
    }
    let mut max_per_side = None;
    for path in &paths {
        if let Some(shard) = verify_shard(path, reader, report) {
            max_per_side.get_or_insert(shard.header().max_per_side as usize);
        }
    }
    // Every material of the table must be there.
    if let Some(max) = max_per_side {
        let names: Vec<Option<Material>> =
            paths.iter().map(|p| material_of_name(&p.file_name().unwrap_or_default().to_string_lossy())).collect();
        let compressed = paths.iter().any(|p| p.extension().is_some_and(|e| e == crate::store::COMPRESSED_EXTENSION));
        for material in Material::all_up_to(max) {
            if !names.contains(&Some(material)) {
                let name = if compressed {
                    crate::store::compressed_shard_name(material)
                } else {
                    crate::store::shard_name(material)
                };
                let path = dir.join(name);
                report.failures.push(StoreError::MissingShard { path, men: 2 * max });
            }
        }
    }
}

/// Checks one shard; returns it if its header could be read.
fn verify_shard(path: &Path, reader: &mut BatchReader, report: &mut Report) -> Option<ShardFile> {
    let shard = match ShardFile::open(path) {
        Ok(shard) => shard,
        Err(error) => {
            report.failures.push(error);
            return None;
        }
    };
    report.shards += 1;
    let blocks = shard.block_count();
    let direct = BatchReader::open_direct(&shard);
    let mut first = 0;
    while first < blocks {
        // Blocks are stored back to back: read a run of them at once.
        let start = shard.stored_range(first).0;
        let mut end_block = first;
        let mut end = start;
        while end_block < blocks {
            let (offset, len) = shard.stored_range(end_block);
            if end_block > first && offset + len - start > BATCH_BYTES_MAX {
                break;
            }
            end = offset + len;
            end_block += 1;
        }
        let batch = match reader.read(&shard, direct.as_ref(), start, end) {
            Ok(batch) => batch,
            Err(error) => {
                report.failures.push(error);
                return Some(shard);
            }
        };
        let failures: Vec<StoreError> = (first..end_block)
            .into_par_iter()
            .filter_map(|block| {
                let (offset, len) = shard.stored_range(block);
                let bytes = &batch[(offset - start) as usize..][..len as usize];
                shard
                    .check_stored(block, bytes)
                    .err()
                    .map(|cause| StoreError::Format { path: path.to_path_buf(), cause })
            })
            .collect();
        report.failures.extend(failures);
        report.blocks += end_block - first;
        report.bytes += end - start;
        first = end_block;
    }
    Some(shard)
}

/// A value that its successors contradict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconsistency {
    pub material: Material,
    pub layout: u64,
    pub card_state: usize,
    /// The position in notation, Red to move.
    pub notation: String,
    pub stored: u8,
    /// The value byte the successors give; `None` if a successor has no
    /// value or one too deep to answer.
    pub derived: Option<u8>,
}

impl fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |byte: u8| Value::from_byte(byte).map_or("no value".to_string(), |v| v.to_string());
        write!(
            f,
            "material {} layout {} card state {} ({}): the table says {}, its successors give {}",
            self.material,
            self.layout,
            self.card_state,
            self.notation,
            name(self.stored),
            self.derived.map_or("nothing (a successor has no value)".to_string(), name),
        )
    }
}

/// Re-derives every value of the table in `dir` from its successors and
/// returns the first inconsistency (in material, then layout order).
/// `progress` is called before each material.
pub fn verify_deep(dir: &Path, progress: &(dyn Fn(Material) + Sync)) -> Result<Option<Inconsistency>, StoreError> {
    let table = TableFiles::open(dir)?.load()?;
    Ok(check_table(&table, progress))
}

/// The deep check of a table in memory.
pub fn check_table(table: &Table, progress: &(dyn Fn(Material) + Sync)) -> Option<Inconsistency> {
    for solved in table.materials() {
        progress(solved.index.material);
        let layouts = solved.index.layouts();
        let tasks = layouts.div_ceil(LAYOUTS_PER_TASK);
        let found = (0..tasks).into_par_iter().find_map_first(|task| {
            let end = ((task + 1) * LAYOUTS_PER_TASK).min(layouts);
            (task * LAYOUTS_PER_TASK..end).find_map(|n| check_layout(table, &solved.index, &solved.values, n))
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Where a move leads: a win on the spot, or a layout of some material.
#[derive(Clone, Copy)]
enum Successor<'a> {
    Win,
    At { values: &'a [u8], layout: u64 },
}

fn layout_of(position: &Position) -> Layout {
    Layout {
        mover: position.mover,
        opponent: position.opponent,
        mover_master: position.mover_master,
        opponent_master: position.opponent_master,
    }
}

fn successor<'a>(table: &'a Table, outcome: Outcome) -> Successor<'a> {
    match outcome {
        Outcome::Win => Successor::Win,
        Outcome::Continue(next) => {
            let material = Material::new(next.mover.count_ones() as usize, next.opponent.count_ones() as usize);
            let solved = table.material(material).expect("captures lead to smaller materials of the table");
            Successor::At { values: &solved.values, layout: solved.index.rank(&layout_of(&next)) }
        }
    }
}

/// The value byte for the mover of a move into `successor` with card state
/// `next` there; `None` if the successor's byte cannot be answered.
fn move_byte(successor: Successor, next: CardState) -> Option<u8> {
    match successor {
        Successor::Win => Some(WIN_IN_1),
        Successor::At { values, layout } => {
            let byte = values[layout as usize * CARD_STATES + next.index()];
            // 129 is a win in 253 plies: no loss byte answers it.
            (byte != NO_VALUE && byte != 129).then(|| negate(byte))
        }
    }
}

/// Checks the 30 card states of one layout.
fn check_layout(table: &Table, index: &MaterialIndex, values: &[u8], n: u64) -> Option<Inconsistency> {
    let rules = table.rules();
    let layout = index.unrank(n);
    let stored = &values[n as usize * CARD_STATES..][..CARD_STATES];
    let position = |k: usize| layout.with_cards(CardState::new(k));
    let inconsistency = |k: usize, derived: Option<u8>| {
        let setup = Setup { to_move: Colour::Red, position: position(k) };
        Some(Inconsistency {
            material: index.material,
            layout: n,
            card_state: k,
            notation: to_notation(&setup, &rules.cards),
            stored: stored[k],
            derived,
        })
    };
    if position(0).is_game_over() {
        return stored.iter().position(|&b| b != NO_VALUE).and_then(|k| inconsistency(k, Some(NO_VALUE)));
    }
    let per_card = successors_per_card(table, rules, &layout);
    for (k, &byte) in stored.iter().enumerate() {
        let cards = CardState::new(k);
        let derived = derive(table, rules, &per_card, position(k), cards);
        if derived != Some(byte) {
            return inconsistency(k, derived);
        }
    }
    None
}

/// The successors of a layout's moves with each card slot (the board part
/// of a move does not depend on the card state).
fn successors_per_card<'a>(table: &'a Table, rules: &Rules, layout: &Layout) -> [Vec<Successor<'a>>; 5] {
    let mut per_card: [Vec<Successor>; 5] = Default::default();
    let mut done = 0u32;
    // Three deals that between them give the mover every card.
    for (mover, opponent, side) in [([0, 1], [2, 3], 4), ([2, 3], [0, 1], 4), ([4, 0], [1, 2], 3)] {
        let cards = CardState::from_hands(mover, opponent, side).expect("a deal");
        let position = layout.with_cards(cards);
        for played in position.moves(rules) {
            if played.is_pass() || done & (1 << played.card_slot) != 0 {
                continue;
            }
            per_card[played.card_slot].push(successor(table, played.outcome));
        }
        done |= (1 << mover[0]) | (1 << mover[1]);
    }
    per_card
}

/// The value byte a position's successors give it.
fn derive(
    table: &Table,
    rules: &Rules,
    per_card: &[Vec<Successor>; 5],
    position: Position,
    cards: CardState,
) -> Option<u8> {
    let held = cards.mover_cards();
    let mut best = 0u8;
    if held.iter().all(|&c| per_card[c].is_empty()) {
        return match rules.no_move {
            NoMoveRule::Loss => Some(Value::Loss(0).to_byte()),
            NoMoveRule::Pass => {
                for played in position.moves(rules) {
                    let Outcome::Continue(next) = played.outcome else { return None };
                    best = best.max(move_byte(successor(table, played.outcome), next.cards)?);
                }
                Some(best)
            }
        };
    }
    for c in held {
        let next = cards.after_playing(c);
        for &s in &per_card[c] {
            best = best.max(move_byte(s, next)?);
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of reading a run give the file's bytes, from unaligned
    /// offsets up to the end of the file.
    #[test]
    fn runs_read_the_same_with_and_without_o_direct() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let table = Table::generate(&Rules::default(), 2).unwrap();
        crate::store::save(&table, &dir).unwrap();
        let path = dir.join(crate::store::shard_name(Material::new(2, 2)));
        let bytes = fs::read(&path).unwrap();
        let shard = ShardFile::open(&path).unwrap();
        let len = bytes.len() as u64;
        let mut reader = BatchReader::new();
        let file = BatchReader::open_direct(&shard);
        assert!(reader.direct.is_some() && file.is_some());
        for (start, end) in [(0, len), (201, 4096 * 3 + 17), (len - 5000, len), (len - 1, len)] {
            let expected = &bytes[start as usize..end as usize];
            assert_eq!(reader.read(&shard, file.as_ref(), start, end).unwrap(), expected, "{start}..{end}");
            assert_eq!(reader.read(&shard, None, start, end).unwrap(), expected, "{start}..{end}");
        }
        assert!(reader.read(&shard, file.as_ref(), len - 10, len + 1).is_err());
    }
}
