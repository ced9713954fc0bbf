//! A solved table in memory: values per material, lookups, statistics.
//!
//! Owns the in-memory shape of a finished table; knows nothing of how it was
//! solved or how it is stored on disk.

use crate::index::{Layout, Material, MaterialIndex};
use crate::rules::{CARD_STATES, Position, Rules};
use crate::value::{DRAW, NO_VALUE, Value, ValueWidth};
use rayon::prelude::*;
use serde::Serialize;

/// Values of one material: the value of state `layout * 30 + card_state`
/// is its byte, or its little-endian word (`value::word_at`), as `width`
/// says; `values` is `layouts * 30 * width.bytes()` bytes.
pub struct SolvedMaterial {
    pub index: MaterialIndex,
    pub values: Vec<u8>,
    pub width: ValueWidth,
}

impl SolvedMaterial {
    /// The value of state `state` (`layout * 30 + card_state`), `None` for
    /// no value.
    pub fn value_at(&self, state: usize) -> Option<Value> {
        self.width.value_at(&self.values, state)
    }

    /// The same values as words (a copy if they are words already).
    pub fn widened(&self) -> SolvedMaterial {
        let values = match self.width {
            ValueWidth::Byte => self.values.iter().flat_map(|&byte| crate::value::widen(byte).to_le_bytes()).collect(),
            ValueWidth::Word => self.values.clone(),
        };
        SolvedMaterial { index: MaterialIndex::new(self.index.material), values, width: ValueWidth::Word }
    }
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

/// Value bytes counted per task: big enough to amortise rayon.
const STATS_CHUNK_BYTES: usize = 1 << 20;

/// Bytes [`ByteClasses::of_vectors`] takes side by side: one SSE2 vector. Wider
/// spilled the counters out of registers.
const CLASS_LANES: usize = 16;
/// Vectors of bytes counted into one-byte counters before they are summed
/// into wide ones: a byte counter holds up to 255.
const CLASS_ROUNDS: usize = u8::MAX as usize;
/// A win byte less [`WIN_BASE`] is 0..=126 (the deeper the win, the
/// smaller); every other byte becomes 127..=255.
const WIN_BASE: u8 = DRAW + 1;

/// What a slice of value bytes holds, by the classes of the value encoding
/// ([`crate::value`]): enough to give its [`Stats`]. Counted without a
/// histogram: every class is a comparison the compiler turns into vector
/// code (at 6 men a histogram of the table's 1.1 GB was about 0.5 s of CPU
/// time, 42% of writing the table; docs/BENCHMARKS.md, session 45).
#[derive(Clone, Copy, Debug)]
struct ByteClasses {
    bytes: u64,
    holes: u64,
    /// Bytes 128..=255: draws and wins.
    draws_or_wins: u64,
    draws: u64,
    wins_in_1: u64,
    /// The largest byte as `i8`: the deepest loss if positive.
    deepest_loss: i8,
    /// The smallest byte less [`WIN_BASE`]: the deepest win if below 127.
    deepest_win: u8,
}

impl ByteClasses {
    /// The [`Stats`] of `values`, counted a round of vectors at a time.
    fn stats_of(values: &[u8]) -> Stats {
        let mut rounds = values.chunks_exact(CLASS_LANES * CLASS_ROUNDS);
        let stats = (&mut rounds).map(|round| Self::of_vectors(round).stats()).fold(Stats::default(), Stats::merge);
        let rest = rounds.remainder();
        let whole = rest.len() - rest.len() % CLASS_LANES;
        // The last bytes padded with holes, which are then taken off again
        // (a hole changes neither deepest value).
        let mut last = [NO_VALUE; CLASS_LANES];
        last[..rest.len() - whole].copy_from_slice(&rest[whole..]);
        let mut padded = Self::of_vectors(&last);
        let padding = (CLASS_LANES - (rest.len() - whole)) as u64;
        padded.bytes -= padding;
        padded.holes -= padding;
        [Self::of_vectors(&rest[..whole]).stats(), padded.stats()].into_iter().fold(stats, Stats::merge)
    }

