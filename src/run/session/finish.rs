//! Ending a session: the one-shot run (its `[[scale]]` steps and planner in the loop), what is
//! left delivered, and the report.

use std::io::Write;

use super::super::writers::{write_timeline, write_trace, TraceSink, BATCHES_AHEAD};
use super::{report, Session};
use crate::engine::{ms_to_ns, Nanos};
use crate::error::{Error, Result};
use crate::report::Report;

impl Session<'_> {
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
                .map(|&pool| {
                    let max = self.s.planner_max_workers(pool).expect("a planner");
                    (pool, p.min_workers, max)
                })
                .collect();
            let profiler = crate::run::profiler::BenchProfiler::new(&self.s, &self.base_dir);
            (
                crate::planner::build(&p, &self.s.sla, bounds, Box::new(profiler)),
                ms_to_ns(crate::planner::interval_s(&p) * 1e3).max(1),
                p.leave,
            )
        });
        let mut next_tick = planner.as_ref().map(|p| p.1);
        // Why the planner could not decide at its last decision, and whether it ever could.
        let (mut unready, mut ever_ready) = (None, false);
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
                    // Ticks with nothing delivered between them never reach the run's own
                    // check (every few thousand deliveries).
                    crate::interrupt::check()?;
                    let obs = self.observe();
                    let leave = *leave;
                    for (pool, n) in p.decide(&obs) {
                        self.scale_by(pool, n, leave, "planner")?;
                    }
                    match p.unready() {
                        None => ever_ready = true,
                        why => unready = why,
                    }
                    next_tick = Some(tick + *every);
                }
            }
        }
        if let (Some(why), false, Some(p)) = (unready, ever_ready, &self.s.planner) {
            self.planner_never_ready = Some(format!(
                "planner.kind = \"{}\" made no decision in this run: {why}, so it changed no \
                 request (lower planner.min_observations, or give the run more decisions)",
                p.kind.name()
            ));
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

    /// The error of a run that asked for a delivery at or past the end of time.
    fn clock_overflow(&self) -> Error {
        Error::run(
            &self.s.name,
            "virtual time passed its end (2^63 ns, about 292 years): the settings make the \
             run too long to time (look at timing.service_ms, the step-time coefficients, \
             the workload's lengths and any bandwidth: kv.*.d2h_gbps, kv.*.h2d_gbps, \
             bus.link_gbps, disagg.link_gbps)",
        )
    }

    /// The error of a run whose waiting requests no worker will ever serve; or, when the run
    /// stopped at the end of time, that error (its requests wait because the clock ran out,
    /// not for a worker).
    fn stranded(&self) -> Error {
        if self.sim.overflowed() {
            return self.clock_overflow();
        }
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
    /// (`trace_out`) and the timeline (`timeline_out`, the session opened with its marks)
    /// formatted and written on threads of their own (`run/writers.rs`). An error of the run
    /// comes first, then one of writing the trace, then one of writing the timeline.
    pub(in crate::run) fn run_and_report(
        mut self,
        trace_out: Option<&mut (dyn Write + Send)>,
        timeline_out: Option<&mut (dyn Write + Send)>,
    ) -> Result<Report> {
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
            return Err(self.clock_overflow());
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
            itl,
            trace_rows,
            features,
            membership,
            mut recorder,
            planner_never_ready,
            ..
        } = self;
        let (mut r, duration_ns, stats) =
            report(&s, &hw, &topology, sim, trace_rows, audit, itl, features);
        r.gpu_seconds = membership.gpu_seconds(duration_ns);
        r.replicas = membership.replicas(duration_ns);
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
        // After the scaling fields: a warning may depend on them (no hot spot is asked of a
        // cluster whose size changed, which `scale_events` tells).
        r.warnings = crate::warnings::of_run(&s, &r, &stats, learns);
        r.warnings.extend(planner_never_ready);
        Ok(r)
    }
}
