//! Sparse own planes: a streamed group whose undecided layouts have become
//! few keeps its own `won`, `lost` and `capture` words for those layouts
//! only, so that a step reads and writes a few bytes per undecided layout
//! instead of 8 to 12 per layout of the group.
//!
//! Owns the record format and the rules for when a group turns sparse and
//! relists; knows nothing of files, windows or steps.
//!
//! A group turns sparse at a loss step (the only step that holds all three
//! stored planes in its window) once at most 1 in [`MAX_UNDECIDED_SHARE`] of its
//! layouts has an undecided state. The layouts listed then stay listed,
//! decided or not, until the group relists at a win step with the dense
//! planes read ([`RELIST_SHARE`]): the group's dense `won` and `lost`
//! segments, written last at that step, stay as they were, and its words
//! now are those segments with the listed layouts' words laid over them
//! (what finishing and a loss step's landing `won` need). Steps do not read
//! the dense segments at all: every layout not listed was decided, so they
//! fill its words as a hole's (`won` and `lost` all set), which no kernel
//! decides anything in, and which no listed layout can look like (its
//! `won` and `lost` are disjoint). Only the placements with a listed layout
//! are filled so (*live* placements, reported as they are laid); a step
//! neither reads nor writes the words of the others, which hold whatever
//! the window held before, so a late step's own work is in proportion to
//! its listed layouts, not to the group.
//!
//! Records live in two stored lanes laid out like a plane (so a group's
//! records fit its plane segment, see [`converts`]): `SparseWon` holds
//! (layout number, `won`) pairs in increasing layout order, `SparseRest`
//! (`lost`, `capture`) pairs in the same order. Win steps write
//! only the first, loss steps only the second, so a loss step can read the
//! landing groups' `won` records while it rewrites its own others.

use super::flags::BlockMarker;
use super::lanes::SEGMENT_ALIGN_BYTES;
use crate::rules::ALL_CARD_STATES;

/// A group turns sparse once at most one layout in this many has an
/// undecided state. Then a step's own reads are at most 16 / 4 = 4 bytes
/// per layout of the group (a dense loss step reads 12, a win step 4 or 8), and
/// a loss step of the mirror reads at most 2 more per layout on top of the
/// landing `won` segment's 4. The layouts listed then stay listed until
/// the group relists ([`RELIST_SHARE`]). Work files read + written at 6 men
/// with `--mem 32MiB` (GiB, docs/BENCHMARKS.md; records of 20 bytes then,
/// with a `held` word): without relisting 33.6 at
/// 3, 28.9 at 5, 27.4 at 8, 27.3 at 12, 28.2 at 20; with it 23.8 at 3,
/// 23.8 at 4, 24.1 at 5, 25.2 at 8; 49.2 with no sparse groups.
pub(super) const MAX_UNDECIDED_SHARE: u64 = 4;

/// A sparse group relists at a win step once its undecided states are at
/// most one in this many of its listed layouts (so its list shrinks at
/// least this many times): the step reads its dense `won` and `lost` (8
/// bytes per layout) besides its records and writes them back with the
/// records of its undecided layouts only. That costs 16 bytes per layout
/// once; each later pair of steps then reads and writes 48 bytes less per
/// layout dropped from the list. At 6 men with `--mem 32MiB` the work
/// files' reads + writes were 25.4 GiB at 2, 25.2 at 4, 25.2 at 8 (with
/// groups turning sparse at 1 in 8).
pub(super) const RELIST_SHARE: u64 = 4;

/// Does a group relist at this win step (if visited)?
pub(super) fn relists(group: super::GroupState) -> bool {
    group.sparse_layouts > 0 && group.undecided * RELIST_SHARE <= group.sparse_layouts as u64
}

/// Words per layout of a `SparseWon` record: layout number, `won`.
const WON_WORDS: usize = 2;
/// Words per layout of a `SparseRest` record: `lost`, `capture`.
const REST_WORDS: usize = 2;

/// Bytes of a group's `SparseWon` records as read and written (padded for
/// O_DIRECT).
pub(super) fn won_bytes(listed: u32) -> usize {
    (listed as usize * WON_WORDS * 4).next_multiple_of(SEGMENT_ALIGN_BYTES as usize)
}

/// Bytes of a group's `SparseRest` records as read and written.
pub(super) fn rest_bytes(listed: u32) -> usize {
    (listed as usize * REST_WORDS * 4).next_multiple_of(SEGMENT_ALIGN_BYTES as usize)
}

