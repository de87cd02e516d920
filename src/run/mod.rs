//! Running a scenario: build the workload, wire the cluster, step it to the end, report.
//!
//! - [`session`]: a run that can be stepped ([`Session::advance_to`]), observed
//!   ([`Session::observe`]) and scaled ([`Session::scale`]); a one-shot run is a session
//!   stepped to its end, its `[[scale]]` steps and planner acting on the way.
//! - [`recorder`]: what the run measures over time (a planner's interval, SLA attainment, the
//!   report's intervals).
//! - [`profiler`]: a pool's capacity from `bench` predictions, for `dynamo-throughput`.

mod profiler;
pub mod recorder;
pub mod session;
mod writers;

pub use profiler::REQUESTS_PER_CLIENT;
pub use session::Session;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::budget;
use crate::cluster::audit::{IndexQuality, SharedAudit};
use crate::cluster::client::Pacing;
use crate::cluster::hardware::Hardware;
use crate::cluster::router_actor::RouterStats;
use crate::cluster::topology::Topology;
use crate::cluster::worker::probe::FeatureTotals;
use crate::cluster::Node;
use crate::deployment::profile::Profile;
use crate::engine::{ms_to_ns, Simulation};
use crate::error::{Error, Result};
use crate::report::{cdf_ms, ByTier, EventCounts, Percentiles, Report, TraceRows, WorkerReport};
use crate::rng::SimRng;
use crate::round::{rate, round_py};
use crate::router::stream::StreamStats;
use crate::scenario::{Scenario, TraceFormat, Workload};
use crate::sketch::LogHistogram;
use crate::workload::lab::PrefixRepeat;
use crate::workload::source::Recipe;
use crate::workload::synthetic::SyntheticStream;
use crate::workload::trace::TraceOptions;
use crate::workload::{azure, mooncake};

/// A built workload (its [`Recipe`]: requests are made only when sent), how to pace it, (for
/// traces) what was read, and the run's generator as the workload left it.
#[derive(Clone, Debug)]
pub struct BuiltWorkload {
    /// The requests, made on demand.
    pub recipe: Recipe,
    /// Open or closed loop.
    pub pacing: Pacing,
    /// Trace rows read and skipped.
    pub trace: Option<TraceRows>,
    /// The run's generator after the workload's draws (the lab's shuffle is its first draw, as
    /// in the reference lab), for the run to continue from.
    pub rng: SimRng,
    /// The folder the scenario's relative paths (model files, profiles) start from.
    pub base_dir: PathBuf,
}

/// Builds the scenario's workload, drawing from the run's generator (seeded by the scenario).
/// Trace paths are relative to `base_dir`. Nothing is materialised: a trace is read into a
/// compact table, a synthetic workload's draws are made once to check it and find where the
/// generator ends, and requests are made when sent.
pub fn build_workload(s: &Scenario, base_dir: &Path) -> Result<BuiltWorkload> {
    let block = s.block_size();
    let mut rng = SimRng::new(s.rng, s.seed);
    let (recipe, pacing, trace) = match &s.workload {
        Workload::PrefixRepeat(w) => {
            let shape = PrefixRepeat {
                prefixes: w.prefixes,
                reps: w.reps,
                prefix_len: w.prefix_len,
                tail_len: w.tail_len,
            };
            let order = shape.order(&mut rng);
            let recipe = Recipe::lab(
                shape,
                order,
                block,
                ms_to_ns(w.interval_ms),
                w.output_tokens,
            );
            (recipe, Pacing::OpenLoop, None)
        }
        Workload::Synthetic(p) => {
            let start = rng.clone();
            let checked = SyntheticStream::check(p, block, rng).map_err(|(key, problem)| {
                Error::setting("scenario", format!("workload.{key}"), "", problem)
            })?;
            let recipe = Recipe::synthetic(p.clone(), block, start, &checked);
            rng = checked.rng;
            let pacing = p.concurrency.map_or(Pacing::OpenLoop, Pacing::ClosedLoop);
            (recipe, pacing, None)
        }
        Workload::Trace(t) => {
            let path = base_dir.join(&t.path);
            let reader = crate::workload::trace::open(&path)?;
            let opts = TraceOptions {
                trace_block_size: t.trace_block_size,
                block_size: block,
                speedup: t.speedup,
                limit: t.limit,
                skip_bad: t.skip_bad,
            };
            let mut table = match t.format {
                TraceFormat::Mooncake => mooncake::read_mooncake(&path, reader, &opts)?,
                TraceFormat::Azure => azure::read_azure(&path, reader, &opts)?,
            };
            if t.speedup_schedule.is_some() || t.duration_s.is_some() {
                table = table
                    .replayed(t.speedup_schedule.clone(), t.duration_s)
                    .map_err(|problem| Error::file(&path, problem))?;
            }
            let stats = table.stats();
            (
                Recipe::table(table),
                t.concurrency.map_or(Pacing::OpenLoop, Pacing::ClosedLoop),
                Some(TraceRows {
                    rows: stats.rows,
                    skipped: stats.skipped,
                }),
            )
        }
    };
    Ok(BuiltWorkload {
        recipe,
        pacing,
        trace,
        rng,
        base_dir: base_dir.to_path_buf(),
    })
}

