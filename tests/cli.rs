//! The `onitb` binary end to end: `generate`, `stats`, and how bad input is
//! refused (one `error: ` line, non-zero exit, nothing left on disk).

use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn onitb(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onitb")).args(args).current_dir(cwd).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn succeeds(cwd: &Path, args: &[&str]) -> Output {
    let out = onitb(cwd, args);
    assert!(out.status.success(), "{args:?} failed: {}", text(&out.stderr));
    out
}

/// Runs a command that must fail with one `error: ` line containing `needle`.
fn fails(cwd: &Path, args: &[&str], needle: &str) -> String {
    let out = onitb(cwd, args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: expected '{needle}' in: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    stderr
}

fn stats_json(cwd: &Path, dir: &str) -> Value {
    let out = succeeds(cwd, &["stats", dir, "--json"]);
    serde_json::from_slice(&out.stdout).expect("stats --json prints JSON")
}

fn counts(stats: &Value) -> [u64; 7] {
    ["states", "win_in_1", "wins", "losses", "draws", "longest_win_plies", "longest_loss_plies"]
        .map(|key| stats[key].as_u64().unwrap_or_else(|| panic!("no '{key}' in {stats}")))
}

#[test]
fn generate_then_stats_gives_the_published_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();

    let out = succeeds(cwd, &["generate", "--men", "2", "--out", "t2", "--quiet"]);
    assert_eq!(text(&out.stderr), "", "--quiet prints no progress");
    assert!(text(&out.stdout).contains("16590"), "generate prints the statistics");
    let two = stats_json(cwd, "t2");
    assert_eq!(two["men"], 2);
    assert_eq!(two["rules"]["no_move"], "pass");
    assert_eq!(counts(&two["total"])[..5], [16_590, 5_181, 11_514, 5_076, 0]);

    let out = succeeds(cwd, &["generate", "--men", "4", "--no-move", "loss", "--out", "t4", "--threads", "1"]);
    let progress = text(&out.stderr);
    assert!(progress.contains("1v2+2v1: started") && progress.contains("2v2: done"), "{progress}");
    let four = stats_json(cwd, "t4");
    assert_eq!(four["men"], 4);
    assert_eq!(four["rules"]["no_move"], "loss");
    assert_eq!(four["cards"], serde_json::json!(["Boar", "Crab", "Elephant", "Horse", "Ox"]));
    let total = counts(&four["total"]);
    assert_eq!(
        [total[0], total[1], total[2], total[3], total[4], total[6]],
        [9_174_270, 3_787_692, 6_752_579, 2_419_523, 2_168, 58]
    );
    let materials = four["materials"].as_array().unwrap();
    let names: Vec<&str> = materials.iter().map(|m| m["material"].as_str().unwrap()).collect();
    assert_eq!(names, ["1v1", "1v2", "2v1", "2v2"]);
    let states: u64 = materials.iter().map(|m| counts(m)[0]).sum();
    assert_eq!(states, total[0]);

    let human = text(&succeeds(cwd, &["stats", "t4"]).stdout);
    assert!(human.lines().any(|l| l.starts_with("all") && l.contains("9174270")), "{human}");
    assert!(human.lines().any(|l| l.starts_with("2v2")), "{human}");
    assert_eq!(entries(cwd), ["t2", "t4"]);
}

#[test]
fn bad_arguments_are_refused_and_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let cases: [(&[&str], &str); 10] = [
        (&["--men", "2", "--cards", "Boar,Ox,Elephant,Horse,Wolf"], "unknown card 'Wolf'"),
        (&["--men", "2", "--cards", "Boar,Ox,Elephant,Horse,boar"], "'Boar' is named twice"),
        (&["--men", "2", "--cards", "Boar,Ox,Elephant,Horse"], "exactly 5 cards, got 4"),
        (&["--men", "2", "--cards", "Boar,Ox,Elephant,Horse,Crab,Tiger"], "exactly 5 cards, got 6"),
        (&["--men", "0"], "--men must be an even number"),
        (&["--men", "3"], "--men must be an even number"),
        (&["--men", "12"], "--men must be an even number"),
        (&["--men", "2", "--threads", "0"], "--threads"),
        (&["--men", "2", "--no-move", "maybe"], "--no-move"),
        (&["--men", "two"], "--men"),
    ];
    for (args, needle) in cases {
        let mut full = vec!["generate", "--out", "out"];
        full.extend_from_slice(args);
        let stderr = fails(cwd, &full, needle);
        if !needle.starts_with("--no-move") && !args.contains(&"two") {
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        }
        assert_eq!(entries(cwd), Vec::<String>::new(), "{args:?} left something");
    }
}

#[test]
fn an_output_directory_holding_a_table_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    succeeds(cwd, &["generate", "--men", "2", "--out", "t", "--quiet"]);
    let before = fs::read(cwd.join("t/1v1.onitb")).unwrap();
    fails(cwd, &["generate", "--men", "4", "--out", "t"], "already holds a table");
    assert_eq!(entries(cwd), ["t"]);
    assert_eq!(entries(&cwd.join("t")), ["1v1.onitb"]);
    assert_eq!(fs::read(cwd.join("t/1v1.onitb")).unwrap(), before);

    fs::create_dir(cwd.join("busy")).unwrap();
    fs::write(cwd.join("busy/notes.txt"), "mine").unwrap();
    fails(cwd, &["generate", "--men", "2", "--out", "busy"], "not empty");
    assert_eq!(entries(&cwd.join("busy")), ["notes.txt"]);

    // An empty directory is fine to fill.
    fs::create_dir(cwd.join("empty")).unwrap();
    succeeds(cwd, &["generate", "--men", "2", "--out", "empty", "--quiet"]);
    assert_eq!(entries(&cwd.join("empty")), ["1v1.onitb"]);
    assert_eq!(entries(cwd), ["busy", "empty", "t"]);
}

#[test]
fn an_unwritable_output_path_fails_before_solving() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    fs::write(cwd.join("file"), "not a directory").unwrap();
    for (out, needle) in
        [("file/t", "Not a directory"), ("file", "not a directory"), ("missing/t", "No such file or directory")]
    {
        let stderr = fails(cwd, &["generate", "--men", "4", "--out", out], needle);
        assert!(stderr.contains(out), "names the path: {stderr}");
        assert!(!stderr.contains("started"), "failed only after solving: {stderr}");
        assert_eq!(entries(cwd), ["file"]);
    }
}

#[test]
fn stats_refuses_damaged_or_missing_tables_naming_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    succeeds(cwd, &["generate", "--men", "4", "--out", "t", "--quiet"]);
    let shard = cwd.join("t/2v1.onitb");
    let mut bytes = fs::read(&shard).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&shard, &bytes).unwrap();
    let stderr = fails(cwd, &["stats", "t"], "2v1.onitb");
    assert!(stderr.contains("damaged"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    bytes[middle] ^= 0x40;
    bytes[3] ^= 1;
    fs::write(&shard, &bytes).unwrap();
    fails(cwd, &["stats", "t", "--json"], "2v1.onitb': not an onitb raw shard");

    fs::remove_file(&shard).unwrap();
    fails(cwd, &["stats", "t"], "2v1.onitb' of this 4-men table is missing");
    fails(cwd, &["stats", "nowhere"], "nowhere");
    fails(cwd, &["stats", "."], "holds no table");
}
