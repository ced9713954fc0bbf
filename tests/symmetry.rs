//! Left-right mirror symmetry of whole tables. Where a card set holds the
//! mirror image of each of its cards (the default set does: Ox and Horse
//! are each other's), a position and its mirror (columns reversed, every
//! card replaced by its image) have the same value. The solver knows
//! nothing of this symmetry, so it checks every value of a table against
//! another, with no second solver: a wrong successor, a wrong card state
//! or a wrong depth on one side of the board shows up as a mismatch.
//!
//! Steps use the symmetry (they solve one placement of each mirror pair
//! and write the other from it); the last tests check that they give the
//! table that solving every placement gives, resident under any thread
//! count and streamed.

use onitb::Table;
use onitb::rules::{CARDS_PER_GAME, CardSet, CardState, NoMoveRule, Position, Rules};
use onitb::solver::{self, SolveConfig};

fn mirror_square(square: u8) -> u8 {
    square - square % 5 + (4 - square % 5)
}

fn mirror_board(board: u32) -> u32 {
    (0..25u8).filter(|&s| board >> s & 1 != 0).fold(0, |m, s| m | 1 << mirror_square(s))
}

/// Per card slot, the slot of the card whose offsets are its offsets
/// mirrored (dx turned around), or `None` if the set lacks one. Written
/// here again, not taken from `solver::mirror` (private, and the solver's
/// own): the test checks the tables against the rules, not against the
/// solver's idea of the mirror.
fn mirror_slots(cards: &CardSet) -> Option<[usize; CARDS_PER_GAME]> {
    let offsets = |slot: usize, turn: i8| {
        let mut offsets: Vec<(i8, i8)> = cards.card(slot).offsets.iter().map(|&(dx, dy)| (turn * dx, dy)).collect();
        offsets.sort_unstable();
        offsets
    };
    let mut slots = [0; CARDS_PER_GAME];
    for (slot, image) in slots.iter_mut().enumerate() {
        *image = (0..CARDS_PER_GAME).find(|&other| offsets(other, 1) == offsets(slot, -1))?;
    }
    Some(slots)
}

fn mirror_state(state: CardState, slots: &[usize; CARDS_PER_GAME]) -> CardState {
    let (mover, opponent) = (state.mover_cards(), state.opponent_cards());
    CardState::from_hands(
        [slots[mover[0]], slots[mover[1]]],
        [slots[opponent[0]], slots[opponent[1]]],
        slots[state.side()],
    )
    .expect("mirror images of five different cards are five different cards")
}

fn mirror(position: &Position, slots: &[usize; CARDS_PER_GAME]) -> Position {
    Position {
        mover: mirror_board(position.mover),
        opponent: mirror_board(position.opponent),
        mover_master: mirror_square(position.mover_master),
        opponent_master: mirror_square(position.opponent_master),
        cards: mirror_state(position.cards, slots),
    }
}

/// Compares every state of the `max_per_side` table with its mirror;
/// returns the number of states with a value (each compared).
fn check(names: [&str; 5], no_move: NoMoveRule, max_per_side: usize) -> u64 {
    let rules = Rules { cards: CardSet::from_names(&names).expect("card names are known"), no_move };
    let slots = mirror_slots(&rules.cards).expect("a mirror-closed set");
    let table = Table::generate(&rules, max_per_side).expect("the table");
    let mut compared = 0;
    for solved in table.materials() {
        let index = &solved.index;
        for group in index.groups() {
            for (_, layout) in index.layouts_of(group) {
                for cards in CardState::all() {
                    let position = layout.with_cards(cards);
                    let (value, image) = (table.value(&position), table.value(&mirror(&position, &slots)));
                    assert_eq!(value, image, "{names:?} {no_move:?}: {position:?} and its mirror differ");
                    compared += value.is_some() as u64;
                }
            }
        }
    }
    compared
}

#[test]
fn mirror_images_of_cards_are_found_only_in_closed_sets() {
    let default = CardSet::from_names(&["Boar", "Ox", "Elephant", "Horse", "Crab"]).unwrap();
    let slots = mirror_slots(&default).expect("the default set is mirror-closed");
    let (ox, horse) = (default.slot_of("Ox").unwrap(), default.slot_of("Horse").unwrap());
    assert_eq!((slots[ox], slots[horse]), (horse, ox));
    assert_eq!(slots[default.slot_of("Boar").unwrap()], default.slot_of("Boar").unwrap());
    // Ox without Horse: no image.
    let open = CardSet::from_names(&["Boar", "Ox", "Elephant", "Tiger", "Crab"]).unwrap();
    assert!(mirror_slots(&open).is_none());
    // Swapping images is an involution on card states, and not the identity.
    let moved = CardState::all().filter(|&k| mirror_state(k, &slots) != k).count();
    assert!(moved > 0);
    assert!(CardState::all().all(|k| mirror_state(mirror_state(k, &slots), &slots) == k));
}

