//! A worker's KV blocks: which named (prefix-cacheable) blocks it holds, which of those running
//! requests pin, how many anonymous blocks requests hold besides, and what it evicts for room.
//!
//! - **Named blocks** are full prompt blocks with a block name: prefix caching finds them and KV
//!   events report them. A block is pinned while a running request uses it; unpinned, it stays
//!   cached and becomes evictable.
//! - **Private blocks** are every other block a request holds: the partial last block of a
//!   prompt, a named block still being computed, and the blocks its generated tokens fill (their
//!   contents are unique to the request, so nothing could reuse them). They are freed when the
//!   request completes or is preempted.
//! - **Eviction** takes the evictable block released longest ago: vLLM's free-block queue order.
//!   A request releases its blocks last block first and pins a prefix whole, so a block is always
//!   released after every block below it: eviction in release order takes a prompt's tail before
//!   its head, and whatever is cached is always a set of whole prefixes. Never-used capacity is
//!   taken before anything is evicted (Dynamo's mocker does the same; vLLM's single free queue
//!   may evict a cached block earlier).
//! - **Unlisted blocks** are named blocks kept out of the name table: a request's own tail, the
//!   blocks from the first one no other request of the workload names
//!   ([`RequestSpec::unshared_from`](crate::workload::RequestSpec::unshared_from)). Only that
//!   request could look them up, so they are stored and evicted without a table probe (half of
//!   a trace's blocks, often); they count, and are reported in KV events, like any named block
//!   (the event marks them: [`Changes::own_tail`],
//!   [`Blocks`](crate::protocol::kv_event::Blocks)).
//!   Before the request could look them up again (it is preempted, or leaves a prefill worker)
//!   the scheduler lists them ([`KvPool::list`]). Lookups by name ([`KvPool::contains`] and the
//!   like) do not see unlisted blocks, so loss attribution, which looks up other requests'
//!   blocks, runs with every block listed.
//!
//! Capacity counts both kinds: held named blocks + private blocks <= capacity. *Available*
//! blocks are those a request could get now: free ones plus evictable ones.
//!
//! **Memory of evictions.** Lost blocks (evicted, or gone in a restart) go into an
//! [`EvictionMemory`] spanning one capacity of losses: loss attribution asks whether a missed
//! block was held and lost or never computed, and the answer must not cost memory in
//! proportion to the run's history.
//!
//! Layout: a `NameTable` (`names.rs`) from block name to a slot in an arena of 16-byte
//! slots, and the evictable blocks in release order in a `ReleaseQueue` (`lru.rs`), whose
//! entries carry the block's name and slot. Acquiring a block costs one probe of the table,
//! pinning an evictable one withdraws its entry in place (its slot knows where), and evicting
//! reads the queue in order and removes the name from the table.

use std::cell::RefCell;
use std::rc::Rc;

use crate::hash::BlockHash;
use crate::protocol::kv_event::Tier;

use crate::engine::Nanos;

use super::evicted::EvictionMemory;
use super::held_by::SharedHeldBy;
use super::lru::{ReleaseQueue, Released};
use super::names::{NameTable, Probe};
use super::tiers::{TierHits, TierMove, Tiers, TiersSetup};

/// A pool shared by its worker's engine and the run's ground truth (one simulation runs on one
/// thread; the truth only reads, through [`CacheView`](super::engine::CacheView)).
pub type SharedPool = Rc<RefCell<KvPool>>;

/// A worker's KV blocks, with a capacity in blocks or unbounded (an unbounded pool never evicts).
#[derive(Clone, Debug)]
pub struct KvPool {
    capacity: Option<usize>,
    /// Block name → its slot, for held blocks.
    index: NameTable,
    /// Named blocks held.
    named: usize,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// Evictable blocks, released longest ago first (bounded pools only).
    lru: ReleaseQueue,
    /// Blocks lost not long ago (`None`: not remembered, when misses are not attributed).
    memory: Option<EvictionMemory>,
    /// The ground truth's table of holders, told of every block listed and unlisted here, with
    /// this pool's worker number (`None`: no truth reads this pool).
    held_by: Option<(SharedHeldBy, u32)>,
    pinned: usize,
    private: usize,
    peak_active: usize,
    /// The lower tiers its evictions (or, write-through, its stores) go to (`None`: none,
    /// evicted blocks are gone).
    tiers: Option<Box<Tiers>>,
    /// The time of the step being planned (when its evictions are offloaded).
    now: Nanos,
    /// Stores a host written through takes after the step's lookups
    /// ([`KvPool::write_through_later`]).
    through: Vec<Through>,
    /// Tests keep what they acquired here.
    #[cfg(test)]
    scratch_held: Vec<(Vec<BlockHash>, Vec<u32>)>,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    block: BlockHash,
    /// Its entry's number in the release queue, while it is evictable.
    queued: u32,
    /// Running requests pinning it, with [`UNLISTED`] set for a block out of the name table.
    pins: u32,
}

