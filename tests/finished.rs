//! Finished tables through the library: compressed shards probe exactly like
//! the generator's table, checksums name the damaged block, and the deep
//! check tells a right table from a wrong one.

use onitb::compress::{self, DEFAULT_LEVEL};
use onitb::format::{Content, FormatError};
use onitb::index::{Material, MaterialIndex};
use onitb::rules::{CARD_STATES, CardState, Position, Rules};
use onitb::store::{self, StoreError};
use onitb::table::SolvedMaterial;
use onitb::verify::{self, Sample};
use onitb::{ProbeError, Table, Tablebase, Value};
use rayon::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn four_men() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table::generate(&Rules::default(), 2).expect("the 4-men table solves"))
}

/// A copy of a table with some value bytes changed.
fn altered(table: &Table, change: impl Fn(Material, &mut Vec<u8>)) -> Table {
    let materials = table
        .materials()
        .iter()
        .map(|m| {
            let mut values = m.values.clone();
            change(m.index.material, &mut values);
            SolvedMaterial { index: MaterialIndex::new(m.index.material), values, width: m.width }
        })
        .collect();
    Table::new(*table.rules(), table.max_per_side(), materials)
}

/// Raw and compressed copies of the 4-men table in a temporary directory.
struct Dirs {
    _tmp: tempfile::TempDir,
    raw: PathBuf,
    compressed: PathBuf,
}

fn saved() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let raw = tmp.path().join("raw");
    let compressed = tmp.path().join("z");
    store::save(four_men(), &raw).unwrap();
    compress::compress_table(&raw, &compressed, 3, Content::Values, &|_| {}).unwrap();
    Dirs { _tmp: tmp, raw, compressed }
}

fn position(layout: &onitb::index::Layout, k: usize) -> Position {
    layout.with_cards(CardState::new(k))
}

#[test]
fn every_position_probes_through_the_compressed_table_as_generated() {
    let dirs = saved();
    let table = four_men();
    let compressed = Tablebase::open(&dirs.compressed).unwrap();
    let raw = Tablebase::with_cache(&dirs.raw, 2).unwrap();
    for_each_position(table, |material, n, k, p| {
        let expected = table.value(&p);
        let got = compressed.probe(&p);
        match expected {
            Some(value) => assert_eq!(got.unwrap(), value, "{material} layout {n} state {k}"),
            None => assert!(matches!(got, Err(ProbeError::GameOver))),
        }
        if n % 101 == 0 {
            assert_eq!(raw.probe(&p).ok(), expected);
        }
    });
}

/// `check(material, layout, card state, position)` for every position of
/// `table`, layouts in parallel.
fn for_each_position(table: &Table, check: impl Fn(Material, u64, usize, Position) + Sync) {
    for solved in table.materials() {
        let index = &solved.index;
        (0..index.layouts()).into_par_iter().for_each(|n| {
            let layout = index.unrank(n);
            for k in 0..CARD_STATES {
                check(index.material, n, k, position(&layout, k));
            }
        });
    }
}

#[test]
fn best_moves_agree_with_the_value() {
    let dirs = saved();
    let tablebase = Tablebase::open(&dirs.compressed).unwrap();
    let index = MaterialIndex::new(Material::new(2, 2));
    for n in (0..index.layouts()).step_by(997) {
        let layout = index.unrank(n);
        for k in [0, 13, 29] {
            let p = position(&layout, k);
            let Ok(value) = tablebase.probe(&p) else { continue };
            let moves = tablebase.probe_moves(&p).unwrap();
            assert_eq!(moves[0].value, value, "layout {n} state {k}");
            assert!(moves.windows(2).all(|w| w[0].value.goodness() >= w[1].value.goodness()));
        }
    }
    let lone = Position { opponent: (1 << 20) | (1 << 24), opponent_master: 20, ..position(&index.unrank(0), 0) };
    let too_big = Position { mover: 0b111, mover_master: 0, ..lone };
    assert!(matches!(tablebase.probe(&too_big), Err(ProbeError::NotInTable { .. })));
    let overlapping = Position { mover: 0b11, mover_master: 0, opponent: 0b10, opponent_master: 1, ..lone };
    assert!(matches!(tablebase.probe(&overlapping), Err(ProbeError::Malformed)));
}

