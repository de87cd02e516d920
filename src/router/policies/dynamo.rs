//! `dynamo`: Dynamo's current KV router (the published crate `dynamo-kv-router` 1.6.1:
//! `scheduling/selector/reference.rs`, `DefaultWorkerScorer::worker_logit`; defaults in
//! `scheduling/config.rs`, `KvRouterConfig::default`; load tracking in `sequences/`).
//!
//! For each worker that is up, the lowest cost wins (seeded random among equal costs):
//!
//! ```text
//! cost = prefill_load_scale · max(0, (active_prefill_tokens + prompt_tokens) / block − credit)
//!      + decode_blocks + decode_active_request_weight · active_requests
//! credit = overlap_score_credit · decay · cached_blocks
//!        + host_cache_hit_weight · host_blocks + disk_cache_hit_weight · disk_blocks
//! decay  = 1 / (1 + overlap_score_credit_decay · excess / request_blocks)
//! ```
//!
//! - `cached_blocks`: the worker's overlap in the router's index (fed by KV events, or by its own
//!   decisions with a TTL when `use_kv_events = false`: Dynamo's approximate mode);
//! - `active_prefill_tokens`: uncached prompt tokens (prompt − cached at decision) of the
//!   requests this router sent the worker that have not produced their first token;
//! - `decode_blocks`: distinct prompt blocks of the worker's active requests, plus the blocks of
//!   this request beyond the prefix already among them (plus its partial last block);
//! - `excess`: the worker's active prefill blocks above the least loaded worker's;
//! - `host_blocks`, `disk_blocks`: the blocks that continue the worker's device overlap on its
//!   host tier, then those that continue that on its disk tier, as the router's lower-tier
//!   indexes (fed by the workers' `TierStored`/`TierRemoved` events) know them: 1.6.1's
//!   `indexer/lower_tier.rs` (a continuation walk from each worker's device match),
//!   `scheduling/overlap.rs` (`tier_overlap_blocks_from_tiered_matches`) and
//!   `scheduling/selector/reference.rs` (the weights multiply the lower-tier blocks alone: no
//!   credit decay, no `overlap_score_credit`). Both are 0 for workers without tiers.
//!
//! With `router_temperature` > 0 a worker is sampled with probability ∝
//! exp(−(cost − min) / ((max − min) · T)) instead.
//!
//! Cost of a decision: a cost per worker, O(workers) by rule, as in Dynamo's selector. Every
//! worker's prefix of the request among its active requests' blocks comes from one walk of a
//! second index holding those blocks (a block enters when the first of a worker's active requests
//! names it and leaves with the last), as recent Dynamo sources do with a registry of active
//! prompts whose `compute_overlap_depths` gives every worker's depth in one pass; a debug
//! assertion checks each walked depth against a search of the same index (a unit test checks
//! the depths against the open requests' blocks themselves). An earlier measurement found that
//! index 14 % dearer on a whole 8-worker run; re-measured with the holders table beside it
//! (Dec 4 2026, the conversation trace at 4x, Dynamo's router, 8 workers, paired whole-process
//! runs against the build before it, 9 pairs on a busy machine): median CPU ratio 0.86, no cost
//! seen; at 512 workers it takes `decide` from 32 % to 11 % of the run (docs/BENCHMARKS.md).
//! The scan itself reads each worker's counters from contiguous arrays (`Loads`: prefill tokens,
//! decode blocks, requests; the blocks themselves are in the index) and writes every worker's
//! cost in one branch-free pass, then finds the least cost and counts its ties in one more; at 512
//! workers that halved `decide`'s own time (docs/BENCHMARKS.md, "A 1,024-worker run").
//!
//! With `router_temperature` 0 and no lower tiers (the defaults), on more than 64 workers all
//! up, a decision does not cost every worker: it costs the workers holding a prefix of the
//! prompt (listed by both indexes' walks, `KvIndex::holder_overlaps`), then those of the others
//! whose load could still reach the least cost, found in a tree of the loads
//! (`dynamo/by_load.rs`). The least cost, its ties and the draw among them are the scan's (a
//! unit test compares every decision of a 130-worker run under three settings; debug runs
//! compare every decision). On the cluster-scale workload at 512 workers that took
//! the instructions per request from 142,500 to 111,200 (docs/BENCHMARKS.md, "Deciding without
//! costing every worker").
//!
//! Settings, `[router.dynamo]` (Dynamo's defaults): `overlap_score_credit` (1.0),
//! `overlap_score_credit_decay` (0.0), `prefill_load_scale` (1.0),
//! `decode_active_request_weight` (0.0), `router_temperature` (0.0), `use_kv_events` (true),
//! `router_ttl_secs` (120.0) and `router_approximate_cache_policy` (`"ttl"`; or `"lru"`)
//! (approximate mode only: how long a decision is believed, `dynamo/retention.rs`). Every setting is
//! 1.6.1's; `router_max_tree_size` and `router_prune_target_ratio` were dynamo-kv-router
//! 1.0.0's (`approx.rs`, `PruneConfig`: prune the oldest decisions past 2^20 tree nodes down to
//! 0.8 of it), gone by 1.3.0 (`indexer/pruning.rs`: a TTL only), and are refused here with that
//! reason; `router_approximate_cache_policy` came in 1.5.1.
//!
//! `host_cache_hit_weight` (0.75) and `disk_cache_hit_weight` (0.25) are 1.6.1's too
//! (`scheduling/config.rs`).
//!
//! Where dynsim differs: ties use the run's seeded generator (Dynamo's offline replay draws from
//! an unseeded one, so its KV runs vary); the decision's predicted blocks (the prefill load it
//! adds) count the device overlap only, where 1.6.1 counts the weighted lower-tier blocks too.