/// The bytes a pool allocates for its name table when it is made, before it holds a block (the
/// run's memory estimate counts them per worker; the cells of held blocks are counted per block,
/// [`POOL_BYTES_PER_BLOCK`](crate::budget::POOL_BYTES_PER_BLOCK)).
///
/// The table starts at its fewest cells, not sized for the pool's capacity, and grows by
/// doubling as names enter it, so it stays between a quarter and half full of the names it
/// holds. A pool whose blocks are mostly own tails (unlisted, never in the table) keeps a table
/// of its few listed names: 512 workers' tables of a few hundred names each stay in the caches,
/// where tables sized for 16,384 blocks spread the same names over 128 MiB of cells.
pub fn presized_bytes() -> u64 {
    NameTable::bytes_for(0)
}

/// The pins' top bit: the block is not in the name table.
const UNLISTED: u32 = 1 << 31;

/// One request's device stores of a step, kept for a host written through.
#[derive(Clone, Debug)]
struct Through {
    /// The request was first admitted in this step.
    admitted: bool,
    /// Its newly stored blocks, in runs.
    runs: Vec<Vec<BlockHash>>,
    /// Its blocks up to its last one stored, touched after the store.
    prefix: Vec<BlockHash>,
}

/// What storing blocks did, for KV events: runs of newly stored blocks with their parents, and
/// the blocks evicted to make room (in eviction order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Newly stored blocks, as (parent, consecutive blocks) runs in prompt order.
    pub stored: Vec<(Option<BlockHash>, Vec<BlockHash>)>,
    /// How many blocks at the end of the last run were stored unlisted: the acquiring request's
    /// own tail (only the last run can hold any: an own tail is never held before, so it is
    /// stored whole, after the request's other blocks).
    pub own_tail: usize,
    /// Evicted blocks, in eviction order.
    pub evicted: Vec<BlockHash>,
    /// What offloading changed on the lower tiers: the evicted blocks, or under write-through the
    /// stored ones (empty without tiers).
    pub lower: Vec<TierMove>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.stored.is_empty() && self.evicted.is_empty() && self.lower.is_empty()
    }
}

impl KvPool {
    /// An empty pool of at most `capacity` blocks (`None`: unbounded) that remembers the blocks
    /// it loses if `remember` (for loss attribution).
    pub fn new(capacity: Option<usize>, remember: bool) -> Self {
        KvPool {
            capacity,
            // Grown as names enter it, not sized for the capacity (`presized_bytes`).
            index: NameTable::with_capacity(0),
            named: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            lru: ReleaseQueue::default(),
            memory: remember.then(|| EvictionMemory::new(capacity.unwrap_or(1))),
            held_by: None,
            pinned: 0,
            private: 0,
            peak_active: 0,
            tiers: None,
            now: 0,
            through: Vec::new(),
            #[cfg(test)]
            scratch_held: Vec::new(),
        }
    }

    /// The pool with lower tiers as `setup` describes them (`None`: none).
    pub fn with_tiers(mut self, setup: Option<&TiersSetup>) -> Self {
        self.tiers = setup.map(|s| Box::new(Tiers::new(s)));
        self
    }

    /// The lower tiers, if any.
    pub fn tiers(&self) -> Option<&Tiers> {
        self.tiers.as_deref()
    }

    /// Steps planned from now on start at `now` (their evictions are offloaded then).
    pub fn set_now(&mut self, now: Nanos) {
        self.now = now;
    }

    /// From the front of `blocks` (the blocks after a prefix held here), the blocks each lower
    /// tier would give back ([`Tiers::lookup`]); none without tiers.
    pub fn lower_prefix(&self, blocks: &[BlockHash]) -> TierHits {
        self.tiers.as_ref().map_or([0; 2], |t| t.lookup(blocks))
    }

    /// Loads `blocks` (a [`KvPool::lower_prefix`] prefix) back from the lower tiers, queued at
    /// `now`: when the last arrives, and the blocks read from each tier ([`Tiers::load`]). The
    /// caller then acquires them like any block it stores.
    pub fn load(&mut self, blocks: &[BlockHash], now: Nanos) -> (Nanos, TierHits) {
        match &mut self.tiers {
            Some(t) if !blocks.is_empty() => t.load(blocks, now),
            _ => (now, [0; 2]),
        }
    }

    /// Touches the blocks of `blocks` a host tier written through holds, last first
    /// ([`Tiers::touch_host`]); nothing without one.
    pub fn touch_host(&mut self, blocks: &[BlockHash]) {
        if let Some(t) = &mut self.tiers {
            t.touch_host(blocks);
        }
    }

