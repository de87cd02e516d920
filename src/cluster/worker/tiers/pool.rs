//! The cluster's shared host pool (`[kv.host] scope = "cluster"`): one store for every worker
//! and the log of its changes each publishing worker reports.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::residency::Residency;
use super::TierMove;
use crate::hash::BlockHash;
use crate::protocol::kv_event::Tier;

/// The host tier of `[kv.host] scope = "cluster"`: one store of blocks for every worker of the
/// cluster (one capacity, one LRU), and the log of its changes that each publishing worker
/// reports on its own KV event stream (as every rank of `aisimulate-core`'s shared pool publishes
/// the pool's residency).
///
/// Each subscribed worker (one that publishes KV events) has a cursor in the log; a worker
/// drains the changes past its cursor when it publishes ([`HostPool::drain`]), and the log keeps
/// only what some subscriber has not drained. Workers are told in worker-number order, so
/// nothing depends on a hash map's order.
#[derive(Debug)]
pub struct HostPool {
    pub(super) res: Residency,
    /// Changes not yet drained by every subscriber, oldest first.
    pub(super) log: VecDeque<TierMove>,
    /// The number of changes trimmed from the log's front: `log[0]`'s number.
    base: u64,
    /// By worker number: its cursor (`None`: not subscribed) and whether a wake is on its way.
    subs: Vec<(Option<u64>, bool)>,
}

impl HostPool {
    /// The log's end: the number the next change will get.
    fn end(&self) -> u64 {
        self.base + self.log.len() as u64
    }

    /// Records a change for the subscribers (kept only if there are any).
    pub(super) fn record(&mut self, tier: Tier, stored: &[BlockHash], removed: &[BlockHash]) {
        if self.subs.iter().any(|s| s.0.is_some()) {
            self.log.push_back(TierMove {
                tier,
                stored: stored.to_vec(),
                removed: removed.to_vec(),
            });
        }
    }

    /// Worker `worker` reports the pool from now on: returns every block the pool holds, least
    /// recently used first (what it must report before the changes it will drain).
    pub fn subscribe(&mut self, worker: usize) -> Vec<BlockHash> {
        if self.subs.len() <= worker {
            self.subs.resize(worker + 1, (None, false));
        }
        let end = self.end();
        self.subs[worker].0 = Some(end);
        self.res.in_lru_order()
    }

    /// Whether `worker` reports the pool.
    pub fn subscribed(&self, worker: usize) -> bool {
        self.subs.get(worker).is_some_and(|s| s.0.is_some())
    }

    /// Worker `worker` no longer reports the pool (it went down or left).
    pub fn unsubscribe(&mut self, worker: usize) {
        if let Some(s) = self.subs.get_mut(worker) {
            s.0 = None;
        }
        self.trim();
    }

    /// The changes `worker` has not reported yet, oldest first (none if it does not subscribe);
    /// clears its wake.
    pub fn drain(&mut self, worker: usize) -> Vec<TierMove> {
        let Some(s) = self.subs.get_mut(worker) else {
            return Vec::new();
        };
        s.1 = false;
        let Some(cursor) = s.0 else {
            return Vec::new();
        };
        let end = self.base + self.log.len() as u64;
        s.0 = Some(end);
        let from = (cursor - self.base) as usize;
        let out: Vec<TierMove> = self.log.range(from..).cloned().collect();
        self.trim();
        out
    }

    /// Subscribers other than `except` with changes to report and no wake on its way, in
    /// worker-number order; marks a wake on its way to each.
    pub fn to_wake(&mut self, except: usize) -> Vec<usize> {
        let end = self.end();
        let mut out = Vec::new();
        for (w, s) in self.subs.iter_mut().enumerate() {
            if w != except && !s.1 && s.0.is_some_and(|c| c < end) {
                s.1 = true;
                out.push(w);
            }
        }
        out
    }

    /// Drops the changes every subscriber has drained.
    fn trim(&mut self) {
        let low = self
            .subs
            .iter()
            .filter_map(|s| s.0)
            .min()
            .unwrap_or_else(|| self.end());
        while self.base < low {
            self.log.pop_front();
            self.base += 1;
        }
    }

    /// Blocks the pool holds now.
    pub fn resident(&self) -> usize {
        self.res.entries.len()
    }
}

/// A handle on the cluster's shared host pool, held by every worker's tiers (one simulation
/// runs on one thread). Two handles are equal when they are the same pool.
#[derive(Clone)]
pub struct SharedHost(pub(super) Rc<RefCell<HostPool>>);

impl SharedHost {
    /// An empty pool of `capacity_blocks` blocks for the whole cluster.
    pub fn new(capacity_blocks: usize) -> Self {
        SharedHost(Rc::new(RefCell::new(HostPool {
            res: Residency::new(capacity_blocks),
            log: VecDeque::new(),
            base: 0,
            subs: Vec::new(),
        })))
    }

    /// The pool, to change (subscriptions, draining).
    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, HostPool> {
        self.0.borrow_mut()
    }

    /// The pool, to read.
    pub fn borrow(&self) -> std::cell::Ref<'_, HostPool> {
        self.0.borrow()
    }
}

impl PartialEq for SharedHost {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for SharedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedHost({} blocks)",
            self.0.borrow().res.entries.len()
        )
    }
}
