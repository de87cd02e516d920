//! Assembling a finished run's [`Report`] from what its actors counted: the replicas' and
//! streams' counters summed, the per-worker rows and the latency percentiles (run/ adds the
//! warnings, which read the report).

use crate::cluster::audit::SharedAudit;
use crate::cluster::bus::BusActor;
use crate::cluster::client::Client;
use crate::cluster::hardware::Hardware;
use crate::cluster::router_actor::{RouterActor, RouterStats};
use crate::cluster::topology::Topology;
use crate::cluster::worker::tiers::TierBytes;
use crate::cluster::worker::Worker;
use crate::round::{rate, round_py};
use crate::router::stream::StreamStats;
use crate::scenario::Scenario;
use crate::sketch::LogHistogram;

use super::{
    cdf_ms, ByTier, EventCounts, IndexQuality, Percentiles, Report, TraceRows, WorkerReport,
};

/// What a finished run hands its report: the scenario and the cluster's actors as the run left
/// them.
pub struct Finished<'a> {
    /// The scenario run.
    pub scenario: &'a Scenario,
    /// Its resolved hardware.
    pub hw: &'a Hardware,
    /// Its workers' names and roles.
    pub topology: &'a Topology,
    /// The client, with its tally of outcomes.
    pub client: Box<Client>,
    /// Every router replica (at least one).
    pub routers: Vec<Box<RouterActor>>,
    /// The KV event bus.
    pub bus: BusActor,
    /// The workers, in topology order.
    pub workers: Vec<Box<Worker>>,
    /// Messages delivered.
    pub messages: u64,
    /// When the last message was delivered (ns).
    pub last_delivery_ns: u64,
    /// Trace rows read and skipped (a trace workload).
    pub trace: Option<TraceRows>,
    /// The index audit, when the run keeps one.
    pub audit: Option<SharedAudit>,
    /// The gaps between consecutive tokens of every request, ns.
    pub itl: &'a LogHistogram,
}

