//! KV events, vLLM's and Dynamo's schema: what a worker tells the router about its cache.
//!
//! Workers publish `Stored` only for newly stored blocks and `Removed` on eviction; `Cleared`
//! when the whole cache is lost (a restart). The same type travels from worker to bus to router
//! and is what a routing policy learns from.

use crate::hash::BlockHash;
use crate::ids::WorkerId;

/// Where a KV block lives: the GPU (device), host memory, or disk (vLLM's KV events call it the
/// `medium`; Dynamo's router its `StorageTier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// GPU memory: what a step reads (vLLM's `GPU`).
    Device,
    /// Host memory (vLLM's `CPU`, Dynamo's `HostPinned`).
    Host,
    /// Local disk or shared storage (Dynamo's `Disk`).
    Disk,
}

impl Tier {
    /// Its name in configuration and reports: `device`, `host`, `disk`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Device => "device",
            Tier::Host => "host",
            Tier::Disk => "disk",
        }
    }
}

/// Where an event sits in its worker's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Stamp {
    /// The worker's restart epoch (0 until its first restart).
    pub epoch: u32,
    /// The event's number in the epoch, from 0.
    pub seq: u64,
}

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
    /// Blocks now also held on a lower tier (host memory or disk): offloaded there, as vLLM's
    /// publisher reports a `BlockStored` whose `medium` is not the GPU. Only workers with
    /// `[kv.host]` or `[kv.disk]` publish them; a policy that ignores tiers ignores them.
    TierStored {
        /// The worker whose tier stored them.
        worker: WorkerId,
        /// The tier (never [`Tier::Device`]).
        tier: Tier,
        /// The blocks, in the order they were stored.
        blocks: Vec<BlockHash>,
    },
    /// Blocks dropped from a lower tier (vLLM's `BlockRemoved` with a `medium`).
    TierRemoved {
        /// The worker whose tier dropped them.
        worker: WorkerId,
        /// The tier (never [`Tier::Device`]).
        tier: Tier,
        /// The blocks.
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
            | KvEvent::TierStored { worker, .. }
            | KvEvent::TierRemoved { worker, .. }
            | KvEvent::Cleared { worker } => *worker,
        }
    }

    /// The event's name, as written in traces: `KvStored`, `KvRemoved`, `KvCleared`.
    pub fn kind(&self) -> &'static str {
        match self {
            KvEvent::Stored { .. } => "KvStored",
            KvEvent::Removed { .. } => "KvRemoved",
            KvEvent::TierStored { .. } => "KvTierStored",
            KvEvent::TierRemoved { .. } => "KvTierRemoved",
            KvEvent::Cleared { .. } => "KvCleared",
        }
    }
}
