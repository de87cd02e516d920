//! The lab workload: repeated prefixes with unique tails, in a shuffled order.
//!
//! Prefix `k`'s tokens are `k*1000 + j` for `j < plen`; request `i` (its position in the order) ends
//! with a tail `1_000_000 + i*100 + j` for `j < tail`. The order is
//! `[k for k in 0..prefixes for _ in 0..reps]` shuffled once by the run's generator.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::hashers::IdBuilder;
use crate::rng::SimRng;

/// The shape of the lab workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixRepeat {
    /// Distinct prefixes.
    pub prefixes: usize,
    /// Requests per prefix.
    pub reps: usize,
    /// Prefix tokens.
    pub prefix_len: usize,
    /// Tokens of each request's unique tail.
    pub tail_len: usize,
}

impl Default for PrefixRepeat {
    /// The lab's defaults: 12 prefixes x 6 reps, 96 + 16 tokens.
    fn default() -> Self {
        PrefixRepeat {
            prefixes: 12,
            reps: 6,
            prefix_len: 96,
            tail_len: 16,
        }
    }
}

impl PrefixRepeat {
    /// The order of prefixes, shuffled once by `rng` (the first draws of a lab run).
    pub fn order(&self, rng: &mut SimRng) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.prefixes)
            .flat_map(|k| std::iter::repeat_n(k, self.reps))
            .collect();
        rng.shuffle(&mut order);
        order
    }

    /// The distinct full blocks of `block_size` tokens the workload creates: each prefix's
    /// once, and every block holding tail tokens once per request (tails are unique).
    pub fn distinct_blocks(&self, block_size: usize) -> u64 {
        let bs = block_size.max(1);
        let prefix = self.prefix_len / bs;
        let whole = (self.prefix_len + self.tail_len) / bs;
        let requests = self.prefixes as u64 * self.reps as u64;
        (self.prefixes * prefix) as u64 + requests * (whole - prefix) as u64
    }

    /// The tokens of request `i`, which uses prefix `k`.
    pub fn tokens(&self, i: usize, k: usize) -> Vec<u32> {
        let prefix = (0..self.prefix_len).map(|j| (k * 1000 + j) as u32);
        let tail = (0..self.tail_len).map(|j| (1_000_000 + i * 100 + j) as u32);
        prefix.chain(tail).collect()
    }
}

/// Scores requests with the lab's hit definition: a request whose prefix was seen before (a repeat)
/// hits if it went to a worker that had already processed that prefix. First-seen prefixes are
/// not in the denominator.
#[derive(Clone, Debug)]
pub struct LabHits {
    seen: Vec<bool>,
    /// The (prefix, worker) pairs processed, as `prefix · workers + worker`: at most one per
    /// request, where a table of every pair took `prefixes × workers` bytes (65,536 workers
    /// and a million prefixes: 65 GB, and the process was killed).
    processed: HashSet<u64, IdBuilder>,
    workers: u64,
    /// Requests scored.
    pub requests: usize,
    /// Requests whose prefix was seen before.
    pub repeat_requests: usize,
    /// Repeat requests that went to a worker that had processed their prefix.
    pub hits: usize,
}

impl LabHits {
    /// A scorer for `prefixes` prefixes over `workers` workers.
    pub fn new(prefixes: usize, workers: usize) -> Self {
        LabHits {
            seen: vec![false; prefixes],
            processed: HashSet::default(),
            workers: workers as u64,
            requests: 0,
            repeat_requests: 0,
            hits: 0,
        }
    }

    /// Scores one request for `prefix` sent to `worker`; returns whether it was a hit.
    pub fn record(&mut self, prefix: usize, worker: usize) -> bool {
        self.requests += 1;
        let repeat = std::mem::replace(&mut self.seen[prefix], true);
        let pair = self.pair(prefix, worker);
        let hit = !self.processed.insert(pair) && repeat;
        self.repeat_requests += usize::from(repeat);
        self.hits += usize::from(hit);
        hit
    }

    /// Forgets that `worker` processed `prefix` (its cache lost the prefix).
    pub fn forget(&mut self, prefix: usize, worker: usize) {
        let pair = self.pair(prefix, worker);
        self.processed.remove(&pair);
    }

    fn pair(&self, prefix: usize, worker: usize) -> u64 {
        debug_assert!(
            (worker as u64) < self.workers,
            "worker {worker} of {}",
            self.workers
        );
        prefix as u64 * self.workers + worker as u64
    }

    /// hits / repeat_requests, rounded like Python's `round(x, 4)`; 0.0 without repeats.
    pub fn hit_rate(&self) -> f64 {
        crate::round::rate(self.hits, self.repeat_requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoring_holds_a_pair_per_request_not_per_worker_and_prefix() {
        // 65,536 workers and a million prefixes: a table of every pair was 65 GB (the
        // auditor's `sim` was killed at 24 GB); the pairs processed are what is kept.
        let mut h = LabHits::new(1_000_000, 65_536);
        assert!(!h.record(999_999, 65_535));
        assert!(
            h.record(999_999, 65_535),
            "a repeat on the worker that processed it"
        );
        assert!(!h.record(999_999, 0), "a repeat elsewhere");
        h.forget(999_999, 65_535);
        assert!(!h.record(999_999, 65_535), "forgotten");
        assert_eq!(h.processed.len(), 2);
    }
    use crate::rng::RngKind;

    #[test]
    fn distinct_blocks_count_prefixes_once_and_tails_per_request() {
        // 12 prefixes of 96 tokens (6 blocks of 16), tails of 16: one tail block per request.
        let w = PrefixRepeat::default();
        assert_eq!(w.distinct_blocks(16), 12 * 6 + 72);
        let all: std::collections::HashSet<_> = (0..72)
            .flat_map(|i| crate::hash::block_hashes(&w.tokens(i, i % 12), 16))
            .collect();
        assert_eq!(all.len() as u64, w.distinct_blocks(16));
    }

    #[test]
    fn tokens_follow_the_lab_formula() {
        let w = PrefixRepeat {
            prefixes: 2,
            reps: 1,
            prefix_len: 3,
            tail_len: 2,
        };
        assert_eq!(w.tokens(4, 1), vec![1000, 1001, 1002, 1_000_400, 1_000_401]);
    }

    #[test]
    fn order_is_the_python_shuffle() {
        // random.Random(1): x = [k for k in range(3) for _ in range(2)]; r.shuffle(x)
        let w = PrefixRepeat {
            prefixes: 3,
            reps: 2,
            ..PrefixRepeat::default()
        };
        let order = w.order(&mut SimRng::new(RngKind::Python, 1));
        assert_eq!(order, PY_ORDER_SEED1);
    }

    const PY_ORDER_SEED1: [usize; 6] = [1, 1, 2, 0, 2, 0];

    #[test]
    fn hits_count_only_repeats_on_a_worker_that_saw_the_prefix() {
        let mut h = LabHits::new(2, 2);
        assert!(!h.record(0, 0)); // first seen: not a repeat
        assert!(!h.record(0, 1)); // repeat, other worker
        assert!(h.record(0, 0));
        assert!(!h.record(1, 0));
        assert_eq!((h.requests, h.repeat_requests, h.hits), (4, 2, 1));
        assert_eq!(h.hit_rate(), 0.5);
    }
}
