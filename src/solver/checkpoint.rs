//! The checkpoint of a run with a work directory: which materials are
//! finished (their packed values complete and synced), for which rules, and
//! how far the streamed pair in progress got.
//!
//! Owns the checkpoint file and its atomic replacement, and the lock that
//! keeps a work directory to one run; knows nothing of lanes or solving.
//! A material is recorded only after its packed values are synced, a step
//! of a pair only after its work files are, and the record is replaced
//! with write-to-temporary, sync, rename, sync-directory, so
//! after `kill -9` at any moment the checkpoint names only complete work.
//! Every pair's result depends only on the finished smaller ones and on the
//! state after its last recorded step, so the table comes out bit-identical.

use crate::index::Material;
use crate::rules::Rules;
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// File name of the checkpoint in the work directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";
/// File name of the lock a run holds on its work directory.
pub const LOCK_FILE: &str = "lock";
/// Version of the checkpoint's content and of the work files it names; a
/// run refuses other versions. (8: entry frames store layouts as
/// differences; 9: and their bytes in byte planes, `entries.rs`; 10:
/// streamed steps mirror, so mirror images' `held` and `capture` words
/// are stale, which an earlier version would read; 11: initialisation
/// mirrors, so images have no capture bit and no scheduled capture; 12: a
/// mirroring pair stores `held` and `capture` compacted to its solved
/// placements, `compact.rs`; 13: the decision log's frames store entries
/// compact, `entries.rs`; 14: and the capture schedule's; 15: value
/// words: packed values say their width (`packed_values.rs`), a pair's
/// record says whether it is in words and its groups' events past 255;
/// 16: the frames of logs and schedules give their first layout,
/// `entries.rs`; 17: no `held` plane, so a group's slot byte has a bit
/// less and its `SparseRest` records are (`lost`, `capture`) pairs.)
const CHECKPOINT_VERSION: u32 = 17;

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("cannot {action} '{}': {cause}", path.display())]
    Io { action: &'static str, path: PathBuf, cause: io::Error },
    #[error("'{}' is not a valid checkpoint: {cause}", path.display())]
    Corrupt { path: PathBuf, cause: String },
    #[error("work directory '{}' holds a run of {found}, not of these arguments ({expected}); resume with the same arguments or use another --work", dir.display())]
    Mismatch { dir: PathBuf, found: String, expected: String },
    #[error("'{}' was written by another version of onitb (checkpoint version {found}, this one reads {CHECKPOINT_VERSION}); remove the work directory to start afresh", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("work directory '{}' holds an earlier run; pass --resume to continue it, or remove it", .0.display())]
    Exists(PathBuf),
    #[error("work directory '{}' holds no checkpoint to resume from", .0.display())]
    Missing(PathBuf),
    #[error("work directory '{}' is in use by another onitb run; wait for it to end, or use another --work", .0.display())]
    InUse(PathBuf),
}

/// An exclusive lock on a work directory (`flock` on its [`LOCK_FILE`]),
/// held from before its checkpoint is read until the run's results, whose
/// packed values are in the directory, are dropped: a second run in the
/// same directory would overwrite the work files the first one's
/// checkpoint names. The system releases it when the process ends, even
/// by `kill -9`, so a stale lock file blocks nothing.
#[derive(Debug)]
pub struct WorkLock {
    _file: File,
}

impl WorkLock {
    /// Locks `dir` (which must exist), or fails at once if another run
    /// holds it.
    fn take(dir: &Path) -> Result<WorkLock, CheckpointError> {
        let path = dir.join(LOCK_FILE);
        let io = |action, cause| CheckpointError::Io { action, path: path.clone(), cause };
        let file = File::options().create(true).truncate(false).write(true).open(&path).map_err(|e| io("create", e))?;
        match file.try_lock() {
            Ok(()) => Ok(WorkLock { _file: file }),
            Err(fs::TryLockError::WouldBlock) => Err(CheckpointError::InUse(dir.to_path_buf())),
            Err(fs::TryLockError::Error(cause)) => Err(io("lock", cause)),
        }
    }
}

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct Record {
    version: u32,
    /// What the run solves, as text: cards, rule and size.
    run: String,
    /// Finished materials as (mover, opponent).
    finished: Vec<(u8, u8)>,
    /// The streamed pair in progress, if a step of it was recorded.
    #[serde(default)]
    pair: Option<PairRecord>,
    /// How long each finished pair took, in solving order (absent from
    /// checkpoints of earlier builds: no time is known for those pairs).
    #[serde(default)]
    times: Vec<PairTime>,
}

