//! The router's index: which worker holds which block.
//!
//! One hash table maps a block name to its holders, the set of workers holding that block. Matching
//! a request walks its blocks once, front to back, intersecting the set of workers that held every
//! block so far with the holders of the next block, and stops at the first block no remaining worker
//! holds. The cost is one table lookup per matched block plus one word operation per 64 workers: it
//! does not grow with the number of workers the way one set scan per worker would.
//!
//! Holders are stored in the table's value, one `u64` per block, so that a lookup touches one
//! bucket and storing a block costs one table operation:
//!
//! - with up to 64 workers the value *is* the bit set of holders;
//! - with more, it holds up to three worker ids inline (most blocks have one holder), and a block
//!   with a fourth holder moves to a bit set ([`crate::worker_set`], one `u64` per 64 workers) in
//!   a side array, which the value then points to; a block every worker holds gives its set back
//!   and is marked as held by everyone, so that a prefix shared cluster-wide costs the walk one
//!   lookup per block at any worker count. Blocks whose holders one event changed alike (a chain
//!   stored or evicted together) share one set, copied when one of them changes alone
//!   (`holders.rs`, `SpilledSets`), and the walk passes a block with the value of the block
//!   before it (the same holders) without reading its set: along a prefix that many workers
//!   hold, one set read instead of one per block.
//!
//! The index stores no order of its own: nothing iterates the hash table into a result, so runs are
//! deterministic whatever the table's layout.

mod holders;
mod walk;

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::hash::BlockHash;
use crate::protocol::kv_event::KvEvent;
use crate::worker_set;

use crate::hashers::BlockHashBuilder;
use holders::*;
pub use walk::MatchScratch;

/// Which workers hold which blocks, as the router believes it.
#[derive(Clone)]
pub struct KvIndex {
    n_workers: usize,
    words: usize,
    /// Whether blocks may list their holders inline (more than 64 workers, ids fit in 20 bits).
    inline: bool,
    /// Block name -> holders (see the module documentation).
    slots: HashMap<BlockHash, u64, BlockHashBuilder>,
    /// The bit sets of blocks with more holders than fit inline, `words` words each.
    holders: SpilledSets,
    /// The set of every worker (`words` words): a spilled set equal to it becomes `EVERYONE`.
    everyone: Vec<u64>,
    entries: usize,
}

