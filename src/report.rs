//! A run's results: the JSON object of `dynsim run --json` and the readable summary table;
//! [`assemble`] builds it from a finished run's actors.

use serde::Serialize;

use crate::cluster::audit::IndexQuality;
use crate::cluster::hardware::DeploymentReport;
use crate::protocol::messages::Misses;
use crate::round::round_py;
use crate::sketch::LogHistogram;

mod assemble;
mod table;
pub use assemble::{assemble, Finished};

/// Counts of KV events and of the routers' recovery of their streams (summed over router
/// replicas: each replica receives every event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct EventCounts {
    /// Events workers handed to the bus.
    pub published: u64,
    /// Event deliveries the bus lost.
    pub dropped: u64,
    /// Events the routers' policies applied to their indexes (live or replayed).
    pub applied: u64,
    /// Gaps the routers found in the streams (missing sequence numbers, or silence).
    pub gaps_detected: u64,
    /// Replay requests sent.
    pub replays: u64,
    /// Events applied from replay answers.
    pub replayed: u64,
    /// Snapshot requests sent.
    pub resyncs: u64,
    /// Bytes of the snapshots received.
    pub resync_bytes: u64,
}

/// Rows a trace workload read and skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TraceRows {
    /// Rows turned into requests.
    pub rows: usize,
    /// Malformed rows skipped (`skip_bad`).
    pub skipped: usize,
}

/// Summary statistics of a latency, ms (3 decimals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// Percentiles (linear interpolation between closest ranks, as numpy's default) of `ns`
    /// values, in ms. All zero for no values.
    pub fn of_ns(mut ns: Vec<u64>) -> Self {
        ns.sort_unstable();
        Self::of_sorted(&ns)
    }

    /// Like [`Percentiles::of_ns`], for values sorted in increasing order.
    pub fn of_sorted(ns: &[u64]) -> Self {
        if ns.is_empty() {
            return Percentiles::default();
        }
        let mean = ns.iter().map(|&v| v as f64).sum::<f64>() / ns.len() as f64 / 1e6;
        Percentiles {
            p50: round_py(quantile_ms(ns, 0.5), 3),
            p90: round_py(quantile_ms(ns, 0.9), 3),
            p99: round_py(quantile_ms(ns, 0.99), 3),
            mean: round_py(mean, 3),
        }
    }
}

/// The `q` quantile (0..=1) of sorted ns values, in ms: linear interpolation between the
/// closest ranks (numpy's default).
fn quantile_ms(ns: &[u64], q: f64) -> f64 {
    let pos = q * (ns.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let frac = pos - lo as f64;
    (ns[lo] as f64 * (1.0 - frac) + ns[hi] as f64 * frac) / 1e6
}

/// A distribution for plotting: its quantiles at 0, 1, ..., 100 %, in ms (3 decimals); empty
/// for no values.
pub fn cdf_ms(sorted_ns: &[u64]) -> Vec<f64> {
    if sorted_ns.is_empty() {
        return Vec::new();
    }
    (0..=100)
        .map(|k| round_py(quantile_ms(sorted_ns, f64::from(k) / 100.0), 3))
        .collect()
}

impl Percentiles {
    /// Percentiles and mean of a sketch of ns values, in ms.
    pub fn of_sketch(h: &LogHistogram) -> Self {
        Percentiles {
            p50: round_py(h.quantile(0.5) / 1e6, 3),
            p90: round_py(h.quantile(0.9) / 1e6, 3),
            p99: round_py(h.quantile(0.99) / 1e6, 3),
            mean: round_py(h.mean() / 1e6, 3),
        }
    }
}

/// A quantity per KV tier (`device` is absent for bytes moved: only lower tiers move them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ByTier<T> {
    /// On the GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<T>,
    /// In host memory.
    pub host: T,
    /// On disk.
    pub disk: T,
}

