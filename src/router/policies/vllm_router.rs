//! vLLM production-stack's router (vllm-project/production-stack at a6c01db0,
//! `src/vllm_router/routers/routing_logic.py`, `prefix/hashtrie.py`, `stats/request_stats.py`;
//! the load-aware logic of PR 1035), as three policies:
//!
//! - `vllm-session`: requests with a session go to the worker a consistent-hash ring assigns
//!   their session (160 virtual nodes per worker; a worker that is down passes its share to the
//!   next on the ring); requests without one take the QPS fallback.
//! - `vllm-prefix-aware`: the longest match of the prompt against a trie of the prompts this
//!   router routed (never forgotten: the production stack assumes no eviction), a seeded random
//!   choice among the workers with it (all workers when nothing matches); below
//!   `prefix_min_match_tokens` the QPS fallback decides. The prompt is recorded under the
//!   chosen worker.
//! - `vllm-loadaware`: score = matched / prompt tokens − `beta` x (load − mean load) / max(1, mean
//!   load), highest wins (the lowest number on ties); `matched` is what the worker holds, from KV
//!   events (the production stack asks LMCache), `load` the router's own in-flight count. When
//!   no worker holds any of the prompt, the QPS fallback decides.
//!
//! The QPS fallback: the first worker (in number order) this router never sent a request, else
//! the one it sent the fewest requests in the last `qps_window_secs` (60), the lowest number on
//! ties.
//!
//! Settings: `[router.vllm-session]` `virtual_nodes` (160), `qps_window_secs` (60);
//! `[router.vllm-prefix-aware]` `prefix_min_match_tokens` (0), `qps_window_secs`;
//! `[router.vllm-loadaware]` `beta` (1.0), `qps_window_secs`.
//!
//! Where dynsim differs: the ring hashes with xxh3 (the production stack's uhashring uses md5),
//! and the trie holds block names (the production stack cuts the prompt into 128-character
//! chunks); the session id is the workload's (the production stack reads a header). So
//! `prefix_min_match_tokens` counts tokens (whole blocks matched, at most the prompt), where
//! the production stack's `--prefix-min-match-length` counts characters (128 per chunk matched,
//! a short last chunk included): a value taken from its configuration means about four times
//! as long here, at about four characters a token. Its default, 0, is the same in both.

use std::collections::VecDeque;

use serde::Deserialize;
use xxhash_rust::xxh3::xxh3_64;

use crate::engine::{ms_to_ns, Nanos};
use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::index::{KvIndex, MatchScratch};
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::history::RoutedHistory;
use crate::router::lab_rule::LoadView;
use crate::router::loads::LoadBook;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// `vllm-session`.
pub const SESSION: PolicyEntry = PolicyEntry {
    name: "vllm-session",
    summary: "vLLM production stack: consistent hashing on the session, else lowest QPS",
    build: build_session,
    settings: crate::router::policy::settings_schema::<SessionSettings>,
};

/// `vllm-prefix-aware`.
pub const PREFIX_AWARE: PolicyEntry = PolicyEntry {
    name: "vllm-prefix-aware",
    summary: "vLLM production stack: longest routed prefix, random among equals",
    build: build_prefix_aware,
    settings: crate::router::policy::settings_schema::<PrefixSettings>,
};

/// `vllm-loadaware`.
pub const LOADAWARE: PolicyEntry = PolicyEntry {
    name: "vllm-loadaware",
    summary: "vLLM production stack: cached share minus beta x relative load",
    build: build_loadaware,
    settings: crate::router::policy::settings_schema::<LoadawareSettings>,
};

/// The most ring points per worker `[router.vllm-session]` takes.
const MAX_VIRTUAL_NODES: usize = 10_000;

/// `[router.vllm-session]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SessionSettings {
    /// Points per worker on the ring (160).
    #[schemars(range(min = 1, max = "MAX_VIRTUAL_NODES"))]
    pub virtual_nodes: usize,
    /// The QPS fallback's window, s (60).
    pub qps_window_secs: f64,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            virtual_nodes: 160,
            qps_window_secs: 60.0,
        }
    }
}

