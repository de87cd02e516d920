//! The engine's routing policies, as one pure core: no channels, no clock (time is passed in).
//!
//! - `rr`: request *i* goes to worker *i* mod *n* (skipping workers that are down).
//! - `random`: one uniform draw per request.
//! - `kv`: the lab rule over an index the router feeds with its own decisions.
//! - `kv-events`: the lab rule over an index fed only by KV events.
//! - `cost`: Dynamo-style cost over the events index: `overlap_weight` x blocks the worker would
//!   have to prefill + its active load (prompt blocks in flight); lowest wins, or a softmax sample
//!   over normalised costs when `temperature` > 0.
//! - `approx`: the lab rule over the router's own decisions, each forgotten `ttl` after it was made
//!   (the fix deployed when events are missing). With a TTL of 0 it is kv-events without events.

use serde::{Deserialize, Serialize};

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::index::{KvIndex, MatchScratch};
use crate::rng::SimRng;
use crate::router::select::least_loaded;
use crate::router::ttl::TtlIndex;

/// Which routing policy the router runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// Round-robin.
    Rr,
    /// Uniformly random.
    Random,
    /// KV-aware over the router's own decisions.
    Kv,
    /// KV-aware over KV events only.
    KvEvents,
    /// Dynamo-style cost over KV events.
    Cost,
    /// KV-aware over the router's own decisions, forgotten after a TTL.
    Approx,
}

/// What "load" means in the selection rule's second step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LoadKind {
    /// Requests routed so far (the lab's).
    #[default]
    Routed,
    /// Requests routed and not yet acknowledged.
    InFlight,
}

/// A routing policy's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyConfig {
    /// The policy.
    pub kind: PolicyKind,
    /// The load measure for tie-breaking.
    pub load: LoadKind,
    /// `cost`: weight of the blocks to prefill.
    pub overlap_weight: f64,
    /// `cost`: softmax temperature (0: lowest cost wins).
    pub temperature: f64,
    /// `approx`: how long a recorded decision is believed, ns.
    pub ttl_ns: Nanos,
}

/// A routing decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The chosen worker.
    pub worker: usize,
    /// Blocks the router believed the worker held, from the front.
    pub predicted_blocks: usize,
}

/// The router's state: its index, load counters and which workers are up.
pub struct Policy {
    cfg: PolicyConfig,
    index: KvIndex,
    ttl: TtlIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
    routed: Vec<u64>,
    in_flight: Vec<u64>,
    in_flight_blocks: Vec<u64>,
    up: Vec<bool>,
    requests: u64,
}

impl Policy {
    /// A policy over `n_workers` workers, all up.
    pub fn new(cfg: PolicyConfig, n_workers: usize) -> Self {
        Policy {
            cfg,
            index: KvIndex::new(n_workers),
            ttl: TtlIndex::default(),
            scratch: MatchScratch::default(),
            overlaps: Vec::new(),
            routed: vec![0; n_workers],
            in_flight: vec![0; n_workers],
            in_flight_blocks: vec![0; n_workers],
            up: vec![true; n_workers],
            requests: 0,
        }
    }

    /// Whether this policy learns from KV events.
    pub fn uses_events(&self) -> bool {
        matches!(self.cfg.kind, PolicyKind::KvEvents | PolicyKind::Cost)
    }

    /// Whether any worker is up.
    pub fn any_up(&self) -> bool {
        self.up.iter().any(|u| *u)
    }

    /// Marks a worker down (it gets no requests) or up.
    pub fn set_up(&mut self, worker: usize, up: bool) {
        self.up[worker] = up;
    }

    /// Requests routed to each worker.
    pub fn routed(&self) -> &[u64] {
        &self.routed
    }

    /// Chooses a worker for a request with these block names, at time `now`. Callers make sure
    /// some worker is up.
    pub fn route(&mut self, blocks: &[BlockHash], now: Nanos, rng: &mut SimRng) -> Decision {
        let n = self.routed.len();
        let decision = match self.cfg.kind {
            PolicyKind::Rr => {
                let start = (self.requests % n as u64) as usize;
                let worker = (0..n)
                    .map(|k| (start + k) % n)
                    .find(|&w| self.up[w])
                    .expect("some worker is up");
                Decision {
                    worker,
                    predicted_blocks: 0,
                }
            }
            PolicyKind::Random => {
                let up: Vec<usize> = (0..n).filter(|&w| self.up[w]).collect();
                let worker = up[rng.below(up.len())];
                Decision {
                    worker,
                    predicted_blocks: 0,
                }
            }
            PolicyKind::Kv | PolicyKind::KvEvents => self.lab_rule(blocks),
            PolicyKind::Approx => {
                self.ttl.expire(now, &mut self.index);
                self.lab_rule(blocks)
            }
            PolicyKind::Cost => self.lowest_cost(blocks, rng),
        };
        let w = decision.worker;
        self.requests += 1;
        self.routed[w] += 1;
        self.in_flight[w] += 1;
        self.in_flight_blocks[w] += blocks.len() as u64;
        match self.cfg.kind {
            PolicyKind::Kv => self.index.store(w, &blocks[decision.predicted_blocks..]),
            PolicyKind::Approx => {
                self.index.store(w, blocks);
                self.ttl.record(w, blocks, now + self.cfg.ttl_ns);
            }
            _ => {}
        }
        decision
    }