/// One worker's share of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct WorkerReport {
    /// The worker's display name.
    pub name: String,
    /// Requests the router sent it (0 for decode workers).
    pub routed: u64,
    /// Lab hits it served.
    pub hits: u64,
    /// Requests it completed.
    pub completed: u64,
    /// Fraction of the run with a step running (4 decimals).
    pub utilisation: f64,
    /// Forward passes it ran.
    pub steps: u64,
    /// Tokens scheduled per step on average, prompt chunks and decodes together (1 decimal).
    pub mean_batch_tokens: f64,
    /// Requests it preempted (and recomputed later).
    pub preemptions: u64,
    /// The most KV blocks its running requests held at once.
    pub peak_kv_blocks: u64,
    /// Blocks it evicted.
    pub evicted_blocks: u64,
    /// Times it restarted.
    pub restarts: u64,
}

/// Everything `dynsim run` reports.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The routing policy.
    pub policy: String,
    /// The seed.
    pub seed: u64,
    /// What each pool's deployment derives (absent without a `[deployment]`).
    // Left out when empty, so not required (the schema's `default`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(default)]
    pub deployments: Vec<DeploymentReport>,
    /// Requests in the workload.
    pub requests: usize,
    /// Requests whose prefix had been seen before (lab definition).
    pub repeat_requests: usize,
    /// Repeat requests whose worker had processed their prefix and still held all of it.
    pub hits: usize,
    /// hits / repeat_requests (Python-rounded to 4 places; 0.0 without repeats).
    pub hit_rate: f64,
    /// Cached prompt blocks / prompt blocks over all requests (4 places): the blocks the serving
    /// worker held when it admitted the request.
    pub block_hit_rate: f64,
    /// Prompt tokens taken from the cache instead of computed at first admission / prompt
    /// tokens (4 places): Dynamo's prefix reuse (the hit capped one token short of the prompt).
    pub prefix_reuse: f64,
    /// `prefix_reuse` split by where the reused tokens came from: the device's cache, or loaded
    /// back from the host or disk tier (4 places each; absent without `[kv.host]`). Like
    /// `prefix_reuse`, it counts each request's first admission only: a reload after a
    /// preemption, a retraction or a fault is not in it (it is in `kv_onload_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reuse_by_tier: Option<ByTier<f64>>,
    /// KV bytes offloaded into each lower tier (device → host, host → disk); absent without
    /// `[kv.host]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_offload_bytes: Option<ByTier<u64>>,
    /// KV bytes loaded back from each lower tier to the device; absent without `[kv.host]`.
    /// Every load counts, a reload after a preemption, a retraction or a fault included, where
    /// `reuse_by_tier` and `loaded_blocks` count a request's first admission only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_onload_bytes: Option<ByTier<u64>>,
    /// Prompt blocks over all requests.
    pub prompt_blocks: u64,
    /// Prompt blocks the serving workers really held.
    pub cached_blocks: u64,
    /// Prompt blocks after those that the serving workers loaded back from host or disk at
    /// first admission instead of computing them; absent without `[kv.host]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loaded_blocks: Option<u64>,
    /// Prompt blocks the router believed the chosen workers held.
    pub predicted_blocks: u64,
    /// Missed prompt blocks by cause (they sum to prompt_blocks − cached_blocks −
    /// loaded_blocks: a block loaded back from a lower tier is reused, not missed); `None`
    /// (`null`) when the scenario turns attribution off (`router.attribute_misses = false`).
    pub misses: Option<Misses>,
    /// KV event counts.
    pub events: EventCounts,
    /// Time from each gap's detection to its stream being whole again (empty: none).
    pub recovery_ms: Percentiles,
    /// How right the routers' indexes were, for a policy that learns from events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexQuality>,
    /// The largest share of routed requests one worker received.
    pub busiest_worker_share: f64,
    /// Acks the router received: one per request, whatever the bus loses.
    pub acks: u64,
    /// Requests re-routed after a worker went down.
    pub rerouted: u64,
    /// Requests a worker refused: their whole sequence can never fit its KV.
    pub rejected: u64,
    /// Preemptions (recomputations) over all requests.
    pub preemptions: u64,
    /// Arrival → first token.
    pub ttft_ms: Percentiles,
    /// Arrival → last token.
    pub e2e_ms: Percentiles,
    /// Arrival → prefill start (first admission).
    pub queue_ms: Percentiles,
    /// Per request, (e2e − ttft) / (output tokens − 1), over requests with two tokens or more.
    pub tpot_ms: Percentiles,
    /// Gaps between consecutive tokens of a request, all tokens pooled (percentiles within
    /// 0.1 %, mean exact: a bounded sketch). Every token a worker produced counts, those of an
    /// attempt lost to a fault or a removal too (streamed before the loss), where a request's
    /// `ttft_ms` and `tpot_ms` are its last attempt's.
    pub itl_ms: Percentiles,
    /// Completed requests per second of virtual time.
    pub throughput_rps: f64,
    /// Output tokens per second of virtual time.
    pub output_tokens_per_s: f64,
    /// Virtual time from the start to the last completion, ms.
    pub duration_ms: f64,
    /// Messages the engine delivered.
    pub messages: u64,
    /// Per worker.
    pub per_worker: Vec<WorkerReport>,
    /// Trace rows read and skipped, for trace workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceRows>,
    /// Workers x GPUs per worker x seconds each was in the cluster, startup and drain included,
    /// up to the run's end, its last completion (3 places): what the run paid for.
    pub gpu_seconds: f64,
    /// Each pool's size at every change up to the run's end (the first at 0 s): workers
    /// serving, starting and draining.
    pub replicas: Vec<crate::cluster::membership::ReplicaPoint>,
    /// Every change of a pool's target, by `[[scale]]`, the planner or the stepping API.
    pub scale_events: Vec<crate::cluster::membership::ScaleEvent>,
    /// Share of requests completed within `[sla]` (TTFT and mean ITL at most the targets; a
    /// rejected request misses) (4 places; `null` without `[sla]`).
    pub sla_attainment: Option<f64>,
    /// Requests completed within `[sla]` per second (3 places; `null` without `[sla]`).
    pub goodput_rps: Option<f64>,
    /// Load, latency and reuse over time, in buckets of the planner's interval (60 s without
    /// one), for a run whose load or size changes or that has an `[sla]` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Vec<IntervalReport>>,
    /// Problems a serving engineer should know about (e.g. a blind KV router).
    pub warnings: Vec<String>,
    /// TTFT quantiles at 0, 1, ..., 100 %, ms (for `compare`'s plots; not in `--json`).
    #[serde(skip)]
    pub ttft_cdf_ms: Vec<f64>,
    /// TPOT quantiles at 0, 1, ..., 100 %, ms (not in `--json`).
    #[serde(skip)]
    pub tpot_cdf_ms: Vec<f64>,
}