/// Runs a validated scenario; writes one trace line per delivered message to `trace` if given.
pub fn run_scenario(
    s: &Scenario,
    base_dir: &Path,
    trace: Option<&mut (dyn Write + Send)>,
) -> Result<Report> {
    run_scenario_with(
        s,
        base_dir,
        RunHooks {
            trace,
            progress: None,
            perfetto: None,
            features: None,
            profile: None,
        },
    )
}

/// What a caller can attach to a run.
#[derive(Default)]
pub struct RunHooks<'a> {
    /// Receives one JSONL line per delivered message (written on a thread of its own).
    pub trace: Option<&'a mut (dyn Write + Send)>,
    /// Called with (requests completed, requests in the workload) every 1,024 completions and
    /// once at the end.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Receives the run's timeline as Chrome trace-event JSON ([`crate::perfetto`]; written
    /// on a thread of its own).
    pub perfetto: Option<&'a mut (dyn Write + Send)>,
    /// Receives what the workers' feature clocks found, summed (under a roofline; for
    /// `calibrate`).
    pub features: Option<&'a mut FeatureTotals>,
    /// Replaces the roofline's profile (calibration's candidates; under a roofline only).
    pub profile: Option<Profile>,
}

/// What a stepped [`Session`] can be given: the [`RunHooks`] but its trace and timeline, which
/// only a run to the end ([`run_built`]) writes (on threads of its own, alive while it runs):
/// a session cannot be handed a writer it would never write to.
#[derive(Default)]
pub struct SessionHooks<'a> {
    /// As [`RunHooks::progress`].
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// As [`RunHooks::features`].
    pub features: Option<&'a mut FeatureTotals>,
    /// As [`RunHooks::profile`].
    pub profile: Option<Profile>,
}

/// Runs a validated scenario with hooks.
pub fn run_scenario_with(s: &Scenario, base_dir: &Path, hooks: RunHooks<'_>) -> Result<Report> {
    run_built(s, build_workload(s, base_dir)?, hooks)
}

/// Runs a validated scenario on a workload [`build_workload`] built for it (a caller that runs
/// one workload many times builds it once): its `[[scale]]` steps and `[planner]` act as the
/// run goes ([`Session::run_to_end`]).
pub fn run_built(s: &Scenario, built: BuiltWorkload, hooks: RunHooks<'_>) -> Result<Report> {
    let RunHooks {
        trace,
        progress,
        perfetto,
        features,
        profile,
    } = hooks;
    let hooks = SessionHooks {
        progress,
        features,
        profile,
    };
    Session::open(s, built, hooks, perfetto.is_some())?.run_and_report(trace, perfetto)
}

