//! A worker's lower KV tiers: host memory (`[kv.host]`) and disk (`[kv.disk]`) below the device,
//! each an LRU store of blocks with its own transfer lanes. Pure: times come in as arguments.
//!
//! - **Offload (write-back on eviction).** Blocks the device evicts are written to the first
//!   lower tier (host); blocks that tier drops for room, least recently used first, are written
//!   to the next (disk); what the last tier drops is gone. With `[kv.host] write_policy =
//!   "write_through"` a block is written to host when the device stores it (computed, or loaded
//!   back from disk) and eviction moves nothing, as the crate's vLLM adapter and vLLM's
//!   connector store each computed prompt block; a host no larger than the device then mostly
//!   repeats what the device holds. Written back, a block a tier already holds is only touched
//!   (made most recently used): tiers are inclusive, so a block loaded back to the device keeps
//!   its lower copy, and evicting it again moves no bytes.
//! - **Recency under write-through, as vLLM's offloading connector keeps it.** Host stores only
//!   the blocks it lacks and leaves the others where they are (`LRUOffloadingManager.prepare_store`
//!   in `vllm/v1/kv_offload/lru_manager.py`); the scheduler then touches the request's blocks up
//!   to the last one stored, last block first, if the store wrote anything
//!   (`OffloadingConnectorScheduler._get_reqs_to_store` in
//!   `vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py`), and touches every
//!   prompt block host holds each time it looks a waiting request up, admitted or not
//!   (`get_num_new_matched_tokens` there; [`Tiers::touch_host`]). A step's stores reach host
//!   after the step has looked its waiting requests up, newly admitted requests' first
//!   (`build_connector_meta` submits them after `schedule()`, `yield_req_data` new requests
//!   before cached ones; `KvPool::write_through_later` and `KvPool::flush_through`). So a shared
//!   prefix the device keeps serving stays fresh on host too. vLLM main, read Dec 4 2026;
//!   aisimulate-core 0.13.0 does the same (`engine/scheduler/vllm/host_offload.rs`), touching
//!   every prompt block after a store where vLLM touches those up to the last stored. Where
//!   dynsim differs from vLLM: a load makes the blocks it reads most recent, in prompt order
//!   (as the crate does when the load completes; vLLM's `prepare_load` only pins them); and
//!   only prompt blocks are written, and a session turn's answer kept when it finishes (vLLM
//!   writes every generated block as it fills). docs/FIDELITY.md
//!   ("How dynsim's host keeps the crate's recency") lists these.
//! - **Written through selectively** (`[kv.host] write_policy = "write_through_selective"`,
//!   [`TiersSetup::selective_hits`]), as SGLang HiCache's policy of that name (0.5.6.post2,
//!   `mem_cache/hiradix_cache.py`: `HiRadixCache.insert` → `_inc_hit_count` → `write_backup`,
//!   `write_through_threshold` 2): a block is written to host at its second hit on the device,
//!   a hit being an insert into SGLang's radix tree covering it: a request's full prompt blocks
//!   when its prefill completes (unless that token is its last) and when it finishes
//!   (`cache_unfinished_req`, `cache_finished_req`). dynsim counts them at the start of the
//!   step whose results SGLang would insert (its writes being at a step's start, as under
//!   `write_through`); a block the device evicts loses its hits (SGLang's node leaves the tree
//!   unless host holds it). Eviction moves nothing, as under `write_through`, and lookups
//!   touch host as they do there.
//! - **Load.** A request whose cached prefix on the device stops short looks the blocks after it
//!   up in the lower tiers (each block from the highest tier holding it, up to the first block no
//!   tier holds) and loads them back to the device instead of recomputing them; its step waits
//!   until the last byte has arrived ([`Tiers::load`] says when). A continuation shorter than
//!   `[kv.host] min_load_tokens` is recomputed instead ([`TiersSetup::min_load_tokens`], SGLang
//!   HiCache's `load_back_threshold`).
//! - **Transfers.** Each tier has a write lane (into it: device → host for the host tier, host →
//!   disk for the disk tier, at `d2h_gbps`) and a read lane (out of it to the device, at
//!   `h2d_gbps`). A lane serves its transfers FIFO: one queued at `t` starts its first byte at
//!   `max(lane free, t + first_byte_ms)` and ends `bytes / GB/s` later (1 GB/s is 1 byte per ns).
//!   A block cannot be read before its own write has ended.
//! - **Disk written through** (`[kv.disk] write_policy = "write_through"`). Each block host newly
//!   stores is also written to disk, queued on disk's write lane when its host write ends, and
//!   what host drops for room is gone (not cascaded): the disk holds host's blocks too, so host
//!   and disk together keep about the disk's capacity of distinct blocks, where the default
//!   cascade keeps about host's plus disk's. After `aisimulate-core` 0.13.0
//!   (`engine/scheduler/vllm/host_offload.rs`, `VllmHostOffloadAdapter::advance` hands every
//!   completed host store to `engine/scheduler/vllm/g3_offload.rs`,
//!   `VllmG3OffloadAdapter::store`, which submits the blocks disk lacks to
//!   `engine/g3_offload/tier.rs`, `G3Tier::submit`), as vLLM's tiered offloading stores each
//!   block it offloads to its secondary tier. Where dynsim still differs: the crate keeps the host
//!   copy pinned until its disk write ends, leaves a block disk already holds untouched, serves a
//!   worker's disk jobs by equal share (here first in, first out), and reads a disk block back by
//!   staging it into host and then to the device, two transfers in series (here straight to the
//!   device); and it publishes no disk residency, so Dynamo's router credits no disk block there.
//!
//! After `aisimulate-core` 0.13.0 (`engine/host_offload/tier.rs`: `HostTier` with an LRU of
//! resident blocks and, for a per-rank pool, directional FIFO lanes whose transfer is ready at
//! `not_before + latency_to_first_byte_ms` and completes `bytes / bandwidth` after the lane
//! frees; `engine/g3_offload/tier.rs` for disk or shared storage). Where dynsim differs: the
//! crate's vLLM adapter (`engine/scheduler/vllm/host_offload.rs`, after vLLM's
//! `OffloadingConnector`) stores every computed prompt block to host as it is computed
//! (write-through) and loads asynchronously, the request waiting in `WaitingForRemoteKv` while
//! other requests run; dynsim writes a block when the device evicts it (write-back, the brief's
//! rule) unless `write_policy = "write_through"` (then at the start of the step that stores the
//! block, where the crate writes when the step completes and makes the block most recently used
//! then), and holds the step that admits the loading request until
//! the load ends (the batch waits with it). A disk block is read straight to the device over the disk tier's read lane (not
//! staged through host).
//!
//! **A host pool shared by the cluster** (`[kv.host] scope = "cluster"`, [`HostPool`]): every
//! worker's host tier is one store (one capacity, `capacity_blocks` in all, and one LRU), so a
//! block any worker offloaded is found and loaded back by any worker whose request names it, and
//! any worker's offload may drop another's block. Each worker keeps its own two lanes (its
//! `d2h_gbps` and `h2d_gbps`, FIFO as above); a block's write ends on the lane of the worker
//! that wrote it, and a load by another waits for that. A worker's restart loses its device,
//! not the pool. What the routers see: every publishing worker reports the pool's changes on its
//! own event stream (`TierStored`/`TierRemoved` with tier host), so a router indexing per worker
//! sees a pool block on every worker's host tier and Dynamo's `host_cache_hit_weight` credits it
//! for every worker alike. The worker whose step changed the pool reports it with the step's
//! events and wakes the others (`Msg::HostTierChanged`, sent for the same instant), which report
//! it after whatever they already published; a worker back from a restart, or joining, first
//! reports every block the pool holds (its `Cleared` took them out of the routers' view).
//! Pool-wide capacity and this publication after `aisimulate-core` 0.13.0
//! (`engine/host_offload/registry.rs`: `G2Registry` joins every `ClusterShared` rank to one
//! `HostTier`, `num_host_blocks` being the pool's total; `engine/host_offload/tier.rs`:
//! `subscribe` and `publish` deliver the pool's residency to every subscribed rank as
//! `HostPinned` events, starting from a snapshot; `engine/scheduler/vllm/core.rs` and
//! `host_offload.rs`: a rank subscribes when it publishes KV events). Where dynsim differs: the crate serves a shared
//! pool's transfers by equal share (`engine/offload_transfer.rs`, `FairTransfers`: a job's rate
//! is `min(link / the client's active jobs, pool cap / all active jobs)`, the pool capped at
//! `shared_d2h_bandwidth_gbps` and `shared_h2d_bandwidth_gbps`, 80 GB/s by default); dynsim has
//! no pool-wide cap, each worker's transfers FIFO on its own link, so a pool read by many
//! workers at once is faster here than in the crate when their links together pass the cap. The
//! crate's ranks drain the pool's events when each advances; dynsim's are woken at once. A
//! shared host with `[kv.disk]` below it, or under `[disagg]`, is refused (not modelled), and
//! the crate's contract checks (equal block bytes and layout) hold by construction: one
//! scenario, one model.

