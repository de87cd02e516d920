//! The engine interface: what the worker actor drives, whatever engine its worker runs.
//!
//! An engine is a pure step scheduler over a KV pool (no channels, no clock: times come in as
//! arguments). The actor queues requests into it ([`Engine::enqueue`]), asks it to plan the next
//! forward pass ([`Engine::plan`]: what it admits, stores, evicts and when the pass ends), ends
//! the pass at that time ([`Engine::apply`]: tokens, first tokens, completions), cuts a planned
//! decode stretch when a message arrives ([`Engine::truncate`]) and drains it on a fault. It
//! reads the engine's load signals for the routers, its counters for the report, and hands the
//! run's ground truth a read-only view of its device cache ([`CacheView`]).
//!
//! Each engine lives in its own folder with its own rules: [`vllm`](super::vllm), vLLM v1's
//! step scheduler (running requests first, chunked prefill, preemption by recomputation),
//! [`trtllm`](super::trtllm), TensorRT-LLM's default capacity scheduler on vLLM's step loop
//! (each admitted request's KV reserved through its completion, never evicted), and
//! [`sglang`](super::sglang), SGLang's scheduler on the same loop (prefill batches first,
//! admission against a reserve of future output, retraction when decode runs out of KV).
//!
//! What engines share lives beside this file: a request's state ([`Seq`]), the block pool with
//! its prefix lookup, pins and eviction ([`kv`](super::kv)), what a plan tells the actor
//! ([`plan`](super::plan)) and step times ([`timing`](super::timing)). Adding an engine is a
//! folder, a variant of [`EngineRules`](super::engines::EngineRules) and a line in
//! [`build`](super::engines::build): no actor, bus or router code changes. This file names no
//! engine: the engines depend on it, never the other way round.

use std::cell::RefCell;
use std::rc::Rc;

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::ids::RequestId;
use crate::protocol::kv_event::Tier;
use crate::protocol::signals::WorkerSignals;
use crate::sketch::SharedHistogram;

use super::held_by::SharedHeldBy;
use super::kv::KvPool;
use super::plan::{Applied, Planned};
use super::probe::FeatureTotals;
use super::seq::Seq;
use super::tiers::{TierBytes, TiersSetup};
use super::timing::TimingModel;

/// A worker's engine: a step scheduler over its KV blocks, for requests carrying the actor's
/// data `T`.
pub trait Engine<T> {
    /// Tokens per KV block.
    fn block_size(&self) -> usize;
    /// Queues a request at the back of the waiting queue.
    fn enqueue(&mut self, seq: Seq<T>);
    /// Request `id` joined the queue at `now` (for the feature clock, when there is one).
    fn note_joined(&mut self, id: RequestId, now: Nanos);
    /// Plans the next step (or decode stretch) starting at `now`; `None` when nothing can run
    /// now. Call [`Engine::apply`] at [`Planned::end`].
    fn plan(&mut self, now: Nanos) -> Option<Planned<T>>;
    /// Steps of the planned step or stretch begun by `now`: the ones that ended before it and
    /// the one in progress (0 when none is planned).
    fn steps_begun(&self, now: Nanos) -> u32;
    /// Cuts a planned decode stretch at the end of the step in progress at `now` (a message
    /// arrived). Returns the new end if it moved.
    fn truncate(&mut self, now: Nanos) -> Option<Nanos>;
    /// Ends the planned step (or stretch): its tokens, first tokens and completions.
    fn apply(&mut self) -> Applied<T>;
    /// Takes every request out (the worker went down at `now`) and empties the device cache.
    fn drain(&mut self, now: Nanos) -> Vec<Seq<T>>;
    /// Whether a step is planned and not yet applied.
    fn in_step(&self) -> bool;
    /// Whether any request is waiting or running.
    fn has_work(&self) -> bool;
    /// The running request `id`.
    fn running_mut(&mut self, id: RequestId) -> Option<&mut Seq<T>>;
    /// The running request `id`, read only.
    fn running_seq(&self, id: RequestId) -> Option<&Seq<T>>;
    /// The worker's load signals now.
    fn signals(&self) -> WorkerSignals;
    /// The counters.
    fn stats(&self) -> SchedulerStats;
    /// The device cache's levels now.
    fn kv(&self) -> KvLevels;
    /// A read-only view of the device cache, for the ground truth of loss attribution.
    fn cache(&self) -> CacheView;
    /// Every named block on the device, in increasing order of name (a snapshot for a
    /// router).
    fn snapshot(&self) -> Vec<BlockHash>;
    /// Every block on each lower tier (host, then disk), each in increasing order of name
    /// (empty without tiers): the rest of a snapshot for a router.
    fn lower_snapshot(&self) -> Vec<(Tier, Vec<BlockHash>)>;
    /// What the feature clock found, when there is one.
    fn feature_totals(&self) -> Option<&FeatureTotals>;
}

/// A scheduler's counters (every engine's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Steps run.
    pub steps: u64,
    /// Tokens scheduled over all steps.
    pub batch_tokens: u64,
    /// Running requests preempted (their KV freed, to be recomputed).
    pub preemptions: u64,
    /// Time with a step running, ns.
    pub busy_ns: Nanos,
    /// Requests rejected.
    pub rejected: u64,
}

