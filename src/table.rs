//! A solved table in memory: value bytes per material, lookups, statistics.
//!
//! Owns the in-memory shape of a finished table; knows nothing of how it was
//! solved or how it is stored on disk.

use crate::index::{Layout, Material, MaterialIndex};
use crate::rules::{CARD_STATES, Position, Rules};
use crate::value::{DRAW, NO_VALUE, Value};
use rayon::prelude::*;
use serde::Serialize;

/// Value bytes of one material: `values[layout * 30 + card_state]`.
pub struct SolvedMaterial {
    pub index: MaterialIndex,
    pub values: Vec<u8>,
}

/// Every material with 1..=`max_per_side` pieces per side.
pub struct Table {
    rules: Rules,
    max_per_side: usize,
    materials: Vec<SolvedMaterial>,
}

/// Counts over a set of states (game-over holes excluded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub states: u64,
    pub win_in_1: u64,
    pub wins: u64,
    pub losses: u64,
    pub draws: u64,
    pub longest_win_plies: u16,
    pub longest_loss_plies: u16,
}

/// Value bytes counted per task: big enough to amortise rayon, small
/// enough that one counter of a chunk fits a u32.
const STATS_CHUNK_BYTES: usize = 1 << 20;
const _: () = assert!(STATS_CHUNK_BYTES <= u32::MAX as usize);

impl Stats {
    /// Counts a slice of value bytes.
    pub fn of_values(values: &[u8]) -> Stats {
        values
            .par_chunks(STATS_CHUNK_BYTES)
            .map(|chunk| {
                // Four histograms, bytes dealt round-robin: runs of equal
                // bytes (most of a table) would otherwise wait on the
                // last increment of the same counter. A chunk's counts fit
                // u32 (`STATS_CHUNK_BYTES`).
                let mut partial = [[0u32; 256]; 4];
                let mut quads = chunk.chunks_exact(4);
                for quad in &mut quads {
                    for (histogram, &byte) in partial.iter_mut().zip(quad) {
                        histogram[byte as usize] += 1;
                    }
                }
                for (histogram, &byte) in partial.iter_mut().zip(quads.remainder()) {
                    histogram[byte as usize] += 1;
                }
                let histogram = std::array::from_fn(|b| partial.iter().map(|h| h[b] as u64).sum());
                Stats::of_histogram(&histogram)
            })
            .reduce(Stats::default, Stats::merge)
    }

    fn of_histogram(histogram: &[u64; 256]) -> Stats {
        let mut stats = Stats::default();
        for (byte, &count) in histogram.iter().enumerate() {
            if count == 0 || byte as u8 == NO_VALUE {
                continue;
            }
            stats.states += count;
            match Value::from_byte(byte as u8).expect("not a hole") {
                Value::Win(plies) => {
                    stats.wins += count;
                    if plies == 1 {
                        stats.win_in_1 += count;
                    }
                    stats.longest_win_plies = stats.longest_win_plies.max(plies);
                }
                Value::Loss(plies) => {
                    stats.losses += count;
                    stats.longest_loss_plies = stats.longest_loss_plies.max(plies);
                }
                Value::Draw => stats.draws += count,
            }
        }
        debug_assert!(histogram[DRAW as usize] == stats.draws);
        stats
    }

    pub fn merge(a: Stats, b: Stats) -> Stats {
        Stats {
            states: a.states + b.states,
            win_in_1: a.win_in_1 + b.win_in_1,
            wins: a.wins + b.wins,
            losses: a.losses + b.losses,
            draws: a.draws + b.draws,
            longest_win_plies: a.longest_win_plies.max(b.longest_win_plies),
            longest_loss_plies: a.longest_loss_plies.max(b.longest_loss_plies),
        }
    }
}

impl Table {
    /// # Panics
    /// If `materials` is not exactly the materials up to `max_per_side`.
    pub fn new(rules: Rules, max_per_side: usize, mut materials: Vec<SolvedMaterial>) -> Table {
        materials.sort_by_key(|m| m.index.material);
        let expected: Vec<Material> = {
            let mut all = Material::all_up_to(max_per_side);
            all.sort();
            all
        };
        let got: Vec<Material> = materials.iter().map(|m| m.index.material).collect();
        assert_eq!(got, expected, "a table holds every material up to its size");
        for m in &materials {
            assert_eq!(m.values.len() as u64, m.index.layouts() * CARD_STATES as u64);
        }
        Table { rules, max_per_side, materials }
    }

    /// Solves a table in RAM with the default solver.
    pub fn generate(rules: &Rules, max_per_side: usize) -> Result<Table, crate::solver::SolveError> {
        crate::solver::solve(rules, max_per_side, &|_| {})
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    pub fn max_per_side(&self) -> usize {
        self.max_per_side
    }

    pub fn materials(&self) -> &[SolvedMaterial] {
        &self.materials
    }

    pub fn material(&self, material: Material) -> Option<&SolvedMaterial> {
        self.materials.binary_search_by_key(&material, |m| m.index.material).ok().map(|i| &self.materials[i])
    }

    /// The value of a position; `None` if it is game-over, malformed, or has
    /// more pieces than the table.
    pub fn value(&self, position: &Position) -> Option<Value> {
        if !position.is_well_formed() || position.is_game_over() {
            return None;
        }
        let material = Material::new(position.mover.count_ones() as usize, position.opponent.count_ones() as usize);
        let solved = self.material(material)?;
        let layout = Layout {
            mover: position.mover,
            opponent: position.opponent,
            mover_master: position.mover_master,
            opponent_master: position.opponent_master,
        };
        let at = solved.index.rank(&layout) as usize * CARD_STATES + position.cards.index();
        Value::from_byte(solved.values[at])
    }

    /// Statistics per material and for the whole table.
    pub fn stats(&self) -> (Stats, Vec<(Material, Stats)>) {
        let per: Vec<(Material, Stats)> =
            self.materials.iter().map(|m| (m.index.material, Stats::of_values(&m.values))).collect();
        let total = per.iter().map(|(_, s)| *s).fold(Stats::default(), Stats::merge);
        (total, per)
    }
}
