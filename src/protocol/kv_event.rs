//! KV events, vLLM's and Dynamo's schema: what a worker tells the router about its cache.
//!
//! Workers publish `Stored` only for newly stored blocks and `Removed` on eviction; `Cleared`
//! when the whole cache is lost (a restart). The same type travels from worker to bus to router
//! and is what a routing policy learns from.

use std::ops::Deref;

use crate::hash::BlockHash;
use crate::ids::WorkerId;

/// Block names in prompt order, of which the last [`Blocks::own_tail`] are one request's own
/// tail: blocks no other request of the workload names
/// ([`RequestSpec::unshared_from`](crate::workload::RequestSpec::unshared_from)), so that only
/// that request could look them up. A [`KvEvent::Stored`] carries its blocks this way (`B` is a
/// `Vec`), and so does the request a routing policy is given (`B` a slice,
/// [`RouteRequest::blocks`](crate::router::policy::RouteRequest::blocks)).
///
/// Everything but the worker's KV pool, which stores own tails without a name-table entry, and
/// the router's index ([`KvIndex::apply`](crate::index::KvIndex::apply)), which need not keep
/// names only a request routed once could look up, reads it as the plain list of names it
/// dereferences to (the index audit and gap recovery included). The own tail is a simulator's
/// annotation, not in vLLM's schema nor written in traces; it is 0 (and `From` a list makes it
/// 0) when the run may route a request twice (faults, a handed-back request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Blocks<B> {
    names: B,
    own_tail: usize,
}

impl<B: AsRef<[BlockHash]>> Blocks<B> {
    /// `names`, of which the last `own_tail` are a request's own tail.
    pub fn with_own_tail(names: B, own_tail: usize) -> Blocks<B> {
        debug_assert!(own_tail <= names.as_ref().len());
        Blocks { names, own_tail }
    }

    /// How many of the blocks, at the end, are a request's own tail.
    pub fn own_tail(&self) -> usize {
        self.own_tail
    }

    /// The blocks before the own tail: those other requests could name.
    pub fn named(&self) -> &[BlockHash] {
        let all = self.names.as_ref();
        &all[..all.len() - self.own_tail]
    }
}

impl Blocks<Vec<BlockHash>> {
    /// Forgets the own tail's mark: every name is read, the index keeps them all.
    pub fn forget_own_tail(&mut self) {
        self.own_tail = 0;
    }
}

impl<B> From<B> for Blocks<B> {
    /// Blocks with no own tail.
    fn from(names: B) -> Blocks<B> {
        Blocks { names, own_tail: 0 }
    }
}

impl<'a> From<&'a Vec<BlockHash>> for Blocks<&'a [BlockHash]> {
    /// Blocks with no own tail.
    fn from(names: &'a Vec<BlockHash>) -> Blocks<&'a [BlockHash]> {
        Blocks::from(names.as_slice())
    }
}

impl<B: AsRef<[BlockHash]>> Deref for Blocks<B> {
    type Target = [BlockHash];

    /// All the names, the own tail's included.
    fn deref(&self) -> &[BlockHash] {
        self.names.as_ref()
    }
}

impl<'b, B: AsRef<[BlockHash]>> IntoIterator for &'b Blocks<B> {
    type Item = &'b BlockHash;
    type IntoIter = std::slice::Iter<'b, BlockHash>;

    fn into_iter(self) -> Self::IntoIter {
        self.names.as_ref().iter()
    }
}

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
        /// The newly stored blocks, in prompt order (the last of them perhaps the storing
        /// request's own tail: [`Blocks`]).
        blocks: Blocks<Vec<BlockHash>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_as_every_name_and_name_only_what_precedes_their_own_tail() {
        let names: Vec<BlockHash> = (1..=5).map(BlockHash).collect();
        let plain: Blocks<&[BlockHash]> = (&names).into();
        assert_eq!((plain.own_tail(), plain.named()), (0, &names[..]));
        let view = Blocks::with_own_tail(&names[..], 2);
        assert_eq!(
            &*view,
            &names[..],
            "a reader that ignores own tails sees every name"
        );
        assert_eq!((view.own_tail(), view.named()), (2, &names[..3]));
        let mut stored = Blocks::with_own_tail(names.clone(), 2);
        assert_eq!(stored.iter().count(), 5);
        stored.forget_own_tail();
        assert_eq!(stored, Blocks::from(names.clone()));
        assert_eq!(stored.named(), &names[..]);
    }
}
