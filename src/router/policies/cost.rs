//! `cost`: a Dynamo-style cost over the events index, the older documented form: `overlap_weight`
//! x the blocks the worker would have to prefill + its active load (prompt blocks the router has
//! in flight there). The lowest cost wins (lowest number on ties), or with `temperature` > 0 a
//! sample from softmax(−cost / max cost / temperature).
//!
//! Settings, `[router.cost]`: `overlap_weight` (1.0), `temperature` (0.0).

use serde::Deserialize;

use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::index::{KvIndex, MatchScratch};
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
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
            self.costs
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))?
                .0
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
