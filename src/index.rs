//! The block-indexed position index: layouts of one material to dense
//! numbers and back.
//!
//! Owns the numbering of positions; knows the board geometry but nothing of
//! cards' moves, values or storage.
//!
//! A *layout* is a placement of both sides' pieces with the two masters
//! marked; each layout carries all 30 card states (a 30-bit word in the bit
//! planes, 30 consecutive bytes in a value table).
//!
//! The index is split like seed 002's: high part fixed per [`Group`], low part
//! inside it. A group is keyed by how many pieces of each side stand in each
//! row (the rows are the regions; the 180-degree turn maps row r onto row
//! 4 - r). A move changes the mover's count in at most two rows, and the turn
//! of perspective maps the key in a fixed way (mover counts <-> opponent
//! counts, rows reversed), so all moves of one piece class from a group land
//! in a small, known set of groups: at most one per (from row, to row) pair.
//!
//! Inside a group, a layout is numbered by mixed radix over the rows (in
//! [`DIGIT_ORDER`], row 0 least significant): the digit of row r ranks the row's mover pattern among
//! the C(5, m_r) with that many pieces, and the opponent's pattern among the
//! C(5 - m_r, o_r) on the remaining squares. Then the mover's master (its
//! ordinal among the mover's pieces in square order) and the opponent's.
//! Game-over layouts are numbered too (they are holes the solver marks).

use crate::rules::{CardState, MAX_PIECES_PER_SIDE, Position, SQUARES};
use std::fmt;
use std::ops::Range;

/// Rows (and columns) of the board.
const ROWS: usize = 5;
/// Count vectors over five rows with sum <= 5: C(10, 5).
const COUNT_VECTORS: usize = 252;
/// Count vectors packed in base 6, one digit per row.
const PACKED_COUNTS: usize = 6 * 6 * 6 * 6 * 6;

const fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    let mut result = 1;
    let mut i = 0;
    while i < k {
        result = result * (n - i) / (i + 1);
        i += 1;
    }
    result
}

/// Rank of a 5-bit pattern among the patterns with as many bits (colex).
const fn pattern_rank(pattern: usize) -> usize {
    colex_part(pattern, 0, 0)
}

/// What the pieces on `bits` (bit i: square `first_square + i`) add to
/// their board's colex rank when `below` pieces stand on lower squares:
/// the sum over them, the n-th in square order counting on from `below`,
/// of C(square, n). With `first_square` and `below` 0, the rank itself.
/// Squares below [`SQUARES`], at most `MAX_PIECES_PER_SIDE` pieces in all.
const fn colex_part(bits: usize, first_square: usize, below: usize) -> usize {
    let (mut part, mut n, mut rest) = (0, below, bits);
    while rest != 0 {
        let square = first_square + rest.trailing_zeros() as usize;
        rest &= rest - 1;
        n += 1;
        part += BINOMIAL[square][n];
    }
    part
}

/// Packs the bits of `pattern` that lie on `free` squares into the low bits.
const fn compress(pattern: usize, free: usize) -> usize {
    let mut out = 0;
    let mut n = 0;
    let mut bit = 0;
    while bit < 5 {
        if free & (1 << bit) != 0 {
            if pattern & (1 << bit) != 0 {
                out |= 1 << n;
            }
            n += 1;
        }
        bit += 1;
    }
    out
}

/// `ROW_DIGIT[mover_pattern][opponent_pattern]`: the digit of one row (for
/// disjoint patterns): mover rank * C(5 - m, o) + opponent rank on the free
/// squares.
const ROW_DIGIT: [[u16; 32]; 32] = {
    let mut table = [[u16::MAX; 32]; 32];
    let mut m = 0;
    while m < 32 {
        let mut o = 0;
        while o < 32 {
            if m & o == 0 {
                let mover_count = (m as u32).count_ones() as usize;
                let opp_count = (o as u32).count_ones() as usize;
                let free = !m & 31;
                let opp_rank = pattern_rank(compress(o, free));
                table[m][o] = (pattern_rank(m) * binomial(5 - mover_count, opp_count) + opp_rank) as u16;
            }
            o += 1;
        }
        m += 1;
    }
    table
};

/// Radix of a row digit for (mover count, opponent count) in that row.
const fn row_radix(mover_count: usize, opp_count: usize) -> usize {
    binomial(5, mover_count) * binomial(5 - mover_count, opp_count)
}

/// Largest row radix: C(5,2) * C(3,1) = 30 (also C(5,2)*C(3,2) = 30).
const MAX_ROW_RADIX: usize = 30;

/// `ROW_PATTERNS[m][o][digit]` = (mover pattern, opponent pattern) packed as
/// `mover | opponent << 5`.
const ROW_PATTERNS: [[[u16; MAX_ROW_RADIX]; 6]; 6] = {
    let mut table = [[[u16::MAX; MAX_ROW_RADIX]; 6]; 6];
    let mut m = 0;
    while m < 32 {
        let mut o = 0;
        while o < 32 {
            if m & o == 0 {
                let mc = (m as u32).count_ones() as usize;
                let oc = (o as u32).count_ones() as usize;
                table[mc][oc][ROW_DIGIT[m][o] as usize] = (m | (o << 5)) as u16;
            }
            o += 1;
        }
        m += 1;
    }
    table
};

