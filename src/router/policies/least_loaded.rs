//! `least-loaded`: the worker with the fewest requests this router has in flight there (the
//! classic least-outstanding-requests balancer), the lowest number on ties. It ignores caches.

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
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(LeastLoaded))
}

struct LeastLoaded;

impl RoutingPolicy for LeastLoaded {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Decision {
        let worker = loads
            .least_in_flight()
            .expect("the router decides only when a worker is up");
        Decision::blind(worker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{RequestId, WorkerId};
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
            blocks: &[],
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut p = LeastLoaded;
        // In flight: 2, 1, 1: worker 1 (lowest of the tied).
        assert_eq!(p.decide(&req, &loads, &mut rng).worker, WorkerId(1));
        loads.finished(RequestId(3));
        assert_eq!(p.decide(&req, &loads, &mut rng).worker, WorkerId(2));
    }
}
