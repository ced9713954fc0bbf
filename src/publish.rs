//! Publishing a solved table: each finished material's values into its
//! shard in the output directory, raw or compressed, with its statistics.
//!
//! Owns which writer a shard gets and how much it holds at once, and the
//! background writer: while a run with a work directory solves its later
//! pairs, one thread at idle priority writes the shards of the materials
//! already finished, so that only the last pair's are left when the solve
//! ends (at 8 men, 29% of the table's bytes are not 4v4's; at level 3 they
//! were written 3m47s into 4v4's 17 minutes). Knows nothing of solving
//! beyond finished materials and the solver's progress reports, nor of the
//! shards' byte layouts (`store`, `compress`, `format`).
//!
//! A resumed run keeps the shards its output directory adopted from the
//! interrupted run ([`check_adopted`] removes those that do not fit this
//! run's table, e.g. another zstd level): a kept shard is not written
//! again, only read back, every block checked, for its statistics.
//!
//! A finished material's values may be words (`FinishedMaterial::width`):
//! its shard, raw or compressed, is format version 2, and its statistics
//! count words.

use crate::compress::CompressedShardWriter;
use crate::format::{BLOCK_BYTES, Content, Packing, ShardHeader};
use crate::index::Material;
use crate::rules::{CARD_STATES, Rules};
use crate::shard::{self, ShardFile, Storage};
use crate::solver::{self, FinishedMaterial, Progress, SolveError};
use crate::store::{self, OutputDir, RawShardWriter, StoreError};
use crate::table::{SolvedMaterial, Stats};
use crate::value::ValueWidth;
use rayon::prelude::*;
use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PublishError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Solve(#[from] SolveError),
    #[error("cannot start the thread that writes shards beside the solve: {0}")]
    Thread(String),
    /// The background writer was told to stop before its shard was whole.
    #[error("the shard writer beside the solve was stopped")]
    Stopped,
    /// A kept shard's values are not as wide as the finished material's.
    #[error("its values are {found} byte(s) per state, the finished material's {expected}")]
    OtherWidth { found: usize, expected: usize },
}

/// How the shards are written: the table's rules and size, and for
/// compressed shards the zstd level and the context that recomputes values.
#[derive(Clone, Copy)]
pub struct ShardSpec<'c> {
    pub rules: Rules,
    pub max_per_side: usize,
    pub compress: Option<(i32, &'c shard::Context)>,
}

/// Memory the background writer holds while it writes a shard (raw, or
/// compressed at `compress_level`), which a run that writes in the
/// background keeps out of its windows (`SolveConfig::reserved_bytes`); None
/// where that would be too much: shards of higher levels are written after
/// the solve only. It holds a 4 MiB block of values, the block's stored
/// bytes (4 MiB at most) and its frame, a decompressor with its 256 KiB
/// read buffer, the writer's 1 MiB staging buffer, and the zstd
/// compressor, whose size grows with the level: measured on a 4 MiB block
/// (zstd 1.5, peak RSS before and after one `zstd::bulk::compress`), 0.3
/// MiB at level 1, 1.3 at 3, 2.8 at 6, 10.4 at 9, then 40 at 12, 64 at 15,
/// 49 at 19 (the default).
pub fn background_writer_bytes(compress_level: Option<i32>) -> Option<u64> {
    match compress_level {
        None | Some(..=3) => Some(16 << 20),
        Some(4..=9) => Some(24 << 20),
        Some(_) => None,
    }
}

/// The smallest budget a run writes shards in the background with, in
/// units of the writer's memory: below it the writer would take more than
/// a sixteenth of the budget, and the shards are written after the solve,
/// as without a work directory.
pub const BACKGROUND_MIN_BUDGET_SHARES: u64 = 16;

/// Does a run with a work directory and this budget (None: unlimited)
/// write the shards of `compress_level` (None: raw) in the background,
/// and with how much memory?
pub fn writes_in_background(budget_bytes: Option<u64>, compress_level: Option<i32>) -> Option<u64> {
    let bytes = background_writer_bytes(compress_level)?;
    budget_bytes.is_none_or(|b| b >= BACKGROUND_MIN_BUDGET_SHARES * bytes).then_some(bytes)
}

/// How a material's shard came to be in the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// Written from the finished values.
    Written,
    /// Kept from the interrupted run that `--resume` continues, every
    /// block read back and checked.
    Kept,
    /// Written again: the interrupted run's shard failed its check (why).
    Replaced(String),
}

/// Checks the shards `out` adopted from an interrupted run against `spec`
/// and discards those that do not fit it (a raw shard where compressed
/// ones are written, another zstd level, other rules or size, a damaged
/// header): they are written anew, their files removed only then
/// ([`OutputDir::discard_adopted`]), so that a run refused for other
/// arguments destroys nothing. Returns the names discarded, each with what
/// did not fit. Reads the headers only; the blocks of those kept are
/// checked when their statistics are read back ([`Published::Kept`]).
pub fn check_adopted(out: &mut OutputDir, spec: &ShardSpec) -> Vec<(String, String)> {
    let mut discarded = Vec::new();
    for name in out.adopted().to_vec() {
        if let Some(misfit) = misfit(out, &name, spec) {
            out.discard_adopted(&name);
            discarded.push((name, misfit));
        }
    }
    discarded
}