/// The report of a finished run, without its warnings (`warnings::of_run` reads the report),
/// and the run's duration (ns: its last completion).
pub fn assemble(run: Finished<'_>) -> (Report, u64) {
    let Finished {
        scenario: s,
        hw,
        topology,
        mut client,
        routers,
        bus,
        workers,
        messages,
        last_delivery_ns,
        trace,
        audit,
        itl,
    } = run;
    assert!(!routers.is_empty(), "at least one router");
    let mut tally = std::mem::take(&mut client.tally);
    // The run ends with its last completion: a fault scheduled after the workload does not
    // stretch the throughput and utilisation denominators.
    let duration_ns = if tally.acks > 0 {
        tally.last_done_ns
    } else {
        last_delivery_ns
    };
    // Over every replica: requests routed per worker, counters, recoveries.
    let mut routed = vec![0u64; topology.routable().len()];
    let mut stats = RouterStats::default();
    let mut streams = StreamStats::default();
    let mut recoveries = Vec::new();
    for r in &routers {
        for (total, n) in routed.iter_mut().zip(r.loads().routed()) {
            *total += n;
        }
        stats += r.stats;
        if let Some(t) = r.streams() {
            streams += t.stats;
            recoveries.extend_from_slice(&t.recoveries_ns);
        }
    }
    let routed_total: u64 = routed.iter().sum();
    let tiered = !s.kv.is_empty();
    let mut tier_bytes = TierBytes::default();
    for b in workers.iter().filter_map(|w| w.tier_bytes()) {
        tier_bytes += b;
    }
    let mut preempted = 0;
    let per_worker = workers
        .iter()
        .zip(topology.workers())
        .enumerate()
        .map(|(w, (worker, slot))| {
            let sched = worker.scheduler_stats();
            preempted += sched.preemptions;
            WorkerReport {
                name: slot.name.clone(),
                routed: routed.get(w).copied().unwrap_or(0),
                hits: tally.hits_by_worker.get(w).copied().unwrap_or(0),
                completed: worker.stats.completed,
                utilisation: if duration_ns == 0 {
                    0.0
                } else {
                    round_py((sched.busy_ns as f64 / duration_ns as f64).min(1.0), 4)
                },
                steps: sched.steps,
                mean_batch_tokens: if sched.steps == 0 {
                    0.0
                } else {
                    round_py(sched.batch_tokens as f64 / sched.steps as f64, 1)
                },
                preemptions: sched.preemptions,
                peak_kv_blocks: worker.peak_kv_blocks() as u64,
                evicted_blocks: worker.stats.evicted_blocks,
                restarts: worker.stats.restarts,
            }
        })
        .collect();
    let events = EventCounts {
        published: bus.stats.published,
        dropped: bus.stats.dropped,
        applied: stats.events_applied,
        gaps_detected: streams.gaps_detected,
        replays: streams.replays,
        replayed: stats.replayed,
        resyncs: streams.resyncs,
        resync_bytes: stats.resync_bytes,
    };
    let index = audit.map(|a| {
        let q = a.borrow_mut().quality(duration_ns);
        IndexQuality {
            precision: round_py(q.precision, 4),
            recall: round_py(q.recall, 4),
        }
    });
    let (mut ttft, mut tpot) = (
        std::mem::take(&mut tally.ttft_ns),
        std::mem::take(&mut tally.tpot_ns),
    );
    ttft.sort_unstable();
    tpot.sort_unstable();
    let report = Report {
        scenario: s.name.clone(),
        policy: s.router.policy.clone(),
        seed: s.seed,
        deployments: hw.report(s),
        requests: client.total(),
        repeat_requests: tally.repeat_requests,
        hits: tally.hits,
        hit_rate: rate(tally.hits, tally.repeat_requests),
        block_hit_rate: tally.block_hit_rate(),
        prefix_reuse: tally.prefix_reuse(),
        reuse_by_tier: tiered.then(|| ByTier {
            device: Some(rate(
                (tally.cached_tokens - tally.host_tokens - tally.disk_tokens) as usize,
                tally.input_tokens as usize,
            )),
            host: rate(tally.host_tokens as usize, tally.input_tokens as usize),
            disk: rate(tally.disk_tokens as usize, tally.input_tokens as usize),
        }),
        kv_offload_bytes: tiered.then(|| ByTier {
            device: None,
            host: tier_bytes.written[0],
            disk: tier_bytes.written[1],
        }),
        kv_onload_bytes: tiered.then(|| ByTier {
            device: None,
            host: tier_bytes.read[0],
            disk: tier_bytes.read[1],
        }),
        prompt_blocks: tally.prompt_blocks,
        cached_blocks: tally.cached_blocks,
        loaded_blocks: tiered.then_some(tally.loaded_blocks),
        predicted_blocks: tally.predicted_blocks,
        misses: s.router.attribute_misses.then_some(tally.misses),
        events,
        recovery_ms: Percentiles::of_ns(recoveries),
        index,
        busiest_worker_share: rate(
            routed.iter().copied().max().unwrap_or(0) as usize,
            routed_total as usize,
        ),
        acks: stats.acks,
        rerouted: stats.rerouted,
        rejected: tally.rejected,
        preemptions: preempted,
        ttft_ms: Percentiles::of_sorted(&ttft),
        e2e_ms: Percentiles::of_ns(tally.e2e_ns),
        queue_ms: Percentiles::of_ns(tally.queue_ns),
        tpot_ms: Percentiles::of_sorted(&tpot),
        itl_ms: Percentiles::of_sketch(itl),
        throughput_rps: per_second(tally.acks - tally.rejected, duration_ns),
        output_tokens_per_s: per_second(tally.output_tokens, duration_ns),
        duration_ms: round_py(duration_ns as f64 / 1e6, 3),
        messages,
        per_worker,
        trace,
        gpu_seconds: 0.0,
        replicas: Vec::new(),
        scale_events: Vec::new(),
        sla_attainment: None,
        goodput_rps: None,
        intervals: None,
        warnings: Vec::new(),
        ttft_cdf_ms: cdf_ms(&ttft),
        tpot_cdf_ms: cdf_ms(&tpot),
    };
    (report, duration_ns)
}

/// `count` per second of `duration_ns` (3 places; 0 for an empty run).
fn per_second(count: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        0.0
    } else {
        round_py(count as f64 / (duration_ns as f64 / 1e9), 3)
    }
}
