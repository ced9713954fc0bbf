//! Checking tables on disk: every block's checksum, and every value
//! against its successors.
//!
//! Owns `onitb verify` and `onitb verify --deep`. The checksum pass streams
//! each shard in batches of blocks (O_DIRECT where possible) and checks the
//! blocks of a batch in parallel; it never holds more than one batch. The
//! deep pass re-derives each position's value from its successors with
//! the rules' move generator, one rayon task per run of layouts: over the
//! whole table loaded (successors are spread over whole materials; refused
//! if it does not fit the memory available), or over a sample of layouts
//! read through a bounded block cache (`--sample`).
//!
//! The checksum pass checks shards of value words (format version 2) as it
//! checks those of bytes. The deep pass compares value bytes (through a
//! 256-entry table of answers) where every shard holds bytes, and value
//! words (bytes widened as they are read) where some hold words.

use crate::blockio::{ALIGN_BYTES, Buffer, BufferPool};
use crate::format::BLOCK_BYTES;
use crate::index::{Layout, Material, MaterialIndex};
use crate::notation::{Colour, Setup, to_notation};
use crate::probe::{ProbeError, Tablebase};
use crate::rules::{CARD_STATES, CARDS_PER_GAME, CardState, MAX_PIECES_PER_SIDE, NoMoveRule, Outcome, Position, Rules};
use crate::shard::{ShardFile, TableFiles};
use crate::store::{StoreError, is_shard_name, material_of_name};
use crate::table::{SolvedMaterial, Table};
use crate::value::{DRAW_WORD, NO_VALUE, Value, ValueWidth, negate, negate_word, widen};
use rayon::prelude::*;
use std::fmt;
use std::fs;
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Most stored bytes read at once by the checksum pass.
const BATCH_BYTES_MAX: u64 = 64 << 20;
/// Layouts per task in the deep pass.
const LAYOUTS_PER_TASK: u64 = 4096;

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
    /// The value word stored (a byte widened: `value::widen`).
    pub stored: u16,
    /// The value word the successors give; `None` if a successor has no
    /// value or one too deep to answer.
    pub derived: Option<u16>,
}

impl fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |word: u16| Value::from_word(word).map_or("no value".to_string(), |v| v.to_string());
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

/// What the deep check can fail with, besides finding a wrong value.
#[derive(Debug, Error)]
pub enum VerifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(
        "the deep check of every value holds the whole table in memory, {} GiB, but only {} GiB is available; \
         check a sample of it instead (--sample N), which reads blocks through a cache of {} MiB",
        gib(*needed_bytes),
        gib(*available_bytes),
        SAMPLE_CACHE_BLOCKS * BLOCK_BYTES as usize / (1 << 20)
    )]
    TooBig { needed_bytes: u64, available_bytes: u64 },
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / (1u64 << 30) as f64)
}

/// Re-derives every value of the table in `dir` from its successors and
/// returns the first inconsistency (in material, then layout order).
/// `progress` is called before each material. Loads the whole table: a
/// table bigger than the memory available is refused up front
/// ([`VerifyError::TooBig`]; [`verify_deep_sample`] checks such a table).
pub fn verify_deep(dir: &Path, progress: &(dyn Fn(Material) + Sync)) -> Result<Option<Inconsistency>, VerifyError> {
    let files = TableFiles::open(dir)?;
    let needed_bytes = files.shards.iter().map(|s| s.header().values_len()).sum();
    fits_in_memory(needed_bytes, crate::blockio::available_memory_bytes())?;
    let table = files.load()?;
    check_table(&table, progress)
}

/// Refuses a load of `needed_bytes` when less is available (unknown:
/// allowed).
fn fits_in_memory(needed_bytes: u64, available_bytes: Option<u64>) -> Result<(), VerifyError> {
    match available_bytes {
        Some(available_bytes) if needed_bytes > available_bytes => {
            Err(VerifyError::TooBig { needed_bytes, available_bytes })
        }
        _ => Ok(()),
    }
}

/// The deep check of a table in memory: the first inconsistency.
pub fn check_table(table: &Table, progress: &(dyn Fn(Material) + Sync)) -> Result<Option<Inconsistency>, VerifyError> {
    if table.materials().iter().all(|m| m.width == ValueWidth::Byte) {
        Ok(check_table_as::<u8>(table, progress))
    } else {
        Ok(check_table_as::<u16>(table, progress))
    }
}

