//! The lab's KV-aware router.
//!
//! Rules: (1) the worker with the most overlapping blocks, (2) then the fewest requests routed to
//! it so far, (3) then the lowest index; the chosen worker's count goes up right after the choice.
//! The self-tracking router ([`KvRouter::new`]) then records every block of the request for that
//! worker. The events router ([`KvRouter::with_events`]) never records its own decisions: it learns
//! only from [`KvRouter::on_event`]. Recording decisions in events mode would hide the failure
//! where workers publish nothing (the lab's third classic mistake): the router would look healthy
//! while real workers' caches are unknown to it.

use crate::hash::{block_hashes, BlockHash};
use crate::index::{KvIndex, MatchScratch};
use crate::router::select::least_loaded;

/// A KV-aware router over `n_workers` workers.
#[derive(Clone)]
pub struct KvRouter {
    block: usize,
    index: KvIndex,
    routed: Vec<u64>,
    events_only: bool,
    scratch: MatchScratch,
}

/// One routing decision with what the router believed about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The chosen worker.
    pub worker: usize,
    /// Blocks the router believed the chosen worker held, counted from the front.
    pub predicted_overlap: usize,
}

impl KvRouter {
    /// A self-tracking router: it records the blocks of every request it routes.
    ///
    /// # Panics
    /// Panics if `n_workers` or `block` is 0.
    pub fn new(n_workers: usize, block: usize) -> Self {
        Self::build(n_workers, block, false)
    }

    /// An events router: it learns which worker holds which block only from KV events.
    ///
    /// # Panics
    /// Panics if `n_workers` or `block` is 0.
    pub fn with_events(n_workers: usize, block: usize) -> Self {
        Self::build(n_workers, block, true)
    }

    fn build(n_workers: usize, block: usize, events_only: bool) -> Self {
        assert!(n_workers > 0, "a router needs at least one worker");
        assert!(block > 0, "block size must be at least 1 token");
        KvRouter {
            block,
            index: KvIndex::new(n_workers),
            routed: vec![0; n_workers],
            events_only,
            scratch: MatchScratch::default(),
        }
    }

    /// Routes a prompt and returns the chosen worker.
    pub fn route(&mut self, tokens: &[u32]) -> usize {
        let hashes = block_hashes(tokens, self.block);
        self.route_hashes(&hashes).worker
    }

    /// Routes a prompt already cut into block names (hashing it once is the caller's job).
    pub fn route_hashes(&mut self, hashes: &[BlockHash]) -> Decision {
        let depth = self.index.find_matches(hashes, &mut self.scratch);
        let routed = &self.routed;
        let worker = least_loaded(self.scratch.best(), |w| routed[w])
            .expect("at least one worker is always a candidate");
        self.routed[worker] += 1;
        if !self.events_only {
            // The chosen worker already holds the first `depth` blocks.
            self.index.store(worker, &hashes[depth..]);
        }
        Decision {
            worker,
            predicted_overlap: depth,
        }
    }

    /// A KV-stored event: `worker` now holds `hashes`.
    pub fn on_event(&mut self, worker: usize, hashes: &[BlockHash]) {
        self.index.store(worker, hashes);
    }

    /// A KV-removed event: `worker` no longer holds `hashes`.
    pub fn on_removed(&mut self, worker: usize, hashes: &[BlockHash]) {
        self.index.remove(worker, hashes);
    }

    /// Requests routed to each worker so far.
    pub fn routed(&self) -> &[u64] {
        &self.routed
    }

    /// The router's index (its belief of who holds what).
    pub fn index(&self) -> &KvIndex {
        &self.index
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(prefix: u32, tail: u32) -> Vec<u32> {
        let mut t: Vec<u32> = (0..8).map(|j| prefix * 1000 + j).collect();
        t.extend((0..4).map(|j| 1_000_000 + tail * 100 + j));
        t
    }

    #[test]
    fn rule_1_most_overlap_wins_over_load() {
        let mut r = KvRouter::new(2, 4);
        assert_eq!(r.route(&prompt(1, 0)), 0);
        assert_eq!(r.route(&prompt(2, 1)), 1);
        assert_eq!(r.route(&prompt(1, 2)), 0); // worker 0 has prefix 1, though loads are equal
        assert_eq!(r.route(&prompt(1, 3)), 0); // and again, though worker 0 is now busier
        assert_eq!(r.routed(), &[3, 1]);
    }

    #[test]
    fn rule_2_fewest_routed_then_rule_3_lowest_index() {
        let mut r = KvRouter::new(3, 4);
        assert_eq!(r.route(&prompt(1, 0)), 0); // all tie: lowest index
        assert_eq!(r.route(&prompt(2, 1)), 1); // no overlap: fewest routed
        assert_eq!(r.route(&prompt(3, 2)), 2);
        assert_eq!(r.route(&prompt(4, 3)), 0);
    }

    #[test]
    fn short_request_goes_to_least_loaded() {
        let mut r = KvRouter::new(2, 16);
        r.route(&prompt(1, 0));
        assert_eq!(r.route(&[1, 2, 3]), 1);
        assert_eq!(r.route(&[]), 0);
    }

    #[test]
    fn events_router_never_records_its_own_decisions() {
        // The classic mistake: an events router that records its decisions looks like kv mode.
        let mut r = KvRouter::with_events(2, 4);
        assert_eq!(r.route(&prompt(1, 0)), 0);
        assert_eq!(r.index().entries(), 0);
        assert_eq!(r.route(&prompt(1, 1)), 1); // no belief: falls back to load, like rr
        let hashes = block_hashes(&prompt(1, 2), 4);
        r.on_event(1, &hashes);
        assert_eq!(r.route(&prompt(1, 3)), 1);
    }

    #[test]
    fn removed_events_forget() {
        let mut r = KvRouter::with_events(2, 4);
        let hashes = block_hashes(&prompt(1, 0), 4);
        r.on_event(1, &hashes);
        r.on_removed(1, &hashes);
        assert_eq!(r.route(&prompt(1, 1)), 0);
    }
}
