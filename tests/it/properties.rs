//! Property tests for the invariants of the pure core: the hash chain, overlap, and the index
//! against a plain reference (one `HashSet` per worker) on random operations.

use std::collections::HashSet;

use dynsim::index::{KvIndex, MatchScratch};
use dynsim::{block_hashes, overlap, BlockHash};
use proptest::prelude::*;

proptest! {
    /// Names at position i are equal exactly when the first i+1 blocks of tokens are equal.
    #[test]
    fn equal_name_iff_equal_prefix(
        a in prop::collection::vec(0u32..4, 0..40),
        b in prop::collection::vec(0u32..4, 0..40),
        block in 1usize..6,
    ) {
        let (ha, hb) = (block_hashes(&a, block), block_hashes(&b, block));
        prop_assert_eq!(ha.len(), a.len() / block);
        for i in 0..ha.len().min(hb.len()) {
            let same_prefix = a[..(i + 1) * block] == b[..(i + 1) * block];
            prop_assert_eq!(ha[i] == hb[i], same_prefix, "block {}", i);
        }
    }

    /// Overlap is the length of the longest cached run from the front.
    #[test]
    fn overlap_is_the_contiguous_cached_front(
        tokens in prop::collection::vec(0u32..1000, 0..80),
        held in prop::collection::vec(any::<bool>(), 0..20),
    ) {
        let hashes = block_hashes(&tokens, 4);
        let cached: HashSet<BlockHash> =
            hashes.iter().zip(&held).filter(|(_, &h)| h).map(|(h, _)| *h).collect();
        let n = overlap(&hashes, &cached);
        prop_assert!(hashes[..n].iter().all(|h| cached.contains(h)));
        prop_assert!(n == hashes.len() || !cached.contains(&hashes[n]));
    }

    /// The bit-set index agrees with one HashSet per worker after any sequence of stores,
    /// removals and clears, for every worker's overlap and for the set of best workers.
    #[test]
    fn index_agrees_with_a_plain_reference(
        workers in 1usize..130,
        ops in prop::collection::vec((0u8..3, 0usize..130, 0u32..6, 0usize..5, 0usize..5), 1..60),
        query in 0u32..6,
    ) {
        let prompt = |p: u32| block_hashes(&(0..20).map(|t| p * 100 + t).collect::<Vec<_>>(), 4);
        let mut index = KvIndex::new(workers);
        let mut reference: Vec<HashSet<BlockHash>> = vec![HashSet::new(); workers];
        for (kind, worker, p, from, len) in ops {
            let w = worker % workers;
            let blocks = prompt(p);
            let from = from.min(blocks.len());
            let span = &blocks[from..(from + len).min(blocks.len())];
            match kind {
                0 => { index.store(w, span); reference[w].extend(span.iter().copied()); }
                1 => { index.remove(w, span); for b in span { reference[w].remove(b); } }
                _ => { index.clear_worker(w); reference[w].clear(); }
            }
        }
        let q = prompt(query);
        let mut overlaps = Vec::new();
        let mut scratch = MatchScratch::default();
        let depth = index.overlaps(&q, &mut scratch, &mut overlaps);
        let expected: Vec<usize> = reference.iter().map(|set| overlap(&q, set)).collect();
        prop_assert_eq!(&overlaps, &expected);
        prop_assert_eq!(depth, *expected.iter().max().unwrap());
        let best: Vec<usize> = scratch.best().collect();
        let expected_best: Vec<usize> = (0..workers).filter(|&w| expected[w] == depth).collect();
        prop_assert_eq!(best, expected_best);
        prop_assert_eq!(index.entries(), reference.iter().map(HashSet::len).sum::<usize>());
    }
}
