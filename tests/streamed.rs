//! The streamed solver against the resident one: tables must be
//! bit-identical whatever the budget, and a run resumed from its checkpoint
//! must give the same table.

use onitb::Table;
use onitb::blockio::IoChoice;
use onitb::rules::{CardSet, NoMoveRule, Rules};
use onitb::solver::{self, SolveConfig, SolveError, StepTimes};
use std::time::Duration;

fn rules(no_move: NoMoveRule) -> Rules {
    Rules { cards: CardSet::default_set(), no_move }
}

fn assert_same(a: &Table, b: &Table) {
    assert_eq!(a.materials().len(), b.materials().len());
    for (x, y) in a.materials().iter().zip(b.materials()) {
        assert_eq!(x.index.material, y.index.material);
        assert!(x.values == y.values, "material {} differs", x.index.material);
    }
}

/// Solves streamed with `times` the smallest budget the table admits (the
/// refusal of a 1-byte budget names it).
fn streamed_at_minimum(rules: &Rules, per_side: usize, io: IoChoice, times: f64) -> Table {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SolveConfig {
        work_dir: Some(dir.path().join("work")),
        budget_bytes: Some(1),
        resume: false,
        force_streamed: true,
        io,
        // Checkpoints after every step: their slot switching must not
        // change a bit.
        checkpoint_every: Duration::ZERO,
        ..SolveConfig::default()
    };
    let minimum = match solver::solve_with(rules, per_side, &config, &|_| {}) {
        Err(SolveError::BudgetTooSmall { minimum_bytes, .. }) => minimum_bytes,
        other => panic!("expected BudgetTooSmall, got {:?}", other.err()),
    };
    assert!(!dir.path().join("work").exists(), "a refused run leaves nothing behind");
    config.budget_bytes = Some((minimum as f64 * times) as u64);
    let solved = solver::solve_with(rules, per_side, &config, &|_| {}).unwrap();
    assert!(solved.streamed_pairs == solved.pairs);
    solved.into_table().unwrap()
}

#[test]
fn streamed_4_men_is_bit_identical_to_resident_under_both_rules_and_io_back_ends() {
    for (no_move, io) in [(NoMoveRule::Pass, IoChoice::Uring), (NoMoveRule::Loss, IoChoice::Pread)] {
        let rules = rules(no_move);
        let resident = Table::generate(&rules, 2).unwrap();
        // The smallest budget that holds one group: many batches per slice.
        let minimal = streamed_at_minimum(&rules, 2, io, 1.0);
        assert_same(&resident, &minimal);
        // Room for two windows: the next batch is read while one is solved.
        let pipelined = streamed_at_minimum(&rules, 2, io, 2.5);
        assert_same(&resident, &pipelined);
    }
}

/// Other card sets give other capture depths, draws and holds: the
/// decision log and the capture plane must still give the resident bytes.
#[test]
fn streamed_4_men_matches_resident_on_other_card_sets() {
    for names in [["Tiger", "Dragon", "Frog", "Rabbit", "Crane"], ["Monkey", "Eel", "Cobra", "Goose", "Rooster"]] {
        let rules = Rules { cards: CardSet::from_names(&names).unwrap(), no_move: NoMoveRule::Pass };
        let resident = Table::generate(&rules, 2).unwrap();
        assert_same(&resident, &streamed_at_minimum(&rules, 2, IoChoice::Pread, 1.0));
    }
}

#[test]
fn a_budget_too_small_is_refused_with_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let config = SolveConfig { work_dir: Some(dir.path().join("w")), budget_bytes: Some(1), ..SolveConfig::default() };
    match solver::solve_with(&rules(NoMoveRule::Pass), 2, &config, &|_| {}) {
        Err(SolveError::BudgetTooSmall { budget_bytes: 1, minimum_bytes }) => assert!(minimum_bytes > 4096),
        other => panic!("expected BudgetTooSmall, got {:?}", other.err()),
    }
}

