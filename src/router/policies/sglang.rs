//! `sglang`: SGLang's cache-aware router (sgl-project/sglang, `sgl-router/src/policies/
//! cache_aware.rs` at commit 026f853b, `CacheAwarePolicy::select_worker`; its tree in
//! `policies/tree.rs` at 4d40eec0; the command line defaults in `sgl-router/src/main.rs` at
//! 0129b029).
//!
//! Load is the number of requests this router has in flight on each worker. If the pool is
//! imbalanced, max load − min load > `balance_abs_threshold` and max load >
//! `balance_rel_threshold` x min load, the least loaded worker that is up wins (the lowest
//! number on ties). Otherwise the router matches the prompt against an approximate tree of the
//! prompts it routed to each worker: if the longest match covers more than `cache_threshold` of
//! the prompt, the worker holding it wins, else the worker with the smallest tree. Either way the
//! prompt is recorded under the chosen worker. Every `eviction_interval_secs` each worker's tree
//! is cut back to `max_tree_tokens`, least recently used first.
//!
//! The imbalance check takes the max and min load over every worker, up or down, as SGLang's
//! does: `select_worker` collects `w.load()` over the whole `workers` slice it is given, while
//! only the choice of the least loaded is restricted to the healthy ones
//! (`get_healthy_worker_indices`). A worker that is down therefore still counts: once its
//! requests are handed back its load is 0, so the pool looks imbalanced as soon as a worker up
//! has more than `balance_abs_threshold` requests in flight.
//!
//! Settings, `[router.sglang]` (SGLang's command-line defaults): `cache_threshold` (0.3),
//! `balance_abs_threshold` (64), `balance_rel_threshold` (1.5), `eviction_interval_secs` (120),
//! `max_tree_tokens` (16,777,216: SGLang's `max_tree_size` of 2^26 characters at 4 characters
//! per token).
//!
//! Where dynsim differs:
//!
//! - The tree holds block names, not characters, so the match rate is matched blocks / prompt
//!   blocks and tree sizes count tokens by whole blocks.
//! - A low match (rate ≤ `cache_threshold`): SGLang takes `Tree::get_smallest_tenant`, the worker
//!   with the fewest characters in the tree among all it knows, healthy or not, ties in hash
//!   map order (arbitrary); it does not look at load there (the "else the least loaded"
//!   is not what the code does). dynsim takes the worker with the smallest tree among those up,
//!   the lowest number on ties.
//! - A high match: SGLang's `prefix_match` returns the first tenant in the hash map of the
//!   deepest matched node (arbitrary among the workers holding it); dynsim the lowest-numbered
//!   one that is up.
//! - A chosen worker that is down: SGLang then returns its first healthy worker (by index) and
//!   records nothing in the tree; dynsim never chooses a worker that is down, as above, and
//!   always records the prompt.
//!
//! Cost: O(1) in the number of workers when all are up (the load range and the least loaded come
//! from the [`LoadBook`]'s tournament trees, the smallest tree from one of its own), one walk of
//! the prompt's blocks; a scan of the workers up when some are down.

use serde::Deserialize;

use crate::engine::ms_to_ns;
use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::rng::SimRng;
use crate::router::history::RoutedHistory;
use crate::router::lab_rule::LoadView;
use crate::router::loads::LoadBook;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::select::{least_loaded, LoadTree};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "sglang",
    summary: "SGLang's cache-aware router: balance if imbalanced, else longest routed prefix",
    build,
    settings: crate::router::policy::settings_schema::<Settings>,
};

/// `[router.sglang]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Match share of the prompt above which the matching worker wins (0.3).
    pub cache_threshold: f64,
    /// Load difference above which the pool may be imbalanced (64 requests).
    pub balance_abs_threshold: u64,
    /// Load ratio above which the pool may be imbalanced (1.5).
    pub balance_rel_threshold: f64,
    /// Seconds between tree prunings (120).
    pub eviction_interval_secs: f64,
    /// Tokens each worker's tree keeps at most when pruned (16,777,216).
    pub max_tree_tokens: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            eviction_interval_secs: 120.0,
            max_tree_tokens: 16_777_216,
        }
    }
}

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: Settings = setup.settings()?;
    let bad = |key: &str, v: f64, problem: &str| Invalid {
        key: format!("router.sglang.{key}"),
        value: format!("{v:?}"),
        problem: problem.into(),
    };
    if !(0.0..=1.0).contains(&s.cache_threshold) {
        return Err(bad(
            "cache_threshold",
            s.cache_threshold,
            "is outside 0..=1",
        ));
    }
    if !s.balance_rel_threshold.is_finite() || s.balance_rel_threshold < 1.0 {
        return Err(bad(
            "balance_rel_threshold",
            s.balance_rel_threshold,
            "must be a finite number >= 1",
        ));
    }
    if !(s.eviction_interval_secs.is_finite() && s.eviction_interval_secs > 0.0)
        || s.eviction_interval_secs > 1e9
    {
        return Err(bad(
            "eviction_interval_secs",
            s.eviction_interval_secs,
            "must be a number of seconds in (0, 1e9]",
        ));
    }
    // At least a nanosecond: a shorter interval rounds to 0 and would never end.
    let interval_ns = ms_to_ns(s.eviction_interval_secs * 1e3).max(1);
    Ok(Box::new(Sglang {
        settings: s,
        max_blocks: (s.max_tree_tokens / setup.block_size.max(1) as u64) as usize,
        workers: setup.workers,
        history: RoutedHistory::new(setup.workers),
        sizes: LoadTree::new(setup.workers.max(1)),
        interval_ns,
        next_prune: interval_ns,
    }))
}

