//! The router's index: which worker holds which block.
//!
//! One hash table maps a block name to a slot; each slot is a bit set of the workers holding that
//! block ([`crate::worker_set`]). Matching a request walks its blocks once, front to back,
//! intersecting the set of workers that held every block so far with the holders of the next block,
//! and stops at the first block no remaining worker holds. The cost is one table lookup per matched
//! block plus one word operation per 64 workers: it does not grow with the number of workers the way
//! one set scan per worker would.
//!
//! The index stores no order of its own: nothing iterates the hash table into a result, so runs are
//! deterministic whatever the table's layout.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::hash::BlockHash;
use crate::worker_set;

/// Block names are already uniformly mixed xxh3 outputs, so the table uses them as their own hash.
#[derive(Default, Clone, Copy)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than u64; fold them in (not used by the index itself).
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `BuildHasher` for tables keyed by [`BlockHash`].
pub type BlockHashBuilder = BuildHasherDefault<IdentityHasher>;

/// Which workers hold which blocks, as the router believes it.
#[derive(Clone)]
pub struct KvIndex {
    n_workers: usize,
    words: usize,
    slots: HashMap<BlockHash, u32, BlockHashBuilder>,
    holders: Vec<u64>,
    free_slots: Vec<u32>,
    entries: usize,
}

/// Reusable buffers for [`KvIndex::find_matches`], so that routing allocates nothing.
#[derive(Clone, Default)]
pub struct MatchScratch {
    active: Vec<u64>,
    next: Vec<u64>,
}

impl KvIndex {
    /// An empty index for `n_workers` workers.
    pub fn new(n_workers: usize) -> Self {
        KvIndex {
            n_workers,
            words: worker_set::words_for(n_workers),
            slots: HashMap::default(),
            holders: Vec::new(),
            free_slots: Vec::new(),
            entries: 0,
        }
    }

    /// The number of workers this index tracks.
    pub fn n_workers(&self) -> usize {
        self.n_workers
    }

    /// The number of distinct blocks held by at least one worker.
    pub fn blocks(&self) -> usize {
        self.slots.len()
    }

    /// The number of (block, worker) pairs held.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Approximate heap bytes used by the index (table, holder sets and free list).
    pub fn heap_bytes(&self) -> usize {
        // hashbrown: one (key, value) pair plus one control byte per bucket.
        let bucket = std::mem::size_of::<(BlockHash, u32)>() + 1;
        self.slots.capacity() * bucket
            + self.holders.capacity() * 8
            + self.free_slots.capacity() * 4
    }

    /// Records that `worker` holds every block in `blocks`.
    pub fn store(&mut self, worker: usize, blocks: &[BlockHash]) {
        for &block in blocks {
            let slot = match self.slots.get(&block) {
                Some(&slot) => slot,
                None => {
                    let slot = self.allocate_slot();
                    self.slots.insert(block, slot);
                    slot
                }
            };
            let set = self.set_mut(slot);
            if !worker_set::contains(set, worker) {
                worker_set::insert(set, worker);
                self.entries += 1;
            }
        }
    }

    /// Records that `worker` no longer holds any block in `blocks` (unknown blocks are ignored).
    pub fn remove(&mut self, worker: usize, blocks: &[BlockHash]) {
        for block in blocks {
            let Some(&slot) = self.slots.get(block) else {
                continue;
            };
            let set = self.set_mut(slot);
            if !worker_set::contains(set, worker) {
                continue;
            }
            worker_set::remove(set, worker);
            let emptied = worker_set::is_empty(set);
            self.entries -= 1;
            if emptied {
                self.slots.remove(block);
                self.free_slots.push(slot);
            }
        }
    }

    /// Forgets every block `worker` holds (a `KvCleared` event or a restart).
    pub fn clear_worker(&mut self, worker: usize) {
        let blocks: Vec<BlockHash> = self
            .slots
            .iter()
            .filter(|(_, &slot)| worker_set::contains(self.set(slot), worker))
            .map(|(&block, _)| block)
            .collect();
        // Order does not matter: each removal is independent of the others.
        self.remove(worker, &blocks);
    }

    /// Whether `worker` holds `block`.
    pub fn holds(&self, worker: usize, block: BlockHash) -> bool {
        self.slots
            .get(&block)
            .is_some_and(|&slot| worker_set::contains(self.set(slot), worker))
    }

    /// Whether any worker holds `block`.
    pub fn anyone_holds(&self, block: BlockHash) -> bool {
        self.slots.contains_key(&block)
    }

    /// Walks `hashes` once and returns the deepest overlap any worker has (blocks held counted from
    /// the front); afterwards [`MatchScratch::best`] is the set of workers with that overlap (all
    /// workers when it is 0). Stops at the first block no remaining worker holds.
    pub fn find_matches(&self, hashes: &[BlockHash], scratch: &mut MatchScratch) -> usize {
        self.walk(hashes, scratch, |_, _| {})
    }

