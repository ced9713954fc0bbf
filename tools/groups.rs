//! Index sizes per material: layouts, states, groups, the largest group,
//! and the mover slices (the groups a step's quiet moves out of one
//! opponent slice land in) in bytes of one plane (4 bytes a layout): the
//! working set of a step's successor reads.
//! Usage: cargo run --release --example groups
use onitb::index::*;
use std::collections::HashMap;

fn main() {
    println!(
        "| material | layouts | states | groups | largest group (states = bytes) | mover slices | plane bytes of a mover slice: mean, largest |"
    );
    println!("|---|---|---|---|---|---|---|");
    for m in Material::all_up_to(5) {
        if m.mover > m.opponent {
            continue;
        }
        let idx = MaterialIndex::new(m);
        let largest = idx.groups().iter().map(|g| g.layouts).max().unwrap();
        let mut slices: HashMap<[u8; 5], u64> = HashMap::new();
        for g in idx.groups() {
            *slices.entry(g.mover_counts).or_default() += g.layouts * 4;
        }
        let mean = slices.values().sum::<u64>() / slices.len() as u64;
        let max = slices.values().max().unwrap();
        println!(
            "| {m} | {} | {} | {} | {} | {} | {mean}, {max} |",
            idx.layouts(),
            idx.layouts() * 30,
            idx.groups().len(),
            largest * 30,
            slices.len()
        );
    }
}
