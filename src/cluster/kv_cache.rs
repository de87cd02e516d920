//! A worker's KV cache: which blocks it holds, which are pinned by running requests, and which it
//! evicts when it needs room.
//!
//! Blocks of a request in flight are pinned; when it completes they stay cached but become
//! evictable. A request that needs room evicts least-recently-used evictable blocks, and only
//! leaves: never a block whose descendant stays cached, so whatever is cached is always a set of
//! whole prefixes. If there is still no room, [`KvCache::admit`] says so and the request waits.
//!
//! Because a request pins its whole chain from the first block, an unpinned block never has a
//! pinned descendant: every unpinned block can be reclaimed, so whether a request fits is known
//! before anything is evicted.

use std::collections::{BTreeSet, HashMap};

use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;

/// A worker's KV cache, with a capacity in blocks or unbounded (an unbounded cache never evicts,
/// so it keeps no eviction order).
#[derive(Clone, Debug)]
pub struct KvCache {
    capacity: Option<usize>,
    blocks: HashMap<BlockHash, Entry, BlockHashBuilder>,
    evictable: BTreeSet<(u64, BlockHash)>,
    pinned: usize,
    clock: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    parent: Option<BlockHash>,
    children: u32,
    pins: u32,
    last_use: u64,
}

/// What admitting a request did to the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// Blocks already held, counted from the front (the true hit).
    pub cached: usize,
    /// The block before the first newly stored one.
    pub parent: Option<BlockHash>,
    /// Newly stored blocks, in prompt order (a `KvStored` event).
    pub stored: Vec<BlockHash>,
    /// Blocks evicted to make room, in eviction order (a `KvRemoved` event).
    pub evicted: Vec<BlockHash>,
}

impl KvCache {
    /// An empty cache holding at most `capacity` blocks (`None`: unbounded).
    pub fn new(capacity: Option<usize>) -> Self {
        KvCache {
            capacity,
            blocks: HashMap::default(),
            evictable: BTreeSet::new(),
            pinned: 0,
            clock: 0,
        }
    }

    /// The capacity in blocks (`None`: unbounded).
    pub fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Blocks pinned by requests in flight.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// Whether `block` is held.
    pub fn contains(&self, block: BlockHash) -> bool {
        self.blocks.contains_key(&block)
    }

    /// Blocks of `blocks` held, counted from the front.
    pub fn cached_prefix(&self, blocks: &[BlockHash]) -> usize {
        blocks
            .iter()
            .take_while(|b| self.blocks.contains_key(b))
            .count()
    }

    /// Pins `blocks` for a request: finds the cached prefix, makes room by evicting LRU leaves and
    /// stores the rest. `None` (and nothing changed) when the cache cannot make room now because
    /// too many blocks are pinned. Callers cap `blocks` at the capacity.
    pub fn admit(&mut self, blocks: &[BlockHash]) -> Option<Admission> {
        let cached = self.cached_prefix(blocks);
        let need = blocks.len() - cached;
        if let Some(cap) = self.capacity {
            let newly_pinned = blocks[..cached]
                .iter()
                .filter(|b| self.blocks[b].pins == 0)
                .count();
            let reclaimable = self.blocks.len() - self.pinned - newly_pinned;
            if need > cap - self.blocks.len() + reclaimable {
                return None;
            }
        }
        self.clock += 1;
        let now = self.clock;
        for block in &blocks[..cached] {
            self.pin(*block, now);
        }
        let mut evicted = Vec::new();
        if let Some(cap) = self.capacity {
            while cap - self.blocks.len() < need {
                let (_, victim) = self
                    .evictable
                    .pop_first()
                    .expect("reclaimable blocks were counted before evicting");
                self.evict(victim);
                evicted.push(victim);
            }
        }
        let parent = cached.checked_sub(1).map(|i| blocks[i]);
        let mut prev = parent;
        for &block in &blocks[cached..] {
            if let Some(p) = prev {
                self.blocks.get_mut(&p).expect("parent is held").children += 1;
            }
            self.blocks.insert(
                block,
                Entry {
                    parent: prev,
                    children: 0,
                    pins: 1,
                    last_use: now,
                },
            );
            self.pinned += 1;
            prev = Some(block);
        }
        Some(Admission {
            cached,
            parent,
            stored: blocks[cached..].to_vec(),
            evicted,
        })
    }