impl Report {
    /// The most requests the engine of `s` runs at once on each worker of this run's (first)
    /// deployment (`None`: unbounded): SGLang's own limit follows that deployment's KV.
    pub fn running_limit(&self, s: &crate::scenario::Scenario) -> Option<usize> {
        s.max_num_seqs(self.deployments.first().map(DeploymentReport::served_kv))
    }
}

/// One bucket of the report's `intervals`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct IntervalReport {
    /// The bucket's start, s.
    pub t_s: f64,
    /// Requests that arrived in it, per second.
    pub load_rps: f64,
    /// Requests that completed in it (a rejected request is not one: it is counted only by
    /// `sla_attainment`, as a miss).
    pub completed: u64,
    /// Their TTFT p90, ms (`null`: none completed).
    pub ttft_p90_ms: Option<f64>,
    /// The p90 of their mean inter-token latencies, ms.
    pub itl_p90_ms: Option<f64>,
    /// Prompt tokens they took from caches / their prompt tokens.
    pub prefix_reuse: Option<f64>,
    /// Their share within `[sla]`, the requests rejected in it counted as misses (`null`
    /// without one).
    pub sla_attainment: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], [50, 90, 99]) = 2.5, 3.7, 3.97 (here in ms from ns).
        let p = Percentiles::of_ns(vec![4_000_000, 1_000_000, 3_000_000, 2_000_000]);
        assert_eq!((p.p50, p.p90, p.p99, p.mean), (2.5, 3.7, 3.97, 2.5));
        assert_eq!(Percentiles::of_ns(vec![]), Percentiles::default());
    }
}
