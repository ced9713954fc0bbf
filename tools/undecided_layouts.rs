//! How many layouts (not states) are still undecided after each depth: the
//! measure behind keeping only undecided layouts' planes late in a pair.
//! Usage: cargo run --release --example undecided_layouts -- MEN
use onitb::index::Material;
use onitb::rules::{CardSet, NoMoveRule, Rules};
use onitb::table::Table;
use onitb::value::{NO_VALUE, Value};

const DEPTHS: [u16; 8] = [5, 10, 15, 20, 30, 40, 60, 80];

fn main() {
    let men: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(6);
    let rules = Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Loss };
    let table = Table::generate(&rules, men / 2).unwrap();
    println!(
        "material layouts | states undecided after d / layouts with one undecided after d / 4 KiB plane pages with one"
    );
    for solved in table.materials() {
        let material: Material = solved.index.material;
        let layouts = solved.values.len() / 30;
        let mut states = [0u64; DEPTHS.len()];
        let mut with_one = [0u64; DEPTHS.len()];
        let mut pages = [0u64; DEPTHS.len()];
        let mut page_hit = [false; DEPTHS.len()];
        let mut total_states = 0u64;
        for (layout, bytes) in solved.values.chunks_exact(30).enumerate() {
            if layout % 1024 == 0 {
                page_hit = [false; DEPTHS.len()];
            }
            let mut deepest = 0u16;
            for &byte in bytes {
                if byte == NO_VALUE {
                    continue;
                }
                total_states += 1;
                let plies = Value::from_byte(byte).unwrap().plies().unwrap_or(u16::MAX);
                deepest = deepest.max(plies);
                for (k, &d) in DEPTHS.iter().enumerate() {
                    if plies > d {
                        states[k] += 1;
                    }
                }
            }
            for (k, &d) in DEPTHS.iter().enumerate() {
                if deepest > d {
                    with_one[k] += 1;
                    if !page_hit[k] {
                        page_hit[k] = true;
                        pages[k] += 1;
                    }
                }
            }
        }
        let pages_total = layouts.div_ceil(1024) as f64;
        print!("{material} {layouts} |");
        for k in 0..DEPTHS.len() {
            print!(
                " d{}: {:.1}/{:.1}/{:.0}%",
                DEPTHS[k],
                100.0 * states[k] as f64 / total_states as f64,
                100.0 * with_one[k] as f64 / layouts as f64,
                100.0 * pages[k] as f64 / pages_total
            );
        }
        println!();
    }
}