use std::collections::HashMap;

use crate::engine::ms_to_ns;
use crate::error::Invalid;
use crate::hash::BlockHash;
use crate::hashers::{BlockHashBuilder, IdBuilder};
use crate::ids::{RequestId, WorkerId};
use crate::index::{KvIndex, MatchScratch};
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::lab_rule::LoadView;
use crate::router::loads::LoadBook;
use crate::router::lower_tiers::LowerTiers;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::select::lowest_random_tie;
use crate::router::ttl::TtlIndex;
use crate::router::Decision;

mod by_load;
mod retention;
mod settings;

use by_load::{count_f64, Least, LoadOrder, Prefixed};
use retention::RankLru;
pub use settings::{CachePolicy, Settings};

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "dynamo",
    summary: "Dynamo's KV router: prefill load minus cached blocks, plus decode blocks",
    build,
    settings: crate::router::policy::settings_schema::<Settings>,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    Ok(Box::new(Dynamo::new(setup)?))
}

/// What the router tracks of the workers' active requests: a decision reads only the counters,
/// 24 bytes a worker in one `Vec` (one cache line for a worker costed out of order, as the
/// holders of a prefix are), not a table of each worker's blocks beside them.
///
/// Which prompt blocks each worker's active requests hold (but their own tails,
/// [`Blocks::own_tail`](crate::protocol::kv_event::Blocks::own_tail)) is
/// [`Dynamo::active_index`]: a worker holds a block there while at least one of its active
/// requests names it. The requests past the first that name a block are counted in
/// [`Loads::shared`], so a block one request names costs one probe of that index to add and
/// one to take away, not a probe of a table of counts beside it (most blocks: a trace's
/// prefixes are mostly one session's, named by one request at a time).
#[derive(Clone, Debug, Default)]
struct Loads {
    /// Per worker, the blocks more than one of its active requests name, with how many
    /// requests beyond the first name each.
    shared: Vec<HashMap<BlockHash, u32, BlockHashBuilder>>,
    /// Per worker, its counters.
    counters: Vec<Counters>,
}

/// One worker's counters of its active requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    /// Its active requests' uncached prompt tokens not yet past their first token.
    prefill_tokens: u64,
    /// Its decode blocks before a new request: the blocks it holds in [`Dynamo::active_index`]
    /// plus the blocks of its active requests' own tails (each is distinct, no other request
    /// names it, so a count stands for their names).
    held: usize,
    /// Its active requests.
    requests: u64,
}

impl Loads {
    /// No active requests on `workers` workers.
    fn new(workers: usize) -> Loads {
        Loads {
            shared: vec![HashMap::default(); workers],
            counters: vec![Counters::default(); workers],
        }
    }
}

/// One request this router sent and has not seen finish.
#[derive(Clone, Debug)]
struct Active {
    worker: usize,
    /// Its blocks counted by name (all but its own tail).
    blocks: Vec<BlockHash>,
    own_tail: usize,
    /// Uncached prompt tokens still counted as prefill load (0 once its first token came).
    prefill_tokens: u64,
}