mod lane;
mod pool;
mod residency;
#[cfg(test)]
mod tests;

pub use lane::Lane;
pub use pool::{HostPool, SharedHost};

use std::collections::HashMap;

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;
use crate::protocol::kv_event::Tier;
use residency::Residency;

/// One lower tier's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierSpec {
    /// Which tier ([`Tier::Host`] or [`Tier::Disk`]).
    pub tier: Tier,
    /// Blocks it holds at most (0: it holds nothing).
    pub capacity_blocks: usize,
    /// Bandwidth into it (device → host, host → disk), GB/s (0: no limit).
    pub d2h_gbps: f64,
    /// Bandwidth out of it to the device, GB/s (0: no limit).
    pub h2d_gbps: f64,
    /// Time to a transfer's first byte, ms.
    pub first_byte_ms: f64,
    /// Whether a block is written here as the tier above stores it (write-through: host as the
    /// device stores, disk as host stores), rather than as the tier above drops it (the
    /// default).
    pub write_through: bool,
}

/// A worker's lower tiers, top down (host, then disk), and the bytes of one block.
#[derive(Clone, Debug, PartialEq)]
pub struct TiersSetup {
    /// KV bytes of one block (the model's bytes per token x tokens per block).
    pub block_bytes: u64,
    /// The tiers below the device, highest first.
    pub tiers: Vec<TierSpec>,
    /// The cluster's shared host pool (`[kv.host] scope = "cluster"`: the host tier's blocks
    /// live there, its capacity the pool's; the host spec gives this worker's lanes). `None`:
    /// the worker's own host tier.
    pub shared_host: Option<SharedHost>,
    /// Fewest tokens of a lower continuation that a request loads back; a shorter one is
    /// recomputed (`[kv.host] min_load_tokens`, after SGLang HiCache's `load_back_threshold`;
    /// 0: any is loaded).
    pub min_load_tokens: u64,
    /// Hits on the device after which a block is written to host (`[kv.host] write_policy =
    /// "write_through_selective"`, SGLang HiCache's, 2; the host spec is then written through);
    /// 0: not selective.
    pub selective_hits: u32,
}

