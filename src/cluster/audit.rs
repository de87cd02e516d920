//! How right the routers' indexes are: each replica's believed (worker, block) pairs against the
//! pairs the workers really hold, as precision (the share of believed pairs really held) and
//! recall (the share of held pairs the router knows), each averaged over the time it is defined
//! (precision while the router believes something, recall while some worker holds something).
//!
//! Instrumentation, like the ground truth: workers report every change of their cache as it
//! happens, routers every event they apply (live, replayed, from a snapshot, or predicted in
//! fallback). Each (worker, block) pair held or believed has one table entry with a bit for
//! "held" and one per replica for "believed", so the counts of believed, held and common pairs
//! are kept exactly at one probe per block changed. No policy sees any of it. A believed block
//! leaves the count of common pairs when the worker evicts it and enters it again when the
//! worker stores it again.
//!
//! What a router believes is what its applied events told it, every name of them: a policy's
//! index may keep less (it leaves out stored own tails that no later decision can look up,
//! [`KvIndex::apply`](crate::index::KvIndex::apply)), so [`IndexAudit::exact`] speaks of the
//! events, not of the index's contents.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::rc::Rc;

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;
use crate::protocol::kv_event::KvEvent;

/// The handle workers and routers share (one simulation runs on one thread).
pub type SharedAudit = Rc<RefCell<IndexAudit>>;

/// The most replicas an audit follows (one bit each beside the "held" bit): as many as a scenario
/// may have.
pub const MAX_AUDITED_REPLICAS: usize = crate::limits::MAX_REPLICAS;
const _: () = assert!(MAX_AUDITED_REPLICAS < 64, "one bit per replica beside HELD");

/// A (worker, block) pair's state: held by the worker, and which replicas believe it is.
const HELD: u64 = 1 << 63;

/// Precision and recall of the routers' indexes over time.
pub struct IndexAudit {
    /// Per worker: every block held or believed, with its state bits (one probe per change).
    pairs: Vec<HashMap<BlockHash, u64, BlockHashBuilder>>,
    /// Pairs held.
    held: u64,
    replicas: Vec<Belief>,
    last: Nanos,
    /// The areas at the latest completion ([`IndexAudit::settle`]): the run ends with its last
    /// completion, and what routers apply after it (events still on the bus, answers to late
    /// recovery requests) must not count.
    settled: Option<(Nanos, Vec<Belief>)>,
}

/// One replica's counts and time averages.
#[derive(Clone, Default)]
struct Belief {
    believed: u64,
    common: u64,
    precision_area: f64,
    precision_ns: u64,
    recall_area: f64,
    recall_ns: u64,
}

/// Time-averaged precision and recall of one run's router indexes (the mean over replicas).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct IndexQuality {
    /// Believed (worker, block) pairs really held, time-averaged (1.0 when never defined).
    pub precision: f64,
    /// Held (worker, block) pairs the router knew, time-averaged (1.0 when never defined).
    pub recall: f64,
}

impl IndexAudit {
    /// An audit of `replicas` routers (at most [`MAX_AUDITED_REPLICAS`]) over `workers`
    /// routable workers.
    ///
    /// # Panics
    /// Panics with more than [`MAX_AUDITED_REPLICAS`] replicas.
    pub fn shared(workers: usize, replicas: usize) -> SharedAudit {
        assert!(
            replicas <= MAX_AUDITED_REPLICAS,
            "at most 63 audited replicas"
        );
        Rc::new(RefCell::new(IndexAudit {
            pairs: vec![HashMap::default(); workers],
            held: 0,
            replicas: vec![Belief::default(); replicas],
            last: 0,
            settled: None,
        }))
    }

    /// Accumulates the averages up to `now`.
    fn advance(&mut self, now: Nanos) {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        if dt == 0 {
            return;
        }
        for b in &mut self.replicas {
            if b.believed > 0 {
                b.precision_area += b.common as f64 / b.believed as f64 * dt as f64;
                b.precision_ns += dt;
            }
            if self.held > 0 {
                b.recall_area += b.common as f64 / self.held as f64 * dt as f64;
                b.recall_ns += dt;
            }
        }
    }