struct Dynamo {
    settings: Settings,
    ttl_ns: u64,
    index: KvIndex,
    ttl: TtlIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
    loads: Loads,
    /// Each worker's distinct prompt blocks of its active requests, as one index, so that a
    /// decision finds every worker's active prefix of the prompt in one walk over its blocks
    /// ([`Loads`] counts the requests past the first that name a block).
    active_index: KvIndex,
    active_scratch: MatchScratch,
    /// Each worker's active prefix of the prompt being decided.
    active_depths: Vec<usize>,
    active: HashMap<RequestId, Active, IdBuilder>,
    /// Each worker's cost of the request being decided, by worker (a down worker's is never
    /// read), when every worker is costed.
    costs: Vec<f64>,
    /// The workers by their load, when the least cost is found without costing every worker
    /// (`router_temperature` 0 and more than [`SCAN_UP_TO_WORKERS`]; not while a worker has
    /// lower tiers or is down).
    by_load: Option<LoadOrder>,
    /// The workers holding a prefix of the prompt being decided, in the router's index and
    /// among their active blocks, then both, each worker once.
    holders: Vec<(usize, usize)>,
    active_holders: Vec<(usize, usize)>,
    prefixed: Prefixed,
    least: Least,
    /// (worker, cost) of the up workers, made only when the choice is sampled.
    pairs: Vec<(usize, f64)>,
    block_size: usize,
    /// Approximate mode under `lru`, each worker's modelled cache (empty: the TTL applies).
    lru: Vec<RankLru>,
    /// The workers' host and disk tiers as their events tell (`None` until a tier event
    /// arrives: workers without tiers cost nothing).
    lower: Option<Box<LowerTiers>>,
}

impl Dynamo {
    /// Builds it, checking its settings.
    fn new(setup: &PolicySetup<'_>) -> Result<Dynamo, Invalid> {
        for (old, since) in [
            ("router_max_tree_size", "1.0.0"),
            ("router_prune_target_ratio", "1.0.0"),
        ] {
            if let Some(v) = setup.settings.and_then(|t| t.get(old)) {
                return Err(Invalid {
                    key: format!("router.dynamo.{old}"),
                    value: v.to_string(),
                    problem: format!(
                        "is dynamo-kv-router {since}'s setting, gone by 1.3.0; 1.6.1's \
                         approximate mode forgets by router_ttl_secs or, with \
                         router_approximate_cache_policy = \"lru\", by each worker's capacity"
                    ),
                });
            }
        }
        let s: Settings = setup.settings()?;
        for (key, x) in [
            ("overlap_score_credit", s.overlap_score_credit),
            ("overlap_score_credit_decay", s.overlap_score_credit_decay),
            ("prefill_load_scale", s.prefill_load_scale),
            (
                "decode_active_request_weight",
                s.decode_active_request_weight,
            ),
            ("router_temperature", s.router_temperature),
            ("host_cache_hit_weight", s.host_cache_hit_weight),
            ("disk_cache_hit_weight", s.disk_cache_hit_weight),
        ] {
            setup.check_number(key, x, 0.0, f64::INFINITY)?;
        }
        setup.check_number("router_ttl_secs", s.router_ttl_secs, 0.0, 1e9)?;
        let lru = s.router_approximate_cache_policy == CachePolicy::Lru;
        if lru && s.use_kv_events {
            return Err(Invalid {
                key: "router.dynamo.router_approximate_cache_policy".into(),
                value: "\"lru\"".into(),
                problem: "needs use_kv_events = false (Dynamo 1.6.1 refuses it too: the events \
                          router's side indexer is TTL-only)"
                    .into(),
            });
        }
        // A worker of unknown capacity falls back to the TTL (upstream's rank without one).
        let lru = match setup.kv_capacity_blocks {
            Some(cap) if lru => (0..setup.workers).map(|_| RankLru::new(cap)).collect(),
            _ => Vec::new(),
        };
        Ok(Dynamo {
            settings: s,
            ttl_ns: ms_to_ns(s.router_ttl_secs * 1e3),
            index: KvIndex::new(setup.workers),
            ttl: TtlIndex::default(),
            scratch: MatchScratch::default(),
            overlaps: Vec::new(),
            loads: Loads::new(setup.workers),
            active_index: KvIndex::new(setup.workers),
            active_scratch: MatchScratch::default(),
            active_depths: Vec::new(),
            active: HashMap::default(),
            costs: Vec::new(),
            by_load: (s.router_temperature == 0.0 && setup.workers > SCAN_UP_TO_WORKERS)
                .then(|| load_order(setup.workers, &s, setup.block_size)),
            holders: Vec::new(),
            active_holders: Vec::new(),
            prefixed: Prefixed::default(),
            least: Least::default(),
            pairs: Vec::new(),
            block_size: setup.block_size.max(1),
            lru,
            lower: None,
        })
    }

