//! Move lists kept from step to step: every placement's quiet board moves,
//! listed once for a resident material instead of at each of its visits.
//!
//! A step visits a placement about two dozen times in a 6-men table, and
//! listing its moves (walking target squares, ranking each successor's
//! block) was about 40% of the steps' instructions (docs/BENCHMARKS.md).
//! The list never changes: it depends only on the boards and the index.
//!
//! Owns the kept lists and their memory; the listing itself and what a
//! listed move means are the kernel's. Knows nothing of lanes or values.
//! Streamed materials do not keep lists: 8 bytes a move do not fit their
//! budget.

use super::kernel::{self, KeptMove, KeptMoves, Landing, MoveTable};
use super::lanes::LaneLayout;
use super::lanes::carve_mut;
use super::mirror;
use crate::index::{Group, MaterialIndex};
use rayon::prelude::*;
use std::ops::Range;

// DESIGN.md's memory figures count 8 bytes a kept move.
const _: () = assert!(std::mem::size_of::<KeptMove>() == 8);

/// Every placement's quiet board moves, for one material whose quiet moves
/// land in `target` (its mirror).
pub(super) struct MoveLists {
    /// Per placement of the material in index order, where its moves start
    /// in `moves`; then the total.
    first: Vec<u32>,
    moves: Vec<KeptMove>,
    /// Per placement, the card slots with any move at all.
    cards_with_moves: Vec<u8>,
}

/// A material's moves counted, placement by placement: what its lists
/// would cost, before deciding to build them.
pub(super) struct CountedMoves {
    /// As [`MoveLists::first`].
    first: Vec<u32>,
}

impl CountedMoves {
    /// Counts every placement's quiet moves, or None if they are too many
    /// for 32-bit positions (no table up to 8 men comes near). With
    /// `moves.mirror`, placements that mirroring steps do not solve (the
    /// images of earlier ones, `mirror::is_image`) keep no moves.
    pub fn new(moves: &MoveTable, index: &MaterialIndex) -> Option<CountedMoves> {
        let group_first = group_first(index);
        let total = *group_first.last().expect("one entry per group and the end");
        let mut first = vec![0u32; total + 1];
        let groups = index.groups();
        carve_mut(&mut first[..total], parts(&group_first)).into_par_iter().zip(groups).for_each(|(counts, group)| {
            for (i, (count, (m, o))) in counts.iter_mut().zip(group.placements(0, placements(index, group))).enumerate()
            {
                *count =
                    if kept_for(moves, group, i, m, o) { kernel::count_quiet_moves(moves, m, o) as u32 } else { 0 };
            }
        });
        let mut at = 0u32;
        for slot in first.iter_mut() {
            let count = *slot;
            *slot = at;
            at = at.checked_add(count)?;
        }
        Some(CountedMoves { first })
    }

    /// Bytes the lists take once built.
    pub fn list_bytes(&self) -> u64 {
        let placements = (self.first.len() - 1) as u64;
        let moves = *self.first.last().expect("the total") as u64;
        moves * std::mem::size_of::<KeptMove>() as u64 + placements * (4 + 1) + 4
    }
}

