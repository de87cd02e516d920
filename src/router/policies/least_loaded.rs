//! `least-loaded`: the worker with the fewest requests this router has in flight there (the
//! classic least-outstanding-requests balancer), the lowest number on ties. It ignores caches.
//!
//! Source: SGLang's router, `sgl-router/src/policies/load_aware.rs` at 732240a3
//! (`LoadAwarePolicy::find_min_load_worker`): a scan of the healthy workers for the least
//! `load()`, the router's own count of requests it sent that have not completed, the first in
//! worker order on ties. The same rule as NGINX's `least_conn` (fewest active connections).
//!
//! Provenance: the index holds `load_aware.rs` at that commit only, beside a `rule_based.rs`,
//! the files of SGLang PR #11058 ("Adaptive Routing with Worker Load Based Strategy and Rule
//! Based Strategy", closed in October 2025); that it reached a release is not established, and
//! `--policy` at b6f20641 offers only `random`, `round_robin`, `cache_aware`, `power_of_two`.
//! The rule is read as written: `load()` is what the counter holds when it is kept, but SGLang's
//! regular HTTP router of that period increments it only under `cache_aware`, so under another
//! policy it stays 0 and this scan would return the first healthy worker. Later gateways' own
//! load-aware policies (e.g. a `sgl-model-gateway` fork's) rank by engine `num_tokens` polled
//! from `/get_load` plus an estimate of the tokens dispatched since: not this policy.
//!
//! Where dynsim differs: nothing in the rule; the least loaded comes from the router's
//! [`LoadBook`] (a tournament tree, O(1) per decision when every worker is up) instead of a
//! scan. NGINX breaks ties by weighted round-robin where dynsim (and SGLang) take the lowest
//! number, and weights do not exist here. Envoy's `LEAST_REQUEST`, despite its name, draws two
//! random hosts when weights are equal: that is `power-of-two`, not this policy.

use crate::error::Invalid;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "least-loaded",
    summary: "the fewest requests in flight (the router's own count)",
    build,
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(LeastLoaded))
}

struct LeastLoaded;

impl RoutingPolicy for LeastLoaded {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        loads.least_in_flight().map(Decision::blind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{RequestId, WorkerId};
    use crate::protocol::kv_event::Blocks;
    use crate::rng::RngKind;
    use crate::router::loads::LoadKind;

    #[test]
    fn fewest_in_flight_then_lowest_number() {
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        loads.routed_to(RequestId(0), WorkerId(0), 1);
        loads.routed_to(RequestId(1), WorkerId(0), 1);
        loads.routed_to(RequestId(2), WorkerId(1), 1);
        loads.routed_to(RequestId(3), WorkerId(2), 1);
        let req = RouteRequest {
            id: RequestId(9),
            blocks: Blocks::default(),
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut p = LeastLoaded;
        // In flight: 2, 1, 1: worker 1 (lowest of the tied).
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(1));
        loads.finished(RequestId(3));
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(2));
    }
}
