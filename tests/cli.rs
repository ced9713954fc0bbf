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

/// `--verbose`: a line for every step (the default is one every 10 plies
/// or 10 seconds), and streamed steps say where their time went.
#[test]
fn verbose_prints_every_step() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let depths = |progress: &str, pair: &str| -> Vec<u32> {
        let part = progress.split(&format!("{pair}: started")).nth(1).unwrap().split(&format!("{pair}: done")).next();
        part.unwrap().lines().filter_map(|l| l.split("depth ").nth(1)?.split(" plies,").next()?.parse().ok()).collect()
    };
    let out = succeeds(cwd, &["generate", "--men", "4", "--out", "quiet"]);
    let few = depths(&text(&out.stderr), "2v2");
    let out = succeeds(cwd, &["generate", "--men", "4", "--out", "memory", "--verbose"]);
    let every = depths(&text(&out.stderr), "2v2");
    assert!(every.len() > 20 && every.len() > few.len(), "{every:?} against {few:?}");
    assert_eq!(every, (1..=every.len() as u32).collect::<Vec<_>>(), "one line per step");
    assert!(text(&out.stderr).contains("  initialised, "), "and one for initialisation");
    let args = ["generate", "--men", "4", "--mem", "8MiB", "--work", "w", "--out", "streamed", "-v"];
    let progress = text(&succeeds(cwd, &args).stderr);
    let streamed = progress.split("2v2: started").nth(1).unwrap();
    assert!(streamed.contains("streamed"), "{progress}");
    let step = streamed.lines().find(|l| l.contains("depth 2 plies,")).unwrap();
    assert!(step.contains("computing") && step.contains("work files: read"), "{step}");
    // Before the solve, what the streamed pair's work files will need.
    let disk = progress.lines().find(|l| l.contains("of disk at the peak (an estimate)")).expect(&progress);
    assert!(disk.contains("work directory: about ") && disk.contains(" available"), "{disk}");
    fails(cwd, &["generate", "--men", "4", "--out", "both", "--quiet", "--verbose"], "--quiet");
}

#[test]
fn generate_can_write_compressed_shards_the_same_as_compress_does() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    // Straight from the streamed solver, and raw then compressed.
    let out = succeeds(
        cwd,
        &["generate", "--men", "4", "--mem", "8MiB", "--work", "w", "--out", "direct", "--compress", "3"],
    );
    // A streamed pair's closing line says where its win and its loss
    // steps' time went.
    let progress = text(&out.stderr);
    let closing = progress.lines().find(|l| l.contains("done after") && l.contains("steps:")).expect(&progress);
    assert!(closing.contains("; win steps: computing ") && closing.contains("; loss steps: computing "), "{closing}");
    succeeds(cwd, &["generate", "--men", "4", "--out", "raw", "--quiet"]);
    succeeds(cwd, &["compress", "raw", "after", "--level", "3", "--quiet"]);
    assert_eq!(entries(&cwd.join("direct")), ["1v1.onitbz", "1v2.onitbz", "2v1.onitbz", "2v2.onitbz"]);
    for name in entries(&cwd.join("direct")) {
        let direct = std::fs::read(cwd.join("direct").join(&name)).unwrap();
        assert!(direct == std::fs::read(cwd.join("after").join(&name)).unwrap(), "{name} differs");
    }
    // With a work directory and no budget, the shards of every pair but
    // the last may be written beside the solve: the same files.
    succeeds(cwd, &["generate", "--men", "4", "--work", "wb", "--out", "beside", "--compress", "3", "--quiet"]);
    assert_eq!(entries(&cwd.join("beside")), entries(&cwd.join("after")));
    for name in entries(&cwd.join("beside")) {
        let beside = std::fs::read(cwd.join("beside").join(&name)).unwrap();
        assert!(beside == std::fs::read(cwd.join("after").join(&name)).unwrap(), "{name} differs");
    }
    assert!(!cwd.join("wb").exists(), "the work directory is cleaned");
    assert_eq!(counts(&stats_json(cwd, "direct")["total"])[..5], [9_174_270, 3_787_692, 6_752_579, 2_419_523, 2_168]);
    succeeds(cwd, &["verify", "direct"]);
    // A level zstd lacks is refused before anything is solved.
    fails(cwd, &["generate", "--men", "4", "--out", "bad", "--compress", "99"], "level");
    assert!(!cwd.join("bad").exists());
}