    /// Under a host written through, keeps the blocks `changes` newly stored on the device for
    /// host, with `prefix` (the storing request's blocks up to its last one stored) to touch
    /// after them: [`KvPool::flush_through`] writes them once the step's waiting requests have
    /// been looked up, as vLLM submits a step's stores after scheduling it
    /// (`build_connector_meta` → `_get_reqs_to_store`). `admitted`: the request was first
    /// admitted in this step (vLLM stores those first). Nothing without such a host.
    pub fn write_through_later(&mut self, changes: &Changes, prefix: &[BlockHash], admitted: bool) {
        if changes.stored.is_empty() || !self.tiers.as_ref().is_some_and(|t| t.write_through()) {
            return;
        }
        self.through.push(Through {
            admitted,
            runs: changes.stored.iter().map(|(_, r)| r.clone()).collect(),
            prefix: prefix.to_vec(),
        });
    }

    /// Writes the step's stores kept by [`KvPool::write_through_later`] to host, the first
    /// admitted requests' first, then the others', each in the order it was kept (vLLM's
    /// `yield_req_data`: new requests, then cached ones); after a store that wrote something,
    /// touches its request's prefix, last block first (`_get_reqs_to_store`). Returns what the
    /// lower tiers changed, for the step's KV events.
    pub fn flush_through(&mut self) -> Vec<TierMove> {
        let mut lower = Vec::new();
        let (Some(t), false) = (self.tiers.as_mut(), self.through.is_empty()) else {
            return lower;
        };
        let kept = std::mem::take(&mut self.through);
        let order = kept.iter().filter(|k| k.admitted);
        for k in order.chain(kept.iter().filter(|k| !k.admitted)) {
            let from = lower.len();
            for r in &k.runs {
                t.offload(r, self.now, &mut lower);
            }
            let wrote = lower[from..]
                .iter()
                .any(|m| m.tier == Tier::Host && !m.stored.is_empty());
            if wrote {
                t.touch_host(&k.prefix);
            }
        }
        lower
    }

    /// When the step being planned starts (tiered pools only; see [`KvPool::set_now`]).
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The capacity in blocks (`None`: unbounded).
    pub fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// Named blocks held (pinned or evictable).
    pub fn named(&self) -> usize {
        self.named
    }

    /// Named blocks pinned by running requests.
    pub fn pinned(&self) -> usize {
        self.pinned
    }

    /// Private blocks held by running requests.
    pub fn private(&self) -> usize {
        self.private
    }

    /// Blocks in use by running requests (pinned named + private).
    pub fn active(&self) -> usize {
        self.pinned + self.private
    }

    /// The most blocks ever in use at once.
    pub fn peak_active(&self) -> usize {
        self.peak_active
    }

    /// Blocks a request could get now: free plus evictable (`usize::MAX` when unbounded).
    pub fn available(&self) -> usize {
        match self.capacity {
            Some(cap) => cap - self.active(),
            None => usize::MAX,
        }
    }

    fn slot(&self, block: BlockHash) -> Option<&Slot> {
        self.index
            .get(block, |s| self.slots[s as usize].block)
            .map(|s| &self.slots[s as usize])
    }

    /// Tells the ground truth's table of holders, as worker `worker`, of every block listed
    /// from now on (and of those listed now), and of its first lost block.
    pub fn report_to(&mut self, held_by: SharedHeldBy, worker: u32) {
        {
            let mut table = held_by.borrow_mut();
            for s in self.index.slots() {
                table.add(self.slots[s as usize].block, worker);
            }
            if self.memory.as_ref().is_some_and(|m| !m.is_empty()) {
                table.lost_one(worker);
            }
        }
        self.held_by = Some((held_by, worker));
    }

    /// `block` was just put in the name table.
    fn tell_held(&self, block: BlockHash) {
        if let Some((held_by, worker)) = &self.held_by {
            held_by.borrow_mut().add(block, *worker);
        }
    }

    /// Whether `block` is among the blocks lost not long ago (the memory alone, not what is held).
    pub fn lost_recently(&self, block: BlockHash) -> bool {
        self.memory.as_ref().is_some_and(|m| m.contains(block))
    }

    /// Whether `block` is held and listed (an unlisted block is found by no lookup by name).
    pub fn contains(&self, block: BlockHash) -> bool {
        self.slot(block).is_some()
    }