/// `MIRRORED_DIGIT[m][o][digit]`: the digit of the row whose patterns are
/// those of `digit` (with m mover and o opponent pieces) with the columns
/// reversed. The mirror keeps each row's counts, so the image of a
/// placement is numbered in the same group by the same radices
/// ([`Odometer::image_number`]).
const MIRRORED_DIGIT: [[[u8; MAX_ROW_RADIX]; 6]; 6] = {
    let mut table = [[[u8::MAX; MAX_ROW_RADIX]; 6]; 6];
    // Every (mover count, opponent count, digit) in turn.
    let mut i = 0;
    while i < 6 * 6 * MAX_ROW_RADIX {
        let (mc, oc, digit) = (i / (6 * MAX_ROW_RADIX), i / MAX_ROW_RADIX % 6, i % MAX_ROW_RADIX);
        let packed = ROW_PATTERNS[mc][oc][digit] as usize;
        if packed != u16::MAX as usize {
            table[mc][oc][digit] = ROW_DIGIT[reverse_row(packed & 31)][reverse_row(packed >> 5)] as u8;
        }
        i += 1;
    }
    table
};

/// Reverses a 5-bit row pattern: the 180-degree turn mirrors columns.
const fn reverse_row(pattern: usize) -> usize {
    let mut out = 0;
    let mut bit = 0;
    while bit < 5 {
        if pattern & (1 << bit) != 0 {
            out |= 1 << (4 - bit);
        }
        bit += 1;
    }
    out
}

/// `TURNED_ROW_DIGIT[mover_row << 5 | opponent_row]`: the digit that row r
/// of a layout gets as row 4 - r once the board is turned and the sides
/// swapped. Lets the solver rank a successor without turning its boards.
const TURNED_ROW_DIGIT: [u16; 1024] = {
    let mut table = [u16::MAX; 1024];
    let mut m = 0;
    while m < 32 {
        let mut o = 0;
        while o < 32 {
            if m & o == 0 {
                table[(m << 5) | o] = ROW_DIGIT[reverse_row(o)][reverse_row(m)];
            }
            o += 1;
        }
        m += 1;
    }
    table
};

/// [`TURNED_ROW_DIGIT`] of row `row` of the boards `mover` and `opponent`.
#[inline(always)]
fn turned_row_digit(mover: u32, opponent: u32, row: usize) -> u16 {
    let (m, o) = (((mover >> (5 * row)) & 31) as usize, ((opponent >> (5 * row)) & 31) as usize);
    TURNED_ROW_DIGIT[(m << 5) | o]
}

const _: () = {
    let mut m = 0;
    while m <= 5 {
        let mut o = 0;
        while o + m <= 5 {
            assert!(row_radix(m, o) <= MAX_ROW_RADIX);
            o += 1;
        }
        m += 1;
    }
};

/// Rows in the order of their digits in a placement number, least
/// significant first. The turn maps row r onto row 4 - r, so with rows 0
/// and 4 (and 1 and 3) next to each other, the successors of placements
/// that differ in the lowest digit differ only in the second lowest: a run
/// of placements lands on a small, dense tile of its successors' group,
/// which keeps the steps' reads in cache.
const DIGIT_ORDER: [usize; ROWS] = [0, 4, 1, 3, 2];

/// Row counts of one side packed in base 6 (row 0 least significant).
#[inline]
fn packed_counts(board: u32) -> usize {
    let mut packed = 0;
    let mut weight = 1;
    for row in 0..ROWS {
        packed += ((board >> (5 * row)) & 31).count_ones() as usize * weight;
        weight *= 6;
    }
    packed
}

fn unpack_counts(packed: usize) -> [u8; ROWS] {
    let mut out = [0; ROWS];
    let mut rest = packed;
    for count in &mut out {
        *count = (rest % 6) as u8;
        rest /= 6;
    }
    out
}

/// Dense ids of count vectors with sum <= 5, shared by all materials.
struct CountVectors {
    id_of_packed: Vec<u8>,
}

impl CountVectors {
    fn new() -> CountVectors {
        let mut id_of_packed = vec![u8::MAX; PACKED_COUNTS];
        let mut next = 0usize;
        for (packed, id) in id_of_packed.iter_mut().enumerate() {
            let sum: u8 = unpack_counts(packed).iter().sum();
            if sum as usize <= MAX_PIECES_PER_SIDE {
                *id = next as u8;
                next += 1;
            }
        }
        assert_eq!(next, COUNT_VECTORS);
        CountVectors { id_of_packed }
    }
}

/// Pieces per side: `mover` pieces for the side to move, `opponent` for the
/// other, masters included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Material {
    pub mover: u8,
    pub opponent: u8,
}

impl Material {
    pub fn new(mover: usize, opponent: usize) -> Material {
        assert!((1..=MAX_PIECES_PER_SIDE).contains(&mover) && (1..=MAX_PIECES_PER_SIDE).contains(&opponent));
        Material { mover: mover as u8, opponent: opponent as u8 }
    }

    /// The same material seen by the other side.
    pub fn flipped(self) -> Material {
        Material { mover: self.opponent, opponent: self.mover }
    }

    pub fn men(self) -> usize {
        (self.mover + self.opponent) as usize
    }

    /// Materials with 1..=max pieces per side, in solving order: fewer men
    /// first, so that captures always lead to solved materials.
    pub fn all_up_to(max_per_side: usize) -> Vec<Material> {
        let mut out = Vec::new();
        for p in 1..=max_per_side {
            for q in 1..=max_per_side {
                out.push(Material::new(p, q));
            }
        }
        out.sort_by_key(|m| (m.men(), m.mover));
        out
    }
}

impl fmt::Display for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}v{}", self.mover, self.opponent)
    }
}

/// A layout: both sides' pieces and masters, from the mover's view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub mover: u32,
    pub opponent: u32,
    pub mover_master: u8,
    pub opponent_master: u8,
}

impl Layout {
    /// The position of this layout with card state `cards`.
    pub fn with_cards(&self, cards: CardState) -> Position {
        Position {
            mover: self.mover,
            opponent: self.opponent,
            mover_master: self.mover_master,
            opponent_master: self.opponent_master,
            cards,
        }
    }
}

