//! Who is in the cluster over time: each worker slot's state (absent, starting, serving,
//! draining), each pool's target, and what that costs (GPU-seconds), as a pure ledger.
//!
//! A pool scales like a Kubernetes deployment: its target is the number of workers starting
//! or serving. Raising it starts workers in the lowest free slots; each pays its GPUs from the
//! moment it starts and serves `startup_s` later (model load), with an empty cache. Lowering it
//! retires workers: those still starting first (the newest first), then serving ones from the
//! highest slot down; a retired worker drains (takes nothing new, finishes what it holds) or is
//! removed at once. A draining worker keeps its slot and its GPUs until it is done. When no
//! slot is free, the start waits for one (`deferred` in the event).
//!
//! The run (`run::Session`) turns the ledger's decisions into messages (the workers'
//! `WorkerUp`/`Retire`, the routers' `Register`/`Deregister`) and tells it when a drain ended.

use serde::Serialize;

use crate::engine::Nanos;
use crate::ids::WorkerId;
use crate::round::round_py;
use crate::scenario::Pool;

mod accounts;

/// One slot's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Empty.
    Absent,
    /// Loading its model since `since`; serves at `ready_at`.
    Starting {
        /// When it started (its GPUs are paid from then).
        since: Nanos,
        /// When it serves.
        ready_at: Nanos,
    },
    /// Serving.
    Serving,
    /// Finishing what it holds.
    Draining,
}

/// What happened to one worker, for the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    /// The worker.
    pub worker: WorkerId,
    /// `starting`, `serving` or `draining`.
    pub kind: &'static str,
    /// From, ns.
    pub start: Nanos,
    /// To, ns (`None`: still in it).
    pub end: Option<Nanos>,
}

/// A pool's size at one moment (`replicas` in the report).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ReplicaPoint {
    /// When, s.
    pub t_s: f64,
    /// The pool.
    pub pool: Pool,
    /// Workers serving.
    pub workers: usize,
    /// Workers starting (paid, not serving yet).
    pub starting: usize,
    /// Workers draining (paid, taking nothing new).
    pub draining: usize,
}

/// A change of a pool's target (`scale_events` in the report).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ScaleEvent {
    /// When, s.
    pub t_s: f64,
    /// The pool.
    pub pool: Pool,
    /// Workers starting or serving before.
    pub from: usize,
    /// The new target.
    pub to: usize,
    /// Who asked: `schedule` (`[[scale]]`), `planner`, or `api` (the stepping API).
    pub by: String,
    /// Workers started.
    pub started: Vec<String>,
    /// Workers retired.
    pub retired: Vec<String>,
    /// Starts that wait for a draining worker's slot.
    pub deferred: usize,
}

/// A slot of the ledger.
#[derive(Clone, Debug)]
struct Slot {
    pool: Pool,
    gpus: u64,
    name: String,
    state: SlotState,
}

/// The ledger.
#[derive(Clone, Debug)]
pub struct Membership {
    slots: Vec<Slot>,
    startup_ns: Nanos,
    /// Starts waiting for a free slot, per pool.
    deferred: Vec<(Pool, usize)>,
    events: Vec<ScaleEvent>,
    phases: Vec<Phase>,
}

/// What the run must do after a decision: start serving, retire (and how).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Orders {
    /// Workers to retire now, with `true` to drain.
    pub retire: Vec<(WorkerId, bool)>,
}

impl Membership {
    /// A ledger of slots `(pool, GPUs per worker, name, present at the start)`, by worker
    /// number; a worker that joins serves `startup_ns` after it starts.
    pub fn new(slots: Vec<(Pool, u64, String, bool)>, startup_ns: Nanos) -> Self {
        let mut m = Membership {
            slots: slots
                .into_iter()
                .map(|(pool, gpus, name, present)| Slot {
                    pool,
                    gpus,
                    name,
                    state: if present {
                        SlotState::Serving
                    } else {
                        SlotState::Absent
                    },
                })
                .collect(),
            startup_ns,
            deferred: Vec::new(),
            events: Vec::new(),
            phases: Vec::new(),
        };
        for w in 0..m.slots.len() {
            if m.slots[w].state != SlotState::Absent {
                m.open_phase(w, "serving", 0);
            }
        }
        m
    }

    /// The state of worker `w`.
    pub fn state(&self, w: WorkerId) -> SlotState {
        self.slots[w.index()].state
    }

    /// Workers of `pool` starting or serving (its current target, less deferred starts).
    pub fn active(&self, pool: Pool) -> usize {
        self.count(pool, |s| {
            matches!(s, SlotState::Starting { .. } | SlotState::Serving)
        })
    }

    /// Workers of `pool` in a state `f` accepts.
    fn count(&self, pool: Pool, f: impl Fn(SlotState) -> bool) -> usize {
        self.slots
            .iter()
            .filter(|s| s.pool == pool && f(s.state))
            .count()
    }

    /// Workers serving, starting and draining in `pool`.
    pub fn sizes(&self, pool: Pool) -> (usize, usize, usize) {
        (
            self.count(pool, |s| matches!(s, SlotState::Serving)),
            self.count(pool, |s| matches!(s, SlotState::Starting { .. })),
            self.count(pool, |s| matches!(s, SlotState::Draining)),
        )
    }

    /// The pool's target: active workers plus deferred starts.
    pub fn target(&self, pool: Pool) -> usize {
        self.active(pool) + self.deferred_of(pool)
    }

    /// Whether a start waits for a draining worker's slot in any pool.
    pub fn has_deferred(&self) -> bool {
        self.deferred.iter().any(|&(_, n)| n > 0)
    }

