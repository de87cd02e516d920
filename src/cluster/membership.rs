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
    /// Serving since `since` (its GPUs paid since `paid_from`).
    Serving {
        /// When it started.
        paid_from: Nanos,
    },
    /// Finishing what it holds.
    Draining {
        /// When it started.
        paid_from: Nanos,
    },
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
    /// GPU-nanoseconds of the phases that ended.
    closed_gpu_ns: u128,
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
                        SlotState::Serving { paid_from: 0 }
                    } else {
                        SlotState::Absent
                    },
                })
                .collect(),
            startup_ns,
            deferred: Vec::new(),
            closed_gpu_ns: 0,
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
            matches!(s, SlotState::Starting { .. } | SlotState::Serving { .. })
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
            self.count(pool, |s| matches!(s, SlotState::Serving { .. })),
            self.count(pool, |s| matches!(s, SlotState::Starting { .. })),
            self.count(pool, |s| matches!(s, SlotState::Draining { .. })),
        )
    }

    /// The pool's target: active workers plus deferred starts.
    pub fn target(&self, pool: Pool) -> usize {
        self.active(pool) + self.deferred_of(pool)
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
                self.slots[w].pool == pool
                    && matches!(self.slots[w].state, SlotState::Serving { .. })
            }));
            for &w in victims.iter().take(active - workers) {
                event.retired.push(self.slots[w].name.clone());
                match self.slots[w].state {
                    // Never served: it stops loading, nothing to drain or tell.
                    SlotState::Starting { .. } => self.absent(w, now),
                    _ if drain => {
                        self.close_phase(w, now);
                        self.open_phase(w, "draining", now);
                        let paid_from = self.paid_from(w);
                        self.slots[w].state = SlotState::Draining { paid_from };
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

    fn paid_from(&self, w: usize) -> Nanos {
        match self.slots[w].state {
            SlotState::Starting { since, .. } => since,
            SlotState::Serving { paid_from } | SlotState::Draining { paid_from } => paid_from,
            SlotState::Absent => 0,
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
        let slot = &self.slots[w];
        self.closed_gpu_ns +=
            u128::from(slot.gpus) * u128::from(at.saturating_sub(self.paid_from(w)));
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
            if let SlotState::Starting { since, ready_at } = self.slots[w].state {
                if ready_at <= now {
                    self.slots[w].state = SlotState::Serving { paid_from: since };
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
            .filter(|&w| matches!(self.slots[w].state, SlotState::Draining { .. }))
            .map(WorkerId::at)
            .collect()
    }

    /// GPU-seconds paid up to `end` (startup included; 3 decimals).
    pub fn gpu_seconds(&self, end: Nanos) -> f64 {
        let open: u128 = (0..self.slots.len())
            .filter(|&w| self.slots[w].state != SlotState::Absent)
            .map(|w| {
                u128::from(self.slots[w].gpus) * u128::from(end.saturating_sub(self.paid_from(w)))
            })
            .sum();
        round_py((self.closed_gpu_ns + open) as f64 / 1e9, 3)
    }

    /// Each pool's size at every change, from the workers' phases (the first at 0 s).
    pub fn replicas(&self) -> Vec<ReplicaPoint> {
        // (time, pool, kind, +1 or -1), in time order; phases that begin and end at one
        // instant cancel out.
        let mut changes: Vec<(Nanos, Pool, &'static str, i64)> = Vec::new();
        for p in &self.phases {
            let pool = self.slots[p.worker.index()].pool;
            changes.push((p.start, pool, p.kind, 1));
            if let Some(end) = p.end {
                changes.push((end, pool, p.kind, -1));
            }
        }
        changes.sort_by_key(|c| c.0);
        let mut pools: Vec<Pool> = self.slots.iter().map(|s| s.pool).collect();
        pools.dedup();
        let mut sizes: Vec<[i64; 3]> = vec![[0; 3]; pools.len()];
        let mut out: Vec<ReplicaPoint> = Vec::new();
        let mut k = 0;
        while k < changes.len() || out.is_empty() {
            let at = changes.get(k).map_or(0, |c| c.0);
            while k < changes.len() && changes[k].0 == at {
                let (_, pool, kind, d) = changes[k];
                let i = pools.iter().position(|&p| p == pool).expect("a pool");
                let j = match kind {
                    "serving" => 0,
                    "starting" => 1,
                    _ => 2,
                };
                sizes[i][j] += d;
                k += 1;
            }
            for (i, &pool) in pools.iter().enumerate() {
                let [w, st, dr] = sizes[i].map(|x| x.max(0) as usize);
                let last = out.iter().rev().find(|p| p.pool == pool);
                if last.is_some_and(|l| (l.workers, l.starting, l.draining) == (w, st, dr)) {
                    continue;
                }
                out.push(ReplicaPoint {
                    t_s: secs(at),
                    pool,
                    workers: w,
                    starting: st,
                    draining: dr,
                });
            }
            if changes.is_empty() {
                break;
            }
        }
        out
    }

    /// Every change of a target.
    pub fn events(&self) -> &[ScaleEvent] {
        &self.events
    }

    /// Every worker's phases (starting, serving, draining), in the order they began.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// Whether worker `w` was ever in the cluster.
    pub fn ever_used(&self, w: WorkerId) -> bool {
        self.phases.iter().any(|p| p.worker == w)
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
mod tests {
    use super::*;

    fn ledger(present: usize, slots: usize) -> Membership {
        let slots = (0..slots)
            .map(|w| (Pool::Workers, 2, format!("worker{w}"), w < present))
            .collect();
        Membership::new(slots, 60_000_000_000)
    }

    #[test]
    fn gpu_seconds_count_startup_and_drains_by_hand() {
        // Two workers of 2 GPUs from 0; a third starts at 100 s (serves at 160 s); at 200 s the
        // pool goes back to 2, draining worker2 (the highest slot), whose drain ends at 230 s.
        let mut m = ledger(2, 4);
        let orders = m.scale(Pool::Workers, 3, true, 100_000_000_000, "schedule");
        assert!(orders.retire.is_empty());
        assert_eq!(m.next_ready(), Some(160_000_000_000));
        assert_eq!(m.ready(160_000_000_000), vec![WorkerId(2)]);
        let orders = m.scale(Pool::Workers, 2, true, 200_000_000_000, "schedule");
        assert_eq!(orders.retire, vec![(WorkerId(2), true)]);
        m.drained(WorkerId(2), 230_000_000_000, 240_000_000_000);
        // 2 x 2 x 300 s + 2 x (230 - 100) s = 1,200 + 260.
        assert_eq!(m.gpu_seconds(300_000_000_000), 1460.0);
        assert_eq!(m.sizes(Pool::Workers), (2, 0, 0));
        let kinds: Vec<_> = m
            .phases()
            .iter()
            .filter(|p| p.worker == WorkerId(2))
            .map(|p| {
                (
                    p.kind,
                    p.start / 1_000_000_000,
                    p.end.map(|e| e / 1_000_000_000),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("starting", 100, Some(160)),
                ("serving", 160, Some(200)),
                ("draining", 200, Some(230))
            ]
        );
    }

    #[test]
    fn shrinking_retires_starting_workers_first_and_full_slots_defer_starts() {
        let mut m = ledger(1, 2);
        m.scale(Pool::Workers, 2, true, 10, "api");
        let orders = m.scale(Pool::Workers, 1, true, 20, "api");
        assert!(orders.retire.is_empty(), "a starting worker just stops");
        assert_eq!(m.state(WorkerId(1)), SlotState::Absent);
        assert_eq!(
            m.gpu_seconds(20),
            round_py((2 * 20 + 2 * 10) as f64 / 1e9, 3)
        );
        // Both slots full (one draining): a start waits for the slot.
        m.scale(Pool::Workers, 2, true, 30, "api");
        m.ready(30 + 60_000_000_000);
        m.scale(Pool::Workers, 1, true, 70_000_000_000, "api");
        let e = m.scale(Pool::Workers, 2, true, 71_000_000_000, "api");
        assert!(e.retire.is_empty());
        assert_eq!(m.events().last().unwrap().deferred, 1);
        assert_eq!(m.target(Pool::Workers), 2);
        m.drained(WorkerId(1), 72_000_000_000, 73_000_000_000);
        assert!(matches!(
            m.state(WorkerId(1)),
            SlotState::Starting {
                since: 73_000_000_000,
                ..
            }
        ));
    }
}