/// One group of a material's index: every layout with given per-row counts.
#[derive(Clone, Debug)]
pub struct Group {
    /// Mover's pieces per row (row 0 first).
    pub mover_counts: [u8; ROWS],
    pub opponent_counts: [u8; ROWS],
    /// Index of the first layout of the group within its material.
    pub first_layout: u64,
    /// Number of layouts in the group.
    pub layouts: u64,
    /// Weight of each row digit in the placement number.
    row_weights: [u64; ROWS],
    row_radices: [u8; ROWS],
}

impl Group {
    /// The (mover pattern, opponent pattern) of each row for a placement
    /// number.
    pub(crate) fn placement(&self, mut placement: u64) -> (u32, u32) {
        let (mut mover, mut opponent) = (0u32, 0u32);
        for row in DIGIT_ORDER {
            let radix = self.row_radices[row] as u64;
            let (m, o) = self.row_patterns(row, (placement % radix) as u8);
            placement /= radix;
            mover |= m << (5 * row);
            opponent |= o << (5 * row);
        }
        (mover, opponent)
    }
}

impl Group {
    /// The number of the placement with these boards (which must have the
    /// group's row counts): [`Group::placement`]'s inverse.
    #[inline]
    pub(crate) fn placement_number(&self, mover: u32, opponent: u32) -> u64 {
        let mut placement = 0u64;
        for row in 0..ROWS {
            debug_assert_eq!((mover >> (5 * row) & 31).count_ones(), self.mover_counts[row] as u32);
            debug_assert_eq!((opponent >> (5 * row) & 31).count_ones(), self.opponent_counts[row] as u32);
            let (m, o) = ((mover >> (5 * row)) & 31, (opponent >> (5 * row)) & 31);
            placement += ROW_DIGIT[m as usize][o as usize] as u64 * self.row_weights[row];
        }
        debug_assert_eq!(self.placement(placement), (mover, opponent));
        placement
    }

    /// The (mover, opponent) boards of placements `start..end`, in order.
    pub(crate) fn placements(&self, start: u64, end: u64) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut odometer = self.odometer(start.min(end));
        (start..end).map(move |_| {
            let boards = odometer.boards();
            odometer.advance();
            boards
        })
    }

    /// An [`Odometer`] at placement `placement`.
    pub(crate) fn odometer(&self, placement: u64) -> Odometer<'_> {
        // Each row's change, from each digit to the next (the last to the
        // first: a carry), of both boards, shifted into place, and of the
        // image's number, its weight multiplied in (a group's numbers are
        // below 30^5, `MAX_ROW_RADIX` per row, so they fit 32 bits, and a
        // change is added with wrapping).
        let mut row_steps = [[0u64; MAX_ROW_RADIX]; ROWS];
        let mut image_steps = [[0u32; MAX_ROW_RADIX]; ROWS];
        for row in 0..ROWS {
            let radix = self.row_radices[row];
            let boards = |digit: u8| {
                let (mover, opponent) = self.row_patterns(row, digit);
                (mover as u64 | (opponent as u64) << 32) << (5 * row)
            };
            for digit in 0..radix {
                let next = (digit + 1) % radix;
                row_steps[row][digit as usize] = boards(digit) ^ boards(next);
                image_steps[row][digit as usize] = self.image_part(row, next).wrapping_sub(self.image_part(row, digit));
            }
        }
        let mut odometer = Odometer {
            group: self,
            row_steps,
            image_steps,
            radices: self.row_radices,
            digits: [0; ROWS],
            boards: 0,
            image: 0,
        };
        odometer.seek(placement);
        odometer
    }

    /// Row `row`'s part of the number of a placement's mirror image, for
    /// the placement's digit `digit` in that row.
    #[inline(always)]
    fn image_part(&self, row: usize, digit: u8) -> u32 {
        let mirrored = MIRRORED_DIGIT[self.mover_counts[row] as usize][self.opponent_counts[row] as usize];
        let weight = u32::try_from(self.row_weights[row]).expect("a group's placements are below 30^5");
        mirrored[digit as usize] as u32 * weight
    }

    /// (mover, opponent) patterns of one row for a digit.
    #[inline(always)]
    fn row_patterns(&self, row: usize, digit: u8) -> (u32, u32) {
        unpack_patterns(
            ROW_PATTERNS[self.mover_counts[row] as usize][self.opponent_counts[row] as usize][digit as usize],
        )
    }
}

/// The boards of a group's placements one after another: each step
/// changes the lowest digit's row and, on a carry, the next ones, instead
/// of decoding every digit; [`Odometer::seek`] decodes them all, for a
/// jump. It keeps the number of the placement's mirror image as it goes,
/// changed by a table per row as the boards are (ranking the image's
/// boards from scratch was about 4% of a mirroring 4-men run's
/// instructions; summing a part per row at each visit, 0.9% of a 6-men
/// run's).
pub(crate) struct Odometer<'a> {
    group: &'a Group,
    /// By row and digit: what moving that row's digit on (the last one back
    /// to 0) changes in [`Odometer::boards`], one XOR for both boards.
    row_steps: [[u64; MAX_ROW_RADIX]; ROWS],
    /// By row and digit: what moving that row's digit on changes in
    /// [`Odometer::image_number`] (added with wrapping).
    image_steps: [[u32; MAX_ROW_RADIX]; ROWS],
    /// The group's row radices, kept beside the digits.
    radices: [u8; ROWS],
    digits: [u8; ROWS],
    /// The mover's board in the low 32 bits, the opponent's in the high.
    boards: u64,
    /// The number of the placement's mirror image.
    image: u32,
}