    /// Every named block held, unlisted ones too, in increasing order of name (a snapshot for
    /// a router: sorted, so that the table's order never reaches a message).
    pub fn named_blocks(&self) -> Vec<BlockHash> {
        let mut blocks: Vec<BlockHash> = self
            .index
            .slots()
            .map(|s| self.slots[s as usize].block)
            .collect();
        if blocks.len() < self.named {
            // The unlisted ones: slots in use that are out of the table.
            let mut free = vec![false; self.slots.len()];
            for &s in &self.free_slots {
                free[s as usize] = true;
            }
            blocks.extend(
                self.slots
                    .iter()
                    .zip(free)
                    .filter(|(e, free)| !free && e.pins & UNLISTED != 0)
                    .map(|(e, _)| e.block),
            );
        }
        debug_assert_eq!(blocks.len(), self.named);
        blocks.sort_unstable_by_key(|b| b.0);
        blocks
    }

    /// Whether `block` is held or remembered (lost not long ago; a pool that does not remember
    /// its losses only knows what it holds).
    pub fn remembers(&self, block: BlockHash) -> bool {
        self.contains(block) || self.memory.as_ref().is_some_and(|m| m.contains(block))
    }

    /// Whether `block` is held and pinned by a running request.
    pub fn is_pinned(&self, block: BlockHash) -> bool {
        self.slot(block).is_some_and(|s| s.pins > 0)
    }

    /// Blocks of `blocks` held, counted from the front.
    pub fn cached_prefix(&self, blocks: &[BlockHash]) -> usize {
        blocks.iter().take_while(|b| self.contains(**b)).count()
    }

    /// Blocks of `blocks` held or remembered, counted from the front.
    pub fn remembered_prefix(&self, blocks: &[BlockHash]) -> usize {
        blocks.iter().take_while(|b| self.remembers(**b)).count()
    }

    /// How many of `blocks` (named blocks about to be pinned) are not pinned now: what pinning
    /// them takes from [`KvPool::available`]. Blocks from `blocks[unlisted_from]` on are the
    /// caller's own tail, not held here (as for [`KvPool::acquire`]): counted without a lookup.
    pub fn unpinned_among(&self, blocks: &[BlockHash], unlisted_from: usize) -> usize {
        let (listed, own) = blocks.split_at(unlisted_from.min(blocks.len()));
        listed.iter().filter(|b| !self.is_pinned(**b)).count() + own.len()
    }

    /// Pins `blocks`, which extend a prefix the caller already pins (or start the prompt),
    /// storing those not held and taking `new_private` more private blocks, evicting for room;
    /// appends their slots to `held` (the caller's handle for releasing them). The caller checks
    /// first that `unpinned_among(blocks, unlisted_from) + new_private <= available()`. `parent` is the block
    /// before `blocks[0]`. Blocks from `blocks[unlisted_from]` on are the caller's own tail,
    /// not held here: they are stored unlisted, without a probe.
    pub fn acquire(
        &mut self,
        parent: Option<BlockHash>,
        blocks: &[BlockHash],
        new_private: usize,
        changes: &mut Changes,
        held: &mut Vec<u32>,
        unlisted_from: usize,
    ) {
        debug_assert!(self.unpinned_among(blocks, unlisted_from) + new_private <= self.available());
        // One probe per block: pin it if held, else store it pinned at once (pinned blocks are
        // never evicted, so making room afterwards cannot take them).
        let mut prev = parent;
        let mut run: Option<(Option<BlockHash>, Vec<BlockHash>)> = None;
        held.reserve(blocks.len());
        for (k, &b) in blocks.iter().enumerate() {
            // `None`: the caller's own tail, not held here, stored without a probe.
            let probe = (k < unlisted_from).then(|| {
                let slots = &self.slots;
                self.index.probe(b, |s| slots[s as usize].block)
            });
            debug_assert!(
                probe.is_some() || !self.contains(b),
                "an own tail is held once"
            );
            let slot = match probe {
                Some(Probe::Found(s)) => {
                    let e = &mut self.slots[s as usize];
                    if e.pins == 0 {
                        self.pinned += 1;
                        if self.capacity.is_some() {
                            self.lru.withdraw(e.queued);
                        }
                    }
                    e.pins += 1;
                    if let Some(r) = run.take() {
                        changes.stored.push(r);
                    }
                    s
                }
                Some(Probe::Vacant(_)) | None => {
                    let s = self.store(b, probe.is_none());
                    if let Some(Probe::Vacant(at)) = probe {
                        self.index.insert_at(at, b, s);
                        self.tell_held(b);
                    }
                    self.pinned += 1;
                    match &mut run {
                        Some((_, r)) => r.push(b),
                        None => {
                            // Sized for the rest of the blocks: most runs are all of them.
                            let mut r = Vec::with_capacity(blocks.len() - k);
                            r.push(b);
                            run = Some((prev, r));
                        }
                    }
                    s
                }
            };
            held.push(slot);
            prev = Some(b);
        }
        if let Some(r) = run {
            changes.stored.push(r);
        }
        changes.own_tail = blocks.len().saturating_sub(unlisted_from);
        debug_assert!(
            changes
                .stored
                .last()
                .is_some_and(|(_, r)| r.len() >= changes.own_tail)
                || changes.own_tail == 0
        );
        self.private += new_private;
        self.make_room(changes);
        self.peak_active = self.peak_active.max(self.active());
    }

