//! `rr`: round-robin. Decision *i* goes to worker *i* mod *n*, skipping workers that are down
//! (the next one up in order).

use crate::error::Invalid;
use crate::rng::SimRng;
use crate::router::loads::LoadBook;
use crate::router::policy::{NoSettings, PolicyEntry, PolicySetup, RouteRequest, RoutingPolicy};
use crate::router::Decision;

/// The registry entry.
pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "rr",
    summary: "round-robin: decision i goes to worker i mod n",
    build,
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(RoundRobin { decisions: 0 }))
}

struct RoundRobin {
    decisions: u64,
}

impl RoutingPolicy for RoundRobin {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, _rng: &mut SimRng) -> Option<Decision> {
        if !loads.any_up() {
            return None;
        }
        let n = loads.workers();
        let start = (self.decisions % n as u64) as usize;
        self.decisions += 1;
        let worker = (0..n).map(|k| (start + k) % n).find(|&w| loads.up(w))?;
        Some(Decision::blind(worker))
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
    fn cycles_and_skips_workers_that_are_down() {
        let mut p = build(&PolicySetup {
            name: "rr",
            workers: 3,
            block_size: 16,
            kv_capacity_blocks: None,
            settings: None,
        })
        .unwrap();
        let mut loads = LoadBook::new(3, LoadKind::Routed);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let req = RouteRequest {
            id: RequestId(0),
            blocks: Blocks::default(),
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let mut pick = |loads: &LoadBook| p.decide(&req, loads, &mut rng).unwrap().worker.index();
        assert_eq!([pick(&loads), pick(&loads), pick(&loads)], [0, 1, 2]);
        loads.set_up(WorkerId(1), false);
        assert_eq!([pick(&loads), pick(&loads), pick(&loads)], [0, 2, 2]);
    }
}
