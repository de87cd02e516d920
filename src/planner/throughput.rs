//! `dynamo-throughput`: Dynamo's throughput-based SLA planner, read from ai-dynamo/dynamo
//! `components/src/dynamo/planner/utils/planner_core.py` (002a7c31), `prefill_planner.py`
//! (002a7c31), `decode_planner.py` (0ff50012) and, for aggregated serving, the newer
//! `core/throughput_scaling.py` (`_throughput_agg`, 0c9050c9).
//!
//! Every interval it feeds the interval's request count, mean prompt and output lengths to its
//! predictors, updates its correction factors and sets each pool's target:
//!
//! - prefill: `ceil(num_req · isl / interval · min(1, p_corr) / (prefill tokens/s per GPU ·
//!   GPUs))`, `p_corr` = observed TTFT / the profile's lone-request TTFT;
//! - decode: `ceil(num_req · osl / interval / (decode tokens/s per GPU at ITL ≤ itl / d_corr ·
//!   GPUs))`, `d_corr` = observed ITL / the profile's ITL at the observed concurrency
//!   (`num_req / workers · request duration / interval`, Little's law);
//! - aggregated workers: `ceil(num_req / interval · min(1, p_corr) / engine rps)`, the engine
//!   rps the most a worker serves with TTFT ≤ ttft and ITL ≤ itl / d_corr.
//!
//! Where dynsim differs: the profile is `bench`'s prediction of the pool's deployment
//! ([`super::capacity`]), not a profiling job; the targets are p90s (`[sla]`), compared with
//! the profile's p90s and the interval's observed p90s, where Dynamo compares averages; an
//! interval without completed requests skips the decision (Dynamo's `is_valid`), as does a
//! pool with workers still starting, since its observed latency is not yet the new size's.

use super::capacity::{bucket, BenchProfile, Profiler};
use super::predictors::Predictor;
use super::{clamp, Observation, Planner};
use crate::scenario::{PlannerSettings, Pool, SlaSettings};

/// The planner.
pub struct ThroughputPlanner {
    num_req: Predictor,
    isl: Predictor,
    osl: Predictor,
    correction: bool,
    p_corr: f64,
    d_corr: f64,
    ttft_ms: f64,
    itl_ms: f64,
    bounds: Vec<(Pool, usize, usize)>,
    profiler: Box<dyn Profiler>,
}

impl ThroughputPlanner {
    /// A planner of `bounds` (`(pool, min, max)`) aiming at `sla`.
    pub fn new(
        s: &PlannerSettings,
        sla: &SlaSettings,
        bounds: Vec<(Pool, usize, usize)>,
        profiler: Box<dyn Profiler>,
    ) -> Self {
        ThroughputPlanner {
            num_req: Predictor::new(s.predictor, s.window),
            isl: Predictor::new(s.predictor, s.window),
            osl: Predictor::new(s.predictor, s.window),
            correction: s.correction,
            p_corr: 1.0,
            d_corr: 1.0,
            ttft_ms: sla.ttft_p90_ms.unwrap_or(f64::INFINITY),
            itl_ms: sla.itl_p90_ms.unwrap_or(f64::INFINITY),
            bounds,
            profiler,
        }
    }

    fn profile(&mut self, pool: Pool, isl: f64, osl: f64) -> Option<BenchProfile> {
        let (ttft, itl) = (self.ttft_ms, self.itl_ms);
        self.profiler
            .profile(pool, bucket(isl), bucket(osl), ttft, itl)
    }

    /// The correction factors from the interval's observed latency (Dynamo's
    /// `_update_correction_factor`, each side kept when it cannot be measured).
    fn correct(&mut self, obs: &Observation, isl: f64, osl: f64) {
        let t = &obs.traffic;
        let (Some(ttft), Some(itl)) = (t.ttft_p90_ms, t.itl_p90_ms) else {
            return;
        };
        let first = self.bounds[0].0;
        if let Some(p) = self.profile(first, isl, osl) {
            self.p_corr = ttft / p.expected_ttft_ms();
        }
        let decode = *self.bounds.last().map(|(p, ..)| p).expect("a pool");
        let workers = obs
            .pools
            .iter()
            .find(|p| p.pool == decode)
            .map_or(0, |p| p.serving);
        if let (Some(duration), true) = (t.request_duration_s, workers > 0) {
            let concurrency = t.requests as f64 / workers as f64 * duration / obs.interval_s;
            if let Some(p) = self.profile(decode, isl, osl) {
                let expected = p.expected_itl_ms(concurrency);
                if expected > 0.0 {
                    self.d_corr = itl / expected;
                }
            }
        }
    }

