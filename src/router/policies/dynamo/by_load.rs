//! The workers in increasing order of the part of Dynamo's cost that does not depend on the
//! prompt, so that a decision costs the workers holding a prefix of the prompt and only as many
//! of the others as could tie the least cost, instead of every worker.
//!
//! A worker with none of the prompt cached and none of it among its active requests' blocks
//! costs, by the formula of the policy's documentation (no credit, no decay, no lower tiers),
//!
//! ```text
//! cost = load + prefill_load_scale · prompt_tokens / block + prompt_blocks + untracked
//! load = prefill_load_scale · active_prefill_tokens / block + decode_blocks
//!      + decode_active_request_weight · active_requests
//! ```
//!
//! where only `load` is the worker's. Among such workers the cost grows with the load, so a
//! decision visits them in increasing load and stops at the first whose load puts its cost
//! above the least cost found so far. The cost of each worker it visits is computed by the same
//! float formula as the full scan, and the stop keeps a relative margin of 10⁻⁹ (rounding moves a
//! cost by a few parts in 10¹⁶), so the least cost, its ties and the seeded draw among them are
//! the full scan's exactly (debug runs check every decision against the full scan).
//!
//! Dynamo's selector (`scheduling/selector/reference.rs` in `dynamo-kv-router` 1.6.1) costs every
//! worker on every decision; this is the same choice found with less work, not a different rule.

use std::collections::BTreeSet;

/// Every worker's load (above) and the workers ordered by it. Keys are non-negative floats, so
/// their bit patterns order as the numbers do.
#[derive(Clone, Debug)]
pub(super) struct LoadOrder {
    /// `prefill_load_scale / block`.
    per_prefill_token: f64,
    /// `decode_active_request_weight`.
    per_request: f64,
    /// Each worker's load, as bits.
    loads: Vec<u64>,
    /// (load bits, worker) of every worker.
    order: BTreeSet<(u64, u32)>,
}

impl LoadOrder {
    /// `workers` workers without load, for the given settings and block size.
    pub(super) fn new(
        workers: usize,
        prefill_load_scale: f64,
        decode_active_request_weight: f64,
        block_size: f64,
    ) -> LoadOrder {
        let zero = 0f64.to_bits();
        LoadOrder {
            per_prefill_token: prefill_load_scale / block_size,
            per_request: decode_active_request_weight,
            loads: vec![zero; workers],
            order: (0..workers).map(|w| (zero, w as u32)).collect(),
        }
    }

    /// Sets `worker`'s load from its counters: uncached prefill tokens, decode blocks and active
    /// requests.
    pub(super) fn set(&mut self, worker: usize, prefill_tokens: u64, held: usize, requests: u64) {
        let load = self.per_prefill_token * count_f64(prefill_tokens)
            + count_f64(held as u64)
            + self.per_request * count_f64(requests);
        let bits = load.to_bits();
        let old = std::mem::replace(&mut self.loads[worker], bits);
        if old != bits {
            self.order.remove(&(old, worker as u32));
            self.order.insert((bits, worker as u32));
        }
    }

    /// (load, worker) of every worker, least load first (lower index first among equal loads).
    pub(super) fn ascending(&self) -> impl Iterator<Item = (f64, usize)> + '_ {
        self.order
            .iter()
            .map(|&(bits, w)| (f64::from_bits(bits), w as usize))
    }
}

/// The workers holding a prefix of the prompt being decided, each once, with its overlap in the
/// router's index and its depth among its active blocks, found by worker in O(1): a per-worker
/// stamp of the decision that last listed it, so that nothing worker-sized is cleared per
/// decision.
#[derive(Clone, Debug, Default)]
pub(super) struct Prefixed {
    /// (worker, overlap, active depth), in the order first listed.
    pub(super) entries: Vec<(usize, usize, usize)>,
    /// Per worker, (decision, its entry) of the last decision that listed it.
    slots: Vec<(u32, u32)>,
    decision: u32,
}

impl Prefixed {
    /// For `workers` workers.
    pub(super) fn new(workers: usize) -> Prefixed {
        Prefixed {
            entries: Vec::new(),
            slots: vec![(0, 0); workers],
            decision: 0,
        }
    }

    /// Starts a decision: no worker listed.
    pub(super) fn start(&mut self) {
        self.entries.clear();
        self.decision = self.decision.wrapping_add(1);
        if self.decision == 0 {
            // Every 2^32 decisions: stamps of the last round could be mistaken for this one's.
            self.slots.fill((0, 0));
            self.decision = 1;
        }
    }

    /// `worker`'s entry, listed (with overlap and depth 0) if it was not.
    #[inline]
    pub(super) fn entry(&mut self, worker: usize) -> &mut (usize, usize, usize) {
        let (decision, i) = self.slots[worker];
        let i = if decision == self.decision {
            i as usize
        } else {
            self.slots[worker] = (self.decision, self.entries.len() as u32);
            self.entries.push((worker, 0, 0));
            self.entries.len() - 1
        };
        &mut self.entries[i]
    }

