//! Which groups of a captured (finished, packed) material a buffer holds
//! unpacked, kept from one of initialisation's batches to the next: the
//! batches of one opponent slice capture into mostly the same groups, and
//! unpacking them again for each batch was 55 GB of zstd output for 4v4's
//! 6 GB of captured values (docs/BENCHMARKS.md, session 50).
//!
//! Owns where each held group's bytes are and which group to drop for a
//! new one; knows nothing of moves, rows or the packed file (the caller
//! unpacks a group into the place given).
//!
//! The buffer is a ring: groups go in one after the other, and a group that
//! reaches the end starts again at the front, over the oldest groups. A
//! group a batch needs that gets overwritten so is placed again. On 4v4's
//! initialisation (1 GiB, a 329 MB buffer) a simulation of the batches'
//! needs gave 26.2 GB unpacked for the ring, 24.3 GB for least recently
//! used with best-fit holes and 22.8 GB for least recently used without
//! holes, which no buffer achieves; the ring is the simplest.

use super::lanes::SegmentMap;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;

/// The groups a buffer of `capacity` bytes holds.
pub(super) struct UnpackedGroups {
    capacity: usize,
    /// Per held group, its bytes in the buffer.
    place: HashMap<usize, Range<usize>>,
    /// Held groups by their first byte.
    by_start: BTreeMap<usize, usize>,
    /// Where the next group goes. Every held group that starts before it
    /// ends at or before it.
    head: usize,
    /// How often a call started again from the front (for the tests).
    #[cfg(test)]
    from_front: usize,
}

impl UnpackedGroups {
    pub fn new(capacity: usize) -> UnpackedGroups {
        UnpackedGroups {
            capacity,
            place: HashMap::new(),
            by_start: BTreeMap::new(),
            head: 0,
            #[cfg(test)]
            from_front: 0,
        }
    }

    /// Makes `buffer` hold `groups` (distinct) side by side with what it
    /// held: places those it lacks (`bytes(g)` each), dropping the oldest,
    /// and fills their places with `unpack(g, place)`, in parallel.
    /// Returns the groups unpacked, or None if `groups` do not fit the
    /// buffer together (then it holds nothing).
    pub fn hold<E: Send>(
        &mut self,
        groups: &[usize],
        bytes: impl Fn(usize) -> usize,
        buffer: &mut [u8],
        unpack: impl Fn(usize, &mut [u8]) -> Result<(), E> + Sync,
    ) -> Result<Option<Vec<usize>>, E> {
        assert_eq!(buffer.len(), self.capacity, "the buffer the places are in");
        let placed = match self.place_in_ring(groups, &bytes) {
            Some(placed) => placed,
            // The ring went round over groups this call needs: drop every
            // group and place these from the front, if they fit.
            None => {
                self.clear();
                #[cfg(test)]
                {
                    self.from_front += 1;
                }
                if groups.iter().map(|&g| bytes(g)).sum::<usize>() > self.capacity {
                    return Ok(None);
                }
                for &g in groups {
                    self.put(g, self.head..self.head + bytes(g));
                }
                groups.to_vec()
            }
        };
        self.unpack(&placed, buffer, unpack)?;
        Ok(Some(placed))
    }

    /// Places the groups of `groups` not held yet at the head, dropping the
    /// groups they go over (and placing again those of `groups` among
    /// them); returns the groups placed, or None once more than a
    /// buffer's worth was placed.
    fn place_in_ring(&mut self, groups: &[usize], bytes: impl Fn(usize) -> usize) -> Option<Vec<usize>> {
        let wanted: HashSet<usize> = groups.iter().copied().collect();
        debug_assert_eq!(wanted.len(), groups.len(), "distinct groups");
        let mut todo: VecDeque<usize> = groups.iter().copied().filter(|g| !self.place.contains_key(g)).collect();
        let mut placed: HashSet<usize> = HashSet::new();
        let mut placed_bytes = 0;
        while let Some(g) = todo.pop_front() {
            let len = bytes(g);
            placed_bytes += len;
            if placed_bytes > self.capacity {
                return None;
            }
            if self.head + len > self.capacity {
                self.head = 0;
            }
            let at = self.head..self.head + len;
            let over: Vec<usize> = self.by_start.range(at.clone()).map(|(_, &g)| g).collect();
            for dropped in over {
                self.drop_group(dropped);
                placed.remove(&dropped);
                if wanted.contains(&dropped) {
                    todo.push_back(dropped);
                }
            }
            self.put(g, at);
            placed.insert(g);
        }
        Some(groups.iter().copied().filter(|g| placed.contains(g)).collect())
    }

