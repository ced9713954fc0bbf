//! The streamed solver against the resident one: tables must be
//! bit-identical whatever the budget, and a run resumed from its checkpoint
//! must give the same table.

use onitb::Table;
use onitb::blockio::IoChoice;
use onitb::rules::{CardSet, NoMoveRule, Rules};
use onitb::solver::{self, SolveConfig, SolveError};

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

/// Solves streamed with the smallest budget each pair admits: start with a
/// budget of 1 byte; each refusal names the minimum for the pair at hand,
/// and the run is resumed from its checkpoint with that budget. Returns the
/// table and the number of resumes.
fn streamed_at_minimum(rules: &Rules, per_side: usize, io: IoChoice) -> (Table, usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SolveConfig {
        work_dir: Some(dir.path().join("work")),
        budget_bytes: Some(1),
        resume: false,
        force_streamed: true,
        io,
    };
    let mut resumes = 0;
    loop {
        match solver::solve_with(rules, per_side, &config, &|_| {}) {
            Ok(solved) => {
                assert!(solved.streamed_pairs > 0);
                return (solved.into_table().unwrap(), resumes);
            }
            Err(SolveError::BudgetTooSmall { budget_bytes, minimum_bytes }) => {
                assert!(minimum_bytes > budget_bytes);
                config.budget_bytes = Some(minimum_bytes);
                config.resume = true;
                resumes += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn streamed_4_men_is_bit_identical_to_resident_under_both_rules_and_io_back_ends() {
    for (no_move, io) in [(NoMoveRule::Pass, IoChoice::Uring), (NoMoveRule::Loss, IoChoice::Pread)] {
        let rules = rules(no_move);
        let resident = Table::generate(&rules, 2).unwrap();
        // The smallest budget that holds one group: many batches per slice.
        let (minimal, resumes) = streamed_at_minimum(&rules, 2, io);
        assert!(resumes >= 2, "the minimum grows with the material");
        assert_same(&resident, &minimal);
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