    /// `worker`'s entry in this decision, if listed.
    #[inline]
    pub(super) fn get(&self, worker: usize) -> Option<&(usize, usize, usize)> {
        let (decision, i) = self.slots[worker];
        (decision == self.decision).then(|| &self.entries[i as usize])
    }
}

/// `x as f64`, exactly: below 2^63 (every count and token sum of a cost) by the signed
/// conversion, one instruction on x86-64, where the unsigned one takes several; the scan over the
/// workers does four per worker.
#[inline(always)]
pub(super) fn count_f64(x: u64) -> f64 {
    if x >> 63 == 0 {
        x as i64 as f64
    } else {
        x as f64
    }
}

/// Whether a worker whose cost is `lower_bound` up to rounding can still reach `least`: false
/// once the bound exceeds the least by more than any rounding could (a relative 10⁻⁹, with
/// 10⁻⁹ absolute for costs near 0).
#[inline]
pub(super) fn may_reach(lower_bound: f64, least: f64) -> bool {
    lower_bound <= least * (1.0 + 1e-9) + 1e-9
}

/// The least of the costs offered, and the workers that have it.
#[derive(Clone, Debug, Default)]
pub(super) struct Least {
    /// The least cost offered (infinite before any).
    pub(super) cost: f64,
    /// The workers offered at that cost, in the order offered.
    pub(super) workers: Vec<usize>,
    /// How many workers were offered (were costed).
    pub(super) offers: usize,
}

impl Least {
    /// Forgets every offer.
    pub(super) fn clear(&mut self) {
        self.cost = f64::INFINITY;
        self.workers.clear();
        self.offers = 0;
    }

    /// Offers `worker` at `cost` (a NaN is never least).
    #[inline]
    pub(super) fn offer(&mut self, worker: usize, cost: f64) {
        self.offers += 1;
        if cost < self.cost {
            self.cost = cost;
            self.workers.clear();
            self.workers.push(worker);
        } else if cost == self.cost {
            self.workers.push(worker);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_come_in_increasing_load_and_move_when_it_changes() {
        // Block 64, prefill_load_scale 2: a prefill token weighs 1/32 of a decode block.
        let mut order = LoadOrder::new(3, 2.0, 0.5, 64.0);
        order.set(0, 64, 3, 2); // 2 + 3 + 1 = 6
        order.set(1, 0, 5, 0); // 5
        order.set(2, 32, 4, 0); // 1 + 4 = 5: ties worker 1, after it
        let seen: Vec<(f64, usize)> = order.ascending().collect();
        assert_eq!(seen, vec![(5.0, 1), (5.0, 2), (6.0, 0)]);
        order.set(0, 0, 0, 0);
        let seen: Vec<usize> = order.ascending().map(|(_, w)| w).collect();
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(order.order.len(), 3, "one entry per worker");
    }

    #[test]
    fn a_worker_is_listed_once_per_decision_and_forgotten_by_the_next() {
        let mut p = Prefixed::new(4);
        p.start();
        p.entry(2).1 = 5;
        p.entry(0).2 = 1;
        p.entry(2).2 = 3;
        assert_eq!(p.entries, vec![(2, 5, 3), (0, 0, 1)]);
        assert_eq!(p.get(2), Some(&(2, 5, 3)));
        assert_eq!(p.get(1), None);
        p.start();
        assert_eq!(p.get(2), None);
        p.entry(1).1 = 7;
        assert_eq!(p.entries, vec![(1, 7, 0)]);
        // The stamp wraps: every 2^32 decisions the slots are cleared.
        p.decision = u32::MAX;
        p.start();
        assert_eq!((p.decision, p.get(1)), (1, None));
    }

    #[test]
    fn the_margin_keeps_rounding_and_drops_what_cannot_tie() {
        assert!(may_reach(10.0, 10.0));
        assert!(may_reach(10.0 + 1e-12, 10.0));
        assert!(!may_reach(10.001, 10.0));
        assert!(may_reach(5e-10, 0.0));
        assert!(!may_reach(1.0, 0.0));
        assert!(may_reach(1.0, f64::INFINITY));
    }

    #[test]
    fn the_least_keeps_every_tie_in_the_order_offered() {
        let mut least = Least::default();
        least.clear();
        least.offer(4, 3.0);
        least.offer(1, 2.0);
        least.offer(7, 2.0);
        least.offer(0, f64::NAN);
        least.offer(2, 2.5);
        assert_eq!(least.cost, 2.0);
        assert_eq!(least.workers, vec![1, 7]);
        assert_eq!(least.offers, 5);
    }
}
