//! `llm-d`: the llm-d inference scheduler's weighted scorers (llm-d/llm-d-inference-scheduler at
//! 520af478, now `llm-d-router`: `pkg/epp/scheduling/scheduler_profile.go` combines the
//! scorers, `pkg/epp/framework/plugins/scheduling/scorer/` holds them, and the precise-prefix
//! sample configuration `deploy/config/epp-precise-prefix-cache-config.yaml` gives the weights).
//!
//! Each worker that is up scores Σ weight x score, every score in [0, 1], and the highest wins,
//! uniformly random (seeded) among equal scores (the max-score picker shuffles, then sorts):
//!
//! - precise prefix (fed by KV events): the blocks each worker holds from the front, min-max
//!   normalised over the workers that hold at least the first one (`(o − min) / (max − min)`,
//!   1 for all of them when they are equal, 0 for a worker that holds none), as upstream's
//!   `indexedScoresToNormalizedScoredPods` does with the kv-cache indexer's longest-prefix scores
//!   (`pkg/epp/framework/plugins/scheduling/scorer/precise_prefix_cache/utils.go` at 8c16bcc5;
//!   the scores map holds only pods that match the first block:
//!   llm-d-kv-cache-manager `pkg/kvcache/kvblock_scorer.go`, `LongestPrefixScorer`);
//! - approximate prefix (from the router's own routing history, an LRU of
//!   `lru_capacity_per_server` blocks per worker): blocks matched from the front / prompt blocks;
//! - queue: (max q − q) / (max q − min q) over the workers that are up, q = waiting requests
//!   (1 for all when they are equal);
//! - KV utilisation: 1 − the worker's KV usage.
//!
//! Queue and KV usage are the workers' signals as the router last refreshed them
//! (`router.signal_refresh_ms`; llm-d scrapes every 50 ms). With `speculative_ttl_ms` > 0 the
//! chosen worker is also believed to hold the prompt's blocks for that long (llm-d's speculative
//! indexing, 2 s when enabled), bridging the time until its KV events arrive.
//!
//! Settings, `[router.llm-d]` (the precise-prefix sample configuration's weights):
//! `precise_prefix_weight` (2.0), `kv_utilization_weight` (1.0), `queue_weight` (1.0),
//! `approx_prefix_weight` (0.0; llm-d's configuration without a file uses 3 with queue 2 and
//! KV utilisation 2), `lru_capacity_per_server` (31,250), `speculative_ttl_ms` (0: off).
//!
//! Lower KV tiers (`[kv.host]`, `[kv.disk]`): the precise scorer counts a block a worker holds
//! on any medium as held, as llm-d-kv-cache-manager does (`pkg/kvcache/kvevents/pool.go` at
//! 0e9fb472 indexes a `BlockStored` per pod and `Medium`; `pkg/kvcache/kvblock/in_memory.go` at
//! 00bb4ca4, `Lookup`, returns the pods of every medium, and `LongestPrefixScorer`,
//! `pkg/kvcache/kvblock_scorer.go` at 760bfeab, weighs them alike).
//!
//! Where dynsim differs: blocks are the engine's (llm-d's approximate scorer hashes 64-byte
//! chunks of the request body, its precise scorer the engine's blocks, as here).

use serde::Deserialize;

use crate::engine::ms_to_ns;
use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::index::{KvIndex, MatchScratch};
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::history::RoutedHistory;
use crate::router::loads::LoadBook;
use crate::router::lower_tiers::LowerTiers;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::select::{count_equal, nth_equal};
use crate::router::ttl::TtlIndex;
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "llm-d",
    summary: "llm-d's weighted scorers: prefix cache, queue, KV utilisation",
    build,
    settings: crate::router::policy::settings_schema::<Settings>,
};