/// The run's report; `learns`: whether the routers' policy learns from KV events.
#[allow(clippy::too_many_arguments)]
fn report(
    s: &Scenario,
    hw: &Hardware,
    topology: &Topology,
    sim: Simulation<Node>,
    trace: Option<TraceRows>,
    audit: Option<SharedAudit>,
    learns: bool,
    features: Option<&mut FeatureTotals>,
) -> (Report, u64) {
    let last_delivery_ns = sim.now();
    let messages = sim.delivered();
    let mut client = None;
    let mut routers = Vec::new();
    let mut bus = None;
    let mut workers = Vec::new();
    for node in sim.into_actors() {
        match node {
            Node::Client(c) => client = Some(c),
            Node::Router(r) => routers.push(r),
            Node::Bus(b) => bus = Some(b),
            Node::Worker(w) => workers.push(w),
        }
    }
    let (mut client, bus) = (client.expect("one client"), bus.expect("one bus"));
    if let Some(sums) = features {
        for w in &workers {
            if let Some(t) = w.feature_totals() {
                sums.merge(t);
            }
        }
    }
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
        let st = r.stats;
        stats.decisions += st.decisions;
        stats.rerouted += st.rerouted;
        stats.events_applied += st.events_applied;
        stats.replayed += st.replayed;
        stats.resync_bytes += st.resync_bytes;
        stats.acks += st.acks;
        if let Some(t) = r.streams() {
            streams.gaps_detected += t.stats.gaps_detected;
            streams.replays += t.stats.replays;
            streams.resyncs += t.stats.resyncs;
            recoveries.extend_from_slice(&t.recoveries_ns);
        }
    }
    if tally.acks == client.total() as u64 {
        // Conservation: once every request has left, every KV block is back in its pool.
        for w in &workers {
            debug_assert_eq!(
                w.kv_blocks_in_use(),
                0,
                "{}: blocks still in use",
                w.index()
            );
        }
    }
    let routed_total: u64 = routed.iter().sum();
    let tiered = !s.kv.is_empty();
    let mut tier_bytes = crate::cluster::worker::tiers::TierBytes::default();
    for b in workers.iter().filter_map(|w| w.tier_bytes()) {
        for k in 0..2 {
            tier_bytes.written[k] += b.written[k];
            tier_bytes.read[k] += b.read[k];
        }
    }
    let mut itl = LogHistogram::default();
    let mut preempted = 0;
    let per_worker = workers
        .iter()
        .zip(topology.workers())
        .enumerate()
        .map(|(w, (worker, slot))| {
            let sched = worker.scheduler_stats();
            itl.merge(worker.itl());
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
    let mut report = Report {
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
        itl_ms: Percentiles::of_sketch(&itl),
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
    report.warnings = crate::warnings::of_run(s, &report, stats.decisions, learns);
    (report, duration_ns)
}

/// Refuses a run whose memory would pass the budget ([`budget`]): checked before the run
/// allocates its cluster.
fn check_memory(s: &Scenario, hw: &Hardware, recipe: &Recipe) -> Result<()> {
    let entry = crate::router::registry::entry(&s.router.policy)
        .expect("a validated scenario names a policy");
    // One replica's policy, built for one worker, says whether the routers learn from events
    // and what their memory of their own decisions may take.
    let routable = if s.disagg.enabled {
        crate::cluster::topology::Role::Prefill
    } else {
        crate::cluster::topology::Role::Unified
    };
    let sample = (entry.build)(&crate::router::policy::PolicySetup {
        name: entry.name,
        workers: 1,
        block_size: s.block_size(),
        kv_capacity_blocks: hw.kv_capacity(s, routable),
        settings: s.router.settings.get(entry.name),
    })
    .expect("a validated scenario's policy settings build");
    let replicas = s.router.replicas as u64;
    let workers = if s.disagg.enabled {
        (s.disagg.prefill_workers + s.disagg.decode_workers) as u64
    } else {
        s.cluster.workers as u64
    };
    // Every worker's capacity (a deployment's differs between prefill and decode pools).
    let pools: Vec<(Option<usize>, u64)> = if s.disagg.enabled {
        use crate::cluster::topology::Role;
        vec![
            (
                hw.kv_capacity(s, Role::Prefill),
                s.disagg.prefill_workers as u64,
            ),
            (
                hw.kv_capacity(s, Role::Decode),
                if s.disagg.colocated {
                    0
                } else {
                    s.disagg.decode_workers as u64
                },
            ),
        ]
    } else {
        vec![(hw.kv_capacity(s, routable), workers)]
    };
    let capacity = pools
        .iter()
        .map(|p| p.0)
        .try_fold(0usize, |m, c| c.map(|c| m.max(c)));
    let total_capacity = pools.iter().try_fold(0u64, |sum, &(c, n)| {
        c.map(|c| sum.saturating_add((c as u64).saturating_mul(n)))
    });
    let inputs = budget::Inputs {
        requests: recipe.total() as u64,
        distinct_blocks: recipe.distinct_blocks(),
        kv_capacity_blocks: total_capacity,
        events_index: sample.learns_from_events() && s.bus.publish,
        attribute_misses: s.router.attribute_misses,
        replicas,
        history_bytes: sample
            .history_bytes(recipe.distinct_blocks())
            .saturating_mul(replicas),
        workload_bytes: recipe.bytes(),
        workers,
        presized_bytes_per_worker: crate::cluster::worker::kv::presized_bytes(capacity),
    };
    let estimate = budget::estimate(&inputs);
    if estimate.total() <= budget::budget() {
        return Ok(());
    }
    Err(Error::run(
        &s.name,
        format!(
            "would need {} of memory, more than the budget of {} (DYNSIM_MEMORY_GIB): bound \
             cluster.kv_capacity_blocks, use fewer workers, shorten the workload, or raise the \
             budget",
            estimate.describe(),
            budget::size(budget::budget())
        ),
    ))
}

/// Whether a validated scenario fits the memory budget, without running it: its workload is
/// built (a trace is read) and the estimate made ([`budget`]). The planner asks it of the
/// largest point of its range before searching.
pub fn check_fits(s: &Scenario, base_dir: &Path) -> Result<()> {
    let hw = Hardware::resolve(s, base_dir)?;
    check_memory(s, &hw, &build_workload(s, base_dir)?.recipe)
}

/// `count` per second of `duration_ns` (3 places; 0 for an empty run).
fn per_second(count: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        0.0
    } else {
        round_py(count as f64 / (duration_ns as f64 / 1e9), 3)
    }
}

/// Runs loaded scenarios on `jobs` threads, calling `done` after each; reports in input order.
pub fn run_scenarios(
    loaded: &[crate::scenario::load::Loaded],
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<Report>> {
    crate::parallel::parallel_map(
        loaded,
        jobs,
        |l| run_scenario(&l.scenario, &l.base_dir, None),
        done,
    )
}

/// Like [`run_scenarios`], but each scenario's outcome (`None`: never started, after a failure
/// or an interrupt), so that the runs that finished can be kept.
pub fn run_scenarios_partial(
    loaded: &[crate::scenario::load::Loaded],
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Vec<Option<Result<Report>>> {
    crate::parallel::parallel_partial(
        loaded,
        jobs,
        |l| run_scenario(&l.scenario, &l.base_dir, None),
        done,
    )
}