    /// Stores `block`, pinned once, in a free slot, marked `unlisted` or for the caller to put
    /// in the name table; returns its slot.
    fn store(&mut self, block: BlockHash, unlisted: bool) -> u32 {
        let slot = Slot {
            block,
            queued: 0, // pinned: not in the queue
            pins: if unlisted { 1 | UNLISTED } else { 1 },
        };
        let s = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = slot;
                s
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 - 1 blocks")
            }
        };
        self.named += 1;
        s
    }

    /// Puts the unlisted blocks among `held` (a request's slots, all pinned by it) in the name
    /// table, so that lookups by name find them.
    pub fn list(&mut self, held: &[u32]) {
        for &slot in held {
            let e = &mut self.slots[slot as usize];
            if e.pins & UNLISTED == 0 {
                continue;
            }
            e.pins &= !UNLISTED;
            let block = e.block;
            let slots = &self.slots;
            let Probe::Vacant(at) = self.index.probe(block, |s| slots[s as usize].block) else {
                unreachable!("an own tail block is held once");
            };
            self.index.insert_at(at, block, slot);
            self.tell_held(block);
        }
    }

    /// Unpins a request's named blocks (their slots from [`KvPool::acquire`], front to back)
    /// and frees `private` private blocks. Named blocks are released last first, so a prompt's
    /// tail becomes evictable before its head; they stay cached until evicted.
    pub fn release(&mut self, held: &[u32], private: usize) {
        debug_assert!(
            private <= self.private,
            "release of private blocks never taken"
        );
        self.private -= private;
        for &slot in held.iter().rev() {
            let e = &mut self.slots[slot as usize];
            debug_assert!(e.pins & !UNLISTED > 0, "release without acquire");
            e.pins -= 1;
            if e.pins & !UNLISTED == 0 {
                self.pinned -= 1;
                if self.capacity.is_some() {
                    e.queued = self.lru.push(Released {
                        block: e.block,
                        slot,
                        unlisted: e.pins & UNLISTED != 0,
                    });
                }
            }
        }
        if self.lru.needs_sweep() {
            let slots = &mut self.slots;
            self.lru
                .sweep(|s, number| slots[s as usize].queued = number);
        }
    }

    /// Frees `n` private blocks (a request's private blocks became named, or it needs fewer).
    pub fn free_private(&mut self, n: usize) {
        debug_assert!(n <= self.private);
        self.private -= n;
    }

    /// Drops every block's KV (a restart), remembering the blocks as lost. Returns how many
    /// named blocks were held.
    pub fn clear(&mut self) -> usize {
        let held = self.named;
        // In name order: which ones are forgotten first must not depend on the table's layout.
        let lost = if self.memory.is_some() {
            self.named_blocks()
        } else {
            Vec::new()
        };
        if let Some(memory) = &mut self.memory {
            if self.capacity.is_none() {
                // An unbounded pool remembers what it held at its last restart.
                *memory = EvictionMemory::new(held);
            }
            for &b in &lost {
                memory.insert(b);
            }
        }
        if let Some((held_by, worker)) = &self.held_by {
            let mut held_by = held_by.borrow_mut();
            for s in self.index.slots() {
                held_by.remove(self.slots[s as usize].block, *worker);
            }
            if !lost.is_empty() {
                held_by.lost_one(*worker);
            }
        }
        if let Some(t) = &mut self.tiers {
            t.clear();
        }
        self.index.clear();
        self.named = 0;
        self.slots.clear();
        self.free_slots.clear();
        self.lru.clear();
        self.pinned = 0;
        self.private = 0;
        held
    }

    /// Evicts until what is held fits the capacity again (the caller checked it can): the
    /// evictable blocks released longest ago first.
    fn make_room(&mut self, changes: &mut Changes) {
        let Some(cap) = self.capacity else {
            return;
        };
        let excess = (self.named + self.private).saturating_sub(cap);
        if excess == 0 {
            return;
        }
        changes.evicted.reserve(excess);
        let first = changes.evicted.len();
        for _ in 0..excess {
            let r = self
                .lru
                .pop()
                .expect("available blocks were counted before evicting");
            if !r.unlisted {
                self.index.remove(r.block, r.slot);
                if let Some((held_by, worker)) = &self.held_by {
                    held_by.borrow_mut().remove(r.block, *worker);
                }
            }
            self.named -= 1;
            self.free_slots.push(r.slot);
            changes.evicted.push(r.block);
            if let Some(memory) = &mut self.memory {
                memory.insert(r.block);
                if let Some((held_by, worker)) = &self.held_by {
                    held_by.borrow_mut().lost_one(*worker);
                }
            }
        }
        if let Some(t) = self.tiers.as_mut().filter(|t| !t.write_through()) {
            t.offload(&changes.evicted[first..], self.now, &mut changes.lower);
        }
    }
}

