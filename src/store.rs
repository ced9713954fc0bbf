//! Tables on disk: a directory holding one raw shard per material.
//!
//! Owns the directory layout, all-or-nothing saving and checked loading; the
//! bytes inside a shard are `format`'s business (value bytes or, for tables
//! too deep for bytes, value words: format version 2). Knows nothing of solving
//! and never changes the index or the value encoding.
//!
//! Saving writes every shard into a hidden sibling `.<name>.partial-<pid>`,
//! syncs it, then renames it into place, so a table directory is either
//! complete or absent. [`OutputDir::prepare`] does every check that can fail
//! up front, so that a long solve is not wasted on a bad path.
//!
//! A run that can be resumed ([`OutputDir::prepare_resumable`]) keeps its
//! partial directory when it fails, and `--resume` adopts the one a killed
//! or failed run left: the shards in it are whole (a shard has its name
//! only once whole and synced, `blockio::DirectAppender`), and the
//! publishing code keeps those that fit the table and pass a read-back
//! check instead of writing them again, which at 8 men was minutes of
//! compression.

use crate::blockio::DirectAppender;
use crate::format::{BLOCK_BYTES, FormatError, ShardHeader, header_len};
use crate::index::Material;
use crate::rules::{MAX_PIECES_PER_SIDE, Rules};
use crate::table::{SolvedMaterial, Table};
use crate::value::ValueWidth;

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

/// File name extension of a raw shard.
pub const SHARD_EXTENSION: &str = "onitb";
/// File name extension of a compressed shard.
pub const COMPRESSED_EXTENSION: &str = "onitbz";

