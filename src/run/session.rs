//! A run that can be stepped: [`Session::advance_to`] delivers everything up to a time,
//! [`Session::observe`] shows what a planner sees, [`Session::scale`] sets a pool's target, and
//! [`Session::finish`] reports. A one-shot run ([`Session::run_to_end`]) is the same session
//! stepped from one `[[scale]]` step or planner decision to the next: stepping never changes
//! what is delivered, so a run stepped at any times without scaling equals the one-shot run.
//!
//! The session is the cluster's controller: it turns the membership ledger's decisions
//! ([`crate::cluster::membership`]) into messages at exact times: a worker that starts at `t`
//! gets `WorkerUp` and the routers its `Register` at `t + startup_s`, not before; a leaving
//! worker's `Deregister` reaches the routers before its `Retire`, so that what it hands back
//! is routed elsewhere.

use std::io::Write;

use crate::cluster::audit::SharedAudit;
use crate::cluster::build::{populate, Built, Instruments};
use crate::cluster::client::SharedFeed;
use crate::cluster::hardware::Hardware;
use crate::cluster::membership::Membership;
use crate::cluster::messages::Msg;
use crate::cluster::timeline::{SharedTimeline, Timeline};
use crate::cluster::topology::Topology;
use crate::cluster::worker::probe::FeatureTotals;
use crate::cluster::Node;
use crate::engine::{ms_to_ns, Envelope, Nanos, Simulation};
use crate::error::{Error, Result};
use crate::planner::{Observation, PoolObservation, WorkerObservation};
use crate::report::{Report, TraceRows};
use crate::round::round_py;
use crate::scenario::{Leave, Pool, Scenario};

use super::recorder::Recorder;
use super::writers::{write_timeline, write_trace, TraceSink, BATCHES_AHEAD, MARKS_BATCH};
use super::{budget, check_memory, report, BuiltWorkload, RunHooks};

/// A run in progress.
pub struct Session<'a> {
    s: Scenario,
    hw: Hardware,
    sim: Simulation<Node>,
    topology: Topology,
    audit: Option<SharedAudit>,
    learns: bool,
    feed: SharedFeed,
    trace_rows: Option<TraceRows>,
    /// Where the trace goes: handed to its thread by [`Session::run_and_report`].
    trace_out: Option<&'a mut (dyn Write + Send)>,
    /// The trace thread's end, while it runs.
    writer: Option<TraceSink>,
    progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Where the timeline goes: handed to its thread by [`Session::run_and_report`].
    perfetto: Option<&'a mut (dyn Write + Send)>,
    timeline: Option<SharedTimeline>,
    /// The timeline thread's end, while it runs.
    marks_out: Option<crossbeam_channel::Sender<Vec<crate::cluster::timeline::Mark>>>,
    features: Option<&'a mut FeatureTotals>,
    total: u64,
    done: u64,
    steps: u64,
    membership: Membership,
    recorder: Recorder,
    last_observed: Nanos,
    /// The session's time: where the last `advance_to` stopped (at or after the last
    /// delivery).
    clock: Nanos,
    /// Where the built scenario's relative paths start (for the planner's benchmarks).
    base_dir: std::path::PathBuf,
}

