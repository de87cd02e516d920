//! A scenario's scaling: workers that join and leave during the run (`[[scale]]` steps for
//! what-if runs, or a `[planner]` in the loop), the SLA a run is measured against (`[sla]`),
//! and their checks.

use serde::{Deserialize, Serialize};

use super::{Pool, Scenario};
use crate::error::Invalid;

/// `[[scale]]`: at `at_s`, the pool's target becomes `workers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScaleStep {
    /// When, s from the start of the run.
    pub at_s: f64,
    /// Which pool: `workers` (aggregated), `prefill` or `decode` (disaggregated).
    pub pool: Pool,
    /// The pool's new size (workers starting or serving; 0 allowed).
    pub workers: usize,
    /// How a worker leaves when the pool shrinks (drain).
    #[serde(default)]
    pub leave: Leave,
}

/// How a leaving worker goes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Leave {
    /// It takes no new request and finishes those it holds (a pod's graceful termination).
    #[default]
    Drain,
    /// It goes at once; its requests go back to the router and are routed again (counted in
    /// `rerouted`).
    Remove,
}

/// The shortest `planner.adjustment_interval_s`, seconds: a tenth of a second is 864,000
/// decisions over a simulated day.
pub const MIN_ADJUSTMENT_INTERVAL_S: f64 = 0.1;

/// `[planner]`: an autoscaler acting every `adjustment_interval_s` on what it observes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannerSettings {
    /// `dynamo-throughput` (Dynamo's SLA planner: predicted load over the per-worker capacity
    /// that meets `[sla]`), `dynamo-load` (its load-based mode: online regression of latency on
    /// each worker's active prefill tokens and KV blocks) or `threshold` (an HPA on queue or KV
    /// bands). The `planner` module has each.
    pub kind: PlannerKind,
    /// Seconds between decisions, at least 0.1 (`dynamo-throughput` 180, Dynamo's default;
    /// `dynamo-load` 5, Dynamo's `loadbased_adjustment_interval`; `threshold` 30).
    #[serde(default)]
    pub adjustment_interval_s: Option<f64>,
    /// Fewest workers per pool, at least 1 (1, Dynamo's `min_endpoint`).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub min_workers: usize,
    /// Most workers per pool the planner may ask for (absent: the pool's size at the start).
    #[serde(default)]
    pub max_workers: Option<usize>,
    /// `dynamo-throughput`: the load predictor, `constant`, `moving-average` or `kalman`
    /// (constant).
    #[serde(default)]
    pub predictor: PredictorKind,
    /// `moving-average`: intervals averaged (5).
    #[serde(default = "five")]
    #[schemars(range(min = 1))]
    pub window: usize,
    /// `dynamo-throughput`: correct the capacity by observed / expected latency (true).
    #[serde(default = "yes")]
    pub correction: bool,
    /// `dynamo-load`: observations the regressions keep (50).
    #[serde(default = "fifty")]
    #[schemars(range(min = 2))]
    pub learning_window: usize,
    /// `dynamo-load`: observations before the first decision (5).
    #[serde(default = "five")]
    #[schemars(range(min = 2))]
    pub min_observations: usize,
    /// `dynamo-load`: scale down only when every worker is below this percentage of the
    /// target (scaled to one worker fewer) (80).
    #[serde(default = "eighty")]
    pub scale_down_sensitivity: f64,
    /// `threshold`: what it watches, `kv` (KV utilisation of running requests, 0..1) or
    /// `queue` (requests waiting per worker) (kv).
    #[serde(default)]
    pub metric: ThresholdMetric,
    /// `threshold`: add a worker when the pool's mean is above this (kv 0.9, queue 5.0:
    /// Dynamo's older load planner's defaults).
    #[serde(default)]
    pub scale_up_above: Option<f64>,
    /// `threshold`: remove one when it is below this (kv 0.5, queue 0.2).
    #[serde(default)]
    pub scale_down_below: Option<f64>,
    /// How a worker the planner removes leaves (drain).
    #[serde(default)]
    pub leave: Leave,
}

