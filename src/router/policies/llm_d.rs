//! `llm-d`: the llm-d inference scheduler's weighted scorers (llm-d/llm-d-inference-scheduler at
//! 520af478, now `llm-d-router`: `pkg/epp/scheduling/scheduler_profile.go` combines the
//! scorers, `pkg/epp/framework/plugins/scheduling/scorer/` holds them, and the precise-prefix
//! sample configuration `deploy/config/epp-precise-prefix-cache-config.yaml` gives the weights).
//!
//! Each worker that is up scores Σ weight x score, every score in [0, 1], and the highest wins,
//! uniformly random (seeded) among equal scores (the max-score picker shuffles, then sorts):
//!
//! - precise prefix (fed by KV events): the kv-cache indexer's longest-prefix score (the blocks
//!   a worker holds from the front, each weighted by its best medium) over the prompt's full
//!   blocks, at most 1 (0 for a worker without the first block), as upstream's `Score` does
//!   with `absoluteScoredPods`
//!   (`pkg/epp/framework/plugins/scheduling/scorer/preciseprefixcache/precise_prefix_cache.go`
//!   and `utils.go` at 520af478, since PR #1107; before it, at 8c16bcc5, the scores were
//!   min-max normalised over the holders, which dynsim followed until Dec 5 2026);
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
//! Lower KV tiers (`[kv.host]`, `[kv.disk]`): a block a worker holds on any medium continues
//! its prefix, weighted by the best medium it is on: the device 1.0, host memory 0.8 (vLLM's
//! `CPU` medium, lowercased), disk 1.0 (a medium the default weights do not name), as
//! llm-d-kv-cache v0.8.0 (the version 520af478's `go.mod` pins) does: `pkg/kvcache/backend.go`,
//! `DefaultKVCacheBackendConfig` (`gpu` 1.0, `cpu` 0.8), `pkg/kvcache/kvblock_scorer.go`,
//! `LongestPrefixScorer::Score` and `fillMaxWeights` (1.0 for an unnamed medium), and
//! `pkg/kvevents/pool.go` (the event's medium, lowercased). Before Dec 5 2026 dynsim weighed
//! every medium alike.
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
        precise_weights: Vec::new(),
        speculative_overlaps: Vec::new(),
        scores: Vec::new(),
        lower: None,
    }))
}

/// A block's weight on the device (`gpu`), in host memory (`cpu`) and on disk (a medium the
/// default weights do not name): llm-d-kv-cache v0.8.0's `DefaultKVCacheBackendConfig` and
/// `fillMaxWeights`.
const DEVICE_WEIGHT: f64 = 1.0;
const HOST_WEIGHT: f64 = 0.8;
const DISK_WEIGHT: f64 = 1.0;

