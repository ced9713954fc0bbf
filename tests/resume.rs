//! Crash safety of streamed generation: `kill -9` at several moments, then
//! `--resume`, must give the same table files as an uninterrupted run.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn onitb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_onitb"))
}

/// Shard files of a table directory, by name, with their bytes.
fn shards(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

const ARGS: [&str; 6] = ["generate", "--men", "4", "--mem", "8MiB", "--quiet"];

#[test]
fn killed_runs_resume_to_a_bit_identical_table() {
    let root = tempfile::tempdir().unwrap();
    let reference = root.path().join("reference");
    let status = onitb()
        .args(ARGS)
        .args(["--work".as_ref(), root.path().join("w0").as_os_str(), "--out".as_ref(), reference.as_os_str()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(!root.path().join("w0").exists(), "a finished run cleans its work directory");

    let work = root.path().join("w1");
    let out = root.path().join("out");
    let mut killed = 0;
    // Kill at growing delays; each later run resumes the earlier one's work.
    for (round, delay_ms) in [30u64, 120, 250, 400, 600].into_iter().enumerate() {
        let mut command = onitb();
        command.args(ARGS).args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), out.as_os_str()]);
        if round > 0 && work.join("checkpoint.json").exists() {
            command.arg("--resume");
        }
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            killed += 1;
        }
        child.wait().unwrap();
        if out.exists() {
            break;
        }
        assert!(!out.exists());
    }
    assert!(killed > 0, "at least one run must have been killed");
    if !out.exists() {
        let mut command = onitb();
        command.args(ARGS).args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), out.as_os_str()]);
        if work.join("checkpoint.json").exists() {
            command.arg("--resume");
        }
        let result = command.output().unwrap();
        assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
    }
    assert_eq!(shards(&reference), shards(&out));
    let leftovers: Vec<_> = fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "killed runs' partial output is cleaned up: {leftovers:?}");
}

/// The step the checkpoint in `work` got the pair in progress to, if any.
fn checkpointed_depth(work: &Path) -> Option<u64> {
    let bytes = fs::read(work.join("checkpoint.json")).ok()?;
    let record: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    record["pair"]["depth_plies"].as_u64()
}

