//! `rr`: round-robin. Decision *i* goes to the (*i* mod *n*)-th of the *n* workers up, in
//! worker order, as Dynamo's `PushRouter::round_robin` picks `free_ids()[counter % count]`
//! (`lib/runtime/src/pipeline/network/egress/push_router.rs`, ai-dynamo/dynamo at 020ac7f).
//! A worker that is down, or a slot a scaling pool keeps empty, takes no turn: before
//! Dec 5 2026 decision *i* went to slot *i* mod (every slot) or the next one up, so the worker
//! after a run of empty slots took their turns too (with `cluster.max_workers = 8`, 93 of 100
//! requests went to the first of two workers).

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
        let k = (self.decisions % loads.up_count() as u64) as usize;
        self.decisions += 1;
        Some(Decision::blind(loads.nth_up(k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{RequestId, WorkerId};
    use crate::protocol::kv_event::Blocks;
    use crate::rng::RngKind;
    use crate::router::loads::LoadKind;

    /// The policy over `workers` slots, a load book of them all up, and a request (rr reads
    /// nothing of it).
    fn setup(workers: usize) -> (Box<dyn RoutingPolicy>, LoadBook, RouteRequest<'static>) {
        let p = build(&PolicySetup {
            name: "rr",
            workers,
            block_size: 16,
            kv_capacity_blocks: None,
            settings: None,
        })
        .unwrap();
        let req = RouteRequest {
            id: RequestId(0),
            blocks: Blocks::default(),
            input_tokens: 0,
            session: None,
            now: 0,
        };
        (p, LoadBook::new(workers, LoadKind::Routed), req)
    }

    #[test]
    fn cycles_and_skips_workers_that_are_down() {
        let (mut p, mut loads, req) = setup(3);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut pick = |loads: &LoadBook| p.decide(&req, loads, &mut rng).unwrap().worker.index();
        assert_eq!([pick(&loads), pick(&loads), pick(&loads)], [0, 1, 2]);
        // Decisions 3, 4, 5 and 6 over the two workers up (0 and 2): 3 mod 2 = 1 is worker 2.
        loads.set_up(WorkerId(1), false);
        let four = [pick(&loads), pick(&loads), pick(&loads), pick(&loads)];
        assert_eq!(four, [2, 0, 2, 0]);
    }

    #[test]
    fn empty_slots_take_no_turn() {
        // Two workers up among eight slots (a scaling pool's spare slots): an even split, where
        // the old walk from slot i mod 8 to the next one up sent 7 of every 8 to worker 0.
        let (mut p, mut loads, req) = setup(8);
        for w in 2..8 {
            loads.set_up(WorkerId(w), false);
        }
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut counts = [0; 8];
        for _ in 0..100 {
            counts[p.decide(&req, &loads, &mut rng).unwrap().worker.index()] += 1;
        }
        assert_eq!(counts, [50, 50, 0, 0, 0, 0, 0, 0]);
    }
}
