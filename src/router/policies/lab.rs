//! `kv` and `kv-events`: the lab rule ([`LabRule`]: most overlap, then least load, then lowest
//! number) over an index fed by the router's own decisions (`kv`) or only by KV events
//! (`kv-events`). The load is `router.load` (requests routed, or in flight).
//!
//! Both see the device only: KV events about host and disk tiers (`[kv.host]`) are ignored, as
//! the lab's rule has one cache tier.
//!
//! `kv-events` never records its own decisions: doing so would hide the failure where workers
//! publish nothing (the router would look healthy while it routes blind).

use crate::error::Invalid;
use crate::protocol::kv_event::KvEvent;
use crate::rng::SimRng;
use crate::router::lab_rule::LabRule;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// `kv`: self-tracking.
pub const KV: PolicyEntry = PolicyEntry {
    name: "kv",
    summary: "the lab rule over the router's own decisions",
    build: build_kv,
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

/// `kv-events`: fed by KV events only.
pub const KV_EVENTS: PolicyEntry = PolicyEntry {
    name: "kv-events",
    summary: "the lab rule over KV events only",
    build: build_kv_events,
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

fn build_kv(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(LabPolicy {
        rule: LabRule::new(setup.workers),
        self_tracking: true,
    }))
}

fn build_kv_events(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(LabPolicy {
        rule: LabRule::new(setup.workers),
        self_tracking: false,
    }))
}

struct LabPolicy {
    rule: LabRule,
    self_tracking: bool,
}

impl RoutingPolicy for LabPolicy {
    fn reads_load_kind(&self) -> bool {
        true
    }

    fn decide(&mut self, req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        self.rule.decide(&req.blocks, loads)
    }

    fn on_routed(&mut self, req: &RouteRequest<'_>, d: &Decision) {
        if self.self_tracking {
            self.rule.record_decision(d, &req.blocks);
        }
    }

    fn on_event(&mut self, event: &KvEvent) {
        self.rule.index_mut().apply(event);
    }

    fn learns_from_events(&self) -> bool {
        !self.self_tracking
    }

    /// The self-tracking rule never forgets a decision (the lab's caches never evict).
    fn history_bytes(&self, blocks: u64) -> u64 {
        if self.self_tracking {
            blocks * crate::budget::INDEX_BYTES_PER_BLOCK
        } else {
            0
        }
    }
}
