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
//!   (`get_num_new_matched_tokens` there; [`Tiers::touch_host`]). So a shared prefix the device
//!   keeps serving stays fresh on host too. vLLM main, read Dec 4 2026; aisimulate-core 0.13.0
//!   does the same (`engine/scheduler/vllm/host_offload.rs`), touching every prompt block after
//!   a store where vLLM touches those up to the last stored. Where dynsim differs from vLLM: a
//!   load makes the blocks it reads most recent, in prompt order (as the crate does when the
//!   load completes; vLLM's `prepare_load` only pins them); a step's stores and their touches
//!   come before its lookups (vLLM looks up while scheduling and stores afterwards); and only
//!   prompt blocks are written (vLLM writes generated tokens' blocks too). docs/FIDELITY.md
//!   ("How dynsim's host keeps the crate's recency") lists these.
//! - **Load.** A request whose cached prefix on the device stops short looks the blocks after it
//!   up in the lower tiers (each block from the highest tier holding it, up to the first block no
//!   tier holds) and loads them back to the device instead of recomputing them; its step waits
//!   until the last byte has arrived ([`Tiers::load`] says when).
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

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use crate::engine::{ms_to_ns, Nanos};
use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;
use crate::protocol::kv_event::Tier;

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
}

/// A FIFO transfer lane.
#[derive(Clone, Copy, Debug)]
pub struct Lane {
    gbps: f64,
    first_byte_ns: Nanos,
    /// When the lane is free again.
    free_at: Nanos,
}

impl Lane {
    /// An idle lane of `gbps` (0: no limit) and `first_byte_ms` to a transfer's first byte.
    pub fn new(gbps: f64, first_byte_ms: f64) -> Self {
        Lane {
            gbps,
            first_byte_ns: ms_to_ns(first_byte_ms),
            free_at: 0,
        }
    }

    /// Queues `bytes` that may start at `ready`; returns when the last byte arrives:
    /// `max(free, ready + first byte) + bytes / GB/s`.
    pub fn submit(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let start = self.free_at.max(ready + self.first_byte_ns);
        let ns = if self.gbps > 0.0 {
            (bytes as f64 / self.gbps).round() as Nanos
        } else {
            0
        };
        self.free_at = start + ns;
        self.free_at
    }
}

/// One resident block of a tier.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Its place in the recency order.
    stamp: u64,
    /// When its write into the tier ends (it cannot be read before).
    ready: Nanos,
}

/// What one tier holds: its blocks in LRU order.
#[derive(Clone, Debug)]
struct Residency {
    capacity_blocks: usize,
    entries: HashMap<BlockHash, Entry, BlockHashBuilder>,
    /// (stamp, block), least recently used first; an entry whose stamp is no longer its
    /// block's (touched since, or dropped) is stale, skipped and swept out.
    order: VecDeque<(u64, BlockHash)>,
    clock: u64,
}

impl Residency {
    fn new(capacity_blocks: usize) -> Self {
        Residency {
            capacity_blocks,
            entries: HashMap::default(),
            order: VecDeque::new(),
            clock: 0,
        }
    }

    fn stamp(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Appends `block` as the most recently used, sweeping stale entries out once they
    /// outnumber the live ones.
    fn push(&mut self, stamp: u64, block: BlockHash) {
        self.order.push_back((stamp, block));
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(s, b)| entries.get(b).is_some_and(|e| e.stamp == *s));
        }
    }

    /// Makes `block` (held) the most recently used.
    fn touch(&mut self, block: BlockHash) {
        let stamp = self.stamp();
        self.entries.get_mut(&block).expect("held").stamp = stamp;
        self.push(stamp, block);
    }

    /// Stores `block` (not held), readable from `ready`, dropping the least recently used block
    /// if the tier is full; returns the block dropped.
    fn put(&mut self, block: BlockHash, ready: Nanos) -> Option<BlockHash> {
        let dropped = (self.entries.len() == self.capacity_blocks).then(|| loop {
            let (stamp, victim) = self.order.pop_front().expect("a full tier holds blocks");
            if self.entries.get(&victim).is_some_and(|e| e.stamp == stamp) {
                self.entries.remove(&victim);
                break victim;
            }
        });
        let stamp = self.stamp();
        self.entries.insert(block, Entry { stamp, ready });
        self.push(stamp, block);
        dropped
    }

    /// Every block held, least recently used first (an order no hash map decides).
    fn in_lru_order(&self) -> Vec<BlockHash> {
        self.order
            .iter()
            .filter(|(s, b)| self.entries.get(b).is_some_and(|e| e.stamp == *s))
            .map(|&(_, b)| b)
            .collect()
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }
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