/// Kills `child` (SIGKILL) once the checkpoint in `work` records the pair
/// in progress at `depth_plies` or deeper; fails if the run ends first.
fn kill_once_checkpointed(mut child: Child, work: &Path, depth_plies: u64) {
    while checkpointed_depth(work).is_none_or(|d| d < depth_plies) {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before depth {depth_plies} was checkpointed");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// What the checkpoint in `work` says the runs spent: on each finished
/// pair, (layouts, streamed, ms), and on the pair in progress, ms.
fn checkpointed_times(work: &Path) -> (Vec<(u64, bool, u64)>, u64) {
    let record: serde_json::Value = serde_json::from_slice(&fs::read(work.join("checkpoint.json")).unwrap()).unwrap();
    let finished = record["times"].as_array().unwrap().iter();
    let finished = finished
        .map(|t| (t["layouts"].as_u64().unwrap(), t["streamed"].as_bool().unwrap(), t["spent_ms"].as_u64().unwrap()))
        .collect();
    (finished, record["pair"]["spent_ms"].as_u64().unwrap())
}

/// A quiet `generate` of [`ARGS`] into `work` and `out` (`--resume` if
/// `resume`), with `extra` arguments.
fn generate(work: &Path, out: &Path, resume: bool, extra: &[&str]) -> Command {
    let mut command = onitb();
    command.args(ARGS).args(extra);
    command.args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    if resume {
        command.arg("--resume");
    }
    command.stdout(Stdio::null()).stderr(Stdio::null());
    command
}

#[test]
fn runs_killed_inside_a_streamed_pair_resume_from_its_last_checkpointed_step() {
    let root = tempfile::tempdir().unwrap();
    let run = |work: &Path, out: &Path, resume: bool| generate(work, out, resume, &["--checkpoint-every", "0"]);
    let reference = root.path().join("reference");
    assert!(run(&root.path().join("w0"), &reference, false).status().unwrap().success());

    let (work, out) = (root.path().join("w1"), root.path().join("out"));
    let mut resumed_at = Vec::new();
    let mut spent_ms = Vec::new();
    // Kill each run just after the pair (2v2, streamed at this budget) is
    // checkpointed past a depth, so it dies inside the next step.
    for kill_after in [2u64, 15, 30, 45] {
        if let Some(depth) = checkpointed_depth(&work) {
            resumed_at.push(depth);
            let (finished, pair_ms) = checkpointed_times(&work);
            // 1v1 and 1v2+2v1, in memory, their times kept across runs.
            let shapes: Vec<(u64, bool)> = finished.iter().map(|&(layouts, streamed, _)| (layouts, streamed)).collect();
            assert_eq!(shapes, [(600, false), (27_600, false)]);
            spent_ms.push((finished, pair_ms));
        }
        let mut child = run(&work, &out, work.join("checkpoint.json").exists()).spawn().unwrap();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if checkpointed_depth(&work).is_some_and(|d| d >= kill_after) {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!out.exists(), "the pair needs more than {kill_after} steps");
    }
    resumed_at.extend(checkpointed_depth(&work));
    // Each run adds to the time spent on 2v2 (the runs' own time up to
    // their last checkpoint), and leaves the finished pairs' times alone.
    assert!(spent_ms.windows(2).all(|w| w[0].0 == w[1].0 && w[0].1 <= w[1].1), "{spent_ms:?}");
    // A damaged work file is refused, naming it, and leaves the work intact.
    let plane = work.join("2v2.won.0");
    let kept = fs::read(&plane).unwrap();
    fs::write(&plane, &kept[..kept.len() / 2]).unwrap();
    let damaged = run(&work, &out, true).stderr(Stdio::piped()).output().unwrap();
    assert!(!damaged.status.success());
    let message = String::from_utf8_lossy(&damaged.stderr);
    assert!(message.contains("2v2.won.0") && message.contains("damaged"), "{message}");
    fs::write(&plane, &kept).unwrap();
    // So are a decision log shorter than the checkpoint records and a
    // capture schedule index that fails its checksum.
    for (name, damage) in [("2v2.decisions", 0usize), ("2v2.captures-index", 1)] {
        let path = work.join(name);
        let kept = fs::read(&path).unwrap();
        let mut damaged_bytes = kept.clone();
        match damage {
            0 => damaged_bytes.truncate(kept.len() / 2),
            _ => damaged_bytes[kept.len() / 2] ^= 0x10,
        }
        fs::write(&path, &damaged_bytes).unwrap();
        let damaged = run(&work, &out, true).stderr(Stdio::piped()).output().unwrap();
        assert!(!damaged.status.success());
        let message = String::from_utf8_lossy(&damaged.stderr);
        assert!(message.contains(name) && message.contains("damaged"), "{message}");
        fs::write(&path, &kept).unwrap();
    }
    assert!(run(&work, &out, true).status().unwrap().success());
    assert_eq!(shards(&reference), shards(&out));
    assert!(resumed_at.len() >= 3 && resumed_at.iter().all(|&d| d >= 2), "resumed inside the pair: {resumed_at:?}");
    assert!(!work.exists(), "a finished run cleans its work directory, both slots of every plane included");
}

#[test]
fn a_pair_checkpointed_streamed_may_be_resumed_in_memory() {
    let root = tempfile::tempdir().unwrap();
    let (work, out, reference) = (root.path().join("w"), root.path().join("out"), root.path().join("reference"));
    let run = |mem: &str, out: &Path, resume: bool| {
        let mut command = onitb();
        command.args(["generate", "--men", "4", "--quiet", "--checkpoint-every", "0", "--mem", mem]);
        command.args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), out.as_os_str()]);
        if resume {
            command.arg("--resume");
        }
        command.stdout(Stdio::null()).stderr(Stdio::null());
        command
    };
    kill_once_checkpointed(run("8MiB", &out, false).spawn().unwrap(), &work, 5);
    // 64 MiB holds 2v2 (15 MB of lanes): the pair is redone in memory.
    assert!(run("64MiB", &out, true).status().unwrap().success());
    assert!(!work.exists(), "the streamed attempt's plane files are removed too");
    assert!(run("64MiB", &reference, false).status().unwrap().success());
    assert_eq!(shards(&reference), shards(&out));
}

