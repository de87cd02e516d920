//! Matching: one walk over a request's blocks gives the deepest overlap, the workers that have
//! it, and (when asked) every worker's own overlap.

use super::holders::{inline_has, inline_ids, inline_push, EVERYONE, INLINE_MAX, SPILLED};
use super::KvIndex;
use crate::hash::BlockHash;
use crate::worker_set;

/// Reusable buffers for [`KvIndex::find_matches`], so that routing allocates nothing.
#[derive(Clone)]
pub struct MatchScratch {
    active: Vec<u64>,
    next: Vec<u64>,
    /// How many workers `active` holds, when the walk knew it (else `UNCOUNTED`).
    active_len: usize,
}

const UNCOUNTED: usize = usize::MAX;

impl Default for MatchScratch {
    fn default() -> Self {
        MatchScratch {
            active: Vec::new(),
            next: Vec::new(),
            active_len: UNCOUNTED,
        }
    }
}

impl KvIndex {
    /// Walks `hashes` once and returns the deepest overlap any worker has (blocks held counted from
    /// the front); afterwards [`MatchScratch::best`] is the set of workers with that overlap (all
    /// workers when it is 0). Stops at the first block no remaining worker holds.
    pub fn find_matches(&self, hashes: &[BlockHash], scratch: &mut MatchScratch) -> usize {
        self.walk::<false>(hashes.iter().copied(), scratch, |_, _| {})
    }

    /// [`KvIndex::find_matches`] for an index that is *prefix-closed*: every worker that holds a
    /// block of `hashes` holds every block before it (a self-tracking router that records each
    /// decision's whole prompt and never forgets, as the lab's does). Block names are chained, so
    /// a block any worker holds then has every earlier one held too: the deepest overlap is a
    /// binary search over `hashes` (O(log n) lookups instead of n), and the workers that reach
    /// it are the holders of its last block. Same result as `find_matches` on such an index;
    /// on another, it may differ.
    pub fn find_matches_prefix_closed(
        &self,
        hashes: &[BlockHash],
        scratch: &mut MatchScratch,
    ) -> usize {
        let depth = hashes.partition_point(|block| self.slots.contains_key(block));
        if depth == 0 {
            return self.find_matches(&[], scratch);
        }
        match self.find_matches(&hashes[depth - 1..depth], scratch) {
            1 => depth,
            // Held only by ids past the worker count (not prefix-closed after all): walk it all.
            _ => self.find_matches(hashes, scratch),
        }
    }

    /// Like [`KvIndex::find_matches`], for block names produced one at a time: the walk takes
    /// names from `hashes` up to and including the first block no remaining worker holds, and no
    /// further, so a caller that hashes lazily ([`crate::hash::block_names`]) hashes nothing past
    /// it and overlaps the hashing of one block with the lookup of the one before.
    pub fn find_matches_iter(
        &self,
        hashes: impl IntoIterator<Item = BlockHash>,
        scratch: &mut MatchScratch,
    ) -> usize {
        self.walk::<false>(hashes.into_iter(), scratch, |_, _| {})
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
        let depth = self.walk::<true>(hashes.iter().copied(), scratch, |worker, overlap| {
            overlaps[worker] = overlap
        });
        for worker in worker_set::iter(&scratch.active) {
            overlaps[worker] = depth;
        }
        depth
    }

    /// Like [`KvIndex::overlaps`], but lists only the workers with an overlap: appends
    /// `(worker, overlap)` for every worker holding at least the prompt's first block to
    /// `holders` (cleared first; in no particular order). The cost is the walk's and the holders',
    /// not the worker count's.
    pub fn holder_overlaps(
        &self,
        hashes: &[BlockHash],
        scratch: &mut MatchScratch,
        holders: &mut Vec<(usize, usize)>,
    ) -> usize {
        holders.clear();
        let depth = self.walk::<true>(hashes.iter().copied(), scratch, |worker, overlap| {
            holders.push((worker, overlap))
        });
        if depth > 0 {
            holders.reserve(scratch.best_count());
            worker_set::for_each(&scratch.active, |worker| holders.push((worker, depth)));
        }
        depth
    }