struct Sglang {
    settings: Settings,
    max_blocks: usize,
    workers: usize,
    history: RoutedHistory,
    /// Each worker's tree size (blocks), for the smallest without a scan.
    sizes: LoadTree,
    interval_ns: u64,
    next_prune: u64,
}

impl Sglang {
    /// SGLang's imbalance test, on the load range over every worker (up or not).
    fn imbalanced(&self, loads: &LoadBook) -> bool {
        let (min, max) = loads.in_flight_range();
        max - min > self.settings.balance_abs_threshold
            && max as f64 > self.settings.balance_rel_threshold * min as f64
    }

    /// The worker up with the smallest tree, the lowest number on ties (`None`: none is up).
    fn smallest_tree(&self, loads: &LoadBook) -> Option<usize> {
        if loads.all_up() {
            Some(self.sizes.winner())
        } else {
            least_loaded(loads.up_workers(), |w| self.history.size(w) as u64)
        }
    }
}

impl RoutingPolicy for Sglang {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        if !loads.any_up() {
            return None;
        }
        if req.now >= self.next_prune {
            // Pruning twice at one instant changes nothing, so every interval that ended by
            // now is one prune (an interval far shorter than the gaps between requests would
            // otherwise loop once per interval).
            for w in 0..loads.workers() {
                self.history.shrink(w, self.max_blocks);
                self.sizes.set(w, self.history.size(w) as u64);
            }
            let missed = (req.now - self.next_prune) / self.interval_ns;
            self.next_prune = self
                .next_prune
                .saturating_add((missed + 1).saturating_mul(self.interval_ns));
        }
        let (worker, known) = if self.imbalanced(loads) {
            (loads.least_in_flight()?, None)
        } else {
            let depth = self.history.deepest(&req.blocks);
            let rate = if req.blocks.is_empty() {
                0.0
            } else {
                depth as f64 / req.blocks.len() as f64
            };
            let tenant = self.history.best().find(|&w| loads.up(w));
            match tenant {
                Some(w) if rate > self.settings.cache_threshold => (w, Some(depth)),
                _ => (self.smallest_tree(loads)?, None),
            }
        };
        // The tenant holds the deepest match; any other choice needs its own.
        let predicted = known.unwrap_or_else(|| self.history.overlap(worker, &req.blocks));
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: predicted,
        })
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        let w = d.worker.index();
        self.history.touch(w, &req.blocks);
        self.sizes.set(w, self.history.size(w) as u64);
    }

    /// Its trees keep every routed prompt up to `max_tree_tokens` per worker.
    fn history_bytes(&self, blocks: u64) -> u64 {
        let cap = self.max_blocks as u64 * self.workers as u64;
        blocks.min(cap) * crate::budget::TREE_BYTES_PER_BLOCK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::ids::RequestId;
    use crate::rng::RngKind;
    use crate::router::loads::LoadKind;

    fn policy(settings: &str) -> Box<dyn RoutingPolicy> {
        let table: toml::Value = toml::from_str(settings).unwrap();
        build(&PolicySetup {
            name: "sglang",
            workers: 3,
            block_size: 4,
            kv_capacity_blocks: None,
            settings: Some(&table),
        })
        .unwrap()
    }

    /// Request `id` of `blocks` (4 tokens each) at `now` ns.
    fn request(id: u64, blocks: &[crate::hash::BlockHash], now: u64) -> RouteRequest<'_> {
        RouteRequest {
            id: RequestId(id),
            blocks: blocks.into(),
            input_tokens: blocks.len() as u32 * 4,
            session: None,
            now,
        }
    }

    fn route(
        p: &mut dyn RoutingPolicy,
        loads: &mut LoadBook,
        id: u64,
        blocks: &[crate::hash::BlockHash],
    ) -> usize {
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let req = request(id, blocks, 0);
        let d = p.decide(&req, loads, &mut rng).unwrap();
        loads.routed_to(RequestId(id), d.worker, blocks.len());
        p.on_routed(&req, &d);
        d.worker.index()
    }

    #[test]
    fn a_decision_computed_by_hand_from_the_published_rule() {
        // Thresholds: abs 2, rel 1.5, cache 0.3. A 10-block prompt goes to worker 0 (all trees
        // empty: the smallest, lowest number). A prompt sharing its first 4 blocks (match rate
        // 0.4 > 0.3) follows it there; one sharing 2 (0.2) goes to the smallest tree, worker 1.
        let mut p = policy("balance_abs_threshold = 2\ncache_threshold = 0.3");
        let mut loads = LoadBook::new(3, LoadKind::InFlight);
        let long = block_hashes(&(0..40).collect::<Vec<u32>>(), 4);
        assert_eq!(route(&mut *p, &mut loads, 0, &long), 0);
        let mut four: Vec<u32> = (0..16).collect();
        four.extend(100..124);
        assert_eq!(route(&mut *p, &mut loads, 1, &block_hashes(&four, 4)), 0);
        let mut two: Vec<u32> = (0..8).collect();
        two.extend(200..232);
        assert_eq!(route(&mut *p, &mut loads, 2, &block_hashes(&two, 4)), 1);
        // Loads now 2, 1, 0: max − min = 2, not > 2. One more on worker 0 (a repeat of the
        // long prompt) makes it 3 − 0 > 2 and 3 > 1.5 x 0: imbalanced, so the least loaded,
        // worker 2, gets the next repeat despite worker 0's cache.
        assert_eq!(route(&mut *p, &mut loads, 3, &long), 0);
        assert_eq!(route(&mut *p, &mut loads, 4, &long), 2);
    }

    #[test]
    fn a_worker_that_is_down_counts_in_the_imbalance_check_as_in_sglang() {
        // abs 2. Worker 0 holds the long prompt and has 3 in flight, worker 2 has 2, worker 1
        // is down with none. Over every worker: 3 − 0 > 2 and 3 > 1.5 x 0, imbalanced: the least
        // loaded worker up, 2, wins despite worker 0's cache. Over the workers up alone (3 − 2)
        // the pool would look balanced and the cache would send it to worker 0.
        let mut p = policy("balance_abs_threshold = 2");
        let mut loads = LoadBook::new(3, LoadKind::InFlight);
        let long = block_hashes(&(0..40).collect::<Vec<u32>>(), 4);
        assert_eq!(route(&mut *p, &mut loads, 0, &long), 0);
        for (id, w) in [(10, 0), (11, 0), (12, 2), (13, 2)] {
            loads.routed_to(RequestId(id), WorkerId(w), 1);
        }
        loads.set_up(WorkerId(1), false);
        assert_eq!(loads.in_flight_range(), (0, 3));
        assert_eq!(route(&mut *p, &mut loads, 1, &long), 2);
        // Worker 1 back with one request in flight: 3 − 1 ≤ 2, balanced, the cache wins.
        loads.set_up(WorkerId(1), true);
        loads.routed_to(RequestId(14), WorkerId(1), 1);
        assert_eq!(route(&mut *p, &mut loads, 2, &long), 0);
    }

    #[test]
    fn trees_are_pruned_to_the_limit_every_interval() {
        // 2 blocks of 4 tokens per tree at most, pruned every second.
        let mut p = policy("max_tree_tokens = 8\neviction_interval_secs = 1.0");
        let mut loads = LoadBook::new(3, LoadKind::InFlight);
        let long = block_hashes(&(0..40).collect::<Vec<u32>>(), 4);
        assert_eq!(route(&mut *p, &mut loads, 0, &long), 0);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let later = request(1, &long, 1_000_000_000);
        // After pruning worker 0 keeps the long prompt's first 2 blocks: 0.2, below the
        // threshold: the smallest tree wins, worker 1.
        let d = p.decide(&later, &loads, &mut rng).unwrap();
        assert_eq!((d.worker.index(), d.predicted_blocks), (1, 0));
    }

    #[test]
    fn an_interval_shorter_than_a_nanosecond_prunes_once_per_decision() {
        // 1e-12 s rounds to 0 ns; a day later 8.64e13 intervals have ended, one prune for all
        // (it used to loop once per interval, forever at 0 ns). The prune is the 1 s one's.
        for interval in ["1e-12", "1e-6"] {
            let mut p = policy(&format!(
                "max_tree_tokens = 8\neviction_interval_secs = {interval}"
            ));
            let mut loads = LoadBook::new(3, LoadKind::InFlight);
            let long = block_hashes(&(0..40).collect::<Vec<u32>>(), 4);
            assert_eq!(route(&mut *p, &mut loads, 0, &long), 0);
            let mut rng = SimRng::new(RngKind::Chacha, 1);
            let day_later = request(1, &long, 86_400 * 1_000_000_000);
            let d = p.decide(&day_later, &loads, &mut rng).unwrap();
            assert_eq!((d.worker.index(), d.predicted_blocks), (1, 0), "{interval}");
        }
    }
}