#[test]
fn resume_refuses_other_arguments_and_fresh_runs_refuse_old_work() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("w");
    fs::create_dir(&work).unwrap();
    let checkpoint = r#"{"version":17,"run":"4 men, cards Boar,Crab,Elephant,Horse,Ox, no-move loss","finished":[]}"#;
    fs::write(work.join("checkpoint.json"), checkpoint).unwrap();
    let run = |extra: &[&str]| {
        onitb()
            .args(ARGS)
            .args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), root.path().join("o").as_os_str()])
            .args(extra)
            .output()
            .unwrap()
    };
    let fresh = run(&[]);
    assert!(!fresh.status.success());
    assert!(String::from_utf8_lossy(&fresh.stderr).contains("--resume"));
    let other = run(&["--resume"]);
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("not of these arguments"));
    // A work directory of an older onitb is named as such.
    fs::write(work.join("checkpoint.json"), checkpoint.replace(r#""version":17"#, r#""version":16"#)).unwrap();
    let old = run(&["--resume"]);
    assert!(!old.status.success());
    assert!(String::from_utf8_lossy(&old.stderr).contains("another version of onitb (checkpoint version 16"));
    assert!(!root.path().join("o").exists());
}

/// Whether the checkpoint in `work` says the pair in progress has no steps
/// left (only finishing: applying the decision log, the draws).
fn steps_done(work: &Path) -> bool {
    let Ok(bytes) = fs::read(work.join("checkpoint.json")) else { return false };
    let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    record["pair"]["steps_done"].as_bool() == Some(true)
}

#[test]
fn a_run_killed_after_its_last_step_resumes_bit_identical() {
    let root = tempfile::tempdir().unwrap();
    let run = |work: &Path, out: &Path, resume: bool| generate(work, out, resume, &[]);
    let reference = root.path().join("reference");
    assert!(run(&root.path().join("w0"), &reference, false).status().unwrap().success());
    let (work, out) = (root.path().join("w1"), root.path().join("out"));
    let mut child = run(&work, &out, false).spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if steps_done(&work) {
            child.kill().unwrap(); // SIGKILL, while finishing the pair or just after
            child.wait().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if !out.exists() {
        assert!(run(&work, &out, true).status().unwrap().success());
    }
    assert_eq!(shards(&reference), shards(&out));
}

/// A second run in a work directory that a run is using is refused at
/// once, naming the directory, and the first run's table comes out as an
/// undisturbed run's: two runs writing one directory's work files would
/// each overwrite what the other's checkpoint names.
#[test]
fn a_second_run_in_a_work_directory_in_use_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let run = |work: &Path, out: &Path, resume: bool| generate(work, out, resume, &["--checkpoint-every", "0"]);
    let reference = root.path().join("reference");
    assert!(run(&root.path().join("w0"), &reference, false).status().unwrap().success());

    let (work, out) = (root.path().join("w1"), root.path().join("out"));
    let mut first = run(&work, &out, false).spawn().unwrap();
    while checkpointed_depth(&work).is_none() {
        assert!(first.try_wait().unwrap().is_none(), "the first run is still in its streamed pair");
        std::thread::sleep(Duration::from_millis(1));
    }
    for resume in [true, false] {
        let second = run(&work, &root.path().join("out2"), resume).stderr(Stdio::piped()).output().unwrap();
        assert!(!second.status.success());
        let message = String::from_utf8_lossy(&second.stderr);
        assert!(message.contains("in use by another onitb run") && message.contains("w1"), "{message}");
    }
    assert!(first.wait().unwrap().success());
    assert_eq!(shards(&reference), shards(&out));
    assert!(!work.exists(), "the finished run cleaned its work directory");
    assert!(!root.path().join("out2").exists());
}

/// Whole shards in the partial output of the run writing `out`, with
/// their inodes.
fn whole_shards_in_partial(out: &Path) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let prefix = format!(".{}.partial-", out.file_name().unwrap().to_string_lossy());
    let mut found = Vec::new();
    for entry in fs::read_dir(out.parent().unwrap()).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for shard in fs::read_dir(entry.path()).into_iter().flatten().flatten() {
            let name = shard.file_name().to_string_lossy().into_owned();
            if name.ends_with(".onitbz") && !name.starts_with('.') {
                found.push((name, shard.metadata().map_or(0, |m| m.ino())));
            }
        }
    }
    found.sort();
    found
}