#[derive(Debug, Error)]
pub enum StoreError {
    // The causes are named `cause`, not `source`, so that they are shown
    // once: in this message, not again as a chained source.
    #[error("cannot {action} '{}': {cause}", path.display())]
    Io { action: &'static str, path: PathBuf, cause: io::Error },
    #[error("'{}': {cause}", path.display())]
    Format { path: PathBuf, cause: FormatError },
    #[error("'{}' already holds a table; choose another output directory or remove it", .0.display())]
    HoldsTable(PathBuf),
    #[error("'{}' is a directory that is not empty; the output directory must be new or empty", .0.display())]
    NotEmpty(PathBuf),
    #[error("'{}' exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("'{}' does not name a directory to create", .0.display())]
    BadName(PathBuf),
    #[error("'{}' is the current directory, which cannot be replaced; name a new directory", .0.display())]
    CurrentDirectory(PathBuf),
    #[error("'{}' holds no table (no .{SHARD_EXTENSION} shards)", .0.display())]
    NoTable(PathBuf),
    #[error("'{}' is not a shard name (expected <mover>v<opponent>.{SHARD_EXTENSION})", .0.display())]
    ShardName(PathBuf),
    #[error("'{}' holds material {found}, not the one its name says", path.display())]
    MaterialMismatch { path: PathBuf, found: Material },
    #[error("'{}' and '{}' disagree on the {what}: they belong to different tables", path.display(), other.display())]
    Mismatch { path: PathBuf, other: PathBuf, what: &'static str },
    #[error("'{}' and '{}' hold the same material", path.display(), other.display())]
    Duplicate { path: PathBuf, other: PathBuf },
    #[error("shard '{}' of this {men}-men table is missing", .path.display())]
    MissingShard { path: PathBuf, men: usize },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |cause| StoreError::Io { action, path, cause }
}

/// The file name of a material's shard, e.g. `2v1.onitb`.
pub fn shard_name(material: Material) -> String {
    format!("{material}.{SHARD_EXTENSION}")
}

/// The file name of a material's compressed shard, e.g. `2v1.onitbz`.
pub fn compressed_shard_name(material: Material) -> String {
    format!("{material}.{COMPRESSED_EXTENSION}")
}

/// Whether a file name has a shard extension (raw or compressed).
pub fn is_shard_name(name: &str) -> bool {
    [SHARD_EXTENSION, COMPRESSED_EXTENSION].iter().any(|ext| name.strip_suffix(ext).is_some_and(|s| s.ends_with('.')))
}

/// The material a shard file name (raw or compressed) stands for (`None`
/// if it is not one).
pub fn material_of_name(name: &str) -> Option<Material> {
    let stem =
        name.strip_suffix(SHARD_EXTENSION).or_else(|| name.strip_suffix(COMPRESSED_EXTENSION))?.strip_suffix('.')?;
    let (mover, opponent) = stem.split_once('v')?;
    let piece_count = |s: &str| {
        (s.len() == 1).then(|| s.parse::<usize>().ok()).flatten().filter(|n| (1..=MAX_PIECES_PER_SIDE).contains(n))
    };
    Some(Material::new(piece_count(mover)?, piece_count(opponent)?))
}

/// Saves a table into `dir`, which must not exist or be empty.
pub fn save(table: &Table, dir: &Path) -> Result<(), StoreError> {
    OutputDir::prepare(dir)?.commit(table)
}

/// A table directory being written: a hidden partial directory that becomes
/// the real one on [`OutputDir::commit`], and is removed if dropped before
/// (unless the run can be resumed).
#[derive(Debug)]
pub struct OutputDir {
    target: PathBuf,
    partial: PathBuf,
    committed: bool,
    /// Left in place if dropped before committed, for `--resume`.
    resumable: bool,
    /// Shards that an adopted partial directory held (file names), but
    /// those discarded.
    adopted: Vec<String>,
    /// Adopted shards found not to fit this table: removed when this run
    /// writes their name or publishes the table, not before (a run that
    /// fails first, e.g. refused for other arguments, keeps them for a
    /// resume with the right ones). Behind a lock: writers beside the
    /// solve clear theirs through a shared reference.
    discarded: Mutex<Vec<String>>,
}

impl OutputDir {
    /// Checks that `dir` can receive a table and creates the partial
    /// directory beside it. Call this before solving.
    pub fn prepare(dir: &Path) -> Result<OutputDir, StoreError> {
        OutputDir::prepare_with(dir, false, false)
    }

    /// [`OutputDir::prepare`] for a run that can be resumed: if dropped
    /// before committed (the run failed), the partial directory stays for
    /// the resumed run. With `resume`, the partial directory that a run
    /// no longer alive left for this target (the newest, if several) is
    /// adopted with the shards in it, and everything else in it (shards
    /// unfinished, under hidden names) removed; the shards are the
    /// publisher's to check ([`OutputDir::adopted`]).
    pub fn prepare_resumable(dir: &Path, resume: bool) -> Result<OutputDir, StoreError> {
        OutputDir::prepare_with(dir, true, resume)
    }

    fn prepare_with(dir: &Path, resumable: bool, resume: bool) -> Result<OutputDir, StoreError> {
        let target = resolve_target(dir)?;
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            return Err(StoreError::BadName(dir.to_path_buf()));
        };
        let prefix = format!(".{}.partial-", name.to_string_lossy());
        let mut stale = stale_partials(parent, &prefix);
        let partial = parent.join(format!("{prefix}{}", std::process::id()));
        let mut adopted = Vec::new();
        match if resume { stale.pop() } else { None } {
            Some(left) => {
                fs::rename(&left, &partial).map_err(io_error("take over the unfinished output", &left))?;
                adopted = keep_whole_shards(&partial)?;
            }
            None => fs::create_dir(&partial).map_err(io_error("create a working directory", &partial))?,
        }
        // Best effort: failures leave them in place.
        for left in stale {
            let _ = fs::remove_dir_all(left);
        }
        Ok(OutputDir { target, partial, committed: false, resumable, adopted, discarded: Mutex::default() })
    }

    /// The shard file names the partial directory held when it was
    /// adopted from an interrupted run (sorted; none if not resumed).
    pub fn adopted(&self) -> &[String] {
        &self.adopted
    }

    /// Takes an adopted shard that does not belong in this table (the
    /// publisher checked it) off the adopted ones, to be written anew: its
    /// file goes when [`OutputDir::clear_discarded`] is called for its
    /// name or the table is published.
    pub fn discard_adopted(&mut self, name: &str) {
        if self.adopted.iter().any(|n| n == name) {
            self.adopted.retain(|n| n != name);
            self.discarded.get_mut().expect("not poisoned").push(name.to_string());
        }
    }

    /// Removes the file `name` if it is a discarded adopted shard (once):
    /// call it before writing a file of that name.
    pub fn clear_discarded(&self, name: &str) -> Result<(), StoreError> {
        let mut discarded = self.discarded.lock().expect("not poisoned");
        if !discarded.iter().any(|n| n == name) {
            return Ok(());
        }
        let path = self.path_for(name);
        match fs::remove_file(&path) {
            Err(cause) if cause.kind() != io::ErrorKind::NotFound => {
                Err(StoreError::Io { action: "remove the interrupted run's unfitting shard", path, cause })
            }
            _ => {
                discarded.retain(|n| n != name);
                Ok(())
            }
        }
    }

    /// The hidden directory the table is written in until it is complete.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// Where the table will be.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where a file named `name` goes while the directory is being written.
    pub fn path_for(&self, name: &str) -> PathBuf {
        self.partial.join(name)
    }

    /// Writes every shard, syncs, and moves the directory into place.
    pub fn commit(self, table: &Table) -> Result<(), StoreError> {
        for solved in table.materials() {
            write_shard(table, solved, &self.path_for(&shard_name(solved.index.material)))?;
        }
        self.finish()
    }

    /// Syncs the files written under [`OutputDir::path_for`] (each writer
    /// syncs its own file) and moves the directory into place.
    pub fn finish(mut self) -> Result<(), StoreError> {
        // Those this run did not write again.
        for name in self.discarded.get_mut().expect("not poisoned").clone() {
            self.clear_discarded(&name)?;
        }
        sync_dir(&self.partial)?;
        // The target may have changed during a long solve.
        check_target(&self.target)?;
        fs::rename(&self.partial, &self.target).map_err(io_error("move the table into place at", &self.target))?;
        self.committed = true;
        if let Some(parent) = self.target.parent() {
            sync_dir(parent)?;
        }
        Ok(())
    }
}

/// Partial directories of this target left by runs that ended without
/// committing (their process no longer exists), oldest first: to adopt or
/// to remove, so that they are not left behind.
fn stale_partials(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent) else { return Vec::new() };
    let mut stale = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            stale.push((modified, entry.path()));
        }
    }
    stale.sort();
    stale.into_iter().map(|(_, path)| path).collect()
}