    /// Unpacks `groups` into their places; holds none of them if one fails.
    fn unpack<E: Send>(
        &mut self,
        groups: &[usize],
        buffer: &mut [u8],
        unpack: impl Fn(usize, &mut [u8]) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        let mut places: Vec<(Range<usize>, usize)> = groups.iter().map(|&g| (self.place[&g].clone(), g)).collect();
        places.sort_unstable_by_key(|(at, _)| at.start);
        let into = super::lanes::carve_mut(buffer, places.iter().map(|(at, _)| at.clone()));
        let result = places.par_iter().zip(into).try_for_each(|((_, g), into)| unpack(*g, into));
        if result.is_err() {
            groups.iter().for_each(|&g| self.drop_group(g));
        }
        result
    }

    fn put(&mut self, g: usize, at: Range<usize>) {
        // Two groups at one first byte would share an entry of `by_start`,
        // and dropping one would leave the other held but never dropped.
        assert!(!at.is_empty(), "group {g} has values");
        debug_assert!(at.start == self.head || at.start == 0, "groups go in at the head");
        debug_assert!(self.by_start.range(..at.start).next_back().is_none_or(|(_, h)| self.place[h].end <= at.start));
        self.head = at.end;
        self.by_start.insert(at.start, g);
        self.place.insert(g, at);
    }

    fn drop_group(&mut self, g: usize) {
        if let Some(at) = self.place.remove(&g) {
            self.by_start.remove(&at.start);
        }
    }

    /// Holds nothing.
    pub fn clear(&mut self) {
        self.place.clear();
        self.by_start.clear();
        self.head = 0;
    }
}

/// A held group's bytes in the buffer (the group must be held).
impl SegmentMap for UnpackedGroups {
    fn elements(&self, g: usize) -> Range<usize> {
        self.place[&g].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Group g's unpacked bytes: its size and content follow from g.
    fn group_bytes(g: usize) -> usize {
        100 + (g * 7919) % 900
    }

    fn fill(g: usize, into: &mut [u8]) -> Result<(), String> {
        assert_eq!(into.len(), group_bytes(g));
        into.iter_mut().enumerate().for_each(|(i, b)| *b = (g * 31 + i) as u8);
        Ok(())
    }

    /// Pseudo-random numbers below `n` (a linear congruential generator).
    fn numbers(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |n| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        }
    }

    fn holds(held: &UnpackedGroups, buffer: &[u8], g: usize) -> bool {
        let at = held.elements(g);
        at.len() == group_bytes(g) && buffer[at].iter().enumerate().all(|(i, &b)| b == (g * 31 + i) as u8)
    }

