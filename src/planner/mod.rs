//! What a planner sees: at each decision, per worker its queue, active prefill tokens and KV
//! use, and the interval's request rate, lengths, TTFT and ITL ([`Observation`], which the
//! stepping API returns: `run::Session::observe`).

use serde::Serialize;

use crate::scenario::Pool;

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