/// What makes the shard file `name` in `out` unfit for a table of `spec`,
/// if anything.
fn misfit(out: &OutputDir, name: &str, spec: &ShardSpec) -> Option<String> {
    let material = store::material_of_name(name)?;
    if name != ShardWriter::name(material, spec) {
        let kind = if spec.compress.is_some() { "compressed" } else { "raw" };
        return Some(format!("this run writes {kind} shards"));
    }
    // The width of the values is not known before they are solved; the
    // shard's is checked against them when it is read back (`check_kept`).
    let expected = match ShardHeader::for_material(&spec.rules, spec.max_per_side, material, ValueWidth::Byte) {
        Ok(header) => header,
        Err(e) => return Some(e.to_string()),
    };
    let shard = match ShardFile::open(&out.path_for(name)) {
        Ok(shard) => shard,
        // The caller names the shard; the path would say it twice.
        Err(StoreError::Format { cause, .. }) => return Some(cause.to_string()),
        Err(e) => return Some(e.to_string()),
    };
    // Raw shards hold block checksums, compressed ones none.
    let found = ShardHeader { block_crcs: Vec::new(), width: ValueWidth::Byte, ..shard.header().clone() };
    let expected = ShardHeader { block_crcs: Vec::new(), ..expected };
    if found != expected {
        return Some("its header is another table's (rules, cards or size)".to_string());
    }
    match (spec.compress, shard.storage()) {
        (None, Storage::Raw { .. }) => None,
        (Some((level, _)), Storage::Compressed(h)) if h.content != Content::Values || h.packing != Packing::Dense => {
            Some(format!("it is not a shard of values as level {level} writes them"))
        }
        (Some((level, _)), Storage::Compressed(h)) if h.level != level => {
            Some(format!("it was compressed at level {}, this run compresses at {level}", h.level))
        }
        (Some(_), Storage::Compressed(_)) => None,
        _ => Some("its contents are not of the kind its name says".to_string()),
    }
}

/// A finished material's values as a shard writer takes them: a
/// [`FinishedMaterial`] of the solver, or a [`SolvedMaterial`] in memory.
pub trait MaterialValues {
    fn material(&self) -> Material;
    /// Bytes per state.
    fn width(&self) -> ValueWidth;
    /// Hands the values, in layout order, to `sink` in chunks of at most
    /// about `batch_bytes` (more if one group needs it), each of whole
    /// states (`FinishedMaterial::for_each_chunk`).
    fn for_each_chunk<E: From<SolveError>>(
        &self,
        batch_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E>;
    /// Hands the values, in layout order, to `sink` in pieces of exactly
    /// `piece_bytes` (an even number), the last one the rest
    /// (`FinishedMaterial::for_each_piece`).
    fn for_each_piece<E: From<SolveError>>(
        &self,
        piece_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E>;
}

impl MaterialValues for FinishedMaterial {
    fn material(&self) -> Material {
        FinishedMaterial::material(self)
    }

    fn width(&self) -> ValueWidth {
        FinishedMaterial::width(self)
    }

    fn for_each_chunk<E: From<SolveError>>(
        &self,
        batch_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        FinishedMaterial::for_each_chunk(self, batch_bytes, sink)
    }

    fn for_each_piece<E: From<SolveError>>(
        &self,
        piece_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        FinishedMaterial::for_each_piece(self, piece_bytes, sink)
    }
}

impl MaterialValues for SolvedMaterial {
    fn material(&self) -> Material {
        self.index.material
    }

    fn width(&self) -> ValueWidth {
        self.width
    }

    fn for_each_chunk<E: From<SolveError>>(
        &self,
        batch_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        // Whole layouts, so whole words.
        let layout_bytes = CARD_STATES * self.width.bytes();
        let chunk = (batch_bytes - batch_bytes % layout_bytes).max(layout_bytes);
        self.values.chunks(chunk).try_for_each(sink)
    }

    fn for_each_piece<E: From<SolveError>>(
        &self,
        piece_bytes: usize,
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        assert!(piece_bytes > 0, "pieces hold bytes");
        self.values.chunks(piece_bytes).try_for_each(sink)
    }
}

/// Whether `out` kept `material`'s shard from an interrupted run.
fn is_kept(material: Material, out: &OutputDir, spec: &ShardSpec) -> bool {
    out.adopted().iter().any(|name| *name == ShardWriter::name(material, spec))
}

/// The statistics of the shard `out` kept for `material`, read back from
/// its file a block at a time per thread: every block is checked as `onitb
/// verify` checks it, and the recomputable values of a compressed shard
/// are recomputed, so the statistics are those of the bytes published.
/// Stops with [`PublishError::Stopped`] once `stop` is set. A shard whose
/// values are not `width` wide fails.
fn read_back_kept(path: &Path, spec: &ShardSpec, width: ValueWidth, stop: &AtomicBool) -> Result<Stats, PublishError> {
    let shard = ShardFile::open(path)?;
    let found = shard.header().width;
    if found != width {
        return Err(PublishError::OtherWidth { found: found.bytes(), expected: width.bytes() });
    }
    (0..shard.block_count())
        .into_par_iter()
        .map(|block| {
            if stop.load(Ordering::Relaxed) {
                return Err(PublishError::Stopped);
            }
            let values = match spec.compress {
                Some((_, context)) => shard.read_values(block, context)?,
                None => shard.read_block(block)?,
            };
            // Blocks hold whole words: BLOCK_BYTES is even.
            Ok(Stats::of_width(width, &values))
        })
        .try_reduce(Stats::default, |a, b| Ok(Stats::merge(a, b)))
}

/// If `out` kept `finished`'s shard, reads it back ([`read_back_kept`]):
/// Some(Ok(statistics)) if it passed, Some(Err(why)) if it failed, and
/// then it is removed, for the caller to write anew. None if none was
/// kept. [`PublishError::Stopped`] passes through.
fn check_kept(
    finished: &impl MaterialValues,
    out: &OutputDir,
    spec: &ShardSpec,
    stop: &AtomicBool,
) -> Result<Option<Result<Stats, String>>, PublishError> {
    let material = finished.material();
    // The interrupted run's shards of this material that did not fit
    // (`check_adopted`) go now, under either name (a raw one where this
    // run compresses, or the other way round), not when the table is
    // published: beside the work directory they may hold the room this
    // run's shards need (28 GB of raw shards of words at 8 men in session
    // 66, resumed with compressed shards).
    for name in [store::shard_name(material), store::compressed_shard_name(material)] {
        out.clear_discarded(&name)?;
    }
    if !is_kept(material, out, spec) {
        return Ok(None);
    }
    let path = ShardWriter::path(material, out, spec);
    match read_back_kept(&path, spec, finished.width(), stop) {
        Ok(stats) => Ok(Some(Ok(stats))),
        Err(PublishError::Stopped) => Err(PublishError::Stopped),
        Err(damaged) => match std::fs::remove_file(&path) {
            Err(cause) if cause.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::Io { action: "remove the damaged shard", path, cause }.into())
            }
            _ => Ok(Some(Err(damaged.to_string()))),
        },
    }
}