    /// Adds `delta` to the common pairs of every replica believing a pair in state `state`.
    fn believers(replicas: &mut [Belief], state: u64, delta: i64) {
        let mut bits = state & !HELD;
        while bits != 0 {
            let r = bits.trailing_zeros() as usize;
            let c = &mut replicas[r].common;
            *c = c.checked_add_signed(delta).expect("common pairs stay >= 0");
            bits &= bits - 1;
        }
    }

    /// `worker` stored `blocks` (new to its cache) at `now`.
    pub fn truth_stored(&mut self, worker: usize, blocks: &[BlockHash], now: Nanos) {
        if blocks.is_empty() {
            return;
        }
        self.advance(now);
        let pairs = &mut self.pairs[worker];
        for &x in blocks {
            let state = pairs.entry(x).or_insert(0);
            if *state & HELD == 0 {
                *state |= HELD;
                self.held += 1;
                Self::believers(&mut self.replicas, *state, 1);
            }
        }
    }

    /// `worker` evicted `blocks` at `now`.
    pub fn truth_removed(&mut self, worker: usize, blocks: &[BlockHash], now: Nanos) {
        if blocks.is_empty() {
            return;
        }
        self.advance(now);
        let pairs = &mut self.pairs[worker];
        for x in blocks {
            if let Entry::Occupied(mut e) = pairs.entry(*x) {
                let state = *e.get();
                if state & HELD != 0 {
                    self.held -= 1;
                    Self::believers(&mut self.replicas, state, -1);
                    if state == HELD {
                        e.remove();
                    } else {
                        *e.get_mut() = state & !HELD;
                    }
                }
            }
        }
    }

    /// `worker` lost its whole cache at `now`.
    pub fn truth_cleared(&mut self, worker: usize, now: Nanos) {
        self.advance(now);
        let replicas = &mut self.replicas;
        let held = &mut self.held;
        self.pairs[worker].retain(|_, state| {
            if *state & HELD != 0 {
                *held -= 1;
                Self::believers(replicas, *state, -1);
                *state &= !HELD;
            }
            *state != 0
        });
    }

    /// Router replica `replica` applied `event` at `now`.
    pub fn believe(&mut self, replica: usize, event: &KvEvent, now: Nanos) {
        self.advance(now);
        let bit = 1u64 << replica;
        let b = &mut self.replicas[replica];
        match event {
            KvEvent::Stored { worker, blocks, .. } => {
                let pairs = &mut self.pairs[worker.index()];
                for &x in blocks {
                    let state = pairs.entry(x).or_insert(0);
                    if *state & bit == 0 {
                        *state |= bit;
                        b.believed += 1;
                        b.common += u64::from(*state & HELD != 0);
                    }
                }
            }
            KvEvent::Removed { worker, blocks } => {
                let pairs = &mut self.pairs[worker.index()];
                for x in blocks {
                    if let Entry::Occupied(mut e) = pairs.entry(*x) {
                        let state = *e.get();
                        if state & bit != 0 {
                            b.believed -= 1;
                            b.common -= u64::from(state & HELD != 0);
                            if state == bit {
                                e.remove();
                            } else {
                                *e.get_mut() = state & !bit;
                            }
                        }
                    }
                }
            }
            // The audit measures the device index: lower tiers are not what it checks.
            KvEvent::TierStored { .. } | KvEvent::TierRemoved { .. } => {}
            KvEvent::Cleared { worker } => {
                self.pairs[worker.index()].retain(|_, state| {
                    if *state & bit != 0 {
                        b.believed -= 1;
                        b.common -= u64::from(*state & HELD != 0);
                        *state &= !bit;
                    }
                    *state != 0
                });
            }
        }
    }

