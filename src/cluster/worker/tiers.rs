//! A worker's lower KV tiers: host memory (`[kv.host]`) and disk (`[kv.disk]`) below the device,
//! each an LRU store of blocks with its own transfer lanes. Pure: times come in as arguments.
//!
//! - **Offload (write-back on eviction).** Blocks the device evicts are written to the first
//!   lower tier (host); blocks that tier drops for room, least recently used first, are written
//!   to the next (disk); what the last tier drops is gone. With `[kv.host] write_policy =
//!   "write_through"` a block is written to host when the device stores it (computed, or loaded
//!   back: then only touched) and eviction moves nothing, as the crate's vLLM adapter and vLLM's
//!   connector store each computed prompt block; a host no larger than the device then mostly
//!   repeats what the device holds. A block a tier already holds is only
//!   touched (made most recently used): tiers are inclusive, so a block loaded back to the device
//!   keeps its lower copy, and evicting it again moves no bytes.
//! - **Load.** A request whose cached prefix on the device stops short looks the blocks after it
//!   up in the lower tiers (each block from the highest tier holding it, up to the first block no
//!   tier holds) and loads them back to the device instead of recomputing them; its step waits
//!   until the last byte has arrived ([`Tiers::load`] says when).
//! - **Transfers.** Each tier has a write lane (into it: device → host for the host tier, host →
//!   disk for the disk tier, at `d2h_gbps`) and a read lane (out of it to the device, at
//!   `h2d_gbps`). A lane serves its transfers FIFO: one queued at `t` starts its first byte at
//!   `max(lane free, t + first_byte_ms)` and ends `bytes / GB/s` later (1 GB/s is 1 byte per ns).
//!   A block cannot be read before its own write has ended.
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
//! block, where the crate writes when the step completes, and a copy host already holds is
//! touched, where the crate leaves it), and holds the step that admits the loading request until
//! the load ends (the batch waits with it). A disk block is read straight to the device over the disk tier's read lane (not
//! staged through host), and a cluster-shared pool (`scope = "cluster"`) is not modelled.

use std::collections::{HashMap, VecDeque};

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
}

/// A worker's lower tiers, top down (host, then disk), and the bytes of one block.
#[derive(Clone, Debug, PartialEq)]
pub struct TiersSetup {
    /// KV bytes of one block (the model's bytes per token x tokens per block).
    pub block_bytes: u64,
    /// The tiers below the device, highest first.
    pub tiers: Vec<TierSpec>,
    /// Blocks go to host as the device stores them (write-through), not as it evicts them.
    pub write_through: bool,
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

/// One tier: its blocks in LRU order and its two lanes.
#[derive(Clone, Debug)]
struct Store {
    spec: TierSpec,
    entries: HashMap<BlockHash, Entry, BlockHashBuilder>,
    /// (stamp, block), least recently used first; an entry whose stamp is no longer its
    /// block's (touched since, or dropped) is stale, skipped and swept out.
    order: VecDeque<(u64, BlockHash)>,
    clock: u64,
    write: Lane,
    read: Lane,
}

impl Store {
    fn new(spec: TierSpec) -> Self {
        Store {
            spec,
            entries: HashMap::default(),
            order: VecDeque::new(),
            clock: 0,
            write: Lane::new(spec.d2h_gbps, spec.first_byte_ms),
            read: Lane::new(spec.h2d_gbps, spec.first_byte_ms),
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
        let dropped = (self.entries.len() == self.spec.capacity_blocks).then(|| loop {
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
    write_through: bool,
    stores: Vec<Store>,
    bytes: TierBytes,
}

impl Tiers {
    /// Empty tiers as `setup` describes them.
    pub fn new(setup: &TiersSetup) -> Self {
        debug_assert!(setup.tiers.len() <= 2, "host and disk at most");
        Tiers {
            block_bytes: setup.block_bytes,
            write_through: setup.write_through,
            stores: setup.tiers.iter().map(|&t| Store::new(t)).collect(),
            bytes: TierBytes::default(),
        }
    }

    /// Whether blocks go to host as the device stores them (else as it evicts them).
    pub fn write_through(&self) -> bool {
        self.write_through
    }

    /// The bytes moved so far.
    pub fn bytes(&self) -> TierBytes {
        self.bytes
    }

    /// Blocks each tier holds now.
    pub fn resident(&self) -> TierHits {
        let mut n = [0; 2];
        for (k, s) in self.stores.iter().enumerate() {
            n[k] = s.entries.len();
        }
        n
    }

    /// Writes `blocks` at `now` (in order: the blocks the device evicted, or under write-through
    /// the blocks it stored) to the first tier, cascading what each tier drops to the next; a
    /// block the tier holds is only touched. Appends what changed to `moves`.
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
        if store.spec.capacity_blocks == 0 {
            return;
        }
        let mut stored = Vec::new();
        for &b in blocks {
            if store.entries.contains_key(&b) {
                store.touch(b);
            } else {
                stored.push(b);
            }
        }
        if stored.is_empty() {
            return;
        }
        let bytes = stored.len() as u64 * block_bytes;
        let ready = store.write.submit(now, bytes);
        self.bytes.written[level] += bytes;
        let removed: Vec<BlockHash> = stored.iter().filter_map(|&b| store.put(b, ready)).collect();
        let tier = store.spec.tier;
        let next = level + 1 < self.stores.len() && !removed.is_empty();
        let cascade = next.then(|| removed.clone());
        out.push(TierMove {
            tier,
            stored,
            removed,
        });
        if let Some(dropped) = cascade {
            self.put_into(level + 1, &dropped, now, out);
        }
    }

    /// The tier (index) holding `block` that a load would read it from: the highest.
    fn source(&self, block: BlockHash) -> Option<usize> {
        self.stores
            .iter()
            .position(|s| s.entries.contains_key(&block))
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
            let store = &mut self.stores[level];
            ready[level] = ready[level].max(store.entries[&b].ready);
            store.touch(b);
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

    /// Forgets every block (the worker restarted: host memory and its disk cache are gone).
    pub fn clear(&mut self) {
        for s in &mut self.stores {
            s.entries.clear();
            s.order.clear();
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
        }
    }

    fn tiers(host: usize, disk: Option<usize>) -> Tiers {
        let mut t = vec![spec(Tier::Host, host)];
        t.extend(disk.map(|d| spec(Tier::Disk, d)));
        Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: t,
            write_through: false,
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
}