/// Removes everything in an adopted partial directory but its shards
/// (whole, since a shard has its name only once whole); their names.
fn keep_whole_shards(partial: &Path) -> Result<Vec<String>, StoreError> {
    let mut kept = Vec::new();
    for entry in fs::read_dir(partial).map_err(io_error("read directory", partial))? {
        let entry = entry.map_err(io_error("read directory", partial))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && material_of_name(&name).is_some() {
            kept.push(name);
        } else {
            let path = entry.path();
            let removed = if is_file { fs::remove_file(&path) } else { fs::remove_dir_all(&path) };
            removed.map_err(io_error("remove an unfinished file in", &path))?;
        }
    }
    kept.sort();
    Ok(kept)
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.committed {
            // A resumable run's is kept for `--resume` if it holds anything.
            let _ = if self.resumable { fs::remove_dir(&self.partial) } else { fs::remove_dir_all(&self.partial) };
        }
    }
}

/// The absolute path a table will be renamed to; fails unless `dir` is
/// absent (with an existing parent directory) or an empty directory.
fn resolve_target(dir: &Path) -> Result<PathBuf, StoreError> {
    match fs::symlink_metadata(dir) {
        Ok(_) => {
            check_target(dir)?;
            let real = fs::canonicalize(dir).map_err(io_error("resolve", dir))?;
            let cwd = std::env::current_dir().and_then(fs::canonicalize).ok();
            if cwd.as_deref() == Some(real.as_path()) {
                return Err(StoreError::CurrentDirectory(dir.to_path_buf()));
            }
            Ok(real)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let name = dir.file_name().ok_or_else(|| StoreError::BadName(dir.to_path_buf()))?;
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let real_parent = fs::canonicalize(parent).map_err(io_error("create output directory", dir))?;
            if !real_parent.is_dir() {
                return Err(StoreError::NotADirectory(parent.to_path_buf()));
            }
            Ok(real_parent.join(name))
        }
        Err(e) => Err(io_error("create output directory", dir)(e)),
    }
}