/// The plan the solver announces before it starts (which pairs it will
/// stream, which it will solve in memory: what the ETA goes by) is what it
/// then does, pair by pair.
#[test]
fn the_announced_plan_is_what_the_solver_does() {
    use onitb::solver::Progress;
    use std::sync::Mutex;
    let dir = tempfile::tempdir().unwrap();
    let config = SolveConfig {
        work_dir: Some(dir.path().join("work")),
        // Holds the 2v2 pair's lanes, not its mirror pair's: a mix.
        budget_bytes: Some(8 << 20),
        resume: false,
        force_streamed: false,
        io: IoChoice::Auto,
        checkpoint_every: Duration::from_secs(60),
        ..SolveConfig::default()
    };
    let events = Mutex::new(Vec::new());
    let solved = solver::solve_with(&rules(NoMoveRule::Pass), 2, &config, &|p| events.lock().unwrap().push(p)).unwrap();
    let events = events.into_inner().unwrap();
    let Some(Progress::RunStarted { pairs: plan, .. }) = events.first() else { panic!("RunStarted comes first") };
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Progress::MaterialStarted { materials, layouts, streamed, .. } => Some((*materials, *layouts, *streamed)),
            _ => None,
        })
        .collect();
    let planned: Vec<_> = plan.iter().map(|p| (p.materials, p.layouts, p.streamed)).collect();
    assert_eq!(planned, started);
    assert_eq!(solved.pairs, plan.len());
    assert_eq!(solved.streamed_pairs, plan.iter().filter(|p| p.streamed).count());
    assert!(plan.iter().any(|p| p.streamed) && plan.iter().any(|p| !p.streamed), "{plan:?}");
    // Streamed steps say where their time went; resident ones have none of
    // it to report.
    let mut streamed = false;
    let mut computing = Duration::ZERO;
    for event in &events {
        match event {
            Progress::MaterialStarted { streamed: s, .. } => streamed = *s,
            Progress::Step { times, .. } if !streamed => assert_eq!(*times, StepTimes::default()),
            Progress::Step { times, .. } => computing += times.computing,
            _ => {}
        }
    }
    assert!(computing > Duration::ZERO, "streamed steps report their kernels' time");
    // Each streamed material's finishing reports its batches, 1 to all of
    // them in turn, before its pair is done, with the bytes each batch
    // packed counted as written; resident ones report none.
    let streamed_materials: Vec<_> = plan.iter().filter(|p| p.streamed).flat_map(|p| p.materials).collect();
    for material in onitb::index::Material::all_up_to(2) {
        let finishing: Vec<(usize, usize, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Progress::Finishing { material: m, done, batches, io } if *m == material => {
                    Some((*done, *batches, io.bytes_written))
                }
                _ => None,
            })
            .collect();
        if !streamed_materials.contains(&material) {
            assert!(finishing.is_empty(), "{material}");
            continue;
        }
        let batches = finishing.first().expect("a streamed material reports its finishing").1;
        let reported: Vec<_> = finishing.iter().map(|&(done, batches, _)| (done, batches)).collect();
        assert_eq!(reported, (1..=batches).map(|k| (k, batches)).collect::<Vec<_>>(), "{material}");
        assert!(finishing.windows(2).all(|w| w[0].2 < w[1].2), "{material}: {finishing:?}");
    }
}

/// Initialisation's no-move losses are all that a first win step can move
/// into, besides capture events at depth 1. Under the pass rule there are
/// neither (a capture wins in one only by taking the master, which
/// initialisation decides), so the first step visits no group, resident or
/// streamed (it visited every group before session 22). The tables stay
/// those of the resident solver and the reference (the other tests). (The
/// default set's tables have no no-move loss up to 6 men: the loss rule's
/// counts are the pass rule's there.)
#[test]
fn the_first_win_step_visits_only_groups_that_can_win_in_it() {
    use onitb::solver::Progress;
    use std::sync::Mutex;
    for force_streamed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = SolveConfig {
            work_dir: force_streamed.then(|| dir.path().join("work")),
            budget_bytes: force_streamed.then_some(64 << 20),
            resume: false,
            force_streamed,
            io: IoChoice::Auto,
            checkpoint_every: Duration::from_secs(60),
            ..SolveConfig::default()
        };
        let events = Mutex::new(Vec::new());
        solver::solve_with(&rules(NoMoveRule::Pass), 2, &config, &|p| events.lock().unwrap().push(p)).unwrap();
        let first_steps: Vec<(u64, u64)> = events
            .into_inner()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Progress::Step { depth_plies: 1, groups_visited, groups, .. } => Some((*groups_visited, *groups)),
                _ => None,
            })
            .collect();
        assert!(first_steps.len() >= 3, "{first_steps:?}");
        assert!(first_steps.iter().all(|&(visited, groups)| visited == 0 && groups > 0), "{first_steps:?}");
    }
}