/// How long a finished pair took to solve, over every run that worked on
/// it (a run's time after its last checkpoint does not count: the next
/// run did that work again). Progress reports use it to estimate the time
/// left in a resumed run before it has finished a pair of its own.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone, Copy)]
pub struct PairTime {
    /// Layouts of the pair's materials together.
    pub layouts: u64,
    /// Streamed through the work directory, or solved in memory.
    pub streamed: bool,
    pub spent_ms: u64,
}

/// How far a streamed pair got: the solver's state after its last recorded
/// step, which with the work files the slots name is all a resumed run needs.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone)]
pub struct PairRecord {
    /// The pair's materials as (mover, opponent), in solving order.
    pub materials: Vec<(u8, u8)>,
    /// The last step done (0: initialisation only).
    pub depth_plies: u16,
    /// The steps are over; only turning undecided states into draws is left.
    pub steps_done: bool,
    /// States decided so far, over the pair.
    pub decided: u64,
    /// Deepest depth at which a capture value falls due.
    pub pending_plies: u16,
    /// Steps in a row that decided nothing.
    pub quiet_steps: u32,
    /// Time the runs so far spent on the pair up to this record.
    #[serde(default)]
    pub spent_ms: u64,
    /// The pair is solved with value words (it needs a loss deeper than a
    /// byte holds, or its captures lead to a material that does).
    pub words: bool,
    /// Per material, in `materials` order.
    pub works: Vec<WorkRecord>,
}

/// Per-group state of one material of the pair in progress.
#[derive(Serialize, Deserialize, PartialEq, Eq, Debug, Clone)]
pub struct WorkRecord {
    /// Undecided states per group.
    pub undecided: Vec<u64>,
    /// Capture-event depths per group (a 256-bit set as four words).
    pub events: Vec<[u64; 4]>,
    /// Per group, the deepest capture-event depth past 255 (0: none; value
    /// words only).
    pub events_beyond: Vec<u16>,
    /// Layouts listed in each group's sparse lanes (0: its planes are
    /// dense).
    pub sparse: Vec<u32>,
    /// The work-file slot of each plane lane per group, one byte per group
    /// in hexadecimal.
    pub slots: String,
    /// Length of the decision log in bytes.
    pub log_bytes: u64,
    /// Per step recorded, its depth and where its part of the decision log
    /// starts.
    pub log_steps: Vec<(u16, u64)>,
}

impl WorkRecord {
    pub fn encode_slots(slots: &[u8]) -> String {
        slots.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The slot bytes, or None if the text is not `groups` hex bytes.
    pub fn decode_slots(&self, groups: usize) -> Option<Vec<u8>> {
        let text = self.slots.as_bytes();
        if text.len() != 2 * groups {
            return None;
        }
        text.chunks(2).map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()).collect()
    }
}

pub struct Checkpoint {
    dir: PathBuf,
    record: Record,
    lock: WorkLock,
}

/// The run as the checkpoint names it. `mirror_off`: a mirror-closed set
/// solved without its mirror (tests only), whose work files an ordinary
/// run must not resume (nor the other way round: a mirroring run leaves
/// images' `capture` words stale).
fn describe(rules: &Rules, max_per_side: usize, mirror_off: bool) -> String {
    let cards: Vec<&str> = rules.cards.cards().iter().map(|c| c.name).collect();
    let mirror = if mirror_off { ", every placement solved" } else { "" };
    format!("{} men, cards {}, no-move {}{mirror}", 2 * max_per_side, cards.join(","), rules.no_move.name())
}