/// `dir` may receive a table: it is absent or an empty directory.
fn check_target(dir: &Path) -> Result<(), StoreError> {
    if fs::symlink_metadata(dir).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Ok(());
    }
    if !fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(StoreError::NotADirectory(dir.to_path_buf()));
    }
    let mut any = false;
    for entry in fs::read_dir(dir).map_err(io_error("read directory", dir))? {
        let entry = entry.map_err(io_error("read directory", dir))?;
        if is_shard_name(&entry.file_name().to_string_lossy()) {
            return Err(StoreError::HoldsTable(dir.to_path_buf()));
        }
        any = true;
    }
    if any { Err(StoreError::NotEmpty(dir.to_path_buf())) } else { Ok(()) }
}

fn write_shard(table: &Table, solved: &SolvedMaterial, path: &Path) -> Result<(), StoreError> {
    let (rules, max_per_side, material) = (table.rules(), table.max_per_side(), solved.index.material);
    let mut writer = RawShardWriter::create(path, rules, max_per_side, material, solved.width)?;
    writer.write_values(&solved.values)?;
    writer.finish()
}

/// Refuses `adding` more value bytes after `written` of a value area of
/// `total` bytes: what a shard writer must not write past.
pub(crate) fn check_room(path: &Path, written: u64, adding: usize, total: u64) -> Result<(), StoreError> {
    if written + adding as u64 > total {
        let extra = written + adding as u64 - total;
        return Err(StoreError::Format { path: path.to_path_buf(), cause: FormatError::TrailingBytes { extra } });
    }
    Ok(())
}

/// Bytes a raw shard writer gathers before it writes them (with
/// O_DIRECT), few enough that a streamed run's budget does not notice them.
const STAGED_BYTES: usize = 1 << 20;

/// Writes one raw shard from value bytes that arrive in any chunks, without
/// holding the material in memory: block checksums are computed as the bytes
/// go by, and the header (which holds them) is written last, over a
/// zero-filled placeholder. A shard whose writer is dropped before
/// [`RawShardWriter::finish`] has an all-zero header or is short, which
/// readers refuse.
///
/// The file is written with O_DIRECT where the file system allows it
/// (`blockio::DirectAppender`, a buffer of [`STAGED_BYTES`] at a time):
/// through the page cache, copying the 6-men table's 1.1 GB cost 0.3 to 3 s
/// of system time, varying with what the page cache held
/// (docs/BENCHMARKS.md, session 44).
pub struct RawShardWriter {
    path: PathBuf,
    out: DirectAppender,
    header: ShardHeader,
    /// Value bytes taken so far.
    written: u64,
    /// Checksum of the current block's bytes so far.
    block_hasher: crc32fast::Hasher,
}

impl std::fmt::Debug for RawShardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawShardWriter").field("path", &self.path).field("written", &self.written).finish()
    }
}