/// Writes `finished`'s shard into `out` on the rayon workers, unpacking
/// and compressing in parallel, or keeps the one `out` adopted; returns
/// its statistics. With `batch_bytes`, at most that much of unpacked
/// values and as much of blocks waiting to be compressed; without, the
/// defaults (64 MiB unpacked, a few blocks per worker).
pub fn write_shard(
    finished: &impl MaterialValues,
    out: &OutputDir,
    spec: &ShardSpec,
    batch_bytes: Option<usize>,
) -> Result<(Stats, Published), PublishError> {
    let published = match check_kept(finished, out, spec, &AtomicBool::new(false))? {
        Some(Ok(stats)) => return Ok((stats, Published::Kept)),
        Some(Err(why)) => Published::Replaced(why),
        None => Published::Written,
    };
    let batch = batch_bytes.unwrap_or(solver::UNPACK_BATCH_BYTES_DEFAULT);
    let batch_blocks = batch_bytes.map(|b| b / BLOCK_BYTES as usize);
    let mut writer = ShardWriter::create(finished, out, spec, batch_blocks)?;
    let mut stats = Stats::default();
    // Chunks are whole groups of layouts: whole words.
    finished.for_each_chunk(batch, |chunk| {
        stats = Stats::merge(stats, Stats::of_width(finished.width(), chunk));
        writer.write_values(chunk)
    })?;
    writer.finish()?;
    Ok((stats, published))
}

/// [`write_shard`] a block at a time on the calling thread (the pool it
/// runs in has one), holding one block of values: the background writer's
/// way. Stops with [`PublishError::Stopped`] once `stop` is set. A shard
/// it created but did not finish (stopped, or an error) is not there (its
/// writer removes it when dropped), for the caller to create anew; one it
/// could not create is left alone (it may be someone else's).
fn write_shard_by_blocks(
    finished: &impl MaterialValues,
    out: &OutputDir,
    spec: &ShardSpec,
    stop: &AtomicBool,
) -> Result<(Stats, Published), PublishError> {
    let published = match check_kept(finished, out, spec, stop)? {
        Some(Ok(stats)) => return Ok((stats, Published::Kept)),
        Some(Err(why)) => Published::Replaced(why),
        None => Published::Written,
    };
    let mut writer = ShardWriter::create(finished, out, spec, Some(1))?;
    let mut stats = Stats::default();
    // Pieces of a block are the shard's blocks: the compressed writer
    // takes each where it lies, without copying it. Blocks hold whole
    // words: BLOCK_BYTES is even.
    finished.for_each_piece(BLOCK_BYTES as usize, |piece| {
        if stop.load(Ordering::Relaxed) {
            return Err(PublishError::Stopped);
        }
        stats = Stats::merge(stats, Stats::of_width(finished.width(), piece));
        writer.write_values(piece)
    })?;
    writer.finish()?;
    Ok((stats, published))
}

