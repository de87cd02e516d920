//! Running a scenario: build the workload, wire the cluster, step it to the end, report.
//!
//! - [`session`]: a run that can be stepped ([`Session::advance_to`]), observed
//!   ([`Session::observe`]) and scaled ([`Session::scale`]); a one-shot run is a session
//!   stepped to its end, its `[[scale]]` steps and planner acting on the way.
//! - [`recorder`]: what the run measures over time (a planner's interval, SLA attainment, the
//!   report's intervals).
//! - `profiler`: a pool's capacity from `bench` predictions, for `dynamo-throughput`.

mod profiler;
pub mod recorder;
pub mod session;
mod writers;

pub use profiler::REQUESTS_PER_CLIENT;
pub use session::Session;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::budget;
use crate::cluster::audit::SharedAudit;
use crate::cluster::client::{ClosedLoop, Pacing};
use crate::cluster::hardware::Hardware;
use crate::cluster::router_actor::RouterStats;
use crate::cluster::topology::Topology;
use crate::cluster::worker::probe::FeatureTotals;
use crate::cluster::Node;
use crate::deployment::profile::Profile;
use crate::engine::{ms_to_ns, Simulation};
use crate::error::{Error, Result};
use crate::report::{Finished, Report, TraceRows};
use crate::rng::SimRng;
use crate::scenario::{Scenario, TraceFormat, Workload};
use crate::sketch::SharedHistogram;
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

/// A workload's pacing: open loop without `concurrency`, else its clients joining over
/// `ramp_s` seconds (validated: finite, non-negative).
fn closed_loop(concurrency: Option<usize>, ramp_s: Option<f64>) -> Pacing {
    concurrency.map_or(Pacing::OpenLoop, |clients| {
        Pacing::ClosedLoop(ClosedLoop {
            clients,
            ramp_ns: ms_to_ns(ramp_s.unwrap_or(0.0) * 1e3),
        })
    })
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
            let pacing = closed_loop(p.concurrency, p.concurrency_ramp_s);
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
                closed_loop(t.concurrency, t.concurrency_ramp_s),
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
            list_own_tails: false,
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
    /// Keeps every request's own tail listed in the workers' name tables and in the routers'
    /// indexes, as a run that may route a request twice does (faults, scaling). The report is the same
    /// either way; tests use it to check that.
    pub list_own_tails: bool,
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
    /// As [`RunHooks::list_own_tails`].
    pub list_own_tails: bool,
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
        list_own_tails,
    } = hooks;
    let hooks = SessionHooks {
        progress,
        features,
        profile,
        list_own_tails,
    };
    Session::open(s, built, hooks, perfetto.is_some())?.run_and_report(trace, perfetto)
}

/// The run's report, from its simulation as the run left it (and the run's duration, ns, and
/// the routers' counters); `features`, when asked, gets the workers' feature totals added.
/// Its warnings are left to the caller ([`crate::warnings::of_run`]), which fills in the
/// scaling fields they read first.
#[allow(clippy::too_many_arguments)]
fn report(
    s: &Scenario,
    hw: &Hardware,
    topology: &Topology,
    sim: Simulation<Node>,
    trace: Option<TraceRows>,
    audit: Option<SharedAudit>,
    itl: SharedHistogram,
    features: Option<&mut FeatureTotals>,
) -> (Report, u64, RouterStats) {
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
    let (client, bus) = (client.expect("one client"), bus.expect("one bus"));
    if let Some(sums) = features {
        for t in workers.iter().filter_map(|w| w.feature_totals()) {
            *sums += t;
        }
    }
    if client.tally.acks == client.total() as u64 {
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
    let mut stats = RouterStats::default();
    for r in &routers {
        stats += r.stats;
    }
    let (report, duration_ns) = crate::report::assemble(Finished {
        scenario: s,
        hw,
        topology,
        client,
        routers,
        bus: *bus,
        workers,
        messages,
        last_delivery_ns,
        trace,
        audit,
        itl: &itl.borrow(),
    });
    (report, duration_ns, stats)
}

/// Refuses a run whose memory would pass the budget ([`budget`]): checked before the run
/// allocates its cluster. `own_tails_unread`: whether its routers leave own tails out of their
/// indexes ([`crate::cluster::build::own_tails_unread`], unless the run lists them all).
fn check_memory(
    s: &Scenario,
    hw: &Hardware,
    recipe: &Recipe,
    own_tails_unread: bool,
) -> Result<()> {
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
    let total_capacity = pools.iter().try_fold(0u64, |sum, &(c, n)| {
        c.map(|c| sum.saturating_add((c as u64).saturating_mul(n)))
    });
    let inputs = budget::Inputs {
        requests: recipe.total() as u64,
        distinct_blocks: recipe.distinct_blocks(),
        kv_capacity_blocks: total_capacity,
        events_index: sample.learns_from_events() && s.bus.publish,
        listed_blocks: recipe.listed_blocks(),
        own_tails_unread,
        attribute_misses: s.router.attribute_misses,
        audited: sample.learns_from_events() && s.router.audit_index,
        replicas,
        history_bytes: sample
            .history_bytes(recipe.distinct_blocks())
            .saturating_mul(replicas),
        workload_bytes: recipe.bytes(),
        workers,
        presized_bytes_per_worker: crate::cluster::worker::kv::presized_bytes(),
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
    check_memory(
        s,
        &hw,
        &build_workload(s, base_dir)?.recipe,
        crate::cluster::build::own_tails_unread(s, false),
    )
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
