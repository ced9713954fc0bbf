//! Whole-table counts against the published numbers.
use onitb::rules::{CardSet, NoMoveRule, Rules};
use onitb::{Stats, Table};

fn stats(max_per_side: usize, no_move: NoMoveRule) -> Stats {
    let rules = Rules { cards: CardSet::default_set(), no_move };
    Table::generate(&rules, max_per_side).unwrap().stats().0
}

#[test]
fn two_men_counts_match_published_tables() {
    for rule in [NoMoveRule::Loss, NoMoveRule::Pass] {
        let s = stats(1, rule);
        assert_eq!((s.states, s.win_in_1, s.wins, s.losses, s.draws), (16_590, 5_181, 11_514, 5_076, 0), "{rule:?}");
    }
}

#[test]
fn four_men_counts_match_published_tables() {
    for rule in [NoMoveRule::Loss, NoMoveRule::Pass] {
        let s = stats(2, rule);
        assert_eq!(
            (s.states, s.win_in_1, s.wins, s.losses, s.draws, s.longest_loss_plies),
            (9_174_270, 3_787_692, 6_752_579, 2_419_523, 2_168, 58),
            "{rule:?}"
        );
    }
}

#[test]
fn tables_are_bit_identical_under_any_thread_count() {
    let cards = CardSet::from_names(&["Tiger", "Crab", "Monkey", "Ox", "Eel"]).unwrap();
    let rules = Rules { cards, no_move: NoMoveRule::Pass };
    let solve = |threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| Table::generate(&rules, 2).unwrap())
    };
    let single = solve(1);
    for threads in [2, 3, 7] {
        let other = solve(threads);
        for (a, b) in single.materials().iter().zip(other.materials()) {
            assert!(a.values == b.values, "material {} differs with {threads} threads", a.index.material);
        }
    }
}