    /// Counts `req` on the decision's worker (Dynamo's active sequences): its blocks, and its
    /// prompt tokens beyond the blocks believed cached as prefill load until its first token.
    fn track(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        let w = d.worker.index();
        let cached = d.predicted_blocks as u64 * self.block_size as u64;
        let prefill_tokens = u64::from(req.input_tokens).saturating_sub(cached);
        let loads = &mut self.loads;
        let named = req.blocks.named();
        let shared = &mut loads.shared[w];
        for &b in named {
            // A block several active requests name is counted in the small table alone.
            if let Some(n) = shared.get_mut(&b) {
                *n += 1;
                continue;
            }
            // The index counts the (block, worker) pairs it holds: one more means this is the
            // worker's first active request naming the block.
            let before = self.active_index.entries();
            self.active_index.store(w, std::slice::from_ref(&b));
            if self.active_index.entries() > before {
                loads.counters[w].held += 1;
            } else {
                shared.insert(b, 1);
            }
        }
        let c = &mut loads.counters[w];
        c.held += req.blocks.own_tail();
        c.prefill_tokens += prefill_tokens;
        c.requests += 1;
        self.reorder(w);
        self.active.insert(
            req.id,
            Active {
                worker: w,
                blocks: named.to_vec(),
                own_tail: req.blocks.own_tail(),
                prefill_tokens,
            },
        );
    }

    /// Keeps `worker`'s place in [`Dynamo::by_load`] after its counters changed.
    fn reorder(&mut self, worker: usize) {
        if let Some(order) = &mut self.by_load {
            let c = self.loads.counters[worker];
            order.set(worker, c.prefill_tokens, c.held, c.requests);
        }
    }

    /// What the cost formula takes from `req` and the settings.
    fn terms(&self, req: &RouteRequest<'_>, book: &LoadBook) -> Terms {
        let s = self.settings;
        Terms {
            settings: s,
            bs: self.block_size as f64,
            request_blocks: u64::from(req.input_tokens).div_ceil(self.block_size as u64),
            input_tokens: u64::from(req.input_tokens),
            prompt_blocks: req.blocks.len(),
            // The least prefill load only scales the credit's decay.
            min_prefill: if s.overlap_score_credit_decay > 0.0 {
                book.up_workers()
                    .map(|w| self.loads.counters[w].prefill_tokens)
                    .min()
                    .unwrap_or(0)
            } else {
                0
            },
        }
    }

    /// Every worker's cost of `req` into [`Dynamo::costs`] (a down worker's is a number too and
    /// never chosen), with every worker's overlap and active depth.
    fn scan(&mut self, req: &RouteRequest<'_>, book: &LoadBook, terms: &Terms) {
        self.index
            .overlaps(&req.blocks, &mut self.scratch, &mut self.overlaps);
        self.active_index.overlaps(
            &req.blocks,
            &mut self.active_scratch,
            &mut self.active_depths,
        );
        let s = self.settings;
        let loads = &self.loads;
        let mut costs = std::mem::take(&mut self.costs);
        costs.clear();
        costs.resize(loads.counters.len(), 0.0);
        match &self.lower {
            // One branch-free pass over the counters' arrays.
            None => {
                let prefixes = self.overlaps.iter().zip(&self.active_depths);
                for ((cost, c), (&overlap, &depth)) in
                    costs.iter_mut().zip(&loads.counters).zip(prefixes)
                {
                    *cost = terms.cost(c.prefill_tokens, overlap, None, c.held, depth, c.requests);
                }
            }
            Some(lower) => {
                for w in book.up_workers() {
                    let overlap = self.overlaps[w];
                    let [host, disk] = lower.continuation(w, &req.blocks[overlap..]);
                    let tiers =
                        s.host_cache_hit_weight * host as f64 + s.disk_cache_hit_weight * disk as f64;
                    let c = loads.counters[w];
                    costs[w] = terms.cost(
                        c.prefill_tokens,
                        overlap,
                        Some(tiers),
                        c.held,
                        self.active_depths[w],
                        c.requests,
                    );
                }
            }
        }
        self.costs = costs;
        if cfg!(debug_assertions) {
            for w in book.up_workers() {
                self.check_active_depth(w, &req.blocks, self.active_depths[w]);
            }
        }
    }

