//! `approx`: the lab rule over the router's own decisions, each (block, worker) belief forgotten
//! `ttl_s` after it was last recorded: the fix deployed when workers publish no events (Dynamo's
//! approximate mode, `router_ttl_secs`). With a TTL of 0 it is `kv-events` without events.
//!
//! Settings, `[router.approx]`: `ttl_s` (120).

use serde::Deserialize;

use crate::engine::ms_to_ns;
use crate::error::Invalid;
use crate::rng::SimRng;
use crate::router::lab_rule::LabRule;
use crate::router::loads::LoadBook;
use crate::router::policy::{PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::ttl::TtlIndex;
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "approx",
    summary: "the lab rule over the router's own decisions, forgotten after ttl_s",
    build,
    settings: crate::router::policy::settings_schema::<Settings>,
};

/// `[router.approx]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Seconds a recorded decision is believed (120).
    pub ttl_s: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { ttl_s: 120.0 }
    }
}

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    let s: Settings = setup.settings()?;
    setup.check_number("ttl_s", s.ttl_s, 0.0, 1e9)?;
    Ok(Box::new(Approx {
        rule: LabRule::new(setup.workers),
        ttl: TtlIndex::default(),
        ttl_ns: ms_to_ns(s.ttl_s * 1e3),
    }))
}

struct Approx {
    rule: LabRule,
    ttl: TtlIndex,
    ttl_ns: u64,
}

impl RoutingPolicy for Approx {
    fn reads_load_kind(&self) -> bool {
        true
    }

    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        self.ttl.expire(req.now, self.rule.index_mut());
        self.rule.decide(&req.blocks, loads)
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        let w = d.worker.index();
        self.rule.index_mut().store(w, &req.blocks);
        self.ttl.record(w, &req.blocks, req.now + self.ttl_ns);
    }
}