impl KvIndex {
    /// An empty index for `n_workers` workers.
    pub fn new(n_workers: usize) -> Self {
        let words = worker_set::words_for(n_workers);
        let mut everyone = vec![0; words];
        worker_set::fill_all(&mut everyone, n_workers);
        KvIndex {
            n_workers,
            words,
            inline: words > 1 && words * 64 <= 1 << ID_BITS,
            slots: HashMap::default(),
            holders: SpilledSets::new(words),
            everyone,
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

    /// Heap bytes used by the index: the table, the spilled holder sets and their bookkeeping.
    ///
    /// The table (std's `HashMap`, hashbrown) has a power-of-two number of buckets, at most 7/8
    /// full; each bucket holds one 16-byte (name, holders) pair and one control byte, and the
    /// control bytes repeat the first 16 at the end for the group probe. Exact for the table as
    /// std lays it out today, up to the allocator's rounding.
    pub fn heap_bytes(&self) -> usize {
        table_bytes(
            self.slots.capacity(),
            std::mem::size_of::<(BlockHash, u64)>(),
        ) + self.holders.heap_bytes()
    }

    /// Records that `worker` holds every block in `blocks`.
    ///
    /// # Panics
    /// Panics if `worker` is not below the worker count rounded up to a multiple of 64.
    pub fn store(&mut self, worker: usize, blocks: &[BlockHash]) {
        assert!(
            worker < self.words * 64,
            "worker {worker} out of range for {} workers",
            self.n_workers
        );
        let KvIndex {
            words,
            inline,
            slots,
            holders,
            everyone,
            entries,
            ..
        } = self;
        if *words == 1 {
            let bit = 1u64 << worker;
            for &block in blocks {
                let set = slots.entry(block).or_insert(0);
                *entries += usize::from(*set & bit == 0);
                *set |= bit;
            }
            return;
        }
        holders.begin();
        for &block in blocks {
            // 0: a new block (no inline ids).
            let value = slots.entry(block).or_insert(0);
            let old = *value;
            if lists(old, worker, everyone, holders) {
                continue;
            }
            *entries += 1;
            // A set this block alone names takes the worker in place (and is given back when
            // it is then everyone).
            let in_place = |set: &mut [u64]| {
                worker_set::insert(set, worker);
                if set == everyone.as_slice() {
                    EVERYONE
                } else {
                    old
                }
            };
            *value = holders.update(old, in_place, |sets| match old {
                0 if *inline => inline_push(0, worker),
                // A worker past the count: a set again, of everyone and it.
                EVERYONE => sets.spill(worker_set::iter(everyone).chain([worker])),
                v if v & SPILLED != 0 => {
                    let new = sets.copy(v, |set| worker_set::insert(set, worker));
                    if sets.set(new) == everyone.as_slice() {
                        sets.release(new);
                        EVERYONE
                    } else {
                        new
                    }
                }
                v if v != 0 && inline_count(v) < INLINE_MAX => inline_push(v, worker),
                v => sets.spill(inline_ids(v).chain([worker])),
            });
        }
    }

    /// Records that `worker` no longer holds any block in `blocks` (unknown blocks are ignored).
    pub fn remove(&mut self, worker: usize, blocks: &[BlockHash]) {
        if worker >= self.words * 64 {
            return; // never stored
        }
        let KvIndex {
            words,
            slots,
            holders,
            everyone,
            entries,
            ..
        } = self;
        holders.begin();
        for block in blocks {
            // One probe: the entry is removed through the same handle when it empties.
            let Entry::Occupied(mut occupied) = slots.entry(*block) else {
                continue;
            };
            let value = occupied.get_mut();
            let old = *value;
            if *words == 1 {
                let bit = 1u64 << worker;
                if old & bit == 0 {
                    continue;
                }
                *value &= !bit;
            } else {
                if !lists(old, worker, everyone, holders) {
                    continue;
                }
                let in_place = |set: &mut [u64]| {
                    worker_set::remove(set, worker);
                    if worker_set::is_empty(set) {
                        0
                    } else {
                        old
                    }
                };
                *value = holders.update(old, in_place, |sets| match old {
                    EVERYONE => sets.spill(worker_set::iter(everyone).filter(|&w| w != worker)),
                    v if v & SPILLED != 0 => {
                        let new = sets.copy(v, |set| worker_set::remove(set, worker));
                        if worker_set::is_empty(sets.set(new)) {
                            sets.release(new);
                            0
                        } else {
                            new
                        }
                    }
                    v => {
                        let i = (0..inline_count(v))
                            .find(|&i| inline_id(v, i) == worker)
                            .expect("held");
                        inline_remove(v, i)
                    }
                });
            }
            *entries -= 1;
            // No holder left (a bit set, inline ids or a set emptied).
            if *value == 0 {
                occupied.remove();
            }
        }
    }

    /// Forgets every block `worker` holds (a `KvCleared` event or a restart).
    pub fn clear_worker(&mut self, worker: usize) {
        let blocks: Vec<BlockHash> = self
            .slots
            .iter()
            .filter(|(_, &value)| self.value_holds(value, worker))
            .map(|(&block, _)| block)
            .collect();
        // Order does not matter: each removal is independent of the others.
        self.remove(worker, &blocks);
    }

    /// Applies a KV event: the one way every events-fed index learns. A stored own tail
    /// ([`Blocks::own_tail`](crate::protocol::kv_event::Blocks::own_tail)) is not kept: only
    /// the request that stored it names it, and it was routed already; its later `Removed`
    /// finds nothing to remove.
    pub fn apply(&mut self, event: &KvEvent) {
        match event {
            KvEvent::Stored { worker, blocks, .. } => self.store(worker.index(), blocks.named()),
            KvEvent::Removed { worker, blocks } => self.remove(worker.index(), blocks),
            KvEvent::Cleared { worker } => self.clear_worker(worker.index()),
            // A device index: blocks on a lower tier are not on the device.
            KvEvent::TierStored { .. } | KvEvent::TierRemoved { .. } => {}
        }
    }

    /// Whether `worker` holds `block`.
    pub fn holds(&self, worker: usize, block: BlockHash) -> bool {
        self.slots
            .get(&block)
            .is_some_and(|&value| self.value_holds(value, worker))
    }

    /// Whether any worker holds `block`.
    pub fn anyone_holds(&self, block: BlockHash) -> bool {
        self.slots.contains_key(&block)
    }
    fn value_holds(&self, value: u64, worker: usize) -> bool {
        if worker >= self.words * 64 {
            false
        } else if self.words == 1 {
            value & (1u64 << worker) != 0
        } else {
            lists(value, worker, &self.everyone, &self.holders)
        }
    }

    /// The bit set a spilled `value` points to.
    #[inline]
    fn set(&self, value: u64) -> &[u64] {
        self.holders.set(value)
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
        holders_agree(&index, &req, &overlaps);
        holders_agree(&index, &names(9, 2), &[0, 0, 0]);
    }

    #[test]
    fn a_stored_own_tail_is_not_kept_and_its_removal_finds_nothing() {
        use crate::ids::WorkerId;
        use crate::protocol::kv_event::Blocks;
        let req = names(3, 5);
        let mut index = KvIndex::new(2);
        index.apply(&KvEvent::Stored {
            worker: WorkerId(0),
            parent: None,
            blocks: Blocks::with_own_tail(req.clone(), 2),
        });
        assert_eq!(index.blocks(), 3, "the names before the own tail, exactly");
        assert!(index.holds(0, req[2]) && !index.holds(0, req[3]));
        index.apply(&KvEvent::Removed {
            worker: WorkerId(0),
            blocks: req[2..].to_vec(),
        });
        assert_eq!(index.blocks(), 2);
        let mut read = Blocks::with_own_tail(req.clone(), 2);
        read.forget_own_tail();
        index.apply(&KvEvent::Stored {
            worker: WorkerId(1),
            parent: None,
            blocks: read,
        });
        assert_eq!(index.blocks(), 5, "a forgotten mark: every block kept");
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
        holders_agree(&index, &req, &overlaps);
    }

    /// [`KvIndex::holder_overlaps`] lists exactly the workers of `expected` (every worker's
    /// overlap) with an overlap, each with it, and returns the deepest.
    fn holders_agree(index: &KvIndex, req: &[BlockHash], expected: &[usize]) {
        let mut holders = vec![(7, 7)];
        let depth = index.holder_overlaps(req, &mut MatchScratch::default(), &mut holders);
        holders.sort_unstable();
        let want: Vec<(usize, usize)> = (0..expected.len())
            .filter(|&w| expected[w] > 0)
            .map(|w| (w, expected[w]))
            .collect();
        assert_eq!(holders, want);
        assert_eq!(depth, expected.iter().copied().max().unwrap_or(0));
    }

    #[test]
    fn storing_twice_counts_once() {
        let mut index = KvIndex::new(1);
        let req = names(3, 2);
        index.store(0, &req);
        index.store(0, &req);
        assert_eq!(index.entries(), 2);
    }

    #[test]
    fn inline_and_spilled_holders_agree_with_a_reference() {
        // 200 workers: blocks start with inline ids, spill at a fourth holder, and keep working
        // after holders leave; freed spill slots are reused.
        use std::collections::HashSet;
        let workers = 200;
        let mut index = KvIndex::new(workers);
        let mut reference: Vec<HashSet<BlockHash>> = vec![HashSet::new(); workers];
        let req = names(9, 6);
        let mut x: u64 = 1;
        for step in 0..3_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // A few workers, so that blocks gain and lose holders around the inline limit.
            let w = [0, 63, 64, 199, 100, 5][(x >> 40) as usize % 6];
            let from = (x >> 20) as usize % req.len();
            let span = &req[from..(from + 1 + (x >> 50) as usize % 3).min(req.len())];
            if (x >> 60) % 3 == 0 {
                index.remove(w, span);
                span.iter().for_each(|b| {
                    reference[w].remove(b);
                });
            } else {
                index.store(w, span);
                reference[w].extend(span);
            }
            let mut overlaps = Vec::new();
            let depth = index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps);
            let expected: Vec<usize> = reference.iter().map(|s| crate::overlap(&req, s)).collect();
            assert_eq!(overlaps, expected, "step {step}");
            assert_eq!(depth, *expected.iter().max().unwrap());
            holders_agree(&index, &req, &expected);
            let mut scratch = MatchScratch::default();
            for len in 0..=req.len() {
                let d = index.find_matches(&req[..len], &mut scratch);
                let best: Vec<usize> = scratch.best().collect();
                let expected_best: Vec<usize> = (0..workers)
                    .filter(|&w| crate::overlap(&req[..len], &reference[w]) == d)
                    .collect();
                assert_eq!(best, expected_best, "step {step} len {len}");
                assert_eq!(scratch.best_count(), best.len());
            }
            for (b, block) in req.iter().enumerate() {
                for w in [0, 5, 63, 64, 100, 199, 1] {
                    assert_eq!(
                        index.holds(w, *block),
                        reference[w].contains(block),
                        "{b} {w}"
                    );
                }
            }
            let entries: usize = reference.iter().map(HashSet::len).sum();
            assert_eq!(index.entries(), entries);
        }
        // Some blocks spilled; at most one set per block exists at once, and freed ones are reused.
        assert!(index.holders.slots() > 0);
        assert!(index.holders.slots() <= req.len());
    }