    /// Counts whole vectors of bytes, at most [`CLASS_ROUNDS`] of them.
    fn of_vectors(part: &[u8]) -> ByteClasses {
        debug_assert!(part.len().is_multiple_of(CLASS_LANES) && part.len() <= CLASS_LANES * CLASS_ROUNDS);
        let mut holes = [0u8; CLASS_LANES];
        let mut high = [0u8; CLASS_LANES];
        let mut draws = [0u8; CLASS_LANES];
        let mut wins_in_1 = [0u8; CLASS_LANES];
        let mut deepest_loss = [i8::MIN; CLASS_LANES];
        let mut deepest_win = [u8::MAX; CLASS_LANES];
        for vector in part.chunks_exact(CLASS_LANES) {
            for k in 0..CLASS_LANES {
                let byte = vector[k];
                holes[k] += (byte == NO_VALUE) as u8;
                high[k] += (byte >= DRAW) as u8;
                draws[k] += (byte == DRAW) as u8;
                wins_in_1[k] += (byte == u8::MAX) as u8;
                deepest_loss[k] = deepest_loss[k].max(byte as i8);
                deepest_win[k] = deepest_win[k].min(byte.wrapping_sub(WIN_BASE));
            }
        }
        let sum = |lanes: [u8; CLASS_LANES]| lanes.iter().map(|&n| n as u64).sum::<u64>();
        ByteClasses {
            bytes: part.len() as u64,
            holes: sum(holes),
            draws_or_wins: sum(high),
            draws: sum(draws),
            wins_in_1: sum(wins_in_1),
            deepest_loss: deepest_loss.into_iter().max().unwrap_or(i8::MIN),
            deepest_win: deepest_win.into_iter().min().unwrap_or(u8::MAX),
        }
    }

    fn stats(self) -> Stats {
        let wins = self.draws_or_wins - self.draws;
        let states = self.bytes - self.holes;
        let plies = |byte: u8| Value::from_byte(byte).and_then(Value::plies).unwrap_or(0);
        Stats {
            states,
            win_in_1: self.wins_in_1,
            wins,
            losses: states - self.draws_or_wins,
            draws: self.draws,
            longest_win_plies: if wins > 0 { plies(self.deepest_win + WIN_BASE) } else { 0 },
            longest_loss_plies: plies(self.deepest_loss.max(0) as u8),
        }
    }
}

impl Stats {
    /// Counts a slice of value bytes.
    pub fn of_values(values: &[u8]) -> Stats {
        values.par_chunks(STATS_CHUNK_BYTES).map(ByteClasses::stats_of).reduce(Stats::default, Stats::merge)
    }

    /// Counts a slice of values stored at `width`: [`Stats::of_values`] for
    /// bytes, [`Stats::of_words`] for words.
    pub fn of_width(width: ValueWidth, values: &[u8]) -> Stats {
        match width {
            ValueWidth::Byte => Stats::of_values(values),
            ValueWidth::Word => Stats::of_words(values),
        }
    }

    /// Counts a slice of little-endian value words (an odd last byte, which
    /// no whole word holds, is not counted). Word tables are rare (a few
    /// card sets), so each word is decoded plainly, a chunk per task.
    pub fn of_words(values: &[u8]) -> Stats {
        values.par_chunks(STATS_CHUNK_BYTES).map(Stats::of_words_plainly).reduce(Stats::default, Stats::merge)
    }