/// The host tier of `[kv.host] scope = "cluster"`: one store of blocks for every worker of the
/// cluster (one capacity, one LRU), and the log of its changes that each publishing worker
/// reports on its own KV event stream (as every rank of `aisimulate-core`'s shared pool publishes
/// the pool's residency).
///
/// Each subscribed worker (one that publishes KV events) has a cursor in the log; a worker
/// drains the changes past its cursor when it publishes ([`HostPool::drain`]), and the log keeps
/// only what some subscriber has not drained. Workers are told in worker-number order, so
/// nothing depends on a hash map's order.
#[derive(Debug)]
pub struct HostPool {
    res: Residency,
    /// Changes not yet drained by every subscriber, oldest first.
    log: VecDeque<TierMove>,
    /// The number of changes trimmed from the log's front: `log[0]`'s number.
    base: u64,
    /// By worker number: its cursor (`None`: not subscribed) and whether a wake is on its way.
    subs: Vec<(Option<u64>, bool)>,
}

impl HostPool {
    /// The log's end: the number the next change will get.
    fn end(&self) -> u64 {
        self.base + self.log.len() as u64
    }

    /// Records a change for the subscribers (kept only if there are any).
    fn record(&mut self, tier: Tier, stored: &[BlockHash], removed: &[BlockHash]) {
        if self.subs.iter().any(|s| s.0.is_some()) {
            self.log.push_back(TierMove {
                tier,
                stored: stored.to_vec(),
                removed: removed.to_vec(),
            });
        }
    }

    /// Worker `worker` reports the pool from now on: returns every block the pool holds, least
    /// recently used first (what it must report before the changes it will drain).
    pub fn subscribe(&mut self, worker: usize) -> Vec<BlockHash> {
        if self.subs.len() <= worker {
            self.subs.resize(worker + 1, (None, false));
        }
        let end = self.end();
        self.subs[worker].0 = Some(end);
        self.res.in_lru_order()
    }

    /// Whether `worker` reports the pool.
    pub fn subscribed(&self, worker: usize) -> bool {
        self.subs.get(worker).is_some_and(|s| s.0.is_some())
    }

    /// Worker `worker` no longer reports the pool (it went down or left).
    pub fn unsubscribe(&mut self, worker: usize) {
        if let Some(s) = self.subs.get_mut(worker) {
            s.0 = None;
        }
        self.trim();
    }

    /// The changes `worker` has not reported yet, oldest first (none if it does not subscribe);
    /// clears its wake.
    pub fn drain(&mut self, worker: usize) -> Vec<TierMove> {
        let Some(s) = self.subs.get_mut(worker) else {
            return Vec::new();
        };
        s.1 = false;
        let Some(cursor) = s.0 else {
            return Vec::new();
        };
        let end = self.base + self.log.len() as u64;
        s.0 = Some(end);
        let from = (cursor - self.base) as usize;
        let out: Vec<TierMove> = self.log.range(from..).cloned().collect();
        self.trim();
        out
    }

    /// Subscribers other than `except` with changes to report and no wake on its way, in
    /// worker-number order; marks a wake on its way to each.
    pub fn to_wake(&mut self, except: usize) -> Vec<usize> {
        let end = self.end();
        let mut out = Vec::new();
        for (w, s) in self.subs.iter_mut().enumerate() {
            if w != except && !s.1 && s.0.is_some_and(|c| c < end) {
                s.1 = true;
                out.push(w);
            }
        }
        out
    }

    /// Drops the changes every subscriber has drained.
    fn trim(&mut self) {
        let low = self
            .subs
            .iter()
            .filter_map(|s| s.0)
            .min()
            .unwrap_or_else(|| self.end());
        while self.base < low {
            self.log.pop_front();
            self.base += 1;
        }
    }