/// `[router.vllm-prefix-aware]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PrefixSettings {
    /// Matched tokens below which the QPS fallback decides (0).
    pub prefix_min_match_tokens: u64,
    /// The QPS fallback's window, s (60).
    pub qps_window_secs: f64,
}

impl Default for PrefixSettings {
    fn default() -> Self {
        PrefixSettings {
            prefix_min_match_tokens: 0,
            qps_window_secs: 60.0,
        }
    }
}

/// `[router.vllm-loadaware]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LoadawareSettings {
    /// Weight of the relative load (1.0).
    pub beta: f64,
    /// The QPS fallback's window, s (60).
    pub qps_window_secs: f64,
}

impl Default for LoadawareSettings {
    fn default() -> Self {
        LoadawareSettings {
            beta: 1.0,
            qps_window_secs: 60.0,
        }
    }
}

fn window(name: &str, secs: f64) -> Result<Qps, Invalid> {
    if !(secs.is_finite() && secs > 0.0 && secs <= 1e9) {
        return Err(Invalid {
            key: format!("router.{name}.qps_window_secs"),
            value: format!("{secs:?}"),
            problem: "must be a number of seconds in (0, 1e9]".into(),
        });
    }
    Ok(Qps::new(ms_to_ns(secs * 1e3)))
}

fn build_session(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: SessionSettings = setup.settings()?;
    if s.virtual_nodes == 0 || s.virtual_nodes > MAX_VIRTUAL_NODES {
        return Err(Invalid {
            key: "router.vllm-session.virtual_nodes".into(),
            value: s.virtual_nodes.to_string(),
            problem: format!("must be in 1..={MAX_VIRTUAL_NODES}"),
        });
    }
    let mut ring: Vec<(u64, usize)> = (0..setup.workers)
        .flat_map(|w| (0..s.virtual_nodes).map(move |v| (point(&format!("{w}-{v}")), w)))
        .collect();
    ring.sort_unstable();
    Ok(Box::new(Session {
        ring,
        qps: window(setup.name, s.qps_window_secs)?,
    }))
}

fn build_prefix_aware(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: PrefixSettings = setup.settings()?;
    Ok(Box::new(PrefixAware {
        min_tokens: s.prefix_min_match_tokens,
        block_size: setup.block_size.max(1) as u64,
        history: RoutedHistory::new(setup.workers),
        qps: window(setup.name, s.qps_window_secs)?,
        tied: Vec::new(),
    }))
}

fn build_loadaware(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: LoadawareSettings = setup.settings()?;
    setup.check_number("beta", s.beta, 0.0, f64::INFINITY)?;
    Ok(Box::new(Loadaware {
        beta: s.beta,
        block_size: setup.block_size.max(1) as u64,
        index: KvIndex::new(setup.workers),
        scratch: MatchScratch::default(),
        overlaps: Vec::new(),
        qps: window(setup.name, s.qps_window_secs)?,
    }))
}

/// A point on the ring.
fn point(key: &str) -> u64 {
    xxh3_64(key.as_bytes())
}

/// Requests this router sent each worker recently: the production stack's QPS statistics.
struct Qps {
    window_ns: Nanos,
    recent: VecDeque<(Nanos, usize)>,
    counts: Vec<u64>,
    ever: Vec<bool>,
}

impl Qps {
    fn new(window_ns: Nanos) -> Self {
        Qps {
            window_ns,
            recent: VecDeque::new(),
            counts: Vec::new(),
            ever: Vec::new(),
        }
    }

    /// The first worker up never sent a request, else the one up sent the fewest in the window
    /// (`None`: none is up).
    fn choose(&mut self, now: Nanos, loads: &LoadBook) -> Option<usize> {
        self.fit(loads.workers());
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| t + self.window_ns <= now)
        {
            let (_, w) = self.recent.pop_front().expect("checked");
            self.counts[w] -= 1;
        }
        let mut best: Option<usize> = None;
        for w in loads.up_workers() {
            if !self.ever[w] {
                return Some(w);
            }
            if best.is_none_or(|b| self.counts[w] < self.counts[b]) {
                best = Some(w);
            }
        }
        best
    }

    fn record(&mut self, now: Nanos, worker: usize) {
        self.fit(worker + 1);
        self.recent.push_back((now, worker));
        self.counts[worker] += 1;
        self.ever[worker] = true;
    }

    fn fit(&mut self, n: usize) {
        if self.counts.len() < n {
            self.counts.resize(n, 0);
            self.ever.resize(n, false);
        }
    }
}