#[test]
fn bad_arguments_are_refused_and_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let cases: [(&[&str], &str); 12] = [
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
        // More memory than any machine this runs on has (5v5 alone: 1.02 TiB).
        (&["--men", "10"], "solving 5v5 in memory needs at least 1.02 TiB"),
        (&["--men", "10", "--work", "w", "--mem", "100TiB"], "--mem 100 TiB is more than"),
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

/// A card set whose 4-men table holds a loss deeper than the value byte's
/// 252 plies (2v2 goes to 292 in the reference solver; under either rule
/// the only one of the 4368 at 4 men, as `scripts/survey-depths.sh` found).
/// In memory, 2v2 goes on in value words where bytes end: its shard is format
/// version 2, the others' stay bytes (version 1), `stats` gives the
/// depths and `verify --deep` finds every value right; with `--compress`,
/// 2v2's shard is a compressed shard of words that answers as the raw one.
/// With a work directory the same, 2v2 solved in memory or streamed.
#[test]
fn a_table_too_deep_for_the_value_byte_is_solved_in_words_in_memory_and_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let deep = ["generate", "--men", "4", "--cards", "Cobra,Eel,Goose,Mantis,Rooster", "--out", "t", "--quiet"];
    let loud = succeeds(cwd, &deep[..deep.len() - 1]);
    let stderr = text(&loud.stderr);
    assert!(stderr.contains("2v2: needs a loss deeper than 252 plies; going on with two-byte values"), "{stderr}");
    let version = |shard: &str| fs::read(cwd.join("t").join(shard)).unwrap()[8..10].to_vec();
    assert_eq!(version("2v2.onitb"), [2, 0], "value words");
    for shard in ["1v1.onitb", "1v2.onitb", "2v1.onitb"] {
        assert_eq!(version(shard), [1, 0], "{shard}: value bytes");
    }
    let stats = stats_json(cwd, "t");
    let longest_loss = |stats: &Value| counts(stats)[6];
    assert!(longest_loss(&stats["total"]) > 252, "{stats}");
    for material in stats["materials"].as_array().unwrap() {
        let deep = material["material"] == "2v2";
        assert_eq!(longest_loss(material) > 252, deep, "{material}");
    }
    let out = text(&succeeds(cwd, &["verify", "t"]).stdout);
    assert!(out.contains("checksums ok: 4 shards"), "{out}");
    // Every value re-derived from its successors, across the two widths.
    let out = text(&succeeds(cwd, &["verify", "--deep", "t"]).stdout);
    assert!(out.contains("deep check ok"), "{out}");
    // Compressed, 2v2's shard holds words too, and answers as the raw one.
    let compressed =
        ["generate", "--men", "4", "--cards", "Cobra,Eel,Goose,Mantis,Rooster", "--out", "z", "--compress"];
    succeeds(cwd, &[&compressed[..], &["--quiet"]].concat());
    assert_eq!(entries(&cwd.join("z")), ["1v1.onitbz", "1v2.onitbz", "2v1.onitbz", "2v2.onitbz"]);
    assert_eq!(fs::read(cwd.join("z/2v2.onitbz")).unwrap()[8..10], [2, 0], "value words");
    assert!(
        fs::metadata(cwd.join("z/2v2.onitbz")).unwrap().len()
            < fs::metadata(cwd.join("t/2v2.onitb")).unwrap().len() / 8
    );
    assert_eq!(stats_json(cwd, "z"), stats);
    let out = text(&succeeds(cwd, &["verify", "--deep", "z"]).stdout);
    assert!(out.contains("deep check ok"), "{out}");
    let open = |dir: &str| onitb::Tablebase::open(&cwd.join(dir)).unwrap();
    let (raw, packed) = (open("t"), open("z"));
    let index = onitb::index::MaterialIndex::new(onitb::index::Material::new(2, 2));
    for n in (0..index.layouts()).step_by(101) {
        let words = |t: &onitb::Tablebase| t.layout_words(index.material, n).unwrap();
        assert_eq!(words(&packed), words(&raw), "layout {n}");
    }
    fs::remove_dir_all(cwd.join("z")).unwrap();
    fs::remove_dir_all(cwd.join("t")).unwrap();

    // Through a work directory, 2v2 goes to words as well while it is
    // solved in memory: the same shards.
    let shards = |dir: &str| {
        let mut names = entries(&cwd.join(dir));
        names.sort();
        names.into_iter().map(|name| (fs::read(cwd.join(dir).join(&name)).unwrap(), name)).collect::<Vec<_>>()
    };
    succeeds(cwd, &[&deep[..], &["--work", "w", "--mem", "1GiB"]].concat());
    let through_disk = shards("t");
    fs::remove_dir_all(cwd.join("t")).unwrap();
    succeeds(cwd, &deep);
    assert!(through_disk == shards("t"), "the same table either way");
    fs::remove_dir_all(cwd.join("t")).unwrap();

    // Streamed, the same again: 2v2 widens where it stands.
    let streamed = [&deep[..], &["--work", "w", "--mem", "8MiB"]].concat();
    let stderr = text(&succeeds(cwd, &streamed).stderr);
    assert!(!stderr.contains("error"), "{stderr}");
    assert!(through_disk == shards("t"), "streamed");
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

const WON: &str = "1b3/2B2/5/5/1rR2 r Boar,Ox Crab,Horse Elephant";

#[test]
fn compress_verify_probe_and_play() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    succeeds(cwd, &["generate", "--men", "4", "--out", "t4", "--quiet"]);
    let out = succeeds(cwd, &["compress", "t4", "z4", "--level", "3"]);
    let report = text(&out.stdout);
    assert!(report.contains("2v2: 8394540 states") && report.contains("bits/state"), "{report}");
    assert_eq!(entries(&cwd.join("z4")), ["1v1.onitbz", "1v2.onitbz", "2v1.onitbz", "2v2.onitbz"]);
    assert_eq!(stats_json(cwd, "z4"), stats_json(cwd, "t4"));
    let out = succeeds(cwd, &["verify", "t4", "z4/2v2.onitbz"]);
    assert!(text(&out.stdout).contains("checksums ok: 5 shards"), "{}", text(&out.stdout));
    let out = succeeds(cwd, &["verify", "--deep", "z4"]);
    assert!(text(&out.stdout).contains("deep check ok"), "{}", text(&out.stdout));
    let out = text(&succeeds(cwd, &["verify", "--deep", "--sample", "5000", "--seed", "5", "z4"]).stdout);
    assert!(out.contains("a sample of 5000 layouts, --seed 5") && out.contains("deep check ok: "), "{out}");
    assert!(out.contains(" layouts of 331800 ("), "{out}");

    let probe = |dir: &str| -> Value {
        serde_json::from_slice(&succeeds(cwd, &["probe", dir, WON, "--json"]).stdout).expect("probe --json prints JSON")
    };
    let json = probe("z4");
    assert_eq!(json, probe("t4"), "raw and compressed tables answer alike");
    assert_eq!(
        (json["to_move"].as_str(), json["wdl"].as_str(), json["plies"].as_u64()),
        (Some("red"), Some("win"), Some(19))
    );
    let moves = json["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 7);
    assert_eq!((moves[0]["wdl"].as_str(), moves[0]["plies"].as_u64()), (Some("win"), Some(19)));
    assert!(moves.iter().all(|m| m["result"].is_string() && m["card"].is_string()));
    // The position after the best move is a loss in 18 for Blue.
    let next = moves[0]["result"].as_str().unwrap();
    let after: Value = serde_json::from_slice(&succeeds(cwd, &["probe", "z4", next, "--json"]).stdout).unwrap();
    assert_eq!(
        (after["to_move"].as_str(), after["wdl"].as_str(), after["plies"].as_u64()),
        (Some("blue"), Some("loss"), Some(18))
    );
    let human = text(&succeeds(cwd, &["probe", "z4", WON]).stdout);
    assert!(human.contains("red: win in 19 plies") && human.contains("1 . r R . ."), "{human}");

    let game = text(&succeeds(cwd, &["play", "t4", WON]).stdout);
    assert!(game.contains("ply 19: red plays") && game.trim_end().ends_with("red wins"), "{game}");
    assert!(!game.contains("ply 20"), "{game}");
}

#[test]
fn probe_and_verify_refuse_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    succeeds(cwd, &["generate", "--men", "4", "--out", "t4", "--quiet"]);
    succeeds(cwd, &["compress", "t4", "z4", "--level", "1", "--quiet"]);
    fails(cwd, &["probe", "z4", "1b3/2B2/5/5/1rR2 r Boar,Ox Crab,Tiger Elephant"], "column 33: 'Tiger' is not one of");
    fails(cwd, &["probe", "z4", "1b3/2B2/5/5/1rRx r Boar,Ox Crab,Horse Elephant"], "column 16: 'x' is not a piece");
    fails(cwd, &["probe", "z4", "bbBb1/5/5/5/rrR2 r Boar,Ox Crab,Horse Elephant"], "material 3v4 is not in this table");
    fails(cwd, &["probe", "z4", "2R2/2B2/5/5/5 b Boar,Ox Crab,Horse Elephant"], "the game is already over");
    fails(cwd, &["compress", "t4", "t4"], "already holds a table");

    // A damaged frame is named with its shard and block.
    let shard = cwd.join("z4/2v2.onitbz");
    let good = fs::read(&shard).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 10;
    bad[last] ^= 4;
    fs::write(&shard, &bad).unwrap();
    let stderr = fails(cwd, &["verify", "t4", "z4"], "1 damaged blocks");
    assert!(stderr.contains("2v2.onitbz") && stderr.contains("compressed block 2"), "{stderr}");
    fails(cwd, &["stats", "z4"], "compressed block 2");
    fs::write(&shard, &good[..good.len() - 1]).unwrap();
    fails(cwd, &["verify", "z4"], "truncated");
    fs::write(&shard, &good).unwrap();

    // A checksum-correct table with one wrong value passes `verify` but not
    // `verify --deep`.
    let table = onitb::Table::generate(&onitb::rules::Rules::default(), 2).unwrap();
    let materials = table
        .materials()
        .iter()
        .map(|m| {
            let mut values = m.values.clone();
            if m.index.material == onitb::index::Material::new(1, 2) {
                let at = values.iter().position(|&b| b == onitb::Value::Loss(2).to_byte()).unwrap();
                values[at] = onitb::Value::Draw.to_byte();
            }
            onitb::table::SolvedMaterial {
                index: onitb::index::MaterialIndex::new(m.index.material),
                values,
                width: m.width,
            }
        })
        .collect();
    let wrong = onitb::Table::new(*table.rules(), 2, materials);
    onitb::store::save(&wrong, &cwd.join("wrong")).unwrap();
    succeeds(cwd, &["verify", "wrong"]);
    let stderr = fails(cwd, &["verify", "--deep", "wrong"], "the table says draw");
    assert!(stderr.contains("material 1v2"), "{stderr}");
    // A sample as big as the table checks every layout.
    let stderr = fails(cwd, &["verify", "--deep", "--sample", "1000000", "wrong"], "the table says draw");
    assert!(stderr.contains("material 1v2"), "{stderr}");
    fails(cwd, &["verify", "--sample", "10", "t4"], "--deep");
    fails(cwd, &["verify", "--deep", "--sample", "0", "t4"], "--sample");
    fails(cwd, &["verify", "--deep", "--seed", "3", "t4"], "--sample");
    succeeds(cwd, &["compress", "t4", "w4", "--wdl", "--level", "1", "--quiet"]);
    fails(cwd, &["verify", "--deep", "--sample", "10", "w4"], "win/draw/loss only");
}