impl PlannerSettings {
    /// `threshold`'s `(scale up above, scale down below)` band, its defaults filled in (those
    /// of Dynamo's older load planner: KV 0.9 / 0.5, queue 5.0 / 0.2).
    pub fn bands(&self) -> (f64, f64) {
        let (up, down) = match self.metric {
            ThresholdMetric::Kv => (0.9, 0.5),
            ThresholdMetric::Queue => (5.0, 0.2),
        };
        (
            self.scale_up_above.unwrap_or(up),
            self.scale_down_below.unwrap_or(down),
        )
    }
}

fn one() -> usize {
    1
}
fn five() -> usize {
    5
}
fn fifty() -> usize {
    50
}
fn eighty() -> f64 {
    80.0
}
fn yes() -> bool {
    true
}

/// `planner.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PlannerKind {
    /// Dynamo's throughput-based SLA planner.
    DynamoThroughput,
    /// Dynamo's load-based planner.
    DynamoLoad,
    /// Queue or KV bands, as a Kubernetes HPA.
    Threshold,
}

impl PlannerKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            PlannerKind::DynamoThroughput => "dynamo-throughput",
            PlannerKind::DynamoLoad => "dynamo-load",
            PlannerKind::Threshold => "threshold",
        }
    }
}

/// `planner.predictor`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PredictorKind {
    /// The next interval like the last.
    #[default]
    Constant,
    /// The mean of the last `window` intervals.
    MovingAverage,
    /// A local linear trend Kalman filter (Dynamo's `kalman`).
    Kalman,
}

/// `planner.metric`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ThresholdMetric {
    /// KV utilisation of running requests.
    #[default]
    Kv,
    /// Requests waiting per worker.
    Queue,
}

/// `[sla]`: the targets a run is measured against (`sla_attainment`, `goodput_rps`) and a
/// planner aims at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SlaSettings {
    /// A request meets the SLA only if its TTFT is at most this, ms; the planner aims the
    /// interval's TTFT p90 at it.
    pub ttft_p90_ms: Option<f64>,
    /// A request meets it only if its mean inter-token latency is at most this, ms; the planner
    /// aims the interval's ITL p90 at it.
    pub itl_p90_ms: Option<f64>,
}

impl SlaSettings {
    /// Whether any target is set.
    pub fn is_set(&self) -> bool {
        self.ttft_p90_ms.is_some() || self.itl_p90_ms.is_some()
    }
}

impl Scenario {
    /// Whether workers may join and leave during the run.
    pub fn scales(&self) -> bool {
        !self.scale.is_empty() || self.planner.is_some() || self.cluster.max_workers.is_some()
    }

    /// The pools this scenario has: `workers`, or `prefill` and `decode`.
    pub fn pools(&self) -> &'static [Pool] {
        if self.disagg.enabled {
            &[Pool::Prefill, Pool::Decode]
        } else {
            &[Pool::Workers]
        }
    }

    /// A pool's workers at the start.
    pub fn initial_workers(&self, pool: Pool) -> usize {
        match pool {
            Pool::Workers => self.cluster.workers,
            Pool::Prefill => self.disagg.prefill_workers,
            Pool::Decode => self.disagg.decode_workers,
        }
    }

    /// The most workers a pool may have starting or serving at once: its size at the start,
    /// the largest `[[scale]]` target and the planner's `max_workers`.
    pub fn max_workers(&self, pool: Pool) -> usize {
        let scheduled = self
            .scale
            .iter()
            .filter(|s| s.pool == pool)
            .map(|s| s.workers);
        scheduled
            .chain(self.planner_max_workers(pool))
            .chain(self.cluster.max_workers)
            .chain([self.initial_workers(pool)])
            .max()
            .unwrap_or(0)
    }

    /// The most workers the planner may ask of a pool: `[planner] max_workers` (absent: the
    /// pool's size at the start). A `[[scale]]` step or `cluster.max_workers` above it makes
    /// room for more, not a higher ceiling for the planner.
    pub fn planner_max_workers(&self, pool: Pool) -> Option<usize> {
        self.planner
            .as_ref()
            .map(|p| p.max_workers.unwrap_or(self.initial_workers(pool)))
    }

    /// Worker slots a pool is built with: as many as it has when it does not scale, else twice
    /// its most (draining workers hold their slot until they are done, so a pool that drains
    /// while it grows back needs room for both).
    pub fn pool_slots(&self, pool: Pool) -> usize {
        if self.scales() {
            2 * self.max_workers(pool)
        } else {
            self.initial_workers(pool)
        }
    }
}