/// `[router.llm-d]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Weight of the KV-events prefix scorer (2.0).
    pub precise_prefix_weight: f64,
    /// Weight of the routing-history prefix scorer (0.0).
    pub approx_prefix_weight: f64,
    /// Weight of the KV-utilisation scorer (1.0).
    pub kv_utilization_weight: f64,
    /// Weight of the queue scorer (1.0).
    pub queue_weight: f64,
    /// Blocks the routing history keeps per worker (31,250).
    pub lru_capacity_per_server: usize,
    /// How long a decision counts as the chosen worker holding the prompt, ms (0: off).
    pub speculative_ttl_ms: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            precise_prefix_weight: 2.0,
            approx_prefix_weight: 0.0,
            kv_utilization_weight: 1.0,
            queue_weight: 1.0,
            lru_capacity_per_server: 31_250,
            speculative_ttl_ms: 0.0,
        }
    }
}

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: Settings = setup.settings()?;
    for (key, x) in [
        ("precise_prefix_weight", s.precise_prefix_weight),
        ("approx_prefix_weight", s.approx_prefix_weight),
        ("kv_utilization_weight", s.kv_utilization_weight),
        ("queue_weight", s.queue_weight),
    ] {
        setup.check_number(key, x, 0.0, f64::INFINITY)?;
    }
    setup.check_number("speculative_ttl_ms", s.speculative_ttl_ms, 0.0, 1e12)?;
    Ok(Box::new(LlmD {
        settings: s,
        precise: KvIndex::new(setup.workers),
        speculative: KvIndex::new(setup.workers),
        ttl: TtlIndex::default(),
        ttl_ns: ms_to_ns(s.speculative_ttl_ms),
        history: RoutedHistory::new(setup.workers),
        scratch: MatchScratch::default(),
        precise_overlaps: Vec::new(),
        speculative_overlaps: Vec::new(),
        scores: Vec::new(),
        lower: None,
    }))
}

struct LlmD {
    settings: Settings,
    precise: KvIndex,
    speculative: KvIndex,
    ttl: TtlIndex,
    ttl_ns: u64,
    history: RoutedHistory,
    scratch: MatchScratch,
    precise_overlaps: Vec<usize>,
    speculative_overlaps: Vec<usize>,
    scores: Vec<(usize, f64)>,
    /// The workers' host and disk tiers (`None` until a tier event arrives).
    lower: Option<Box<LowerTiers>>,
}