/// Where a tier's blocks live: its worker's own, or the cluster's shared host pool.
#[derive(Clone, Debug)]
enum Home {
    Own(Residency),
    Shared(SharedHost),
}

/// One tier: what it holds and its worker's two lanes.
#[derive(Clone, Debug)]
struct Store {
    spec: TierSpec,
    home: Home,
    write: Lane,
    read: Lane,
}

impl Store {
    fn new(spec: TierSpec, shared: Option<&SharedHost>) -> Self {
        Store {
            spec,
            home: match shared {
                Some(h) => Home::Shared(h.clone()),
                None => Home::Own(Residency::new(spec.capacity_blocks)),
            },
            write: Lane::new(spec.d2h_gbps, spec.first_byte_ms),
            read: Lane::new(spec.h2d_gbps, spec.first_byte_ms),
        }
    }

    /// Runs `f` on what the tier holds.
    fn with<R>(&mut self, f: impl FnOnce(&mut Residency) -> R) -> R {
        match &mut self.home {
            Home::Own(r) => f(r),
            Home::Shared(h) => f(&mut h.0.borrow_mut().res),
        }
    }

    /// Reads what the tier holds.
    fn peek<R>(&self, f: impl FnOnce(&Residency) -> R) -> R {
        match &self.home {
            Home::Own(r) => f(r),
            Home::Shared(h) => f(&h.0.borrow().res),
        }
    }

