//! Ground truth for loss attribution: which worker really holds which block, and which blocks a
//! worker held not long ago.
//!
//! This is measurement instrumentation, not a channel: it reads the routable workers' device
//! caches (through their engines' [`CacheView`]s), the router actor asks it only to annotate a
//! decision with what other workers truly held, and no policy ever sees it. Besides the pools it
//! keeps one table, [`HeldBy`]: how many workers hold each block and the XOR of their numbers,
//! kept current by the pools (O(1) per block stored or evicted; 16 bytes of entry per distinct
//! block held anywhere). With it a question about a request costs O(its blocks), not one lookup
//! per worker: see `deepest`. Each pool remembers one capacity's worth of evicted blocks (see
//! [`KvPool`](super::worker::kv::KvPool)); the few workers that ever lost a block are probed
//! one by one for the "remembered" half.

use std::cell::RefCell;
use std::rc::Rc;

use crate::hash::BlockHash;

use super::worker::engine::CacheView;
use super::worker::held_by::{HeldBy, Holders, SharedHeldBy};

/// The cluster's true KV state: the routable workers' device caches, by worker number, and who
/// holds each block.
#[derive(Default)]
pub struct Truth {
    pools: Vec<CacheView>,
    held_by: SharedHeldBy,
}

/// The handle actors share (one simulation runs on one thread).
pub type SharedTruth = Rc<RefCell<Truth>>;

/// Who has a block, as far as the walk needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Having {
    /// Nobody.
    Nobody,
    /// Exactly this view.
    One(usize),
    /// Two or more views (which ones, a scan finds).
    Several,
}

impl Truth {
    /// Truth over no worker yet.
    pub fn shared() -> SharedTruth {
        Rc::new(RefCell::new(Truth::default()))
    }

    /// Adds the next routable worker's cache, which reports its blocks to the table of holders.
    pub fn add_worker(&mut self, pool: CacheView) {
        let number = u32::try_from(self.pools.len()).expect("fewer than 2^32 workers");
        pool.report_to(Rc::clone(&self.held_by), number);
        self.pools.push(pool);
    }

    /// The deepest prefix of `blocks` that some worker held or remembered having held: what
    /// had been computed (not too long ago) by now.
    pub fn ever_computed_depth(&self, blocks: &[BlockHash]) -> usize {
        let held_by = self.held_by.borrow();
        let having = |b: BlockHash| {
            let holders = held_by.holders(b);
            // Workers that remember `b` without holding it (only those that ever lost a block).
            let mut also = held_by
                .lost()
                .iter()
                .map(|&w| w as usize)
                .filter(|&w| self.pools[w].lost_recently(b) && !self.pools[w].holds(b));
            having_from(holders, also.next(), also.next().is_some())
        };
        deepest(
            self.pools.len(),
            blocks,
            |w, b| self.pools[w].remembers(b),
            |w, blocks| self.pools[w].remembered_prefix(blocks),
            having,
        )
    }

    /// The deepest prefix of `blocks` that some worker other than `chosen` holds now.
    pub fn others_best(&self, blocks: &[BlockHash], chosen: usize) -> usize {
        let held_by = self.held_by.borrow();
        let chosen_pool = self.pools.get(chosen);
        let having = |b: BlockHash| {
            let holds = chosen_pool.is_some_and(|p| p.holds(b));
            having_from(
                held_by.holders(b).without(chosen as u32, holds),
                None,
                false,
            )
        };
        deepest(
            self.pools.len(),
            blocks,
            |w, b| w != chosen && self.pools[w].holds(b),
            |w, blocks| self.pools[w].cached_prefix(blocks),
            having,
        )
    }

    /// The table of holders (for tests and memory accounting).
    pub fn held_by(&self) -> std::cell::Ref<'_, HeldBy> {
        self.held_by.borrow()
    }
}

/// Who has a block: its holders from the table, plus `extra` (a view that has it without holding
/// it, if any) and whether there are more such views.
fn having_from(holders: Holders, extra: Option<usize>, more: bool) -> Having {
    match (holders.count, extra) {
        _ if more => Having::Several,
        (0, None) => Having::Nobody,
        (0, Some(w)) => Having::One(w),
        (1, None) => Having::One(holders.xor as usize),
        _ => Having::Several,
    }
}