    /// The walk behind the matching functions. With `TRACK`, `dropped_out(worker, depth)` is called
    /// for every worker that held the first `depth` (> 0) blocks but not the next.
    #[inline]
    fn walk<const TRACK: bool>(
        &self,
        hashes: impl Iterator<Item = BlockHash>,
        scratch: &mut MatchScratch,
        dropped_out: impl FnMut(usize, usize),
    ) -> usize {
        if self.words == 1 {
            self.walk_one_word::<TRACK>(hashes, scratch, dropped_out)
        } else {
            self.walk_words::<TRACK>(hashes, scratch, dropped_out)
        }
    }

    /// Up to 64 workers: the candidates live in one register and each block costs one lookup and
    /// one AND.
    #[inline]
    fn walk_one_word<const TRACK: bool>(
        &self,
        hashes: impl Iterator<Item = BlockHash>,
        scratch: &mut MatchScratch,
        mut dropped_out: impl FnMut(usize, usize),
    ) -> usize {
        let mut all = [0u64];
        worker_set::fill_all(&mut all, self.n_workers);
        let mut active = all[0];
        let mut depth = 0;
        for block in hashes {
            let Some(&held) = self.slots.get(&block) else {
                break;
            };
            let next = active & held;
            if next == 0 {
                break;
            }
            if TRACK && depth > 0 {
                let mut gone = active & !next;
                while gone != 0 {
                    dropped_out(gone.trailing_zeros() as usize, depth);
                    gone &= gone - 1;
                }
            }
            active = next;
            depth += 1;
        }
        scratch.active.clear();
        scratch.active.push(active);
        scratch.active_len = UNCOUNTED;
        depth
    }