/// Does a group of `layouts` layouts whose plane segment is `segment_bytes`
/// (padded) turn sparse with `listed` undecided layouts? Only if its
/// records fit the segment, which the rule's share guarantees but for
/// padding.
pub(super) fn converts(listed: u64, layouts: u64, segment_bytes: u64) -> bool {
    listed > 0 && listed * MAX_UNDECIDED_SHARE <= layouts && u32::try_from(listed).is_ok_and(|n| fits(n, segment_bytes))
}

/// Do `listed` records fit a plane segment of `segment_bytes`? (A
/// checkpoint's counts are checked with this before they are used.)
pub(super) fn fits(listed: u32, segment_bytes: u64) -> bool {
    won_bytes(listed).max(rest_bytes(listed)) as u64 <= segment_bytes
}

/// Layouts with an undecided state.
pub(super) fn undecided_layouts(won: &[u32], lost: &[u32]) -> u64 {
    won.iter().zip(lost).filter(|&(w, l)| !(w | l) & ALL_CARD_STATES != 0).count() as u64
}

/// One group's own plane words in a window.
pub(super) struct GroupWords<'a> {
    pub won: &'a mut [u32],
    pub lost: &'a mut [u32],
    pub capture: &'a mut [u32],
}

/// Which layouts a group's records list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    /// The group turns sparse now: its layouts with an undecided state.
    Undecided,
    /// The group is sparse: the layouts its records list, which are the
    /// ones a step's window does not hold as holes.
    Listed,
}

/// Writes the records of the layouts `pick` picks into `won_out` and
/// `rest_out` (at least [`won_bytes`] and [`rest_bytes`] long; the padding
/// is zeroed), either of which may be left out (`None`: a step stores only
/// its own lane of a group that stays listed), and returns how many there
/// are.
/// `own` is the group's `won`, `lost` and `capture` words; only the
/// placements (`block_words` layouts each) `live` gives (their numbers in
/// the group, increasing) are looked at (with [`Pick::Listed`], the others'
/// words are not the group's), e.g. from
/// [`PlacementFlags::set_blocks`](super::flags::PlacementFlags::set_blocks).
/// (Skipping the others a flag word at a time instead of asking each
/// placement changed nothing measurable at 8-men 4v4's depths 45-60:
/// most placements of a sparse group are live, as it lists up to a
/// quarter of its layouts.)
pub(super) fn gather(
    own: [&[u32]; 3],
    pick: Pick,
    (mut won_out, mut rest_out): (Option<&mut [u32]>, Option<&mut [u32]>),
    block_words: usize,
    live: impl IntoIterator<Item = usize>,
) -> u32 {
    let [own_won, own_lost, own_capture] = own;
    debug_assert!(own_won.len().is_multiple_of(block_words), "a group holds whole placements");
    assert!(block_words <= 32, "a placement's picks fit a u32");
    let picked = |won: u32, lost: u32| match pick {
        Pick::Undecided => !(won | lost) & ALL_CARD_STATES != 0,
        Pick::Listed => !(won == ALL_CARD_STATES && lost == ALL_CARD_STATES),
    };
    let mut listed = 0usize;
    for first in live.into_iter().map(|k| k * block_words) {
        // A placement's picks as a mask first, then its picked layouts,
        // not a branch per layout on whether it is picked, which follows
        // no order a predictor could learn: the settling of 8-men 4v4's
        // depths 65-80 took 3.9 s instead of 4.9 (docs/BENCHMARKS.md).
        let (won, lost) = (&own_won[first..first + block_words], &own_lost[first..first + block_words]);
        let mut picks = won.iter().zip(lost).enumerate().fold(0u32, |m, (j, (&w, &l))| m | (picked(w, l) as u32) << j);
        while picks != 0 {
            let n = first + picks.trailing_zeros() as usize;
            picks &= picks - 1;
            // (Which lanes are written is the same for the whole call.)
            if let Some(won_out) = won_out.as_deref_mut() {
                won_out[WON_WORDS * listed..WON_WORDS * (listed + 1)].copy_from_slice(&[n as u32, own_won[n]]);
            }
            if let Some(rest_out) = rest_out.as_deref_mut() {
                let rest = [own_lost[n], own_capture[n]];
                rest_out[REST_WORDS * listed..REST_WORDS * (listed + 1)].copy_from_slice(&rest);
            }
            listed += 1;
        }
    }
    let listed = u32::try_from(listed).expect("a group's layouts fit u32");
    if let Some(won_out) = won_out {
        won_out[WON_WORDS * listed as usize..won_bytes(listed) / 4].fill(0);
    }
    if let Some(rest_out) = rest_out {
        rest_out[REST_WORDS * listed as usize..rest_bytes(listed) / 4].fill(0);
    }
    listed
}

