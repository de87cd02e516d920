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