#[test]
fn four_men_values_are_mirror_symmetric_default_set() {
    for no_move in [NoMoveRule::Pass, NoMoveRule::Loss] {
        assert_eq!(check(["Boar", "Ox", "Elephant", "Horse", "Crab"], no_move, 2), 9_174_270);
    }
}

/// Two pairs of images (Cobra and Eel, Frog and Rabbit) and a card that is
/// its own (Tiger), and one pair with three of their own.
#[test]
fn four_men_values_are_mirror_symmetric_other_sets() {
    assert_eq!(check(["Cobra", "Eel", "Frog", "Rabbit", "Tiger"], NoMoveRule::Loss, 2), 9_174_270);
    assert_eq!(check(["Goose", "Rooster", "Crane", "Mantis", "Dragon"], NoMoveRule::Pass, 2), 9_174_270);
}

/// `max_per_side`'s table solved with the mirror or without, on `threads`
/// threads.
fn solved(rules: &Rules, max_per_side: usize, mirror: bool, threads: usize) -> Table {
    let config = SolveConfig { mirror, ..SolveConfig::default() };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| solver::solve_with(rules, max_per_side, &config, &|_| {}).unwrap().into_table().unwrap())
}

fn assert_same_values(a: &Table, b: &Table, label: &str) {
    assert_eq!(a.materials().len(), b.materials().len());
    for (a, b) in a.materials().iter().zip(b.materials()) {
        assert!(a.values == b.values, "{label}: material {} differs", a.index.material);
    }
}

#[test]
fn mirroring_steps_give_the_table_of_solving_every_placement() {
    let sets = [
        (["Boar", "Ox", "Elephant", "Horse", "Crab"], NoMoveRule::Loss),
        (["Cobra", "Eel", "Frog", "Rabbit", "Tiger"], NoMoveRule::Pass),
    ];
    for (names, no_move) in sets {
        let rules = Rules { cards: CardSet::from_names(&names).unwrap(), no_move };
        let every = solved(&rules, 2, false, 1);
        for threads in [1, 2, 3] {
            assert_same_values(&every, &solved(&rules, 2, true, threads), &format!("{names:?}, {threads} threads"));
        }
    }
}

/// Streamed (every pair, at the smallest budget the table admits and at
/// room for two windows), with the mirror, against resident without it.
#[test]
fn streamed_mirroring_steps_give_the_table_of_solving_every_placement() {
    for no_move in [NoMoveRule::Loss, NoMoveRule::Pass] {
        let rules = Rules { cards: CardSet::default_set(), no_move };
        let every = solved(&rules, 2, false, 2);
        let dir = tempfile::tempdir().unwrap();
        let mut config = SolveConfig {
            work_dir: Some(dir.path().join("work")),
            budget_bytes: Some(1),
            force_streamed: true,
            ..SolveConfig::default()
        };
        let minimum = match solver::solve_with(&rules, 2, &config, &|_| {}) {
            Err(solver::SolveError::BudgetTooSmall { minimum_bytes, .. }) => minimum_bytes,
            other => panic!("expected BudgetTooSmall, got {:?}", other.err()),
        };
        for times in [1.0, 2.5] {
            config.work_dir = Some(dir.path().join(format!("work-{times}")));
            config.budget_bytes = Some((minimum as f64 * times) as u64);
            let streamed = solver::solve_with(&rules, 2, &config, &|_| {}).unwrap();
            assert_eq!(streamed.streamed_pairs, streamed.pairs);
            assert_same_values(&every, &streamed.into_table().unwrap(), &format!("{no_move:?}, {times} x minimum"));
        }
    }
}

/// 6 men (3v3 and 2v3 + 3v2 the biggest): about 30 s in release, so not run
/// by `cargo test`; `cargo test --release --test symmetry -- --ignored`.
#[test]
#[ignore]
fn mirroring_steps_give_the_table_of_solving_every_placement_at_six_men() {
    let rules = Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass };
    assert_same_values(&solved(&rules, 3, false, 2), &solved(&rules, 3, true, 2), "6 men");
}
