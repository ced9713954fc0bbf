//! A plain, deliberately slow-but-obvious reference solver for Onitama
//! endgames, used only by tests as an oracle for the crate's fast solver.
//!
//! It shares no code with the crate: its own card table, its own board
//! representation (an array of 25 cells, not bitboards), its own card deals
//! (explicit hands, not the crate's card-state numbering), its own move
//! generation and its own solving loop. Nothing here imports `onitb`; the
//! tests convert reference positions to crate positions themselves.
//!
//! Rules, all from the side to move ("me"), who moves toward higher rows:
//! * square = 5 * row + col; a card offset (dx, dy) moves a piece from
//!   (col, row) to (col + dx, row + dy); it must stay on the board and may
//!   not land on one of my own pieces; landing on one of theirs captures it.
//! * A move wins on the spot if it captures their master or brings my master
//!   to square 22 (their temple), whatever stands there.
//! * The played card goes to the side, I take the old side card, and the
//!   board is turned by 180 degrees (square s -> 24 - s) for the new mover.
//! * If I have no move with either card: under `NoMove::Pass` I swap one of
//!   my two cards with the side card without moving (two successors), under
//!   `NoMove::Loss` I have lost (Loss in 0 plies).
//! * A position where my master stands on 22 or theirs on 2 is over already
//!   and is not part of any table.
//!
//! Values (plies to the end under best play; winner hurries, loser delays):
//! Win(d) = 1 + min { k : a successor is Loss(k) }, a winning move is Win(1);
//! Loss(d) = 1 + max { k : successor is Win(k) } when every successor is a
//! win for the opponent; Draw otherwise.
//!
//! The solver fixes values layer by layer: in sweep d it gives every still
//! open position whose value follows from the definition using only values
//! of depth d - 1 and less. Layer d can only be non-empty if layer d - 1 is,
//! so the first empty layer ends the loop and everything left is a draw.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt::Write as _;

/// The sixteen base cards with their offsets (dx, dy), seen by the holder.
pub const CARD_TABLE: [(&str, &[(i32, i32)]); 16] = [
    ("Boar", &[(0, 1), (-1, 0), (1, 0)]),
    ("Cobra", &[(-1, 0), (1, 1), (1, -1)]),
    ("Crab", &[(0, 1), (-2, 0), (2, 0)]),
    ("Crane", &[(0, 1), (-1, -1), (1, -1)]),
    ("Dragon", &[(-2, 1), (2, 1), (-1, -1), (1, -1)]),
    ("Eel", &[(-1, 1), (-1, -1), (1, 0)]),
    ("Elephant", &[(-1, 1), (1, 1), (-1, 0), (1, 0)]),
    ("Frog", &[(-2, 0), (-1, 1), (1, -1)]),
    ("Horse", &[(0, 1), (-1, 0), (0, -1)]),
    ("Mantis", &[(-1, 1), (1, 1), (0, -1)]),
    ("Monkey", &[(-1, 1), (1, 1), (-1, -1), (1, -1)]),
    ("Ox", &[(0, 1), (1, 0), (0, -1)]),
    ("Rabbit", &[(2, 0), (1, 1), (-1, -1)]),
    ("Rooster", &[(1, 1), (-1, 0), (1, 0), (-1, -1)]),
    ("Tiger", &[(0, 2), (0, -1)]),
    ("Goose", &[(-1, 1), (-1, 0), (1, 0), (1, -1)]),
];