/// Values never take their raw size on disk: a streamed pair has no value
/// file through initialisation and the steps (the capture schedule and the
/// decision log stand in for it), and every finished material is packed.
#[test]
fn values_take_no_raw_disk_and_finished_materials_are_packed() {
    use onitb::solver::Progress;
    use std::sync::Mutex;
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let config = SolveConfig {
        work_dir: Some(work.clone()),
        budget_bytes: Some(64 << 20),
        resume: false,
        force_streamed: true,
        io: IoChoice::Auto,
        checkpoint_every: Duration::ZERO,
        ..SolveConfig::default()
    };
    let in_progress = Mutex::new(Vec::new());
    let steps_seen = Mutex::new(0u32);
    let most_sparse = Mutex::new(0u64);
    let packed_seen = Mutex::new(std::collections::BTreeSet::new());
    let names = || -> Vec<String> {
        std::fs::read_dir(&work).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    let check = |p: Progress| match p {
        Progress::MaterialStarted { materials, .. } => *in_progress.lock().unwrap() = materials.to_vec(),
        Progress::Step { depth_plies, groups_sparse, .. } => {
            let mut most = most_sparse.lock().unwrap();
            *most = (*most).max(groups_sparse);
            let names = names();
            assert!(!names.iter().any(|n| n.ends_with(".values")), "a raw value file at step {depth_plies}: {names:?}");
            for material in in_progress.lock().unwrap().iter() {
                let packed = format!("{material}.packed");
                assert!(!names.contains(&packed), "{packed} before its pair is finished");
            }
            *steps_seen.lock().unwrap() += 1;
        }
        Progress::MaterialDone { materials } => {
            for material in materials {
                let bytes = std::fs::metadata(work.join(format!("{material}.packed"))).unwrap().len();
                let raw = onitb::index::MaterialIndex::new(material).layouts() * 30;
                assert!(bytes < raw / 2, "{material}: {bytes} packed bytes for {raw} raw");
                packed_seen.lock().unwrap().insert(material);
            }
        }
        _ => {}
    };
    let solved = solver::solve_with(&rules(NoMoveRule::Loss), 2, &config, &check).unwrap();
    assert!(*steps_seen.lock().unwrap() > 10);
    // The late steps work on sparse own planes (and the table is the same).
    assert!(*most_sparse.lock().unwrap() > 0, "no group turned sparse");
    assert_eq!(packed_seen.lock().unwrap().len(), 4, "1v1, 1v2, 2v1, 2v2");
    // Packed values are handed on in batches of groups unpacked in
    // parallel; any batch size gives the same bytes, a group at a time
    // for a batch smaller than any group, all at once for an unbounded one.
    let resident = Table::generate(&rules(NoMoveRule::Loss), 2).unwrap();
    for finished in &solved.materials {
        let expected = &resident.material(finished.material()).unwrap().values;
        for batch_bytes in [0, 1000, 30_000, usize::MAX] {
            let mut got = Vec::new();
            let mut chunks = 0;
            finished
                .for_each_chunk(batch_bytes, |chunk| {
                    got.extend_from_slice(chunk);
                    chunks += 1;
                    Ok::<_, SolveError>(())
                })
                .unwrap();
            assert!(got == *expected, "{}, batches of {batch_bytes} bytes", finished.material());
            match batch_bytes {
                0 => assert_eq!(chunks, finished.index().groups().len(), "one group at a time"),
                usize::MAX => assert_eq!(chunks, 1, "one batch"),
                _ => {}
            }
        }
    }
    assert_same(&resident, &solved.into_table().unwrap());
}