impl Odometer<'_> {
    /// The (mover, opponent) boards of the placement it is at.
    #[inline(always)]
    pub(crate) fn boards(&self) -> (u32, u32) {
        (self.boards as u32, (self.boards >> 32) as u32)
    }

    /// The number, in the group, of the mirror image (columns reversed) of
    /// the placement it is at: the mirror keeps every row's counts, so the
    /// image lies in the group.
    #[inline(always)]
    pub(crate) fn image_number(&self) -> u64 {
        let image = u64::from(self.image);
        debug_assert_eq!(
            image,
            (0..ROWS)
                .map(|row| {
                    let (mover, opponent) = self.boards();
                    let (m, o) = ((mover >> (5 * row)) & 31, (opponent >> (5 * row)) & 31);
                    ROW_DIGIT[reverse_row(m as usize)][reverse_row(o as usize)] as u64 * self.group.row_weights[row]
                })
                .sum::<u64>(),
            "the image's number is its rows' mirrored digits"
        );
        image
    }

    /// Moves to the next placement (past the group's last: to its first).
    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        for row in DIGIT_ORDER {
            self.boards ^= self.row_steps[row][self.digits[row] as usize];
            self.image = self.image.wrapping_add(self.image_steps[row][self.digits[row] as usize]);
            self.digits[row] += 1;
            if self.digits[row] != self.radices[row] {
                break;
            }
            self.digits[row] = 0;
        }
    }

    /// Moves to placement `placement`.
    pub(crate) fn seek(&mut self, placement: u64) {
        let mut rest = placement;
        for row in DIGIT_ORDER {
            self.digits[row] = (rest % self.radices[row] as u64) as u8;
            rest /= self.radices[row] as u64;
        }
        let (mover, opponent) = self.group.placement(placement);
        self.boards = mover as u64 | (opponent as u64) << 32;
        self.image = (0..ROWS).map(|row| self.group.image_part(row, self.digits[row])).sum();
        debug_assert!(
            DIGIT_ORDER.iter().all(|&row| {
                let (m, o) = self.group.row_patterns(row, self.digits[row]);
                (mover >> (5 * row)) & 31 == m && (opponent >> (5 * row)) & 31 == o
            }),
            "the digits are the boards' rows"
        );
    }
}

/// (mover, opponent) patterns of a row from their [`ROW_PATTERNS`] entry.
#[inline(always)]
fn unpack_patterns(packed: u16) -> (u32, u32) {
    (packed as u32 & 31, packed as u32 >> 5)
}

/// The turned row digits of one placement's boards (see
/// [`MaterialIndex::turned_rows_part_except`]).
pub struct TurnedRows {
    digits: [u16; ROWS],
    opponent: u32,
}

impl TurnedRows {
    pub fn new(mover: u32, opponent: u32) -> TurnedRows {
        let mut digits = [0; ROWS];
        for (row, digit) in digits.iter_mut().enumerate() {
            *digit = turned_row_digit(mover, opponent, row);
        }
        TurnedRows { digits, opponent }
    }
}

/// The index of one material.
pub struct MaterialIndex {
    pub material: Material,
    groups: Vec<Group>,
    /// Group number by (mover count-vector id, opponent count-vector id).
    group_of: Vec<u32>,
    layouts: u64,
    count_vectors: CountVectors,
}

const NO_GROUP: u32 = u32::MAX;

impl MaterialIndex {
    pub fn new(material: Material) -> MaterialIndex {
        let count_vectors = CountVectors::new();
        let (p, q) = (material.mover as usize, material.opponent as usize);
        let mut groups = Vec::new();
        let mut group_of = vec![NO_GROUP; COUNT_VECTORS * COUNT_VECTORS];
        let mut first_layout = 0u64;
        for mover_packed in 0..PACKED_COUNTS {
            let mover_counts = unpack_counts(mover_packed);
            if mover_counts.iter().map(|&c| c as usize).sum::<usize>() != p {
                continue;
            }
            for opp_packed in 0..PACKED_COUNTS {
                let opponent_counts = unpack_counts(opp_packed);
                if opponent_counts.iter().map(|&c| c as usize).sum::<usize>() != q {
                    continue;
                }
                if (0..ROWS).any(|r| mover_counts[r] + opponent_counts[r] > 5) {
                    continue;
                }
                let mut row_weights = [0u64; ROWS];
                let mut row_radices = [0u8; ROWS];
                let mut placements = 1u64;
                for row in DIGIT_ORDER {
                    row_weights[row] = placements;
                    let radix = row_radix(mover_counts[row] as usize, opponent_counts[row] as usize);
                    row_radices[row] = radix as u8;
                    placements *= radix as u64;
                }
                let layouts = placements * (p * q) as u64;
                // The solver keeps a layout's number within its group in 32
                // bits (`ListedMove::base`); the largest group, 5v5 with a
                // piece per row each, has 5^5 * 4^5 * 25 = 80 M layouts.
                assert!(layouts <= u32::MAX as u64, "a group's layouts fit 32 bits");
                let key = count_vectors.id_of_packed[mover_packed] as usize * COUNT_VECTORS
                    + count_vectors.id_of_packed[opp_packed] as usize;
                group_of[key] = groups.len() as u32;
                groups.push(Group { mover_counts, opponent_counts, first_layout, layouts, row_weights, row_radices });
                first_layout += layouts;
            }
        }
        MaterialIndex { material, groups, group_of, layouts: first_layout, count_vectors }
    }

    /// Number of layouts (each with 30 card states).
    pub fn layouts(&self) -> u64 {
        self.layouts
    }

    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The group a layout's boards belong to.
    #[inline]
    pub fn group_of(&self, mover: u32, opponent: u32) -> &Group {
        let key = self.count_vectors.id_of_packed[packed_counts(mover)] as usize * COUNT_VECTORS
            + self.count_vectors.id_of_packed[packed_counts(opponent)] as usize;
        let group = self.group_of[key];
        debug_assert_ne!(group, NO_GROUP, "boards do not belong to material {}", self.material);
        &self.groups[group as usize]
    }

