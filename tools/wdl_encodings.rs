//! Bits per state of a compressed block's packings at several zstd levels.
//!
//! usage: cargo run --release --example wdl_encodings -- DIR [STEP] [LEVELS]
//!
//! Takes every STEP-th block (default 4) of each shard of the table in DIR
//! (raw or compressed, values), and compresses it, one frame per block, in
//! parallel, as: values filled and dense ([`Packing`]); WDL filled, dense
//! (bit planes per layout), and two packings that were tried and not kept:
//! the WDL bytes of the stored states only, and a loss and a draw bit per
//! stored state. LEVELS is a comma-separated list (default 3,9,12,15,19).
//! Prints, per packing and level, stored and compressed bytes, bits per
//! state (positions of the sampled blocks, game-over holes excluded) and
//! wall time. The figures behind the choice in `src/compress.rs`.

use onitb::compress::{stored_bytes, wdl_byte};
use onitb::format::{Content, Packing};
use onitb::shard::{Context, TableFiles};
use onitb::value::{DRAW, NO_VALUE};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// One bit per stored state, losses then draws.
fn stored_state_bits(wdl: &[u8]) -> Vec<u8> {
    let half = wdl.len().div_ceil(8);
    let mut out = vec![0u8; 2 * half];
    for (i, &byte) in wdl.iter().enumerate() {
        if byte < DRAW {
            out[i / 8] |= 1 << (i % 8);
        } else if byte == DRAW {
            out[half + i / 8] |= 1 << (i % 8);
        }
    }
    out
}

fn main() -> anyhow::Result<()> {
    let usage = "usage: wdl_encodings DIR [STEP] [LEVELS]";
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or_else(|| anyhow::anyhow!(usage))?);
    let step: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(4).max(1);
    let levels: Vec<i32> =
        args.next().unwrap_or_else(|| "3,9,12,15,19".into()).split(',').map(|s| s.parse()).collect::<Result<_, _>>()?;
    let table = TableFiles::open(&dir)?;
    let context = Context::new(table.rules, table.max_per_side);
    let sampled: Vec<_> = table
        .shards
        .iter()
        .flat_map(|shard| (0..shard.block_count()).step_by(step).map(move |block| (shard, block)))
        .collect();
    // (states, packings in the order of `names`) per sampled block.
    let names = ["values filled", "values dense", "wdl filled", "wdl dense", "wdl stored bytes", "wdl stored bits"];
    let packed: Vec<(u64, Vec<Vec<u8>>)> = sampled
        .par_iter()
        .map(|&(shard, block)| -> anyhow::Result<_> {
            let values = shard.read_values(block, &context)?;
            let index = context.index(shard.material());
            let range = shard.header().block_range(block);
            let pack = |content, packing| stored_bytes(&index, &context, range.clone(), &values, content, packing);
            let values_dense = pack(Content::Values, Packing::Dense)?;
            let wdl_stored: Vec<u8> = values_dense.iter().map(|&v| wdl_byte(v)).collect();
            let wdl_stored_bits = stored_state_bits(&wdl_stored);
            let packings = vec![
                pack(Content::Values, Packing::Filled)?,
                values_dense,
                pack(Content::Wdl, Packing::Filled)?,
                pack(Content::Wdl, Packing::Dense)?,
                wdl_stored,
                wdl_stored_bits,
            ];
            let states = values.iter().filter(|&&v| v != NO_VALUE).count() as u64;
            Ok((states, packings))
        })
        .collect::<anyhow::Result<_>>()?;
    let states: u64 = packed.iter().map(|(s, _)| s).sum();
    println!("{} of {} blocks sampled, {states} states", sampled.len(), sampled.len() * step);
    println!("packing\tlevel\tstored_bytes\tcompressed_bytes\tbits_per_state\twall_s");
    for (at, name) in names.iter().enumerate() {
        let stored: usize = packed.iter().map(|(_, p)| p[at].len()).sum();
        for &level in &levels {
            let start = Instant::now();
            let compressed = packed
                .par_iter()
                .map(|(_, p)| zstd::bulk::compress(&p[at], level).map(|frame| frame.len()))
                .collect::<Result<Vec<_>, _>>()?
                .iter()
                .sum::<usize>();
            let wall = start.elapsed().as_secs_f64();
            let bits = compressed as f64 * 8.0 / states as f64;
            println!("{name}\t{level}\t{stored}\t{compressed}\t{bits:.4}\t{wall:.2}");
        }
    }
    Ok(())
}
