//! Planners: autoscalers in the loop. Every adjustment interval a planner sees what a real one
//! observes ([`Observation`]: per worker its queue, active prefill tokens and KV use; the
//! interval's request rate, lengths, TTFT and ITL) and may set each pool's target, a decision
//! clamped to `min_workers..=max_workers`; the run starts and retires workers accordingly
//! ([`crate::cluster::membership`]).
//!
//! - [`throughput`]: `dynamo-throughput`, Dynamo's throughput-based SLA planner: predicted
//!   load over the per-worker capacity that meets the SLA, corrected by observed / expected
//!   latency. The capacity comes from `bench` predictions of the pool's own deployment
//!   ([`capacity::BenchProfile`]), where Dynamo runs a profiling job.
//! - [`load`]: `dynamo-load`, Dynamo's load-based mode: online regressions of TTFT on each
//!   worker's active prefill tokens and of ITL on its active KV blocks, one worker up or down.
//! - [`threshold`]: `threshold`, an HPA: one worker up or down when the pool's mean queue or KV
//!   utilisation leaves a band.
//! - [`predictors`]: the load predictors (`constant`, `moving-average`, `kalman`).
//!
//! Planners are pure: the run hands them observations and asks them for targets; a capacity
//! profile is computed by the run (a simulation) through the [`capacity::Profiler`] it gives.

pub mod capacity;
pub mod load;
pub mod predictors;
pub mod threshold;
pub mod throughput;

use serde::Serialize;

use crate::scenario::{PlannerKind, PlannerSettings, Pool, SlaSettings};

/// What a planner sees at one decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Observation {
    /// The run's time, s.
    pub t_s: f64,
    /// Seconds since the previous observation.
    pub interval_s: f64,
    /// The interval's traffic, as the frontend's metrics show it.
    pub traffic: Traffic,
    /// Each pool.
    pub pools: Vec<PoolObservation>,
}

/// The interval's traffic (requests that arrived; latencies of those that completed).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Traffic {
    /// Requests that arrived.
    pub requests: u64,
    /// Their rate, per second.
    pub request_rate: f64,
    /// Mean prompt tokens of the requests that arrived (`None`: none arrived).
    pub isl: Option<f64>,
    /// Mean output tokens of the requests that completed.
    pub osl: Option<f64>,
    /// Requests that completed.
    pub completed: u64,
    /// Mean TTFT of the completed requests, ms.
    pub ttft_mean_ms: Option<f64>,
    /// Their TTFT p90, ms.
    pub ttft_p90_ms: Option<f64>,
    /// Mean of their inter-token latencies (each request's mean gap), ms.
    pub itl_mean_ms: Option<f64>,
    /// p90 of those, ms.
    pub itl_p90_ms: Option<f64>,
    /// Mean time from arrival to the last token, s.
    pub request_duration_s: Option<f64>,
    /// Prompt tokens taken from caches / prompt tokens, of the completed requests.
    pub prefix_reuse: Option<f64>,
}

/// One pool at a decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PoolObservation {
    /// The pool.
    pub pool: Pool,
    /// Workers serving.
    pub serving: usize,
    /// Workers starting (loading their model).
    pub starting: usize,
    /// Workers draining.
    pub draining: usize,
    /// The pool's target (starting and serving, and starts waiting for a slot).
    pub target: usize,
    /// GPUs per worker (the deployment's tensor parallelism; 1 without one).
    pub gpus_per_worker: u64,
    /// Each serving worker.
    pub workers: Vec<WorkerObservation>,
}

/// One serving worker at a decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerObservation {
    /// Its name.
    pub name: String,
    /// Requests waiting.
    pub queue: u32,
    /// Requests running.
    pub running: u32,
    /// Prompt tokens still to compute, of its running and waiting requests.
    pub active_prefill_tokens: u64,
    /// KV blocks its running requests hold.
    pub active_kv_blocks: u64,
    /// Share of its KV capacity they hold (0 with unbounded KV).
    pub kv_usage: f64,
    /// Mean TTFT of the requests it prefilled that completed in the interval, ms.
    pub ttft_ms: Option<f64>,
    /// Their mean prompt tokens.
    pub isl: Option<f64>,
    /// Mean inter-token latency of the requests it decoded that completed in the interval, ms.
    pub itl_ms: Option<f64>,
}

/// An autoscaler.
pub trait Planner {
    /// The targets it sets after seeing `obs`: `(pool, workers)` for each pool it changes.
    fn decide(&mut self, obs: &Observation) -> Vec<(Pool, usize)>;

    /// Why it cannot decide yet, if it cannot (a model it fits lacks observations): said in
    /// the report's warnings when that held at every one of its decisions.
    fn unready(&self) -> Option<String> {
        None
    }
}

/// The planner `settings` ask for, over `pools`, aiming at `sla`; `profiler` predicts a
/// pool's capacity (for `dynamo-throughput`).
pub fn build(
    settings: &PlannerSettings,
    sla: &SlaSettings,
    bounds: Vec<(Pool, usize, usize)>,
    profiler: Box<dyn capacity::Profiler>,
) -> Box<dyn Planner> {
    match settings.kind {
        PlannerKind::DynamoThroughput => Box::new(throughput::ThroughputPlanner::new(
            settings, sla, bounds, profiler,
        )),
        PlannerKind::DynamoLoad => Box::new(load::LoadPlanner::new(settings, sla, bounds)),
        PlannerKind::Threshold => Box::new(threshold::ThresholdPlanner::new(settings, bounds)),
    }
}

/// The seconds between a planner's decisions: `adjustment_interval_s`, or the kind's default
/// (Dynamo's: 180 s for the throughput planner, 5 s for the load-based loop; 30 s for a
/// threshold, the stabilisation Kubernetes HPAs are usually given).
pub fn interval_s(settings: &PlannerSettings) -> f64 {
    settings
        .adjustment_interval_s
        .unwrap_or(match settings.kind {
            PlannerKind::DynamoThroughput => 180.0,
            PlannerKind::DynamoLoad => 5.0,
            PlannerKind::Threshold => 30.0,
        })
}

/// `n` kept within `min..=max`.
fn clamp(n: usize, min: usize, max: usize) -> usize {
    n.max(min).min(max)
}