impl<'a> Session<'a> {
    /// A session of the validated scenario `s` on its built workload, with `hooks` (its trace
    /// and timeline writers are written only by [`Session::run_and_report`]).
    pub fn new(s: &Scenario, built: BuiltWorkload, hooks: RunHooks<'a>) -> Result<Self> {
        let mut hw = Hardware::resolve(s, &built.base_dir)?;
        if let Some(p) = hooks.profile {
            hw.set_profile(p);
        }
        let mut sim: Simulation<Node> = Simulation::new(built.rng);
        let total = built.recipe.total() as u64;
        let timeline = hooks.perfetto.is_some().then(Timeline::shared);
        // Before anything of the cluster is allocated: a run that cannot fit is refused here.
        check_memory(s, &hw, &built.recipe)?;
        let Built {
            topology,
            audit,
            learns,
            feed,
        } = populate(
            s,
            &hw,
            &built.recipe,
            built.pacing,
            &mut sim,
            Instruments {
                timeline: timeline.clone(),
                record_features: hooks.features.is_some(),
            },
        );
        let slots = topology
            .workers()
            .iter()
            .map(|w| {
                let gpus = hw.of(w.role).map_or(1, |d| d.tp);
                (w.pool(), gpus, w.name.clone(), w.present)
            })
            .collect();
        let membership = Membership::new(slots, ms_to_ns(s.cluster.startup_s * 1e3));
        let timed = super::recorder::has_intervals(s);
        let bucket_s = s.planner.as_ref().map_or(60.0, crate::planner::interval_s);
        let recorder = Recorder::new(
            s.sla.clone(),
            if timed { ms_to_ns(bucket_s * 1e3) } else { 0 },
        );
        Ok(Session {
            s: s.clone(),
            hw,
            sim,
            topology,
            audit,
            learns,
            feed,
            trace_rows: built.trace,
            trace_out: hooks.trace,
            writer: None,
            progress: hooks.progress,
            perfetto: hooks.perfetto,
            timeline,
            marks_out: None,
            features: hooks.features,
            total,
            done: 0,
            steps: 0,
            membership,
            recorder,
            last_observed: 0,
            clock: 0,
            base_dir: built.base_dir,
        })
    }

    /// The run's virtual time, ns: where the session was last advanced to.
    pub fn now(&self) -> Nanos {
        self.clock.max(self.sim.now())
    }

    /// Requests completed so far.
    pub fn completed(&self) -> u64 {
        self.done
    }

    /// Requests in the workload.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether nothing is left to happen: no delivery pending and no worker starting.
    pub fn idle(&mut self) -> bool {
        self.sim.next_time().is_none() && self.membership.next_ready().is_none()
    }

    /// Whether the run is over: every request completed and nothing pending.
    pub fn done(&mut self) -> bool {
        self.done >= self.total && self.idle()
    }

    /// Delivers every delivery at or before `t` (ns), starting the workers whose startup ends
    /// on the way at their exact time.
    pub fn advance_to(&mut self, t: Nanos) -> Result<()> {
        loop {
            match self.membership.next_ready() {
                Some(r) if r <= t => {
                    self.deliver(r, false)?;
                    self.bring_up(r);
                }
                _ => break,
            }
        }
        self.deliver(t, true)?;
        if t != Nanos::MAX {
            self.clock = self.clock.max(t);
        }
        self.poll_drains();
        Ok(())
    }