    /// The group with these per-row counts, if the material has one.
    pub fn group_by_counts(&self, mover_counts: &[u8; ROWS], opponent_counts: &[u8; ROWS]) -> Option<usize> {
        let pack = |counts: &[u8; ROWS]| counts.iter().rev().fold(0usize, |acc, &c| acc * 6 + c as usize);
        let (m, o) = (pack(mover_counts), pack(opponent_counts));
        if m >= PACKED_COUNTS || o >= PACKED_COUNTS {
            return None;
        }
        let (mid, oid) = (self.count_vectors.id_of_packed[m], self.count_vectors.id_of_packed[o]);
        if mid == u8::MAX || oid == u8::MAX {
            return None;
        }
        let group = self.group_of[mid as usize * COUNT_VECTORS + oid as usize];
        (group != NO_GROUP).then_some(group as usize)
    }

    /// Layout number, in this material, of a layout of the flipped material
    /// after the board is turned and the sides swapped: `mover` and
    /// `opponent` are the boards before the turn (so `opponent` becomes the
    /// new mover). `group` must be the turned layout's group.
    #[inline]
    pub fn rank_turned(&self, group: &Group, mover: u32, opponent: u32, mover_master: u8, opponent_master: u8) -> u64 {
        let index = group.first_layout
            + self.turned_boards_part(group, mover, opponent)
            + self.turned_masters_part(mover, opponent, mover_master, opponent_master);
        debug_assert!(index < group.first_layout + group.layouts);
        index
    }

    /// The part of [`MaterialIndex::rank_turned`], counted from the group's
    /// first layout, that depends on the boards only: the same for every
    /// choice of masters.
    #[inline]
    pub fn turned_boards_part(&self, group: &Group, mover: u32, opponent: u32) -> u64 {
        debug_assert_eq!(opponent.count_ones(), self.material.mover as u32);
        debug_assert_eq!(mover.count_ones(), self.material.opponent as u32);
        let mut placement = 0u64;
        for row in 0..ROWS {
            placement += turned_row_digit(mover, opponent, row) as u64 * group.row_weights[ROWS - 1 - row];
        }
        placement * self.material.mover as u64 * self.material.opponent as u64
    }

    /// The part of [`MaterialIndex::turned_boards_part`] (before the
    /// masters' factor p * q) that the moves of one mover piece from
    /// `from_row` into `to_row` share: every row but `to_row`, with the
    /// piece lifted off its row (`lifted` is the mover's board without it).
    /// [`MaterialIndex::turned_boards_part_landed`] adds `to_row`'s digit
    /// per move; listing asks for this once per piece and row.
    #[inline]
    pub fn turned_rows_part_except(
        &self,
        group: &Group,
        rows: &TurnedRows,
        lifted: u32,
        from_row: usize,
        to_row: usize,
    ) -> u64 {
        // Each digit is chosen in a register: writing the new digit into a
        // copy of `rows.digits` and reading it back whole stalled on store
        // forwarding (40% of the listing's samples, streamed).
        let mut placement = 0u64;
        for row in 0..ROWS {
            let digit = if row == from_row { turned_row_digit(lifted, rows.opponent, row) } else { rows.digits[row] };
            placement += (row != to_row) as u64 * digit as u64 * group.row_weights[ROWS - 1 - row];
        }
        placement
    }

    /// [`MaterialIndex::turned_boards_part`] of the boards `moved`, which
    /// differ from `rows`' by one mover piece moving into `to_row`, given
    /// the other rows' part ([`MaterialIndex::turned_rows_part_except`]).
    #[inline]
    pub fn turned_boards_part_landed(
        &self,
        group: &Group,
        rows: &TurnedRows,
        rows_except: u64,
        moved: u32,
        to_row: usize,
    ) -> u64 {
        let digit = turned_row_digit(moved, rows.opponent, to_row);
        let placement = rows_except + digit as u64 * group.row_weights[ROWS - 1 - to_row];
        let index = placement * self.material.mover as u64 * self.material.opponent as u64;
        debug_assert_eq!(index, self.turned_boards_part(group, moved, rows.opponent));
        index
    }

    /// The rest of [`MaterialIndex::rank_turned`]: the masters' ordinals.
    /// Turning reverses square order: a master's ordinal counts the pieces
    /// above it.
    #[inline]
    pub fn turned_masters_part(&self, mover: u32, opponent: u32, mover_master: u8, opponent_master: u8) -> u64 {
        let new_mover_master = (opponent >> opponent_master >> 1).count_ones() as u64;
        let new_opp_master = (mover >> mover_master >> 1).count_ones() as u64;
        new_mover_master * self.material.opponent as u64 + new_opp_master
    }

    /// Layout number of a well-formed layout of this material.
    #[inline]
    pub fn rank(&self, layout: &Layout) -> u64 {
        let group = self.group_of(layout.mover, layout.opponent);
        self.rank_in(group, layout)
    }

    /// Layout number, given the layout's group.
    #[inline]
    pub fn rank_in(&self, group: &Group, layout: &Layout) -> u64 {
        debug_assert_eq!(layout.mover.count_ones(), self.material.mover as u32);
        debug_assert_eq!(layout.opponent.count_ones(), self.material.opponent as u32);
        debug_assert_eq!(layout.mover & layout.opponent, 0);
        let placement = group.placement_number(layout.mover, layout.opponent);
        let mover_master = (layout.mover & ((1u32 << layout.mover_master) - 1)).count_ones() as u64;
        let opp_master = (layout.opponent & ((1u32 << layout.opponent_master) - 1)).count_ones() as u64;
        let q = self.material.opponent as u64;
        let index = group.first_layout + (placement * self.material.mover as u64 + mover_master) * q + opp_master;
        debug_assert!(index < group.first_layout + group.layouts);
        index
    }