/// The blocks `verify` reports for `path`.
fn damaged_blocks(path: &Path) -> Vec<usize> {
    verify::verify_paths(&[path])
        .failures
        .iter()
        .map(|f| match f {
            StoreError::Format { cause: FormatError::BlockCrc { block, .. }, .. }
            | StoreError::Format { cause: FormatError::FrameCrc { block, .. }, .. } => *block,
            other => panic!("not a block failure: {other}"),
        })
        .collect()
}

#[test]
fn a_flipped_bit_in_any_block_is_reported_with_its_number() {
    let dirs = saved();
    for dir in [&dirs.raw, &dirs.compressed] {
        assert!(verify::verify_paths(&[dir]).failures.is_empty());
        let name = if dir == &dirs.raw { "2v2.onitb" } else { "2v2.onitbz" };
        let path = dir.join(name);
        let good = fs::read(&path).unwrap();
        let shard = onitb::shard::ShardFile::open(&path).unwrap();
        assert!(shard.block_count() >= 3);
        for block in 0..shard.block_count() {
            let (offset, len) = shard.stored_range(block);
            for at in [offset, offset + len / 2, offset + len - 1] {
                for bit in [0, 5] {
                    let mut bad = good.clone();
                    bad[at as usize] ^= 1 << bit;
                    fs::write(&path, &bad).unwrap();
                    assert_eq!(damaged_blocks(&path), vec![block], "{name} byte {at} bit {bit}");
                    let read = match shard.read_block(block) {
                        Err(e) => e.to_string(),
                        Ok(_) => String::new(),
                    };
                    assert!(read.contains(&format!("block {block}")), "{read}");
                }
            }
        }
        fs::write(&path, &good).unwrap();
    }
}

#[test]
fn swapped_blocks_and_truncation_are_caught() {
    let dirs = saved();
    for (dir, name) in [(&dirs.raw, "2v2.onitb"), (&dirs.compressed, "2v2.onitbz")] {
        let path = dir.join(name);
        let good = fs::read(&path).unwrap();
        let shard = onitb::shard::ShardFile::open(&path).unwrap();
        let (a, a_len) = shard.stored_range(0);
        let (b, b_len) = shard.stored_range(1);
        let (a, a_len, b, b_len) = (a as usize, a_len as usize, b as usize, b_len as usize);
        // Blocks 0 and 1 are adjacent: write them in the other order.
        let mut swapped = good[..a].to_vec();
        swapped.extend_from_slice(&good[b..b + b_len]);
        swapped.extend_from_slice(&good[a..a + a_len]);
        swapped.extend_from_slice(&good[b + b_len..]);
        fs::write(&path, &swapped).unwrap();
        let blocks = damaged_blocks(&path);
        assert!(blocks.contains(&0) && blocks.contains(&1), "{name}: {blocks:?}");
        for len in [good.len() - 1, good.len() / 2, 100, 0] {
            fs::write(&path, &good[..len]).unwrap();
            let report = verify::verify_paths(&[&path]);
            assert_eq!(report.failures.len(), 1, "{name} cut to {len}");
            let message = report.failures[0].to_string();
            assert!(message.contains(name) && message.contains("truncated"), "{message}");
        }
        let mut longer = good.clone();
        longer.push(0);
        fs::write(&path, &longer).unwrap();
        assert_eq!(verify::verify_paths(&[&path]).failures.len(), 1);
        fs::write(&path, &good).unwrap();
    }
}