    /// Unpins `blocks` (a request completed): they stay cached and become evictable once no
    /// request pins them and no cached block descends from them.
    pub fn release(&mut self, blocks: &[BlockHash]) {
        for block in blocks.iter().rev() {
            let Some(entry) = self.blocks.get_mut(block) else {
                continue;
            };
            debug_assert!(entry.pins > 0, "release without admit");
            entry.pins -= 1;
            if entry.pins == 0 {
                self.pinned -= 1;
                if entry.children == 0 && self.capacity.is_some() {
                    self.evictable.insert((entry.last_use, *block));
                }
            }
        }
    }

    /// Drops every block (a restart). Returns how many were held.
    pub fn clear(&mut self) -> usize {
        let held = self.blocks.len();
        self.blocks.clear();
        self.evictable.clear();
        self.pinned = 0;
        held
    }

    fn pin(&mut self, block: BlockHash, now: u64) {
        let entry = self.blocks.get_mut(&block).expect("cached block");
        if entry.pins == 0 {
            self.pinned += 1;
            if entry.children == 0 && self.capacity.is_some() {
                self.evictable.remove(&(entry.last_use, block));
            }
        }
        entry.pins += 1;
        entry.last_use = now;
    }

    fn evict(&mut self, victim: BlockHash) {
        let entry = self
            .blocks
            .remove(&victim)
            .expect("evictable block is held");
        if let Some(parent) = entry.parent {
            if let Some(p) = self.blocks.get_mut(&parent) {
                p.children -= 1;
                if p.children == 0 && p.pins == 0 {
                    self.evictable.insert((p.last_use, parent));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    fn prompt(prefix: u32, n: usize) -> Vec<BlockHash> {
        block_hashes(
            &(0..n as u32 * 2)
                .map(|t| prefix * 100 + t)
                .collect::<Vec<_>>(),
            2,
        )
    }

    #[test]
    fn unbounded_cache_keeps_everything() {
        let mut c = KvCache::new(None);
        let a = prompt(1, 4);
        let first = c.admit(&a).unwrap();
        assert_eq!(
            (first.cached, first.stored.len(), first.parent),
            (0, 4, None)
        );
        c.release(&a);
        let again = c.admit(&a).unwrap();
        assert_eq!((again.cached, again.stored.len()), (4, 0));
    }

    #[test]
    fn evicts_least_recently_used_leaves_first() {
        let mut c = KvCache::new(Some(4));
        let (a, b) = (prompt(1, 2), prompt(2, 2));
        c.admit(&a).unwrap();
        c.release(&a);
        c.admit(&b).unwrap();
        c.release(&b);
        let d = prompt(3, 2);
        let adm = c.admit(&d).unwrap();
        // a is older: its leaf goes first, then its root (now a leaf), never b's blocks.
        assert_eq!(adm.evicted, vec![a[1], a[0]]);
        assert!(c.contains(b[0]) && c.contains(b[1]));
    }

    #[test]
    fn never_evicts_a_block_whose_descendant_stays() {
        let mut c = KvCache::new(Some(3));
        let a = prompt(1, 3);
        c.admit(&a).unwrap();
        c.release(&a);
        let adm = c.admit(&prompt(2, 1)).unwrap();
        assert_eq!(adm.evicted, vec![a[2]]);
        assert_eq!(c.cached_prefix(&a), 2);
    }

    #[test]
    fn pinned_blocks_are_never_evicted_and_full_cache_says_wait() {
        let mut c = KvCache::new(Some(4));
        let a = prompt(1, 3);
        c.admit(&a).unwrap();
        assert_eq!(c.admit(&prompt(2, 2)), None); // a is pinned: no room
        assert_eq!(c.len(), 3);
        c.release(&a);
        assert_eq!(c.admit(&prompt(2, 2)).unwrap().evicted, vec![a[2]]);
    }

    #[test]
    fn a_shared_prefix_is_pinned_while_any_user_runs() {
        let mut c = KvCache::new(Some(4));
        let a = prompt(1, 2);
        let mut a_longer = a.clone();
        a_longer.extend(
            block_hashes(&[7, 7, 7, 7], 2)
                .iter()
                .map(|h| BlockHash(h.0 ^ 1)),
        );
        c.admit(&a).unwrap();
        let adm = c.admit(&a_longer).unwrap();
        assert_eq!((adm.cached, adm.parent), (2, Some(a[1])));
        c.release(&a);
        assert_eq!(c.pinned(), 4);
        assert_eq!(c.admit(&prompt(2, 1)), None);
        c.release(&a_longer);
        assert_eq!(c.pinned(), 0);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut c = KvCache::new(Some(8));
        c.admit(&prompt(1, 3)).unwrap();
        assert_eq!(c.clear(), 3);
        assert!(c.is_empty());
        assert_eq!(c.pinned(), 0);
    }
}
