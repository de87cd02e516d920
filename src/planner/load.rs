//! `dynamo-load`: Dynamo's load-based planner, read from ai-dynamo/dynamo
//! `components/src/dynamo/planner/utils/load_based_regression.py` (ef9dc051), `agg_planner.py`,
//! `prefill_planner.py` and `decode_planner.py` (0ff50012 / 002a7c31).
//!
//! Each interval every serving worker adds an observation to two sliding-window linear
//! regressions (`learning_window` points, fitted once `min_observations` are in): TTFT against
//! its active prefill tokens plus the mean prompt (`x = active_prefill_tokens + isl`) and ITL
//! against its active KV blocks. Inverting each at the SLA gives the load a worker may carry
//! (`x_sla = (target − intercept) / slope`; a non-positive slope falls back to the smallest
//! load observed under the target). A pool grows by one when *every* worker is above it, and
//! shrinks by one when every worker is below `x_sla · (n−1)/n · sensitivity`. Aggregated
//! workers grow when either side says so and shrink when both do. A pool with workers still
//! starting is left alone (Dynamo applies a scaling and waits for it: `blocking=True`). A target
//! at or below 0 (the TTFT SLA out of reach at the current prompt length, or the ITL one out
//! of reach at any load) makes no decision, except in a prefill pool: Dynamo's
//! `prefill_planner.py` (002a7c31) has no such check, so every worker is above the target and
//! the pool grows by one each interval. As in Dynamo, `min_workers` and `max_workers` clamp a
//! decision: a pool that starts outside them moves only when a verdict moves it.
//!
//! Where dynsim differs: the observations are the interval's per-worker means of the requests
//! each worker completed, and its instantaneous load at the decision (Dynamo averages
//! `loadbased_metric_samples` scrapes of the router's per-worker gauges); the targets are the
//! `[sla]` p90s.

use std::collections::VecDeque;

use super::{clamp, Observation, Planner, WorkerObservation};
use crate::scenario::{PlannerSettings, Pool, SlaSettings};

/// A sliding-window least-squares line `y = slope · x + intercept`.
#[derive(Clone, Debug)]
pub struct Regression {
    window: usize,
    min: usize,
    points: VecDeque<(f64, f64)>,
}

impl Regression {
    /// A regression over the last `window` points, fitted from `min` of them.
    pub fn new(window: usize, min: usize) -> Self {
        Regression {
            window,
            min,
            points: VecDeque::new(),
        }
    }

    /// Adds an observation.
    pub fn add(&mut self, x: f64, y: f64) {
        if self.points.len() == self.window {
            self.points.pop_front();
        }
        self.points.push_back((x, y));
    }

    /// `(slope, intercept)`, once enough points are in (and they are not all at one `x`).
    pub fn fit(&self) -> Option<(f64, f64)> {
        if self.points.len() < self.min {
            return None;
        }
        let n = self.points.len() as f64;
        let (sx, sy) = self
            .points
            .iter()
            .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
        let (mx, my) = (sx / n, sy / n);
        let (sxx, sxy) = self.points.iter().fold((0.0, 0.0), |(a, b), &(x, y)| {
            (a + (x - mx) * (x - mx), b + (x - mx) * (y - my))
        });
        if sxx == 0.0 {
            return Some((0.0, my));
        }
        let slope = sxy / sxx;
        Some((slope, my - slope * mx))
    }

    /// The load at which the line reaches `target` (>= 0), or with a non-positive slope the
    /// smallest load observed under the target (or the smallest at all).
    pub fn x_at(&self, target: f64) -> Option<f64> {
        let (slope, intercept) = self.fit()?;
        if slope > 0.0 {
            return Some(((target - intercept) / slope).max(0.0));
        }
        let below = self
            .points
            .iter()
            .filter(|p| p.1 < target)
            .map(|p| p.0)
            .fold(f64::INFINITY, f64::min);
        let x = if below.is_finite() {
            below
        } else {
            self.points
                .iter()
                .map(|p| p.0)
                .fold(f64::INFINITY, f64::min)
        };
        Some(x.max(0.0))
    }
}

/// Up, down or nothing, for one side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Up,
    Down,
    Stay,
}

/// The planner.
pub struct LoadPlanner {
    ttft: Regression,
    itl: Regression,
    ttft_ms: Option<f64>,
    itl_ms: Option<f64>,
    sensitivity: f64,
    bounds: Vec<(Pool, usize, usize)>,
}

impl LoadPlanner {
    /// A planner of `bounds` (`(pool, min, max)`) aiming at `sla`.
    pub fn new(s: &PlannerSettings, sla: &SlaSettings, bounds: Vec<(Pool, usize, usize)>) -> Self {
        LoadPlanner {
            ttft: Regression::new(s.learning_window, s.min_observations),
            itl: Regression::new(s.learning_window, s.min_observations),
            ttft_ms: sla.ttft_p90_ms,
            itl_ms: sla.itl_p90_ms,
            sensitivity: s.scale_down_sensitivity / 100.0,
            bounds,
        }
    }