impl RawShardWriter {
    /// Creates `path` (which must not exist) for the shard of `material` in a
    /// table of up to `max_per_side` pieces per side, whose values are
    /// `width` wide (words are written as their little-endian bytes).
    pub fn create(
        path: &Path,
        rules: &Rules,
        max_per_side: usize,
        material: Material,
        width: ValueWidth,
    ) -> Result<Self, StoreError> {
        let header = ShardHeader::for_material(rules, max_per_side, material, width)
            .map_err(|cause| StoreError::Format { path: path.to_path_buf(), cause })?;
        let header_bytes = header_len(header.block_count());
        let mut out =
            DirectAppender::create_new(path, STAGED_BYTES, header_bytes).map_err(io_error("create shard", path))?;
        out.append_zeros(header_bytes).map_err(io_error("write shard", path))?;
        Ok(RawShardWriter { path: path.to_path_buf(), out, header, written: 0, block_hasher: crc32fast::Hasher::new() })
    }

    /// The header as it will be written (block checksums so far).
    pub fn header(&self) -> &ShardHeader {
        &self.header
    }

    /// Appends the next value bytes (in layout order; any chunk size).
    pub fn write_values(&mut self, values: &[u8]) -> Result<(), StoreError> {
        let total = self.header.values_len();
        check_room(&self.path, self.written, values.len(), total)?;
        let mut rest = values;
        while !rest.is_empty() {
            let block_offset = self.written % BLOCK_BYTES as u64;
            let take = rest.len().min((BLOCK_BYTES as u64 - block_offset) as usize);
            self.block_hasher.update(&rest[..take]);
            self.written += take as u64;
            rest = &rest[take..];
            if self.written.is_multiple_of(BLOCK_BYTES as u64) || self.written == total {
                let block = ((self.written - 1) / BLOCK_BYTES as u64) as usize;
                let hasher = std::mem::take(&mut self.block_hasher);
                self.header.block_crcs[block] = hasher.finalize();
            }
        }
        self.out.append(values).map_err(io_error("write shard", &self.path))
    }

    /// Checks that every value byte was written, writes the header and
    /// syncs the file.
    pub fn finish(self) -> Result<(), StoreError> {
        let expected = self.header.values_len();
        if self.written != expected {
            let cause = FormatError::ValuesLength { expected, got: self.written };
            return Err(StoreError::Format { path: self.path.clone(), cause });
        }
        let header = self.header.to_bytes();
        self.out.finish_with_head(&header).map_err(io_error("write shard", &self.path))
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("sync directory", dir))
}