struct Session {
    ring: Vec<(u64, usize)>,
    qps: Qps,
}

impl RoutingPolicy for Session {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        let worker = match req.session {
            Some(session) => {
                let h = point(&format!("session-{session}"));
                let start = self.ring.partition_point(|p| p.0 < h);
                (0..self.ring.len())
                    .map(|k| self.ring[(start + k) % self.ring.len()].1)
                    .find(|&w| loads.up(w))?
            }
            None => self.qps.choose(req.now, loads)?,
        };
        Some(Decision::blind(worker))
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        self.qps.record(req.now, d.worker.index());
    }
}

struct PrefixAware {
    min_tokens: u64,
    block_size: u64,
    history: RoutedHistory,
    qps: Qps,
    tied: Vec<usize>,
}

impl RoutingPolicy for PrefixAware {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Option<Decision> {
        // The workers with the longest match that are up, in increasing order: from one walk
        // when one of the deepest holders is up (a draw among all of them costs nothing more),
        // else from every worker's own match.
        if !loads.any_up() {
            return None;
        }
        let depth = self.history.deepest(&req.blocks);
        self.tied.clear();
        let all = self.history.best_count() == loads.workers() && loads.all_up();
        if !all {
            self.tied
                .extend(self.history.best().filter(|&w| loads.up(w)));
        }
        let deepest = if all || !self.tied.is_empty() {
            depth
        } else {
            let overlaps = self.history.overlaps(&req.blocks);
            let deepest = loads.up_workers().map(|w| overlaps[w]).max().unwrap_or(0);
            self.tied
                .extend(loads.up_workers().filter(|&w| overlaps[w] == deepest));
            deepest
        };
        let matched = (deepest as u64 * self.block_size).min(u64::from(req.input_tokens));
        let worker = if matched < self.min_tokens {
            self.qps.choose(req.now, loads)?
        } else if all {
            rng.below(loads.workers())
        } else {
            self.tied[rng.below(self.tied.len())]
        };
        // Any worker but the tied ones (a low match, routed by QPS) needs its own match.
        let predicted = if all || self.tied.contains(&worker) {
            deepest
        } else {
            self.history.overlaps(&req.blocks)[worker]
        };
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: predicted,
        })
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        self.history.touch(d.worker.index(), &req.blocks);
        self.qps.record(req.now, d.worker.index());
    }

    /// Its trie keeps every routed prompt: vLLM's router never prunes it.
    fn history_bytes(&self, blocks: u64) -> u64 {
        blocks * crate::budget::TREE_BYTES_PER_BLOCK
    }
}

struct Loadaware {
    beta: f64,
    block_size: u64,
    index: KvIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
    qps: Qps,
}

impl RoutingPolicy for Loadaware {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        let depth = self
            .index
            .overlaps(&req.blocks, &mut self.scratch, &mut self.overlaps);
        let worker = if depth == 0 {
            self.qps.choose(req.now, loads)?
        } else {
            let prompt = u64::from(req.input_tokens);
            let up = loads.up_workers().count() as f64;
            let mean = loads.up_workers().map(|w| loads.in_flight(w)).sum::<u64>() as f64 / up;
            let mut best: Option<(f64, usize)> = None;
            for w in loads.up_workers() {
                let matched = (self.overlaps[w] as u64 * self.block_size).min(prompt);
                let hit = matched as f64 / prompt.max(1) as f64;
                let relative = (loads.in_flight(w) as f64 - mean) / mean.max(1.0);
                let score = hit - self.beta * relative;
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, w));
                }
            }
            best?.1
        };
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: self.overlaps[worker],
        })
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        self.qps.record(req.now, d.worker.index());
    }

    fn on_event(&mut self, event: &KvEvent) {
        self.index.apply(event);
    }

    fn learns_from_events(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