    /// Delivers what is due before `t` (and at `t` when `inclusive`).
    fn deliver(&mut self, t: Nanos, inclusive: bool) -> Result<()> {
        let limit = budget::budget();
        let client = self.topology.client();
        let Session {
            sim,
            writer,
            progress,
            recorder,
            done,
            total,
            steps,
            feed,
            s,
            timeline,
            marks_out,
            ..
        } = self;
        let mut observe = |env: &Envelope<Msg>| {
            if let Some(w) = writer.as_mut() {
                w.push(env);
            }
            recorder.see(env, client);
            if env.to == client {
                *done += 1;
                if *done % 1024 == 0 {
                    if let Some(p) = progress.as_mut() {
                        p(*done, *total);
                    }
                }
            }
        };
        while let Some(next) = sim.next_time() {
            if next > t || (next == t && !inclusive) {
                break;
            }
            sim.step(&mut observe);
            *steps += 1;
            if *steps % 4096 == 0 {
                crate::interrupt::check()?;
                if let (Some(tx), Some(t)) = (marks_out.as_ref(), timeline.as_ref()) {
                    let mut t = t.borrow_mut();
                    if t.marks.len() >= MARKS_BATCH {
                        let marks = std::mem::replace(
                            &mut t.marks,
                            Vec::with_capacity(MARKS_BATCH + MARKS_BATCH / 4),
                        );
                        // A closed channel: the thread ended early (re-raised when joined).
                        let _ = tx.send(marks);
                    }
                }
                // Requests in flight are the memory no estimate can bound before the run: a
                // cluster that falls behind an open-loop workload holds every request that
                // has arrived.
                if feed.borrow().in_flight_bytes() > limit {
                    return Err(Error::run(
                        &s.name,
                        format!(
                            "the requests in flight at {:.1} s of virtual time hold {}, more \
                             than the memory budget of {} (DYNSIM_MEMORY_GIB): the cluster \
                             falls behind the arrivals; slow them (workload.speedup, \
                             rate_per_s) or add workers",
                            sim.now() as f64 / 1e9,
                            budget::size(feed.borrow().in_flight_bytes()),
                            budget::size(limit)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The workers whose startup ends at `at` join: each gets `WorkerUp`, then the routers
    /// (or, for a decode worker, the prefill workers) hear of it.
    fn bring_up(&mut self, at: Nanos) {
        for w in self.membership.ready(at) {
            let slot = self.topology.worker(w).clone();
            self.sim
                .schedule(at, slot.addr, slot.addr, Msg::WorkerUp { worker: w });
            for to in self.topology.fault_listeners(w) {
                let msg = if slot.routable {
                    Msg::Register { worker: w }
                } else {
                    Msg::WorkerUp { worker: w }
                };
                self.sim.schedule(at, slot.addr, to, msg);
            }
        }
    }

    /// Frees the slots of the workers whose drain ended.
    fn poll_drains(&mut self) {
        let now = self.now();
        for w in self.membership.draining() {
            let addr = self.topology.worker(w).addr;
            if let Node::Worker(worker) = self.sim.actor(addr) {
                if let Some(at) = worker.left_at() {
                    self.membership.drained(w, at, now);
                }
            }
        }
    }

    /// Sets `pool`'s target to `workers` now (`by`: who asks, for the report), retiring
    /// workers as `leave` says.
    pub fn scale_by(&mut self, pool: Pool, workers: usize, leave: Leave, by: &str) -> Result<()> {
        if !self.s.pools().contains(&pool) {
            return Err(Error::arg(
                "scale",
                format!(
                    "{:?} is not a pool of this cluster (its pools: {})",
                    pool_name(pool),
                    self.s
                        .pools()
                        .iter()
                        .map(|&p| pool_name(p))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let slots = self
            .topology
            .workers()
            .iter()
            .filter(|w| w.pool() == pool)
            .count();
        if workers > slots {
            return Err(Error::arg(
                "scale",
                format!(
                    "{} workers for pool {:?}: it has {slots} slots (twice its most workers: \
                     raise cluster.max_workers or [planner] max_workers, or add a [[scale]] step)",
                    workers,
                    pool_name(pool)
                ),
            ));
        }
        self.poll_drains();
        let now = self.now();
        let orders = self
            .membership
            .scale(pool, workers, leave == Leave::Drain, now, by);
        for (w, drain) in orders.retire {
            let slot = self.topology.worker(w).clone();
            for to in self.topology.fault_listeners(w) {
                let msg = if slot.routable {
                    Msg::Deregister { worker: w }
                } else {
                    Msg::WorkerDown { worker: w }
                };
                self.sim.schedule(now, slot.addr, to, msg);
            }
            self.sim
                .schedule(now, slot.addr, slot.addr, Msg::Retire { worker: w, drain });
        }
        Ok(())
    }

    /// Sets `pool`'s target to `workers` now (the stepping API's: leaving workers drain).
    pub fn scale(&mut self, pool: Pool, workers: usize) -> Result<()> {
        self.scale_by(pool, workers, Leave::Drain, "api")
    }

    /// What a planner sees now: the traffic since the last observation and each pool's
    /// workers (observing starts the next interval).
    pub fn observe(&mut self) -> Observation {
        self.poll_drains();
        let now = self.now().max(self.last_observed);
        let interval_s = (now - self.last_observed) as f64 / 1e9;
        self.last_observed = now;
        let (traffic, per_worker) = self.recorder.take(interval_s);
        let mut pools = Vec::new();
        for &pool in self.s.pools() {
            let (serving, starting, draining) = self.membership.sizes(pool);
            let mut workers = Vec::new();
            let mut gpus = 1;
            for slot in self.topology.workers().iter().filter(|w| w.pool() == pool) {
                gpus = self.hw.of(slot.role).map_or(1, |d| d.tp);
                if !matches!(
                    self.membership.state(slot.id),
                    crate::cluster::membership::SlotState::Serving { .. }
                ) {
                    continue;
                }
                let Node::Worker(w) = self.sim.actor(slot.addr) else {
                    continue;
                };
                let sig = w.signals();
                let (ttft_ms, isl, itl_ms) = per_worker
                    .get(slot.id.index())
                    .copied()
                    .unwrap_or((None, None, None));
                workers.push(WorkerObservation {
                    name: slot.name.clone(),
                    queue: sig.waiting,
                    running: sig.running,
                    active_prefill_tokens: sig.prefill_tokens,
                    active_kv_blocks: sig.decode_blocks,
                    kv_usage: sig.kv_usage,
                    ttft_ms,
                    isl,
                    itl_ms,
                });
            }
            pools.push(PoolObservation {
                pool,
                serving,
                starting,
                draining,
                target: self.membership.target(pool),
                gpus_per_worker: gpus,
                workers,
            });
        }
        Observation {
            t_s: round_py(now as f64 / 1e9, 6),
            interval_s,
            traffic,
            pools,
        }
    }

    /// Runs to the end, applying the scenario's `[[scale]]` steps at their times and letting
    /// its planner decide every interval.
    pub fn run_to_end(&mut self) -> Result<()> {
        let mut steps = self.s.scale.clone();
        steps.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let mut steps = steps.into_iter().peekable();
        let mut planner = self.s.planner.clone().map(|p| {
            let bounds = self
                .s
                .pools()
                .iter()
                .map(|&pool| (pool, p.min_workers, self.s.max_workers(pool)))
                .collect();
            let profiler = super::profiler::BenchProfiler::new(&self.s, &self.base_dir);
            (
                crate::planner::build(&p, &self.s.sla, bounds, Box::new(profiler)),
                ms_to_ns(crate::planner::interval_s(&p) * 1e3).max(1),
                p.leave,
            )
        });
        let mut next_tick = planner.as_ref().map(|p| p.1);
        let mut stalled = 0;
        loop {
            let next_step = steps.peek().map(|st| ms_to_ns(st.at_s * 1e3));
            let next = match (next_step, next_tick) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let Some(at) = next else {
                self.run_out()?;
                break;
            };
            self.advance_to(at)?;
            if self.done() {
                break;
            }
            // Requests wait and nothing is left to deliver: only a scaling can help.
            if self.idle() {
                stalled += 1;
                if stalled > 3 && steps.peek().is_none() {
                    return Err(self.stranded());
                }
            } else {
                stalled = 0;
            }
            while steps.peek().is_some_and(|st| ms_to_ns(st.at_s * 1e3) <= at) {
                let st = steps.next().expect("peeked");
                self.scale_by(st.pool, st.workers, st.leave, "schedule")?;
            }
            if let (Some((p, every, leave)), Some(tick)) = (planner.as_mut(), next_tick) {
                if tick <= at {
                    let obs = self.observe();
                    let leave = *leave;
                    for (pool, n) in p.decide(&obs) {
                        self.scale_by(pool, n, leave, "planner")?;
                    }
                    next_tick = Some(tick + *every);
                }
            }
        }
        Ok(())
    }

    /// Delivers everything left, with no more scaling; a run whose waiting requests no
    /// worker will serve (a pool scaled to 0) is an error.
    pub fn run_out(&mut self) -> Result<()> {
        self.advance_to(Nanos::MAX)?;
        let empty = self
            .s
            .pools()
            .iter()
            .any(|&p| self.membership.target(p) == 0);
        if !self.done() && empty {
            return Err(self.stranded());
        }
        Ok(())
    }

    /// The error of a run whose waiting requests no worker will ever serve.
    fn stranded(&self) -> Error {
        Error::run(
            &self.s.name,
            format!(
                "{} requests wait for a worker and none is coming (a pool that serves them \
                 was scaled to 0 and nothing scales it back)",
                self.total - self.done
            ),
        )
    }

    /// Runs to the end ([`Session::run_to_end`]) and reports ([`Session::finish`]), the trace
    /// and the timeline asked for by the hooks formatted and written on threads of their own
    /// (`run/writers.rs`). An error of the run comes first, then one of writing the trace,
    /// then one of writing the timeline.
    pub fn run_and_report(mut self) -> Result<Report> {
        let trace_out = self.trace_out.take();
        let timeline_out = self.perfetto.take();
        let topology = self.topology.clone();
        let learns = self.learns;
        std::thread::scope(|scope| {
            let trace = trace_out.map(|out| {
                let (tx, rx) = crossbeam_channel::bounded(BATCHES_AHEAD);
                self.writer = Some(TraceSink::new(tx));
                let topology = topology.clone();
                scope.spawn(move || write_trace(out, topology, learns, rx))
            });
            let timeline = timeline_out.filter(|_| self.timeline.is_some()).map(|out| {
                let (tx, rx) = crossbeam_channel::bounded(BATCHES_AHEAD);
                self.marks_out = Some(tx);
                let topology = topology.clone();
                scope.spawn(move || write_timeline(out, topology, rx))
            });
            // The session (and with it both senders) is gone before the threads are joined.
            let report = (move || {
                self.run_to_end()?;
                self.finish()
            })();
            let joined = |h: std::thread::ScopedJoinHandle<'_, std::io::Result<()>>, what: &str| {
                h.join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
                    .map_err(|e| Error::file(what, format!("cannot write: {e}")))
            };
            let trace = trace.map(|h| joined(h, "<trace>"));
            let timeline = timeline.map(|h| joined(h, "<perfetto>"));
            let report = report?;
            trace.transpose()?;
            timeline.transpose()?;
            Ok(report)
        })
    }

    /// Ends the run and reports.
    pub fn finish(mut self) -> Result<Report> {
        self.poll_drains();
        if let Some(p) = self.progress.as_mut() {
            p(self.done, self.total);
        }
        if self.sim.overflowed() {
            return Err(Error::run(
                &self.s.name,
                "virtual time passed its end (2^63 ns, about 292 years): the settings make the \
                 run too long to time (look at timing.service_ms, the step-time coefficients \
                 and the workload's lengths)",
            ));
        }
        if let Some(w) = self.writer.take() {
            w.close();
        }
        if let (Some(t), true) = (&self.timeline, self.s.scales()) {
            let mut t = t.borrow_mut();
            for p in self.membership.phases() {
                t.note(crate::cluster::timeline::Mark::Phase {
                    worker: p.worker,
                    kind: p.kind,
                    start: p.start,
                    end: p.end.unwrap_or(self.sim.now()),
                });
            }
        }
        if let (Some(tx), Some(t)) = (self.marks_out.take(), &self.timeline) {
            let _ = tx.send(std::mem::take(&mut t.borrow_mut().marks));
        }
        let Session {
            s,
            hw,
            sim,
            topology,
            audit,
            learns,
            trace_rows,
            features,
            membership,
            mut recorder,
            ..
        } = self;
        let (mut r, duration_ns) =
            report(&s, &hw, &topology, sim, trace_rows, audit, learns, features);
        r.gpu_seconds = membership.gpu_seconds(duration_ns);
        r.replicas = membership.replicas();
        r.scale_events = membership.events().to_vec();
        r.sla_attainment = recorder.sla_attainment(r.requests);
        r.goodput_rps = recorder.goodput_rps(duration_ns);
        r.intervals = recorder.intervals();
        if s.scales() {
            // Slots that never held a worker are not workers of the run.
            let used: Vec<bool> = topology
                .workers()
                .iter()
                .map(|w| membership.ever_used(w.id))
                .collect();
            let mut k = 0;
            r.per_worker.retain(|_| {
                k += 1;
                used[k - 1]
            });
        }
        Ok(r)
    }
}

/// A pool's name as scenarios spell it.
pub fn pool_name(pool: Pool) -> &'static str {
    match pool {
        Pool::Workers => "workers",
        Pool::Prefill => "prefill",
        Pool::Decode => "decode",
    }
}