/// [`check_table`], comparing values as `C`.
fn check_table_as<C: Code>(table: &Table, progress: &(dyn Fn(Material) + Sync)) -> Option<Inconsistency> {
    let source = TableValues::new(table);
    for (slot, solved) in table.materials().iter().enumerate() {
        progress(solved.index.material);
        let layouts = solved.index.layouts();
        let tasks = layouts.div_ceil(LAYOUTS_PER_TASK);
        let found = (0..tasks).into_par_iter().find_map_first(|task| {
            let end = ((task + 1) * LAYOUTS_PER_TASK).min(layouts);
            (task * LAYOUTS_PER_TASK..end).find_map(|n| match check_layout::<C, _>(&source, slot, n) {
                Ok(found) => found,
                Err(never) => match never {},
            })
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// How many layouts [`verify_deep_sample`] checks, and which.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Layouts to check (all 30 card states of each); at least the
    /// table's layouts: every one.
    pub layouts: u64,
    /// Picks the layouts: the same seed picks the same ones.
    pub seed: u64,
}

/// What [`verify_deep_sample`] checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleReport {
    /// Layouts checked (runs that overlapped counted once).
    pub layouts: u64,
    /// Layouts in the whole table.
    pub table_layouts: u64,
    /// The first inconsistency, in material and layout order.
    pub found: Option<Inconsistency>,
}

/// Consecutive layouts checked from each place the sample picks (four
/// placements of 4v4): their successors share blocks, so a layout of a
/// run reads fewer blocks than a layout alone. At 6 men through a
/// compressed table, 20,000 layouts in runs of 1, 16 and 64 took 25.2,
/// 11.6 and 5.9 s (docs/BENCHMARKS.md, session 61).
pub const SAMPLE_RUN_LAYOUTS: u64 = 64;

/// Blocks the sampled deep check keeps (4 MiB each): what bounds its
/// memory.
pub const SAMPLE_CACHE_BLOCKS: usize = 64;

/// Runs of a sample checked between two calls of the progress function.
const SAMPLE_RUNS_PER_PART: usize = 256;

/// The deep check of `sample.layouts` layouts of the table in `dir`, each
/// against its successors, reading blocks through a cache of
/// [`SAMPLE_CACHE_BLOCKS`] blocks whatever the table's size. The layouts
/// are runs of [`SAMPLE_RUN_LAYOUTS`] from places picked uniformly over
/// the table's layouts by `sample.seed`; a sample as big as the table
/// checks every layout. `progress(done, layouts)` is called as parts of
/// the sample are done. Blocks read are checked as probing checks them, so
/// a damaged block is an error, not an inconsistency.
pub fn verify_deep_sample(
    dir: &Path,
    sample: Sample,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<SampleReport, VerifyError> {
    let source = ShardValues::open(dir)?;
    if source.all_bytes {
        sample_as::<u8>(&source, sample, progress)
    } else {
        sample_as::<u16>(&source, sample, progress)
    }
}

/// [`verify_deep_sample`], comparing values as `C`.
fn sample_as<C: Code>(
    source: &ShardValues,
    sample: Sample,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<SampleReport, VerifyError> {
    let sizes: Vec<u64> = source.indexes.iter().map(|index| index.layouts()).collect();
    let runs = sample_runs(&sizes, sample);
    let layouts: u64 = runs.iter().map(|(_, range)| range.end - range.start).sum();
    let table_layouts = sizes.iter().sum();
    let mut done = 0;
    for part in runs.chunks(SAMPLE_RUNS_PER_PART) {
        // The first layout in sample order that is wrong or cannot be read.
        let first = part.par_iter().find_map_first(|(slot, range)| {
            range.clone().find_map(|n| check_layout::<C, _>(source, *slot, n).transpose())
        });
        if let Some(found) = first.transpose()? {
            return Ok(SampleReport { layouts, table_layouts, found: Some(found) });
        }
        done += part.iter().map(|(_, range)| range.end - range.start).sum::<u64>();
        progress(done, layouts);
    }
    Ok(SampleReport { layouts, table_layouts, found: None })
}

/// The runs of layouts a sample checks: (material slot, layouts), sorted,
/// not overlapping.
fn sample_runs(sizes: &[u64], sample: Sample) -> Vec<(usize, Range<u64>)> {
    let total: u64 = sizes.iter().sum();
    if sample.layouts >= total {
        return sizes.iter().enumerate().flat_map(|(slot, &n)| every_run(slot, n)).collect();
    }
    let mut random = SplitMix64(sample.seed);
    let mut runs: Vec<(usize, Range<u64>)> = (0..sample.layouts.div_ceil(SAMPLE_RUN_LAYOUTS))
        .map(|_| {
            // A layout number over the whole table, then within its material.
            let mut at = random.below(total);
            let mut slot = 0;
            while at >= sizes[slot] {
                at -= sizes[slot];
                slot += 1;
            }
            (slot, at..(at + SAMPLE_RUN_LAYOUTS).min(sizes[slot]))
        })
        .collect();
    runs.sort_by_key(|(slot, range)| (*slot, range.start));
    let mut merged: Vec<(usize, Range<u64>)> = Vec::with_capacity(runs.len());
    for (slot, range) in runs {
        match merged.last_mut() {
            Some((last, before)) if *last == slot && range.start <= before.end => {
                before.end = before.end.max(range.end)
            }
            _ => merged.push((slot, range)),
        }
    }
    merged
}

/// Every layout of a material, as runs.
fn every_run(slot: usize, layouts: u64) -> impl Iterator<Item = (usize, Range<u64>)> {
    let step = SAMPLE_RUN_LAYOUTS * 64;
    (0..layouts.div_ceil(step)).map(move |k| (slot, k * step..((k + 1) * step).min(layouts)))
}

/// Sebastiano Vigna's SplitMix64: a fixed, seedable sequence is all the
/// sample needs (not worth a dependency).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0); the bias, under n / 2^64, does not matter here.
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// How the deep check compares values: as bytes (every shard of bytes: the
/// fast path, through [`ANSWERS`]), or as value words (some shard of
/// words; the bytes of the others widened as they are read, so that a
/// capture from a word material into a byte one compares alike).
trait Code: Copy + Ord + Default + Send + Sync + fmt::Debug + 'static {
    /// Compared only where every material holds bytes: the width of a
    /// material need not be looked up.
    const ONLY_BYTES: bool;
    /// No value stored, or no answer.
    const NONE: Self;
    const WIN_IN_1: Self;
    const LOSS_IN_0: Self;
    /// The deepest win, which no loss answers.
    const DEEPEST_WIN: Self;
    /// What a move into a successor holding `self` (for the opponent)
    /// gives the mover: [`Code::NONE`] if nothing answers it. Without a
    /// branch on `self` for bytes (a table lookup).
    fn answer(self) -> Self;
    /// The definition: `value::negate` or `value::negate_word`.
    /// # Panics: on [`Code::NONE`] and [`Code::DEEPEST_WIN`].
    fn negate(self) -> Self;
    /// The value word of `self`.
    fn word(self) -> u16;
    /// A layout's 30 codes from its values stored at `width`.
    fn of_layout(width: ValueWidth, values: &[u8]) -> [Self; CARD_STATES];
    /// A layout's 30 codes from a table's shards.
    fn of_shards(tablebase: &Tablebase, material: Material, layout: u64) -> Result<[Self; CARD_STATES], ProbeError>;
}

impl Code for u8 {
    const ONLY_BYTES: bool = true;
    const NONE: u8 = NO_VALUE;
    const WIN_IN_1: u8 = u8::MAX;
    const LOSS_IN_0: u8 = 1;
    const DEEPEST_WIN: u8 = 129;

    #[inline(always)]
    fn answer(self) -> u8 {
        ANSWERS[self as usize]
    }

    fn negate(self) -> u8 {
        negate(self)
    }

    fn word(self) -> u16 {
        widen(self)
    }

    #[inline(always)]
    fn of_layout(width: ValueWidth, values: &[u8]) -> [u8; CARD_STATES] {
        debug_assert_eq!(width, ValueWidth::Byte, "bytes are compared where every shard holds bytes");
        values[..CARD_STATES].try_into().expect("a layout's bytes")
    }

    fn of_shards(tablebase: &Tablebase, material: Material, layout: u64) -> Result<[u8; CARD_STATES], ProbeError> {
        tablebase.layout_bytes(material, layout)
    }
}

impl Code for u16 {
    const ONLY_BYTES: bool = false;
    const NONE: u16 = 0;
    const WIN_IN_1: u16 = u16::MAX;
    const LOSS_IN_0: u16 = 1;
    const DEEPEST_WIN: u16 = DRAW_WORD + 1;

    #[inline]
    fn answer(self) -> u16 {
        if self == Self::NONE || self == Self::DEEPEST_WIN { Self::NONE } else { negate_word(self) }
    }

    fn negate(self) -> u16 {
        negate_word(self)
    }

    fn word(self) -> u16 {
        self
    }

    #[inline]
    fn of_layout(width: ValueWidth, values: &[u8]) -> [u16; CARD_STATES] {
        std::array::from_fn(|k| width.word_at(values, k))
    }

    fn of_shards(tablebase: &Tablebase, material: Material, layout: u64) -> Result<[u16; CARD_STATES], ProbeError> {
        tablebase.layout_words(material, layout)
    }
}

/// Where the deep check reads values: a table in memory, or shards a block
/// at a time.
trait ValueSource: Sync {
    type Error;
    fn rules(&self) -> &Rules;
    /// The index of the material in `slot` (materials in order).
    fn index(&self, slot: usize) -> &MaterialIndex;
    /// The slot of `material`, which the table holds.
    fn slot(&self, material: Material) -> usize;
    /// The values of the 30 card states of layout `layout`, as `C`.
    fn values<C: Code>(&self, slot: usize, layout: u64) -> Result<[C; CARD_STATES], Self::Error>;
    /// Asks for the values of `layout` ahead of [`ValueSource::values`].
    fn prefetch<C: Code>(&self, _slot: usize, _layout: u64) {}
}

/// The slot of each material of a table, by its piece counts (a binary
/// search over the materials, a branch mispredicted at every successor,
/// took a fifth of the deep check's time).
struct MaterialSlots([[u8; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1]);

impl MaterialSlots {
    /// Not a slot.
    const NONE: u8 = u8::MAX;

    /// `materials` in slot order.
    fn new(materials: impl Iterator<Item = Material>) -> MaterialSlots {
        let mut slots = [[Self::NONE; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1];
        for (slot, material) in materials.enumerate() {
            slots[material.mover as usize][material.opponent as usize] = slot as u8;
        }
        MaterialSlots(slots)
    }

    fn get(&self, material: Material) -> usize {
        let slot = self.0[material.mover as usize][material.opponent as usize];
        assert!(slot != Self::NONE, "captures lead to smaller materials of the table");
        slot as usize
    }
}

/// A table in memory, as the deep check reads it.
struct TableValues<'a> {
    table: &'a Table,
    slots: MaterialSlots,
}

impl<'a> TableValues<'a> {
    fn new(table: &'a Table) -> TableValues<'a> {
        TableValues { table, slots: MaterialSlots::new(table.materials().iter().map(|m| m.index.material)) }
    }

    /// The material in `slot` and its width, known without a look where
    /// `C` is compared only in tables of bytes.
    #[inline(always)]
    fn material<C: Code>(&self, slot: usize) -> (&'a SolvedMaterial, ValueWidth) {
        let solved = &self.table.materials()[slot];
        let width = if C::ONLY_BYTES { ValueWidth::Byte } else { solved.width };
        debug_assert_eq!(width, solved.width, "bytes are compared in tables of bytes only");
        (solved, width)
    }
}

impl ValueSource for TableValues<'_> {
    type Error = std::convert::Infallible;

    fn rules(&self) -> &Rules {
        self.table.rules()
    }

    fn index(&self, slot: usize) -> &MaterialIndex {
        &self.table.materials()[slot].index
    }

    fn slot(&self, material: Material) -> usize {
        self.slots.get(material)
    }

    #[inline(always)]
    fn values<C: Code>(&self, slot: usize, layout: u64) -> Result<[C; CARD_STATES], Self::Error> {
        let (solved, width) = self.material::<C>(slot);
        let layout_bytes = CARD_STATES * width.bytes();
        let at = layout as usize * layout_bytes;
        Ok(C::of_layout(width, &solved.values[at..at + layout_bytes]))
    }

    fn prefetch<C: Code>(&self, slot: usize, layout: u64) {
        let (solved, width) = self.material::<C>(slot);
        let layout_bytes = CARD_STATES * width.bytes();
        let at = layout as usize * layout_bytes;
        let bytes = &solved.values[at..at + layout_bytes];
        // A layout's 30 (or 60) bytes may straddle two cache lines.
        crate::cache_hint::prefetch(bytes);
        crate::cache_hint::prefetch(&bytes[layout_bytes - 1..]);
    }
}

/// A table's shards read through a [`Tablebase`]'s cache of checked blocks.
struct ShardValues {
    tablebase: Tablebase,
    /// Does every shard hold bytes?
    all_bytes: bool,
    materials: Vec<Material>,
    slots: MaterialSlots,
    indexes: Vec<Arc<MaterialIndex>>,
}

impl ShardValues {
    fn open(dir: &Path) -> Result<ShardValues, VerifyError> {
        let files = TableFiles::open(dir)?;
        let all_bytes = files.shards.iter().all(|s| s.header().width == ValueWidth::Byte);
        let tablebase = Tablebase::with_cache(dir, SAMPLE_CACHE_BLOCKS)?;
        let mut materials = Material::all_up_to(tablebase.max_per_side());
        materials.sort();
        let indexes = materials.iter().map(|&m| tablebase.index(m)).collect();
        let slots = MaterialSlots::new(materials.iter().copied());
        Ok(ShardValues { tablebase, all_bytes, materials, slots, indexes })
    }
}

impl ValueSource for ShardValues {
    type Error = VerifyError;

    fn rules(&self) -> &Rules {
        self.tablebase.rules()
    }

    fn index(&self, slot: usize) -> &MaterialIndex {
        &self.indexes[slot]
    }

    fn slot(&self, material: Material) -> usize {
        self.slots.get(material)
    }

    fn values<C: Code>(&self, slot: usize, layout: u64) -> Result<[C; CARD_STATES], VerifyError> {
        Ok(C::of_shards(&self.tablebase, self.materials[slot], layout)?)
    }
}

/// Where a move leads: a win on the spot, or a layout of some material
/// (its values).
#[derive(Clone, Copy)]
enum Successor<C> {
    Win,
    At([C; CARD_STATES]),
}

fn layout_of(position: &Position) -> Layout {
    Layout {
        mover: position.mover,
        opponent: position.opponent,
        mover_master: position.mover_master,
        opponent_master: position.opponent_master,
    }
}

fn successor<C: Code, S: ValueSource>(source: &S, outcome: Outcome) -> Result<Successor<C>, S::Error> {
    Ok(match outcome {
        Outcome::Win => Successor::Win,
        Outcome::Continue(next) => {
            let (slot, n) = locate(source, &next);
            Successor::At(source.values(slot, n)?)
        }
    })
}

/// The material slot and layout number of a position.
fn locate<S: ValueSource>(source: &S, position: &Position) -> (usize, u64) {
    let material = Material::new(position.mover.count_ones() as usize, position.opponent.count_ones() as usize);
    let slot = source.slot(material);
    (slot, source.index(slot).rank(&layout_of(position)))
}

/// The value for the mover of a move into `successor` with card state
/// `next` there; `None` if the successor's value cannot be answered.
fn move_value<C: Code>(successor: &Successor<C>, next: CardState) -> Option<C> {
    match successor {
        Successor::Win => Some(C::WIN_IN_1),
        Successor::At(values) => {
            let value = values[next.index()];
            // The deepest win (a byte's 129: in 253 plies) no loss answers.
            (value != C::NONE && value != C::DEEPEST_WIN).then(|| value.negate())
        }
    }
}

/// Checks the 30 card states of layout `n` of the material in `slot`.
fn check_layout<C: Code, S: ValueSource>(source: &S, slot: usize, n: u64) -> Result<Option<Inconsistency>, S::Error> {
    let rules = source.rules();
    let index = source.index(slot);
    let layout = index.unrank(n);
    let stored = source.values::<C>(slot, n)?;
    let position = |k: usize| layout.with_cards(CardState::new(k));
    let inconsistency = |k: usize, derived: Option<C>| {
        let setup = Setup { to_move: Colour::Red, position: position(k) };
        Some(Inconsistency {
            material: index.material,
            layout: n,
            card_state: k,
            notation: to_notation(&setup, &rules.cards),
            stored: stored[k].word(),
            derived: derived.map(C::word),
        })
    };
    if position(0).is_game_over() {
        return Ok(stored.iter().position(|&v| v != C::NONE).and_then(|k| inconsistency(k, Some(C::NONE))));
    }
    let by_card = moves_by_card(source, &layout)?;
    for (k, &value) in stored.iter().enumerate() {
        let cards = CardState::new(k);
        let derived = derive(source, &by_card, position(k), cards)?;
        if derived != Some(value) {
            return Ok(inconsistency(k, derived));
        }
    }
    Ok(None)
}

/// `ANSWERS[b]`: what [`move_value`] gives for a successor byte b, with
/// [`NO_VALUE`] where it gives `None` (no value stored, or a win in 253
/// plies, which no loss byte answers): the fold looks answers up instead
/// of branching on each byte.
const ANSWERS: [u8; 256] = {
    let mut answers = [NO_VALUE; 256];
    let mut byte = 1;
    while byte < 256 {
        if byte != 129 {
            answers[byte] = negate(byte as u8);
        }
        byte += 1;
    }
    answers
};

/// What a layout's moves with each card slot give the mover. A move with
/// card c puts c on the side, so its successor's card state is one of the
/// six `6c..6c + 6` (the module comment of `rules`), whichever state the
/// mover held c in: each move's successor is folded once, for those six,
/// not once per card state of the layout.
#[derive(Default)]
struct MovesByCard<C> {
    /// Whether the mover has any move with the card.
    any: [bool; CARDS_PER_GAME],
    /// `best[c][j]`: the best value a move with card c gives when the
    /// successor is in card state 6c + j.
    best: [[C; 6]; CARDS_PER_GAME],
    /// Bit j of `unanswered[c]`: some move with card c leads to a successor
    /// whose value in card state 6c + j no value answers (none stored, or
    /// a win too deep for a loss).
    unanswered: [u8; CARDS_PER_GAME],
}

impl<C: Code> MovesByCard<C> {
    #[inline]
    fn fold(&mut self, card: usize, successor: &Successor<C>) {
        self.any[card] = true;
        match successor {
            Successor::Win => self.best[card] = [C::WIN_IN_1; 6],
            Successor::At(values) => {
                let mut unanswered = 0;
                for (j, (best, &value)) in self.best[card].iter_mut().zip(&values[6 * card..6 * card + 6]).enumerate() {
                    let answer = value.answer();
                    *best = (*best).max(answer);
                    unanswered |= u8::from(answer == C::NONE) << j;
                }
                self.unanswered[card] |= unanswered;
            }
        }
    }

    /// The best value of the moves with card `card` from card state
    /// `cards`, or `None` if one of them cannot be answered.
    fn best(&self, cards: CardState, card: usize) -> Option<C> {
        let j = cards.after_playing(card).index() - 6 * card;
        debug_assert!(j < 6, "a move with card {card} puts it on the side");
        (self.unanswered[card] & (1 << j) == 0).then_some(self.best[card][j])
    }
}

/// Folds the successors of a layout's moves by card slot (the board part
/// of a move does not depend on the card state).
fn moves_by_card<C: Code, S: ValueSource>(source: &S, layout: &Layout) -> Result<MovesByCard<C>, S::Error> {
    let mut by_card = MovesByCard::<C>::default();
    let mut pending = PendingReads { moves: [(0, 0, 0); PENDING_READS], count: 0 };
    let mut done = 0u32;
    let mut failed = None;
    // Three deals that between them give the mover every card.
    for (mover, opponent, side) in [([0, 1], [2, 3], 4), ([2, 3], [0, 1], 4), ([4, 0], [1, 2], 3)] {
        let cards = CardState::from_hands(mover, opponent, side).expect("a deal");
        let position = layout.with_cards(cards);
        position.for_each_board_move(source.rules(), |played| {
            if failed.is_some() || done & (1 << played.card_slot) != 0 {
                return;
            }
            let Outcome::Continue(next) = played.outcome else {
                return by_card.fold(played.card_slot, &Successor::Win);
            };
            let (slot, n) = locate(source, &next);
            source.prefetch::<C>(slot, n);
            pending.moves[pending.count] = (played.card_slot, slot, n);
            pending.count += 1;
            if pending.count == PENDING_READS {
                failed = pending.read(source, &mut by_card).err();
            }
        });
        done |= (1 << mover[0]) | (1 << mover[1]);
    }
    if let Some(error) = failed {
        return Err(error);
    }
    pending.read(source, &mut by_card)?;
    Ok(by_card)
}

/// Successors read at once, after all of them are ranked. Their bytes lie
/// anywhere in the table (cache misses); read one by one between rankings
/// the misses came one after another (about half of the deep check's time).
const PENDING_READS: usize = 32;

/// Moves whose successors are ranked but not read yet: (card slot,
/// material slot, layout).
struct PendingReads {
    moves: [(usize, usize, u64); PENDING_READS],
    count: usize,
}

impl PendingReads {
    /// Reads the pending successors and folds them.
    fn read<C: Code, S: ValueSource>(&mut self, source: &S, by_card: &mut MovesByCard<C>) -> Result<(), S::Error> {
        for &(card, slot, n) in &self.moves[..self.count] {
            by_card.fold(card, &Successor::At(source.values(slot, n)?));
        }
        self.count = 0;
        Ok(())
    }
}

/// The value a position's successors give it.
fn derive<C: Code, S: ValueSource>(
    source: &S,
    by_card: &MovesByCard<C>,
    position: Position,
    cards: CardState,
) -> Result<Option<C>, S::Error> {
    let held = cards.mover_cards();
    let mut best = C::NONE;
    if held.iter().all(|&c| !by_card.any[c]) {
        return match source.rules().no_move {
            NoMoveRule::Loss => Ok(Some(C::LOSS_IN_0)),
            NoMoveRule::Pass => {
                for played in position.moves(source.rules()) {
                    let Outcome::Continue(next) = played.outcome else { return Ok(None) };
                    let Some(value) = move_value(&successor::<C, _>(source, played.outcome)?, next.cards) else {
                        return Ok(None);
                    };
                    best = best.max(value);
                }
                Ok(Some(best))
            }
        };
    }
    for c in held.into_iter().filter(|&c| by_card.any[c]) {
        let Some(value) = by_card.best(cards, c) else { return Ok(None) };
        best = best.max(value);
    }
    Ok(Some(best))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle for [`derive`]: each card state on its own, from the
    /// rules' list of moves (passes included) and a value per successor.
    fn derive_plainly<C: Code, S: ValueSource<Error = std::convert::Infallible>>(
        source: &S,
        position: Position,
    ) -> Option<C> {
        let moves = position.moves(source.rules());
        if moves.is_empty() {
            return Some(C::LOSS_IN_0);
        }
        let mut best = C::NONE;
        for played in moves {
            let value = match played.outcome {
                Outcome::Win => C::WIN_IN_1,
                Outcome::Continue(next) => move_value(&successor::<C, _>(source, played.outcome).unwrap(), next.cards)?,
            };
            best = best.max(value);
        }
        Some(best)
    }

    #[test]
    fn the_answers_are_move_values() {
        for byte in 0..=u8::MAX {
            let answer = move_value(&Successor::At([byte; CARD_STATES]), CardState::new(7));
            assert_eq!(ANSWERS[byte as usize], answer.unwrap_or(NO_VALUE), "byte {byte}");
        }
        for word in 0..=u16::MAX {
            let answer = move_value(&Successor::At([word; CARD_STATES]), CardState::new(7));
            assert_eq!(word.answer(), answer.unwrap_or(0), "word {word}");
        }
        let codes = |v: Value| (v.to_byte(), v.to_word());
        assert_eq!((u8::WIN_IN_1, u16::WIN_IN_1), codes(Value::Win(1)));
        assert_eq!((u8::LOSS_IN_0, u16::LOSS_IN_0), codes(Value::Loss(0)));
        assert_eq!(u8::DEEPEST_WIN, Value::Win(crate::value::MAX_WIN_PLIES).to_byte());
        assert_eq!(Value::from_word(u16::DEEPEST_WIN), Some(Value::Win(crate::value::MAX_LOSS_PLIES_WORD + 1)));
    }

    /// A table read with some values replaced by ones no move answers (no
    /// value, or the deepest win), as a damaged table may hold them.
    struct Damaged<'a>(TableValues<'a>);

    impl ValueSource for Damaged<'_> {
        type Error = std::convert::Infallible;

        fn rules(&self) -> &Rules {
            self.0.rules()
        }

        fn index(&self, slot: usize) -> &MaterialIndex {
            self.0.index(slot)
        }

        fn slot(&self, material: Material) -> usize {
            self.0.slot(material)
        }

        fn values<C: Code>(&self, slot: usize, layout: u64) -> Result<[C; CARD_STATES], Self::Error> {
            let mut values = self.0.values::<C>(slot, layout)?;
            for (k, value) in values.iter_mut().enumerate() {
                match (layout as usize * CARD_STATES + k) % 23 {
                    0 => *value = C::NONE,
                    1 => *value = C::DEEPEST_WIN,
                    _ => {}
                }
            }
            Ok(values)
        }
    }

    /// [`derive`] against [`derive_plainly`] on every 7th layout of the
    /// table, comparing as `C`; with `right`, against the table's own
    /// values too. Returns how many states it compared.
    fn compare_derivations<C: Code, S: ValueSource<Error = std::convert::Infallible>>(
        source: &S,
        table: &Table,
        right: bool,
    ) -> usize {
        let mut compared = 0;
        for (slot, solved) in table.materials().iter().enumerate() {
            for n in (0..solved.index.layouts()).step_by(7) {
                let layout = solved.index.unrank(n);
                if layout.with_cards(CardState::new(0)).is_game_over() {
                    continue;
                }
                let by_card = moves_by_card::<C, _>(source, &layout).unwrap();
                for cards in CardState::all() {
                    let position = layout.with_cards(cards);
                    let derived = derive(source, &by_card, position, cards).unwrap();
                    assert_eq!(derived, derive_plainly(source, position), "slot {slot} layout {n}, {cards:?}");
                    if right {
                        let stored = source.values::<C>(slot, n).unwrap()[cards.index()];
                        assert_eq!(derived, Some(stored), "the table is right");
                    }
                    compared += 1;
                }
            }
        }
        compared
    }

    /// Both no-move rules, cards whose moves jump over pieces, and
    /// successors that no value answers; as bytes, and as words (the table
    /// widened, and its bytes widened as they are read).
    #[test]
    fn values_derived_by_card_are_those_derived_state_by_state() {
        let sets = [
            (["Boar", "Ox", "Elephant", "Horse", "Crab"], NoMoveRule::Pass),
            (["Tiger", "Dragon", "Frog", "Rabbit", "Crane"], NoMoveRule::Loss),
        ];
        for (names, no_move) in sets {
            let rules = Rules { cards: crate::rules::CardSet::from_names(&names).unwrap(), no_move };
            let table = Table::generate(&rules, 2).unwrap();
            let compared = compare_derivations::<u8, _>(&TableValues::new(&table), &table, true);
            assert!(compared > 100_000, "{names:?} {no_move:?}: {compared}");
            compare_derivations::<u8, _>(&Damaged(TableValues::new(&table)), &table, false);
            compare_derivations::<u16, _>(&TableValues::new(&table), &table, true);
            let widened = table.widened();
            compare_derivations::<u16, _>(&TableValues::new(&widened), &widened, true);
            compare_derivations::<u16, _>(&Damaged(TableValues::new(&widened)), &widened, false);
        }
    }

    /// The deep check of a table in words finds what it finds in bytes, and
    /// passes the table too deep for bytes (Cobra,Eel,Goose,Mantis,Rooster
    /// at 4 men, its 2v2 in words, the rest in bytes): values past 252
    /// plies derived from their successors, across the two widths.
    #[test]
    fn the_deep_check_reads_words() {
        let table = Table::generate(&Rules::default(), 2).unwrap();
        assert_eq!(check_table(&table.widened(), &|_| {}).unwrap(), None);
        // A win in 3 made a win in 5, somewhere in 2v2.
        let mut materials: Vec<SolvedMaterial> = table.materials().iter().map(SolvedMaterial::widened).collect();
        let two_two = materials.iter_mut().find(|m| m.index.material == Material::new(2, 2)).unwrap();
        let win_in_3 = Value::Win(3).to_word();
        let k = (0..two_two.values.len() / 2).find(|&k| crate::value::word_at(&two_two.values, k) == win_in_3);
        crate::value::set_word_at(&mut two_two.values, k.unwrap(), Value::Win(5).to_word());
        let damaged = Table::new(*table.rules(), 2, materials);
        let found = check_table(&damaged, &|_| {}).unwrap().expect("found");
        assert_eq!(found.material, Material::new(2, 2), "{found}");

        let names = ["Cobra", "Eel", "Goose", "Mantis", "Rooster"];
        let rules = Rules { cards: crate::rules::CardSet::from_names(&names).unwrap(), no_move: NoMoveRule::Pass };
        let deep = Table::generate(&rules, 2).unwrap();
        let widths: Vec<ValueWidth> = deep.materials().iter().map(|m| m.width).collect();
        assert_eq!(widths, [ValueWidth::Byte, ValueWidth::Byte, ValueWidth::Byte, ValueWidth::Word]);
        assert_eq!(check_table(&deep, &|_| {}).unwrap(), None);
    }

    #[test]
    fn a_table_bigger_than_the_memory_available_is_refused() {
        assert!(fits_in_memory(10 << 30, Some(10 << 30)).is_ok());
        assert!(fits_in_memory(10 << 30, None).is_ok(), "unknown: allowed");
        let error = fits_in_memory(47 << 30, Some(20 << 30)).unwrap_err().to_string();
        assert!(error.contains("47.00 GiB") && error.contains("20.00 GiB") && error.contains("--sample"), "{error}");
    }

    #[test]
    fn a_sample_is_sorted_runs_inside_the_materials() {
        let sizes = [100, 5, 10_000, 3_000_000];
        let total: u64 = sizes.iter().sum();
        let runs = sample_runs(&sizes, Sample { layouts: 20_000, seed: 9 });
        assert_eq!(runs, sample_runs(&sizes, Sample { layouts: 20_000, seed: 9 }), "the seed picks the runs");
        assert_ne!(runs, sample_runs(&sizes, Sample { layouts: 20_000, seed: 10 }));
        for pair in runs.windows(2) {
            let ((a, first), (b, second)) = (&pair[0], &pair[1]);
            assert!(a < b || (a == b && first.end < second.start), "sorted, apart: {pair:?}");
        }
        assert!(runs.iter().all(|(slot, range)| range.start < range.end && range.end <= sizes[*slot]));
        let layouts: u64 = runs.iter().map(|(_, r)| r.end - r.start).sum();
        assert!((19_000..=20_000 + SAMPLE_RUN_LAYOUTS).contains(&layouts), "{layouts}");
        // Picked uniformly over layouts: the biggest material gets most.
        let in_biggest: u64 = runs.iter().filter(|(slot, _)| *slot == 3).map(|(_, r)| r.end - r.start).sum();
        assert!(in_biggest as f64 > 0.95 * layouts as f64, "{in_biggest} of {layouts}");
        // As big as the table: every layout once.
        for asked in [total, total + 1] {
            let runs = sample_runs(&sizes, Sample { layouts: asked, seed: 1 });
            for (slot, &size) in sizes.iter().enumerate() {
                let mut next = 0;
                for (_, range) in runs.iter().filter(|(s, _)| *s == slot) {
                    assert_eq!(range.start, next);
                    next = range.end;
                }
                assert_eq!(next, size);
            }
        }
    }

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