    /// Like [`KvIndex::find_matches`], and also writes every worker's own overlap into
    /// `overlaps` (resized to the worker count).
    pub fn overlaps(
        &self,
        hashes: &[BlockHash],
        scratch: &mut MatchScratch,
        overlaps: &mut Vec<usize>,
    ) -> usize {
        overlaps.clear();
        overlaps.resize(self.n_workers, 0);
        let depth = self.walk(hashes, scratch, |worker, overlap| {
            overlaps[worker] = overlap
        });
        for worker in worker_set::iter(&scratch.active) {
            overlaps[worker] = depth;
        }
        depth
    }

    fn walk(
        &self,
        hashes: &[BlockHash],
        scratch: &mut MatchScratch,
        mut dropped_out: impl FnMut(usize, usize),
    ) -> usize {
        scratch.active.clear();
        scratch.active.resize(self.words, 0);
        scratch.next.clear();
        scratch.next.resize(self.words, 0);
        worker_set::fill_all(&mut scratch.active, self.n_workers);
        for (depth, block) in hashes.iter().enumerate() {
            let Some(&slot) = self.slots.get(block) else {
                return depth;
            };
            let holders = self.set(slot);
            let mut any = 0;
            for ((next, &active), &held) in
                scratch.next.iter_mut().zip(&scratch.active).zip(holders)
            {
                *next = active & held;
                any |= *next;
            }
            if any == 0 {
                return depth;
            }
            if depth > 0 {
                for (word_index, (&active, &next)) in
                    scratch.active.iter().zip(&scratch.next).enumerate()
                {
                    let mut gone = active & !next;
                    while gone != 0 {
                        dropped_out(word_index * 64 + gone.trailing_zeros() as usize, depth);
                        gone &= gone - 1;
                    }
                }
            }
            std::mem::swap(&mut scratch.active, &mut scratch.next);
        }
        hashes.len()
    }

    fn allocate_slot(&mut self) -> u32 {
        if let Some(slot) = self.free_slots.pop() {
            return slot;
        }
        let slot = (self.holders.len() / self.words) as u32;
        self.holders.resize(self.holders.len() + self.words, 0);
        slot
    }

    fn set(&self, slot: u32) -> &[u64] {
        let start = slot as usize * self.words;
        &self.holders[start..start + self.words]
    }

    fn set_mut(&mut self, slot: u32) -> &mut [u64] {
        let start = slot as usize * self.words;
        &mut self.holders[start..start + self.words]
    }
}

impl MatchScratch {
    /// The workers with the deepest overlap found by the last match.
    pub fn best(&self) -> impl Iterator<Item = usize> + '_ {
        worker_set::iter(&self.active)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    fn names(prefix: u32, n_blocks: usize) -> Vec<BlockHash> {
        let tokens: Vec<u32> = (0..n_blocks as u32 * 4)
            .map(|t| prefix * 1000 + t)
            .collect();
        block_hashes(&tokens, 4)
    }

    #[test]
    fn overlap_is_contiguous_from_the_front() {
        let mut index = KvIndex::new(3);
        let req = names(1, 4);
        index.store(0, &req[..2]);
        index.store(1, &[req[0], req[2], req[3]]); // a hole at block 1
        index.store(2, &req);
        let mut scratch = MatchScratch::default();
        let mut overlaps = Vec::new();
        let depth = index.overlaps(&req, &mut scratch, &mut overlaps);
        assert_eq!(depth, 4);
        assert_eq!(overlaps, vec![2, 1, 4]);
        assert_eq!(scratch.best().collect::<Vec<_>>(), vec![2]);
    }

    #[test]
    fn no_match_makes_every_worker_a_candidate() {
        let index = KvIndex::new(70);
        let mut scratch = MatchScratch::default();
        assert_eq!(index.find_matches(&names(5, 3), &mut scratch), 0);
        assert_eq!(scratch.best().count(), 70);
    }

    #[test]
    fn remove_and_clear_forget_blocks() {
        let mut index = KvIndex::new(2);
        let req = names(2, 3);
        index.store(0, &req);
        index.store(1, &req);
        assert_eq!(index.entries(), 6);
        index.remove(0, &req[1..2]);
        assert!(!index.holds(0, req[1]) && index.holds(1, req[1]));
        index.clear_worker(1);
        assert_eq!(index.entries(), 2);
        assert!(!index.anyone_holds(req[1]));
        assert_eq!(index.blocks(), 2);
        let mut overlaps = Vec::new();
        index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps);
        assert_eq!(overlaps, vec![1, 0]);
    }

    #[test]
    fn storing_twice_counts_once() {
        let mut index = KvIndex::new(1);
        let req = names(3, 2);
        index.store(0, &req);
        index.store(0, &req);
        assert_eq!(index.entries(), 2);
    }
}
