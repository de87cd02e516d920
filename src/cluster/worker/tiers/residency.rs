//! What one tier holds: its blocks in least-recently-used order, each with the time its write
//! into the tier ends.

use std::collections::{HashMap, VecDeque};

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;

/// One resident block of a tier.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    /// Its place in the recency order.
    pub(super) stamp: u64,
    /// When its write into the tier ends (it cannot be read before).
    pub(super) ready: Nanos,
}

/// What one tier holds: its blocks in LRU order.
#[derive(Clone, Debug)]
pub(super) struct Residency {
    pub(super) capacity_blocks: usize,
    pub(super) entries: HashMap<BlockHash, Entry, BlockHashBuilder>,
    /// (stamp, block), least recently used first; an entry whose stamp is no longer its
    /// block's (touched since, or dropped) is stale, skipped and swept out.
    pub(super) order: VecDeque<(u64, BlockHash)>,
    pub(super) clock: u64,
}

impl Residency {
    pub(super) fn new(capacity_blocks: usize) -> Self {
        Residency {
            capacity_blocks,
            entries: HashMap::default(),
            order: VecDeque::new(),
            clock: 0,
        }
    }

    pub(super) fn stamp(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Appends `block` as the most recently used, sweeping stale entries out once they
    /// outnumber the live ones.
    pub(super) fn push(&mut self, stamp: u64, block: BlockHash) {
        self.order.push_back((stamp, block));
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(s, b)| entries.get(b).is_some_and(|e| e.stamp == *s));
        }
    }

    /// Makes `block` the most recently used if the tier holds it (one probe); returns whether
    /// it does.
    pub(super) fn touch(&mut self, block: BlockHash) -> bool {
        let Some(entry) = self.entries.get_mut(&block) else {
            return false;
        };
        self.clock += 1;
        entry.stamp = self.clock;
        self.push(self.clock, block);
        true
    }

    /// Stores `block` (not held), readable from `ready`, dropping the least recently used block
    /// if the tier is full; returns the block dropped.
    pub(super) fn put(&mut self, block: BlockHash, ready: Nanos) -> Option<BlockHash> {
        let dropped = (self.entries.len() == self.capacity_blocks).then(|| loop {
            let (stamp, victim) = self.order.pop_front().expect("a full tier holds blocks");
            if self.entries.get(&victim).is_some_and(|e| e.stamp == stamp) {
                self.entries.remove(&victim);
                break victim;
            }
        });
        let stamp = self.stamp();
        self.entries.insert(block, Entry { stamp, ready });
        self.push(stamp, block);
        dropped
    }

    /// Every block held, least recently used first (an order no hash map decides).
    pub(super) fn in_lru_order(&self) -> Vec<BlockHash> {
        self.order
            .iter()
            .filter(|(s, b)| self.entries.get(b).is_some_and(|e| e.stamp == *s))
            .map(|&(_, b)| b)
            .collect()
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }
}