    /// The corrected ITL target (Dynamo: `itl / d_corr`, the raw target when the factor is
    /// not positive).
    fn itl_target(&self) -> f64 {
        if self.d_corr > 0.0 && self.d_corr.is_finite() {
            self.itl_ms / self.d_corr
        } else {
            self.itl_ms
        }
    }
}

impl Planner for ThroughputPlanner {
    fn decide(&mut self, obs: &Observation) -> Vec<(Pool, usize)> {
        let t = &obs.traffic;
        self.num_req.add(Some(t.requests as f64));
        self.isl.add(t.isl);
        self.osl.add(t.osl);
        if t.completed == 0 || t.isl.is_none() || t.osl.is_none() {
            return Vec::new(); // no traffic to plan from (Dynamo's `is_valid`)
        }
        let (Some(num_req), Some(isl), Some(osl)) = (
            self.num_req.predict(),
            self.isl.predict(),
            self.osl.predict(),
        ) else {
            return Vec::new();
        };
        if self.correction {
            self.correct(obs, t.isl.unwrap_or(isl), t.osl.unwrap_or(osl));
        }
        let interval = obs.interval_s.max(1e-9);
        let prefill_scale = self.p_corr.min(1.0);
        let mut out = Vec::new();
        for (pool, min, max) in self.bounds.clone() {
            if obs.pools.iter().any(|p| p.pool == pool && p.starting > 0) {
                continue;
            }
            let Some(profile) = self.profile(pool, isl, osl) else {
                continue;
            };
            let gpus = profile.gpus as f64;
            let need = match pool {
                Pool::Workers => {
                    let rps = profile.capacity_rps(self.ttft_ms, self.itl_target());
                    num_req / interval * prefill_scale / rps
                }
                Pool::Prefill => {
                    num_req * isl / interval * prefill_scale
                        / (profile.prefill_tps_per_gpu() * gpus)
                }
                Pool::Decode => {
                    num_req * osl
                        / interval
                        / (profile.decode_tps_per_gpu(self.itl_target()) * gpus)
                }
            };
            let n = if need.is_finite() {
                need.ceil() as usize
            } else {
                max
            };
            out.push((pool, clamp(n, min, max)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::capacity::BenchPoint;
    use crate::planner::{PoolObservation, Traffic};
    use crate::scenario::PlannerKind;

    /// A worker that serves 2 requests/s within the SLA, 4 beyond it.
    struct Fixed;

    impl Profiler for Fixed {
        fn profile(&mut self, _: Pool, isl: u32, osl: u32, _: f64, _: f64) -> Option<BenchProfile> {
            let p = |c, ttft, rps| BenchPoint {
                concurrency: c,
                ttft_p90_ms: ttft,
                itl_p90_ms: 10.0,
                rps,
                output_tps: rps * f64::from(osl),
            };
            Some(BenchProfile {
                isl,
                osl,
                gpus: 1,
                points: vec![p(1, 200.0, 1.0), p(2, 400.0, 2.0), p(4, 900.0, 4.0)],
            })
        }
    }

    #[test]
    fn aggregated_workers_are_the_predicted_rate_over_the_capacity_within_the_sla() {
        let settings: PlannerSettings =
            toml::from_str("kind = \"dynamo-throughput\"\ncorrection = false").unwrap();
        assert_eq!(settings.kind, PlannerKind::DynamoThroughput);
        let sla = SlaSettings {
            ttft_p90_ms: Some(500.0),
            itl_p90_ms: None,
        };
        let mut planner = ThroughputPlanner::new(
            &settings,
            &sla,
            vec![(Pool::Workers, 1, 8)],
            Box::new(Fixed),
        );
        let obs = |requests| Observation {
            t_s: 180.0,
            interval_s: 180.0,
            traffic: Traffic {
                requests,
                completed: requests,
                isl: Some(1000.0),
                osl: Some(100.0),
                ttft_p90_ms: Some(300.0),
                itl_p90_ms: Some(10.0),
                ..Traffic::default()
            },
            pools: vec![PoolObservation {
                pool: Pool::Workers,
                serving: 2,
                starting: 0,
                draining: 0,
                target: 2,
                gpus_per_worker: 1,
                workers: Vec::new(),
            }],
        };
        // 1,800 requests in 180 s = 10 per second; 2 per worker within 500 ms: 5 workers.
        assert_eq!(planner.decide(&obs(1800)), vec![(Pool::Workers, 5)]);
        // 50 per second would need 25: capped at 8.
        assert_eq!(planner.decide(&obs(9000)), vec![(Pool::Workers, 8)]);
    }
}
