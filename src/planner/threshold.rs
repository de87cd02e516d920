//! `threshold`: a Kubernetes HPA on a load metric. Every interval it takes the pool's mean over
//! its serving workers of `kv` (the share of KV their running requests hold) or `queue`
//! (requests waiting), adds a worker above `scale_up_above` and removes one below
//! `scale_down_below`, and waits while a worker is still starting. The default bands are those
//! of Dynamo's older load planner (`planner/defaults.py` `LoadPlannerDefaults` at
//! ai-dynamo/dynamo 01127723: KV 0.9 / 0.5, prefill queue 5.0 / 0.2).

use super::{clamp, Observation, Planner};
use crate::scenario::{PlannerSettings, Pool, ThresholdMetric};

/// The planner.
pub struct ThresholdPlanner {
    metric: ThresholdMetric,
    up: f64,
    down: f64,
    bounds: Vec<(Pool, usize, usize)>,
}

impl ThresholdPlanner {
    /// A planner of `bounds` (`(pool, min, max)`).
    pub fn new(s: &PlannerSettings, bounds: Vec<(Pool, usize, usize)>) -> Self {
        let (up, down) = s.bands();
        ThresholdPlanner {
            metric: s.metric,
            up,
            down,
            bounds,
        }
    }
}

impl Planner for ThresholdPlanner {
    fn decide(&mut self, obs: &Observation) -> Vec<(Pool, usize)> {
        let mut out = Vec::new();
        for &(pool, min, max) in &self.bounds {
            let Some(p) = obs.pools.iter().find(|p| p.pool == pool) else {
                continue;
            };
            if p.starting > 0 || p.workers.is_empty() {
                continue;
            }
            let mean = p
                .workers
                .iter()
                .map(|w| match self.metric {
                    ThresholdMetric::Kv => w.kv_usage,
                    ThresholdMetric::Queue => f64::from(w.queue),
                })
                .sum::<f64>()
                / p.workers.len() as f64;
            let n = if mean > self.up {
                p.target + 1
            } else if mean < self.down && p.target > 0 {
                p.target - 1
            } else {
                continue;
            };
            let n = clamp(n, min, max);
            if n != p.target {
                out.push((pool, n));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{PoolObservation, WorkerObservation};

    fn obs(kv: &[f64], starting: usize) -> Observation {
        let workers = kv
            .iter()
            .enumerate()
            .map(|(i, &kv_usage)| WorkerObservation {
                name: format!("worker{i}"),
                queue: 0,
                running: 1,
                active_prefill_tokens: 0,
                active_kv_blocks: 10,
                kv_usage,
                ttft_ms: None,
                isl: None,
                itl_ms: None,
            })
            .collect::<Vec<_>>();
        Observation {
            pools: vec![PoolObservation {
                pool: Pool::Workers,
                serving: workers.len(),
                starting,
                draining: 0,
                target: workers.len() + starting,
                gpus_per_worker: 1,
                workers,
            }],
            ..Observation::default()
        }
    }

    #[test]
    fn one_worker_up_above_the_band_and_one_down_below_it_by_hand() {
        let settings: PlannerSettings = toml::from_str("kind = \"threshold\"").unwrap();
        let mut p = ThresholdPlanner::new(&settings, vec![(Pool::Workers, 1, 3)]);
        // Mean KV use (0.95 + 0.9) / 2 = 0.925 > 0.9: one more.
        assert_eq!(p.decide(&obs(&[0.95, 0.9], 0)), vec![(Pool::Workers, 3)]);
        // The same while a worker is still starting: wait for it.
        assert_eq!(p.decide(&obs(&[0.95, 0.9], 1)), vec![]);
        // Already at the most: nothing to do.
        assert_eq!(p.decide(&obs(&[0.95, 0.95, 0.95], 0)), vec![]);
        // (0.3 + 0.6) / 2 = 0.45 < 0.5: one fewer; 0.7 is inside the band.
        assert_eq!(p.decide(&obs(&[0.3, 0.6], 0)), vec![(Pool::Workers, 1)]);
        assert_eq!(p.decide(&obs(&[0.7, 0.7], 0)), vec![]);
        // Never below the fewest.
        assert_eq!(p.decide(&obs(&[0.1], 0)), vec![]);
    }
}
