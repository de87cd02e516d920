//! Ground truth for loss attribution: which worker really holds which block, and which blocks
//! were ever computed anywhere.
//!
//! This is measurement instrumentation, not a channel: workers write it as their caches change,
//! the router actor reads it only to annotate a decision with what other workers truly held, and
//! no policy ever sees it.

use std::cell::RefCell;
use std::rc::Rc;

use crate::hash::BlockHash;
use crate::index::{KvIndex, MatchScratch};

/// The cluster's true KV state.
pub struct Truth {
    held: KvIndex,
    ever_held: KvIndex,
    scratch: MatchScratch,
    overlaps: Vec<usize>,
}

/// The handle actors share (one simulation runs on one thread).
pub type SharedTruth = Rc<RefCell<Truth>>;

impl Truth {
    /// Truth for `n_workers` empty workers.
    pub fn new(n_workers: usize) -> Self {
        Truth {
            held: KvIndex::new(n_workers),
            ever_held: KvIndex::new(n_workers),
            scratch: MatchScratch::default(),
            overlaps: Vec::new(),
        }
    }

    /// [`Truth::new`], shared by a simulation's actors.
    pub fn shared(n_workers: usize) -> SharedTruth {
        Rc::new(RefCell::new(Truth::new(n_workers)))
    }

    /// `worker` stored `blocks`.
    pub fn stored(&mut self, worker: usize, blocks: &[BlockHash]) {
        self.held.store(worker, blocks);
        self.ever_held.store(worker, blocks);
    }

    /// `worker` evicted `blocks`.
    pub fn removed(&mut self, worker: usize, blocks: &[BlockHash]) {
        self.held.remove(worker, blocks);
    }

    /// `worker` lost its whole cache.
    pub fn cleared(&mut self, worker: usize) {
        self.held.clear_worker(worker);
    }

    /// The deepest prefix of `blocks` that some worker had computed by now.
    pub fn ever_computed_depth(&mut self, blocks: &[BlockHash]) -> usize {
        self.ever_held.find_matches(blocks, &mut self.scratch)
    }

    /// Whether `worker` ever held `block` (it may have evicted it since, or restarted).
    pub fn ever_held_by(&self, worker: usize, block: BlockHash) -> bool {
        self.ever_held.holds(worker, block)
    }

    /// The deepest prefix of `blocks` that some worker other than `chosen` holds now.
    pub fn others_best(&mut self, blocks: &[BlockHash], chosen: usize) -> usize {
        let Truth {
            held,
            scratch,
            overlaps,
            ..
        } = self;
        held.overlaps(blocks, scratch, overlaps);
        overlaps
            .iter()
            .enumerate()
            .filter(|(w, _)| *w != chosen)
            .map(|(_, o)| *o)
            .max()
            .unwrap_or(0)
    }
}
