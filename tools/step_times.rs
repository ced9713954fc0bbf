//! Prints the wall time of every solver step, and for each material the
//! time since the event before its start (allocating its lanes and keeping
//! its move lists), for finding where time goes.
//! Usage: cargo run --release --example step_times -- MEN [CARDS]
//! (CARDS as `generate --cards` takes them; the default set if left out).
use onitb::rules::{CardSet, NoMoveRule, Rules};
use onitb::solver::{self, Progress};
use std::sync::Mutex;
use std::time::Instant;

fn main() {
    let men: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(6);
    let cards = match std::env::args().nth(2) {
        Some(names) => {
            let names: Vec<&str> = names.split(',').collect();
            CardSet::from_names(&names).unwrap_or_else(|e| panic!("cards: {e}"))
        }
        None => CardSet::default_set(),
    };
    let rules = Rules { cards, no_move: NoMoveRule::Pass };
    let last = Mutex::new(Instant::now());
    let report = |p: Progress| {
        let mut last = last.lock().unwrap();
        let ms = last.elapsed().as_secs_f64() * 1e3;
        *last = Instant::now();
        match p {
            Progress::MaterialStarted { materials, layouts, .. } => {
                println!("{} {}: {layouts} layouts, {ms:.1} ms after the last event", materials[0], materials[1])
            }
            Progress::Step { depth_plies, decided, groups_visited, groups, .. } => {
                println!(
                    "  depth {depth_plies:3} {ms:9.1} ms decided {decided} visited {groups_visited}/{groups} groups"
                )
            }
            Progress::MaterialDone { .. } => println!("  done {ms:9.1} ms"),
            Progress::Widened { material } => println!("{material} too deep for bytes: on in words"),
            Progress::MaterialResumed { .. }
            | Progress::IoBackend { .. }
            | Progress::RunStarted { .. }
            | Progress::Batch { .. }
            | Progress::Finishing { .. } => {}
        }
    };
    solver::solve(&rules, men / 2, &report).unwrap();
}