impl MoveLists {
    /// Lists every placement's quiet moves into `target`, whose plane lanes
    /// are laid out as `target_planes` (at most 2^32 elements), where
    /// `counted` (of `index`) says they go.
    pub fn new(
        moves: &MoveTable,
        index: &MaterialIndex,
        (target, target_planes): (&MaterialIndex, &LaneLayout),
        counted: CountedMoves,
    ) -> MoveLists {
        assert!(fits_kept_offsets(target_planes), "kept moves number the landing lane's elements in 32 bits");
        let CountedMoves { first } = counted;
        let group_first = group_first(index);
        let total = group_first.last().copied().expect("one entry per group and the end");
        let mut listed = vec![KeptMove::default(); first[total] as usize];
        let mut cards_with_moves = vec![0u8; total];
        let move_starts: Vec<usize> = group_first.iter().map(|&p| first[p] as usize).collect();
        let listed_parts = carve_mut(&mut listed, parts(&move_starts));
        let cards_parts = carve_mut(&mut cards_with_moves, parts(&group_first));
        listed_parts.into_par_iter().zip(cards_parts).zip(index.groups()).for_each(|((out, cards), group)| {
            let landing: Landing<u32> = Landing::new(group, target, false, 0x1f, |_| &[][..]);
            // Per landing slot, the element where its group's segment starts.
            let segment_starts = kernel::landing_group_numbers(group, target, false, 0x1f)
                .map(|g| g.map_or(0, |g| (target_planes.segment(g).start / 4) as usize));
            let mut n = 0;
            for (i, (cards, (m, o))) in cards.iter_mut().zip(group.placements(0, placements(index, group))).enumerate()
            {
                if !kept_for(moves, group, i, m, o) {
                    continue;
                }
                *cards = kernel::for_each_quiet_move(moves, &landing, m, o, |listed, _| {
                    out[n] = moves.kept_move(&listed, m, segment_starts[listed.landing_slot as usize]);
                    n += 1;
                });
            }
            assert_eq!(n, out.len(), "counting and listing a group's moves agree");
        });
        MoveLists { first, moves: listed, cards_with_moves }
    }

    /// The kept moves of the material's placement `placement` (in index
    /// order, all groups).
    #[inline(always)]
    pub fn placement(&self, placement: usize) -> KeptMoves<'_> {
        let moves = &self.moves[self.first[placement] as usize..self.first[placement + 1] as usize];
        KeptMoves { moves, cards_with_moves: self.cards_with_moves[placement] }
    }
}

/// Does placement `i` of `group` (with boards `m`, `o`) keep its moves?
/// All do, but with a mirror the images that steps do not solve.
#[inline]
fn kept_for(moves: &MoveTable, group: &Group, i: usize, m: u32, o: u32) -> bool {
    moves.mirror.is_none() || !mirror::is_image(group, i as u64, m, o)
}

/// Can [`KeptMove::offset`] number every element of a landing material's
/// plane lanes? (Up to 8 men they are far below 2^32; 5v5's are not.)
pub(super) fn fits_kept_offsets(target_planes: &LaneLayout) -> bool {
    target_planes.total_bytes() / 4 <= u32::MAX as u64
}

/// Placements before each group's first, by group number, then the total.
fn group_first(index: &MaterialIndex) -> Vec<usize> {
    let groups = index.groups();
    let mut starts: Vec<usize> = groups.iter().map(|g| (g.first_layout / per_placement(index)) as usize).collect();
    starts.push((index.layouts() / per_placement(index)) as usize);
    starts
}

fn per_placement(index: &MaterialIndex) -> u64 {
    index.material.mover as u64 * index.material.opponent as u64
}

fn placements(index: &MaterialIndex, group: &Group) -> u64 {
    group.layouts / per_placement(index)
}