    /// The least-cost worker (a seeded draw among equal costs) and its overlap, costing the
    /// workers that hold a prefix of the prompt (in the index or among their active blocks) and
    /// those of the others whose load could still reach the least (`by_load.rs`): the choice
    /// of [`Dynamo::scan`] and [`lowest_random_tie`], which debug runs check on every decision.
    fn least_by_load(
        &mut self,
        req: &RouteRequest<'_>,
        book: &LoadBook,
        terms: &Terms,
        rng: &mut SimRng,
    ) -> Option<(usize, usize)> {
        self.index
            .holder_overlaps(&req.blocks, &mut self.scratch, &mut self.holders);
        self.active_index.holder_overlaps(
            &req.blocks,
            &mut self.active_scratch,
            &mut self.active_holders,
        );
        let prefixed = &mut self.prefixed;
        prefixed.merge(&mut self.holders, &mut self.active_holders);
        let loads = &self.loads;
        let least = &mut self.least;
        least.clear();
        // `decide` comes here only when every worker is up; then no worker's up bit is read.
        let all_up = book.all_up();
        let up = |w: usize| all_up || book.up(w);
        for &(w, overlap, depth) in &prefixed.entries {
            if up(w) {
                let c = loads.counters[w];
                let cost = terms.cost(c.prefill_tokens, overlap, None, c.held, depth, c.requests);
                least.offer(w, cost);
            }
        }
        // A worker without a prefix costs its load plus this.
        let prompt_part = terms.cost(0, 0, None, 0, 0, 0);
        self.by_load
            .as_ref()?
            .offer_within(least, prompt_part, |w| {
                (up(w) && prefixed.get(w).is_none()).then(|| {
                    let c = loads.counters[w];
                    terms.cost(c.prefill_tokens, 0, None, c.held, 0, c.requests)
                })
            });
        least.workers.sort_unstable();
        tracing::debug!(cost = least.cost, workers = ?least.workers, costed = least.offers, "dynamo decision");
        // The scan's draw among the ties, over the ties alone.
        let worker = lowest_random_tie(least.workers.iter().map(|&w| (w, least.cost)), rng)?;
        let overlap = prefixed.get(worker).map_or(0, |p| p.1);
        if cfg!(debug_assertions) {
            self.check_least(req, book, terms, worker, overlap);
        }
        Some((worker, overlap))
    }

    /// Checks (debug runs) that [`Dynamo::least_by_load`]'s least cost and ties are the full
    /// scan's, and `overlap` the `worker`'s overlap.
    fn check_least(
        &mut self,
        req: &RouteRequest<'_>,
        book: &LoadBook,
        terms: &Terms,
        worker: usize,
        overlap: usize,
    ) {
        self.scan(req, book, terms);
        let mut least = Least::default();
        least.clear();
        for w in book.up_workers() {
            least.offer(w, self.costs[w]);
        }
        assert_eq!(least.cost.to_bits(), self.least.cost.to_bits(), "the least cost");
        assert_eq!(least.workers, self.least.workers, "the workers at the least cost");
        assert_eq!(self.overlaps[worker], overlap, "the chosen worker's overlap");
    }

    /// Checks (debug runs) that `worker`'s depth from the walk of the index of active blocks is
    /// its prefix of `blocks` found by searching the same index, and that every block its small
    /// table counts is one the index says it holds.
    fn check_active_depth(&self, worker: usize, blocks: &[BlockHash], depth: usize) {
        let holds = |b: &BlockHash| self.active_index.holds(worker, *b);
        debug_assert_eq!(
            depth,
            held_prefix(blocks, holds),
            "the walk of active blocks agrees with a search of the worker's"
        );
        debug_assert_eq!(
            depth,
            blocks.iter().take_while(|b| holds(b)).count(),
            "block names are chained"
        );
        debug_assert!(
            self.loads.shared[worker]
                .keys()
                .all(|b| self.active_index.holds(worker, *b)),
            "a block named twice is named once"
        );
    }
}