fn bad(key: &str, value: impl ToString, problem: &str) -> Invalid {
    Invalid {
        key: key.to_string(),
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

fn positive(key: &str, x: f64) -> Result<(), Invalid> {
    if !(x.is_finite() && x > 0.0) {
        return Err(bad(key, format!("{x:?}"), "must be a finite number > 0"));
    }
    Ok(())
}

/// Checks `[[scale]]`, `[planner]`, `[sla]` and `cluster.startup_s`.
pub fn validate(s: &Scenario) -> Result<(), Invalid> {
    let startup = s.cluster.startup_s;
    if !(startup.is_finite() && (0.0..=1e9).contains(&startup)) {
        return Err(bad(
            "cluster.startup_s",
            format!("{startup:?}"),
            "must be a finite number in 0..=1e9 s",
        ));
    }
    for (key, v) in [
        ("sla.ttft_p90_ms", s.sla.ttft_p90_ms),
        ("sla.itl_p90_ms", s.sla.itl_p90_ms),
    ] {
        if let Some(x) = v {
            positive(key, x)?;
        }
    }
    if s.scales() {
        if !s.faults.is_empty() {
            return Err(bad(
                "faults",
                "",
                "cannot be combined with [[scale]] or [planner] (a restart would bring back a \
                 worker that left)",
            ));
        }
        if s.disagg.enabled && s.disagg.colocated {
            return Err(bad(
                "disagg.colocated",
                "true",
                "cannot scale: a colocated GPU is one prefill and one decode worker",
            ));
        }
    }
    if let Some(max) = s.cluster.max_workers {
        if max > crate::limits::MAX_WORKERS / 2 {
            return Err(bad(
                "cluster.max_workers",
                max,
                &format!("must be at most {}", crate::limits::MAX_WORKERS / 2),
            ));
        }
    }
    for (i, step) in s.scale.iter().enumerate() {
        let key = |k: &str| format!("scale[{i}].{k}");
        if !(step.at_s.is_finite() && (0.0..=1e9).contains(&step.at_s)) {
            return Err(bad(
                &key("at_s"),
                format!("{:?}", step.at_s),
                "must be a finite number in 0..=1e9 s",
            ));
        }
        if !s.pools().contains(&step.pool) {
            let pools = if s.disagg.enabled {
                "prefill or decode (disaggregated)"
            } else {
                "workers (aggregated)"
            };
            return Err(bad(
                &key("pool"),
                format!("{:?}", step.pool.name()),
                &format!("is not a pool of this cluster: {pools}"),
            ));
        }
        if step.workers > crate::limits::MAX_WORKERS / 2 {
            return Err(bad(
                &key("workers"),
                step.workers,
                &format!("must be at most {}", crate::limits::MAX_WORKERS / 2),
            ));
        }
    }
    let Some(p) = &s.planner else {
        return Ok(());
    };
    if let Some(i) = p.adjustment_interval_s {
        if !(i.is_finite() && (MIN_ADJUSTMENT_INTERVAL_S..=1e9).contains(&i)) {
            return Err(bad(
                "planner.adjustment_interval_s",
                format!("{i:?}"),
                &format!(
                    "must be a number of seconds in {MIN_ADJUSTMENT_INTERVAL_S}..=1e9 (real \
                     planners decide every 5 s to a few minutes; each decision observes every \
                     worker, so a shorter interval only costs the run time)"
                ),
            ));
        }
    }
    if let Some(max) = p.max_workers {
        if max < p.min_workers.max(1) {
            return Err(bad(
                "planner.max_workers",
                max,
                &format!("must be at least min_workers ({}) and 1", p.min_workers),
            ));
        }
        if max > crate::limits::MAX_WORKERS / 2 {
            return Err(bad(
                "planner.max_workers",
                max,
                &format!("must be at most {}", crate::limits::MAX_WORKERS / 2),
            ));
        }
    }
    if p.min_workers == 0 {
        return Err(bad(
            "planner.min_workers",
            0,
            "must be at least 1 (Dynamo's min_endpoint): a planner decides from the workers it \
             observes, so a pool it scaled to 0 could never be scaled back",
        ));
    }
    for pool in s.pools() {
        if Some(p.min_workers) > s.planner_max_workers(*pool) {
            return Err(bad(
                "planner.min_workers",
                p.min_workers,
                "must be at most max_workers (absent: the pool's size at the start)",
            ));
        }
    }
    if p.window == 0 {
        return Err(bad("planner.window", 0, "must be at least 1"));
    }
    if p.learning_window < 2 {
        return Err(bad(
            "planner.learning_window",
            p.learning_window,
            "must be at least 2 (a line needs two points)",
        ));
    }
    if p.min_observations < 2 {
        return Err(bad(
            "planner.min_observations",
            p.min_observations,
            "must be at least 2 (a line needs two points)",
        ));
    }
    if p.kind == PlannerKind::DynamoLoad && p.min_observations > p.learning_window {
        // Blame the one of the two that was changed from its default.
        return Err(if p.learning_window != fifty() {
            bad(
                "planner.learning_window",
                p.learning_window,
                &format!(
                    "must be at least min_observations ({}): the regressions keep \
                     learning_window points and fit from min_observations, so the planner \
                     would never decide",
                    p.min_observations
                ),
            )
        } else {
            bad(
                "planner.min_observations",
                p.min_observations,
                &format!(
                    "must be at most learning_window ({}): the regressions keep that many \
                     points and fit from min_observations, so the planner would never decide",
                    p.learning_window
                ),
            )
        });
    }
    if !(p.scale_down_sensitivity.is_finite() && (0.0..=100.0).contains(&p.scale_down_sensitivity))
    {
        return Err(bad(
            "planner.scale_down_sensitivity",
            format!("{:?}", p.scale_down_sensitivity),
            "must be a percentage in 0..=100",
        ));
    }
    if matches!(
        p.kind,
        PlannerKind::DynamoThroughput | PlannerKind::DynamoLoad
    ) && !s.sla.is_set()
    {
        return Err(bad(
            "planner.kind",
            format!("{:?}", p.kind.name()),
            "plans for an SLA: set [sla] ttft_p90_ms and/or itl_p90_ms",
        ));
    }
    if p.kind == PlannerKind::Threshold {
        let (up, down) = p.bands();
        if !(down.is_finite() && down >= 0.0) {
            return Err(bad(
                "planner.scale_down_below",
                format!("{down:?}"),
                "must be a finite number >= 0",
            ));
        }
        if !up.is_finite() || (up <= down && p.scale_up_above.is_some()) {
            return Err(bad(
                "planner.scale_up_above",
                format!("{up:?}"),
                &format!("must be a finite number above scale_down_below ({down:?})"),
            ));
        }
        if up <= down {
            return Err(bad(
                "planner.scale_down_below",
                format!("{down:?}"),
                &format!("must be below scale_up_above ({up:?})"),
            ));
        }
    }
    Ok(())
}