impl super::engine::CachedBlocks for KvPool {
    fn cached_prefix(&self, blocks: &[BlockHash]) -> usize {
        KvPool::cached_prefix(self, blocks)
    }

    fn remembered_prefix(&self, blocks: &[BlockHash]) -> usize {
        KvPool::remembered_prefix(self, blocks)
    }

    fn holds(&self, block: BlockHash) -> bool {
        KvPool::contains(self, block)
    }

    fn remembers(&self, block: BlockHash) -> bool {
        KvPool::remembers(self, block)
    }

    fn lost_recently(&self, block: BlockHash) -> bool {
        KvPool::lost_recently(self, block)
    }

    fn report_to(&mut self, held_by: SharedHeldBy, worker: u32) {
        KvPool::report_to(self, held_by, worker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    fn prompt(prefix: u32, n: usize) -> Vec<BlockHash> {
        block_hashes(
            &(0..n as u32 * 2)
                .map(|t| prefix * 100 + t)
                .collect::<Vec<_>>(),
            2,
        )
    }

    /// Acquires and keeps the slots by the first block's name, for `release` below.
    fn acquire(pool: &mut KvPool, blocks: &[BlockHash], private: usize) -> Changes {
        let mut c = Changes::default();
        let mut held = Vec::new();
        pool.acquire(None, blocks, private, &mut c, &mut held, usize::MAX);
        pool.scratch_held.push((blocks.to_vec(), held));
        c
    }

    /// Releases the blocks of the last acquire of `blocks`.
    fn release(pool: &mut KvPool, blocks: &[BlockHash], private: usize) {
        let at = pool
            .scratch_held
            .iter()
            .rposition(|(b, _)| b == blocks)
            .expect("acquired");
        let (_, held) = pool.scratch_held.remove(at);
        pool.release(&held, private);
    }

    /// The pool's rules written plainly: held blocks with their pins, and the evictable ones in
    /// release order in a list.
    struct Reference {
        cap: usize,
        held: std::collections::HashMap<BlockHash, u32>,
        order: Vec<BlockHash>,
        private: usize,
    }

    impl Reference {
        fn new(cap: usize) -> Self {
            Reference {
                cap,
                held: Default::default(),
                order: Vec::new(),
                private: 0,
            }
        }

        fn acquire(&mut self, blocks: &[BlockHash], private: usize) -> Changes {
            let mut c = Changes::default();
            let mut run: Option<(Option<BlockHash>, Vec<BlockHash>)> = None;
            let mut prev = None;
            for &b in blocks {
                match self.held.get_mut(&b) {
                    Some(pins) => {
                        if *pins == 0 {
                            self.order.retain(|&x| x != b);
                        }
                        *pins += 1;
                        c.stored.extend(run.take());
                    }
                    None => {
                        self.held.insert(b, 1);
                        match &mut run {
                            Some((_, r)) => r.push(b),
                            None => run = Some((prev, vec![b])),
                        }
                    }
                }
                prev = Some(b);
            }
            c.stored.extend(run);
            self.private += private;
            while self.held.len() + self.private > self.cap {
                let b = self.order.remove(0);
                self.held.remove(&b);
                c.evicted.push(b);
            }
            c
        }

        fn release(&mut self, blocks: &[BlockHash], private: usize) {
            self.private -= private;
            for b in blocks.iter().rev() {
                let pins = self.held.get_mut(b).expect("held");
                *pins -= 1;
                if *pins == 0 {
                    self.order.push(*b);
                }
            }
        }
    }

    /// `n` prompts of 1 to `max_blocks` 2-token blocks: blocks 0-1 shared by one of 5 families
    /// (so blocks are pinned again, shared by running requests, and evicted tail first), the
    /// rest of prompt `k` from tokens `own(k) + t`.
    fn family_prompts(n: u32, max_blocks: u32, own: impl Fn(u32) -> u32) -> Vec<Vec<BlockHash>> {
        (0..n)
            .map(|k| {
                let tokens: Vec<u32> = (0..2 * (1 + k % max_blocks))
                    .map(|t| if t < 4 { k % 5 * 1000 + t } else { own(k) + t })
                    .collect();
                block_hashes(&tokens, 2)
            })
            .collect()
    }

    /// Acquires `prompt` in both the pool and the reference if the pool has room, checking
    /// that they report the same changes; returns the pool's slots.
    fn acquire_both(
        pool: &mut KvPool,
        reference: &mut Reference,
        prompt: &[BlockHash],
        private: usize,
        unlisted_from: usize,
    ) -> Option<Vec<u32>> {
        if pool.unpinned_among(prompt, unlisted_from) + private > pool.available() {
            return None;
        }
        let mut c = Changes::default();
        let mut held = Vec::new();
        pool.acquire(None, prompt, private, &mut c, &mut held, unlisted_from);
        // The reference lists everything; the pool reports the own tail it stored unlisted.
        let mut want = reference.acquire(prompt, private);
        want.own_tail = prompt.len().saturating_sub(unlisted_from);
        assert_eq!(c, want);
        Some(held)
    }

    /// Checks the pool's counts (and, if `names`, its named blocks) against the reference.
    fn assert_agrees(pool: &KvPool, reference: &Reference, names: bool) {
        assert_eq!(pool.named(), reference.held.len());
        assert_eq!(
            pool.active(),
            reference.held.values().filter(|&&p| p > 0).count() + reference.private
        );
        if names {
            let mut want: Vec<BlockHash> = reference.held.keys().copied().collect();
            want.sort_unstable();
            assert_eq!(pool.named_blocks(), want);
        }
    }

    #[test]
    fn agrees_with_a_plain_reference_through_random_acquires_and_releases() {
        use rand::{Rng, SeedableRng};
        for seed in 0..4u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let cap = 10 + 10 * seed as usize;
            let mut pool = KvPool::new(Some(cap), false);
            let mut reference = Reference::new(cap);
            let prompts = family_prompts(40, 6, |k| k * 1000);
            let mut running: Vec<(usize, usize, Vec<u32>)> = Vec::new();
            for _ in 0..20_000 {
                if running.is_empty() || rng.gen_bool(0.5) {
                    let k = rng.gen_range(0..prompts.len());
                    let private = rng.gen_range(0..3);
                    let prompt = &prompts[k];
                    if let Some(held) =
                        acquire_both(&mut pool, &mut reference, prompt, private, usize::MAX)
                    {
                        running.push((k, private, held));
                    }
                } else {
                    let (k, private, held) = running.swap_remove(rng.gen_range(0..running.len()));
                    pool.release(&held, private);
                    reference.release(&prompts[k], private);
                }
                assert_agrees(&pool, &reference, false);
            }
            assert_agrees(&pool, &reference, true);
        }
    }

    #[test]
    fn own_tails_kept_out_of_the_table_change_nothing_the_reference_sees() {
        use rand::{Rng, SeedableRng};
        // Each prompt is one request's: blocks 0-1 shared by its family, the rest its own tail.
        // The scheduler's protocol: the first run stores the tail unlisted; a run that finishes
        // retires the request; one that is preempted lists its tail first and runs listed from
        // then on. The plain reference lists everything.
        #[derive(Clone, Copy, PartialEq)]
        enum State {
            Fresh,
            Unlisted,
            Listed,
            Retired,
        }
        for seed in 0..6u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let cap = 12 + 6 * seed as usize;
            let mut pool = KvPool::new(Some(cap), false);
            let mut reference = Reference::new(cap);
            let prompts = family_prompts(300, 7, |k| (k + 1) * 10_000);
            let mut state = vec![State::Fresh; prompts.len()];
            let mut running: Vec<(usize, usize, Vec<u32>)> = Vec::new();
            let mut unlisted_runs = 0;
            for step in 0..20_000 {
                if running.is_empty() || rng.gen_bool(0.5) {
                    let k = rng.gen_range(0..prompts.len());
                    let unlisted_from = match state[k] {
                        State::Fresh => 2,
                        State::Listed => usize::MAX,
                        State::Unlisted | State::Retired => continue,
                    };
                    let private = rng.gen_range(0..3);
                    let prompt = &prompts[k];
                    let Some(held) =
                        acquire_both(&mut pool, &mut reference, prompt, private, unlisted_from)
                    else {
                        continue;
                    };
                    unlisted_runs += usize::from(unlisted_from < prompt.len());
                    if state[k] == State::Fresh {
                        state[k] = State::Unlisted;
                    }
                    running.push((k, private, held));
                } else {
                    let (k, private, held) = running.swap_remove(rng.gen_range(0..running.len()));
                    if state[k] == State::Unlisted {
                        if rng.gen_bool(0.5) {
                            state[k] = State::Retired;
                        } else {
                            pool.list(&held);
                            state[k] = State::Listed;
                        }
                    }
                    pool.release(&held, private);
                    reference.release(&prompts[k], private);
                }
                assert_agrees(&pool, &reference, step % 97 == 0);
            }
            assert!(
                unlisted_runs > 50,
                "seed {seed}: {unlisted_runs} runs with an own tail"
            );
        }
    }

