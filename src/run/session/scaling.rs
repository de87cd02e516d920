//! Scaling a session: workers coming up at the end of their startup, drains ending, a pool's
//! target set (`scale`), and what a planner observes.

use super::Session;
use crate::cluster::Node;
use crate::engine::Nanos;
use crate::error::{Error, Result};
use crate::planner::{Observation, PoolObservation, WorkerObservation};
use crate::protocol::messages::Msg;
use crate::round::round_py;
use crate::scenario::{Leave, Pool};

impl Session<'_> {
    /// The workers whose startup ends at `at` join: each gets `WorkerUp`, then the routers
    /// (or, for a decode worker, the prefill workers) hear of it.
    pub(super) fn bring_up(&mut self, at: Nanos) {
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
    pub(super) fn poll_drains(&mut self) {
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
                    pool.name(),
                    self.s
                        .pools()
                        .iter()
                        .map(|&p| p.name())
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
                    pool.name()
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
                    crate::cluster::membership::SlotState::Serving
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
}