    /// The verdict for `workers` whose loads are `load(w)`, at most `x_sla` each. A target at
    /// or below 0 (the SLA out of reach at the current prompts) means no decision when
    /// `skip_unreachable`, as Dynamo's aggregated and decode planners do; its prefill planner
    /// has no such check, so every worker is above the target and the pool grows.
    fn verdict(
        &self,
        workers: &[WorkerObservation],
        x_sla: Option<f64>,
        skip_unreachable: bool,
        load: impl Fn(&WorkerObservation) -> f64,
    ) -> Verdict {
        let Some(x) = x_sla.filter(|&x| x > 0.0 || !skip_unreachable) else {
            return Verdict::Stay;
        };
        if workers.is_empty() {
            return Verdict::Stay;
        }
        if workers.iter().all(|w| load(w) > x) {
            return Verdict::Up;
        }
        let n = workers.len() as f64;
        let boundary = x * (n - 1.0) / n * self.sensitivity;
        if workers.len() > 1 && workers.iter().all(|w| load(w) < boundary) {
            return Verdict::Down;
        }
        Verdict::Stay
    }
}

impl Planner for LoadPlanner {
    fn decide(&mut self, obs: &Observation) -> Vec<(Pool, usize)> {
        let mut isl_sum = (0.0, 0usize);
        for p in &obs.pools {
            for w in &p.workers {
                if let (Some(ttft), Some(isl)) = (w.ttft_ms, w.isl) {
                    self.ttft.add(w.active_prefill_tokens as f64 + isl, ttft);
                    isl_sum = (isl_sum.0 + isl, isl_sum.1 + 1);
                }
                if let Some(itl) = w.itl_ms.filter(|_| w.active_kv_blocks > 0) {
                    self.itl.add(w.active_kv_blocks as f64, itl);
                }
            }
        }
        let avg_isl = if isl_sum.1 > 0 {
            isl_sum.0 / isl_sum.1 as f64
        } else {
            obs.traffic.isl.unwrap_or(0.0)
        };
        let prefill_x = self
            .ttft_ms
            .and_then(|t| self.ttft.x_at(t))
            .map(|x| x - avg_isl);
        let decode_x = self.itl_ms.and_then(|t| self.itl.x_at(t));
        let mut out = Vec::new();
        for &(pool, min, max) in &self.bounds {
            let Some(p) = obs.pools.iter().find(|p| p.pool == pool) else {
                continue;
            };
            if p.starting > 0 || p.workers.is_empty() {
                continue;
            }
            let prefill = self.verdict(&p.workers, prefill_x, pool != Pool::Prefill, |w| {
                w.active_prefill_tokens as f64
            });
            let decode = self.verdict(&p.workers, decode_x, true, |w| w.active_kv_blocks as f64);
            let verdict = match pool {
                Pool::Prefill => prefill,
                Pool::Decode => decode,
                Pool::Workers => match (prefill, decode) {
                    (Verdict::Up, _) | (_, Verdict::Up) => Verdict::Up,
                    (Verdict::Down, Verdict::Down) => Verdict::Down,
                    // One side without a target: the other decides alone.
                    (Verdict::Down, Verdict::Stay) if self.itl_ms.is_none() => Verdict::Down,
                    (Verdict::Stay, Verdict::Down) if self.ttft_ms.is_none() => Verdict::Down,
                    _ => Verdict::Stay,
                },
            };
            let n = match verdict {
                Verdict::Up => p.target + 1,
                Verdict::Down => p.target.saturating_sub(1),
                Verdict::Stay => continue,
            };
            let n = clamp(n, min, max);
            if n != p.target {
                out.push((pool, n));
            }
        }
        out
    }