    fn holds(&self, block: BlockHash) -> bool {
        self.peek(|r| r.entries.contains_key(&block))
    }

    fn len(&self) -> usize {
        self.peek(|r| r.entries.len())
    }

    fn capacity_blocks(&self) -> usize {
        self.peek(|r| r.capacity_blocks)
    }
}

/// Blocks moved into or out of one lower tier by one offload (for KV events).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierMove {
    /// The tier.
    pub tier: Tier,
    /// Blocks newly stored there, in order.
    pub stored: Vec<BlockHash>,
    /// Blocks it dropped for room (after `stored`: a block may be in both when one offload
    /// overflows the tier).
    pub removed: Vec<BlockHash>,
}

/// Bytes a worker's tiers moved, per lower tier (index 0 host, 1 disk).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierBytes {
    /// Bytes written into each tier (offloads).
    pub written: [u64; 2],
    /// Bytes read from each tier back to the device (loads).
    pub read: [u64; 2],
}

impl std::ops::AddAssign for TierBytes {
    /// Adds another worker's bytes to these, tier by tier.
    fn add_assign(&mut self, other: TierBytes) {
        for k in 0..2 {
            self.written[k] += other.written[k];
            self.read[k] += other.read[k];
        }
    }
}

/// Blocks a lookup found on each lower tier (index 0 host, 1 disk).
pub type TierHits = [usize; 2];

/// A worker's lower tiers.
#[derive(Clone, Debug)]
pub struct Tiers {
    block_bytes: u64,
    stores: Vec<Store>,
    bytes: TierBytes,
    min_load_tokens: u64,
    selective_hits: u32,
    /// Under `write_through_selective`, each device block's hits since the device stored it.
    hits: HashMap<BlockHash, u32, BlockHashBuilder>,
}

impl Tiers {
    /// Empty tiers as `setup` describes them.
    pub fn new(setup: &TiersSetup) -> Self {
        debug_assert!(setup.tiers.len() <= 2, "host and disk at most");
        Tiers {
            block_bytes: setup.block_bytes,
            stores: setup
                .tiers
                .iter()
                .map(|&t| {
                    let shared = setup.shared_host.as_ref().filter(|_| t.tier == Tier::Host);
                    Store::new(t, shared)
                })
                .collect(),
            bytes: TierBytes::default(),
            min_load_tokens: setup.min_load_tokens,
            selective_hits: setup.selective_hits,
            hits: HashMap::default(),
        }
    }

    /// Whether host is written selectively: a block at its `selective_hits`-th hit on the
    /// device ([`Tiers::hit`]), not as the device stores it.
    pub fn selective(&self) -> bool {
        self.selective_hits > 0
    }