/// My master's target square (row 4, col 2).
pub const MY_TEMPLE_TARGET: usize = 22;
/// Their master's target square, in my view (row 0, col 2).
pub const THEIR_TEMPLE_TARGET: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoMove {
    Pass,
    Loss,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefValue {
    Win(u16),
    Loss(u16),
    Draw,
}

/// The five cards of a game, in the order the caller named them; cards are
/// referred to by their index 0..5 in this list.
#[derive(Clone, Debug)]
pub struct RefRules {
    pub names: [&'static str; 5],
    pub offsets: [Vec<(i32, i32)>; 5],
    pub no_move: NoMove,
}

impl RefRules {
    /// Five cards of [`CARD_TABLE`], by name (any case).
    pub fn new(names: [&str; 5], no_move: NoMove) -> RefRules {
        let cards = names.map(|name| {
            let (canonical, offsets) = CARD_TABLE
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .unwrap_or_else(|| panic!("unknown card {name}"));
            (*canonical, offsets.to_vec())
        });
        RefRules::custom(cards, no_move)
    }

    /// Five cards given by name and offsets (made-up cards included).
    pub fn custom(cards: [(&'static str, Vec<(i32, i32)>); 5], no_move: NoMove) -> RefRules {
        for i in 0..5 {
            for j in 0..i {
                assert_ne!(cards[i].0, cards[j].0, "card named twice");
            }
        }
        let names = std::array::from_fn(|i| cards[i].0);
        RefRules { names, offsets: cards.map(|(_, offsets)| offsets), no_move }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cell {
    Empty,
    MyMaster,
    MyStudent,
    TheirMaster,
    TheirStudent,
}

impl Cell {
    fn is_mine(self) -> bool {
        matches!(self, Cell::MyMaster | Cell::MyStudent)
    }

    fn is_theirs(self) -> bool {
        matches!(self, Cell::TheirMaster | Cell::TheirStudent)
    }

    /// The same piece seen by the other player.
    fn other_view(self) -> Cell {
        match self {
            Cell::Empty => Cell::Empty,
            Cell::MyMaster => Cell::TheirMaster,
            Cell::MyStudent => Cell::TheirStudent,
            Cell::TheirMaster => Cell::MyMaster,
            Cell::TheirStudent => Cell::MyStudent,
        }
    }

    fn code(self) -> u64 {
        match self {
            Cell::Empty => 0,
            Cell::MyMaster => 1,
            Cell::MyStudent => 2,
            Cell::TheirMaster => 3,
            Cell::TheirStudent => 4,
        }
    }
}

/// Who holds which card (indices into `RefRules::names`); hands are kept
/// sorted so that each deal has one representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deal {
    pub mine: [u8; 2],
    pub theirs: [u8; 2],
    pub side: u8,
}

fn sorted_pair(a: u8, b: u8) -> [u8; 2] {
    if a <= b { [a, b] } else { [b, a] }
}

impl Deal {
    /// All 30 ways to deal five cards 2 - 2 - 1.
    pub fn all() -> Vec<Deal> {
        let mut deals = Vec::new();
        for side in 0..5u8 {
            let rest: Vec<u8> = (0..5u8).filter(|&c| c != side).collect();
            for i in 0..4 {
                for j in i + 1..4 {
                    let theirs: Vec<u8> = rest.iter().copied().filter(|&c| c != rest[i] && c != rest[j]).collect();
                    deals.push(Deal { mine: [rest[i], rest[j]], theirs: [theirs[0], theirs[1]], side });
                }
            }
        }
        assert_eq!(deals.len(), 30);
        deals
    }

    /// The deal seen by the next mover after I play (or pass with) `card`:
    /// `card` goes to the side, I keep my other card and take the old side
    /// card; my opponent is the new mover.
    fn after_playing(self, card: u8) -> Deal {
        let kept = if self.mine[0] == card {
            self.mine[1]
        } else {
            assert_eq!(self.mine[1], card, "card not in my hand");
            self.mine[0]
        };
        Deal { mine: self.theirs, theirs: sorted_pair(kept, self.side), side: card }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RefPos {
    pub board: [Cell; 25],
    pub deal: Deal,
}

/// The result of one move.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// The move wins on the spot.
    Wins,
    /// The game goes on from this position (seen by the new mover).
    Goes(RefPos),
}

impl RefPos {
    pub fn key(&self) -> u128 {
        let mut board_code: u64 = 0;
        for cell in self.board.iter().rev() {
            board_code = board_code * 5 + cell.code();
        }
        let d = self.deal;
        let deal_code = (d.mine[0] as u128) << 12
            | (d.mine[1] as u128) << 9
            | (d.theirs[0] as u128) << 6
            | (d.theirs[1] as u128) << 3
            | d.side as u128;
        (board_code as u128) << 16 | deal_code
    }

    pub fn squares_of(&self, wanted: Cell) -> Vec<usize> {
        (0..25).filter(|&s| self.board[s] == wanted).collect()
    }

    pub fn my_pieces(&self) -> usize {
        self.board.iter().filter(|c| c.is_mine()).count()
    }

    pub fn their_pieces(&self) -> usize {
        self.board.iter().filter(|c| c.is_theirs()).count()
    }

    pub fn my_master(&self) -> usize {
        let s = self.squares_of(Cell::MyMaster);
        assert_eq!(s.len(), 1);
        s[0]
    }

    pub fn their_master(&self) -> usize {
        let s = self.squares_of(Cell::TheirMaster);
        assert_eq!(s.len(), 1);
        s[0]
    }

    pub fn is_game_over(&self) -> bool {
        self.board[MY_TEMPLE_TARGET] == Cell::MyMaster || self.board[THEIR_TEMPLE_TARGET] == Cell::TheirMaster
    }

    /// The board after my move, turned for the next mover.
    fn turned(&self, board: &[Cell; 25], deal: Deal) -> RefPos {
        let mut next = [Cell::Empty; 25];
        for s in 0..25 {
            next[24 - s] = board[s].other_view();
        }
        RefPos { board: next, deal }
    }

    /// All real moves (no passes), as (card, from, to, result).
    pub fn moves(&self, rules: &RefRules) -> Vec<(u8, usize, usize, Step)> {
        let mut out = Vec::new();
        for card in self.deal.mine {
            for from in 0..25 {
                if !self.board[from].is_mine() {
                    continue;
                }
                for &(dx, dy) in &rules.offsets[card as usize] {
                    let col = (from % 5) as i32 + dx;
                    let row = (from / 5) as i32 + dy;
                    if !(0..5).contains(&col) || !(0..5).contains(&row) {
                        continue;
                    }
                    let to = (row * 5 + col) as usize;
                    if self.board[to].is_mine() {
                        continue;
                    }
                    let captures_master = self.board[to] == Cell::TheirMaster;
                    let master_reaches_temple = self.board[from] == Cell::MyMaster && to == MY_TEMPLE_TARGET;
                    let step = if captures_master || master_reaches_temple {
                        Step::Wins
                    } else {
                        let mut board = self.board;
                        board[to] = board[from];
                        board[from] = Cell::Empty;
                        Step::Goes(self.turned(&board, self.deal.after_playing(card)))
                    };
                    out.push((card, from, to, step));
                }
            }
        }
        out
    }

    /// Every successor under the rules: the moves, or the passes when there
    /// are no moves and the rules pass. Empty means "lost" (Loss rule).
    pub fn successors(&self, rules: &RefRules) -> Vec<Step> {
        let moves: Vec<Step> = self.moves(rules).into_iter().map(|m| m.3).collect();
        if !moves.is_empty() {
            return moves;
        }
        match rules.no_move {
            NoMove::Loss => Vec::new(),
            NoMove::Pass => self
                .deal
                .mine
                .iter()
                .map(|&card| Step::Goes(self.turned(&self.board, self.deal.after_playing(card))))
                .collect(),
        }
    }

    /// A readable picture: row 4 on top, mover's pieces `M`/`S`, the
    /// opponent's `m`/`s`.
    pub fn dump(&self, rules: &RefRules) -> String {
        let mut out = String::new();
        for row in (0..5).rev() {
            let _ = write!(out, "  row {row}: ");
            for col in 0..5 {
                let c = match self.board[row * 5 + col] {
                    Cell::Empty => '.',
                    Cell::MyMaster => 'M',
                    Cell::MyStudent => 'S',
                    Cell::TheirMaster => 'm',
                    Cell::TheirStudent => 's',
                };
                out.push(c);
            }
            out.push('\n');
        }
        let name = |c: u8| rules.names[c as usize];
        let _ = writeln!(
            out,
            "  mover (M/S, moves up) holds {} + {}; opponent (m/s) holds {} + {}; side card {}; no-move rule {:?}",
            name(self.deal.mine[0]),
            name(self.deal.mine[1]),
            name(self.deal.theirs[0]),
            name(self.deal.theirs[1]),
            name(self.deal.side),
            rules.no_move
        );
        let _ = write!(
            out,
            "  mover squares {:?} (master {}), opponent squares {:?} (master {})",
            (0..25).filter(|&s| self.board[s].is_mine()).collect::<Vec<_>>(),
            self.my_master(),
            (0..25).filter(|&s| self.board[s].is_theirs()).collect::<Vec<_>>(),
            self.their_master()
        );
        out
    }
}

/// All k-element subsets of `items`, each in ascending order.
fn combinations(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, &first) in items.iter().enumerate() {
        for mut rest in combinations(&items[i + 1..], k - 1) {
            rest.insert(0, first);
            out.push(rest);
        }
    }
    out
}

/// Every non-game-over position with 1..=max_per_side pieces per side and at
/// most `max_total` pieces in all, with every deal.
pub fn enumerate(max_per_side: usize, max_total: usize) -> Vec<RefPos> {
    let deals = Deal::all();
    let mut out = Vec::new();
    for mine in 1..=max_per_side {
        for theirs in 1..=max_per_side {
            if mine + theirs > max_total {
                continue;
            }
            for my_master in 0..25 {
                for their_master in 0..25 {
                    if their_master == my_master {
                        continue;
                    }
                    let free: Vec<usize> = (0..25).filter(|&s| s != my_master && s != their_master).collect();
                    for my_students in combinations(&free, mine - 1) {
                        let free2: Vec<usize> = free.iter().copied().filter(|s| !my_students.contains(s)).collect();
                        for their_students in combinations(&free2, theirs - 1) {
                            let mut board = [Cell::Empty; 25];
                            board[my_master] = Cell::MyMaster;
                            board[their_master] = Cell::TheirMaster;
                            for &s in &my_students {
                                board[s] = Cell::MyStudent;
                            }
                            for &s in &their_students {
                                board[s] = Cell::TheirStudent;
                            }
                            for &deal in &deals {
                                let pos = RefPos { board, deal };
                                if !pos.is_game_over() {
                                    out.push(pos);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub states: usize,
    pub win_in_1: usize,
    pub wins: usize,
    pub losses: usize,
    pub draws: usize,
    /// Positions where the mover has no real move (pass or loss, by rule).
    pub no_move: usize,
    pub longest_win: u16,
    pub longest_loss: u16,
}

/// What one position leads to, precomputed once.
enum Edges {
    /// Some move wins on the spot.
    WinsNow,
    /// Ids of all successors (empty: no move under the Loss rule).
    To(Vec<u32>),
}

pub struct RefTable {
    pub rules: RefRules,
    pub positions: Vec<RefPos>,
    pub values: Vec<RefValue>,
    pub no_move: Vec<bool>,
    ids: HashMap<u128, u32>,
    edges: Vec<Edges>,
}

impl RefTable {
    /// Solves the closed set of positions with at most `max_per_side` pieces
    /// per side and `max_total` pieces in all (captures only shrink it).
    pub fn solve(rules: RefRules, max_per_side: usize, max_total: usize) -> RefTable {
        let positions = enumerate(max_per_side, max_total);
        let mut ids = HashMap::with_capacity(positions.len());
        for (i, p) in positions.iter().enumerate() {
            let old = ids.insert(p.key(), i as u32);
            assert!(old.is_none(), "position enumerated twice");
        }

        let mut edges = Vec::with_capacity(positions.len());
        let mut no_move = Vec::with_capacity(positions.len());
        for p in &positions {
            no_move.push(p.moves(&rules).is_empty());
            let succ = p.successors(&rules);
            if succ.iter().any(|s| matches!(s, Step::Wins)) {
                edges.push(Edges::WinsNow);
                continue;
            }
            let to = succ
                .iter()
                .map(|s| match s {
                    Step::Wins => unreachable!(),
                    Step::Goes(q) => {
                        assert!(!q.is_game_over(), "a successor is game-over");
                        *ids.get(&q.key()).unwrap_or_else(|| panic!("successor outside the set:\n{}", q.dump(&rules)))
                    }
                })
                .collect();
            edges.push(Edges::To(to));
        }

        let mut values: Vec<Option<RefValue>> = vec![None; positions.len()];
        // Layer 0: no move under the Loss rule.
        for (i, e) in edges.iter().enumerate() {
            if matches!(e, Edges::To(to) if to.is_empty()) {
                values[i] = Some(RefValue::Loss(0));
            }
        }
        // Sweep d finds the positions of depth d, looking only at values of
        // depth d - 1 and less (the ones found in this sweep are stored
        // after it).
        let mut d: u16 = 1;
        loop {
            let mut found: Vec<(usize, RefValue)> = Vec::new();
            for (i, e) in edges.iter().enumerate() {
                if values[i].is_some() {
                    continue;
                }
                let to = match e {
                    Edges::WinsNow => {
                        assert_eq!(d, 1);
                        found.push((i, RefValue::Win(1)));
                        continue;
                    }
                    Edges::To(to) => to,
                };
                let mut all_wins = true;
                let mut longest_win = 0u16;
                let mut beats_a_loss = false;
                for &j in to {
                    match values[j as usize] {
                        Some(RefValue::Loss(k)) if k == d - 1 => beats_a_loss = true,
                        // Only depths below d are known yet; a shorter loss
                        // would have given us Win(k + 1) in an earlier sweep.
                        Some(RefValue::Loss(k)) => {
                            panic!("missed Win({}) in sweep {}", k + 1, k + 1)
                        }
                        Some(RefValue::Win(k)) => longest_win = longest_win.max(k),
                        Some(RefValue::Draw) => unreachable!(),
                        None => all_wins = false,
                    }
                }
                if beats_a_loss {
                    found.push((i, RefValue::Win(d)));
                } else if all_wins {
                    // Had every successor been known earlier, we would have
                    // been found earlier.
                    assert_eq!(longest_win + 1, d, "a loss should have been found in its own layer");
                    found.push((i, RefValue::Loss(d)));
                }
            }
            if found.is_empty() {
                break;
            }
            for (i, v) in found {
                values[i] = Some(v);
            }
            d += 1;
        }
        let values = values.into_iter().map(|v| v.unwrap_or(RefValue::Draw)).collect();
        RefTable { rules, positions, values, no_move, ids, edges }
    }

    pub fn value_of(&self, pos: &RefPos) -> Option<RefValue> {
        self.ids.get(&pos.key()).map(|&i| self.values[i as usize])
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts { states: self.positions.len(), ..Counts::default() };
        for (i, v) in self.values.iter().enumerate() {
            if self.no_move[i] {
                c.no_move += 1;
            }
            match *v {
                RefValue::Win(d) => {
                    c.wins += 1;
                    if d == 1 {
                        c.win_in_1 += 1;
                    }
                    c.longest_win = c.longest_win.max(d);
                }
                RefValue::Loss(d) => {
                    c.losses += 1;
                    c.longest_loss = c.longest_loss.max(d);
                }
                RefValue::Draw => c.draws += 1,
            }
        }
        c
    }

    /// Checks the definition of the values once more, position by position,
    /// independently of the solving loop: every win has a successor that
    /// is the right loss and none shorter, every loss has only wins, every
    /// draw has a drawn successor and no lost one.
    pub fn verify(&self) -> Result<(), String> {
        for (i, e) in self.edges.iter().enumerate() {
            let v = self.values[i];
            let expected = match e {
                Edges::WinsNow => RefValue::Win(1),
                Edges::To(to) if to.is_empty() => RefValue::Loss(0),
                Edges::To(to) => {
                    let succ: Vec<RefValue> = to.iter().map(|&j| self.values[j as usize]).collect();
                    let quickest_loss =
                        succ.iter().filter_map(|s| if let RefValue::Loss(k) = s { Some(*k) } else { None }).min();
                    if let Some(k) = quickest_loss {
                        RefValue::Win(k + 1)
                    } else if succ.iter().all(|s| matches!(s, RefValue::Win(_))) {
                        let longest = succ.iter().map(|s| if let RefValue::Win(k) = s { *k } else { 0 }).max().unwrap();
                        RefValue::Loss(longest + 1)
                    } else {
                        RefValue::Draw
                    }
                }
            };
            if v != expected {
                return Err(format!(
                    "value {:?} but the successors say {:?} at\n{}",
                    v,
                    expected,
                    self.positions[i].dump(&self.rules)
                ));
            }
        }
        Ok(())
    }
}
