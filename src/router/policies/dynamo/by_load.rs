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
//! decision visits only those whose load could put their cost at the least cost found so far
//! (a tree of the loads skips every subtree whose least load is beyond it). The cost of each
//! worker it visits is computed by the same float formula as the full scan, and the bound keeps
//! a relative margin of 10⁻⁹ (rounding moves a cost by a few parts in 10¹⁶), so the least cost,
//! its ties and the seeded draw among them are the full scan's exactly (debug runs check every
//! decision against the full scan).
//!
//! Dynamo's selector (`scheduling/selector/reference.rs` in `dynamo-kv-router` 1.6.1) costs every
//! worker on every decision; this is the same choice found with less work, not a different rule.

use crate::router::select::LoadTree;

/// Every worker's load (above) in a tournament tree whose winners are the least loaded, so that
/// a change replays one leaf-to-root path (and stops where a match's winner stays) and a
/// decision visits only the subtrees whose least load could still reach the least cost. Keys are
/// non-negative floats, so their bit patterns order as the numbers do.
#[derive(Clone, Debug)]
pub(super) struct LoadOrder {
    /// `prefill_load_scale / block`.
    per_prefill_token: f64,
    /// `decode_active_request_weight`.
    per_request: f64,
    /// Each worker's load, as bits.
    tree: LoadTree,
}

impl LoadOrder {
    /// `workers` workers without load, for the given settings and block size.
    pub(super) fn new(
        workers: usize,
        prefill_load_scale: f64,
        decode_active_request_weight: f64,
        block_size: f64,
    ) -> LoadOrder {
        // The tree starts every load at bits 0, which is 0.0.
        LoadOrder {
            per_prefill_token: prefill_load_scale / block_size,
            per_request: decode_active_request_weight,
            tree: LoadTree::new(workers.max(1)),
        }
    }

    /// Sets `worker`'s load from its counters: uncached prefill tokens, decode blocks and active
    /// requests.
    pub(super) fn set(&mut self, worker: usize, prefill_tokens: u64, held: usize, requests: u64) {
        let load = self.per_prefill_token * count_f64(prefill_tokens)
            + count_f64(held as u64)
            + self.per_request * count_f64(requests);
        let bits = load.to_bits();
        if self.tree.load(worker) != bits {
            self.tree.set(worker, bits);
        }
    }

    /// Offers to `least` every worker whose load `offer_of` prices (its cost, or `None` to pass
    /// it over) while `load + prompt_part` may still reach the least cost offered: every worker
    /// that could tie the least, and some that cannot, in increasing worker order.
    pub(super) fn offer_within(
        &self,
        least: &mut Least,
        prompt_part: f64,
        offer_of: impl Fn(usize) -> Option<f64>,
    ) {
        self.tree.visit_while(
            least,
            |least, bits| may_reach(f64::from_bits(bits) + prompt_part, least.cost),
            |least, w, _| {
                if let Some(cost) = offer_of(w) {
                    least.offer(w, cost);
                }
            },
        );
    }
}

/// The workers holding a prefix of the prompt being decided, each once, with its overlap in the
/// router's index and its depth among its active blocks, in increasing worker order: the two
/// walks' lists (each names a worker at most once, and is already in worker order unless a
/// worker dropped out along the prefix) sorted if they are not, then merged, so that nothing
/// per worker is read or written to list them (a table indexed by worker was one cache miss
/// per holder), and a worker is found by a binary search.
#[derive(Clone, Debug, Default)]
pub(super) struct Prefixed {
    /// (worker, overlap, active depth), by worker.
    pub(super) entries: Vec<(usize, usize, usize)>,
}

impl Prefixed {
    /// Lists the workers of `overlaps` ((worker, overlap) pairs) and `depths` ((worker, active
    /// depth) pairs), each with 0 for the one it is missing from; sorts both lists by worker.
    pub(super) fn merge(&mut self, overlaps: &mut [(usize, usize)], depths: &mut [(usize, usize)]) {
        by_worker(overlaps);
        by_worker(depths);
        let entries = &mut self.entries;
        entries.clear();
        entries.reserve(overlaps.len() + depths.len());
        let (mut i, mut j) = (0, 0);
        while i < overlaps.len() && j < depths.len() {
            let ((a, overlap), (b, depth)) = (overlaps[i], depths[j]);
            if a == b {
                entries.push((a, overlap, depth));
                i += 1;
                j += 1;
            } else if a < b {
                entries.push((a, overlap, 0));
                i += 1;
            } else {
                entries.push((b, 0, depth));
                j += 1;
            }
        }
        entries.extend(overlaps[i..].iter().map(|&(w, overlap)| (w, overlap, 0)));
        entries.extend(depths[j..].iter().map(|&(w, depth)| (w, 0, depth)));
    }