    /// A request routed to `worker` with `blocks` prompt blocks completed or was handed back.
    pub fn finished(&mut self, worker: usize, blocks: usize) {
        self.in_flight[worker] -= 1;
        self.in_flight_blocks[worker] -= blocks as u64;
    }

    /// A `KvStored` event; returns whether the policy applied it.
    pub fn on_stored(&mut self, worker: usize, blocks: &[BlockHash]) -> bool {
        self.uses_events() && {
            self.index.store(worker, blocks);
            true
        }
    }

    /// A `KvRemoved` event; returns whether the policy applied it.
    pub fn on_removed(&mut self, worker: usize, blocks: &[BlockHash]) -> bool {
        self.uses_events() && {
            self.index.remove(worker, blocks);
            true
        }
    }

    /// A `KvCleared` event; returns whether the policy applied it.
    pub fn on_cleared(&mut self, worker: usize) -> bool {
        self.uses_events() && {
            self.index.clear_worker(worker);
            true
        }
    }

    fn load(&self, worker: usize) -> u64 {
        match self.cfg.load {
            LoadKind::Routed => self.routed[worker],
            LoadKind::InFlight => self.in_flight[worker],
        }
    }

    /// Most overlap, then least load, then lowest index, among workers that are up.
    fn lab_rule(&mut self, blocks: &[BlockHash]) -> Decision {
        let depth = self.index.find_matches(blocks, &mut self.scratch);
        let up = &self.up;
        let best = least_loaded(self.scratch.best().filter(|&w| up[w]), |w| self.load(w));
        match best {
            Some(worker) => Decision {
                worker,
                predicted_blocks: depth,
            },
            None => {
                // Every deepest holder is down: fall back to per-worker overlaps.
                self.index
                    .overlaps(blocks, &mut self.scratch, &mut self.overlaps);
                let deepest = (0..up.len())
                    .filter(|&w| up[w])
                    .map(|w| self.overlaps[w])
                    .max();
                let deepest = deepest.expect("some worker is up");
                let candidates = (0..up.len()).filter(|&w| up[w] && self.overlaps[w] == deepest);
                let worker = least_loaded(candidates, |w| self.load(w)).expect("some worker is up");
                Decision {
                    worker,
                    predicted_blocks: deepest,
                }
            }
        }
    }

    /// Dynamo-style cost: `overlap_weight` x blocks to prefill + prompt blocks in flight.
    fn lowest_cost(&mut self, blocks: &[BlockHash], rng: &mut SimRng) -> Decision {
        self.index
            .overlaps(blocks, &mut self.scratch, &mut self.overlaps);
        let n = blocks.len() as f64;
        let costs: Vec<(usize, f64)> = (0..self.up.len())
            .filter(|&w| self.up[w])
            .map(|w| {
                let prefill = n - self.overlaps[w] as f64;
                (
                    w,
                    self.cfg.overlap_weight * prefill + self.in_flight_blocks[w] as f64,
                )
            })
            .collect();
        let worker = if self.cfg.temperature > 0.0 {
            softmax_sample(&costs, self.cfg.temperature, rng)
        } else {
            costs
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
                .expect("some worker is up")
                .0
        };
        tracing::debug!(?costs, worker, "cost decision");
        Decision {
            worker,
            predicted_blocks: self.overlaps[worker],
        }
    }
}

/// Samples a worker with probability ∝ exp(−cost / max cost / temperature).
fn softmax_sample(costs: &[(usize, f64)], temperature: f64, rng: &mut SimRng) -> usize {
    let max = costs.iter().map(|c| c.1).fold(0.0, f64::max);
    let scale = if max > 0.0 { max } else { 1.0 };
    let weights: Vec<f64> = costs
        .iter()
        .map(|c| (-(c.1 / scale) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut x = rng.unit() * total;
    for (c, w) in costs.iter().zip(&weights) {
        if x < *w {
            return c.0;
        }
        x -= w;
    }
    costs.last().expect("some worker is up").0
}