/// [`write_shard_by_blocks`], or None if `stop` was set before the shard
/// was whole (and it was removed).
fn write_shard_unless_stopped(
    finished: &impl MaterialValues,
    out: &OutputDir,
    spec: &ShardSpec,
    stop: &AtomicBool,
) -> Result<Option<(Stats, Published)>, PublishError> {
    match write_shard_by_blocks(finished, out, spec, stop) {
        Ok(done) => Ok(Some(done)),
        Err(PublishError::Stopped) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A shard being written.
enum ShardWriter<'c> {
    Raw(RawShardWriter),
    Compressed(CompressedShardWriter<'c>),
}

impl<'c> ShardWriter<'c> {
    /// The file name of `material`'s shard.
    fn name(material: Material, spec: &ShardSpec) -> String {
        match spec.compress {
            Some(_) => store::compressed_shard_name(material),
            None => store::shard_name(material),
        }
    }

    /// Where `material`'s shard goes in `out`.
    fn path(material: Material, out: &OutputDir, spec: &ShardSpec) -> PathBuf {
        out.path_for(&ShardWriter::name(material, spec))
    }

    /// Creates `finished`'s shard in `out`, of its values' width; a
    /// compressed one compresses `batch_blocks` blocks at a time (at least
    /// one; None: its default).
    fn create(
        finished: &impl MaterialValues,
        out: &OutputDir,
        spec: &ShardSpec<'c>,
        batch_blocks: Option<usize>,
    ) -> Result<ShardWriter<'c>, StoreError> {
        let (material, width) = (finished.material(), finished.width());
        Ok(match spec.compress {
            Some((level, context)) => {
                let path = ShardWriter::path(material, out, spec);
                let header = ShardHeader::for_material(&spec.rules, spec.max_per_side, material, width)
                    .map_err(|cause| StoreError::Format { path: path.clone(), cause })?;
                // Compressed frames carry their own checksums.
                let header = ShardHeader { block_crcs: Vec::new(), ..header };
                let writer = CompressedShardWriter::create(&path, header, context, level, Content::Values)?;
                ShardWriter::Compressed(match batch_blocks {
                    Some(blocks) => writer.batch_blocks(blocks),
                    None => writer,
                })
            }
            None => {
                let path = ShardWriter::path(material, out, spec);
                ShardWriter::Raw(RawShardWriter::create(&path, &spec.rules, spec.max_per_side, material, width)?)
            }
        })
    }

    fn write_values(&mut self, values: &[u8]) -> Result<(), PublishError> {
        match self {
            ShardWriter::Raw(w) => w.write_values(values),
            ShardWriter::Compressed(w) => w.write_values(values),
        }
        .map_err(PublishError::from)
    }

    fn finish(self) -> Result<(), StoreError> {
        match self {
            ShardWriter::Raw(w) => w.finish(),
            ShardWriter::Compressed(w) => w.finish().map(drop),
        }
    }
}

/// Writes shards beside a running solve: the solver's reports say which
/// materials are finished ([`BackgroundShards::observe`]), and one thread at
/// idle priority writes their shards in turn. When the solve ends,
/// [`BackgroundShards::finish`] stops it and says which shards it wrote
/// whole; the caller writes the others on all workers. An error does not
/// end the run: the writer reports it at once ([`Beside::Failed`]) and
/// stops, leaving that shard and the rest to the caller, which meets the
/// error again after the solve if it lasts (a full disk stops the solve
/// itself first). A shard it was
/// still writing is dropped (removed) rather than finished on one thread at
/// idle priority while the workers wait: at level 3 that is at most a few
/// seconds of its work, and at 8 men it has long been idle by then. The
/// last pair's materials are never queued: nothing is left to solve beside
/// them. Dropped unfinished (the solve failed), it stops the same way.
pub struct BackgroundShards<'scope> {
    shared: Arc<Shared>,
    /// Taken by `finish`.
    thread: Option<ScopedJoinHandle<'scope, Result<Written, PublishError>>>,
    /// Pairs the solve has still to finish, once it has said how many.
    pairs_left: Mutex<Option<usize>>,
}

/// The shards a background writer wrote whole or kept: each material's
/// statistics.
type Written = Vec<(Material, Stats)>;

/// What the background writer reports as it goes.
pub enum Beside<'a> {
    /// A material's shard is whole: written, or kept from the interrupted
    /// run.
    Done(Material, Published),
    /// A material's shard could not be written (nothing of it is left in
    /// the output): the writer has stopped.
    Failed(Material, &'a PublishError),
}

/// What the solve's thread and the writer share.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Set when the solve ends (or fails): the writer stops at its next block.
    stop: AtomicBool,
}

#[derive(Default)]
struct Queue {
    /// Finished materials not taken yet.
    waiting: VecDeque<Material>,
    /// Every material ever queued.
    queued: BTreeSet<Material>,
    /// No more are taken.
    closed: bool,
}

