//! Expiring beliefs for approximate modes (`approx`, Dynamo's without events): each recorded
//! (block, worker) pair is forgotten `ttl` after it was last recorded (Dynamo 1.6.1's
//! `PruneConfig`, a TTL only).

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

    /// The number of (block, worker) pairs believed.
    pub fn pairs(&self) -> usize {
        self.expires.len()
    }

    /// Forgets, in `index`, every belief whose time is up at `now` (and was not renewed).
    pub fn expire(&mut self, now: Nanos, index: &mut KvIndex) {
        self.expire_with(now, |worker, blocks| index.remove(worker, blocks));
    }

    /// Like [`TtlIndex::expire`], handing each worker's forgotten blocks to `forget`.
    pub fn expire_with(&mut self, now: Nanos, mut forget: impl FnMut(usize, &[BlockHash])) {
        while self.queue.front().is_some_and(|(t, _, _)| *t <= now) {
            self.forget_oldest(&mut forget);
        }
    }

    /// Drops every belief about `worker` without reporting it (its blocks are known again).
    pub fn drop_worker(&mut self, worker: usize) {
        self.expires.retain(|&(_, w), _| w != worker);
        self.queue.retain(|(_, w, _)| *w != worker);
    }

    /// Forgets the oldest record's pairs that were not renewed since.
    fn forget_oldest(&mut self, forget: &mut impl FnMut(usize, &[BlockHash])) {
        let (t, worker, blocks) = self.queue.pop_front().expect("checked non-empty");
        let stale: Vec<BlockHash> = blocks
            .into_iter()
            .filter(|b| self.expires.get(&(*b, worker)) == Some(&t))
            .collect();
        for b in &stale {
            self.expires.remove(&(*b, worker));
        }
        if !stale.is_empty() {
            forget(worker, &stale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    #[test]
    fn expiry_forgets_the_oldest_unrenewed_pairs() {
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 16);
        let mut index = KvIndex::new(2);
        let mut ttl = TtlIndex::default();
        for (t, w) in [(10, 0), (20, 1), (30, 0)] {
            let span = &blocks[..2];
            index.store(w, span);
            ttl.record(w, span, t);
        }
        assert_eq!(ttl.pairs(), 4);
        ttl.expire(15, &mut index);
        assert!(index.holds(0, blocks[0]), "renewed at 30");
        assert!(index.holds(1, blocks[0]), "recorded at 20");
        ttl.expire(25, &mut index);
        assert!(!index.holds(1, blocks[0]) && index.holds(0, blocks[1]));
        assert_eq!(ttl.pairs(), 2);
    }
}