    /// Under `write_through_selective`, one insert into SGLang's radix tree: a hit on each of
    /// `blocks` (held on the device), and each block host lacks whose hits reach the threshold
    /// is written to host at `now`, in order (`HiRadixCache._inc_hit_count` → `write_backup`).
    /// Appends what changed to `moves`; nothing when not selective.
    pub fn hit(&mut self, blocks: &[BlockHash], now: Nanos, moves: &mut Vec<TierMove>) {
        if !self.selective() || self.stores.is_empty() {
            return;
        }
        let mut due = Vec::new();
        for &b in blocks {
            let n = self.hits.entry(b).or_insert(0);
            *n += 1;
            if *n >= self.selective_hits && !self.stores[0].holds(b) {
                due.push(b);
            }
        }
        if !due.is_empty() {
            self.put_into(0, &due, now, moves);
        }
    }

    /// The device evicted `blocks`: their hits are gone with them (SGLang's node, not on host,
    /// leaves the tree; on host it is written already).
    pub fn forget_hits(&mut self, blocks: &[BlockHash]) {
        if self.selective() {
            for b in blocks {
                self.hits.remove(b);
            }
        }
    }

    /// Fewest tokens of a lower continuation that are loaded back ([`TiersSetup`]).
    pub fn min_load_tokens(&self) -> u64 {
        self.min_load_tokens
    }

    /// Whether blocks go to the first tier (host) as the device stores them (else as it evicts
    /// them).
    pub fn write_through(&self) -> bool {
        self.stores.first().is_some_and(|s| s.spec.write_through)
    }

    /// The bytes moved so far.
    pub fn bytes(&self) -> TierBytes {
        self.bytes
    }

    /// Blocks each tier holds now.
    pub fn resident(&self) -> TierHits {
        let mut n = [0; 2];
        for (k, s) in self.stores.iter().enumerate() {
            n[k] = s.len();
        }
        n
    }

    /// Every block each tier holds, tier by tier (host, then disk), each in increasing order of
    /// name: what the tiers' `TierStored`/`TierRemoved` events have told a router so far (a
    /// snapshot for a router resyncing; a cluster-shared host pool's whole residency).
    pub fn snapshot(&self) -> Vec<(Tier, Vec<BlockHash>)> {
        self.stores
            .iter()
            .map(|s| {
                let mut blocks: Vec<BlockHash> = s.peek(|r| r.entries.keys().copied().collect());
                blocks.sort_unstable();
                (s.spec.tier, blocks)
            })
            .collect()
    }

    /// Writes `blocks` at `now` (in order: the blocks the device evicted, or under write-through
    /// the blocks it stored) to the first tier, cascading what each tier drops to the next; a
    /// block the tier holds is only touched (left where it is by host written through, whose
    /// scheduler touches the request's prefix instead). A tier written through takes the
    /// blocks the tier above newly stores instead, queued on disk's write lane when their host
    /// write ends, and what host drops is gone. Appends what changed to `moves`.
    pub fn offload(&mut self, evicted: &[BlockHash], now: Nanos, moves: &mut Vec<TierMove>) {
        if !evicted.is_empty() && !self.stores.is_empty() {
            self.put_into(0, evicted, now, moves);
        }
    }

    fn put_into(
        &mut self,
        level: usize,
        blocks: &[BlockHash],
        now: Nanos,
        out: &mut Vec<TierMove>,
    ) {
        let block_bytes = self.block_bytes;
        let store = &mut self.stores[level];
        if store.capacity_blocks() == 0 {
            return;
        }
        // Host written through from the device stores only the blocks it lacks and leaves the
        // others where they are (vLLM's `LRUOffloadingManager.prepare_store`); the scheduler
        // then touches the request's prefix ([`Tiers::touch_host`]).
        let touch_held = !(level == 0 && store.spec.write_through);
        let stored = store.with(|r| {
            let mut stored = Vec::new();
            for &b in blocks {
                let held = if touch_held {
                    r.touch(b)
                } else {
                    r.entries.contains_key(&b)
                };
                if !held {
                    stored.push(b);
                }
            }
            stored
        });
        if stored.is_empty() {
            return;
        }
        let bytes = stored.len() as u64 * block_bytes;
        let ready = store.write.submit(now, bytes);
        self.bytes.written[level] += bytes;
        let removed: Vec<BlockHash> =
            store.with(|r| stored.iter().filter_map(|&b| r.put(b, ready)).collect());
        let tier = store.spec.tier;
        if let Home::Shared(h) = &store.home {
            h.0.borrow_mut().record(tier, &stored, &removed);
        }
        let next = self.stores.get(level + 1).map(|s| s.spec.write_through);
        let cascade = if next == Some(true) {
            // aisimulate-core 0.13: each block whose host write completes is handed to disk.
            Some((stored.clone(), ready))
        } else {
            (next.is_some() && !removed.is_empty()).then(|| (removed.clone(), now))
        };
        out.push(TierMove {
            tier,
            stored,
            removed,
        });
        if let Some((blocks, at)) = cascade {
            self.put_into(level + 1, &blocks, at, out);
        }
    }