    fn of_words_plainly(values: &[u8]) -> Stats {
        let mut stats = Stats::default();
        let words = values.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]]));
        for value in words.filter_map(Value::from_word) {
            stats.count(value);
        }
        stats
    }

    /// Adds one state of value `value`.
    fn count(&mut self, value: Value) {
        self.states += 1;
        match value {
            Value::Win(plies) => {
                self.wins += 1;
                self.win_in_1 += (plies == 1) as u64;
                self.longest_win_plies = self.longest_win_plies.max(plies);
            }
            Value::Loss(plies) => {
                self.losses += 1;
                self.longest_loss_plies = self.longest_loss_plies.max(plies);
            }
            Value::Draw => self.draws += 1,
        }
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
            assert_eq!(m.values.len() as u64, m.index.layouts() * (CARD_STATES * m.width.bytes()) as u64);
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
        let state = solved.index.rank(&layout) as usize * CARD_STATES + position.cards.index();
        solved.value_at(state)
    }

    /// The same table with every material's values as words
    /// (`value::widen`): what the solver makes of a table too deep for
    /// bytes, for testing what reads word tables against the byte table.
    pub fn widened(&self) -> Table {
        let materials = self.materials.iter().map(SolvedMaterial::widened).collect();
        Table { rules: self.rules, max_per_side: self.max_per_side, materials }
    }

    /// Statistics per material and for the whole table.
    pub fn stats(&self) -> (Stats, Vec<(Material, Stats)>) {
        let per: Vec<(Material, Stats)> =
            self.materials.iter().map(|m| (m.index.material, Stats::of_width(m.width, &m.values))).collect();
        let total = per.iter().map(|(_, s)| *s).fold(Stats::default(), Stats::merge);
        (total, per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: every byte decoded.
    fn stats_by_decoding(values: &[u8]) -> Stats {
        let mut stats = Stats::default();
        for value in values.iter().filter_map(|&byte| Value::from_byte(byte)) {
            stats.count(value);
        }
        stats
    }

    /// A fixed sequence of test bytes from `seed` (xorshift64).
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    #[test]
    fn byte_classes_agree_with_decoding_every_byte() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        // Lengths around the vector and round sizes, bytes from every
        // class and from a few only (runs of one byte overflow nothing).
        let round = CLASS_LANES * CLASS_ROUNDS;
        let lengths = [0, 1, 15, 16, 17, round - 1, round, round + 17, 3 * round + 7, STATS_CHUNK_BYTES + 5];
        let alphabets: [&[u8]; 8] = [
            &[0, 1, 127, 128, 129, 255],
            &[255],
            &[0],
            &[128, 0],
            &[127, 1, 128],
            &[60, 127, 128],
            &[1, 2, 200],
            &[130, 5, 0],
        ];
        for &len in &lengths {
            for alphabet in alphabets {
                let values: Vec<u8> = (0..len).map(|_| alphabet[next() as usize % alphabet.len()]).collect();
                assert_eq!(Stats::of_values(&values), stats_by_decoding(&values), "{len} bytes of {alphabet:?}");
            }
            let values: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            assert_eq!(Stats::of_values(&values), stats_by_decoding(&values), "{len} random bytes");
        }
    }

    #[test]
    fn words_count_as_the_bytes_they_widen() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for len in [0, 1, 17, 4096, STATS_CHUNK_BYTES + 3] {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let words: Vec<u8> = bytes.iter().flat_map(|&b| crate::value::widen(b).to_le_bytes()).collect();
            assert_eq!(Stats::of_width(ValueWidth::Word, &words), Stats::of_values(&bytes), "{len} states");
            assert_eq!(Stats::of_width(ValueWidth::Byte, &bytes), Stats::of_values(&bytes), "{len} states");
        }
        // Deeper than a byte holds.
        let words: Vec<u8> = [Value::Loss(600), Value::Win(601), Value::Draw, Value::Win(1)]
            .iter()
            .flat_map(|v| v.to_word().to_le_bytes())
            .chain([0, 0])
            .collect();
        let expected = Stats {
            states: 4,
            win_in_1: 1,
            wins: 2,
            losses: 1,
            draws: 1,
            longest_win_plies: 601,
            longest_loss_plies: 600,
        };
        assert_eq!(Stats::of_words(&words), expected);
    }

    /// A table widened to words has the byte table's statistics and values.
    #[test]
    fn a_widened_table_answers_as_the_byte_table() {
        let table = Table::generate(&Rules::default(), 2).unwrap();
        let wide = table.widened();
        assert!(wide.materials().iter().all(|m| m.width == ValueWidth::Word));
        assert_eq!(wide.stats(), table.stats());
        let wide = Table::new(*wide.rules(), 2, wide.materials);
        for (bytes, words) in table.materials().iter().zip(wide.materials()) {
            assert_eq!(words.values.len(), 2 * bytes.values.len());
            for n in (0..bytes.index.layouts()).step_by(5) {
                for k in 0..CARD_STATES {
                    let position = bytes.index.unrank(n).with_cards(crate::rules::CardState::new(k));
                    assert_eq!(wide.value(&position), table.value(&position));
                }
            }
        }
    }
}