impl<'scope> BackgroundShards<'scope> {
    /// Starts the writer in `scope`: it writes the shards of materials
    /// finished in `work_dir` into `out`, and calls `report` after each.
    /// None if `spec` makes shards whose writer would hold more than
    /// [`background_writer_bytes`] allows for.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        work_dir: PathBuf,
        (out, spec): (&'scope OutputDir, ShardSpec<'scope>),
        report: &'scope (dyn Fn(Beside) + Sync),
    ) -> Option<BackgroundShards<'scope>> {
        background_writer_bytes(spec.compress.map(|c| c.0))?;
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = scope.spawn(move || {
            let shared = theirs;
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "onitb-shards".to_string())
                .start_handler(|_| lower_priority())
                .build()
                .map_err(|e| PublishError::Thread(e.to_string()))?;
            pool.install(|| {
                let mut done = Vec::new();
                while let Some(material) = shared.next() {
                    let written = FinishedMaterial::open(&work_dir, material)
                        .map_err(PublishError::from)
                        .and_then(|finished| write_shard_unless_stopped(&finished, out, &spec, &shared.stop));
                    match written {
                        Ok(Some((stats, how))) => {
                            done.push((material, stats));
                            report(Beside::Done(material, how));
                        }
                        Ok(None) => break,
                        Err(e) => {
                            report(Beside::Failed(material, &e));
                            break;
                        }
                    }
                }
                Ok(done)
            })
        });
        Some(BackgroundShards { shared, thread: Some(thread), pairs_left: Mutex::new(None) })
    }

    /// Takes note of a solver report: materials of a pair finished (or
    /// resumed) while pairs are left to solve are queued for writing.
    pub fn observe(&self, progress: &Progress) {
        let mut pairs_left = self.pairs_left.lock().expect("not poisoned");
        let materials = match progress {
            Progress::RunStarted { pairs, .. } => {
                *pairs_left = Some(pairs.len());
                return;
            }
            Progress::MaterialResumed { materials } => materials,
            Progress::MaterialDone { materials } => {
                *pairs_left = pairs_left.map(|n| n.saturating_sub(1));
                materials
            }
            _ => return,
        };
        if pairs_left.is_some_and(|n| n > 0) {
            let mut queue = self.shared.queue.lock().expect("not poisoned");
            for &m in materials {
                // A material that is its own mirror is named twice.
                if queue.queued.insert(m) {
                    queue.waiting.push_back(m);
                }
            }
            self.shared.wake.notify_one();
        }
    }

    /// Stops the writer (the solve is over) and waits for it; the shards
    /// it wrote whole, with their statistics. Every other material's shard
    /// is the caller's to write. Fails only if the writer's thread could
    /// not start.
    pub fn finish(mut self) -> Result<Written, PublishError> {
        self.stop();
        let thread = self.thread.take().expect("finished once");
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let mut queue = self.shared.queue.lock().expect("not poisoned");
        queue.closed = true;
        self.shared.wake.notify_one();
    }
}

impl Drop for BackgroundShards<'_> {
    fn drop(&mut self) {
        // Not finished: the solve failed, and the run ends without a table.
        if self.thread.is_some() {
            self.stop();
        }
    }
}

impl Shared {
    /// The next material to write, waiting for one; None once closed.
    fn next(&self) -> Option<Material> {
        let mut queue = self.queue.lock().expect("not poisoned");
        loop {
            if queue.closed {
                return None;
            }
            if let Some(m) = queue.waiting.pop_front() {
                return Some(m);
            }
            queue = self.wake.wait(queue).expect("not poisoned");
        }
    }
}

