//! `power-of-two`: two distinct workers drawn at random (from the run's seeded generator), the
//! one with fewer requests this router has in flight there; the first drawn on a tie (the
//! "power of two choices" balancer). It ignores caches.

use crate::error::Invalid;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "power-of-two",
    summary: "two random workers, the one with fewer requests in flight",
    build,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(PowerOfTwo))
}

struct PowerOfTwo;

impl RoutingPolicy for PowerOfTwo {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Decision {
        let n = loads.up_count();
        let worker = if n == 1 {
            loads.nth_up(0)
        } else {
            let i = rng.below(n);
            let mut j = rng.below(n - 1);
            if j >= i {
                j += 1;
            }
            let (a, b) = (loads.nth_up(i), loads.nth_up(j));
            if loads.in_flight(b) < loads.in_flight(a) {
                b
            } else {
                a
            }
        };
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
    fn of_two_draws_the_less_loaded_wins() {
        // Worker 0 carries 5 requests, 1 and 2 none: whenever worker 0 is drawn with another,
        // the other wins, so worker 0 is chosen only if drawn twice, which distinct draws never
        // do.
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        for r in 0..5 {
            loads.routed_to(RequestId(r), WorkerId(0), 1);
        }
        let req = RouteRequest {
            id: RequestId(9),
            blocks: &[],
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 3);
        let mut p = PowerOfTwo;
        let picks: Vec<usize> = (0..200)
            .map(|_| p.decide(&req, &loads, &mut rng).worker.index())
            .collect();
        assert!(!picks.contains(&0));
        assert!(picks.contains(&1) && picks.contains(&2));
        loads.set_up(WorkerId(1), false);
        loads.set_up(WorkerId(2), false);
        assert_eq!(p.decide(&req, &loads, &mut rng).worker, WorkerId(0));
    }
}