impl Checkpoint {
    /// Starts a run in `dir` (creating it), or resumes the one recorded
    /// there. `mirror_off`: see [`describe`].
    pub fn open(
        dir: &Path,
        (rules, max_per_side, mirror_off): (&Rules, usize, bool),
        resume: bool,
    ) -> Result<Checkpoint, CheckpointError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |cause| CheckpointError::Io { action, path, cause }
        };
        fs::create_dir_all(dir).map_err(io("create", dir))?;
        let lock = WorkLock::take(dir)?;
        let path = dir.join(CHECKPOINT_FILE);
        let run = describe(rules, max_per_side, mirror_off);
        let existing = match fs::read(&path) {
            Ok(bytes) => Some(
                serde_json::from_slice::<Record>(&bytes)
                    .map_err(|e| CheckpointError::Corrupt { path: path.clone(), cause: e.to_string() })?,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("read", &path)(e)),
        };
        let record = match (existing, resume) {
            (Some(record), true) => {
                if record.version != CHECKPOINT_VERSION {
                    return Err(CheckpointError::Version { path, found: record.version });
                }
                if record.run != run {
                    return Err(CheckpointError::Mismatch { dir: dir.to_path_buf(), found: record.run, expected: run });
                }
                record
            }
            (Some(_), false) => return Err(CheckpointError::Exists(dir.to_path_buf())),
            (None, true) => return Err(CheckpointError::Missing(dir.to_path_buf())),
            (None, false) => {
                Record { version: CHECKPOINT_VERSION, run, finished: Vec::new(), pair: None, times: Vec::new() }
            }
        };
        let mut checkpoint = Checkpoint { dir: dir.to_path_buf(), record, lock };
        checkpoint.write()?;
        Ok(checkpoint)
    }

    /// The lock on the work directory, to hold after the checkpoint.
    pub fn into_lock(self) -> WorkLock {
        self.lock
    }

    pub fn is_finished(&self, material: Material) -> bool {
        self.record.finished.contains(&(material.mover, material.opponent))
    }

    /// How long the finished pairs took, in solving order.
    pub fn pair_times(&self) -> &[PairTime] {
        &self.record.times
    }

    /// Records materials as finished (the pair in progress is over), and
    /// how long their pair took; their packed values must be synced and in
    /// place.
    pub fn record_finished(&mut self, materials: &[Material], time: PairTime) -> Result<(), CheckpointError> {
        for m in materials {
            if !self.is_finished(*m) {
                self.record.finished.push((m.mover, m.opponent));
            }
        }
        self.record.times.push(time);
        self.record.pair = None;
        self.write()
    }

    /// The recorded state of the pair of `materials`, if it is the one in
    /// progress.
    pub fn pair(&self, materials: &[Material]) -> Option<&PairRecord> {
        let wanted: Vec<(u8, u8)> = materials.iter().map(|m| (m.mover, m.opponent)).collect();
        self.record.pair.as_ref().filter(|p| p.materials == wanted)
    }

    /// Records a step of the pair in progress; its work files must be synced.
    /// On error the earlier record stands.
    pub fn record_step(&mut self, pair: PairRecord) -> Result<(), CheckpointError> {
        let earlier = self.record.pair.replace(pair);
        let result = self.write();
        if result.is_err() {
            self.record.pair = earlier;
        }
        result
    }

    fn write(&mut self) -> Result<(), CheckpointError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        let temp = self.dir.join(format!("{CHECKPOINT_FILE}.tmp"));
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |cause| CheckpointError::Io { action, path, cause }
        };
        let bytes = serde_json::to_vec(&self.record).expect("a record serialises");
        let mut file = File::create(&temp).map_err(io("create", &temp))?;
        file.write_all(&bytes).map_err(io("write", &temp))?;
        file.sync_all().map_err(io("sync", &temp))?;
        fs::rename(&temp, &path).map_err(io("rename", &path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io("sync", &self.dir))?;
        Ok(())
    }
}

