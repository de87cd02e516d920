//! `power-of-two`: two distinct workers drawn at random (from the run's seeded generator), the
//! one with fewer requests this router has in flight there; the first drawn on a tie (the
//! "power of two choices" balancer). It ignores caches. SGLang's compares polled engine token
//! loads instead (below).
//!
//! Sources: the rule is M. Mitzenmacher, "The Power of Two Choices in Randomized Load
//! Balancing", IEEE Transactions on Parallel and Distributed Systems 12(10), 2001 (after Azar,
//! Broder, Karlin and Upfal's "Balanced Allocations", 1994): two random choices instead of one
//! cut the most loaded server's excess from Θ(log n / log log n) to Θ(log log n). The
//! implementation followed is SGLang's router, `sgl-router/src/policies/power_of_two.rs` at
//! b6f20641 (`PowerOfTwoPolicy::select_worker`): two distinct healthy workers drawn uniformly
//! (the second redrawn until it differs), the lower `load()` wins, the first drawn on a tie
//! (`load1 <= load2`); a single healthy worker is taken without a draw. Envoy's `LEAST_REQUEST`
//! with equal weights is the same idea (`choice_count` 2).
//!
//! Where dynsim differs: the draws come from the run's seeded generator (SGLang uses the
//! thread's), and the second is drawn among the n − 1 others and shifted past the first instead
//! of redrawn: the same uniform distribution over ordered pairs, one draw fewer.
//!
//! The load compared differs. dynsim compares the requests this router has in flight, exact at
//! every decision. SGLang at b6f20641 compares what its `LoadMonitor` (`core/worker_manager.rs`,
//! started with the server; it fetches only while a power-of-two policy exists) last pushed
//! through `update_loads`: each engine's `/get_load` summed over DP ranks, `num_tokens`, the
//! scheduler's KV tokens held by requests (pool − free − evictable cache) plus the prompt tokens
//! of its waiting queue (`python/sglang/srt/managers/scheduler.py`, `get_load`), refreshed every
//! `--worker-load-check-interval` seconds (1 s, the Rust CLI's default in `main.rs`), the same
//! snapshot for every decision in between. Its fallback, `worker.load()`, hardly applies: the
//! monitor's first tick, at start, fills every worker (a failed fetch reads as 0), and the
//! regular HTTP router of that period counts in-flight requests only under `cache_aware`. So
//! SGLang ranks by engine tokens up to an interval old, dynsim by routed requests, live: within
//! an interval SGLang's draws keep favouring whichever worker looked lighter at the last poll.

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
    settings: crate::router::policy::settings_schema::<NoSettings>,
};

fn build(setup: &PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid> {
    setup.settings::<NoSettings>()?;
    Ok(Box::new(PowerOfTwo))
}

struct PowerOfTwo;

impl RoutingPolicy for PowerOfTwo {
    fn decide(&mut self, _req: &RouteRequest<'_>, loads: &LoadBook, rng: &mut SimRng) -> Option<Decision> {
        let n = loads.up_count();
        let worker = if n == 0 {
            return None;
        } else if n == 1 {
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
    fn a_seeded_pair_computed_by_hand() {
        // Four workers, ChaCha seed 2: the first draw is below(4) = 2, the second below(3) = 2,
        // which is at or past the first, so it moves up one: the pair is workers 2 and 3. Seed
        // 7 draws 2 then 1 (below the first, kept): workers 2 and 1. Workers 0 and 1 carry
        // nothing, 2 one request, 3 two: seed 2 picks 2 (the less loaded of the pair, though
        // not the least loaded of all), seed 7 picks 1.
        let mut draws = SimRng::new(RngKind::Chacha, 2);
        assert_eq!((draws.below(4), draws.below(3)), (2, 2));
        let mut draws = SimRng::new(RngKind::Chacha, 7);
        assert_eq!((draws.below(4), draws.below(3)), (2, 1));
        let mut loads = LoadBook::new(4, LoadKind::Routed);
        for (id, w) in [(0, 2), (1, 3), (2, 3)] {
            loads.routed_to(RequestId(id), WorkerId(w), 1);
        }
        let req = RouteRequest {
            id: RequestId(9),
            blocks: Blocks::default(),
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let pick = |seed, loads: &LoadBook| {
            let mut rng = SimRng::new(RngKind::Chacha, seed);
            PowerOfTwo.decide(&req, loads, &mut rng).unwrap().worker
        };
        assert_eq!(pick(2, &loads), WorkerId(2));
        assert_eq!(pick(7, &loads), WorkerId(1));
        // Worker 3 freed of both: 0 < 1, it wins seed 2's pair; a tie goes to the first drawn.
        loads.finished(RequestId(1));
        loads.finished(RequestId(2));
        assert_eq!(pick(2, &loads), WorkerId(3));
        loads.routed_to(RequestId(3), WorkerId(3), 1);
        assert_eq!(pick(2, &loads), WorkerId(2));
    }

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
            blocks: Blocks::default(),
            input_tokens: 0,
            session: None,
            now: 0,
        };
        let mut rng = SimRng::new(RngKind::Chacha, 3);
        let mut p = PowerOfTwo;
        let picks: Vec<usize> = (0..200)
            .map(|_| p.decide(&req, &loads, &mut rng).unwrap().worker.index())
            .collect();
        assert!(!picks.contains(&0));
        assert!(picks.contains(&1) && picks.contains(&2));
        loads.set_up(WorkerId(1), false);
        loads.set_up(WorkerId(2), false);
        assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(0));
    }
}