/// Up to this many workers a decision costs every worker even when it need not: the order by
/// load costs more to keep than the scan it saves (the conversation replay on 8 workers at 4x,
/// Dynamo's router: 0.9 % more instructions with the order; on the cluster-scale workload at 64
/// workers, even).
const SCAN_UP_TO_WORKERS: usize = 64;

/// The workers by load for these settings (all idle).
fn load_order(workers: usize, s: &Settings, block_size: usize) -> LoadOrder {
    LoadOrder::new(
        workers,
        s.prefill_load_scale,
        s.decode_active_request_weight,
        block_size.max(1) as f64,
    )
}

/// What a decision's cost formula takes from the request and the settings, the same for every
/// worker: [`Terms::cost`] is the formula of the module documentation for one worker.
struct Terms {
    settings: Settings,
    /// The block size.
    bs: f64,
    /// The prompt's blocks, its partial last block included.
    request_blocks: u64,
    input_tokens: u64,
    /// The prompt's named blocks.
    prompt_blocks: usize,
    /// The least prefill load among the up workers (0 without credit decay, which alone reads
    /// it).
    min_prefill: u64,
}

impl Terms {
    /// The cost of a worker with `prefill_tokens` of prefill load, `overlap` blocks of the prompt
    /// cached, `tiers` credit from its lower tiers (`None` without tiers), `held`
    /// ([`Loads::held`]) decode blocks, `depth` blocks of the prompt among them, and `requests`
    /// active requests.
    #[inline(always)]
    fn cost(
        &self,
        prefill_tokens: u64,
        overlap: usize,
        tiers: Option<f64>,
        held: usize,
        depth: usize,
        requests: u64,
    ) -> f64 {
        let s = &self.settings;
        let decay = if s.overlap_score_credit_decay > 0.0 {
            // Saturating: a down worker's load may be below the least of the up workers'.
            let excess = count_f64(prefill_tokens.saturating_sub(self.min_prefill)) / self.bs;
            1.0 / (1.0 + s.overlap_score_credit_decay * excess / self.request_blocks.max(1) as f64)
        } else {
            1.0
        };
        let mut credit = s.overlap_score_credit * decay * count_f64(overlap as u64);
        if let Some(tiers) = tiers {
            credit += tiers;
        }
        let prefill = count_f64(prefill_tokens + self.input_tokens) / self.bs;
        let untracked = (self.request_blocks as usize).saturating_sub(self.prompt_blocks);
        let decode = count_f64((held + self.prompt_blocks - depth + untracked) as u64);
        s.prefill_load_scale * (prefill - credit).max(0.0)
            + decode
            + s.decode_active_request_weight * count_f64(requests)
    }
}