/// What the words of the layouts the records do not list are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Base {
    /// Holes (decided; what steps work with): `won` and `lost` all set,
    /// `capture` clear, in the live placements (of this many layouts each:
    /// p * q) only.
    Holes { block_words: usize },
    /// As they are: the dense segments, read (finishing, relisting).
    Dense,
}

/// Records that do not make sense: layout numbers out of order or beyond
/// the group. Only damaged work files hold such.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadRecords;

/// Lays the `listed` records in `won_in` and `rest_in` over a group's
/// words, with the others as `base` says. Over holes, `live(first)` is
/// called, in increasing order, with the first layout of each placement
/// that has a listed layout (the only placements whose words are written).
pub(super) fn scatter(
    won_in: &[u32],
    rest_in: &[u32],
    listed: u32,
    own: GroupWords,
    base: Base,
    mut live: impl FnMut(usize),
) -> Result<(), BadRecords> {
    let records = won_in[..WON_WORDS * listed as usize].chunks_exact(WON_WORDS);
    let rests = rest_in[..REST_WORDS * listed as usize].chunks_exact(REST_WORDS);
    let mut next = 0usize;
    // The end of the placement laid as holes last.
    let mut laid_to = 0usize;
    for (record, rest) in records.zip(rests) {
        let n = record[0] as usize;
        let (won, lost) = (record[1], rest[0]);
        if n < next || n >= own.won.len() || won & lost != 0 || (won | lost) & !ALL_CARD_STATES != 0 {
            return Err(BadRecords);
        }
        if let Base::Holes { block_words } = base
            && n >= laid_to
        {
            // A group holds whole placements, so the placement ends
            // within it.
            let first = n - n % block_words;
            laid_to = first + block_words;
            own.won[first..laid_to].fill(ALL_CARD_STATES);
            own.lost[first..laid_to].fill(ALL_CARD_STATES);
            own.capture[first..laid_to].fill(0);
            live(first);
        }
        next = n + 1;
        own.won[n] = won;
        own.lost[n] = lost;
        own.capture[n] = rest[1];
    }
    Ok(())
}

/// Clears the words of `plane` (one group's) in the placements
/// (`block_words` layouts each) that hold one of the `listed` records in
/// `won_in`, which [`scatter`] checked: a step's `fresh`, which it reads
/// in the live placements only.
pub(super) fn clear_live(won_in: &[u32], listed: u32, block_words: usize, plane: &mut [u32]) {
    let mut cleared_to = 0usize;
    for record in won_in[..WON_WORDS * listed as usize].chunks_exact(WON_WORDS) {
        let n = record[0] as usize;
        if n >= cleared_to {
            let first = n - n % block_words;
            cleared_to = first + block_words;
            plane[first..cleared_to].fill(0);
        }
    }
}