    #[test]
    fn unbounded_pool_keeps_everything_and_reports_new_blocks_once() {
        let mut p = KvPool::new(None, true);
        let a = prompt(1, 4);
        assert_eq!(acquire(&mut p, &a, 1).stored, vec![(None, a.clone())]);
        release(&mut p, &a, 1);
        assert_eq!(p.cached_prefix(&a), 4);
        assert!(
            acquire(&mut p, &a, 0).stored.is_empty(),
            "held: pinned, not stored"
        );
        assert_eq!((p.pinned(), p.private()), (4, 0));
    }

    #[test]
    fn evicts_the_block_released_longest_ago_leaves_first() {
        let mut p = KvPool::new(Some(4), true);
        let (a, b) = (prompt(1, 2), prompt(2, 2));
        acquire(&mut p, &a, 0);
        acquire(&mut p, &b, 0);
        release(&mut p, &b, 0); // b is released first, though admitted second
        release(&mut p, &a, 0);
        let c = acquire(&mut p, &prompt(3, 2), 0);
        assert_eq!(c.evicted, vec![b[1], b[0]], "b's tail, then its head");
        assert!(p.contains(a[0]) && p.contains(a[1]));
    }

    #[test]
    fn never_evicts_a_block_whose_descendant_stays() {
        let mut p = KvPool::new(Some(3), true);
        let a = prompt(1, 3);
        acquire(&mut p, &a, 0);
        release(&mut p, &a, 0);
        let c = acquire(&mut p, &prompt(2, 1), 0);
        assert_eq!(c.evicted, vec![a[2]]);
        assert_eq!(p.cached_prefix(&a), 2);
    }