    fn deferred_of(&self, pool: Pool) -> usize {
        self.deferred
            .iter()
            .find(|(p, _)| *p == pool)
            .map_or(0, |d| d.1)
    }

    /// Sets `pool`'s target to `workers` at `now` (asked `by` someone): starts workers in free
    /// slots, or retires some (`drain` or remove). Returns the workers to retire.
    pub fn scale(
        &mut self,
        pool: Pool,
        workers: usize,
        drain: bool,
        now: Nanos,
        by: &str,
    ) -> Orders {
        let from = self.target(pool);
        let mut orders = Orders::default();
        let mut event = ScaleEvent {
            t_s: secs(now),
            pool,
            from,
            to: workers,
            by: by.to_string(),
            started: Vec::new(),
            retired: Vec::new(),
            deferred: 0,
        };
        if workers == from {
            return orders;
        }
        self.deferred.retain(|(p, _)| *p != pool);
        let active = self.active(pool);
        if workers > active {
            let mut left = workers - active;
            for w in 0..self.slots.len() {
                if left == 0 {
                    break;
                }
                if self.slots[w].pool == pool && self.slots[w].state == SlotState::Absent {
                    self.start(w, now);
                    event.started.push(self.slots[w].name.clone());
                    left -= 1;
                }
            }
            if left > 0 {
                self.deferred.push((pool, left));
                event.deferred = left;
            }
        } else {
            let mut victims: Vec<usize> = (0..self.slots.len())
                .filter(|&w| {
                    self.slots[w].pool == pool
                        && matches!(self.slots[w].state, SlotState::Starting { .. })
                })
                .collect();
            victims.sort_by_key(|&w| std::cmp::Reverse((self.starting_since(w), w)));
            victims.extend((0..self.slots.len()).rev().filter(|&w| {
                self.slots[w].pool == pool && matches!(self.slots[w].state, SlotState::Serving)
            }));
            for &w in victims.iter().take(active - workers) {
                event.retired.push(self.slots[w].name.clone());
                match self.slots[w].state {
                    // Never served: it stops loading, nothing to drain or tell.
                    SlotState::Starting { .. } => self.absent(w, now),
                    _ if drain => {
                        self.close_phase(w, now);
                        self.open_phase(w, "draining", now);
                        self.slots[w].state = SlotState::Draining;
                        orders.retire.push((WorkerId::at(w), true));
                    }
                    _ => {
                        self.absent(w, now);
                        orders.retire.push((WorkerId::at(w), false));
                    }
                }
            }
        }
        self.events.push(event);
        orders
    }

    fn starting_since(&self, w: usize) -> Nanos {
        match self.slots[w].state {
            SlotState::Starting { since, .. } => since,
            _ => 0,
        }
    }

    fn start(&mut self, w: usize, now: Nanos) {
        self.slots[w].state = SlotState::Starting {
            since: now,
            ready_at: now.saturating_add(self.startup_ns),
        };
        self.open_phase(w, "starting", now);
    }

    /// The slot becomes empty at `at`: its GPUs are no longer paid.
    fn absent(&mut self, w: usize, at: Nanos) {
        self.close_phase(w, at);
        self.slots[w].state = SlotState::Absent;
    }

    /// The earliest time a starting worker serves.
    pub fn next_ready(&self) -> Option<Nanos> {
        self.slots
            .iter()
            .filter_map(|s| match s.state {
                SlotState::Starting { ready_at, .. } => Some(ready_at),
                _ => None,
            })
            .min()
    }

    /// The workers that serve from `now` (those whose start is done), in slot order.
    pub fn ready(&mut self, now: Nanos) -> Vec<WorkerId> {
        let mut out = Vec::new();
        for w in 0..self.slots.len() {
            if let SlotState::Starting { ready_at, .. } = self.slots[w].state {
                if ready_at <= now {
                    self.slots[w].state = SlotState::Serving;
                    self.close_phase(w, now);
                    self.open_phase(w, "serving", now);
                    out.push(WorkerId::at(w));
                }
            }
        }
        out
    }

    /// Worker `w`'s drain ended at `at`: its slot is free (and a deferred start takes it, at
    /// `now`).
    pub fn drained(&mut self, w: WorkerId, at: Nanos, now: Nanos) {
        let pool = self.slots[w.index()].pool;
        self.absent(w.index(), at);
        let waiting = self.deferred_of(pool);
        if waiting > 0 {
            let target = self.active(pool) + waiting;
            self.deferred.retain(|(p, _)| *p != pool);
            self.scale(pool, target, true, now, "deferred");
        }
    }

    /// Workers draining.
    pub fn draining(&self) -> Vec<WorkerId> {
        (0..self.slots.len())
            .filter(|&w| matches!(self.slots[w].state, SlotState::Draining))
            .map(WorkerId::at)
            .collect()
    }

    fn open_phase(&mut self, w: usize, kind: &'static str, at: Nanos) {
        self.phases.push(Phase {
            worker: WorkerId::at(w),
            kind,
            start: at,
            end: None,
        });
    }

    fn close_phase(&mut self, w: usize, at: Nanos) {
        let worker = WorkerId::at(w);
        if let Some(p) = self
            .phases
            .iter_mut()
            .rev()
            .find(|p| p.worker == worker && p.end.is_none())
        {
            p.end = Some(at);
        }
    }
}

/// Seconds of `ns` (6 decimals).
fn secs(ns: Nanos) -> f64 {
    round_py(ns as f64 / 1e9, 6)
}

#[cfg(test)]
mod tests;