    /// `worker`'s entry, if listed.
    #[inline]
    pub(super) fn get(&self, worker: usize) -> Option<&(usize, usize, usize)> {
        self.entries
            .binary_search_by_key(&worker, |e| e.0)
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// Sorts (worker, n) pairs by worker, when they are not already.
fn by_worker(pairs: &mut [(usize, usize)]) {
    if !pairs.is_sorted_by_key(|p| p.0) {
        pairs.sort_unstable_by_key(|p| p.0);
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
    fn a_decision_offers_the_workers_whose_load_could_reach_the_least() {
        // Block 64, prefill_load_scale 2: a prefill token weighs 1/32 of a decode block.
        let mut order = LoadOrder::new(3, 2.0, 0.5, 64.0);
        order.set(0, 64, 3, 2); // 2 + 3 + 1 = 6
        order.set(1, 0, 5, 0); // 5
        order.set(2, 32, 4, 0); // 1 + 4 = 5: ties worker 1
        let loads = [6.0, 5.0, 5.0];
        let decide = |order: &LoadOrder, loads: [f64; 3], holder: Option<f64>, skip: usize| {
            let mut least = Least::default();
            least.clear();
            if let Some(cost) = holder {
                least.offer(9, cost);
            }
            order.offer_within(&mut least, 1.0, |w| (w != skip).then(|| loads[w] + 1.0));
            (least.cost, least.workers, least.offers)
        };
        assert_eq!(decide(&order, loads, None, 3), (6.0, vec![1, 2], 3));
        // A holder at 2 leaves nobody else within reach: only the holder was costed.
        assert_eq!(decide(&order, loads, Some(2.0), 3), (2.0, vec![9], 1));
        // A holder at 6.5: workers 1 and 2 (cost 6) beat it, worker 0 (7) is out of reach.
        assert_eq!(decide(&order, loads, Some(6.5), 3).1, vec![1, 2]);
        // A worker passed over (a holder, or down) is never offered.
        assert_eq!(decide(&order, loads, None, 1).1, vec![2]);
        order.set(0, 0, 0, 0);
        assert_eq!(
            decide(&order, [0.0, 5.0, 5.0], None, 3),
            (1.0, vec![0], 1),
            "worker 0 moved to the front: the rest are out of reach"
        );
    }

    #[test]
    fn the_holders_are_merged_by_worker_each_once() {
        let mut p = Prefixed::default();
        let mut overlaps = vec![(7, 2), (2, 5), (9, 5)];
        let mut depths = vec![(0, 1), (2, 3), (11, 4)];
        p.merge(&mut overlaps, &mut depths);
        assert_eq!(
            p.entries,
            vec![(0, 0, 1), (2, 5, 3), (7, 2, 0), (9, 5, 0), (11, 0, 4)]
        );
        assert_eq!(p.get(2), Some(&(2, 5, 3)));
        assert_eq!(p.get(11), Some(&(11, 0, 4)));
        assert_eq!(p.get(1), None);
        p.merge(&mut [(1, 7)], &mut []);
        assert_eq!((p.entries.as_slice(), p.get(2)), (&[(1, 7, 0)][..], None));
        p.merge(&mut [], &mut []);
        assert!(p.entries.is_empty());
    }

    #[test]
    fn merging_is_the_table_of_both_lists_on_random_cases() {
        // Random disjoint-worker lists in any order, against a map from worker to (overlap,
        // depth) built from both.
        use rand::{seq::SliceRandom, Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut p = Prefixed::default();
        for _ in 0..2_000 {
            let n = rng.gen_range(1..600);
            let pick = |rng: &mut rand_chacha::ChaCha8Rng| {
                let mut ws: Vec<usize> = (0..n).filter(|_| rng.gen_bool(0.2)).collect();
                if rng.gen_bool(0.5) {
                    ws.shuffle(rng);
                }
                ws.into_iter()
                    .map(|w| (w, rng.gen_range(1..40)))
                    .collect::<Vec<_>>()
            };
            let (mut overlaps, mut depths) = (pick(&mut rng), pick(&mut rng));
            let mut want = std::collections::BTreeMap::new();
            for &(w, o) in &overlaps {
                want.entry(w).or_insert((0, 0)).0 = o;
            }
            for &(w, d) in &depths {
                want.entry(w).or_insert((0, 0)).1 = d;
            }
            p.merge(&mut overlaps, &mut depths);
            let got: Vec<_> = want.iter().map(|(&w, &(o, d))| (w, o, d)).collect();
            assert_eq!(p.entries, got);
            for w in 0..n {
                assert_eq!(p.get(w).map(|e| (e.1, e.2)), want.get(&w).copied());
            }
        }
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
