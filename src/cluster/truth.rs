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
        self.pools
            .iter()
            .map(|p| p.remembered_prefix(blocks))
            .max()
            .unwrap_or(0)
    }

    /// The deepest prefix of `blocks` that some worker other than `chosen` holds now.
    pub fn others_best(&self, blocks: &[BlockHash], chosen: usize) -> usize {
        self.pools
            .iter()
            .enumerate()
            .filter(|(w, _)| *w != chosen)
            .map(|(_, p)| p.cached_prefix(blocks))
            .max()
            .unwrap_or(0)
    }
}
