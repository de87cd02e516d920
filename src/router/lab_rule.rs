//! The lab's routing rule, the one place it lives: (1) the most overlapping blocks, (2) then the
//! least load, (3) then the lowest worker number.
//!
//! [`LabRule`] owns the index the rule reads (fed by whoever owns the rule: the router's own
//! decisions, or KV events) and the scratch of its walk. The lab's [`super::KvRouter`] and the
//! engine's `kv`, `kv-events` and `approx` policies all choose through it, so they choose alike;
//! `tests/it/engine.rs` (`run == sim`) guards that.

use crate::hash::BlockHash;
use crate::ids::WorkerId;
use crate::index::{KvIndex, MatchScratch};

use super::select::least_loaded;
use super::Decision;

/// What the rule needs to know about the workers besides the index: each one's load and whether
/// it is up.
pub trait LoadView {
    /// The load the rule's second step compares.
    fn load(&self, worker: usize) -> u64;
    /// Whether the worker takes requests.
    fn is_up(&self, worker: usize) -> bool;
    /// Whether every worker is up.
    fn all_up(&self) -> bool;
    /// The least-loaded of all workers (lowest number on ties), when known without a scan.
    fn least_of_all(&self) -> Option<usize> {
        None
    }
}

/// The lab rule over its index.
#[derive(Clone)]
pub struct LabRule {
    index: KvIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
}

impl LabRule {
    /// The rule over an empty index of `n_workers` workers.
    pub fn new(n_workers: usize) -> Self {
        LabRule {
            index: KvIndex::new(n_workers),
            scratch: MatchScratch::default(),
            overlaps: Vec::new(),
        }
    }

    /// The index the rule reads.
    pub fn index(&self) -> &KvIndex {
        &self.index
    }

    /// The index, to feed it.
    pub fn index_mut(&mut self) -> &mut KvIndex {
        &mut self.index
    }

    /// Records the rule's own decision `d` for `blocks` (self-tracking): the chosen worker will
    /// hold every block, and already held the first `d.predicted_blocks` (the overlap the rule
    /// found), so only the rest is stored.
    pub fn record_decision(&mut self, d: &Decision, blocks: &[BlockHash]) {
        self.index
            .store(d.worker.index(), &blocks[d.predicted_blocks..]);
    }

    /// Rule 1: walks the index over `blocks`; returns the deepest overlap.
    pub fn matches(&mut self, blocks: &[BlockHash]) -> usize {
        self.index.find_matches(blocks, &mut self.scratch)
    }

    /// Rule 1 on a prefix-closed index (see [`KvIndex::find_matches_prefix_closed`]): the same
    /// deepest overlap and workers in O(log n) lookups.
    pub fn matches_prefix_closed(&mut self, blocks: &[BlockHash]) -> usize {
        self.index
            .find_matches_prefix_closed(blocks, &mut self.scratch)
    }

    /// Rule 1 over names produced one at a time (see [`KvIndex::find_matches_iter`]).
    pub fn matches_iter(&mut self, names: impl IntoIterator<Item = BlockHash>) -> usize {
        self.index.find_matches_iter(names, &mut self.scratch)
    }

    /// Rules 2 and 3 among the workers with the deepest overlap (`depth` blocks, found by the
    /// last match) that are up. `None` when every one of them is down.
    pub fn choose(&self, depth: usize, loads: &impl LoadView) -> Option<Decision> {
        let everyone = depth == 0 || self.scratch.best_count() == self.index.n_workers();
        let fast = if everyone && loads.all_up() {
            loads.least_of_all()
        } else {
            None
        };
        let worker = match fast {
            Some(w) => w,
            None => least_loaded(self.scratch.best().filter(|&w| loads.is_up(w)), |w| {
                loads.load(w)
            })?,
        };
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: depth,
        })
    }

    /// The whole rule for `blocks`. When every deepest holder is down, the deepest overlap among
    /// the workers that are up decides instead. `None` when no worker is up.
    pub fn decide(&mut self, blocks: &[BlockHash], loads: &impl LoadView) -> Option<Decision> {
        let depth = self.matches(blocks);
        if let Some(d) = self.choose(depth, loads) {
            return Some(d);
        }
        self.index
            .overlaps(blocks, &mut self.scratch, &mut self.overlaps);
        let n = self.overlaps.len();
        let deepest = (0..n)
            .filter(|&w| loads.is_up(w))
            .map(|w| self.overlaps[w])
            .max()?;
        let candidates = (0..n).filter(|&w| loads.is_up(w) && self.overlaps[w] == deepest);
        let worker = least_loaded(candidates, |w| loads.load(w))?;
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: deepest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    struct Loads {
        load: Vec<u64>,
        up: Vec<bool>,
    }

    impl LoadView for Loads {
        fn load(&self, w: usize) -> u64 {
            self.load[w]
        }
        fn is_up(&self, w: usize) -> bool {
            self.up[w]
        }
        fn all_up(&self) -> bool {
            self.up.iter().all(|u| *u)
        }
    }

    #[test]
    fn overlap_then_load_then_lowest_number() {
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 16);
        let mut rule = LabRule::new(3);
        rule.index_mut().store(1, &blocks[..2]);
        rule.index_mut().store(2, &blocks[..2]);
        let loads = Loads {
            load: vec![0, 5, 5],
            up: vec![true; 3],
        };
        let d = rule.decide(&blocks, &loads).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 2));
        rule.record_decision(&d, &blocks);
        let d = rule.decide(&blocks, &loads).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 4));
    }

    #[test]
    fn deepest_holders_down_falls_back_to_the_next_deepest_up() {
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 16);
        let mut rule = LabRule::new(3);
        rule.index_mut().store(0, &blocks[..3]);
        rule.index_mut().store(2, &blocks[..1]);
        let loads = Loads {
            load: vec![0, 0, 9],
            up: vec![false, true, true],
        };
        let d = rule.decide(&blocks, &loads).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(2), 1));
        let none_up = Loads {
            load: vec![0; 3],
            up: vec![false; 3],
        };
        assert_eq!(rule.decide(&blocks, &none_up), None);
    }
}