/// Loads a table (raw or compressed shards), checking every block.
pub fn load(dir: &Path) -> Result<Table, StoreError> {
    crate::shard::TableFiles::open(dir)?.load()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::MaterialIndex;
    use crate::rules::{CARD_STATES, NoMoveRule, Rules};

    fn fake_table(rules: Rules, max_per_side: usize) -> Table {
        let materials = Material::all_up_to(max_per_side)
            .into_iter()
            .map(|m| {
                let index = MaterialIndex::new(m);
                let values = (0..index.layouts() * CARD_STATES as u64).map(|i| (i % 200) as u8 + 1).collect();
                SolvedMaterial { index, values, width: ValueWidth::Byte }
            })
            .collect();
        Table::new(rules, max_per_side, materials)
    }

    fn load_error(dir: &Path) -> String {
        match load(dir) {
            Ok(_) => panic!("{} loaded", dir.display()),
            Err(e) => e.to_string(),
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn tables_round_trip_and_leave_no_partial_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let table = fake_table(Rules { no_move: NoMoveRule::Loss, ..Rules::default() }, 2);
        save(&table, &dir).unwrap();
        assert_eq!(entries(tmp.path()), vec!["t"]);
        assert_eq!(entries(&dir), vec!["1v1.onitb", "1v2.onitb", "2v1.onitb", "2v2.onitb"]);
        let back = load(&dir).unwrap();
        assert_eq!(back.rules(), table.rules());
        assert_eq!(back.max_per_side(), 2);
        for (a, b) in back.materials().iter().zip(table.materials()) {
            assert_eq!(a.index.material, b.index.material);
            assert_eq!(a.values, b.values);
        }
    }

    #[test]
    fn an_empty_directory_is_filled_and_others_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let table = fake_table(Rules::default(), 1);
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        save(&table, &empty).unwrap();
        assert!(matches!(save(&table, &empty), Err(StoreError::HoldsTable(_))));
        let busy = tmp.path().join("busy");
        fs::create_dir(&busy).unwrap();
        fs::write(busy.join("notes.txt"), "hi").unwrap();
        assert!(matches!(save(&table, &busy), Err(StoreError::NotEmpty(_))));
        assert!(matches!(save(&table, &busy.join("notes.txt")), Err(StoreError::NotADirectory(_))));
        assert!(save(&table, &busy.join("notes.txt").join("x")).is_err());
        assert!(save(&table, &tmp.path().join("no").join("such")).is_err());
        assert_eq!(entries(tmp.path()), vec!["busy", "empty"]);
    }

    /// The partial directory of a run that is not alive: no process has
    /// this id (Linux's largest is 2^22).
    fn dead_runs_partial(parent: &Path, target: &str, age: u32) -> PathBuf {
        let partial = parent.join(format!(".{target}.partial-{}", u32::MAX - age));
        fs::create_dir(&partial).unwrap();
        partial
    }

    /// `--resume` adopts the newest partial directory a dead run left, with
    /// its shards and without its unfinished files; other dead runs' are
    /// removed, as a fresh run removes them all.
    #[test]
    fn a_resumed_output_adopts_the_dead_runs_shards() {
        let tmp = tempfile::tempdir().unwrap();
        let older = dead_runs_partial(tmp.path(), "t", 1);
        fs::write(older.join("1v1.onitb"), b"older").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let newer = dead_runs_partial(tmp.path(), "t", 0);
        fs::write(newer.join("1v1.onitb"), b"newer").unwrap();
        fs::write(newer.join("2v1.onitbz"), b"whole").unwrap();
        fs::write(newer.join(".1v2.onitb.unfinished"), b"half").unwrap();
        fs::create_dir(newer.join("stray")).unwrap();
        let out = OutputDir::prepare_resumable(&tmp.path().join("t"), true).unwrap();
        assert_eq!(out.adopted(), ["1v1.onitb", "2v1.onitbz"]);
        assert_eq!(entries(out.partial()), ["1v1.onitb", "2v1.onitbz"]);
        assert_eq!(fs::read(out.path_for("1v1.onitb")).unwrap(), b"newer");
        assert_eq!(entries(tmp.path()), [out.partial().file_name().unwrap().to_string_lossy()]);
        // Failed before committing, it stays for the next `--resume`...
        let partial = out.partial().to_path_buf();
        drop(out);
        assert!(partial.exists());
        // ... which a fresh run (same process here, so renamed as if dead) removes.
        fs::rename(&partial, tmp.path().join(format!(".t.partial-{}", u32::MAX))).unwrap();
        let fresh = OutputDir::prepare_resumable(&tmp.path().join("t"), false).unwrap();
        assert!(fresh.adopted().is_empty());
        assert_eq!(entries(tmp.path()), [fresh.partial().file_name().unwrap().to_string_lossy()]);
        assert!(entries(fresh.partial()).is_empty());
        // Dropped empty, it leaves nothing.
        drop(fresh);
        assert!(entries(tmp.path()).is_empty());
    }

    #[test]
    fn an_uncommitted_output_directory_cleans_up() {
        let tmp = tempfile::tempdir().unwrap();
        let out = OutputDir::prepare(&tmp.path().join("t")).unwrap();
        assert_eq!(entries(tmp.path()).len(), 1);
        drop(out);
        assert!(entries(tmp.path()).is_empty());
    }

    #[test]
    fn damaged_or_incomplete_tables_are_refused_naming_the_shard() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        save(&fake_table(Rules::default(), 2), &dir).unwrap();
        let shard = dir.join("2v1.onitb");
        let mut bytes = fs::read(&shard).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&shard, &bytes).unwrap();
        let err = load_error(&dir);
        assert!(err.contains("2v1.onitb") && err.contains("damaged"), "{err}");
        fs::write(&shard, &bytes[..last]).unwrap();
        let err = load_error(&dir);
        assert!(err.contains("2v1.onitb") && err.contains("truncated"), "{err}");
        fs::remove_file(&shard).unwrap();
        let err = load_error(&dir);
        assert!(err.contains("2v1.onitb") && err.contains("missing"), "{err}");
        assert!(matches!(load(tmp.path()), Err(StoreError::NoTable(_))));
    }

    #[test]
    fn shards_of_different_tables_do_not_mix() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        save(&fake_table(Rules::default(), 1), &a).unwrap();
        save(&fake_table(Rules { no_move: NoMoveRule::Loss, ..Rules::default() }, 2), &b).unwrap();
        fs::copy(a.join("1v1.onitb"), b.join("1v1.onitb")).unwrap();
        let err = load_error(&b);
        assert!(err.contains("1v1.onitb") && err.contains("disagree"), "{err}");
        fs::copy(b.join("2v1.onitb"), b.join("1v1.onitb")).unwrap();
        assert!(matches!(load(&b), Err(StoreError::MaterialMismatch { .. })));
        fs::write(b.join("1x1.onitb"), "").unwrap();
        assert!(matches!(load(&b), Err(StoreError::ShardName(_))));
    }

    #[test]
    fn the_streaming_writer_gives_the_same_shard_in_any_chunks() {
        let tmp = tempfile::tempdir().unwrap();
        let rules = Rules::default();
        let material = Material::new(2, 2);
        let index = MaterialIndex::new(material);
        let values: Vec<u8> = (0..index.layouts() * CARD_STATES as u64).map(|i| (i * 13 % 255) as u8 + 1).collect();
        let expected = crate::format::encode(
            &rules,
            2,
            &SolvedMaterial { index, values: values.clone(), width: ValueWidth::Byte },
        )
        .unwrap();
        let block = BLOCK_BYTES as usize;
        for (case, cuts) in [vec![], vec![1, 7, block - 8, block, block + 1, 2 * block + 5]].into_iter().enumerate() {
            let path = tmp.path().join(format!("{case}.onitb"));
            let mut writer = RawShardWriter::create(&path, &rules, 2, material, ValueWidth::Byte).unwrap();
            let mut from = 0;
            for &cut in cuts.iter().chain([&values.len()]) {
                writer.write_values(&values[from..cut]).unwrap();
                from = cut;
            }
            writer.finish().unwrap();
            assert!(fs::read(&path).unwrap() == expected, "chunks {cuts:?}");
        }
        // Too many or too few bytes are refused.
        let mut writer =
            RawShardWriter::create(&tmp.path().join("long.onitb"), &rules, 2, material, ValueWidth::Byte).unwrap();
        writer.write_values(&values).unwrap();
        assert!(writer.write_values(&[1]).is_err());
        let mut writer =
            RawShardWriter::create(&tmp.path().join("short.onitb"), &rules, 2, material, ValueWidth::Byte).unwrap();
        writer.write_values(&values[1..]).unwrap();
        assert!(matches!(writer.finish(), Err(StoreError::Format { cause: FormatError::ValuesLength { .. }, .. })));
        assert!(
            RawShardWriter::create(&tmp.path().join("0.onitb"), &rules, 2, material, ValueWidth::Byte).is_err(),
            "exists"
        );
    }

    /// A shard whose writer was dropped before `finish`, early or late, is
    /// refused, naming it.
    #[test]
    fn an_unfinished_shard_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let table = fake_table(Rules::default(), 2);
        save(&table, &dir).unwrap();
        let solved = &table.materials()[3];
        assert_eq!(solved.index.material, Material::new(2, 2));
        for taken in [100, solved.values.len() / 2, solved.values.len()] {
            let path = tmp.path().join(format!("{taken}.onitb"));
            let mut writer =
                RawShardWriter::create(&path, table.rules(), 2, solved.index.material, ValueWidth::Byte).unwrap();
            writer.write_values(&solved.values[..taken]).unwrap();
            // As a killed run leaves it (dropped, the writer removes it),
            // then given the shard's name.
            std::mem::forget(writer);
            fs::rename(crate::blockio::unfinished_path(&path), dir.join("2v2.onitb")).unwrap();
            let err = load_error(&dir);
            assert!(err.contains("2v2.onitb"), "{taken} bytes: {err}");
        }
    }

    /// A table of word values (a 4-men table solved in bytes, widened) is
    /// saved as version-2 shards and loads back the same, words and all;
    /// statistics read from the files are the byte table's, and a flipped
    /// value byte is damage.
    #[test]
    fn word_tables_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let table = Table::generate(&Rules::default(), 2).unwrap();
        let wide = table.widened();
        save(&wide, &dir).unwrap();
        let back = load(&dir).unwrap();
        for (a, b) in back.materials().iter().zip(wide.materials()) {
            assert_eq!((a.index.material, a.width), (b.index.material, ValueWidth::Word));
            assert!(a.values == b.values, "{}", a.index.material);
        }
        let files = crate::shard::TableFiles::open(&dir).unwrap();
        for shard in &files.shards {
            assert_eq!((shard.header().width, shard.header().version()), (ValueWidth::Word, 2));
            let bytes = fs::read(shard.path()).unwrap();
            assert_eq!(&bytes[8..10], &[2, 0], "{}", shard.path().display());
        }
        assert_eq!(files.stats().unwrap(), table.stats());
        // One byte of a word flipped.
        let shard = dir.join("2v2.onitb");
        let mut bytes = fs::read(&shard).unwrap();
        let at = bytes.len() - 7;
        bytes[at] ^= 0x80;
        fs::write(&shard, &bytes).unwrap();
        let err = load_error(&dir);
        assert!(err.contains("2v2.onitb") && err.contains("damaged"), "{err}");
    }

    /// Materials of one table may differ in width: only those too deep for
    /// bytes need words.
    #[test]
    fn a_table_may_mix_byte_and_word_materials() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        let table = Table::generate(&Rules::default(), 2).unwrap();
        let mixed: Vec<SolvedMaterial> = table
            .materials()
            .iter()
            .map(|m| {
                if m.index.material == Material::new(2, 2) {
                    m.widened()
                } else {
                    SolvedMaterial {
                        index: MaterialIndex::new(m.index.material),
                        values: m.values.clone(),
                        width: m.width,
                    }
                }
            })
            .collect();
        save(&Table::new(*table.rules(), 2, mixed), &dir).unwrap();
        let back = load(&dir).unwrap();
        let widths: Vec<ValueWidth> = back.materials().iter().map(|m| m.width).collect();
        assert_eq!(widths, [ValueWidth::Byte, ValueWidth::Byte, ValueWidth::Byte, ValueWidth::Word]);
        assert_eq!(back.stats(), table.stats());
    }

    #[test]
    fn shard_names_parse() {
        assert_eq!(material_of_name("2v1.onitb"), Some(Material::new(2, 1)));
        assert_eq!(material_of_name("0v1.onitb"), None);
        assert_eq!(material_of_name("6v1.onitb"), None);
        assert_eq!(material_of_name("2v1.onitbx"), None);
        assert_eq!(material_of_name("2v1onitb"), None);
    }
}