/// The deepest of `n` views' prefixes of `blocks` (`prefix(view, blocks)` each, the blocks
/// counted from the front for which `has(view, block)`), walking only views that could beat the
/// best so far: a prefix deeper than `best` has `blocks[best]`. `having(block)` says exactly who
/// has a block (by the table of holders): when nobody has `blocks[best]` the answer is `best`
/// at once, when one view has it that view is walked, and only when several have it are the
/// views scanned in order from where the last scan stopped (the views before it cannot beat
/// `best`: each was walked, or lacked an earlier `blocks[best]`). When every worker holds the
/// same shared prefix and nobody its tail, the first holder is walked and the scan stops there:
/// O(blocks) per request whatever the worker count, instead of one lookup per worker.
fn deepest(
    n: usize,
    blocks: &[BlockHash],
    has: impl Fn(usize, BlockHash) -> bool,
    prefix: impl Fn(usize, &[BlockHash]) -> usize,
    having: impl Fn(BlockHash) -> Having,
) -> usize {
    let mut best = 0;
    let mut from = 0;
    while let Some(&next) = blocks.get(best) {
        match having(next) {
            Having::Nobody => break,
            Having::One(view) => {
                let depth = prefix(view, blocks);
                if depth <= best {
                    break; // the only view with `next` goes no deeper
                }
                best = depth;
            }
            Having::Several => {
                let Some(view) = (from..n).find(|&v| has(v, next)) else {
                    break;
                };
                from = view + 1;
                best = best.max(prefix(view, blocks));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::worker::kv::{Changes, KvPool};
    use crate::hash::block_hashes;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    /// The plain maximum of every view's prefix, against which the pruned walk is checked.
    fn max_prefix(views: &[HashSet<BlockHash>], blocks: &[BlockHash]) -> usize {
        let prefix = |v: &HashSet<BlockHash>| blocks.iter().take_while(|b| v.contains(b)).count();
        views.iter().map(prefix).max().unwrap_or(0)
    }

    /// The walk over plain sets, with `having` counted from the sets themselves.
    fn walk(views: &[HashSet<BlockHash>], blocks: &[BlockHash], walked: &Cell<usize>) -> usize {
        deepest(
            views.len(),
            blocks,
            |v, b| views[v].contains(&b),
            |v, blocks| {
                walked.set(walked.get() + 1);
                blocks.iter().take_while(|b| views[v].contains(b)).count()
            },
            |b| {
                let mut with = (0..views.len()).filter(|&v| views[v].contains(&b));
                match (with.next(), with.next()) {
                    (None, _) => Having::Nobody,
                    (Some(v), None) => Having::One(v),
                    _ => Having::Several,
                }
            },
        )
    }

    use std::cell::Cell;

    #[test]
    fn the_pruned_walk_finds_the_deepest_prefix_of_any_view() {
        let blocks = block_hashes(&(0..64).collect::<Vec<u32>>(), 4); // 16 blocks
        let set = |range: std::ops::Range<usize>| -> HashSet<BlockHash> {
            blocks[range].iter().copied().collect()
        };
        // A shallow holder first, then a deeper one; a view holding blocks[best] without the
        // blocks before it (not a prefix); one holding everything; nobody; a sole holder of a
        // later block that is not a prefix.
        let cases: Vec<Vec<HashSet<BlockHash>>> = vec![
            vec![set(0..3), set(0..9), set(0..5)],
            vec![set(0..4), set(4..16), set(0..6)],
            vec![set(0..2), set(0..16), set(0..12)],
            vec![set(5..9), set(0..0)],
            vec![set(0..3), set(3..9), set(0..3)],
            vec![],
        ];
        for views in cases {
            assert_eq!(
                walk(&views, &blocks, &Cell::new(0)),
                max_prefix(&views, &blocks)
            );
        }
        // Random views, prefixes and not.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for _ in 0..2_000 {
            let views: Vec<HashSet<BlockHash>> = (0..rng.gen_range(0..8))
                .map(|_| {
                    let a = rng.gen_range(0..4);
                    let b = rng.gen_range(a..=16);
                    set(if rng.gen_bool(0.7) { 0..b } else { a..b })
                })
                .collect();
            assert_eq!(
                walk(&views, &blocks, &Cell::new(0)),
                max_prefix(&views, &blocks)
            );
        }
        // Every view holds the shared prefix, nobody the tail: one walk, and no scan past it.
        let walked = Cell::new(0);
        let views = vec![set(0..8); 500];
        assert_eq!(walk(&views, &blocks, &walked), 8);
        assert_eq!(
            walked.get(),
            1,
            "views that cannot go deeper are not walked"
        );
    }

    /// A pool's prompt of `n` blocks from group `g` (the first `shared` blocks are the group's).
    fn prompt(g: u32, tail: u32, n: usize, shared: usize) -> Vec<BlockHash> {
        let tokens: Vec<u32> = (0..n as u32 * 2)
            .map(|t| {
                if (t as usize) < shared * 2 {
                    g * 1_000 + t
                } else {
                    1_000_000 + tail * 100 + t
                }
            })
            .collect();
        block_hashes(&tokens, 2)
    }

    #[test]
    fn truth_with_its_table_of_holders_is_the_plain_maximum_through_evictions() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let pools: Vec<Rc<RefCell<KvPool>>> = (0..6)
            .map(|_| Rc::new(RefCell::new(KvPool::new(Some(24), true))))
            .collect();
        let mut truth = Truth::default();
        for p in &pools {
            truth.add_worker(CacheView::of(Rc::clone(p)));
        }
        let mut restarts = 0;
        for step in 0..3_000u32 {
            let w = rng.gen_range(0..pools.len());
            let blocks = prompt(rng.gen_range(0..5), step, rng.gen_range(1..12), 6);
            for chosen in 0..pools.len() {
                let plain = (0..pools.len())
                    .filter(|&v| v != chosen)
                    .map(|v| pools[v].borrow().cached_prefix(&blocks))
                    .max()
                    .unwrap_or(0);
                assert_eq!(truth.others_best(&blocks, chosen), plain);
            }
            let ever = pools
                .iter()
                .map(|p| p.borrow().remembered_prefix(&blocks))
                .max()
                .unwrap_or(0);
            assert_eq!(truth.ever_computed_depth(&blocks), ever);
            if rng.gen_bool(0.01) {
                pools[w].borrow_mut().clear();
                restarts += 1;
                continue;
            }
            // Store the prompt on `w` and release it at once: cached, evictable.
            let mut pool = pools[w].borrow_mut();
            let mut held = Vec::new();
            pool.acquire(
                None,
                &blocks,
                0,
                &mut Changes::default(),
                &mut held,
                usize::MAX,
            );
            pool.release(&held, 0);
        }
        assert!(restarts > 0);
        let held: HashSet<BlockHash> = pools
            .iter()
            .flat_map(|p| p.borrow().named_blocks())
            .collect();
        assert_eq!(
            truth.held_by().len(),
            held.len(),
            "the table forgets evicted blocks"
        );
        assert!(
            !truth.held_by().lost().is_empty(),
            "the pools lost blocks, so the remembered half was exercised"
        );
    }
}
