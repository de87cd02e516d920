//! Expiring beliefs for the `approx` policy: each recorded (block, worker) pair is forgotten
//! `ttl` after it was last recorded.

use std::collections::{HashMap, VecDeque};

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::index::KvIndex;

/// Expiry times of the router's own decisions.
#[derive(Default)]
pub struct TtlIndex {
    queue: VecDeque<(Nanos, usize, Vec<BlockHash>)>,
    expires: HashMap<(BlockHash, usize), Nanos>,
}

impl TtlIndex {
    /// Records that `worker` was sent `blocks`, believed until `expires`.
    pub fn record(&mut self, worker: usize, blocks: &[BlockHash], expires: Nanos) {
        for &b in blocks {
            self.expires.insert((b, worker), expires);
        }
        self.queue.push_back((expires, worker, blocks.to_vec()));
    }

    /// Forgets, in `index`, every belief whose time is up at `now` (and was not renewed).
    pub fn expire(&mut self, now: Nanos, index: &mut KvIndex) {
        while self.queue.front().is_some_and(|(t, _, _)| *t <= now) {
            let (t, worker, blocks) = self.queue.pop_front().expect("checked non-empty");
            let stale: Vec<BlockHash> = blocks
                .into_iter()
                .filter(|b| self.expires.get(&(*b, worker)) == Some(&t))
                .collect();
            for b in &stale {
                self.expires.remove(&(*b, worker));
            }
            index.remove(worker, &stale);
        }
    }
}
