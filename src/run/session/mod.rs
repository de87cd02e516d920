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
//! is routed elsewhere. `scaling.rs` holds the scaling and the observation, `finish.rs` the
//! one-shot run and the report.

use crate::cluster::audit::SharedAudit;
use crate::cluster::build::{populate, Built, Instruments};
use crate::cluster::client::SharedFeed;
use crate::cluster::hardware::Hardware;
use crate::cluster::membership::Membership;
use crate::cluster::timeline::{SharedTimeline, Timeline};
use crate::cluster::topology::Topology;
use crate::cluster::worker::probe::FeatureTotals;
use crate::cluster::Node;
use crate::engine::{ms_to_ns, ActorId, Envelope, Nanos, Simulation};
use crate::error::{Error, Result};
use crate::protocol::messages::Msg;
use crate::report::TraceRows;
use crate::scenario::Scenario;
use crate::sketch::SharedHistogram;

use super::recorder::Recorder;
use super::writers::{TraceSink, MARKS_BATCH};
use super::{budget, check_memory, report, BuiltWorkload, SessionHooks};

mod finish;
mod scaling;

/// A run in progress.
pub struct Session<'a> {
    s: Scenario,
    hw: Hardware,
    sim: Simulation<Node>,
    topology: Topology,
    audit: Option<SharedAudit>,
    /// The gaps between tokens the workers add to.
    itl: SharedHistogram,
    learns: bool,
    feed: SharedFeed,
    trace_rows: Option<TraceRows>,
    /// The trace thread's end, while it runs (a run to the end: [`super::run_built`]).
    writer: Option<TraceSink>,
    progress: Option<&'a mut dyn FnMut(u64, u64)>,
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
    /// Why the scenario's planner could not decide at any of its decisions, if it could not
    /// ([`crate::planner::Planner::unready`]): a warning of the report.
    planner_never_ready: Option<String>,
}

impl<'a> Session<'a> {
    /// A session of the validated scenario `s` on its built workload, with `hooks` (a stepped
    /// session writes no trace or timeline: [`super::run_built`] does). Its caller may scale
    /// it at any time, and a worker that leaves may hand a request back to be routed again, so
    /// every request's own tail stays listed and indexed ([`SessionHooks::list_own_tails`]).
    pub fn new(s: &Scenario, built: BuiltWorkload, hooks: SessionHooks<'a>) -> Result<Self> {
        let hooks = SessionHooks {
            list_own_tails: true,
            ..hooks
        };
        Self::open(s, built, hooks, false)
    }

    /// [`Session::new`], keeping the actors' timeline marks when `timeline` (for the run's
    /// timeline writer).
    pub(in crate::run) fn open(
        s: &Scenario,
        built: BuiltWorkload,
        hooks: SessionHooks<'a>,
        timeline: bool,
    ) -> Result<Self> {
        let mut hw = Hardware::resolve(s, &built.base_dir)?;
        if let Some(p) = hooks.profile {
            hw.set_profile(p);
        }
        let mut sim: Simulation<Node> = Simulation::new(built.rng);
        let total = built.recipe.total() as u64;
        let timeline = timeline.then(Timeline::shared);
        // Before anything of the cluster is allocated: a run that cannot fit is refused here.
        let own_tails_unread = crate::cluster::build::own_tails_unread(s, hooks.list_own_tails);
        check_memory(s, &hw, &built.recipe, own_tails_unread)?;
        let Built {
            topology,
            audit,
            learns,
            feed,
            itl,
        } = populate(
            s,
            &hw,
            &built.recipe,
            built.pacing,
            &mut sim,
            Instruments {
                timeline: timeline.clone(),
                record_features: hooks.features.is_some(),
                list_own_tails: hooks.list_own_tails,
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
            itl,
            trace_rows: built.trace,
            writer: None,
            progress: hooks.progress,
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
            planner_never_ready: None,
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
    /// on the way at their exact time. While a start waits for a draining worker's slot
    /// (`deferred`), each drain's end is taken up at the instant it happens, so the waiting
    /// worker starts then, not whenever the session next looks.
    pub fn advance_to(&mut self, t: Nanos) -> Result<()> {
        loop {
            let ready = self.membership.next_ready().filter(|&r| r <= t);
            let (until, inclusive) = ready.map_or((t, true), |r| (r, false));
            if self.deliver(until, inclusive)? == Delivered::DrainEnded {
                self.poll_drains();
                continue;
            }
            match ready {
                Some(r) => self.bring_up(r),
                None => break,
            }
        }
        if t != Nanos::MAX {
            self.clock = self.clock.max(t);
        }
        self.poll_drains();
        Ok(())
    }

    /// Delivers what is due before `t` (and at `t` when `inclusive`), stopping early, right
    /// after the delivery that ended it, at a drain's end while a start waits for a slot.
    fn deliver(&mut self, t: Nanos, inclusive: bool) -> Result<Delivered> {
        let limit = budget::budget();
        let client = self.topology.client();
        let bus = self.topology.bus();
        // The draining workers whose end a deferred start waits for (none, nearly always).
        let watched: Vec<ActorId> = if self.membership.has_deferred() {
            self.membership
                .draining()
                .into_iter()
                .map(|w| self.topology.worker(w).addr)
                .collect()
        } else {
            Vec::new()
        };
        let last_to = std::cell::Cell::new(client);
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
            last_to.set(env.to);
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
            if watched.contains(&last_to.get()) {
                if let Node::Worker(w) = sim.actor(last_to.get()) {
                    if w.left_at().is_some() {
                        return Ok(Delivered::DrainEnded);
                    }
                }
            }
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
                // has arrived; and a slow bus link holds what is queued on it.
                let requests = feed.borrow().in_flight_bytes();
                let queued = match sim.actor(bus) {
                    Node::Bus(b) => b.queued_bytes(),
                    _ => 0,
                };
                if requests.saturating_add(queued) > limit {
                    let at = sim.now() as f64 / 1e9;
                    let why = if queued > requests {
                        format!(
                            "the KV event bus holds {} of messages queued on its links at {at:.1} \
                             s of virtual time, more than the memory budget of {} \
                             (DYNSIM_MEMORY_GIB): they reach the link faster than it carries \
                             them (bus.link_gbps = {}; snapshot requests re-sent every \
                             router.recovery_timeout_ms = {} ms); raise either, or the budget",
                            budget::size(queued),
                            budget::size(limit),
                            s.bus.link_gbps.unwrap_or(0.0),
                            s.router.recovery_timeout_ms
                        )
                    } else {
                        format!(
                            "the requests in flight at {at:.1} s of virtual time hold {}, more \
                             than the memory budget of {} (DYNSIM_MEMORY_GIB): the cluster \
                             falls behind the arrivals; slow them (workload.speedup, \
                             rate_per_s) or add workers",
                            budget::size(requests),
                            budget::size(limit)
                        )
                    };
                    return Err(Error::run(&s.name, why));
                }
            }
        }
        Ok(Delivered::Through)
    }
}

/// How far [`Session::deliver`] went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivered {
    /// Everything due.
    Through,
    /// Up to a drain's end that a deferred start waits for.
    DrainEnded,
}