impl RoutingPolicy for LlmD {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Option<Decision> {
        let s = self.settings;
        let total = req.blocks.len().max(1) as f64;
        if self.ttl_ns > 0 {
            self.ttl.expire(req.now, &mut self.speculative);
        }
        self.precise
            .overlaps(&req.blocks, &mut self.scratch, &mut self.precise_overlaps);
        if let Some(lower) = &self.lower {
            // A block on any medium counts as held (upstream indexes one entry per pod and
            // medium, and its lookup returns the pods of every medium).
            for (w, o) in self.precise_overlaps.iter_mut().enumerate() {
                *o += req.blocks[*o..]
                    .iter()
                    .take_while(|b| lower.holds(w, **b) || self.precise.holds(w, **b))
                    .count();
            }
        }
        if self.ttl_ns > 0 {
            self.speculative.overlaps(
                &req.blocks,
                &mut self.scratch,
                &mut self.speculative_overlaps,
            );
            for (p, sp) in self
                .precise_overlaps
                .iter_mut()
                .zip(&self.speculative_overlaps)
            {
                *p = (*p).max(*sp);
            }
        }
        let approx: &[usize] = if s.approx_prefix_weight > 0.0 {
            self.history.overlaps(&req.blocks)
        } else {
            &[]
        };
        // Upstream's min and max run over the indexer's scores: every worker matching the
        // prompt's first block, up or not.
        let (pmin, pmax) = self
            .precise_overlaps
            .iter()
            .filter(|&&o| o > 0)
            .fold((usize::MAX, 0), |(mn, mx), &o| (mn.min(o), mx.max(o)));
        let precise_score = |o: usize| match o {
            0 => 0.0,
            _ if pmax == pmin => 1.0,
            _ => (o - pmin) as f64 / (pmax - pmin) as f64,
        };
        let queue = |w: usize| u64::from(loads.signals(w).waiting);
        let (qmax, qmin) = loads
            .up_workers()
            .map(queue)
            .fold((0, u64::MAX), |(mx, mn), q| (mx.max(q), mn.min(q)));
        self.scores.clear();
        for w in loads.up_workers() {
            let queue_score = if qmax == qmin {
                1.0
            } else {
                (qmax - queue(w)) as f64 / (qmax - qmin) as f64
            };
            let kv_score = 1.0 - loads.signals(w).kv_usage.clamp(0.0, 1.0);
            let mut score = s.precise_prefix_weight * precise_score(self.precise_overlaps[w])
                + s.queue_weight * queue_score
                + s.kv_utilization_weight * kv_score;
            if let Some(a) = approx.get(w) {
                score += s.approx_prefix_weight * *a as f64 / total;
            }
            self.scores.push((w, score));
        }
        let best = self
            .scores
            .iter()
            .map(|c| c.1)
            .fold(f64::NEG_INFINITY, f64::max);
        // One draw among the best, even when one is best (upstream picks from the list).
        let tied = count_equal(&self.scores, best);
        if tied == 0 {
            return None;
        }
        let worker = nth_equal(self.scores.iter().copied(), best, rng.below(tied))?;
        tracing::debug!(scores = ?self.scores, worker, "llm-d decision");
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: self.precise_overlaps[worker],
        })
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        let w = d.worker.index();
        if self.settings.approx_prefix_weight > 0.0 {
            self.history.touch(w, &req.blocks);
            self.history
                .shrink(w, self.settings.lru_capacity_per_server);
        }
        if self.ttl_ns > 0 {
            self.speculative.store(w, &req.blocks);
            self.ttl.record(w, &req.blocks, req.now + self.ttl_ns);
        }
    }

    fn on_event(&mut self, event: &KvEvent) {
        if !LowerTiers::apply(&mut self.lower, self.precise.n_workers(), event) {
            self.precise.apply(event);
        }
    }

    fn learns_from_events(&self) -> bool {
        self.settings.precise_prefix_weight > 0.0
    }

    fn reads_signals(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::ids::RequestId;
    use crate::rng::RngKind;
    use crate::router::loads::LoadKind;
    use crate::protocol::signals::WorkerSignals;

    #[test]
    fn a_decision_computed_by_hand_from_the_published_rule() {
        // Three workers, a 4-block prompt. Worker 0 holds 3 of its blocks (events), worker 1
        // holds 1. Waiting queues 4, 0, 2; KV usage 0.5, 0.9, 0.0. Precise prefix, min-max
        // normalised over the holders (min 1, max 3): 1, 0, 0.
        //   worker 0: 2 x 1 + 1 x (4−4)/(4−0) + 1 x (1 − 0.5) = 2 + 0 + 0.5 = 2.5
        //   worker 1: 2 x 0 + 1 x 1 + 1 x 0.1 = 1.1
        //   worker 2: 0 + 1 x 2/4 + 1 x 1 = 1.5
        let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let mut p = build(&PolicySetup {
            name: "llm-d",
            workers: 3,
            block_size: 4,
            kv_capacity_blocks: None,
            settings: None,
        })
        .unwrap();
        p.on_event(&KvEvent::Stored {
            worker: WorkerId(0),
            parent: None,
            blocks: blocks[..3].to_vec().into(),
        });
        p.on_event(&KvEvent::Stored {
            worker: WorkerId(1),
            parent: None,
            blocks: blocks[..1].to_vec().into(),
        });
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        let signal = |waiting, kv_usage| WorkerSignals {
            waiting,
            kv_usage,
            ..WorkerSignals::default()
        };
        loads.refresh_signals(&[signal(4, 0.5), signal(0, 0.9), signal(2, 0.0)]);
        let req = RouteRequest {
            id: RequestId(0),
            blocks: (&blocks).into(),
            input_tokens: 16,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let d = p.decide(&req, &loads, &mut rng).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(0), 3));
        // Worker 0's queue grows to 12 and its KV usage to 0.95:
        //   worker 0: 2 + 0 + 0.05 = 2.05; worker 1: 0 + 1 + 0.1 = 1.1;
        //   worker 2: 0 + (12 − 2)/12 + 1 = 1.83: the longest holder still wins (divided by
        //   the prompt's 4 blocks, its 1.5 + 0.05 would lose to worker 2's 1.83).
        loads.refresh_signals(&[signal(12, 0.95), signal(0, 0.9), signal(2, 0.0)]);
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(0));
        // Worker 1 loses its block and worker 0 all but its first: worker 0, the only holder,
        // scores 1 for 1 block of 4 (upstream's equal-scores rule): 2 + 0 + 0.05 against 1.83.
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(1),
            blocks: blocks[..1].to_vec(),
        });
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(0),
            blocks: blocks[1..3].to_vec(),
        });
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(0));
        // With no holder at all, the prefix scores 0 everywhere and load decides.
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(0),
            blocks: blocks[..1].to_vec(),
        });
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(2));
    }
}
