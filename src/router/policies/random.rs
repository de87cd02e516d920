//! `random`: one uniform draw among the workers that are up, per decision.

use crate::error::Invalid;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "random",
    summary: "uniformly random among the workers that are up",
    build,
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(Random))
}

struct Random;

impl RoutingPolicy for Random {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Option<Decision> {
        if !loads.any_up() {
            return None;
        }
        let worker = loads.nth_up(rng.below(loads.up_count()));
        Some(Decision::blind(worker))
    }
}