/// A device cache's levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvLevels {
    /// Capacity in blocks (`None`: unbounded).
    pub capacity: Option<usize>,
    /// Blocks running requests hold now.
    pub active: usize,
    /// The most blocks running requests held at once.
    pub peak_active: usize,
    /// Blocks resident (held or cached).
    pub resident: usize,
    /// Bytes the lower tiers moved (`None`: no tiers).
    pub tier_bytes: Option<TierBytes>,
}

impl KvLevels {
    /// The levels of `pool`.
    pub fn of(pool: &KvPool) -> Self {
        KvLevels {
            capacity: pool.capacity(),
            active: pool.active(),
            peak_active: pool.peak_active(),
            resident: pool.named() + pool.private(),
            tier_bytes: pool.tiers().map(|t| t.bytes()),
        }
    }
}

/// What the ground truth may ask of a device cache: which blocks it holds, and which it held
/// not long ago (implemented by the shared pool, [`KvPool`]).
pub trait CachedBlocks {
    /// Blocks of `blocks` held, counted from the front.
    fn cached_prefix(&self, blocks: &[BlockHash]) -> usize;
    /// Blocks of `blocks` held or remembered (lost not long ago), counted from the front.
    fn remembered_prefix(&self, blocks: &[BlockHash]) -> usize;
    /// Whether `block` is held.
    fn holds(&self, block: BlockHash) -> bool;
    /// Whether `block` is held or remembered.
    fn remembers(&self, block: BlockHash) -> bool;
    /// Whether `block` is remembered as lost (the memory alone).
    fn lost_recently(&self, block: BlockHash) -> bool;
    /// Reports every block listed from now on to the truth's table of holders, as `worker`.
    fn report_to(&mut self, held_by: SharedHeldBy, worker: u32);
}

/// A read-only view of one worker's device cache, shared with its engine (one simulation runs on
/// one thread; the view only reads).
#[derive(Clone)]
pub struct CacheView(Rc<RefCell<dyn CachedBlocks>>);

impl CacheView {
    /// A view of `pool`.
    pub fn of(pool: Rc<RefCell<KvPool>>) -> Self {
        CacheView(pool)
    }

    /// Blocks of `blocks` held, counted from the front.
    pub fn cached_prefix(&self, blocks: &[BlockHash]) -> usize {
        self.0.borrow().cached_prefix(blocks)
    }

    /// Blocks of `blocks` held or remembered, counted from the front.
    pub fn remembered_prefix(&self, blocks: &[BlockHash]) -> usize {
        self.0.borrow().remembered_prefix(blocks)
    }

    /// Whether `block` is held.
    pub fn holds(&self, block: BlockHash) -> bool {
        self.0.borrow().holds(block)
    }

    /// Whether `block` is held or remembered.
    pub fn remembers(&self, block: BlockHash) -> bool {
        self.0.borrow().remembers(block)
    }

    /// Whether `block` is remembered as lost (the memory alone).
    pub fn lost_recently(&self, block: BlockHash) -> bool {
        self.0.borrow().lost_recently(block)
    }

    /// Has the cache report what it holds to the truth's table of holders, as `worker` (the one
    /// thing done through the view that is not a read: the pool keeps the table current).
    pub fn report_to(&self, held_by: SharedHeldBy, worker: u32) {
        self.0.borrow_mut().report_to(held_by, worker);
    }
}

/// What every engine is built from, whichever it is (its own rules are
/// [`EngineRules`](super::engines::EngineRules)).
#[derive(Clone, Debug)]
pub struct EngineSetup {
    /// Tokens per KV block.
    pub block_size: usize,
    /// KV capacity in blocks (`None`: unbounded).
    pub kv_capacity: Option<usize>,
    /// A disaggregated prefill worker: a request leaves when its prompt is computed.
    pub prefill_only: bool,
    /// Whether misses are attributed: the pool remembers the blocks it lost (see [`KvPool`]).
    pub attribute_misses: bool,
    /// Whether every block of a request stays in the pool's name table, its own tail too
    /// ([`KvPool`]'s unlisted blocks): when misses are attributed and a request may be routed
    /// twice (faults, or workers removed by scaling), so that a handed-back request's other
    /// workers are seen holding its tail.
    pub list_own_tails: bool,
    /// Step durations.
    pub timing: TimingModel,
    /// The longest request the server accepts, prompt and output tokens (`None`: any).
    pub max_model_len: Option<u64>,
    /// Keep a feature clock beside time, under a roofline (for `calibrate`).
    pub record_features: bool,
    /// The host and disk tiers below the device (`None`: none; [`tiers`](super::tiers)).
    pub tiers: Option<TiersSetup>,
    /// Where it adds the gaps between consecutive tokens of its requests, ns: the cluster's one
    /// histogram, which every worker's engine shares.
    pub itl: SharedHistogram,
}

/// The pool answers the ground truth's questions from its own lookups.
impl CachedBlocks for KvPool {
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