    /// The layout with number `index` in `group`.
    pub fn unrank_in(&self, group: &Group, index: u64) -> Layout {
        debug_assert!(index >= group.first_layout && index < group.first_layout + group.layouts);
        let local = index - group.first_layout;
        let (p, q) = (self.material.mover as u64, self.material.opponent as u64);
        let opp_master = (local % q) as u32;
        let mover_master = ((local / q) % p) as u32;
        let (mover, opponent) = group.placement(local / (p * q));
        Layout {
            mover,
            opponent,
            mover_master: nth_square(mover, mover_master),
            opponent_master: nth_square(opponent, opp_master),
        }
    }

    /// The layout with number `index`.
    pub fn unrank(&self, index: u64) -> Layout {
        assert!(index < self.layouts, "layout {index} out of range for {}", self.material);
        let g = self.groups.partition_point(|g| g.first_layout + g.layouts <= index);
        self.unrank_in(&self.groups[g], index)
    }

    /// Calls `visit(mover, opponent, masters)` for each placement that the
    /// layouts numbered `range` touch, in order: `masters` are the master
    /// choices of its layouts inside `range`, each as `a * q + b` (the
    /// mover's a-th piece in square order and the opponent's b-th, as
    /// layouts are numbered within a placement). For work that is the same
    /// for all the layouts of a placement, done once per placement.
    pub fn for_each_placement_in(&self, range: Range<u64>, mut visit: impl FnMut(u32, u32, Range<u32>)) {
        assert!(range.end <= self.layouts, "layouts {range:?} out of range for {}", self.material);
        let per_placement = self.material.mover as u64 * self.material.opponent as u64;
        let first_group = self.groups.partition_point(|g| g.first_layout + g.layouts <= range.start);
        for group in self.groups[first_group..].iter().take_while(|g| g.first_layout < range.end) {
            let from = range.start.max(group.first_layout) - group.first_layout;
            let to = range.end.min(group.first_layout + group.layouts) - group.first_layout;
            let first_placement = from / per_placement;
            for (k, (mover, opponent)) in group.placements(first_placement, to.div_ceil(per_placement)).enumerate() {
                let base = (first_placement + k as u64) * per_placement;
                let masters = (base.max(from) - base) as u32..((base + per_placement).min(to) - base) as u32;
                visit(mover, opponent, masters);
            }
        }
    }

    /// Calls `visit` with the layouts numbered `range`, in order:
    /// [`MaterialIndex::unrank`] of each, but stepping through placements
    /// instead of decoding each number.
    pub fn for_each_layout_in(&self, range: Range<u64>, mut visit: impl FnMut(Layout)) {
        let q = self.material.opponent as u32;
        self.for_each_placement_in(range, |mover, opponent, masters| {
            for local in masters {
                visit(Layout {
                    mover,
                    opponent,
                    mover_master: nth_square(mover, local / q),
                    opponent_master: nth_square(opponent, local % q),
                });
            }
        });
    }

    /// All layouts of a group with their numbers, in order.
    pub fn layouts_of<'a>(&'a self, group: &'a Group) -> impl Iterator<Item = (u64, Layout)> + 'a {
        let (p, q) = (self.material.mover as u32, self.material.opponent as u32);
        let placements = group.layouts / (p * q) as u64;
        (0..placements).flat_map(move |placement| {
            let (mover, opponent) = group.placement(placement);
            let base = group.first_layout + placement * (p * q) as u64;
            (0..p).flat_map(move |i| {
                (0..q).map(move |j| {
                    let layout = Layout {
                        mover,
                        opponent,
                        mover_master: nth_square(mover, i),
                        opponent_master: nth_square(opponent, j),
                    };
                    (base + (i * q + j) as u64, layout)
                })
            })
        })
    }
}

/// The square of the n-th set bit (n = 0 is the lowest; n below
/// `MAX_PIECES_PER_SIDE`), with no branch on n, which is a master's ordinal
/// in the solver's kernels and follows no pattern there. With BMI2 (the
/// x86-64-v3 build) the bit is deposited at the n-th set square
/// (`pdep`); otherwise by [`nth_square_by_rounds`], which debug builds
/// check it against.
#[inline]
pub(crate) fn nth_square(board: u32, n: u32) -> u8 {
    debug_assert!((n as usize) < MAX_PIECES_PER_SIDE);
    debug_assert!(board.count_ones() > n);
    #[cfg(all(target_arch = "x86_64", target_feature = "bmi2"))]
    {
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, and this build assumes BMI2 (the
        // `cfg` above: `.cargo/config.toml` builds for x86-64-v3, and
        // `main` checks the CPU has it).
        let square = unsafe { std::arch::x86_64::_pdep_u32(1 << n, board) }.trailing_zeros() as u8;
        debug_assert_eq!(square, nth_square_by_rounds(board, n));
        square
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "bmi2")))]
    nth_square_by_rounds(board, n)
}

/// [`nth_square`] without BMI2: a fixed number of rounds, each clearing the
/// lowest bit while fewer than n are cleared.
#[inline]
fn nth_square_by_rounds(board: u32, n: u32) -> u8 {
    let mut rest = board;
    for round in 0..MAX_PIECES_PER_SIDE as u32 - 1 {
        rest &= rest.wrapping_sub((round < n) as u32);
    }
    rest.trailing_zeros() as u8
}

/// Colex rank of a board among the boards with as many pieces: the sum
/// over its pieces, the i-th in square order counting from 1, of
/// C(square, i). Dense: 0 to [`boards`] - 1. Three look-ups in
/// [`BOARD_RANK_PARTS`], one per chunk of [`RANK_CHUNK_SQUARES`] squares,
/// instead of a round per piece.
#[inline]
pub fn board_rank(board: u32) -> usize {
    debug_assert!(board >> SQUARES == 0 && board.count_ones() as usize <= MAX_PIECES_PER_SIDE);
    let chunk = |c: usize| (board >> (c * RANK_CHUNK_SQUARES)) as usize & ((1 << RANK_CHUNK_SQUARES) - 1);
    let below = |c: usize| (board & ((1 << (c * RANK_CHUNK_SQUARES)) - 1)).count_ones() as usize;
    let rank = BOARD_RANK_PARTS[0][0][chunk(0)] as usize
        + BOARD_RANK_PARTS[1][below(1)][chunk(1)] as usize
        + BOARD_RANK_PARTS[2][below(2)][chunk(2)] as usize;
    debug_assert_eq!(rank, board_rank_by_pieces(board));
    rank
}

