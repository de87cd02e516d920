//! `random`: one uniform draw among the workers that are up, per decision.

use crate::error::Invalid;
use crate::ids::WorkerId;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "random",
    summary: "uniformly random among the workers that are up",
    build,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(Random { up: Vec::new() }))
}

struct Random {
    /// The workers that are up (kept for its allocation).
    up: Vec<usize>,
}

impl RoutingPolicy for Random {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Decision {
        self.up.clear();
        self.up.extend(loads.up_workers());
        let worker = self.up[rng.below(self.up.len())];
        Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: 0,
        }
    }
}