    /// More than 64 workers. The candidates start as a bit set in `scratch` (every worker, then
    /// the holders of spilled blocks; a block everyone holds leaves them as they are); the first block with inline holders cuts them to at most
    /// three ids, and from there on the walk keeps that short list in registers and tests each
    /// block's holders against it, whatever the worker count. Never inlined: the callers' code
    /// for up to 64 workers stays as compact as without it.
    #[inline(never)]
    fn walk_words<const TRACK: bool>(
        &self,
        mut hashes: impl Iterator<Item = BlockHash>,
        scratch: &mut MatchScratch,
        mut dropped_out: impl FnMut(usize, usize),
    ) -> usize {
        let words = self.words;
        if scratch.active.len() != words {
            scratch.active.resize(words, 0);
        }
        worker_set::fill_all(&mut scratch.active, self.n_workers);
        scratch.active_len = UNCOUNTED;
        let mut depth = 0;
        // The value of the block before (no value is all ones).
        let mut before = u64::MAX;
        // Phase 1: candidates as a bit set.
        let (mut ids, mut len) = loop {
            let Some(block) = hashes.next() else {
                return depth;
            };
            let Some(&value) = self.slots.get(&block) else {
                return depth;
            };
            if value == EVERYONE || value == before {
                // Every candidate holds it (the candidates are among the holders of the block
                // before, and a set its blocks share is their holders): nothing to intersect.
                depth += 1;
                continue;
            }
            before = value;
            if value & SPILLED != 0 {
                let held = self.set(value);
                // Whether a candidate drops out here: along a shared prefix, rarely. When none
                // does, the candidates stay as they are (and are not empty), so the common step
                // only reads both sets; the intersection is written only when one drops out.
                if !drops_any(&scratch.active, held) {
                    depth += 1;
                    continue;
                }
                if scratch.next.len() != words {
                    scratch.next.resize(words, 0);
                }
                let mut any = 0;
                for ((next, &active), &held) in
                    scratch.next.iter_mut().zip(&scratch.active).zip(held)
                {
                    *next = active & held;
                    any |= *next;
                }
                if any == 0 {
                    return depth;
                }
                if TRACK && depth > 0 {
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
                depth += 1;
                continue;
            }
            let mut ids = [0usize; INLINE_MAX as usize];
            let mut len = 0;
            for id in inline_ids(value) {
                if worker_set::contains(&scratch.active, id) {
                    ids[len] = id;
                    len += 1;
                }
            }
            if len == 0 {
                return depth;
            }
            if TRACK && depth > 0 {
                for worker in worker_set::iter(&scratch.active) {
                    if !ids[..len].contains(&worker) {
                        dropped_out(worker, depth);
                    }
                }
            }
            depth += 1;
            break (ids, len);
        };
        // Phase 2: at most three candidates, as a list; one candidate (the common case: a prefix
        // one worker holds) gets a loop of its own, with the candidate in a register.
        if len == 1 {
            let id = ids[0];
            // The value of a block this worker holds alone: one compare in the common case,
            // which keeps the work waiting on each lookup (out of order, next to the hashing)
            // as short as with one word.
            let alone = inline_push(0, id);
            for block in hashes {
                let Some(&value) = self.slots.get(&block) else {
                    break;
                };
                let held = if value == alone || value == EVERYONE {
                    true
                } else if value & SPILLED != 0 {
                    worker_set::contains(self.set(value), id)
                } else {
                    inline_has(value, id)
                };
                if !held {
                    // Nobody continues: the walk ends with this one candidate.
                    break;
                }
                depth += 1;
            }
            scratch.active.fill(0);
            worker_set::insert(&mut scratch.active, id);
            scratch.active_len = 1;
            return depth;
        }
        for block in hashes {
            let Some(&value) = self.slots.get(&block) else {
                break;
            };
            let mut kept = [0usize; INLINE_MAX as usize];
            let mut kept_len = 0;
            for &id in &ids[..len] {
                let held = if value == EVERYONE {
                    true
                } else if value & SPILLED != 0 {
                    worker_set::contains(self.set(value), id)
                } else {
                    inline_has(value, id)
                };
                kept[kept_len] = id;
                kept_len += usize::from(held);
            }
            if kept_len == 0 {
                break;
            }
            if TRACK {
                for &id in &ids[..len] {
                    if !kept[..kept_len].contains(&id) {
                        dropped_out(id, depth);
                    }
                }
            }
            ids = kept;
            len = kept_len;
            depth += 1;
        }
        scratch.active.fill(0);
        for &id in &ids[..len] {
            worker_set::insert(&mut scratch.active, id);
        }
        scratch.active_len = len;
        depth
    }
}

/// Whether some worker of `active` is not in `held` (sets of the same length): one read-only
/// pass, with no early exit, that the compiler may vectorize.
#[inline]
fn drops_any(active: &[u64], held: &[u64]) -> bool {
    let held = &held[..active.len()];
    // Four words a step into four lanes: a fixed-size body the compiler turns into vector
    // instructions (a word at a time, the loop's own counting was most of the cost).
    let (a4, h4) = (active.chunks_exact(4), held.chunks_exact(4));
    let tail = a4
        .remainder()
        .iter()
        .zip(h4.remainder())
        .fold(0, |dropped, (&a, &h)| dropped | (a & !h));
    let mut lanes = [0u64; 4];
    for (a, h) in a4.zip(h4) {
        for i in 0..4 {
            lanes[i] |= a[i] & !h[i];
        }
    }
    (lanes[0] | lanes[1] | lanes[2] | lanes[3] | tail) != 0
}

impl MatchScratch {
    /// The workers with the deepest overlap found by the last match.
    pub fn best(&self) -> impl Iterator<Item = usize> + '_ {
        worker_set::iter(&self.active)
    }

    /// How many workers have the deepest overlap found by the last match.
    pub fn best_count(&self) -> usize {
        if self.active_len == UNCOUNTED {
            worker_set::len(&self.active)
        } else {
            self.active_len
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_any_is_whether_some_candidate_is_not_held() {
        // Every length from 1 to 19 words (the four-word lanes and the tail), random sets with
        // few and many bits, against the plain test word by word.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut drops = 0;
        for case in 0..20_000 {
            let words = 1 + case % 19;
            let active: Vec<u64> = (0..words)
                .map(|_| rng.gen::<u64>() & rng.gen::<u64>())
                .collect();
            let mut held: Vec<u64> = active.iter().map(|&a| a | rng.gen::<u64>()).collect();
            if rng.gen_bool(0.5) {
                // Take one candidate out, or (a bit the candidates lack) nothing.
                let i = rng.gen_range(0..words);
                held[i] &= !(1u64 << rng.gen_range(0..64));
            }
            let plain = active.iter().zip(&held).any(|(&a, &h)| a & !h != 0);
            assert_eq!(drops_any(&active, &held), plain, "case {case}");
            drops += usize::from(plain);
        }
        assert!((1_000..10_000).contains(&drops), "{drops} cases drop one");
    }
}