/// Runs `command` (a `generate` writing `out`) and kills it (SIGKILL) once
/// a shard is whole beside the solve; the whole shards then.
fn kill_once_a_shard_is_whole(mut command: Command, out: &Path) -> Vec<(String, u64)> {
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if !whole_shards_in_partial(out).is_empty() {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    child.wait().unwrap();
    let whole = whole_shards_in_partial(out);
    assert!(!out.exists() && !whole.is_empty(), "killed with a shard whole beside the solve");
    whole
}

/// A 4-men `generate` whose budget leaves room for the writer beside the
/// solve (4 men fit in memory: a killed run's checkpoint holds finished
/// pairs), at zstd `level`.
fn beside_the_solve(work: &Path, out: &Path, level: &str) -> Command {
    let mut command = onitb();
    command.args(["generate", "--men", "4", "--mem", "256MiB", "--threads", "1", "--compress", level]);
    command.args(["--work".as_ref(), work.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    command
}

/// A resumed run that fails (here its work files are damaged) leaves the
/// shards it kept where the next `--resume` finds them, and says so.
#[test]
fn a_resumed_run_that_fails_leaves_its_shards_for_the_next() {
    let root = tempfile::tempdir().unwrap();
    let (work, out) = (root.path().join("w"), root.path().join("out"));
    let whole = kill_once_a_shard_is_whole(beside_the_solve(&work, &out, "3"), &out);
    // Every packed values file damaged: no shard can be written from them.
    for entry in fs::read_dir(&work).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".packed") {
            let mut bytes = fs::read(entry.path()).unwrap();
            bytes[20] ^= 0x55;
            fs::write(entry.path(), bytes).unwrap();
        }
    }
    let resumed = beside_the_solve(&work, &out, "3").arg("--resume").output().unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(!resumed.status.success(), "{stderr}");
    assert!(stderr.contains("damaged") && stderr.contains("for --resume"), "{stderr}");
    let left: Vec<String> = whole_shards_in_partial(&out).into_iter().map(|(name, _)| name).collect();
    assert!(whole.iter().all(|(name, _)| left.contains(name)), "{whole:?} kept in {left:?}");
}

/// A run killed once shards are whole beside the solve keeps them on
/// `--resume`: it says so, the files are those the killed run wrote (not
/// written again), and the table is an uninterrupted run's. Resumed at
/// another zstd level, they are written again.
#[test]
fn a_resumed_run_keeps_the_shards_the_killed_run_finished() {
    use std::os::unix::fs::MetadataExt;
    let root = tempfile::tempdir().unwrap();
    let args = beside_the_solve;
    for (killed_level, resumed_level) in [("3", "3"), ("1", "3")] {
        let case = root.path().join(format!("{killed_level}-{resumed_level}"));
        fs::create_dir(&case).unwrap();
        let reference = case.join("reference");
        let status = args(&case.join("w0"), &reference, resumed_level).arg("--quiet").status().unwrap();
        assert!(status.success());

        let (work, out) = (case.join("w1"), case.join("out"));
        let whole = kill_once_a_shard_is_whole(args(&work, &out, killed_level), &out);
        // A resume with other rules is refused, and leaves the shards as
        // they were (its check finds them unfit, but removes nothing).
        let wrong = args(&work, &out, resumed_level).args(["--resume", "--no-move", "loss"]).output().unwrap();
        assert!(!wrong.status.success() && String::from_utf8_lossy(&wrong.stderr).contains("not of these arguments"));
        assert_eq!(whole_shards_in_partial(&out), whole, "the refused run destroyed nothing");

        let resumed = args(&work, &out, resumed_level).arg("--resume").output().unwrap();
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        assert!(resumed.status.success(), "{stderr}");
        assert_eq!(shards(&reference), shards(&out), "{killed_level} then {resumed_level}");
        for (name, inode) in &whole {
            let material = name.trim_end_matches(".onitbz");
            let now = fs::metadata(out.join(name)).unwrap().ino();
            if killed_level == resumed_level {
                assert!(stderr.contains(&format!("{material}: shard kept from the interrupted run")), "{stderr}");
                assert_eq!(now, *inode, "{name} is the killed run's file");
            } else {
                let again =
                    format!("shard {name} is written again: it was compressed at level 1, this run compresses at 3");
                assert!(stderr.contains(&again), "{stderr}");
            }
        }
        let leftovers: Vec<_> = fs::read_dir(&case)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("partial"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// A card set whose 2v2 loses in up to 292 plies, deeper than a value byte
/// holds (README, "Limits"): streamed at 8 MiB, 2v2 goes on in value words
/// at 253 plies. Killed before and after that, with the checkpoint saying
/// which width the pair was in, resumed runs give the table a run in
/// memory gives.
#[test]
fn a_pair_that_widens_to_value_words_resumes_bit_identical() {
    let root = tempfile::tempdir().unwrap();
    let cards = ["--cards", "Cobra,Eel,Goose,Mantis,Rooster", "--checkpoint-every", "0"];
    let reference = root.path().join("reference");
    let in_memory = onitb()
        .args(["generate", "--men", "4", "--quiet", "--out"])
        .arg(&reference)
        .args(&cards[..2])
        .status()
        .unwrap();
    assert!(in_memory.success());
    let (work, out) = (root.path().join("w"), root.path().join("out"));
    let words = || {
        let record: serde_json::Value =
            serde_json::from_slice(&fs::read(work.join("checkpoint.json")).unwrap()).unwrap();
        record["pair"]["words"].as_bool()
    };
    for (kill_after, in_words) in [(100u64, false), (270, true)] {
        let child = generate(&work, &out, work.join("checkpoint.json").exists(), &cards).spawn().unwrap();
        kill_once_checkpointed(child, &work, kill_after);
        assert_eq!(words(), Some(in_words), "killed after depth {kill_after}");
    }
    assert!(generate(&work, &out, true, &cards).status().unwrap().success());
    assert_eq!(shards(&reference), shards(&out));
}

/// A streamed pair's steps hold depths, not values, so its width can change
/// between runs: a run resumed from a checkpoint that says the pair is in
/// value words (as one that widened would) goes on in words, and since
/// none of its values is deeper than a byte holds, finishes it in bytes,
/// giving the table of an uninterrupted run bit for bit.
#[test]
fn a_streamed_pair_resumed_in_words_is_finished_in_bytes() {
    let root = tempfile::tempdir().unwrap();
    let run = |work: &Path, out: &Path, resume: bool| generate(work, out, resume, &["--checkpoint-every", "0"]);
    let reference = root.path().join("reference");
    assert!(run(&root.path().join("w0"), &reference, false).status().unwrap().success());
    let (work, out) = (root.path().join("w1"), root.path().join("out"));
    kill_once_checkpointed(run(&work, &out, false).spawn().unwrap(), &work, 5);
    let path = work.join("checkpoint.json");
    let record = fs::read_to_string(&path).unwrap();
    assert!(record.contains(r#""words":false"#), "{record}");
    fs::write(&path, record.replace(r#""words":false"#, r#""words":true"#)).unwrap();
    assert!(run(&work, &out, true).status().unwrap().success());
    assert_eq!(shards(&reference), shards(&out));
}