/// Squares per chunk of [`board_rank`]'s look-up: three chunks cover the 25
/// squares, and the tables (3 x 6 x 512 `u16`s, 18 KiB) fit the L1 cache.
const RANK_CHUNK_SQUARES: usize = 9;
const RANK_CHUNKS: usize = SQUARES.div_ceil(RANK_CHUNK_SQUARES);

/// `[chunk][pieces below the chunk][the chunk's bits]`: the chunk's pieces'
/// part of [`board_rank`], 0 where the board would hold more than
/// `MAX_PIECES_PER_SIDE` pieces (no board does). The largest rank,
/// C(25, 5) - 1, fits a `u16`.
static BOARD_RANK_PARTS: [[[u16; 1 << RANK_CHUNK_SQUARES]; MAX_PIECES_PER_SIDE + 1]; RANK_CHUNKS] = {
    let mut table = [[[0u16; 1 << RANK_CHUNK_SQUARES]; MAX_PIECES_PER_SIDE + 1]; RANK_CHUNKS];
    let mut chunk = 0;
    while chunk < RANK_CHUNKS {
        let mut below = 0;
        while below <= MAX_PIECES_PER_SIDE {
            let mut bits = 0usize;
            while bits < 1 << RANK_CHUNK_SQUARES {
                let first_square = chunk * RANK_CHUNK_SQUARES;
                let squares_left = SQUARES - first_square;
                let on_board = squares_left >= RANK_CHUNK_SQUARES || bits >> squares_left == 0;
                if on_board && below + bits.count_ones() as usize <= MAX_PIECES_PER_SIDE {
                    let part = colex_part(bits, first_square, below);
                    assert!(part <= u16::MAX as usize);
                    table[chunk][below][bits] = part as u16;
                }
                bits += 1;
            }
            below += 1;
        }
        chunk += 1;
    }
    table
};

/// [`board_rank`] by its definition, a round per piece.
fn board_rank_by_pieces(board: u32) -> usize {
    colex_part(board as usize, 0, 0)
}

/// Number of boards with `pieces` pieces: the [`board_rank`]s there are.
pub fn boards(pieces: usize) -> usize {
    binomial(SQUARES, pieces)
}

const BINOMIAL: [[usize; MAX_PIECES_PER_SIDE + 1]; SQUARES] = {
    let mut table = [[0; MAX_PIECES_PER_SIDE + 1]; SQUARES];
    let mut n = 0;
    while n < SQUARES {
        let mut k = 0;
        while k <= MAX_PIECES_PER_SIDE {
            table[n][k] = binomial(n, k);
            k += 1;
        }
        n += 1;
    }
    table
};

