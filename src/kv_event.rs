//! KV events, vLLM's and Dynamo's schema: what a worker tells the router about its cache.
//!
//! Workers publish `Stored` only for newly stored blocks and `Removed` on eviction; `Cleared`
//! when the whole cache is lost (a restart). The same type travels from worker to bus to router
//! and is what a routing policy learns from.

use crate::hash::BlockHash;
use crate::ids::WorkerId;

/// One KV event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvEvent {
    /// A worker stored new blocks.
    Stored {
        /// The worker that stored them.
        worker: WorkerId,
        /// The block before the first stored one (`None`: the stored blocks start the prompt).
        parent: Option<BlockHash>,
        /// The newly stored blocks, in prompt order.
        blocks: Vec<BlockHash>,
        /// How many of `blocks`, at the end, are the storing request's own tail: blocks no
        /// other request of the workload names ([`RequestSpec::unshared_from`]), so that only
        /// that request could look them up. A simulator's annotation, not in vLLM's schema:
        /// a router that will not route that request again need not index them. 0 when the
        /// worker keeps every block in its name table (misses attributed, a handed-back
        /// request).
        ///
        /// [`RequestSpec::unshared_from`]: crate::workload::RequestSpec::unshared_from
        own_tail: usize,
    },
    /// A worker evicted blocks.
    Removed {
        /// The worker that evicted them.
        worker: WorkerId,
        /// The evicted blocks.
        blocks: Vec<BlockHash>,
    },
    /// A worker lost its whole cache, e.g. on restart.
    Cleared {
        /// The worker whose cache is empty.
        worker: WorkerId,
    },
}

impl KvEvent {
    /// The worker the event is about.
    pub fn worker(&self) -> WorkerId {
        match self {
            KvEvent::Stored { worker, .. }
            | KvEvent::Removed { worker, .. }
            | KvEvent::Cleared { worker } => *worker,
        }
    }

    /// The event's name, as written in traces: `KvStored`, `KvRemoved`, `KvCleared`.
    pub fn kind(&self) -> &'static str {
        match self {
            KvEvent::Stored { .. } => "KvStored",
            KvEvent::Removed { .. } => "KvRemoved",
            KvEvent::Cleared { .. } => "KvCleared",
        }
    }
}
