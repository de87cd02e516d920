//! Routing: which worker gets a request.
//!
//! - [`lab_rule`]: the lab's rule (most overlap, then least load, then lowest number), the one
//!   place it lives, used by the lab router and by the engine's policies alike.
//! - [`kv_router`]: the lab's [`KvRouter`], self-tracking or fed by KV events.
//! - [`policy`]: the [`RoutingPolicy`](policy::RoutingPolicy) trait the engine's router runs.
//! - [`registry`]: every policy by name.
//! - [`policies`]: the policies, one file each, and their list: a new policy is one file there
//!   and one line in that list.
//! - [`loads`]: the router's own bookkeeping of what it routed (load, up/down) and its snapshot
//!   of the workers' [`signals`](crate::protocol::signals).
//! - [`select`]: least-loaded selection, with an O(1) tracker for the lab's load.
//! - [`stream`]: each worker's KV event stream as the router sees it: sequence numbers, gaps
//!   and recovery (`router.on_gap`).
//! - [`history`]: what a router remembers of its own decisions (the approximate trees).
//! - [`ttl`]: expiring beliefs (approximate modes, speculative indexing).
//! - [`lower_tiers`]: the workers' host and disk tiers as their events tell, for the policies
//!   whose upstream reads them.

pub mod history;
pub mod kv_router;
pub mod lab_rule;
pub mod loads;
pub mod lower_tiers;
pub mod policies;
pub mod policy;
pub mod recovery;
pub mod registry;
pub mod select;
pub mod stream;
pub mod ttl;

pub use kv_router::KvRouter;

use crate::ids::WorkerId;

/// A routing decision and what the router believed about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The chosen worker.
    pub worker: WorkerId,
    /// Blocks the router believed the chosen worker held, counted from the front.
    pub predicted_blocks: usize,
}

impl Decision {
    /// A decision by a policy that ignores caches: it predicts no cached block.
    pub fn blind(worker: usize) -> Self {
        Decision {
            worker: WorkerId::at(worker),
            predicted_blocks: 0,
        }
    }
}
