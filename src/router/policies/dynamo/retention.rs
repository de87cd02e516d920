//! How long Dynamo's approximate mode (`use_kv_events = false`) believes its own decisions:
//! `router_approximate_cache_policy`, `ttl` or `lru` (dynamo-kv-router 1.6.1,
//! `scheduling/config.rs`, `ApproximateCachePolicyKind`; the LRU model in
//! `indexer/approximate_lru.rs`, `RankLruState`).
//!
//! - `ttl` (the default): a decision is forgotten `router_ttl_secs` after it was made
//!   (`indexer/pruning.rs`; 1.6.1's `PruneConfig` has only the TTL).
//! - `lru`: the router models each worker's KV cache of its capacity in blocks. A routed
//!   request references the prompt blocks the worker is believed to hold from the front and
//!   allocates the rest (plus its partial last block, a private block without a name); when it
//!   finishes, its blocks become inactive, stamped with a release epoch; while the worker holds
//!   more than its capacity, inactive blocks are evicted, the earliest released first and, within
//!   one release, the latest in its prompt first, and a block whose last copy goes is forgotten.
//!   A worker of unknown capacity (`cluster.kv_capacity_blocks = "unbounded"` here) falls back to
//!   the TTL, as upstream's rank without a capacity does.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};

use crate::hash::BlockHash;
use crate::hashers::{BlockHashBuilder, IdBuilder};
use crate::ids::RequestId;

/// One worker's modelled cache under `lru`.
#[derive(Debug, Default)]
pub struct RankLru {
    capacity: usize,
    release_epoch: u64,
    next_copy: u64,
    copies: HashMap<u64, Copy>,
    by_hash: HashMap<BlockHash, Vec<u64>, BlockHashBuilder>,
    /// Inactive copies in eviction order: release epoch, then the latest position first.
    inactive: BTreeSet<(u64, Reverse<usize>, u64)>,
    leases: HashMap<RequestId, Lease, IdBuilder>,
    private_blocks: usize,
}

#[derive(Debug, Clone, Copy)]
struct Copy {
    hash: BlockHash,
    refs: u32,
    release_epoch: u64,
    position: usize,
}

#[derive(Debug, Default)]
struct Lease {
    copies: Vec<u64>,
    private_blocks: usize,
}

impl RankLru {
    /// A worker holding at most `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        RankLru {
            capacity,
            ..RankLru::default()
        }
    }

    /// Request `id` was sent here with `blocks` and `private_blocks` unnamed ones; returns the
    /// block names the worker is no longer believed to hold.
    pub fn acquire(
        &mut self,
        id: RequestId,
        blocks: &[BlockHash],
        private_blocks: usize,
    ) -> Vec<BlockHash> {
        if self.leases.contains_key(&id) {
            return Vec::new();
        }
        let mut lease = Lease {
            copies: Vec::with_capacity(blocks.len()),
            private_blocks,
        };
        let mut prefix_hit = true;
        for (position, &hash) in blocks.iter().enumerate() {
            let held = if prefix_hit {
                self.by_hash.get(&hash).and_then(|c| c.first()).copied()
            } else {
                None
            };
            let copy_id = match held {
                Some(id) => {
                    let c = self.copies.get_mut(&id).expect("indexed copy");
                    if c.refs == 0 {
                        self.inactive
                            .remove(&(c.release_epoch, Reverse(c.position), id));
                    }
                    c.refs += 1;
                    c.position = position;
                    id
                }
                None => {
                    prefix_hit = false;
                    let id = self.next_copy;
                    self.next_copy += 1;
                    let copy = Copy {
                        hash,
                        refs: 1,
                        release_epoch: 0,
                        position,
                    };
                    self.copies.insert(id, copy);
                    self.by_hash.entry(hash).or_default().push(id);
                    id
                }
            };
            lease.copies.push(copy_id);
        }
        self.private_blocks += private_blocks;
        self.leases.insert(id, lease);
        self.reconcile()
    }

    /// Request `id` finished (or came back): its blocks become inactive; returns the block
    /// names the worker is no longer believed to hold.
    pub fn release(&mut self, id: RequestId) -> Vec<BlockHash> {
        let Some(lease) = self.leases.remove(&id) else {
            return Vec::new();
        };
        self.release_epoch += 1;
        self.private_blocks -= lease.private_blocks;
        for copy_id in lease.copies {
            let c = self.copies.get_mut(&copy_id).expect("leased copy");
            c.refs -= 1;
            if c.refs == 0 {
                c.release_epoch = self.release_epoch;
                self.inactive
                    .insert((c.release_epoch, Reverse(c.position), copy_id));
            }
        }
        self.reconcile()
    }

    /// Evicts inactive copies while the worker holds more than its capacity.
    fn reconcile(&mut self) -> Vec<BlockHash> {
        let mut removed = Vec::new();
        while self.copies.len() + self.private_blocks > self.capacity {
            let Some((_, _, copy_id)) = self.inactive.pop_first() else {
                break;
            };
            let c = self.copies.remove(&copy_id).expect("inactive copy");
            let copies = self.by_hash.get_mut(&c.hash).expect("indexed hash");
            copies.retain(|&id| id != copy_id);
            if copies.is_empty() {
                self.by_hash.remove(&c.hash);
                removed.push(c.hash);
            }
        }
        removed
    }

    /// Blocks the worker is believed to hold (named and private).
    #[cfg(test)]
    pub fn resident(&self) -> usize {
        self.copies.len() + self.private_blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    #[test]
    fn the_earliest_release_goes_first_and_a_prompt_s_tail_before_its_head() {
        let a = block_hashes(&(0..12).collect::<Vec<u32>>(), 4); // 3 blocks
        let b = block_hashes(&(100..108).collect::<Vec<u32>>(), 4); // 2 blocks
        let mut lru = RankLru::new(4);
        assert!(lru.acquire(RequestId(1), &a, 0).is_empty());
        assert!(lru.release(RequestId(1)).is_empty(), "3 of 4: nothing evicted");
        // 5 blocks of 4: one of a's goes, its last (the tail before the head).
        assert_eq!(lru.acquire(RequestId(2), &b, 0), vec![a[2]]);
        assert_eq!(lru.resident(), 4);
        // A third prompt of 2 blocks and a partial one: b is active, so a's two remaining
        // blocks go, then nothing more can (every other block is in use).
        let c = block_hashes(&(200..208).collect::<Vec<u32>>(), 4);
        assert_eq!(lru.acquire(RequestId(3), &c, 1), vec![a[1], a[0]]);
        assert_eq!(lru.resident(), 5, "over capacity while every block is active");
        // b released after c was acquired but before c's release: b goes first.
        assert_eq!(lru.release(RequestId(2)), vec![b[1]]);
        assert_eq!(lru.release(RequestId(3)), Vec::<BlockHash>::new());
    }

    #[test]
    fn a_held_prefix_is_referenced_not_copied() {
        let a = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
        let mut lru = RankLru::new(8);
        lru.acquire(RequestId(1), &a[..2], 0);
        lru.release(RequestId(1));
        lru.acquire(RequestId(2), &a, 0);
        assert_eq!(lru.resident(), 4, "2 referenced, 2 new");
        // The referenced blocks are active again: a tiny capacity evicts nothing of them.
        lru.capacity = 1;
        assert!(lru.reconcile().is_empty());
    }
}