/// A table of value words (the 4-men table widened, as the solver writes
/// tables too deep for bytes) through the binary: `stats`, `probe`, `play`
/// and `verify` (`--deep` too) answer as on the byte table, compressed
/// or not; its win/draw/loss-only compression is the byte table's.
#[test]
fn word_tables_answer_as_byte_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let table = onitb::Table::generate(&onitb::rules::Rules::default(), 2).unwrap();
    onitb::store::save(&table, &cwd.join("t4")).unwrap();
    onitb::store::save(&table.widened(), &cwd.join("w4")).unwrap();
    assert_eq!(succeeds(cwd, &["stats", "w4"]).stdout, succeeds(cwd, &["stats", "t4"]).stdout);
    assert_eq!(stats_json(cwd, "w4"), stats_json(cwd, "t4"));
    let probe = |dir: &str| succeeds(cwd, &["probe", dir, WON, "--json"]).stdout;
    assert_eq!(probe("w4"), probe("t4"));
    assert_eq!(succeeds(cwd, &["play", "w4", WON]).stdout, succeeds(cwd, &["play", "t4", WON]).stdout);
    let out = text(&succeeds(cwd, &["verify", "w4"]).stdout);
    assert!(out.contains("checksums ok: 4 shards"), "{out}");

    assert!(text(&succeeds(cwd, &["verify", "--deep", "w4"]).stdout).contains("deep check ok"));
    let out = text(&succeeds(cwd, &["verify", "--deep", "--sample", "1000", "w4"]).stdout);
    assert!(out.contains("deep check ok"), "{out}");
    // Compressed, as shards of words that answer as the raw ones.
    let out = text(&succeeds(cwd, &["compress", "w4", "z4"]).stdout);
    assert_eq!(out.matches("(two-byte values)").count(), 4, "{out}");
    assert_eq!(stats_json(cwd, "z4"), stats_json(cwd, "t4"));
    assert_eq!(probe("z4"), probe("t4"));
    let out = text(&succeeds(cwd, &["verify", "z4"]).stdout);
    assert!(out.contains("checksums ok: 4 shards"), "{out}");
    let out = text(&succeeds(cwd, &["verify", "--deep", "--sample", "1000", "z4"]).stdout);
    assert!(out.contains("deep check ok"), "{out}");
    // Win/draw/loss only: the byte table's shards.
    succeeds(cwd, &["compress", "--wdl", "--level", "1", "w4", "x4"]);
    succeeds(cwd, &["compress", "--wdl", "--level", "1", "t4", "y4"]);
    for m in ["1v1", "1v2", "2v1", "2v2"] {
        let read = |dir: &str| fs::read(cwd.join(dir).join(format!("{m}.onitbz"))).unwrap();
        assert!(read("x4") == read("y4"), "{m}: the byte table's WDL shard");
    }

    // A flipped value byte is damage.
    let shard = cwd.join("w4").join("2v2.onitb");
    let mut bytes = fs::read(&shard).unwrap();
    let at = bytes.len() - 1001;
    bytes[at] ^= 1;
    fs::write(&shard, &bytes).unwrap();
    let stderr = fails(cwd, &["verify", "w4"], "1 damaged blocks");
    assert!(stderr.contains("2v2.onitb") && stderr.contains("value block"), "{stderr}");
    fails(cwd, &["stats", "w4"], "damaged");
}