    fn unready(&self) -> Option<String> {
        let sides = [
            ("TTFT", self.ttft_ms, &self.ttft),
            ("ITL", self.itl_ms, &self.itl),
        ];
        let targeted = sides.iter().filter(|(_, target, _)| target.is_some());
        // A side that fits can decide (an aggregated pool grows on either side's word).
        if targeted.clone().any(|(_, _, r)| r.fit().is_some()) {
            return None;
        }
        let counts: Vec<String> = targeted
            .map(|(name, _, r)| format!("{name} {}", r.points.len()))
            .collect();
        Some(format!(
            "its regressions never had planner.min_observations = {} points ({} by the last \
             decision)",
            self.ttft.min,
            counts.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unready while no side with a target has its points; ready once one has.
    #[test]
    fn it_says_why_it_cannot_decide_until_a_regression_fits() {
        let settings: PlannerSettings =
            toml::from_str("kind = \"dynamo-load\"\nmin_observations = 3").unwrap();
        let sla = SlaSettings {
            ttft_p90_ms: Some(100.0),
            ..SlaSettings::default()
        };
        let mut p = LoadPlanner::new(&settings, &sla, vec![(Pool::Workers, 1, 4)]);
        p.itl.add(1.0, 1.0);
        p.itl.add(2.0, 2.0);
        p.itl.add(3.0, 3.0);
        p.ttft.add(1.0, 10.0);
        assert_eq!(
            p.unready().as_deref(),
            Some(
                "its regressions never had planner.min_observations = 3 points (TTFT 1 by the \
                 last decision)"
            ),
            "the ITL regression fits, but has no target"
        );
        p.ttft.add(2.0, 20.0);
        p.ttft.add(3.0, 30.0);
        assert_eq!(p.unready(), None);
    }

    #[test]
    fn the_regression_is_inverted_at_the_sla_by_hand() {
        // TTFT = 0.1 x + 20: at 100 ms a worker may carry 800 tokens.
        let mut r = Regression::new(50, 5);
        for x in [100.0, 200.0, 300.0, 400.0] {
            r.add(x, 0.1 * x + 20.0);
        }
        assert_eq!(r.x_at(100.0), None, "4 of 5 observations");
        r.add(500.0, 70.0);
        let (slope, intercept) = r.fit().unwrap();
        assert!((slope - 0.1).abs() < 1e-12 && (intercept - 20.0).abs() < 1e-9);
        assert!((r.x_at(100.0).unwrap() - 800.0).abs() < 1e-6);
        // A falling line: the smallest load seen under the target.
        let mut flat = Regression::new(3, 2);
        flat.add(10.0, 50.0);
        flat.add(20.0, 40.0);
        assert_eq!(flat.x_at(45.0), Some(20.0));
    }

    fn worker(active: u64, ttft_ms: Option<f64>) -> WorkerObservation {
        WorkerObservation {
            name: String::new(),
            queue: 0,
            running: 1,
            active_prefill_tokens: active,
            active_kv_blocks: 0,
            kv_usage: 0.0,
            ttft_ms,
            isl: ttft_ms.map(|_| 300.0),
            itl_ms: None,
        }
    }

    fn obs(workers: Vec<WorkerObservation>) -> Observation {
        Observation {
            pools: vec![crate::planner::PoolObservation {
                pool: Pool::Workers,
                serving: workers.len(),
                starting: 0,
                draining: 0,
                target: workers.len(),
                gpus_per_worker: 1,
                workers,
            }],
            // The interval's mean prompt, for decisions without a completed request.
            traffic: crate::planner::Traffic {
                isl: Some(300.0),
                ..Default::default()
            },
            ..Observation::default()
        }
    }

    /// The planner of one pool of 1 to 4 workers, fitting from 2 observations, aiming at a TTFT
    /// p90 of `ttft_ms`.
    fn planner(ttft_ms: f64, pool: Pool) -> LoadPlanner {
        let settings: PlannerSettings =
            toml::from_str("kind = \"dynamo-load\"\nmin_observations = 2").unwrap();
        let sla = SlaSettings {
            ttft_p90_ms: Some(ttft_ms),
            itl_p90_ms: None,
        };
        LoadPlanner::new(&settings, &sla, vec![(pool, 1, 4)])
    }

    #[test]
    fn a_worker_is_added_when_every_worker_is_past_the_load_the_sla_allows_by_hand() {
        let mut p = planner(100.0, Pool::Workers);
        // Two points on TTFT = 0.1 (active + isl) + 20, isl 300: (500, 70) and (900, 110).
        // At 100 ms, x = 800, so a worker may hold 800 - 300 = 500 active prefill tokens.
        // Loads 200 and 600: not all above 500; the scale-down line is 500 · 1/2 · 0.8 = 200,
        // and 200 is not below it: stay.
        let first = obs(vec![worker(200, Some(70.0)), worker(600, Some(110.0))]);
        assert_eq!(p.decide(&first), vec![]);
        // Both above 500: one more worker.
        assert_eq!(
            p.decide(&obs(vec![worker(550, None), worker(700, None)])),
            vec![(Pool::Workers, 3)]
        );
        // Both below 200: one fewer.
        assert_eq!(
            p.decide(&obs(vec![worker(150, None), worker(10, None)])),
            vec![(Pool::Workers, 1)]
        );
    }

    #[test]
    fn an_unreachable_ttft_target_grows_a_prefill_pool_and_leaves_an_aggregated_one() {
        // TTFT = 0.1 (active + isl) + 20 again: 40 ms at x = 200, below the 300-token prompt,
        // so the target is 200 - 300 = -100 active tokens.
        let points = || vec![worker(200, Some(70.0)), worker(600, Some(110.0))];
        let mut agg = planner(40.0, Pool::Workers);
        assert_eq!(
            agg.decide(&obs(points())),
            vec![],
            "agg_planner.py: target <= 0, no decision"
        );
        let mut disagg = planner(40.0, Pool::Prefill);
        let mut prefill = obs(points());
        prefill.pools[0].pool = Pool::Prefill;
        // prefill_planner.py has no such check: every worker (200, 600 > -100) is above it.
        assert_eq!(disagg.decide(&prefill), vec![(Pool::Prefill, 3)]);
    }
}
