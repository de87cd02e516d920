//! Which routable workers hold each block, cluster-wide: the ground truth's index, so that loss
//! attribution asks about a request's blocks instead of about every worker.
//!
//! Each device pool that the truth reads reports here every block it puts in or takes out of
//! its name table (what [`KvPool::contains`](super::kv::KvPool::contains) sees), and the first
//! time it loses a block (its [`EvictionMemory`](super::evicted::EvictionMemory) stops being
//! empty). Per block the table keeps how many workers hold it and the XOR of their numbers: O(1)
//! per stored or evicted block, and when exactly one worker holds a block the XOR is that worker.
//! It never lists a block's holders, so it costs 16 bytes of entry per distinct block held
//! anywhere, however many workers hold it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;

/// How many workers hold a block, and the XOR of their numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    /// Workers holding the block.
    pub count: u32,
    /// The XOR of their numbers: the holder itself when `count` is 1.
    pub xor: u32,
}

impl Holders {
    /// These holders without `worker`, if it is one of them.
    pub fn without(self, worker: u32, holds: bool) -> Holders {
        if holds {
            Holders {
                count: self.count - 1,
                xor: self.xor ^ worker,
            }
        } else {
            self
        }
    }
}

/// The cluster's holders of every block, and the workers that ever lost a block.
#[derive(Debug, Default)]
pub struct HeldBy {
    blocks: HashMap<BlockHash, Holders, BlockHashBuilder>,
    /// Workers whose memory of lost blocks is not empty (each once, in the order they first lost).
    lost: Vec<u32>,
}

/// The handle the pools and the truth share (one simulation runs on one thread).
pub type SharedHeldBy = Rc<RefCell<HeldBy>>;

impl HeldBy {
    /// `worker` now holds `block` (it did not).
    pub fn add(&mut self, block: BlockHash, worker: u32) {
        let h = self.blocks.entry(block).or_default();
        h.count += 1;
        h.xor ^= worker;
    }

    /// `worker` no longer holds `block` (it did).
    pub fn remove(&mut self, block: BlockHash, worker: u32) {
        let std::collections::hash_map::Entry::Occupied(mut e) = self.blocks.entry(block) else {
            unreachable!("a pool reports only the blocks it reported held");
        };
        let h = e.get_mut();
        h.count -= 1;
        h.xor ^= worker;
        if h.count == 0 {
            e.remove();
        }
    }

    /// `worker` lost a block: from now on its memory of lost blocks may answer yes.
    pub fn lost_one(&mut self, worker: u32) {
        if !self.lost.contains(&worker) {
            self.lost.push(worker);
        }
    }

    /// Who holds `block`.
    pub fn holders(&self, block: BlockHash) -> Holders {
        self.blocks.get(&block).copied().unwrap_or_default()
    }

    /// The workers that ever lost a block.
    pub fn lost(&self) -> &[u32] {
        &self.lost
    }

    /// Distinct blocks held anywhere.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no worker holds a block.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    #[test]
    fn counts_and_names_the_holders_through_stores_and_evictions() {
        let blocks = block_hashes(&(0..40).collect::<Vec<u32>>(), 4); // 10 blocks
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut truth: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); blocks.len()];
        let mut table = HeldBy::default();
        for _ in 0..5_000 {
            let b = rng.gen_range(0..blocks.len());
            let w = rng.gen_range(0..37u32);
            if truth[b].insert(w) {
                table.add(blocks[b], w);
            } else {
                truth[b].remove(&w);
                table.remove(blocks[b], w);
            }
            for (k, holders) in truth.iter().enumerate() {
                let h = table.holders(blocks[k]);
                assert_eq!(h.count as usize, holders.len());
                if let [only] = holders.iter().copied().collect::<Vec<_>>()[..] {
                    assert_eq!(h.xor, only, "a sole holder is named");
                }
                if let Some(&first) = holders.iter().next() {
                    let rest = h.without(first, true);
                    assert_eq!(rest.count as usize, holders.len() - 1);
                }
            }
        }
        let held = truth.iter().filter(|h| !h.is_empty()).count();
        assert_eq!(table.len(), held, "blocks nobody holds leave the table");
        table.lost_one(3);
        table.lost_one(1);
        table.lost_one(3);
        assert_eq!(table.lost(), &[3, 1]);
    }
}