/// Lays the `won` words of `listed` records over a group's `won` segment
/// of holes (a loss step's landing `won`, whose words are not laid where
/// the block flags of `blocks` are clear): a block gets holes' words when
/// its first record sets its flag.
pub(super) fn patch_won(
    won_in: &[u32],
    listed: u32,
    won: &mut [u32],
    mut blocks: BlockMarker,
) -> Result<(), BadRecords> {
    let mut next = 0usize;
    for record in won_in[..WON_WORDS * listed as usize].chunks_exact(WON_WORDS) {
        let n = record[0] as usize;
        if n < next || n >= won.len() || record[1] & !ALL_CARD_STATES != 0 {
            return Err(BadRecords);
        }
        next = n + 1;
        if let Some(block) = blocks.mark(n) {
            won[block].fill(ALL_CARD_STATES);
        }
        won[n] = record[1];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::flags::PlacementFlags;
    use super::*;

    /// A group of `len` layouts: holes, decided layouts and undecided ones.
    fn group(len: usize) -> [Vec<u32>; 3] {
        let layout = |n: usize| {
            let (won, lost) = match n % 7 {
                0 => (ALL_CARD_STATES, ALL_CARD_STATES),
                1 => (ALL_CARD_STATES, 0),
                2 => (0x0F0F_0F0F & ALL_CARD_STATES, !0x0F0F_0F0F & ALL_CARD_STATES),
                3 => (0x3 << (n % 20), 0x4 << (n % 20)),
                _ => (0, n as u32 & 0xFF),
            };
            let capture = (n as u32).wrapping_mul(0x9E37_79B9) & ALL_CARD_STATES & !(won | lost);
            [won, lost, capture]
        };
        let layouts: Vec<[u32; 3]> = (0..len).map(layout).collect();
        [0, 1, 2].map(|plane| layouts.iter().map(|words| words[plane]).collect())
    }

    fn refs(words: &[Vec<u32>; 3]) -> [&[u32]; 3] {
        [&words[0], &words[1], &words[2]]
    }

    fn view(words: &mut [Vec<u32>; 3]) -> GroupWords<'_> {
        let [won, lost, capture] = words;
        GroupWords { won, lost, capture }
    }

    /// The records of every undecided layout of `words` (placements of
    /// `block_words` layouts), gathered into buffers of 7s (so that a test
    /// sees the padding zeroed), and how many there are.
    fn undecided_records(words: &[Vec<u32>; 3], block_words: usize) -> (Vec<u32>, Vec<u32>, u32) {
        let len = words[0].len();
        let (mut won_out, mut rest_out) = (vec![7; 2 * len + 1024], vec![7; 2 * len + 1024]);
        let out = (Some(&mut won_out[..]), Some(&mut rest_out[..]));
        let listed = gather(refs(words), Pick::Undecided, out, block_words, 0..len / block_words);
        (won_out, rest_out, listed)
    }

    #[test]
    fn records_round_trip_over_holes_and_over_the_dense_segments() {
        let (len, block_words) = (3000, 6);
        let before = group(len);
        let undecided = undecided_layouts(&before[0], &before[1]);
        let (won_out, rest_out, listed) = undecided_records(&before, block_words);
        assert_eq!(listed as u64, undecided);
        assert!(won_out[2 * listed as usize..won_bytes(listed) / 4].iter().all(|&w| w == 0));

        // Over holes: the placements with a listed layout are reported and
        // hold the listed layouts as they were, the others of them as
        // holes; the other placements are left alone.
        let stale = |plane: u32| 0x0246_8ACE + plane;
        let mut steps = [0, 1, 2].map(|plane| vec![stale(plane); len]);
        let mut live = Vec::new();
        scatter(&won_out, &rest_out, listed, view(&mut steps), Base::Holes { block_words }, |first| live.push(first))
            .unwrap();
        let is_listed = |n: usize| !(before[0][n] | before[1][n]) & ALL_CARD_STATES != 0;
        let mut expected_live: Vec<usize> = (0..len).filter(|&n| is_listed(n)).map(|n| n - n % block_words).collect();
        expected_live.dedup();
        assert_eq!(live, expected_live);
        for n in 0..len {
            let words = [steps[0][n], steps[1][n], steps[2][n]];
            if is_listed(n) {
                assert_eq!(words, [0, 1, 2].map(|i| before[i][n]));
            } else if live.contains(&(n - n % block_words)) {
                assert_eq!(words, [ALL_CARD_STATES, ALL_CARD_STATES, 0]);
            } else {
                assert_eq!(words, [0, 1, 2].map(stale));
            }
        }
        // Listed again from the holes' view of the live placements: the
        // same records, even for a listed layout decided since, and none
        // of the stale words.
        steps[0][4] = ALL_CARD_STATES;
        steps[1][4] = 0;
        let (mut again_won, mut again_rest) = (vec![0; 2 * len + 1024], vec![0; 2 * len + 1024]);
        let live_placements = live.iter().map(|first| first / block_words);
        let again = gather(
            refs(&steps),
            Pick::Listed,
            (Some(&mut again_won), Some(&mut again_rest)),
            block_words,
            live_placements,
        );
        assert_eq!(again, listed);
        assert_eq!(again_won[..4], [3, won_out[1], 4, ALL_CARD_STATES]);
        // Either lane alone: the same records in it, the other untouched.
        for (want_won, want_rest) in [(true, false), (false, true)] {
            let (mut won, mut rest) = (vec![0; 2 * len + 1024], vec![0; 2 * len + 1024]);
            let out = (want_won.then_some(&mut won[..]), want_rest.then_some(&mut rest[..]));
            let live_placements = live.iter().map(|first| first / block_words);
            assert_eq!(gather(refs(&steps), Pick::Listed, out, block_words, live_placements), listed);
            assert_eq!((won == again_won, rest == again_rest), (want_won, want_rest));
        }

        // Over the dense segments: the words now.
        let mut dense = before.clone();
        scatter(&again_won, &again_rest, listed, view(&mut dense), Base::Dense, |_| panic!("no holes laid")).unwrap();
        let mut expected = before.clone();
        expected[0][4] = ALL_CARD_STATES;
        expected[1][4] = 0;
        assert_eq!(dense, expected);
        // Laid over a loss step's landing holes: the blocks with a listed
        // layout get their flags and holes' words under their records, the
        // others are left as they were.
        let elements = len.next_multiple_of(SEGMENT_ALIGN_BYTES as usize / 4);
        let mut flags = PlacementFlags::all_clear(elements, block_words);
        let mut won = vec![stale(0); len];
        patch_won(&again_won, listed, &mut won, flags.marker(0)).unwrap();
        for n in 0..len {
            let block = n - n % block_words;
            let is_live = live.contains(&block);
            assert_eq!(flags.get(block), is_live, "block of layout {n}");
            let hole = if is_live { ALL_CARD_STATES } else { stale(0) };
            assert_eq!(won[n], if is_listed(n) { expected[0][n] } else { hole }, "layout {n}");
        }
    }

    #[test]
    fn clearing_the_live_placements_leaves_the_others_alone() {
        let (len, block_words) = (300, 12);
        // Holes but for one layout in 37.
        let is_listed = |n: usize| n % 37 == 5;
        let mut words = group(len);
        let [won, lost, ..] = &mut words;
        for (n, (won, lost)) in won.iter_mut().zip(lost.iter_mut()).enumerate() {
            let hole = if is_listed(n) { 0 } else { ALL_CARD_STATES };
            (*won, *lost) = (hole, hole);
        }
        let (won_out, _, listed) = undecided_records(&words, block_words);
        let live = |n: usize| (n - n % block_words..n - n % block_words + block_words).any(is_listed);
        let mut plane = vec![u32::MAX; len];
        clear_live(&won_out, listed, block_words, &mut plane);
        assert!((0..len).all(|n| plane[n] == if live(n) { 0 } else { u32::MAX }));
        assert!((0..len).any(|n| !live(n)) && (0..len).any(live), "both kinds occur");
    }

    #[test]
    fn damaged_records_are_refused() {
        let len = 100;
        let words = group(len);
        let (mut won_out, rest_out, listed) = undecided_records(&words, 4);
        assert!(listed >= 2);
        let mut out_of_order = won_out.clone();
        out_of_order.swap(0, 2);
        let mut beyond = won_out.clone();
        beyond[2 * (listed as usize - 1)] = len as u32;
        let mut overlapping = rest_out.clone();
        overlapping[0] = won_out[1] | 1;
        won_out[1] |= 1;
        for (won, rest) in [(&out_of_order, &rest_out), (&beyond, &rest_out), (&won_out, &overlapping)] {
            let mut target = group(len);
            let holes = Base::Holes { block_words: 4 };
            assert_eq!(scatter(won, rest, listed, view(&mut target), holes, |_| {}), Err(BadRecords));
        }
        let mut flags = PlacementFlags::all_clear(1024, 4);
        assert_eq!(patch_won(&out_of_order, listed, &mut vec![0; len], flags.marker(0)), Err(BadRecords));
        assert_eq!(patch_won(&beyond, listed, &mut vec![0; len], flags.marker(0)), Err(BadRecords));
    }

    #[test]
    fn a_group_turns_sparse_only_with_few_undecided_layouts_that_fit_its_segment() {
        let segment = (1000u64 * 4).next_multiple_of(SEGMENT_ALIGN_BYTES);
        assert!(converts(250, 1000, segment));
        assert!(!converts(251, 1000, segment));
        assert!(!converts(0, 1000, segment));
        // Padding: 1 record takes a whole 4 KiB block.
        assert!(converts(1, 10, 4096));
        assert!(fits(512, 4096) && !fits(513, 4096));
    }
}