    #[test]
    fn groups_asked_for_are_held_whole_and_unpacked_once_while_they_stay() {
        let capacity = 20_000;
        let mut buffer = vec![0u8; capacity];
        let mut held = UnpackedGroups::new(capacity);
        let mut next = numbers(12345);
        let (mut unpacked_bytes, mut asked_bytes) = (0, 0);
        for batch in 0..2_000 {
            // Neighbouring batches ask for overlapping runs of groups, as
            // the batches of an opponent slice do.
            let first = (batch / 8 + next(3)) % 60;
            let mut groups: Vec<usize> = (first..first + 5 + next(20)).filter(|_| next(4) != 0).collect();
            groups.dedup();
            let before: HashSet<usize> = held.place.keys().copied().collect();
            let unpacked = held.hold(&groups, group_bytes, &mut buffer, fill).unwrap();
            let unpacked = unpacked.expect("25 groups of at most 1,000 bytes fit");
            for &g in &groups {
                assert!(holds(&held, &buffer, g), "group {g} held whole");
                assert!(unpacked.contains(&g) || before.contains(&g), "group {g} unpacked or held before");
            }
            unpacked_bytes += unpacked.iter().map(|&g| group_bytes(g)).sum::<usize>();
            asked_bytes += groups.iter().map(|&g| group_bytes(g)).sum::<usize>();
            let mut places: Vec<Range<usize>> = held.place.values().cloned().collect();
            places.sort_unstable_by_key(|at| at.start);
            assert!(places.windows(2).all(|w| w[0].end <= w[1].start), "places do not overlap");
            assert!(places.last().is_none_or(|at| at.end <= capacity));
        }
        assert!(
            unpacked_bytes * 3 < asked_bytes,
            "kept groups are not unpacked again: {unpacked_bytes} of {asked_bytes}"
        );
    }

    /// Sets of groups that nearly fill the buffer, after others: the ring
    /// wraps over groups a set needs and must start again from the front;
    /// a set is refused only if it is bigger than the buffer.
    #[test]
    fn groups_that_fit_together_are_always_held() {
        let capacity = 5_000;
        let mut buffer = vec![0u8; capacity];
        let mut held = UnpackedGroups::new(capacity);
        let mut next = numbers(777);
        let mut refused = 0;
        for _ in 0..3_000 {
            let mut groups: Vec<usize> = (0..2 + next(8)).map(|_| next(40)).collect();
            groups.sort_unstable();
            groups.dedup();
            let total: usize = groups.iter().map(|&g| group_bytes(g)).sum();
            match held.hold(&groups, group_bytes, &mut buffer, fill).unwrap() {
                None => {
                    assert!(total > capacity, "{total} bytes fit {capacity}");
                    assert!(held.place.is_empty());
                    refused += 1;
                }
                Some(_) => {
                    assert!(groups.iter().all(|&g| holds(&held, &buffer, g)));
                }
            }
        }
        // Refusals start from the front too: some sets that fit must have.
        let from_front = held.from_front - refused;
        assert!(refused > 0 && from_front > 0, "both ends are reached: {refused} refused, {from_front} from the front");
    }

    #[test]
    fn groups_that_do_not_fit_together_are_refused_and_nothing_is_held() {
        let mut buffer = vec![0u8; 2_000];
        let mut held = UnpackedGroups::new(2_000);
        assert_eq!(held.hold(&[1], group_bytes, &mut buffer, fill).unwrap(), Some(vec![1]));
        // 995 + 990 + 638 bytes.
        assert_eq!(held.hold(&[5, 10, 2], group_bytes, &mut buffer, fill).unwrap(), None);
        assert!(held.place.is_empty());
        assert_eq!(held.hold(&[5, 2], group_bytes, &mut buffer, fill).unwrap(), Some(vec![5, 2]));
        assert!(holds(&held, &buffer, 5) && holds(&held, &buffer, 2));
    }

    #[test]
    fn a_failed_unpack_leaves_its_groups_unheld() {
        let mut buffer = vec![0u8; 5_000];
        let mut held = UnpackedGroups::new(5_000);
        held.hold(&[1, 2], group_bytes, &mut buffer, fill).unwrap();
        let failing = |g: usize, into: &mut [u8]| if g == 4 { Err("damaged".to_string()) } else { fill(g, into) };
        assert!(held.hold(&[2, 3, 4], group_bytes, &mut buffer, failing).is_err());
        assert!(!held.place.contains_key(&3) && !held.place.contains_key(&4));
        assert!(holds(&held, &buffer, 1) && holds(&held, &buffer, 2), "what was held stays");
    }
}
