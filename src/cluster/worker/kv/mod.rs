//! A worker's KV blocks: which named (prefix-cacheable) blocks it holds, which of those running
//! requests pin, how many anonymous blocks requests hold besides, and what it evicts for room.
//!
//! - **Named blocks** are full prompt blocks with a block name: prefix caching finds them and KV
//!   events report them. A block is pinned while a running request uses it; unpinned, it stays
//!   cached and becomes evictable.
//! - **Private blocks** are every other block a request holds: the partial last block of a
//!   prompt, a named block still being computed, and the blocks its generated tokens fill. They
//!   are freed when the request completes or is preempted, but for the full blocks of a finished
//!   request's answer that the next turn of its session names
//!   ([`RequestSpec::answer_blocks`](crate::workload::RequestSpec::answer_blocks)): those become
//!   named blocks, stored and released before the prompt's, as vLLM caches a request's full
//!   blocks generated tokens included and frees them last first. Nothing else could name an
//!   answer's blocks (a trace gives no output's tokens).
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
//!   like) do not see unlisted blocks; loss attribution asks only about the routed request's
//!   blocks, whose own tail no worker holds before its first routing, so it runs with every
//!   block listed only when a request may be routed twice (faults, workers removed: see
//!   [`EngineSetup::list_own_tails`](super::engine::EngineSetup::list_own_tails)).
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
use std::collections::HashSet;
use std::rc::Rc;

use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;

use crate::engine::Nanos;

use super::evicted::EvictionMemory;
use super::held_by::SharedHeldBy;
use super::lru::{ReleaseQueue, Released};
use super::names::{NameTable, Probe};
use super::tiers::{TierMove, Tiers};

mod lower;
#[cfg(test)]
mod tests;

use lower::Through;

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
    /// The ground truth's table of holders, told of every block put in or taken out of the name
    /// table here (unlisted blocks are not), with this pool's worker number (`None`: no truth
    /// reads this pool).
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
    /// Whether a fence stands ([`KvPool::fence`]).
    fenced: bool,
    /// While a fence stands, the names stored since it was put up: blocks that a step being
    /// planned will compute, which [`KvPool::cached_prefix`] does not count (kept between
    /// fences for its allocation).
    fresh: HashSet<BlockHash, BlockHashBuilder>,
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
            fenced: false,
            fresh: HashSet::default(),
            #[cfg(test)]
            scratch_held: Vec::new(),
        }
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

    /// Blocks of `blocks` held, counted from the front; while a fence stands, not counting those
    /// stored since it went up ([`KvPool::fence`]).
    pub fn cached_prefix(&self, blocks: &[BlockHash]) -> usize {
        if self.fenced {
            blocks
                .iter()
                .take_while(|b| self.contains(**b) && !self.fresh.contains(*b))
                .count()
        } else {
            blocks.iter().take_while(|b| self.contains(**b)).count()
        }
    }

    /// Puts up a fence: until [`KvPool::unfence`], blocks stored from now on are not part of
    /// any cached prefix. SGLang plans a prefill batch against its radix tree as it stood before
    /// the batch, and a request's pages enter the tree only after the forward pass computed
    /// them (`process_batch_result_prefill` → `cache_unfinished_req`), so two requests of one
    /// batch with the same prefix each compute it. vLLM v1 shares blocks within a step, and
    /// puts up no fence.
    pub fn fence(&mut self) {
        self.fenced = true;
        self.fresh.clear();
    }

    /// Counts `blocks`, stored behind the fence, in cached prefixes after all: their KV is
    /// whole before the step computes anything (blocks loaded back from a lower tier; SGLang
    /// loads a host prefix back when it admits the request, and a later request of the batch
    /// matches the device copy).
    pub fn ready(&mut self, blocks: &[BlockHash]) {
        if self.fenced {
            for b in blocks {
                self.fresh.remove(b);
            }
        }
    }

    /// Takes the fence down: every held block counts again.
    pub fn unfence(&mut self) {
        self.fenced = false;
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
                        // (An own tail, unlisted, no other request looks up.)
                        if self.fenced {
                            self.fresh.insert(b);
                        }
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
        if let Some(t) = self.tiers.as_mut() {
            if !t.write_through() {
                t.offload(&changes.evicted[first..], self.now, &mut changes.lower);
            }
            t.forget_hits(&changes.evicted[first..]);
        }
    }
}