/// Layouts of a material counted directly: placements times master choices.
pub fn layouts_by_formula(material: Material) -> u64 {
    let (p, q) = (material.mover as usize, material.opponent as usize);
    (binomial(SQUARES, p) * binomial(SQUARES - p, q) * p * q) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nth_square` finds the n-th piece of every board of up to five
    /// pieces on the first ten squares and of some spread over the board.
    #[test]
    fn nth_square_is_the_nth_set_bit() {
        let boards = (0u32..1 << 10).chain([0x1f << 20, 1 | 1 << 12 | 1 << 24, 0x0108_4210]);
        for board in boards.filter(|b| (1..=MAX_PIECES_PER_SIDE as u32).contains(&b.count_ones())) {
            let squares: Vec<u8> = (0..25u8).filter(|&s| board & (1 << s) != 0).collect();
            for (n, &square) in squares.iter().enumerate() {
                assert_eq!(nth_square(board, n as u32), square, "board {board:#x}, n {n}");
            }
        }
    }

    /// Counting placements like an odometer gives what decoding each does.
    #[test]
    fn placements_iterate_as_decoded() {
        let index = MaterialIndex::new(Material::new(3, 2));
        for group in index.groups().iter().step_by(11) {
            let placements = group.layouts / 6;
            for (start, end) in [(0, placements), (placements / 3, placements / 2), (placements, placements)] {
                let decoded: Vec<_> = (start..end).map(|i| group.placement(i)).collect();
                assert_eq!(group.placements(start, end).collect::<Vec<_>>(), decoded);
            }
        }
    }

    /// An odometer that seeks, then steps on, is where decoding puts it.
    #[test]
    fn an_odometer_seeks_to_the_decoded_placement() {
        let index = MaterialIndex::new(Material::new(4, 4));
        for group in index.groups().iter().step_by(37) {
            let placements = group.layouts / 16;
            let mut odometer = group.odometer(0);
            for at in [placements / 2, 1, placements - 1, 0, placements / 7] {
                odometer.seek(at);
                assert_eq!(odometer.boards(), group.placement(at));
                if at + 1 < placements {
                    odometer.advance();
                    assert_eq!(odometer.boards(), group.placement(at + 1));
                }
            }
        }
    }

    /// Stepping through a range of layout numbers gives what unranking
    /// each does, across group edges and from inside placements.
    #[test]
    fn layouts_in_a_range_are_the_unranked_ones() {
        for material in [Material::new(3, 2), Material::new(1, 1), Material::new(2, 3)] {
            let index = MaterialIndex::new(material);
            let n = index.layouts();
            let edge = index.groups()[1].first_layout;
            for range in [0..n, 0..0, 1..n - 1, edge - 7..edge + 5, n / 3 + 1..n / 3 + 2, n..n] {
                let unranked: Vec<Layout> = range.clone().map(|i| index.unrank(i)).collect();
                let mut visited = Vec::new();
                index.for_each_layout_in(range.clone(), |layout| visited.push(layout));
                assert_eq!(visited, unranked, "{material} {range:?}");
            }
        }
    }

    /// DESIGN.md's and FORMAT.md's worked example.
    #[test]
    fn worked_example_numbers_as_documented() {
        let index = MaterialIndex::new(Material::new(2, 1));
        let layout = Layout { mover: (1 << 1) | (1 << 7), opponent: 1 << 23, mover_master: 1, opponent_master: 23 };
        let group = index.group_of(layout.mover, layout.opponent);
        assert_eq!((group.mover_counts, group.opponent_counts), ([1, 1, 0, 0, 0], [0, 0, 0, 0, 1]));
        assert_eq!(index.rank(&layout), group.first_layout + 132);
    }

    #[test]
    // The bounds depend on each other; indices read better than iterators.
    #[allow(clippy::needless_range_loop)]
    fn row_digits_are_dense_per_count_class() {
        for mc in 0..=5 {
            for oc in 0..=5 - mc {
                for digit in 0..row_radix(mc, oc) {
                    let packed = ROW_PATTERNS[mc][oc][digit] as usize;
                    assert_ne!(packed, u16::MAX as usize, "hole at {mc} {oc} {digit}");
                    assert_eq!(ROW_DIGIT[packed & 31][packed >> 5] as usize, digit);
                    let mirrored = ROW_DIGIT[reverse_row(packed & 31)][reverse_row(packed >> 5)];
                    assert_eq!(MIRRORED_DIGIT[mc][oc][digit] as u16, mirrored);
                }
            }
        }
    }

    #[test]
    fn materials_have_the_expected_number_of_layouts() {
        for p in 1..=5 {
            for q in 1..=5 {
                let m = Material::new(p, q);
                assert_eq!(MaterialIndex::new(m).layouts(), layouts_by_formula(m), "{m}");
            }
        }
    }

    #[test]
    fn every_layout_round_trips_in_small_materials() {
        for (p, q) in [(1, 1), (2, 1), (1, 2), (2, 2)] {
            let index = MaterialIndex::new(Material::new(p, q));
            let mut expected = 0;
            for group in index.groups() {
                for (number, layout) in index.layouts_of(group) {
                    assert_eq!(number, expected);
                    expected += 1;
                    assert_eq!(index.rank(&layout), number);
                    assert_eq!(index.unrank(number), layout);
                }
            }
            assert_eq!(expected, index.layouts());
        }
    }

    #[test]
    fn turned_rank_equals_rank_of_the_turned_layout() {
        use crate::rules::{rotate, rotate_square};
        for (p, q) in [(1, 2), (2, 2), (3, 2)] {
            let here = MaterialIndex::new(Material::new(p, q));
            let there = MaterialIndex::new(Material::new(q, p));
            for group in here.groups() {
                for (_, l) in here.layouts_of(group).step_by(7) {
                    let turned = Layout {
                        mover: rotate(l.opponent),
                        opponent: rotate(l.mover),
                        mover_master: rotate_square(l.opponent_master),
                        opponent_master: rotate_square(l.mover_master),
                    };
                    let target = there.group_of(turned.mover, turned.opponent);
                    let by_counts = there.group_by_counts(&target.mover_counts, &target.opponent_counts).unwrap();
                    assert_eq!(there.groups()[by_counts].first_layout, target.first_layout);
                    let expected = there.rank(&turned);
                    assert_eq!(
                        there.rank_turned(target, l.mover, l.opponent, l.mover_master, l.opponent_master),
                        expected
                    );
                }
            }
        }
    }

    #[test]
    fn a_moves_rank_is_its_other_rows_part_and_its_landing_row() {
        use crate::rules::rotate;
        for (p, q) in [(2, 2), (3, 2), (2, 3)] {
            let here = MaterialIndex::new(Material::new(p, q));
            let there = MaterialIndex::new(Material::new(q, p));
            for group in here.groups() {
                for (_, l) in here.layouts_of(group).step_by(5 * p * q) {
                    let rows = TurnedRows::new(l.mover, l.opponent);
                    for from in (0..SQUARES as u8).filter(|&from| l.mover & (1 << from) != 0) {
                        let lifted = l.mover ^ (1 << from);
                        for to in (0..SQUARES as u8).filter(|&to| (l.mover | l.opponent) & (1 << to) == 0) {
                            let moved = lifted | (1 << to);
                            let target = there.group_of(rotate(l.opponent), rotate(moved));
                            let (from_row, to_row) = ((from / 5) as usize, (to / 5) as usize);
                            let except = there.turned_rows_part_except(target, &rows, lifted, from_row, to_row);
                            assert_eq!(
                                there.turned_boards_part_landed(target, &rows, except, moved, to_row),
                                there.turned_boards_part(target, moved, l.opponent),
                                "{from} -> {to}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn board_rank_is_the_colex_rank() {
        // Colex order of boards with as many pieces is their order as
        // numbers; Gosper's step gives the next number with as many bits.
        for pieces in 1..=MAX_PIECES_PER_SIDE {
            let (mut board, mut rank) = ((1u32 << pieces) - 1, 0);
            while board >> SQUARES == 0 {
                assert_eq!(board_rank(board), rank, "board {board:#x}");
                assert_eq!(board_rank_by_pieces(board), rank, "board {board:#x}");
                let lowest = board & board.wrapping_neg();
                let ripple = board + lowest;
                board = ripple | (((board ^ ripple) >> 2) / lowest);
                rank += 1;
            }
            assert_eq!(rank, boards(pieces));
        }
    }
}