    #[test]
    fn free_capacity_is_used_before_anything_is_evicted() {
        let mut p = KvPool::new(Some(5), true);
        let a = prompt(1, 2);
        acquire(&mut p, &a, 0);
        release(&mut p, &a, 0);
        let c = acquire(&mut p, &prompt(2, 1), 2);
        assert!(c.evicted.is_empty(), "3 free blocks cover 3 needed");
        assert_eq!((p.named(), p.private(), p.available()), (3, 2, 2));
        let c = acquire(&mut p, &[], 1);
        assert_eq!(c.evicted, vec![a[1]], "the tail released first goes first");
        assert!(
            p.remembers(a[1]) && !p.contains(a[1]),
            "evicted, remembered"
        );
    }

    #[test]
    fn private_and_pinned_blocks_count_against_capacity() {
        let mut p = KvPool::new(Some(4), true);
        let a = prompt(1, 3);
        acquire(&mut p, &a, 1);
        assert_eq!(p.available(), 0);
        assert_eq!(p.unpinned_among(&a, usize::MAX), 0);
        release(&mut p, &a, 1);
        assert_eq!(p.available(), 4);
        assert_eq!(
            p.unpinned_among(&a, usize::MAX),
            3,
            "cached but evictable: pinning takes them"
        );
        assert_eq!(p.peak_active(), 4);
    }

    #[test]
    fn blocks_held_in_the_middle_split_the_stored_runs() {
        let mut p = KvPool::new(None, true);
        let a = prompt(1, 4);
        acquire(&mut p, &a[1..2], 0); // as if computed by another request under another parent
        let mut c = Changes::default();
        p.acquire(None, &a, 0, &mut c, &mut Vec::new(), usize::MAX);
        assert_eq!(
            c.stored,
            vec![(None, vec![a[0]]), (Some(a[1]), vec![a[2], a[3]])]
        );
    }

    #[test]
    fn evicted_blocks_are_remembered_and_held_again_when_stored() {
        let mut p = KvPool::new(Some(2), true);
        let a = prompt(1, 2);
        acquire(&mut p, &a, 0);
        release(&mut p, &a, 0);
        let b = prompt(2, 2);
        assert_eq!(acquire(&mut p, &b, 0).evicted, vec![a[1], a[0]]);
        release(&mut p, &b, 0);
        assert_eq!((p.remembered_prefix(&a), p.cached_prefix(&a)), (2, 0));
        let c = acquire(&mut p, &a, 0);
        assert_eq!(c.stored, vec![(None, a.clone())]);
        assert_eq!(p.cached_prefix(&a), 2);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut p = KvPool::new(Some(8), true);
        acquire(&mut p, &prompt(1, 3), 2);
        assert_eq!(p.clear(), 3);
        assert_eq!((p.named(), p.active()), (0, 0));
    }
}