/// Puts the calling thread at idle priority (`SCHED_IDLE`: it runs only on
/// a core no other thread wants), or at nice 19 where that is refused.
/// Best effort: a writer at normal priority only takes more of the cores.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: both calls change the scheduling of the calling thread only
    // (id 0; Linux schedules threads, not processes) and read nothing but
    // the parameter block, which lives through the call.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{CardSet, NoMoveRule};
    use crate::solver::{PairPlan, SolveConfig};
    use crate::table::Table;
    use std::collections::BTreeMap;
    use std::sync::mpsc;
    use std::time::Duration;

    fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
            .collect();
        files.sort();
        files
    }

    /// A 2-men table solved with a work directory (the packed values the
    /// writer reads), the same table saved in one go, an output directory
    /// to fill, and the spec of its raw shards.
    fn solved_and_saved(tmp: &std::path::Path) -> (solver::Solved, Table, OutputDir, ShardSpec<'static>) {
        let rules = Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass };
        let config = SolveConfig { work_dir: Some(tmp.join("work")), ..SolveConfig::default() };
        let solved = solver::solve_with(&rules, 2, &config, &|_| {}).unwrap();
        let table = Table::generate(&rules, 2).unwrap();
        store::save(&table, &tmp.join("saved")).unwrap();
        let spec = ShardSpec { rules, max_per_side: 2, compress: None };
        (solved, table, OutputDir::prepare(&tmp.join("out")).unwrap(), spec)
    }

    /// The solver's reports for 2 men: the pairs planned, then each done.
    fn reports() -> Vec<Progress> {
        let pairs = [Material::new(1, 1), Material::new(1, 2), Material::new(2, 2)];
        let plan = |m: Material| PairPlan { materials: [m, m.flipped()], layouts: 0, streamed: false };
        let done = pairs.iter().map(|&m| Progress::MaterialDone { materials: [m, m.flipped()] });
        std::iter::once(Progress::RunStarted { pairs: pairs.iter().map(|&m| plan(m)).collect(), earlier: Vec::new() })
            .chain(done)
            .collect()
    }

    /// Shards written beside the solve (the materials of every pair but the
    /// last, as the solver reports them finished) and after it (the last
    /// pair's) are those of a table saved in one go, with its statistics.
    #[test]
    fn shards_written_beside_the_solve_are_the_saved_tables() {
        let tmp = tempfile::tempdir().unwrap();
        let (solved, table, out, spec) = solved_and_saved(tmp.path());
        let (sender, written) = mpsc::channel();
        let on_written = move |beside: Beside| match beside {
            Beside::Done(m, how) => sender.send((m, how)).unwrap(),
            Beside::Failed(m, e) => panic!("{m}: {e}"),
        };
        let mut stats: BTreeMap<Material, Stats> = std::thread::scope(|scope| {
            let work = tmp.path().join("work");
            let writer = BackgroundShards::start(scope, work, (&out, spec), &on_written).unwrap();
            for report in reports() {
                writer.observe(&report);
                // Each pair's shards written before the next pair ends.
                if let Progress::MaterialDone { materials } = report
                    && materials[0] != Material::new(2, 2)
                {
                    for _ in 0..if materials[0] == materials[1] { 1 } else { 2 } {
                        let (_, how) = written.recv_timeout(Duration::from_secs(60)).expect("written beside the solve");
                        assert_eq!(how, Published::Written);
                    }
                }
            }
            let mut stats: BTreeMap<Material, Stats> = writer.finish().unwrap().into_iter().collect();
            let beside = [Material::new(1, 1), Material::new(1, 2), Material::new(2, 1)];
            assert_eq!(stats.keys().copied().collect::<Vec<_>>(), beside, "all but the last pair's");
            let rest: Vec<&FinishedMaterial> =
                solved.materials.iter().filter(|f| !stats.contains_key(&f.material())).collect();
            for finished in rest {
                let (written, how) = write_shard(finished, &out, &spec, Some(8 << 20)).unwrap();
                assert_eq!(how, Published::Written);
                stats.insert(finished.material(), written);
            }
            stats
        });
        out.finish().unwrap();
        assert_eq!(files(&tmp.path().join("out")), files(&tmp.path().join("saved")));
        for solved in table.materials() {
            let stats = stats.remove(&solved.index.material).expect("every material's statistics");
            assert_eq!(stats, Stats::of_values(&solved.values), "{}", solved.index.material);
        }
        assert!(stats.is_empty());
    }

    /// However far the writer got when the solve ends (a shard not taken,
    /// stopped and removed, or whole), exactly the shards it reports whole
    /// are there, and the caller can write the others.
    #[test]
    fn a_writer_stopped_at_any_point_leaves_whole_shards_only() {
        let tmp = tempfile::tempdir().unwrap();
        let (solved, _, out, spec) = solved_and_saved(tmp.path());
        for wait_micros in [0, 50, 200, 1000, 5000] {
            for finished in &solved.materials {
                let _ = std::fs::remove_file(ShardWriter::path(finished.material(), &out, &spec));
            }
            std::thread::scope(|scope| {
                let work = tmp.path().join("work");
                let writer = BackgroundShards::start(scope, work, (&out, spec), &|_| {}).unwrap();
                for report in reports().iter().take(3) {
                    writer.observe(report);
                }
                std::thread::sleep(Duration::from_micros(wait_micros));
                let whole: BTreeSet<Material> = writer.finish().unwrap().into_iter().map(|(m, _)| m).collect();
                for finished in &solved.materials {
                    let m = finished.material();
                    let path = ShardWriter::path(m, &out, &spec);
                    assert_eq!(path.exists(), whole.contains(&m), "{m} after {wait_micros} µs");
                    if !whole.contains(&m) {
                        write_shard(finished, &out, &spec, None).unwrap();
                    }
                }
            });
        }
    }

    /// A shard stopped before it is whole is removed, and can be written
    /// anew; one not stopped is written whole.
    #[test]
    fn a_stopped_shard_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let (solved, _, out, spec) = solved_and_saved(tmp.path());
        let finished = &solved.materials[0];
        let path = ShardWriter::path(finished.material(), &out, &spec);
        let stopped = write_shard_unless_stopped(finished, &out, &spec, &AtomicBool::new(true)).unwrap();
        assert!(stopped.is_none() && !path.exists());
        let whole = write_shard_unless_stopped(finished, &out, &spec, &AtomicBool::new(false)).unwrap();
        assert!(whole.is_some() && path.exists());
    }

    /// Starts a writer, tells it the 2-men pairs but the last are done,
    /// and finishes it once it has reported something: what it reported
    /// (the material and whether it was written) and what it wrote whole.
    fn first_report(tmp: &std::path::Path, out: &OutputDir, spec: ShardSpec) -> ((Material, bool), Written) {
        let (sender, reported) = mpsc::channel();
        let on_report = move |beside: Beside| {
            let _ = sender.send(match beside {
                Beside::Done(m, _) => (m, true),
                Beside::Failed(m, _) => (m, false),
            });
        };
        std::thread::scope(|scope| {
            let writer = BackgroundShards::start(scope, tmp.join("work"), (out, spec), &on_report).unwrap();
            for report in reports().iter().take(3) {
                writer.observe(report);
            }
            let first = reported.recv_timeout(Duration::from_secs(60)).expect("a report");
            (first, writer.finish().expect("a failed shard is reported, not returned"))
        })
    }

    /// A shard the writer cannot create (here a file of that name is
    /// there already) is reported as failed and left as it was; the writer
    /// stops, and the run goes on.
    #[test]
    fn a_shard_that_cannot_be_created_is_reported_and_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let (_solved, _, out, spec) = solved_and_saved(tmp.path());
        let first = Material::new(1, 1);
        let theirs = ShardWriter::path(first, &out, &spec);
        std::fs::write(&theirs, b"not ours").unwrap();
        let (reported, whole) = first_report(tmp.path(), &out, spec);
        assert_eq!(reported, (first, false));
        assert!(whole.is_empty(), "the writer stops at its first failure");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"not ours");
    }

    /// A shard whose values turn out damaged half-way is reported as
    /// failed and removed, and nothing else is written beside the solve.
    #[test]
    fn a_shard_that_fails_half_way_is_reported_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let (solved, _, out, spec) = solved_and_saved(tmp.path());
        let first = Material::new(1, 1);
        // The first group's frame, whose content checksum is checked as
        // it is read (the frame table, checked on opening, is intact).
        let packed = tmp.path().join("work").join(format!("{first}.packed"));
        let mut bytes = std::fs::read(&packed).unwrap();
        bytes[4..12].iter_mut().for_each(|b| *b ^= 0x5a);
        std::fs::write(&packed, bytes).unwrap();
        let (reported, whole) = first_report(tmp.path(), &out, spec);
        assert_eq!(reported, (first, false));
        assert!(whole.is_empty());
        for finished in &solved.materials {
            assert!(!ShardWriter::path(finished.material(), &out, &spec).exists(), "{}", finished.material());
        }
    }

    /// A resumed run keeps the adopted shards that fit its table (the
    /// same file, not written again, its statistics counted) and writes
    /// the others again: another level, raw where it writes compressed, a
    /// damaged header. The table comes out as one written in one go.
    #[test]
    fn adopted_shards_that_fit_are_kept_and_the_others_written_again() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let (solved, table, _, raw) = solved_and_saved(tmp.path());
        let context = shard::Context::new(raw.rules, raw.max_per_side);
        let level = |level| ShardSpec { compress: Some((level, &context)), ..raw };
        let material = |m: Material| solved.materials.iter().find(|f| f.material() == m).unwrap();
        let [m11, m12, m21, m22] = [(1, 1), (1, 2), (2, 1), (2, 2)].map(|(p, q)| Material::new(p, q));

        // The interrupted run's output, left by a process that is gone.
        let target = tmp.path().join("resumed");
        let interrupted = OutputDir::prepare_resumable(&target, false).unwrap();
        write_shard(material(m11), &interrupted, &level(1), None).unwrap();
        for m in [m12, m22] {
            write_shard(material(m), &interrupted, &level(3), None).unwrap();
            write_shard(material(m), &interrupted, &raw, None).unwrap();
        }
        write_shard(material(m21), &interrupted, &level(3), None).unwrap();
        // 1v2's header damaged, 2v1's last frame.
        for (m, at) in [(m12, Some(10)), (m21, None)] {
            let damaged = interrupted.path_for(&store::compressed_shard_name(m));
            let mut bytes = std::fs::read(&damaged).unwrap();
            let at = at.unwrap_or(bytes.len() - 1);
            bytes[at] ^= 0x40;
            std::fs::write(&damaged, bytes).unwrap();
        }
        let partial = interrupted.partial().to_path_buf();
        drop(interrupted);
        std::fs::rename(&partial, tmp.path().join(format!(".resumed.partial-{}", u32::MAX))).unwrap();

        let mut out = OutputDir::prepare_resumable(&target, true).unwrap();
        assert_eq!(out.adopted(), ["1v1.onitbz", "1v2.onitb", "1v2.onitbz", "2v1.onitbz", "2v2.onitb", "2v2.onitbz"]);
        let kept_inode = std::fs::metadata(out.path_for("2v2.onitbz")).unwrap().ino();
        let spec = level(3);
        let discarded = check_adopted(&mut out, &spec);
        let removed: Vec<&str> = discarded.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(removed, ["1v1.onitbz", "1v2.onitb", "1v2.onitbz", "2v2.onitb"]);
        // Each says why; the caller names the shard, so the reason does
        // not name its file again.
        let why: Vec<&str> = discarded.iter().map(|(_, why)| why.as_str()).collect();
        assert!(why[0].contains("compressed at level 1"), "{}", why[0]);
        assert!(why[1].contains("writes compressed shards"), "{}", why[1]);
        assert!(why[2].contains("scheme"), "byte 10 is the index scheme's: {}", why[2]);
        assert!(why.iter().all(|why| !why.contains(".onitb")), "{why:?}");
        assert_eq!(out.adopted(), ["2v1.onitbz", "2v2.onitbz"]);
        for finished in &solved.materials {
            let (stats, how) = write_shard(finished, &out, &spec, None).unwrap();
            let m = finished.material();
            // A raw shard discarded goes with its material's turn, the
            // compressed one kept (2v2) or written (1v2).
            assert!(!out.path_for(&store::shard_name(m)).exists(), "{m}");
            match how {
                Published::Kept => assert_eq!(m, m22),
                // Its header fits; its blocks are checked as they are read back.
                Published::Replaced(why) => assert!(m == m21 && why.contains("block"), "{m}: {why}"),
                Published::Written => assert!(m == m11 || m == m12, "{m}"),
            }
            let values = &table.materials().iter().find(|s| s.index.material == m).unwrap().values;
            assert_eq!(stats, Stats::of_values(values), "{m}");
        }
        assert_eq!(std::fs::metadata(out.path_for("2v2.onitbz")).unwrap().ino(), kept_inode, "not written again");
        out.finish().unwrap();

        let fresh = OutputDir::prepare(&tmp.path().join("fresh")).unwrap();
        for finished in &solved.materials {
            write_shard(finished, &fresh, &spec, None).unwrap();
        }
        fresh.finish().unwrap();
        assert_eq!(files(&target), files(&tmp.path().join("fresh")));
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// Materials of value words (a 4-men table solved in bytes, widened, as
    /// the solver finishes a table too deep for bytes): their raw shards
    /// are those `store` saves (format version 2), with the byte table's
    /// statistics, written at once or block by block; where compressed
    /// shards are asked for, theirs are compressed shards of words, beside
    /// the byte materials', and the table reads as one.
    #[test]
    fn materials_of_words_are_published_in_their_width_raw_or_compressed() {
        let tmp = tempfile::tempdir().unwrap();
        let rules = Rules::default();
        let table = Table::generate(&rules, 2).unwrap();
        let wide = table.widened();
        store::save(&wide, &tmp.path().join("saved")).unwrap();
        let raw = ShardSpec { rules, max_per_side: 2, compress: None };
        let out = OutputDir::prepare(&tmp.path().join("out")).unwrap();
        for (solved, bytes) in wide.materials().iter().zip(table.materials()) {
            let (stats, how) = if solved.index.material == Material::new(2, 2) {
                write_shard_unless_stopped(solved, &out, &raw, &AtomicBool::new(false)).unwrap().unwrap()
            } else {
                write_shard(solved, &out, &raw, Some(1 << 20)).unwrap()
            };
            assert_eq!((stats, how), (Stats::of_values(&bytes.values), Published::Written));
        }
        out.finish().unwrap();
        assert_eq!(files(&tmp.path().join("out")), files(&tmp.path().join("saved")));

        let context = shard::Context::new(rules, 2);
        let compressed = ShardSpec { compress: Some((1, &context)), ..raw };
        let out = OutputDir::prepare(&tmp.path().join("z")).unwrap();
        for (k, (bytes, words)) in table.materials().iter().zip(wide.materials()).enumerate() {
            // 1v1 and 2v2 in words, 1v2 and 2v1 in bytes.
            let solved = if k == 0 || k == 3 { words } else { bytes };
            let (stats, _) = if k == 3 {
                write_shard_unless_stopped(solved, &out, &compressed, &AtomicBool::new(false)).unwrap().unwrap()
            } else {
                write_shard(solved, &out, &compressed, None).unwrap()
            };
            assert_eq!(stats, Stats::of_values(&bytes.values));
        }
        out.finish().unwrap();
        assert_eq!(names(&tmp.path().join("z")), ["1v1.onitbz", "1v2.onitbz", "2v1.onitbz", "2v2.onitbz"]);
        let files = shard::TableFiles::open(&tmp.path().join("z")).unwrap();
        let widths: Vec<ValueWidth> = files.shards.iter().map(|s| s.header().width).collect();
        assert_eq!(widths, [ValueWidth::Word, ValueWidth::Byte, ValueWidth::Byte, ValueWidth::Word]);
        assert_eq!(files.stats().unwrap(), table.stats());
        assert!(files.load().unwrap().materials().iter().zip(table.materials()).all(|(got, bytes)| {
            let words = got.width == ValueWidth::Word;
            got.values == if words { bytes.widened().values } else { bytes.values.clone() }
        }));
    }

    /// A shard adopted from an interrupted run whose values are not as wide
    /// as the finished material's is written again.
    #[test]
    fn a_kept_shard_of_another_width_is_written_again() {
        let tmp = tempfile::tempdir().unwrap();
        let rules = Rules::default();
        let table = Table::generate(&rules, 1).unwrap();
        let spec = ShardSpec { rules, max_per_side: 1, compress: None };
        let target = tmp.path().join("t");
        let interrupted = OutputDir::prepare_resumable(&target, false).unwrap();
        write_shard(&table.materials()[0], &interrupted, &spec, None).unwrap();
        let partial = interrupted.partial().to_path_buf();
        drop(interrupted);
        std::fs::rename(&partial, tmp.path().join(format!(".t.partial-{}", u32::MAX))).unwrap();
        let mut out = OutputDir::prepare_resumable(&target, true).unwrap();
        assert!(check_adopted(&mut out, &spec).is_empty(), "the width is not known before the solve");
        let wide = table.materials()[0].widened();
        let (stats, how) = write_shard(&wide, &out, &spec, None).unwrap();
        assert_eq!(stats, Stats::of_values(&table.materials()[0].values));
        let Published::Replaced(why) = how else { panic!("{how:?}") };
        assert!(why.contains("1 byte(s) per state, the finished material's 2"), "{why}");
        out.finish().unwrap();
        store::save(&table.widened(), &tmp.path().join("saved")).unwrap();
        assert_eq!(files(&target), files(&tmp.path().join("saved")));
    }

    /// A writer dropped unfinished (the solve failed) stops, and the scope
    /// that ran it ends.
    #[test]
    fn a_writer_dropped_unfinished_stops() {
        let tmp = tempfile::tempdir().unwrap();
        let (_solved, _, out, spec) = solved_and_saved(tmp.path());
        std::thread::scope(|scope| {
            let writer = BackgroundShards::start(scope, tmp.path().join("work"), (&out, spec), &|_| {}).unwrap();
            let m = Material::new(2, 2);
            let plan = PairPlan { materials: [m, m], layouts: 0, streamed: false };
            writer.observe(&Progress::RunStarted { pairs: vec![plan, plan], earlier: Vec::new() });
            writer.observe(&Progress::MaterialResumed { materials: [m, m] });
            drop(writer);
        });
    }
}