#[test]
fn the_deep_check_passes_good_tables_and_finds_one_changed_value() {
    let dirs = saved();
    assert_eq!(verify::verify_deep(&dirs.raw, &|_| {}).unwrap(), None);
    assert_eq!(verify::verify_deep(&dirs.compressed, &|_| {}).unwrap(), None);
    // Make one 2v2 loss a ply longer.
    let target = Material::new(2, 2);
    let at = four_men().material(target).unwrap().values.iter().position(|&b| b == Value::Loss(4).to_byte()).unwrap();
    let wrong = altered(four_men(), |m, values| {
        if m == target {
            values[at] = Value::Loss(6).to_byte();
        }
    });
    let found = verify::check_table(&wrong, &|_| {}).unwrap().expect("the changed value is found");
    assert_eq!(found.material, target);
    let message = found.to_string();
    assert!(message.contains("the table says") && message.contains("successors give"), "{message}");
    // Also through a saved, checksum-correct table.
    let tmp = tempfile::tempdir().unwrap();
    store::save(&wrong, &tmp.path().join("w")).unwrap();
    assert!(verify::verify_paths(&[tmp.path().join("w")]).failures.is_empty());
    assert!(verify::verify_deep(&tmp.path().join("w"), &|_| {}).unwrap().is_some());
    // A sample as big as the table checks every layout through the block
    // cache and finds the same first inconsistency.
    let everything = Sample { layouts: u64::MAX, seed: 0 };
    let report = verify::verify_deep_sample(&tmp.path().join("w"), everything, &|_, _| {}).unwrap();
    assert_eq!(report.found, Some(found));
    let found = report.found.unwrap();
    assert_eq!((found.material, Value::from_word(found.stored)), (target, Some(Value::Loss(6))));
}

#[test]
fn the_sampled_deep_check_reads_what_the_table_holds() {
    let dirs = saved();
    let layouts: u64 = four_men().materials().iter().map(|m| m.index.layouts()).sum();
    for dir in [&dirs.raw, &dirs.compressed] {
        // Every layout, and progress up to the end.
        let seen = std::sync::Mutex::new(Vec::new());
        let everything = Sample { layouts: u64::MAX, seed: 0 };
        let report = verify::verify_deep_sample(dir, everything, &|done, of| seen.lock().unwrap().push((done, of)))
            .expect("the check runs");
        assert_eq!((report.layouts, report.table_layouts, report.found), (layouts, layouts, None));
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.last(), Some(&(layouts, layouts)));
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "{seen:?}");
        // A sample.
        let report = verify::verify_deep_sample(dir, Sample { layouts: 3000, seed: 4 }, &|_, _| {}).unwrap();
        assert!((2900..=3000 + verify::SAMPLE_RUN_LAYOUTS).contains(&report.layouts), "{}", report.layouts);
        assert_eq!(report.found, None);
    }
    // A damaged block is an error naming it, not a wrong value.
    let shard = dirs.compressed.join("2v2.onitbz");
    let mut bytes = fs::read(&shard).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 4;
    fs::write(&shard, &bytes).unwrap();
    let error = verify::verify_deep_sample(&dirs.compressed, Sample { layouts: u64::MAX, seed: 0 }, &|_, _| {})
        .expect_err("the damaged block is read");
    assert!(error.to_string().contains("2v2.onitbz") && error.to_string().contains("block 2"), "{error}");
    // Raw bytes read by index: the values the table holds, and a number
    // out of range is refused.
    let tablebase = Tablebase::open(&dirs.raw).unwrap();
    let solved = four_men().material(Material::new(2, 2)).unwrap();
    // 2v2's bytes span blocks 0-2; layout 139,810 straddles blocks 0 and 1.
    let straddles = (4 << 20) / CARD_STATES as u64;
    for n in [0, 17, straddles, straddles + 1, solved.index.layouts() - 1] {
        let bytes = tablebase.layout_bytes(solved.index.material, n).unwrap();
        assert_eq!(bytes[..], solved.values[n as usize * CARD_STATES..][..CARD_STATES], "layout {n}");
    }
    let past = tablebase.layout_bytes(solved.index.material, solved.index.layouts());
    assert!(matches!(past, Err(ProbeError::OutOfRange { .. })));
    assert!(matches!(tablebase.layout_bytes(Material::new(3, 1), 0), Err(ProbeError::NotInTable { .. })));
}