    #[test]
    fn blocks_everyone_holds_agree_with_a_reference() {
        // 66 workers (two words) and one past the count (100): stores outnumber removals, so
        // blocks keep becoming held by everyone and leaving that state again, by a removal or by
        // the worker past the count.
        use std::collections::HashSet;
        let workers = 66;
        let mut index = KvIndex::new(workers);
        let mut reference: Vec<HashSet<BlockHash>> = vec![HashSet::new(); 101];
        let req = names(11, 4);
        let mut x: u64 = 5;
        let mut everyone_seen = 0;
        for step in 0..6_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let w = if (x >> 10) % 50 == 0 {
                100
            } else {
                (x >> 40) as usize % workers
            };
            let from = (x >> 20) as usize % req.len();
            let span = &req[from..];
            let removal = if w == 100 {
                (x >> 60) % 2 == 0
            } else {
                (x >> 54) % 64 == 0
            };
            if removal {
                index.remove(w, span);
                span.iter().for_each(|b| {
                    reference[w].remove(b);
                });
            } else {
                index.store(w, span);
                reference[w].extend(span);
            }
            everyone_seen += usize::from(index.slots.values().any(|&v| v == EVERYONE));
            let mut overlaps = Vec::new();
            let depth = index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps);
            let expected: Vec<usize> = reference[..workers]
                .iter()
                .map(|s| crate::overlap(&req, s))
                .collect();
            assert_eq!(overlaps, expected, "step {step}");
            assert_eq!(depth, *expected.iter().max().unwrap());
            holders_agree(&index, &req, &expected);
            let mut scratch = MatchScratch::default();
            let d = index.find_matches(&req, &mut scratch);
            let best: Vec<usize> = scratch.best().collect();
            let expected_best: Vec<usize> = (0..workers).filter(|&w| expected[w] == d).collect();
            assert_eq!(best, expected_best, "step {step}");
            for block in &req {
                for w in [0, 1, 65, 100] {
                    assert_eq!(index.holds(w, *block), reference[w].contains(block));
                }
            }
            let entries: usize = reference.iter().map(HashSet::len).sum();
            assert_eq!(index.entries(), entries, "step {step}");
        }
        assert!(
            everyone_seen > 1_000,
            "everyone held a block {everyone_seen} times"
        );
    }

    #[test]
    fn shared_sets_agree_with_a_reference_under_any_updates() {
        // Chains stored and evicted together (so that runs of blocks share sets), single
        // blocks, repeated and reordered lists, clears, workers past the count, blocks everyone
        // holds, and (past 2^20 workers) no inline ids: every (worker, block) against
        // per-worker sets, the walks against the reference overlaps, every set's count against
        // the values that name it.
        use std::collections::HashSet;
        for (workers, steps) in [(65, 300), (130, 250), ((1 << 20) + 1, 40)] {
            let words = worker_set::words_for(workers);
            let mut index = KvIndex::new(workers);
            let req = names(31, 8);
            let other = names(32, 4);
            let all: Vec<BlockHash> = req.iter().chain(&other).copied().collect();
            // A few workers often (sets of 4 to 8 shared along the chain), one past the count
            // (when the word has room), and now and then every worker, for EVERYONE.
            let mut pool: Vec<usize> = vec![0, 1, 2, 3, 7, workers - 1, 64];
            if workers < words * 64 {
                pool.push(words * 64 - 1);
            }
            let mut reference: HashMap<usize, HashSet<BlockHash>> = HashMap::new();
            let (mut everyone_seen, mut shared_seen) = (0, 0);
            let mut x: u64 = workers as u64;
            let mut rand = |m: usize| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 33) as usize % m
            };
            for step in 0..steps {
                let w = if workers <= 130 && rand(3) == 0 {
                    rand(workers)
                } else {
                    pool[rand(pool.len())]
                };
                let blocks: Vec<BlockHash> = match rand(4) {
                    0 | 1 => {
                        let from = rand(req.len());
                        req[from..from + 1 + rand(req.len() - from)].to_vec()
                    }
                    2 => (0..1 + rand(6)).map(|_| all[rand(all.len())]).collect(),
                    _ => all.clone(),
                };
                if workers <= 130 && rand(20) == 0 {
                    // Every worker stores the list (in a random order of workers, some twice).
                    for v in (0..workers).map(|v| (v * 37 + step) % workers) {
                        index.store(v, &blocks);
                        reference.entry(v).or_default().extend(&blocks);
                    }
                }
                let held = reference.entry(w).or_default();
                match rand(10) {
                    0..=5 => {
                        index.store(w, &blocks);
                        held.extend(&blocks);
                    }
                    6..=8 => {
                        index.remove(w, &blocks);
                        blocks.iter().for_each(|b| {
                            held.remove(b);
                        });
                    }
                    _ => {
                        index.clear_worker(w);
                        held.clear();
                    }
                }
                index.holders.check_counts(index.slots.values().copied());
                everyone_seen += usize::from(index.slots.values().any(|&v| v == EVERYONE));
                let mut sets: Vec<u64> = (index.slots.values().copied())
                    .filter(|&v| v & SPILLED != 0 && v != EVERYONE)
                    .collect();
                sets.sort_unstable();
                shared_seen += usize::from(sets.windows(2).any(|p| p[0] == p[1]));
                let entries: usize = reference.values().map(HashSet::len).sum();
                assert_eq!(index.entries(), entries, "{workers} step {step}");
                let held_by =
                    |w: usize, b: &BlockHash| reference.get(&w).is_some_and(|s| s.contains(b));
                let checked: Vec<usize> = if step % 25 == 0 {
                    reference.keys().copied().collect()
                } else {
                    pool.iter().copied().chain([w]).collect()
                };
                for b in &all {
                    for &w in &checked {
                        assert_eq!(index.holds(w, *b), held_by(w, b), "{workers} step {step}");
                    }
                    assert_eq!(
                        index.anyone_holds(*b),
                        reference.values().any(|s| s.contains(b))
                    );
                }
                if workers > 1 << 20 && step + 1 < steps {
                    continue; // a walk over a million workers: once, at the end
                }
                for walked in [&req[..], &all[..], &all[2..], &[req[3], req[3], req[0]][..]] {
                    let mut expected = vec![0; workers];
                    for (&w, held) in &reference {
                        if w < workers {
                            expected[w] = walked.iter().take_while(|b| held.contains(b)).count();
                        }
                    }
                    let mut overlaps = Vec::new();
                    let depth = index.overlaps(walked, &mut MatchScratch::default(), &mut overlaps);
                    assert_eq!(overlaps, expected, "{workers} step {step}");
                    let deepest = *expected.iter().max().unwrap();
                    assert_eq!(depth, deepest);
                    holders_agree(&index, walked, &expected);
                    let mut scratch = MatchScratch::default();
                    assert_eq!(index.find_matches(walked, &mut scratch), deepest);
                    let best: Vec<usize> = scratch.best().collect();
                    let want: Vec<usize> =
                        (0..workers).filter(|&w| expected[w] == deepest).collect();
                    assert_eq!(best, want, "{workers} step {step}");
                    assert_eq!(scratch.best_count(), want.len());
                }
            }
            assert!(
                shared_seen > steps / 10,
                "{workers}: {shared_seen} steps with a shared set"
            );
            if workers <= 130 {
                assert!(everyone_seen > 0, "{workers}: a block held by everyone");
            }
        }
    }

    #[test]
    fn blocks_changed_together_share_a_set_until_one_of_them_changes_alone() {
        // 100 workers: a chain held by workers 0 to 4 spills at the fourth, all eight blocks
        // into one set; worker 2 then evicts the middle of it, which gets a copy of its own.
        let mut index = KvIndex::new(100);
        let req = names(21, 8);
        for w in 0..5 {
            index.store(w, &req);
        }
        let value = index.slots[&req[0]];
        assert!(value & SPILLED != 0);
        assert!(req.iter().all(|b| index.slots[b] == value), "one set");
        index.remove(2, &req[3..6]);
        let middle = index.slots[&req[3]];
        assert!(middle != value && req[3..6].iter().all(|b| index.slots[b] == middle));
        assert!(req[..3]
            .iter()
            .chain(&req[6..])
            .all(|b| index.slots[b] == value));
        for (i, b) in req.iter().enumerate() {
            for w in 0..6 {
                let held = w < 5 && !(w == 2 && (3..6).contains(&i));
                assert_eq!(index.holds(w, *b), held, "worker {w} block {i}");
            }
        }
        let mut overlaps = Vec::new();
        assert_eq!(
            index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps),
            8
        );
        assert_eq!(&overlaps[..6], &[8, 8, 3, 8, 8, 0]);
        holders_agree(&index, &req, &overlaps);
        assert_eq!(index.entries(), 5 * 8 - 3);
        // Worker 2 stores them again: the middle set becomes the outer one's equal, a set of
        // its own still (sets are not merged), and the walk passes both.
        index.store(2, &req[3..6]);
        assert_eq!(
            index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps),
            8
        );
        assert_eq!(&overlaps[..6], &[8, 8, 8, 8, 8, 0]);
        // Everyone leaves: no entry and no set in use.
        for w in 0..5 {
            index.remove(w, &req);
        }
        assert_eq!(index.entries(), 0);
        assert!(index.slots.is_empty());
        assert_eq!(index.holders.free_slots(), index.holders.slots());
    }

    #[test]
    fn a_block_everyone_holds_gives_its_set_back() {
        let mut index = KvIndex::new(100);
        let req = names(12, 3);
        for w in 0..100 {
            index.store(w, &req);
        }
        assert!(req.iter().all(|b| index.slots[b] == EVERYONE));
        // The three blocks gained their holders together: one set named by all three (copied to
        // a second slot as each worker joined, the first then given back), and none once they
        // held everyone.
        assert_eq!(
            index.holders.slots(),
            2,
            "one set for the three blocks, and its copy"
        );
        assert_eq!(index.holders.free_slots(), 2, "the sets are free again");
        assert_eq!(index.entries(), 300);
        index.remove(42, &req[1..2]);
        let mut overlaps = Vec::new();
        assert_eq!(
            index.overlaps(&req, &mut MatchScratch::default(), &mut overlaps),
            3
        );
        assert_eq!(overlaps[42], 1);
        assert_eq!(overlaps.iter().filter(|&&o| o == 3).count(), 99);
    }

    #[test]
    fn workers_past_the_count_but_within_the_word_are_ignored_by_matching() {
        let mut index = KvIndex::new(3);
        let req = names(4, 2);
        index.store(5, &req);
        assert!(index.holds(5, req[0]));
        assert_eq!(index.find_matches(&req, &mut MatchScratch::default()), 0);
    }

    #[test]
    fn heap_bytes_per_entry_stay_under_64() {
        // One holder per block (the least favourable case: nothing shared): the table alone.
        for workers in [4, 64, 256, 1000] {
            let mut index = KvIndex::new(workers);
            for p in 0..200u32 {
                index.store(p as usize % workers, &names(p, 100));
            }
            let per_entry = index.heap_bytes() as f64 / index.entries() as f64;
            assert!(
                per_entry <= 64.0,
                "{workers} workers: {per_entry} bytes per entry"
            );
        }
    }
}
