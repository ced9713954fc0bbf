//! Property tests of the index: random layouts of every material, up to 10
//! men, rank and unrank back; a move followed by an unmove returns to the
//! same index.
use onitb::index::{Layout, Material, MaterialIndex};
use onitb::rules::{BASE_CARDS, CardSet, CardState, NoMoveRule, Outcome, Position, Rules};
use proptest::prelude::*;
use std::sync::OnceLock;

fn indices() -> &'static Vec<MaterialIndex> {
    static INDICES: OnceLock<Vec<MaterialIndex>> = OnceLock::new();
    INDICES.get_or_init(|| Material::all_up_to(5).into_iter().map(MaterialIndex::new).collect())
}

fn index_of(material: Material) -> &'static MaterialIndex {
    indices().iter().find(|i| i.material == material).unwrap()
}

/// A random position: distinct squares for p + q pieces, masters among them.
fn position() -> impl Strategy<Value = Position> {
    (
        1usize..=5,
        1usize..=5,
        Just(()).prop_perturb(|_, mut rng| {
            let mut squares: Vec<u8> = (0..25).collect();
            for i in (1..25).rev() {
                squares.swap(i, rng.random_range(0..=i));
            }
            squares
        }),
        0usize..5,
        0usize..5,
        0usize..30,
    )
        .prop_map(|(p, q, squares, mi, oi, k)| {
            let mover: u32 = squares[..p].iter().map(|&s| 1u32 << s).sum();
            let opponent: u32 = squares[p..p + q].iter().map(|&s| 1u32 << s).sum();
            Position {
                mover,
                opponent,
                mover_master: squares[mi % p],
                opponent_master: squares[p + oi % q],
                cards: CardState::new(k),
            }
        })
}

fn layout(position: &Position) -> Layout {
    Layout {
        mover: position.mover,
        opponent: position.opponent,
        mover_master: position.mover_master,
        opponent_master: position.opponent_master,
    }
}

fn material(position: &Position) -> Material {
    Material::new(position.mover.count_ones() as usize, position.opponent.count_ones() as usize)
}

fn card_set() -> impl Strategy<Value = CardSet> {
    proptest::sample::subsequence((0..BASE_CARDS.len()).collect::<Vec<_>>(), 5)
        .prop_map(|ids| CardSet::from_names(&ids.iter().map(|&i| BASE_CARDS[i].name).collect::<Vec<_>>()).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rank_then_unrank_is_identity(position in position()) {
        let index = index_of(material(&position));
        let number = index.rank(&layout(&position));
        prop_assert!(number < index.layouts());
        prop_assert_eq!(index.unrank(number), layout(&position));
    }

    #[test]
    fn move_then_unmove_returns_to_the_same_index(position in position(), cards in card_set()) {
        prop_assume!(!position.is_game_over());
        let rules = Rules { cards, no_move: NoMoveRule::Pass };
        let here = index_of(material(&position)).rank(&layout(&position));
        for mv in position.moves(&rules) {
            let Outcome::Continue(next) = mv.outcome else { continue };
            if mv.is_pass() {
                continue;
            }
            let back: Vec<Position> = next
                .predecessors(&rules)
                .into_iter()
                .filter(|before| material(before) == material(&position) && before.cards == position.cards)
                .filter(|before| index_of(material(before)).rank(&layout(before)) == here)
                .collect();
            prop_assert_eq!(back.len(), 1, "move {:?} from {:?}: unmoves {:?}", mv, position, back);
            prop_assert_eq!(back[0], position);
        }
    }
}