    /// A request completed at `now`: the averages so far are kept, so that the report can
    /// stop them at the run's end (its last completion) however long deliveries go on after it.
    pub fn settle(&mut self, now: Nanos) {
        self.advance(now);
        let mut areas = self.settled.take().map(|(_, a)| a).unwrap_or_default();
        areas.clone_from(&self.replicas);
        self.settled = Some((self.last, areas));
    }

    /// The averages up to `end` (the mean over replicas): those settled at `end` when the audit
    /// has already gone past it (routers applied events after the run's last completion).
    pub fn quality(&mut self, end: Nanos) -> IndexQuality {
        let replicas = match &self.settled {
            Some((at, areas)) if end < self.last && *at == end => areas,
            _ => {
                self.advance(end);
                &self.replicas
            }
        };
        let n = replicas.len().max(1) as f64;
        let mean = |area: f64, ns: u64| if ns == 0 { 1.0 } else { area / ns as f64 };
        let (p, r) = replicas.iter().fold((0.0, 0.0), |(p, r), b| {
            (
                p + mean(b.precision_area, b.precision_ns),
                r + mean(b.recall_area, b.recall_ns),
            )
        });
        IndexQuality {
            precision: p / n,
            recall: r / n,
        }
    }

    /// Whether replica `replica` believes exactly what every worker holds, now.
    pub fn exact(&self, replica: usize) -> bool {
        let bit = 1u64 << replica;
        self.pairs
            .iter()
            .all(|m| m.values().all(|&s| (s & HELD != 0) == (s & bit != 0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::ids::WorkerId;

    #[test]
    fn precision_and_recall_are_time_averages_of_exact_counts() {
        let audit = IndexAudit::shared(1, 1);
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 16); // 4 blocks
        let mut a = audit.borrow_mut();
        // The worker holds blocks 0..4 from t = 0.
        a.truth_stored(0, &blocks, 0);
        // The router learns blocks 0 and 1 at t = 10, and wrongly one block never stored.
        let stray = block_hashes(&(100..116).collect::<Vec<u32>>(), 16);
        let stored = |bs: &[BlockHash]| KvEvent::Stored {
            worker: WorkerId(0),
            parent: None,
            blocks: bs.to_vec().into(),
        };
        a.believe(0, &stored(&blocks[..2]), 10);
        a.believe(0, &stored(&stray), 10);
        // From 10 to 30: precision 2/3, recall 2/4. Before 10: recall 0, precision undefined.
        let q = a.quality(30);
        assert!((q.precision - 2.0 / 3.0).abs() < 1e-12, "{q:?}");
        assert!(
            (q.recall - (0.0 * 10.0 + 0.5 * 20.0) / 30.0).abs() < 1e-12,
            "{q:?}"
        );
        assert!(!a.exact(0));
        a.believe(
            0,
            &KvEvent::Removed {
                worker: WorkerId(0),
                blocks: stray,
            },
            30,
        );
        a.believe(0, &stored(&blocks[2..]), 30);
        assert!(a.exact(0));
    }

    #[test]
    fn what_routers_learn_after_the_last_completion_does_not_count() {
        let audit = IndexAudit::shared(1, 1);
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 16);
        let mut a = audit.borrow_mut();
        a.truth_stored(0, &blocks, 0);
        // The run's last request completes at 100 ns before the router has learnt anything
        // (its events are late on the bus): recall 0, precision undefined (1.0).
        a.settle(100);
        // The events arrive long after the end; before `settle` they were integrated up to
        // their arrival, and a router that routed blind scored a recall near 1.
        a.believe(
            0,
            &KvEvent::Stored {
                worker: WorkerId(0),
                parent: None,
                blocks: blocks.clone().into(),
            },
            1_000,
        );
        a.truth_removed(0, &blocks[..1], 10_000);
        let q = a.quality(100);
        assert_eq!((q.precision, q.recall), (1.0, 0.0), "{q:?}");
        // A report of a later end (a stepped run going on) integrates on.
        let q = a.quality(10_000);
        assert!((q.recall - 9_000.0 / 10_000.0).abs() < 1e-12, "{q:?}");
    }
}