impl RoutingPolicy for Dynamo {
    fn decide(
        &mut self,
        req: &RouteRequest<'_>,
        book: &LoadBook,
        rng: &mut SimRng,
    ) -> Option<Decision> {
        if !book.any_up() {
            return None;
        }
        if !self.settings.use_kv_events && self.lru.is_empty() {
            self.ttl.expire(req.now, &mut self.index);
        }
        let terms = self.terms(req, book);
        // While a worker is down (a fault, or an empty slot of a scaling pool) the scan: the
        // order by load would step over every down worker with a load below the least.
        let (worker, overlap) = if self.by_load.is_some() && self.lower.is_none() && book.all_up()
        {
            self.least_by_load(req, book, &terms, rng)?
        } else {
            self.scan(req, book, &terms);
            let costs = &self.costs;
            let worker = if self.settings.router_temperature > 0.0 {
                let mut pairs = std::mem::take(&mut self.pairs);
                pairs.clear();
                pairs.extend(book.up_workers().map(|w| (w, costs[w])));
                let worker = sample(&pairs, self.settings.router_temperature, rng);
                self.pairs = pairs;
                worker
            } else if book.all_up() {
                lowest_random_tie(costs.iter().copied().enumerate(), rng)
            } else {
                lowest_random_tie(book.up_workers().map(|w| (w, costs[w])), rng)
            };
            tracing::debug!(?costs, worker, "dynamo decision");
            let worker = worker?;
            (worker, self.overlaps[worker])
        };
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: overlap,
        })
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        self.track(req, d);
        let w = d.worker.index();
        if !self.settings.use_kv_events {
            self.index.store(w, &req.blocks);
            match self.lru.get_mut(w) {
                Some(lru) => {
                    let request_blocks =
                        u64::from(req.input_tokens).div_ceil(self.block_size as u64) as usize;
                    let private = request_blocks.saturating_sub(req.blocks.len());
                    let gone = lru.acquire(req.id, &req.blocks, private);
                    self.index.remove(w, &gone);
                }
                None => self.ttl.record(w, &req.blocks, req.now + self.ttl_ns),
            }
        }
    }

    fn on_peer_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        self.track(req, d);
    }

    fn on_prefill_done(&mut self, _worker: WorkerId, request: RequestId) {
        if let Some(a) = self.active.get_mut(&request) {
            self.loads.counters[a.worker].prefill_tokens -= a.prefill_tokens;
            a.prefill_tokens = 0;
            let w = a.worker;
            self.reorder(w);
        }
    }

    fn on_finished(&mut self, _worker: WorkerId, request: RequestId) {
        let Some(a) = self.active.remove(&request) else {
            return;
        };
        let w = a.worker;
        if let Some(lru) = self.lru.get_mut(w) {
            let gone = lru.release(request);
            self.index.remove(w, &gone);
        }
        let loads = &mut self.loads;
        let c = &mut loads.counters[w];
        c.prefill_tokens -= a.prefill_tokens;
        c.requests -= 1;
        c.held -= a.own_tail;
        let shared = &mut loads.shared[w];
        for b in &a.blocks {
            match shared.get_mut(b) {
                // Another active request of the worker names it too.
                Some(n) => {
                    *n -= 1;
                    if *n == 0 {
                        shared.remove(b);
                    }
                }
                None => {
                    loads.counters[w].held -= 1;
                    self.active_index.remove(w, std::slice::from_ref(b));
                }
            }
        }
        self.reorder(w);
    }

    fn on_event(&mut self, event: &KvEvent) {
        if !LowerTiers::apply(&mut self.lower, self.loads.counters.len(), event) {
            self.index.apply(event);
        }
    }

    fn learns_from_events(&self) -> bool {
        self.settings.use_kv_events
    }

    fn reads_load_trees(&self) -> bool {
        // Its order by load is its own (`by_load.rs`); the book's counts of up workers are all
        // it reads.
        false
    }
}

/// How many of `blocks`, from the front, are `held`, for a `held` that is true for a prefix of
/// them and false after it: an exponential search (blocks 0, 1, 3, 7, ... until one is not held)
/// then a binary search in the last step, O(log prefix) lookups instead of one per block.
///
/// A worker's active blocks are such a set: block names are chained, so a request holding block
/// *i* of this prompt holds every block before it.
fn held_prefix(blocks: &[BlockHash], held: impl Fn(&BlockHash) -> bool) -> usize {
    let mut lo = 0;
    let mut probe = 0;
    while probe < blocks.len() && held(&blocks[probe]) {
        lo = probe + 1;
        probe = 2 * probe + 1;
    }
    let hi = probe.min(blocks.len());
    lo + blocks[lo..hi].partition_point(held)
}

/// The softmax weight of a cost among `costs`, exp(−(cost − min) / ((max − min) · temperature))
/// (unnormalised; the span is 1 when every cost is equal).
fn softmax_weight(costs: &[(usize, f64)], temperature: f64) -> impl Fn(f64) -> f64 {
    let min = costs.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
    let max = costs.iter().map(|c| c.1).fold(f64::NEG_INFINITY, f64::max);
    let span = if max > min { max - min } else { 1.0 };
    move |cost| (-(cost - min) / (span * temperature)).exp()
}

/// Samples with probability ∝ exp(−(cost − min) / ((max − min) · temperature)); `None` without
/// costs.
fn sample(costs: &[(usize, f64)], temperature: f64, rng: &mut SimRng) -> Option<usize> {
    let weight = softmax_weight(costs, temperature);
    let total: f64 = costs.iter().map(|c| weight(c.1)).sum();
    let mut x = rng.unit() * total;
    for c in costs {
        let w = weight(c.1);
        if x < w {
            return Some(c.0);
        }
        x -= w;
    }
    costs.last().map(|c| c.0)
}

#[cfg(test)]
mod tests;