/// Removes the checkpoint and the lock file of a finished run.
pub fn remove(dir: &Path) -> io::Result<()> {
    for name in [CHECKPOINT_FILE, LOCK_FILE] {
        match fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second run in a work directory is refused while the first holds
    /// it, and may start once the first has let go.
    #[test]
    fn a_work_directory_in_use_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let rules = Rules::default();
        let first = Checkpoint::open(&work, (&rules, 2, false), false).unwrap();
        let second = Checkpoint::open(&work, (&rules, 2, false), true);
        assert!(matches!(second, Err(CheckpointError::InUse(_))), "{:?}", second.err().map(|e| e.to_string()));
        // Held on by the results after the checkpoint.
        let lock = first.into_lock();
        assert!(matches!(Checkpoint::open(&work, (&rules, 2, false), true), Err(CheckpointError::InUse(_))));
        drop(lock);
        let again = Checkpoint::open(&work, (&rules, 2, false), true).unwrap();
        assert!(!again.is_finished(Material::new(1, 1)));
        drop(again);
        remove(&work).unwrap();
        assert!(!work.join(LOCK_FILE).exists() && !work.join(CHECKPOINT_FILE).exists());
    }

    /// Finished pairs' times and the pair in progress's time so far are
    /// read back by a resumed run; a record of an earlier build, which has
    /// neither, reads as no times.
    #[test]
    fn pair_times_survive_a_resume() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let rules = Rules::default();
        let mut first = Checkpoint::open(&work, (&rules, 2, false), false).unwrap();
        let time = PairTime { layouts: 600, streamed: false, spent_ms: 8 };
        first.record_finished(&[Material::new(1, 1)], time).unwrap();
        let materials = vec![(1, 2), (2, 1)];
        let pair = PairRecord {
            materials: materials.clone(),
            depth_plies: 3,
            steps_done: false,
            decided: 10,
            pending_plies: 0,
            quiet_steps: 0,
            spent_ms: 1234,
            words: false,
            works: Vec::new(),
        };
        first.record_step(pair).unwrap();
        drop(first);
        let again = Checkpoint::open(&work, (&rules, 2, false), true).unwrap();
        assert_eq!(again.pair_times(), &[time]);
        let pair = again.pair(&[Material::new(1, 2), Material::new(2, 1)]).expect("the pair in progress");
        assert_eq!(pair.spent_ms, 1234);
        drop(again);
        // An earlier build's record: no `times`, no `spent_ms`.
        let old = format!(
            r#"{{"version":{CHECKPOINT_VERSION},"run":"{}","finished":[[1,1]],"pair":{{"materials":[[1,2],[2,1]],"depth_plies":3,"steps_done":false,"decided":10,"pending_plies":0,"quiet_steps":0,"words":false,"works":[]}}}}"#,
            describe(&rules, 2, false)
        );
        fs::write(work.join(CHECKPOINT_FILE), old).unwrap();
        let old = Checkpoint::open(&work, (&rules, 2, false), true).unwrap();
        assert!(old.pair_times().is_empty() && old.is_finished(Material::new(1, 1)));
        assert_eq!(old.pair(&[Material::new(1, 2), Material::new(2, 1)]).unwrap().spent_ms, 0);
    }

    /// A run of a mirror-closed set that solved every placement is not
    /// resumed by one that mirrors (whose images' `capture` words are
    /// stale), nor the other way round.
    #[test]
    fn mirroring_and_unmirrored_runs_do_not_resume_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let rules = Rules::default();
        for (started, resumed) in [(false, true), (true, false)] {
            let work = dir.path().join(format!("work-{started}"));
            drop(Checkpoint::open(&work, (&rules, 2, started), false).unwrap());
            let other = Checkpoint::open(&work, (&rules, 2, resumed), true);
            assert!(matches!(other, Err(CheckpointError::Mismatch { .. })), "{:?}", other.err());
            assert!(Checkpoint::open(&work, (&rules, 2, started), true).is_ok());
        }
    }
}
