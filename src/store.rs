//! Tables on disk: a directory holding one raw shard per material.
//!
//! Owns the directory layout, all-or-nothing saving and checked loading; the
//! bytes inside a shard are `format`'s business. Knows nothing of solving
//! and never changes the index or the value encoding.
//!
//! Saving writes every shard into a hidden sibling `.<name>.partial-<pid>`,
//! syncs it, then renames it into place, so a table directory is either
//! complete or absent. [`OutputDir::prepare`] does every check that can fail
//! up front, so that a long solve is not wasted on a bad path.

use crate::format::{FIXED_HEADER_BYTES, FormatError, ShardHeader};
use crate::index::{Material, MaterialIndex};
use crate::rules::MAX_PIECES_PER_SIDE;
use crate::table::{SolvedMaterial, Table};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// File name extension of a shard.
pub const SHARD_EXTENSION: &str = "onitb";

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

/// The material a shard file name stands for (`None` if it is not one).
fn material_of_name(name: &str) -> Option<Material> {
    let stem = name.strip_suffix(SHARD_EXTENSION)?.strip_suffix('.')?;
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
/// the real one on [`OutputDir::commit`], and is removed if dropped before.
#[derive(Debug)]
pub struct OutputDir {
    target: PathBuf,
    partial: PathBuf,
    committed: bool,
}

impl OutputDir {
    /// Checks that `dir` can receive a table and creates the partial
    /// directory beside it. Call this before solving.
    pub fn prepare(dir: &Path) -> Result<OutputDir, StoreError> {
        let target = resolve_target(dir)?;
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            return Err(StoreError::BadName(dir.to_path_buf()));
        };
        let partial = parent.join(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
        fs::create_dir(&partial).map_err(io_error("create a working directory", &partial))?;
        Ok(OutputDir { target, partial, committed: false })
    }

    /// Where the table will be.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes every shard, syncs, and moves the directory into place.
    pub fn commit(mut self, table: &Table) -> Result<(), StoreError> {
        for solved in table.materials() {
            write_shard(table, solved, &self.partial.join(shard_name(solved.index.material)))?;
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

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.partial);
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
        if entry.file_name().to_string_lossy().ends_with(&format!(".{SHARD_EXTENSION}")) {
            return Err(StoreError::HoldsTable(dir.to_path_buf()));
        }
        any = true;
    }
    if any { Err(StoreError::NotEmpty(dir.to_path_buf())) } else { Ok(()) }
}

fn write_shard(table: &Table, solved: &SolvedMaterial, path: &Path) -> Result<(), StoreError> {
    let header = ShardHeader::new(table.rules(), table.max_per_side(), solved)
        .map_err(|cause| StoreError::Format { path: path.to_path_buf(), cause })?;
    let write = || -> io::Result<()> {
        let mut file = File::create_new(path)?;
        file.write_all(&header.to_bytes())?;
        file.write_all(&solved.values)?;
        file.sync_all()
    };
    write().map_err(io_error("write shard", path))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("sync directory", dir))
}

/// Loads a table, checking every shard completely.
pub fn load(dir: &Path) -> Result<Table, StoreError> {
    let mut shards: Vec<(Material, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error("read table directory", dir))? {
        let entry = entry.map_err(io_error("read table directory", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(&format!(".{SHARD_EXTENSION}")) {
            continue;
        }
        let material = material_of_name(&name).ok_or_else(|| StoreError::ShardName(entry.path()))?;
        shards.push((material, entry.path()));
    }
    shards.sort();
    let Some((_, first_path)) = shards.first().cloned() else {
        return Err(StoreError::NoTable(dir.to_path_buf()));
    };
    // Learn the table's size from one header, then check the set of names
    // before reading gigabytes.
    let (first, _) = read_header(&first_path)?;
    let max_per_side = first.max_per_side as usize;
    for material in Material::all_up_to(max_per_side) {
        if !shards.iter().any(|(m, _)| *m == material) {
            let path = dir.join(shard_name(material));
            return Err(StoreError::MissingShard { path, men: 2 * max_per_side });
        }
    }
    let mut solved = Vec::with_capacity(shards.len());
    for (material, path) in shards {
        let (header, values) = read_shard(&path)?;
        if header.material != material {
            return Err(StoreError::MaterialMismatch { path, found: header.material });
        }
        let what = if header.max_per_side != first.max_per_side {
            Some("table size")
        } else if header.no_move != first.no_move {
            Some("no-move rule")
        } else if header.cards != first.cards {
            Some("cards")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(StoreError::Mismatch { path, other: first_path, what });
        }
        solved.push(SolvedMaterial { index: MaterialIndex::new(material), values });
    }
    let rules = first.rules().map_err(|cause| StoreError::Format { path: first_path, cause })?;
    Ok(Table::new(rules, max_per_side, solved))
}

/// Reads and checks a shard's header; returns it with the open file,
/// positioned at the value area.
fn read_header(path: &Path) -> Result<(ShardHeader, File), StoreError> {
    let format_error = |cause| StoreError::Format { path: path.to_path_buf(), cause };
    let mut file = File::open(path).map_err(io_error("open shard", path))?;
    let file_len = file.metadata().map_err(io_error("read shard", path))?.len();
    let mut header = vec![0u8; FIXED_HEADER_BYTES.min(file_len as usize)];
    file.read_exact(&mut header).map_err(io_error("read shard", path))?;
    let header_len = ShardHeader::total_len(&header).map_err(format_error)?;
    if file_len < header_len as u64 {
        return Err(format_error(FormatError::Truncated { needed: header_len as u64, got: file_len }));
    }
    let fixed = header.len();
    header.resize(header_len, 0);
    file.read_exact(&mut header[fixed..]).map_err(io_error("read shard", path))?;
    let header = ShardHeader::from_bytes(&header).map_err(format_error)?;
    let needed = header_len as u64 + header.values_len();
    if file_len < needed {
        return Err(format_error(FormatError::Truncated { needed, got: file_len }));
    }
    if file_len > needed {
        return Err(format_error(FormatError::TrailingBytes { extra: file_len - needed }));
    }
    Ok((header, file))
}

/// Reads a whole shard and checks every block of its values.
fn read_shard(path: &Path) -> Result<(ShardHeader, Vec<u8>), StoreError> {
    let (header, mut file) = read_header(path)?;
    let mut values = vec![0u8; header.values_len() as usize];
    file.read_exact(&mut values).map_err(io_error("read shard", path))?;
    header.check_values(&values).map_err(|cause| StoreError::Format { path: path.to_path_buf(), cause })?;
    Ok((header, values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{CARD_STATES, NoMoveRule, Rules};

    fn fake_table(rules: Rules, max_per_side: usize) -> Table {
        let materials = Material::all_up_to(max_per_side)
            .into_iter()
            .map(|m| {
                let index = MaterialIndex::new(m);
                let values = (0..index.layouts() * CARD_STATES as u64).map(|i| (i % 200) as u8 + 1).collect();
                SolvedMaterial { index, values }
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
    fn shard_names_parse() {
        assert_eq!(material_of_name("2v1.onitb"), Some(Material::new(2, 1)));
        assert_eq!(material_of_name("0v1.onitb"), None);
        assert_eq!(material_of_name("6v1.onitb"), None);
        assert_eq!(material_of_name("2v1.onitbx"), None);
        assert_eq!(material_of_name("2v1onitb"), None);
    }
}
