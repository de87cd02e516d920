//! `cost`: a Dynamo-style cost over the events index, the older documented form: `overlap_weight`
//! x the blocks the worker would have to prefill + its active load (prompt blocks the router has
//! in flight there). The lowest cost wins (a seeded draw among equal costs), or with
//! `temperature` > 0 a sample from softmax(−cost / max cost / temperature).
//!
//! Settings, `[router.cost]`: `overlap_weight` (1.0), `temperature` (0.0).
//!
//! Source: Dynamo's KV router before the published `dynamo-kv-router` crate (ai-dynamo/dynamo,
//! `lib/llm/src/kv_router/scheduler.rs`, `DefaultWorkerSelector::select_worker` and
//! `softmax_sample`, the mid-2025 form with `i64` worker ids; its docs, e.g. the 0.4.0 archive's
//! `components/router/README`, describe it as prefill cost + decode cost with
//! `--kv-overlap-score-weight` and `--router-temperature`): logit = `overlap_score_weight` x
//! potential prefill blocks + potential decode blocks, lowest wins; at temperature 0 it draws
//! uniformly among the workers with the least logit (`min_keys`, `rng.random_range`). Every
//! Dynamo version read draws among ties: the earlier selector (`2·score − cache use − waiting`)
//! picks at random among its best, and 1.6.1 is the `dynamo` policy, which does too. So a blind
//! router (no KV events: every overlap 0, every idle worker at the same cost) spreads its
//! requests at random, not all on the first worker.
//!
//! Where dynsim differs: the draw among ties comes from the run's seeded generator (Dynamo's is
//! the thread's). The load term is the prompt blocks in flight, not Dynamo's potential decode
//! blocks (which count the new request's blocks and the tokens still to prefill); the sampler
//! at temperature > 0 scales costs by the largest, where Dynamo's (logits divided by their
//! largest, then by their range) is softmax(−cost / (max − min) / temperature): the same
//! ranking, flatter here whenever the least cost is above 0.

use serde::Deserialize;

use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::index::{KvIndex, MatchScratch};
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::select::lowest_random_tie;
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "cost",
    summary: "overlap_weight x blocks to prefill + prompt blocks in flight, over KV events",
    build,
    settings: crate::router::policy::settings_schema::<Settings>,
};

/// `[router.cost]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Weight of the blocks a worker would prefill (1.0).
    pub overlap_weight: f64,
    /// Softmax temperature; 0 = the lowest cost wins (0.0).
    pub temperature: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            overlap_weight: 1.0,
            temperature: 0.0,
        }
    }
}

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: Settings = setup.settings()?;
    setup.check_number("overlap_weight", s.overlap_weight, 0.0, f64::INFINITY)?;
    setup.check_number("temperature", s.temperature, 0.0, f64::INFINITY)?;
    Ok(Box::new(Cost {
        settings: s,
        index: KvIndex::new(setup.workers),
        scratch: MatchScratch::default(),
        overlaps: Vec::new(),
        costs: Vec::new(),
    }))
}

struct Cost {
    settings: Settings,
    index: KvIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
    costs: Vec<(usize, f64)>,
}

impl RoutingPolicy for Cost {
    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Option<Decision> {
        self.index
            .overlaps(&req.blocks, &mut self.scratch, &mut self.overlaps);
        let n = req.blocks.len() as f64;
        let weight = self.settings.overlap_weight;
        self.costs.clear();
        self.costs.extend(loads.up_workers().map(|w| {
            let prefill = n - self.overlaps[w] as f64;
            (w, weight * prefill + loads.in_flight_blocks(w) as f64)
        }));
        let worker = if self.settings.temperature > 0.0 {
            softmax_sample(&self.costs, self.settings.temperature, rng)?
        } else {
            lowest_random_tie(self.costs.iter().copied(), rng)?
        };
        tracing::debug!(costs = ?self.costs, worker, "cost decision");
        Some(Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: self.overlaps[worker],
        })
    }

    fn on_event(&mut self, event: &KvEvent) {
        self.index.apply(event);
    }

    fn learns_from_events(&self) -> bool {
        true
    }
}

/// Samples a worker with probability ∝ exp(−cost / max cost / temperature).
pub fn softmax_sample(
    costs: &[(usize, f64)],
    temperature: f64,
    rng: &mut SimRng,
) -> Option<usize> {
    let max = costs.iter().map(|c| c.1).fold(0.0, f64::max);
    let scale = if max > 0.0 { max } else { 1.0 };
    let total: f64 = costs
        .iter()
        .map(|c| (-(c.1 / scale) / temperature).exp())
        .sum();
    let mut x = rng.unit() * total;
    for c in costs {
        let w = (-(c.1 / scale) / temperature).exp();
        if x < w {
            return Some(c.0);
        }
        x -= w;
    }
    costs.last().map(|c| c.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::ids::RequestId;
    use crate::rng::RngKind;
    use crate::router::loads::LoadKind;

    #[test]
    fn equal_costs_are_drawn_among_not_given_to_the_lowest_number() {
        // No KV events and nothing in flight: every worker costs the whole prompt, as Dynamo's
        // blind router sees it. Dynamo draws among the tied; the lowest number must not take
        // every request.
        let mut p = build(&PolicySetup {
            name: "cost",
            workers: 3,
            block_size: 4,
            kv_capacity_blocks: None,
            settings: None,
        })
        .unwrap();
        let loads = LoadBook::new(3, LoadKind::Routed);
        let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let req = RouteRequest {
            id: RequestId(0),
            blocks: blocks.as_slice().into(),
            input_tokens: 16,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 5);
        let mut seen = [0usize; 3];
        for _ in 0..60 {
            seen[p.decide(&req, &loads, &mut rng).unwrap().worker.index()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 5), "{seen:?}");
        // One worker less loaded: it wins outright, no draw.
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        loads.routed_to(RequestId(1), WorkerId(0), 2);
        loads.routed_to(RequestId(2), WorkerId(2), 2);
        for _ in 0..10 {
            assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(1));
        }
    }
}