#[test]
fn compressing_refuses_a_table_that_contradicts_the_rules() {
    // A win in one stored as a win in three is not recomputable.
    let target = Material::new(2, 1);
    let wrong = altered(four_men(), |m, values| {
        if m == target {
            let at = values.iter().position(|&b| b == Value::Win(1).to_byte()).unwrap();
            values[at] = Value::Win(3).to_byte();
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    store::save(&wrong, &tmp.path().join("w")).unwrap();
    let error =
        compress::compress_table(&tmp.path().join("w"), &tmp.path().join("z"), DEFAULT_LEVEL, Content::Values, &|_| {})
            .unwrap_err()
            .to_string();
    assert!(error.contains("2v1") && error.contains("winning move"), "{error}");
    assert!(!tmp.path().join("z").exists());
}

/// The 4-men table widened to value words (as the solver writes a table
/// too deep for bytes), saved: every position probes as in the byte table,
/// the checksum pass accepts it and names a damaged block, and what reads
/// value bytes refuses it with a typed error instead of a wrong answer.
#[test]
fn a_word_table_probes_and_verifies_as_the_byte_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("words");
    let bytes_dir = tmp.path().join("bytes");
    let table = four_men();
    store::save(table, &bytes_dir).unwrap();
    let wide = table.widened();
    store::save(&wide, &dir).unwrap();
    let tablebase = Tablebase::with_cache(&dir, 2).unwrap();
    for_each_position(table, |material, n, k, p| {
        match table.value(&p) {
            Some(value) => assert_eq!(tablebase.probe(&p).unwrap(), value, "{material} {n} {k}"),
            None => assert!(matches!(tablebase.probe(&p), Err(ProbeError::GameOver))),
        }
        assert_eq!(wide.value(&p), table.value(&p));
    });
    let index = MaterialIndex::new(Material::new(2, 2));
    let p = position(&index.unrank(4321), 7);
    let moves = |t: &Tablebase| t.probe_moves(&p).unwrap().iter().map(|m| m.value).collect::<Vec<_>>();
    assert_eq!(moves(&tablebase), moves(&Tablebase::open(&bytes_dir).unwrap()));

    // Layouts read as words are the byte table's widened; what hands out
    // bytes refuses words.
    let byte_base = Tablebase::open(&bytes_dir).unwrap();
    for n in (0..index.layouts()).step_by(997) {
        let words = tablebase.layout_words(index.material, n).unwrap();
        assert_eq!(words, byte_base.layout_bytes(index.material, n).unwrap().map(onitb::value::widen));
        assert_eq!(words, byte_base.layout_words(index.material, n).unwrap());
    }
    let refused = "tables with two-byte values (format version 2) is not supported yet";
    let error = tablebase.layout_bytes(Material::new(2, 2), 0).unwrap_err().to_string();
    assert!(error.contains(refused) && error.contains("2v2.onitb"), "{error}");
    // The deep check compares words, and finds the table right.
    assert_eq!(verify::verify_deep(&dir, &|_| {}).unwrap(), None);
    let everything = Sample { layouts: u64::MAX, seed: 0 };
    let report = verify::verify_deep_sample(&dir, everything, &|_, _| {}).unwrap();
    assert_eq!((report.found, report.layouts), (None, report.table_layouts));

    // The checksum pass: every block's bytes, twice as many as the byte table's.
    let report = verify::verify_paths(&[&dir]);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let byte_report = verify::verify_paths(&[&bytes_dir]);
    assert_eq!((report.shards, report.bytes), (4, 2 * byte_report.bytes));
    let path = dir.join("2v2.onitb");
    let good = fs::read(&path).unwrap();
    let shard = onitb::shard::ShardFile::open(&path).unwrap();
    let last = shard.block_count() - 1;
    let (offset, len) = shard.stored_range(last);
    let mut bad = good.clone();
    bad[(offset + len / 2) as usize] ^= 0x10;
    fs::write(&path, &bad).unwrap();
    assert_eq!(damaged_blocks(&path), vec![last]);
}
