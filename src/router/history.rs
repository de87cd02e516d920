//! What a router remembers of its own decisions: for each worker, the prompt blocks it sent
//! there, as the approximate trees of SGLang's cache-aware policy, llm-d's approximate prefix
//! scorer and vLLM production-stack's prefix-aware router remember them (none of them sees the
//! engines' caches). Each worker's memory is an LRU of blocks (a lookup that matches refreshes
//! the matched blocks, as SGLang's does), bounded or not.
//!
//! Block names stand for the text the real routers cut into characters (SGLang), 64-byte chunks
//! (llm-d) or 128-character chunks (production stack): equal names at equal positions mean an
//! equal prefix, so the matching is the same up to the unit.

use std::collections::{BTreeSet, HashMap};

use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;
use crate::index::{KvIndex, MatchScratch};

/// The blocks routed to each worker, with an LRU per worker.
pub struct RoutedHistory {
    index: KvIndex,
    workers: Vec<Lru>,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
    clock: u64,
}

#[derive(Default)]
struct Lru {
    last: HashMap<BlockHash, u64, BlockHashBuilder>,
    order: BTreeSet<(u64, BlockHash)>,
}

impl RoutedHistory {
    /// An empty history over `n_workers` workers.
    pub fn new(n_workers: usize) -> Self {
        RoutedHistory {
            index: KvIndex::new(n_workers),
            workers: (0..n_workers).map(|_| Lru::default()).collect(),
            scratch: MatchScratch::default(),
            overlaps: Vec::new(),
            clock: 0,
        }
    }

    /// Blocks remembered for `worker`.
    pub fn size(&self, worker: usize) -> usize {
        self.workers[worker].last.len()
    }

    /// The deepest match of `blocks` over every worker's memory, and afterwards
    /// [`RoutedHistory::best`] is the set of workers with it (all workers when it is 0).
    pub fn deepest(&mut self, blocks: &[BlockHash]) -> usize {
        self.index.find_matches(blocks, &mut self.scratch)
    }

    /// The workers with the deepest match found by the last [`RoutedHistory::deepest`], in
    /// increasing order.
    pub fn best(&self) -> impl Iterator<Item = usize> + '_ {
        self.scratch.best()
    }

    /// How many workers [`RoutedHistory::best`] lists.
    pub fn best_count(&self) -> usize {
        self.scratch.best_count()
    }

    /// Each worker's own match of `blocks`, counted from the front.
    pub fn overlaps(&mut self, blocks: &[BlockHash]) -> &[usize] {
        self.index
            .overlaps(blocks, &mut self.scratch, &mut self.overlaps);
        &self.overlaps
    }

    /// `worker`'s own match of `blocks`, counted from the front: [`RoutedHistory::overlaps`] for
    /// one worker, without touching the others.
    pub fn overlap(&self, worker: usize, blocks: &[BlockHash]) -> usize {
        blocks
            .iter()
            .take_while(|&&b| self.index.holds(worker, b))
            .count()
    }

    /// Records that `blocks` were routed to `worker` (or matched there): they become its most
    /// recent, the first block most recent of all (a prompt's tail is forgotten before its
    /// head).
    pub fn touch(&mut self, worker: usize, blocks: &[BlockHash]) {
        let lru = &mut self.workers[worker];
        let mut fresh = Vec::new();
        for &b in blocks.iter().rev() {
            self.clock += 1;
            match lru.last.insert(b, self.clock) {
                Some(old) => {
                    lru.order.remove(&(old, b));
                }
                None => fresh.push(b),
            }
            lru.order.insert((self.clock, b));
        }
        self.index.store(worker, &fresh);
    }

    /// Forgets `worker`'s least recently touched blocks until it remembers at most `max`.
    pub fn shrink(&mut self, worker: usize, max: usize) {
        let lru = &mut self.workers[worker];
        let mut forgotten = Vec::new();
        while lru.last.len() > max {
            let (_, b) = lru.order.pop_first().expect("non-empty");
            lru.last.remove(&b);
            forgotten.push(b);
        }
        self.index.remove(worker, &forgotten);
    }

    /// Forgets everything about `worker`.
    pub fn forget(&mut self, worker: usize) {
        self.shrink(worker, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    #[test]
    fn remembers_routed_prefixes_and_forgets_tails_first() {
        let a = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let mut h = RoutedHistory::new(2);
        h.touch(1, &a);
        assert_eq!(h.deepest(&a), 4);
        assert_eq!(h.best().collect::<Vec<_>>(), vec![1]);
        assert_eq!(h.overlaps(&a[..2]), &[0, 2]);
        assert_eq!((h.overlap(0, &a), h.overlap(1, &a)), (0, 4));
        h.shrink(1, 3);
        assert_eq!(h.deepest(&a), 3, "the tail went first");
        h.forget(1);
        assert_eq!((h.deepest(&a), h.size(1)), (0, 0));
    }
}
