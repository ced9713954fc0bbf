//! What a random read of one successor block costs on this machine: the
//! step kernels' inner loop (fold 9 words at a random offset of a lane)
//! without the solver around it, so its memory cost can be told apart from
//! the rest. Three ways: plain, each batch of 14 blocks (a 3v3
//! placement's moves) prefetched before it is folded, and dependent (each
//! offset depends on the last read: the latency alone). With `huge`, the
//! lane is an anonymous mapping advised for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`); without, 4 KiB pages, as the solver's
//! buffers get where transparent huge pages are madvise-only. With
//! `line`, every block starts on a 64-byte line (as in a lane whose
//! blocks were padded to 16 words), so none spans two lines; without, a
//! block starts at any word, as the solver's 9-word blocks do, and half
//! of them span two lines (those starting past a line's eighth word).
//! Usage: cargo run --release --example random_reads -- [LANE_MIB] [READS_M] [huge] [line]
use memmap2::{Advice, MmapMut};
use std::hint::black_box;
use std::time::Instant;

/// A 3v3 placement's successor block: p * q words.
const BLOCK_WORDS: usize = 9;
/// Quiet moves of an average 3v3 placement.
const BATCH: usize = 14;

fn main() {
    let arg = |i: usize, default: usize| std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    let (lane_mib, reads_m) = (arg(1, 128), arg(2, 100));
    let words = (lane_mib << 20) / 4;
    let reads = reads_m * 1_000_000 / BATCH * BATCH;
    let huge = std::env::args().skip(3).any(|a| a == "huge");
    // Words a block's start is a multiple of.
    let start_words = if std::env::args().skip(3).any(|a| a == "line") { 16 } else { 1 };
    let mut map = MmapMut::map_anon(words * 4).expect("map the lane");
    if huge {
        map.advise(Advice::HugePage).expect("madvise(MADV_HUGEPAGE)");
    }
    for (n, word) in map.chunks_exact_mut(4).enumerate() {
        word.copy_from_slice(&(n as u32).to_le_bytes());
    }
    // SAFETY: the mapping is page-aligned, its length a multiple of 4, and
    // every bit pattern is a valid u32.
    let lane: &[u32] = unsafe { std::slice::from_raw_parts(map.as_ptr() as *const u32, words) };
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let offsets: Vec<usize> = (0..reads)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as usize % (words - BLOCK_WORDS) / start_words * start_words
        })
        .collect();
    for way in ["plain", "prefetched", "dependent"] {
        let started = Instant::now();
        let mut acc = [0u32; BLOCK_WORDS];
        let mut last = 0usize;
        for batch in offsets.chunks_exact(BATCH) {
            if way == "prefetched" {
                for &at in batch {
                    prefetch(&lane[at..]);
                }
            }
            for &at in batch {
                let at = if way == "dependent" { (at ^ last) % (words - BLOCK_WORDS) } else { at };
                let block = &lane[at..at + BLOCK_WORDS];
                for (acc, word) in acc.iter_mut().zip(block) {
                    *acc |= word;
                }
                last = (block[0] & 1) as usize;
            }
        }
        black_box(acc);
        let ns = started.elapsed().as_secs_f64() * 1e9 / reads as f64;
        let pages = if huge { "huge pages" } else { "4 KiB pages" };
        let starts = if start_words == 1 { "any word" } else { "line starts" };
        println!("{lane_mib} MiB lane, {pages}, blocks at {starts}, {way:>10}: {ns:6.2} ns per block");
    }
}

fn prefetch(at: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and writes nothing; the address is
    // the slice's own start.
    unsafe {
        std::arch::x86_64::_mm_prefetch(at.as_ptr() as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
}
