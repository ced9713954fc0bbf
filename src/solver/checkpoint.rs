//! The checkpoint of a run with a work directory: which materials are
//! finished (their value files complete and synced), for which rules.
//!
//! Owns the checkpoint file and its atomic replacement; knows nothing of
//! lanes or solving. A material is recorded only after its value file is
//! synced, and the record is replaced with write-to-temporary, sync, rename,
//! sync-directory, so after `kill -9` at any moment the checkpoint names
//! only complete materials. Work on the pair in progress is redone on
//! resume; every pair's result depends only on the finished smaller ones,
//! so the table comes out bit-identical.

use crate::index::Material;
use crate::rules::Rules;
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// File name of the checkpoint in the work directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";
/// Version of the checkpoint's content; a run refuses other versions.
const CHECKPOINT_VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("cannot {action} '{}': {cause}", path.display())]
    Io { action: &'static str, path: PathBuf, cause: io::Error },
    #[error("'{}' is not a valid checkpoint: {cause}", path.display())]
    Corrupt { path: PathBuf, cause: String },
    #[error("work directory '{}' holds a run of {found}, not of these arguments ({expected}); resume with the same arguments or use another --work", dir.display())]
    Mismatch { dir: PathBuf, found: String, expected: String },
    #[error("work directory '{}' holds an earlier run; pass --resume to continue it, or remove it", .0.display())]
    Exists(PathBuf),
    #[error("work directory '{}' holds no checkpoint to resume from", .0.display())]
    Missing(PathBuf),
}

#[derive(Serialize, Deserialize, PartialEq, Eq, Debug)]
struct Record {
    version: u32,
    /// What the run solves, as text: cards, rule and size.
    run: String,
    /// Finished materials as (mover, opponent).
    finished: Vec<(u8, u8)>,
}

pub struct Checkpoint {
    dir: PathBuf,
    record: Record,
}

fn describe(rules: &Rules, max_per_side: usize) -> String {
    let cards: Vec<&str> = rules.cards.cards().iter().map(|c| c.name).collect();
    format!("{} men, cards {}, no-move {}", 2 * max_per_side, cards.join(","), rules.no_move.name())
}

impl Checkpoint {
    /// Starts a run in `dir` (creating it), or resumes the one recorded
    /// there.
    pub fn open(dir: &Path, rules: &Rules, max_per_side: usize, resume: bool) -> Result<Checkpoint, CheckpointError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |cause| CheckpointError::Io { action, path, cause }
        };
        fs::create_dir_all(dir).map_err(io("create", dir))?;
        let path = dir.join(CHECKPOINT_FILE);
        let run = describe(rules, max_per_side);
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
                    return Err(CheckpointError::Corrupt { path, cause: format!("version {}", record.version) });
                }
                if record.run != run {
                    return Err(CheckpointError::Mismatch { dir: dir.to_path_buf(), found: record.run, expected: run });
                }
                record
            }
            (Some(_), false) => return Err(CheckpointError::Exists(dir.to_path_buf())),
            (None, true) => return Err(CheckpointError::Missing(dir.to_path_buf())),
            (None, false) => Record { version: CHECKPOINT_VERSION, run, finished: Vec::new() },
        };
        let mut checkpoint = Checkpoint { dir: dir.to_path_buf(), record };
        checkpoint.write()?;
        Ok(checkpoint)
    }

    pub fn is_finished(&self, material: Material) -> bool {
        self.record.finished.contains(&(material.mover, material.opponent))
    }

    /// Records materials as finished; their value files must be synced.
    pub fn record_finished(&mut self, materials: &[Material]) -> Result<(), CheckpointError> {
        for m in materials {
            if !self.is_finished(*m) {
                self.record.finished.push((m.mover, m.opponent));
            }
        }
        self.write()
    }

    fn write(&mut self) -> Result<(), CheckpointError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        let temp = self.dir.join(format!("{CHECKPOINT_FILE}.tmp"));
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |cause| CheckpointError::Io { action, path, cause }
        };
        let bytes = serde_json::to_vec_pretty(&self.record).expect("a record serialises");
        let mut file = File::create(&temp).map_err(io("create", &temp))?;
        file.write_all(&bytes).map_err(io("write", &temp))?;
        file.sync_all().map_err(io("sync", &temp))?;
        fs::rename(&temp, &path).map_err(io("rename", &path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io("sync", &self.dir))?;
        Ok(())
    }
}

/// Removes the checkpoint of a finished run.
pub fn remove(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(CHECKPOINT_FILE)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
