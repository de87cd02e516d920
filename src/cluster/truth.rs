//! Ground truth for loss attribution: which worker really holds which block, and which blocks a
//! worker held not long ago.
//!
//! This is measurement instrumentation, not a channel: it reads the routable workers' device
//! caches (through their engines' read-only [`CacheView`]s), the router actor asks it only to
//! annotate a decision with what other workers truly held, and no policy ever sees it. It keeps nothing of its own, so it
//! costs nothing per stored block and no memory beyond the pools' (each pool remembers one
//! capacity's worth of evicted blocks: see [`KvPool`](super::worker::kv::KvPool)).

use std::cell::RefCell;
use std::rc::Rc;

use crate::hash::BlockHash;

use super::worker::engine::CacheView;

/// The cluster's true KV state: the routable workers' device caches, by worker number.
#[derive(Default)]
pub struct Truth {
    pools: Vec<CacheView>,
}

/// The handle actors share (one simulation runs on one thread).
pub type SharedTruth = Rc<RefCell<Truth>>;

impl Truth {
    /// Truth over no worker yet.
    pub fn shared() -> SharedTruth {
        Rc::new(RefCell::new(Truth::default()))
    }

    /// Adds the next routable worker's cache.
    pub fn add_worker(&mut self, pool: CacheView) {
        self.pools.push(pool);
    }

    /// The deepest prefix of `blocks` that some worker held or remembered having held: what
    /// had been computed (not too long ago) by now.
    pub fn ever_computed_depth(&self, blocks: &[BlockHash]) -> usize {
        deepest(
            self.pools.iter(),
            blocks,
            |v, b| v.remembers(b),
            |v, blocks| v.remembered_prefix(blocks),
        )
    }

    /// The deepest prefix of `blocks` that some worker other than `chosen` holds now.
    pub fn others_best(&self, blocks: &[BlockHash], chosen: usize) -> usize {
        let others = self
            .pools
            .iter()
            .enumerate()
            .filter(|(w, _)| *w != chosen)
            .map(|(_, p)| p);
        deepest(
            others,
            blocks,
            |v, b| v.holds(b),
            |v, blocks| v.cached_prefix(blocks),
        )
    }
}

/// The deepest of the `views`' prefixes of `blocks` (`prefix(view, blocks)` each, the blocks
/// counted from the front for which `has(view, block)`), walking only the views that could beat
/// the best so far: a prefix deeper than `best` has `blocks[best]`, so a view without it is
/// skipped after one lookup. When every worker holds the same shared prefix, the first walks it
/// and each other one costs one lookup, not one per block: O(blocks + workers) per request
/// instead of O(blocks × workers).
fn deepest<V>(
    views: impl Iterator<Item = V>,
    blocks: &[BlockHash],
    has: impl Fn(&V, BlockHash) -> bool,
    prefix: impl Fn(&V, &[BlockHash]) -> usize,
) -> usize {
    let mut best = 0;
    for view in views {
        let Some(&next) = blocks.get(best) else {
            break; // every block: nobody goes deeper
        };
        if has(&view, next) {
            best = best.max(prefix(&view, blocks));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use std::collections::HashSet;

    /// The plain maximum of every view's prefix, against which the pruned walk is checked.
    fn max_prefix(views: &[HashSet<BlockHash>], blocks: &[BlockHash]) -> usize {
        let prefix = |v: &HashSet<BlockHash>| blocks.iter().take_while(|b| v.contains(b)).count();
        views.iter().map(prefix).max().unwrap_or(0)
    }

    #[test]
    fn the_pruned_walk_finds_the_deepest_prefix_of_any_view() {
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 4); // 16 blocks
        let set = |range: std::ops::Range<usize>| -> HashSet<BlockHash> {
            blocks[range].iter().copied().collect()
        };
        // A shallow holder first, then a deeper one; a view holding blocks[best] without the
        // blocks before it (not a prefix); one holding everything; nobody.
        let cases: Vec<Vec<HashSet<BlockHash>>> = vec![
            vec![set(0..3), set(0..9), set(0..5)],
            vec![set(0..4), set(4..16), set(0..6)],
            vec![set(0..2), set(0..16), set(0..12)],
            vec![set(5..9), set(0..0)],
            vec![],
        ];
        for views in cases {
            let pruned = deepest(
                views.iter(),
                &blocks,
                |v, b| v.contains(&b),
                |v, blocks| blocks.iter().take_while(|b| v.contains(b)).count(),
            );
            assert_eq!(pruned, max_prefix(&views, &blocks));
        }
        let walked = std::cell::Cell::new(0);
        let views = [set(0..8), set(0..3), set(0..5), set(0..8)];
        let depth = deepest(
            views.iter(),
            &blocks,
            |v, b| v.contains(&b),
            |v, blocks| {
                walked.set(walked.get() + 1);
                blocks.iter().take_while(|b| v.contains(b)).count()
            },
        );
        assert_eq!(depth, 8);
        assert_eq!(
            walked.get(),
            1,
            "views that cannot go deeper are not walked"
        );
    }
}