    /// Makes the blocks of `blocks` that host holds its most recently used, last block first
    /// (so the first ends most recent), as vLLM's offloading connector touches a request's
    /// blocks each time it looks the request up and after each store it submits for it
    /// (`OffloadingConnectorScheduler.get_num_new_matched_tokens` and `_get_reqs_to_store`,
    /// `LRUOffloadingManager.touch`, which walks the list in reverse). Only a host tier written
    /// through from the device is touched (the connector's rule); otherwise nothing changes.
    pub fn touch_host(&mut self, blocks: &[BlockHash]) {
        let Some(host) = self.stores.first_mut().filter(|s| s.spec.write_through) else {
            return;
        };
        host.with(|r| {
            for &b in blocks.iter().rev() {
                r.touch(b);
            }
        });
    }

    /// Host's blocks, least recently used first (for tests of its recency).
    #[cfg(test)]
    pub(crate) fn host_recency(&self) -> Vec<BlockHash> {
        self.stores
            .first()
            .map_or_else(Vec::new, |s| s.peek(Residency::in_lru_order))
    }

    /// The tier (index) holding `block` that a load would read it from: the highest.
    fn source(&self, block: BlockHash) -> Option<usize> {
        self.stores.iter().position(|s| s.holds(block))
    }

    /// From the front of `blocks`, the blocks each tier would give, up to the first block no
    /// tier holds.
    pub fn lookup(&self, blocks: &[BlockHash]) -> TierHits {
        let mut hits = [0; 2];
        for &b in blocks {
            match self.source(b) {
                Some(level) => hits[level] += 1,
                None => break,
            }
        }
        hits
    }

    /// Loads `blocks` (each held by some tier: a [`Tiers::lookup`] prefix) back to the device,
    /// queued at `now`; returns when the last one has arrived (`now` when there are none) and
    /// the blocks read from each tier.
    pub fn load(&mut self, blocks: &[BlockHash], now: Nanos) -> (Nanos, TierHits) {
        let mut hits = [0; 2];
        let mut ready = [now; 2];
        for &b in blocks {
            let level = self.source(b).expect("a lookup prefix");
            let written = self.stores[level].with(|r| {
                let held = r.touch(b);
                debug_assert!(held, "a lookup prefix is held");
                r.entries[&b].ready
            });
            ready[level] = ready[level].max(written);
            hits[level] += 1;
        }
        let mut done = now;
        for (level, store) in self.stores.iter_mut().enumerate() {
            if hits[level] > 0 {
                let bytes = hits[level] as u64 * self.block_bytes;
                self.bytes.read[level] += bytes;
                done = done.max(store.read.submit(ready[level], bytes));
            }
        }
        (done, hits)
    }

    /// Forgets every block of its own tiers (the worker restarted: its host memory and disk
    /// cache are gone); a shared host pool is the cluster's and keeps its blocks.
    pub fn clear(&mut self) {
        self.hits.clear();
        for s in &mut self.stores {
            if let Home::Own(r) = &mut s.home {
                r.clear();
            }
        }
    }
}
