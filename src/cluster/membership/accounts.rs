//! What the ledger reports: GPU-seconds, each pool's size at every change, the scale events
//! and the workers' phases.

use super::{secs, Membership, Phase, ReplicaPoint, ScaleEvent};
use crate::engine::Nanos;
use crate::ids::WorkerId;
use crate::round::round_py;
use crate::scenario::Pool;

impl Membership {
    /// GPU-seconds paid up to `end`, the run's end (startup included; 3 decimals): a worker's
    /// phases cover it from its start to its leaving, so they are what was paid, each cut at
    /// `end` (a stepped run may scale after its last completion: the workers it retires then
    /// were paid up to their leaving, where those it kept were cut at the end).
    pub fn gpu_seconds(&self, end: Nanos) -> f64 {
        let paid: u128 = self
            .phases
            .iter()
            .map(|p| {
                let to = p.end.map_or(end, |e| e.min(end));
                u128::from(self.slots[p.worker.index()].gpus)
                    * u128::from(to.saturating_sub(p.start))
            })
            .sum();
        round_py(paid as f64 / 1e9, 3)
    }

    /// Each pool's size at every change up to `end`, the run's end, from the workers' phases
    /// (the first at 0 s). As GPU-seconds, they stop at the end: a worker that comes up after
    /// the last completion never served the run.
    pub fn replicas(&self, end: Nanos) -> Vec<ReplicaPoint> {
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
        changes.retain(|c| c.0 <= end);
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
}