    /// Blocks the pool holds now.
    pub fn resident(&self) -> usize {
        self.res.entries.len()
    }
}

/// A handle on the cluster's shared host pool, held by every worker's tiers (one simulation
/// runs on one thread). Two handles are equal when they are the same pool.
#[derive(Clone)]
pub struct SharedHost(Rc<RefCell<HostPool>>);

impl SharedHost {
    /// An empty pool of `capacity_blocks` blocks for the whole cluster.
    pub fn new(capacity_blocks: usize) -> Self {
        SharedHost(Rc::new(RefCell::new(HostPool {
            res: Residency::new(capacity_blocks),
            log: VecDeque::new(),
            base: 0,
            subs: Vec::new(),
        })))
    }

    /// The pool, to change (subscriptions, draining).
    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, HostPool> {
        self.0.borrow_mut()
    }

    /// The pool, to read.
    pub fn borrow(&self) -> std::cell::Ref<'_, HostPool> {
        self.0.borrow()
    }
}

impl PartialEq for SharedHost {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for SharedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedHost({} blocks)",
            self.0.borrow().res.entries.len()
        )
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
        }
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
                if !r.entries.contains_key(&b) {
                    stored.push(b);
                } else if touch_held {
                    r.touch(b);
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
                if r.entries.contains_key(&b) {
                    r.touch(b);
                }
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
                r.touch(b);
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
        for s in &mut self.stores {
            if let Home::Own(r) = &mut s.home {
                r.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen3-0.6B's KV bytes per token (28 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes).
    const QWEN3_0_6B: u64 = 114_688;

    fn b(n: u64) -> BlockHash {
        BlockHash(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn blocks(r: std::ops::Range<u64>) -> Vec<BlockHash> {
        r.map(b).collect()
    }

    fn spec(tier: Tier, capacity_blocks: usize) -> TierSpec {
        TierSpec {
            tier,
            capacity_blocks,
            d2h_gbps: 25.0,
            h2d_gbps: 25.0,
            first_byte_ms: 0.05,
            write_through: false,
        }
    }

    fn tiers(host: usize, disk: Option<usize>) -> Tiers {
        let mut t = vec![spec(Tier::Host, host)];
        t.extend(disk.map(|d| spec(Tier::Disk, d)));
        Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: t,
            shared_host: None,
        })
    }

    #[test]
    fn loading_32_qwen3_blocks_over_25_gbps_takes_the_hand_computed_time() {
        // 32 blocks x 16 tokens x 114,688 bytes = 58,720,256 bytes; at 25 GB/s (25 bytes/ns)
        // that is 2,348,810.24 ns, after 0.05 ms to the first byte: 2,398,810 ns.
        let mut t = tiers(64, None);
        let mut moves = Vec::new();
        t.offload(&blocks(0..32), 0, &mut moves);
        let written = 2_398_810;
        assert_eq!(t.bytes().written[0], 58_720_256);
        let now = 10_000_000; // long after the write ended
        let (done, hits) = t.load(&blocks(0..32), now);
        assert_eq!(hits, [32, 0]);
        assert_eq!(done - now, 2_398_810);
        assert_eq!(t.bytes().read[0], 58_720_256);
        // A load queued before the blocks' own write ended waits for it.
        let mut t = tiers(64, None);
        t.offload(&blocks(0..32), 0, &mut Vec::new());
        let (done, _) = t.load(&blocks(0..32), 0);
        assert_eq!(done, written + 2_398_810);
    }

    #[test]
    fn a_lane_serves_its_transfers_first_in_first_out() {
        let mut lane = Lane::new(25.0, 0.05);
        assert_eq!(lane.submit(0, 25_000_000), 1_050_000);
        // Queued at 0.5 ms: its first byte waits for the lane (1.05 ms), not 0.55 ms.
        assert_eq!(lane.submit(500_000, 25_000_000), 2_050_000);
        // Queued after the lane is free: the first-byte time counts again.
        assert_eq!(lane.submit(3_000_000, 0), 3_050_000);
        let mut free = Lane::new(0.0, 0.0);
        assert_eq!(free.submit(7, 1 << 40), 7, "0 GB/s: no limit");
    }

    #[test]
    fn evictions_cascade_host_to_disk_least_recently_used_first() {
        let mut t = tiers(3, Some(2));
        let mut moves = Vec::new();
        t.offload(&blocks(0..3), 0, &mut moves);
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].stored, blocks(0..3));
        // Touch block 0: block 1 is now the least recently used.
        t.load(&[b(0)], 0);
        moves.clear();
        t.offload(&[b(0), b(3)], 0, &mut moves);
        assert_eq!(
            moves,
            vec![
                TierMove {
                    tier: Tier::Host,
                    stored: vec![b(3)],
                    removed: vec![b(1)],
                },
                TierMove {
                    tier: Tier::Disk,
                    stored: vec![b(1)],
                    removed: vec![],
                },
            ],
            "block 0 was held: touched, not written again"
        );
        assert_eq!(t.resident(), [3, 1]);
        // A prefix continues from host to disk and stops at the first block neither holds.
        assert_eq!(t.lookup(&[b(0), b(1), b(2), b(9), b(3)]), [2, 1]);
        let (_, hits) = t.load(&[b(0), b(1), b(2)], 100_000_000);
        assert_eq!(hits, [2, 1]);
        // Host reads: block 0 earlier, then blocks 0 and 1.
        assert_eq!(t.bytes().read, [3 * 16 * QWEN3_0_6B, 16 * QWEN3_0_6B]);
    }

    #[test]
    fn a_disk_written_through_takes_what_host_stores_once_host_has_written_it() {
        let mut t = Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: vec![
                spec(Tier::Host, 2),
                TierSpec {
                    write_through: true,
                    ..spec(Tier::Disk, 4)
                },
            ],
            shared_host: None,
        });
        let mut moves = Vec::new();
        t.offload(&blocks(0..3), 0, &mut moves);
        // Host keeps blocks 1 and 2 (block 0 dropped for room, not cascaded); disk gets all
        // three host stored.
        assert_eq!(
            moves,
            vec![
                TierMove {
                    tier: Tier::Host,
                    stored: blocks(0..3),
                    removed: vec![b(0)],
                },
                TierMove {
                    tier: Tier::Disk,
                    stored: blocks(0..3),
                    removed: vec![],
                },
            ]
        );
        // 3 blocks x 16 tokens x 114,688 bytes = 5,505,024 bytes each way.
        assert_eq!(t.bytes().written, [5_505_024, 5_505_024]);
        assert_eq!(t.resident(), [2, 3]);
        // Host's write: 0.05 ms to the first byte + 5,505,024 / 25 = 220,201 ns: ends at
        // 270,201. Disk's is queued then: 270,201 + 50,000 + 220,201 = 540,402.
        // Block 0 is on disk only; read back at 0, it waits for that write, then 0.05 ms and
        // 1,835,008 / 25 = 73,400 ns: 540,402 + 50,000 + 73,400 = 663,802.
        assert_eq!(t.lookup(&blocks(0..3)), [2, 1]);
        assert_eq!(t.load(&[b(0)], 0), (663_802, [0, 1]));
        // Host drops block 1 for block 3: disk already holds 1, and takes only 3.
        moves.clear();
        t.offload(&[b(3)], 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(1)]);
        assert_eq!(moves[1].stored, vec![b(3)]);
        assert_eq!(t.resident(), [2, 4]);
        // Written back (the default), the same first offload gives disk only what host dropped.
        let mut back = tiers(2, Some(4));
        back.offload(&blocks(0..3), 0, &mut Vec::new());
        assert_eq!(back.bytes().written, [5_505_024, 16 * QWEN3_0_6B]);
    }

    #[test]
    fn a_tier_of_no_capacity_holds_nothing_and_passes_nothing_on() {
        let mut t = tiers(0, Some(4));
        let mut moves = Vec::new();
        t.offload(&blocks(0..3), 0, &mut moves);
        assert!(moves.is_empty());
        assert_eq!(t.resident(), [0, 0]);
        assert_eq!(t.lookup(&blocks(0..3)), [0, 0]);
        assert_eq!(t.bytes(), TierBytes::default());
    }

    #[test]
    fn an_offload_larger_than_the_tier_keeps_its_last_blocks() {
        let mut t = tiers(2, None);
        let mut moves = Vec::new();
        t.offload(&blocks(0..4), 0, &mut moves);
        assert_eq!(moves[0].stored, blocks(0..4));
        assert_eq!(moves[0].removed, blocks(0..2));
        assert_eq!(t.lookup(&blocks(2..4)), [2, 0]);
        t.clear();
        assert_eq!(t.resident(), [0, 0]);
    }

    /// Tiers of one worker over `pool`: host at `d2h` / `h2d` GB/s with 0.05 ms to the first
    /// byte.
    fn sharing(pool: &SharedHost, d2h: f64, h2d: f64) -> Tiers {
        Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: vec![TierSpec {
                d2h_gbps: d2h,
                h2d_gbps: h2d,
                ..spec(Tier::Host, 0)
            }],
            shared_host: Some(pool.clone()),
        })
    }

    #[test]
    fn a_block_worker_a_offloads_to_the_shared_pool_worker_b_loads_over_its_own_link() {
        let pool = SharedHost::new(4);
        for w in [0, 1] {
            assert!(pool.borrow_mut().subscribe(w).is_empty());
        }
        // A writes at 25 GB/s, B reads at 10 GB/s: each its own link.
        let (mut wa, mut wb) = (sharing(&pool, 25.0, 25.0), sharing(&pool, 25.0, 10.0));
        let mut moves = Vec::new();
        wa.offload(&blocks(0..4), 0, &mut moves);
        // 4 blocks x 16 tokens x 114,688 bytes = 7,340,032 bytes; over A's 25 GB/s after
        // 0.05 ms: 50,000 + 293,601 = 343,601 ns until they are on host.
        let written = 343_601;
        assert_eq!(wa.bytes().written, [7_340_032, 0]);
        // B finds them in the pool and loads them over its 10 GB/s: 7,340,032 / 10 = 734,003 ns
        // after 0.05 ms.
        assert_eq!(wb.lookup(&blocks(0..4)), [4, 0]);
        let now = 1_000_000;
        let (done, hits) = wb.load(&blocks(0..4), now);
        assert_eq!((done - now, hits), (50_000 + 734_003, [4, 0]));
        assert_eq!(
            (wb.bytes().read, wb.bytes().written),
            ([7_340_032, 0], [0, 0])
        );
        assert_eq!(
            wa.bytes().read,
            [0, 0],
            "bytes count on the worker that moved them"
        );
        // Read before A's write has ended, B waits for it.
        let mut c = sharing(&pool, 25.0, 10.0);
        assert_eq!(c.load(&blocks(0..4), 0).0, written + 50_000 + 734_003);
        // Both workers report A's store: A as it publishes, B woken to (A is not).
        let stored = vec![TierMove {
            tier: Tier::Host,
            stored: blocks(0..4),
            removed: vec![],
        }];
        assert_eq!(pool.borrow_mut().drain(0), stored);
        assert_eq!(pool.borrow_mut().to_wake(0), vec![1]);
        assert_eq!(
            pool.borrow_mut().to_wake(0),
            Vec::<usize>::new(),
            "woken once"
        );
        assert_eq!(pool.borrow_mut().drain(1), stored);
        assert_eq!(pool.borrow().log.len(), 0, "drained by all: trimmed");
        // A restarts: its device is gone, the cluster's pool is not.
        wa.clear();
        assert_eq!(wb.resident(), [4, 0]);
    }

    #[test]
    fn the_shared_pool_has_one_capacity_and_one_lru_for_every_worker() {
        let pool = SharedHost::new(4);
        assert!(pool.borrow_mut().subscribe(1).is_empty());
        let (mut wa, mut wb) = (sharing(&pool, 25.0, 25.0), sharing(&pool, 25.0, 25.0));
        wa.offload(&blocks(0..3), 0, &mut Vec::new());
        // B touches block 0 by loading it: block 1 is now the pool's least recently used.
        wb.load(&[b(0)], 0);
        let mut moves = Vec::new();
        wb.offload(&blocks(3..5), 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(1)]);
        assert_eq!(wa.lookup(&[b(0)]), [1, 0]);
        assert_eq!(wa.lookup(&[b(1)]), [0, 0]);
        // A worker subscribing later starts from every block held, least recently used first.
        assert_eq!(pool.borrow_mut().subscribe(0), vec![b(2), b(0), b(3), b(4)]);
        // Worker 1 reports both workers' changes in the pool's order; worker 0 none before it
        // subscribed.
        let log = pool.borrow_mut().drain(1);
        assert_eq!(log.len(), 2);
        assert_eq!(log[1].removed, vec![b(1)]);
        assert!(pool.borrow_mut().drain(0).is_empty());
        pool.borrow_mut().unsubscribe(1);
        wb.offload(&blocks(5..6), 0, &mut Vec::new());
        assert_eq!(pool.borrow_mut().drain(0).len(), 1);
        assert!(
            pool.borrow_mut().drain(1).is_empty(),
            "down: reports nothing"
        );
    }

    /// A host tier of `host` blocks written through from the device.
    fn written_through(host: usize) -> Tiers {
        Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: vec![TierSpec {
                write_through: true,
                ..spec(Tier::Host, host)
            }],
            shared_host: None,
        })
    }

    #[test]
    fn touching_a_prefix_walks_it_last_first_so_its_first_block_ends_most_recent() {
        // Host holds 0, 1, 2 (stored in that order). Touching [0, 1, 2, 9] (9 not held) walks
        // 9, 2, 1, 0: recency, least first, is 2, 1, 0. Storing 3 then 4 drops 2, then 1.
        let mut t = written_through(3);
        t.offload(&blocks(0..3), 0, &mut Vec::new());
        t.touch_host(&[b(0), b(1), b(2), b(9)]);
        let mut moves = Vec::new();
        t.offload(&blocks(3..5), 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(2), b(1)]);
        assert_eq!(t.lookup(&[b(0)]), [1, 0]);
        // Written back, the touch is not the connector's: nothing moves.
        let mut back = tiers(3, None);
        back.offload(&blocks(0..3), 0, &mut Vec::new());
        back.touch_host(&[b(0), b(1), b(2)]);
        let mut moves = Vec::new();
        back.offload(&blocks(3..4), 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(0)]);
    }

    #[test]
    fn host_written_through_stores_only_what_it_lacks_and_leaves_the_rest_where_it_is() {
        // Host holds 0, 1, 2. Writing [0, 3] through stores 3 alone, dropping the least
        // recently used, 0, although 0 was just written again (vLLM's prepare_store filters
        // held blocks without touching them); written back, 0 would be touched and 1 dropped.
        let mut t = written_through(3);
        t.offload(&blocks(0..3), 0, &mut Vec::new());
        let mut moves = Vec::new();
        t.offload(&[b(0), b(3)], 0, &mut moves);
        assert_eq!(
            (moves[0].stored.clone(), moves[0].removed.clone()),
            (vec![b(3)], vec![b(0)])
        );
        let mut back = tiers(3, None);
        back.offload(&blocks(0..3), 0, &mut Vec::new());
        let mut moves = Vec::new();
        back.offload(&[b(0), b(3)], 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(1)]);
    }

    #[test]
    fn a_worker_touching_the_shared_pool_touches_it_for_every_worker() {
        // One pool of 3 blocks, written through by both workers. A writes 0, 1, 2; B's lookup
        // touches 0, so A's next write drops 1, the least recently used for both.
        let pool = SharedHost::new(3);
        let through = || {
            Tiers::new(&TiersSetup {
                block_bytes: 16 * QWEN3_0_6B,
                tiers: vec![TierSpec {
                    write_through: true,
                    ..spec(Tier::Host, 0)
                }],
                shared_host: Some(pool.clone()),
            })
        };
        let (mut wa, mut wb) = (through(), through());
        wa.offload(&blocks(0..3), 0, &mut Vec::new());
        wb.touch_host(&[b(0)]);
        assert_eq!(wa.host_recency(), vec![b(1), b(2), b(0)]);
        let mut moves = Vec::new();
        wa.offload(&blocks(3..4), 0, &mut moves);
        assert_eq!(moves[0].removed, vec![b(1)]);
    }
}