/// Ranges between consecutive `starts`.
fn parts(starts: &[usize]) -> impl Iterator<Item = Range<usize>> + '_ {
    starts.windows(2).map(|pair| pair[0]..pair[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;
    use crate::rules::{CardSet, NoMoveRule, Rules, masters_end_game, step};

    /// The kept moves of every placement are its quiet moves, and each
    /// one's block holds the successors that turning and ranking the moved
    /// layout gives (checked on the first layout of each placement).
    #[test]
    fn kept_moves_are_the_quiet_moves_and_find_their_successors() {
        for cards in
            [CardSet::default_set(), CardSet::from_names(&["tiger", "dragon", "frog", "rabbit", "crab"]).unwrap()]
        {
            let mut moves = MoveTable::new(&Rules { cards, no_move: NoMoveRule::Pass });
            // Every placement's moves (a mirror keeps none for images: the
            // test below).
            moves.mirror = None;
            let (index, target) = (MaterialIndex::new(Material::new(2, 3)), MaterialIndex::new(Material::new(3, 2)));
            let counted = CountedMoves::new(&moves, &index).unwrap();
            let bytes = counted.list_bytes();
            let target_planes = LaneLayout::new(&target, 4);
            let lists = MoveLists::new(&moves, &index, (&target, &target_planes), counted);
            assert_eq!(bytes, lists.moves.len() as u64 * 8 + lists.cards_with_moves.len() as u64 * 5 + 4);
            let mut checked = 0;
            for group in index.groups() {
                let first = (group.first_layout / per_placement(&index)) as usize;
                for (i, (mover, opponent)) in group.placements(0, placements(&index, group)).enumerate() {
                    let kept = lists.placement(first + i);
                    let mut quiet = Vec::new();
                    for from in (0..25u8).filter(|s| mover & (1 << s) != 0) {
                        let reach = cards
                            .cards()
                            .iter()
                            .flat_map(|card| card.offsets.iter())
                            .filter_map(|&(dx, dy)| step(from, dx, dy))
                            .fold(0u32, |reach, to| reach | 1 << to);
                        let open = reach & !(mover | opponent);
                        quiet.extend((0..25u8).filter(|&to| open & (1 << to) != 0).map(|to| (from, to)));
                    }
                    assert_eq!(kept.moves.iter().map(|m| (m.from, m.to)).collect::<Vec<_>>(), quiet);
                    let layout = crate::index::Layout {
                        mover,
                        opponent,
                        mover_master: mover.trailing_zeros() as u8,
                        opponent_master: opponent.trailing_zeros() as u8,
                    };
                    if masters_end_game(layout.mover_master, layout.opponent_master) {
                        continue;
                    }
                    for m in kept.moves {
                        let next = kernel::successor(&layout, m.from, m.to);
                        if masters_end_game(next.mover_master, next.opponent_master) {
                            continue;
                        }
                        let next_group = target.group_of(next.mover, next.opponent);
                        let g = target.groups().iter().position(|group| std::ptr::eq(group, next_group)).unwrap();
                        let number = target.rank(&next) - next_group.first_layout;
                        let masters = target.turned_masters_part(
                            layout.mover ^ (1 << m.from) ^ (1 << m.to),
                            layout.opponent,
                            if m.from == layout.mover_master { m.to } else { layout.mover_master },
                            layout.opponent_master,
                        );
                        let segment_start = target_planes.segment(g).start / 4;
                        assert_eq!(segment_start + number, m.offset as u64 + masters);
                        checked += 1;
                    }
                }
            }
            assert!(checked > 100_000, "checked {checked}");
        }
    }

    /// With a mirror, the placements that steps solve keep the lists they
    /// keep without one, and the images of earlier placements none.
    #[test]
    fn a_mirror_keeps_no_moves_for_images() {
        let mirrored = MoveTable::new(&Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass });
        assert!(mirrored.mirror.is_some(), "the default set is mirror-closed");
        let mut every = MoveTable::new(&Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass });
        every.mirror = None;
        let (index, target) = (MaterialIndex::new(Material::new(2, 3)), MaterialIndex::new(Material::new(3, 2)));
        let target_planes = LaneLayout::new(&target, 4);
        let lists = |moves: &MoveTable| {
            MoveLists::new(moves, &index, (&target, &target_planes), CountedMoves::new(moves, &index).unwrap())
        };
        let (half, all) = (lists(&mirrored), lists(&every));
        let (mut images, mut solved) = (0, 0);
        for group in index.groups() {
            let first = (group.first_layout / per_placement(&index)) as usize;
            for (i, (mover, opponent)) in group.placements(0, placements(&index, group)).enumerate() {
                let (kept, listed) = (half.placement(first + i), all.placement(first + i));
                if mirror::is_image(group, i as u64, mover, opponent) {
                    assert!(kept.moves.is_empty() && kept.cards_with_moves == 0);
                    images += 1;
                } else {
                    assert_eq!(kept.moves, listed.moves);
                    assert_eq!(kept.cards_with_moves, listed.cards_with_moves);
                    solved += 1;
                }
            }
        }
        assert!(images > 0 && solved > images, "{images} images, {solved} solved");
    }
}