struct LlmD {
    settings: Settings,
    precise: KvIndex,
    speculative: KvIndex,
    ttl: TtlIndex,
    ttl_ns: u64,
    history: RoutedHistory,
    scratch: MatchScratch,
    precise_overlaps: Vec<usize>,
    /// Each worker's longest-prefix score: its prefix's blocks weighted by medium.
    precise_weights: Vec<f64>,
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
        if self.ttl_ns > 0 {
            // Upstream writes speculative entries into the same index as the events: a block
            // either names continues the prefix, as one on the device.
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
        // The indexer's score: each block of the prefix weighs its best medium's weight; the
        // blocks matched so far are on the device (or speculative), 1.0 each.
        self.precise_weights.clear();
        self.precise_weights
            .extend(self.precise_overlaps.iter().map(|&o| o as f64));
        if self.lower.is_some() || self.ttl_ns > 0 {
            // A block on any medium continues the prefix (upstream indexes one entry per pod
            // and medium, and its lookup returns the pods of every medium).
            for (w, o) in self.precise_overlaps.iter_mut().enumerate() {
                for b in &req.blocks[*o..] {
                    let on_device = self.precise.holds(w, *b)
                        || (self.ttl_ns > 0 && self.speculative.holds(w, *b));
                    let weight = if on_device {
                        DEVICE_WEIGHT
                    } else {
                        match self.lower.as_ref().map(|l| l.held_on(w, *b)) {
                            Some([_, true]) => DISK_WEIGHT,
                            Some([true, false]) => HOST_WEIGHT,
                            _ => break,
                        }
                    };
                    *o += 1;
                    self.precise_weights[w] += weight;
                }
            }
        }
        let approx: &[usize] = if s.approx_prefix_weight > 0.0 {
            self.history.overlaps(&req.blocks)
        } else {
            &[]
        };
        // Upstream's `absoluteScoredPods`: the score over the prompt's full blocks, at most 1
        // (0 without a full block: no block is held then).
        let precise_score = |weight: f64| (weight / total).min(1.0);
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
            let mut score = s.precise_prefix_weight * precise_score(self.precise_weights[w])
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
        // holds 1. Waiting queues 4, 0, 2; KV usage 0.5, 0.9, 0.0. Precise prefix, the held
        // blocks over the prompt's 4: 0.75, 0.25, 0.
        //   worker 0: 2 x 0.75 + 1 x (4−4)/(4−0) + 1 x (1 − 0.5) = 1.5 + 0 + 0.5 = 2.0
        //   worker 1: 2 x 0.25 + 1 x 1 + 1 x 0.1 = 1.6
        //   worker 2: 0 + 1 x 2/4 + 1 x 1 = 1.5
        let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let mut p = llm_d(3);
        p.on_event(&stored(0, &blocks[..3]));
        p.on_event(&stored(1, &blocks[..1]));
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        loads.refresh_signals(&[signal(4, 0.5), signal(0, 0.9), signal(2, 0.0)]);
        let req = request(&blocks);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let d = p.decide(&req, &loads, &mut rng).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(0), 3));
        // Worker 0's queue grows to 12 and its KV usage to 0.95:
        //   worker 0: 1.5 + 0 + 0.05 = 1.55; worker 1: 0.5 + 1 + 0.1 = 1.6;
        //   worker 2: 0 + (12 − 2)/12 + 1 = 1.83: the idle worker wins (min-max over the
        //   holders, upstream's rule before PR #1107, gave the longest holder a full 2 + 0.05).
        loads.refresh_signals(&[signal(12, 0.95), signal(0, 0.9), signal(2, 0.0)]);
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(2));
        // Worker 1 loses its block and worker 0 all but its first: worker 0, the only holder,
        // scores 1 of 4: 0.5 + 0 + 0.05 = 0.55 against worker 1's 1.1 and worker 2's 1.83.
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(1),
            blocks: blocks[..1].to_vec(),
        });
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(0),
            blocks: blocks[1..3].to_vec(),
        });
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(2));
        // The load alone: worker 0 still leads worker 1 when both are idle and empty.
        loads.refresh_signals(&[signal(0, 0.0), signal(0, 0.0), signal(5, 0.0)]);
        // worker 0: 0.5 + 1 + 1 = 2.5; worker 1: 0 + 1 + 1 = 2; worker 2: 0 + 0 + 1 = 1.
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(0));
        // With no holder at all, the prefix scores 0 everywhere and load decides (a tie of
        // workers 0 and 1, drawn).
        p.on_event(&KvEvent::Removed {
            worker: WorkerId(0),
            blocks: blocks[..1].to_vec(),
        });
        let d = p.decide(&req, &loads, &mut rng).unwrap().worker;
        assert!(d == WorkerId(0) || d == WorkerId(1), "{d:?}");
    }

    #[test]
    fn a_block_in_host_memory_weighs_0_8() {
        // A 4-block prompt. Worker 0 holds 3 on its device: 3 / 4 = 0.75, 2 x 0.75 = 1.5.
        // Worker 1 holds all 4 in host memory only: 4 x 0.8 / 4 = 0.8, 1.6 (weighed alike, as
        // before Dec 5 2026, 2.0). Worker 0's KV utilisation leads by 0.3 (1.0 against 0.7):
        // 2.5 against 2.3 wins for worker 0, where alike 2.5 against 2.7 went to worker 1.
        let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let mut p = llm_d(2);
        p.on_event(&stored(0, &blocks[..3]));
        p.on_event(&KvEvent::TierStored {
            worker: WorkerId(1),
            tier: crate::protocol::kv_event::Tier::Host,
            blocks: blocks.clone(),
        });
        let mut loads = LoadBook::new(2, LoadKind::Routed);
        loads.refresh_signals(&[signal(0, 0.0), signal(0, 0.3)]);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let d = p.decide(&request(&blocks), &loads, &mut rng).unwrap();
        assert_eq!(d.worker, WorkerId(0));
        // Worker 1's first block back on its device: 1 + 3 x 0.8 = 3.4 of 4, 1.7 + 0.7 = 2.4,
        // still below worker 0's 2.5; its whole prompt on the device (2.0 + 0.7) wins.
        p.on_event(&stored(1, &blocks[..1]));
        assert_eq!(p.decide(&request(&blocks), &loads, &mut rng).unwrap().worker, WorkerId(0));
        p.on_event(&KvEvent::Stored {
            worker: WorkerId(1),
            parent: Some(blocks[0]),
            blocks: blocks[1..].to_vec().into(),
        });
        let d = p.decide(&request(&blocks), &loads, &mut rng).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 4));
    }

    #[test]
    fn a_speculative_entry_counts_as_the_device_along_the_prefix() {
        // An 8-block prompt. Worker 0 holds 7 on its device: 7.0. Worker 1 holds all 8 in host
        // memory (6.4) and was routed the first 4 a moment ago (speculative entries, as on the
        // device): 4 x 1.0 + 4 x 0.8 = 7.2, and it wins (the larger of the two alone, 6.4,
        // lost to worker 0).
        let blocks = block_hashes(&(0..32).collect::<Vec<u32>>(), 4);
        let table: toml::Value = toml::from_str("speculative_ttl_ms = 1000.0").unwrap();
        let mut p = llm_d_with(2, Some(&table));
        p.on_event(&stored(0, &blocks[..7]));
        p.on_event(&KvEvent::TierStored {
            worker: WorkerId(1),
            tier: crate::protocol::kv_event::Tier::Host,
            blocks: blocks.clone(),
        });
        let first = request(&blocks[..4]);
        p.on_routed(
            &first,
            &Decision {
                worker: WorkerId(1),
                predicted_blocks: 0,
            },
        );
        let mut loads = LoadBook::new(2, LoadKind::Routed);
        loads.refresh_signals(&[signal(0, 0.0), signal(0, 0.0)]);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let d = p.decide(&request(&blocks), &loads, &mut rng).unwrap();
        assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 8));
    }

    fn llm_d(workers: usize) -> Box<dyn RoutingPolicy> {
        llm_d_with(workers, None)
    }

    fn llm_d_with(workers: usize, settings: Option<&toml::Value>) -> Box<dyn RoutingPolicy> {
        build(&PolicySetup {
            name: "llm-d",
            workers,
            block_size: 4,
            kv_capacity_blocks: None,
            settings,
        })
        .unwrap()
    }

    /// Worker `w` stored `blocks` (from the front of the prompt) on its device.
    fn stored(w: u32, blocks: &[crate::hash::BlockHash]) -> KvEvent {
        KvEvent::Stored {
            worker: WorkerId(w),
            parent: None,
            blocks: blocks.to_vec().into(),
        }
    }

    fn signal(waiting: u32, kv_usage: f64) -> WorkerSignals {
        WorkerSignals {
            waiting,
            kv_usage,
            ..WorkerSignals::default()
        }
    }

    fn request(blocks: &[crate::hash::BlockHash]) -> RouteRequest<'_> {
        RouteRequest {
            id: RequestId(0),
            blocks: blocks.into(),
            input_tokens: 16,
            session: None,
            now: 0,
        }
    }
}
