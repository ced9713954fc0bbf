//! Probe latency and block read speed of a table on disk.
//!
//! usage: cargo run --release --example probe_latency -- DIR [PROBES]
//!
//! Probes PROBES random positions (uniform over materials, then layouts and
//! card states; game-over layouts skipped). Cold: the block cache is emptied
//! before each probe, so the probe reads (and for compressed shards
//! decompresses) its block; the file itself may be in the OS page cache.
//! Warm: the same position probed again at once, its block cached.
//! `cold_read` is cold restricted to positions without a winning move: a
//! compressed table answers the others from the rules without reading. Then
//! reads every block of the table once, checked (and decompressed and
//! unpacked), and prints the rate in MB of value bytes per second.

use onitb::Tablebase;
use onitb::index::{Material, MaterialIndex};
use onitb::rules::{CARD_STATES, CardState, Position};
use onitb::shard::{Context, TableFiles};
use std::path::PathBuf;
use std::time::Instant;

/// xorshift64*: enough randomness to pick positions, with no dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or_else(|| anyhow::anyhow!("usage: probe_latency DIR [PROBES]"))?);
    let probes: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let start = Instant::now();
    let tablebase = Tablebase::open(&dir)?;
    println!("open_ms\t{:.2}", start.elapsed().as_secs_f64() * 1e3);
    let materials = Material::all_up_to(tablebase.max_per_side());
    let indexes: Vec<MaterialIndex> = materials.iter().map(|&m| MaterialIndex::new(m)).collect();
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let (mut cold, mut warm) = (Vec::with_capacity(probes), Vec::with_capacity(probes));
    let mut cold_read = Vec::with_capacity(probes);
    while cold.len() < probes {
        let index = &indexes[random.below(indexes.len() as u64) as usize];
        let layout = index.unrank(random.below(index.layouts()));
        let position = Position {
            mover: layout.mover,
            opponent: layout.opponent,
            mover_master: layout.mover_master,
            opponent_master: layout.opponent_master,
            cards: CardState::new(random.below(CARD_STATES as u64) as usize),
        };
        if position.is_game_over() {
            continue;
        }
        tablebase.clear_cache();
        let t = Instant::now();
        let value = tablebase.probe(&position)?;
        cold.push(t.elapsed().as_secs_f64() * 1e6);
        if !position.has_winning_move(tablebase.rules()) {
            cold_read.push(cold[cold.len() - 1]);
        }
        let t = Instant::now();
        let again = tablebase.probe(&position)?;
        warm.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(value, again);
    }
    for (name, times) in [("cold", &mut cold), ("cold_read", &mut cold_read), ("warm", &mut warm)] {
        times.sort_by(f64::total_cmp);
        println!("{name}_median_us\t{:.2}\n{name}_p99_us\t{:.2}", percentile(times, 0.5), percentile(times, 0.99));
    }
    let files = TableFiles::open(&dir)?;
    let context = Context::new(files.rules, files.max_per_side);
    let start = Instant::now();
    let mut bytes = 0u64;
    for shard in &files.shards {
        for block in 0..shard.block_count() {
            bytes += shard.read_values(block, &context)?.len() as u64;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("read_all_blocks_mb_per_s\t{:.1}", bytes as f64 / 1e6 / seconds);
    Ok(())
}
