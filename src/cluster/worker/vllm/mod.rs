//! The vLLM engine: a worker's step scheduler after vLLM's v1 scheduler as Dynamo's mocker models it
//! (`aisimulate-core` 0.13, `engine/scheduler/vllm/core.rs`, `execute_pass_internal`): pure, no
//! channels and no clock (times come in as arguments).
//!
//! Each step (a forward pass) schedules, within `max_num_batched_tokens` and `max_num_seqs`:
//!
//! 1. the running requests, in admission order: one token each for a decoding request, the next
//!    chunk (as much as the budget left allows) of a prompt still in prefill. A request that
//!    cannot get a KV block for it preempts: LIFO takes the most recently admitted running
//!    request (possibly itself), FIFO the earliest; the victim frees every block, forgets its
//!    computed tokens and goes back to the front of the waiting queue, to be recomputed;
//! 2. then, unless the step preempted, waiting requests in FIFO order while the budget, the
//!    sequence limit and free KV blocks allow. A request's cached prefix is looked up when it is
//!    admitted and capped one token short of its sequence (the last token is always computed);
//!    with `chunked_prefill = false` a prompt is only scheduled whole. The head that does not fit
//!    stops admission for the step (nothing behind it is tried).
//!
//! A step that brings a request's computed tokens to its prompt plus generated tokens produces
//! one token at the step's end: the first token at the end of the step that computes the last
//! prompt token, then one per step. KV is committed when the step is scheduled (blocks a step
//! computes are cached at once, visible to requests scheduled after them), tokens when it ends.
//!
//! **Decode stretches.** A step that only decodes, with nothing admitted, repeats identically
//! until a request finishes, one crosses into a block the pool cannot give, or a message arrives:
//! such a stretch of up to `block_size` steps is planned at once (each step's duration from its
//! own KV fraction), so a decode-only stretch costs one event, not one per step. Blocks the
//! stretch will fill are taken when it is planned (at most one per running request, evicting the
//! least recently released if needed); a message that arrives mid-stretch cuts it at the end of
//! the step in progress ([`StepScheduler::truncate`]), which keeps those blocks (what that
//! changes against planning each step alone, `decode_stretches = false`: docs/FIDELITY.md).
//!
//! Where dynsim differs from the mocker (on purpose, documented in docs/FIDELITY.md): blocks
//! filled by generated tokens are private (freed at completion, never cached, but for a
//! synthetic session turn's answer, which the next turn names: `StepScheduler::keep_answer`); a
//! block computed again by a request whose lookup missed it shares the cached copy instead of
//! holding a duplicate; a request whose whole sequence cannot fit in the worker's KV is rejected (the
//! mocker rejects on the prompt alone); the admission gate is vLLM's (the first chunk's blocks)
//! unless `admission = "whole-prompt"` asks for the mocker's (the whole sequence's).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use crate::engine::Nanos;
use crate::ids::RequestId;
use crate::protocol::signals::WorkerSignals;
use crate::sketch::{LogHistogram, SharedHistogram};

use crate::hash::BlockHash;
use crate::protocol::kv_event::Tier;

use super::engine::{CacheView, Engine, EngineSetup, KvLevels, SchedulerStats};
use super::kv::{Changes, KvPool, SharedPool};
use super::plan::{Admit, Work};
pub use super::plan::{Applied, LogItem, Planned};
use super::probe::{FeatureClock, FeatureTotals};
use super::seq::{Seq, SeqKind};
use super::sglang::rules::SglangRules;
use super::tiers::TiersSetup;
use super::timing::{StepWork, TimingModel};

mod admit;
mod stretch;
#[cfg(test)]
pub(super) mod tests;
#[cfg(test)]
mod tier_tests;

/// Which running request a preemption evicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preemption {
    /// The most recently admitted (vLLM's, the default).
    Lifo,
    /// The earliest admitted.
    Fifo,
}

/// What a waiting request needs free to be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The blocks of its first chunk (vLLM's `allocate_slots`).
    Chunk,
    /// The blocks of its whole known sequence, less cached blocks other requests hold (Dynamo's
    /// mocker).
    WholePrompt,
    /// The blocks to run it to completion, less cached blocks other requests hold, beside the
    /// completion of every running request (TensorRT-LLM's `GUARANTEED_NO_EVICT`: see
    /// [`trtllm`](super::trtllm)). Nothing is ever preempted.
    ToCompletion,
}

/// A scheduler's settings.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// Tokens per KV block.
    pub block_size: usize,
    /// KV capacity in blocks (`None`: unbounded).
    pub kv_capacity: Option<usize>,
    /// Running requests at most (`None`: unbounded).
    pub max_num_seqs: Option<usize>,
    /// Tokens scheduled per step at most (`None`: unbounded).
    pub max_num_batched_tokens: Option<usize>,
    /// Whether a prompt may be computed over several steps.
    pub chunked_prefill: bool,
    /// The preemption victim.
    pub preemption: Preemption,
    /// The admission gate.
    pub admission: Admission,
    /// A disaggregated prefill worker: a request leaves when its prompt is computed.
    pub prefill_only: bool,
    /// Whether misses are attributed: the KV pool remembers the blocks it lost and admission
    /// looks them up ([`FirstAdmission::remembered_blocks`](super::seq::FirstAdmission)).
    pub attribute_misses: bool,
    /// Whether every block stays in the pool's name table
    /// ([`EngineSetup::list_own_tails`]). Otherwise a request's own tail (its blocks no other
    /// request names) stays out of the table until the request could look it up again: only
    /// that request names it, so no lookup notices, loss attribution's included (it asks about
    /// the routed request's blocks, which no worker holds before the request is first routed).
    pub list_own_tails: bool,
    /// Whether an identical run of decode-only steps is planned at once (a decode stretch).
    pub decode_stretches: bool,
    /// Step durations.
    pub timing: TimingModel,
    /// The longest request the server accepts, prompt and output tokens (`None`: any); longer
    /// ones are refused (a deployment's `max_model_len`).
    pub max_model_len: Option<u64>,
    /// Keep a feature clock ([`FeatureClock`]) beside time, under a roofline (for
    /// `calibrate`).
    pub record_features: bool,
    /// SGLang's scheduler in place of vLLM's step rules (see [`sglang`](super::sglang)): its
    /// prefill and decode batches, admission and retraction on this step loop.
    pub sglang: Option<SglangRules>,
}

/// The vLLM engine's own rules (`[engine.vllm]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VllmRules {
    /// Running requests at most (`None`: unbounded).
    pub max_num_seqs: Option<usize>,
    /// Tokens scheduled per step at most (`None`: unbounded).
    pub max_num_batched_tokens: Option<usize>,
    /// Whether a prompt may be computed over several steps.
    pub chunked_prefill: bool,
    /// The preemption victim.
    pub preemption: Preemption,
    /// The admission gate.
    pub admission: Admission,
    /// Whether an identical run of decode-only steps is planned at once.
    pub decode_stretches: bool,
}

impl SchedulerConfig {
    /// The step loop's settings for an engine built from `setup` with `rules` (vLLM's own;
    /// TensorRT-LLM and SGLang map theirs onto them).
    pub fn of(setup: &EngineSetup, rules: &VllmRules) -> Self {
        SchedulerConfig {
            block_size: setup.block_size,
            kv_capacity: setup.kv_capacity,
            max_num_seqs: rules.max_num_seqs,
            max_num_batched_tokens: rules.max_num_batched_tokens,
            chunked_prefill: rules.chunked_prefill,
            preemption: rules.preemption,
            admission: rules.admission,
            prefill_only: setup.prefill_only,
            attribute_misses: setup.attribute_misses,
            list_own_tails: setup.list_own_tails,
            decode_stretches: rules.decode_stretches,
            timing: setup.timing.clone(),
            max_model_len: setup.max_model_len,
            record_features: setup.record_features,
            sglang: None,
        }
    }
}

#[derive(Debug)]
struct Plan {
    ends: Vec<Nanos>,
    work: Vec<Work>,
    /// A decode stretch: every running request decodes in every step.
    stretch: bool,
}

/// A worker's step scheduler over requests carrying `T`.
pub struct StepScheduler<T> {
    pub(super) cfg: SchedulerConfig,
    pub(super) pool: SharedPool,
    pub(super) waiting: VecDeque<Seq<T>>,
    pub(super) running: VecDeque<Seq<T>>,
    plan: Option<Plan>,
    pub(super) stats: SchedulerStats,
    /// Where it adds the gaps between consecutive tokens of a request, ns (its own, or the
    /// cluster's: [`StepScheduler::with_itl`]).
    itl: SharedHistogram,
    /// Buffers kept for their allocations: a spent plan's, and the stretch's block crossings.
    spare: Option<Plan>,
    pub(super) crossings: Vec<(u64, usize)>,
    /// Prompt tokens of the waiting requests.
    waiting_tokens: u64,
    /// The feature clock, when asked for under a roofline.
    probe: Option<Box<FeatureClock>>,
    /// SGLang's `new_token_ratio` (under [`SchedulerConfig::sglang`]).
    pub(super) new_token_ratio: f64,
    /// Whether the pool has lower tiers (admission then loads from them).
    pub(super) tiered: bool,
    /// When the loads of the step being planned end (its start, at the earliest).
    pub(super) loads_done: Nanos,
    /// Whether the step being planned admits nobody: set when a running request gave way
    /// ([`StepScheduler::unstick`]), so that the blocks it freed go to the requests left
    /// running rather than to a waiting one that would take them back.
    pub(super) admission_held: bool,
}

impl<T> StepScheduler<T> {
    /// An idle scheduler with an empty KV pool.
    pub fn new(cfg: SchedulerConfig) -> Self {
        let probe = (cfg.record_features && cfg.timing.roofline().is_some()).then(Box::default);
        let new_token_ratio = cfg
            .sglang
            .as_ref()
            .map_or(0.0, SglangRules::init_new_token_ratio);
        StepScheduler {
            pool: Rc::new(RefCell::new(KvPool::new(
                cfg.kv_capacity,
                cfg.attribute_misses,
            ))),
            cfg,
            waiting: VecDeque::new(),
            running: VecDeque::new(),
            plan: None,
            stats: SchedulerStats::default(),
            itl: SharedHistogram::default(),
            spare: None,
            crossings: Vec::new(),
            waiting_tokens: 0,
            probe,
            new_token_ratio,
            tiered: false,
            loads_done: 0,
            admission_held: false,
        }
    }

    /// The scheduler with lower tiers below its pool, as `setup` describes them (`None`:
    /// none). Call before anything is queued.
    pub fn with_tiers(mut self, setup: Option<&TiersSetup>) -> Self {
        if let Some(setup) = setup {
            debug_assert!(!self.has_work() && self.pool.borrow().named() == 0);
            self.pool = Rc::new(RefCell::new(
                KvPool::new(self.cfg.kv_capacity, self.cfg.attribute_misses)
                    .with_tiers(Some(setup)),
            ));
            self.tiered = true;
        }
        self
    }

    /// The settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// The KV pool.
    pub fn pool(&self) -> std::cell::Ref<'_, KvPool> {
        self.pool.borrow()
    }

    /// The counters.
    pub fn stats(&self) -> SchedulerStats {
        self.stats
    }

    /// Gaps between consecutive tokens of a request, ns (of every engine sharing its histogram).
    pub fn itl(&self) -> std::cell::Ref<'_, LogHistogram> {
        self.itl.borrow()
    }

    /// Adds its gaps between tokens to `itl` (shared with other engines) instead of its own.
    pub fn with_itl(mut self, itl: SharedHistogram) -> Self {
        debug_assert!(self.itl.borrow().count() == 0, "before any token");
        self.itl = itl;
        self
    }

    /// Requests waiting to be admitted.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Requests running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// The worker's load signals now: queue lengths, prompt tokens still to compute, KV in use.
    pub fn signals(&self) -> WorkerSignals {
        let pool = self.pool.borrow();
        let running_tokens: u64 = self
            .running
            .iter()
            .map(|s| s.prompt - s.computed.min(s.prompt))
            .sum();
        WorkerSignals {
            waiting: self.waiting.len() as u32,
            running: self.running.len() as u32,
            prefill_tokens: self.waiting_tokens + running_tokens,
            decode_blocks: pool.active() as u64,
            kv_usage: pool
                .capacity()
                .map_or(0.0, |c| pool.active() as f64 / c as f64),
        }
    }

    /// Takes the head of the waiting queue.
    pub(super) fn pop_waiting(&mut self) -> Seq<T> {
        let s = self.waiting.pop_front().expect("checked non-empty");
        self.waiting_tokens -= s.waiting_prompt_tokens();
        s
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// Whether a step is planned and not yet applied.
    pub fn in_step(&self) -> bool {
        self.plan.is_some()
    }

    /// Queues a request at the back of the waiting queue.
    pub fn enqueue(&mut self, mut seq: Seq<T>) {
        if self.cfg.list_own_tails {
            seq.list_every_block();
        }
        self.waiting_tokens += seq.waiting_prompt_tokens();
        self.waiting.push_back(seq);
    }

    /// The running request `id` (for the actor to annotate an admission).
    pub fn running_mut(&mut self, id: RequestId) -> Option<&mut Seq<T>> {
        self.running.iter_mut().rev().find(|s| s.id() == id)
    }

    /// The running request `id`, if it runs.
    pub fn running_seq(&self, id: RequestId) -> Option<&Seq<T>> {
        self.running.iter().rev().find(|s| s.id() == id)
    }

    /// Plans the next step starting at `now`; `None` when there is nothing to run. Call
    /// [`StepScheduler::apply`] at [`Planned::end`].
    pub fn plan(&mut self, now: Nanos) -> Option<Planned<T>> {
        debug_assert!(self.plan.is_none(), "one step at a time");
        let mut out = Planned {
            end: now,
            first_end: now,
            steps: 0,
            batch: 0,
            prefill_tokens: 0,
            decode_tokens: 0,
            log: Vec::new(),
            rejected: Vec::new(),
        };
        if self.tiered {
            self.pool.borrow_mut().set_now(now);
            self.loads_done = now;
        }
        let (mut work, mut ends) = match self.spare.take() {
            Some(p) => (p.work, p.ends),
            None => (Vec::new(), Vec::new()),
        };
        // The net below frees at most every request that was running when the step began.
        let mut may_give_way = self.running.len();
        self.admission_held = false;
        let (preempted, admitted) = loop {
            work.clear();
            let (preempted, admitted) = self.schedule(now, &mut out, &mut work);
            // A step whose every request was preempted computes nothing: schedule again (the
            // waiting queue is admitted next, as in the step that would follow at once).
            if work.is_empty() && preempted && self.has_work() {
                continue;
            }
            if work.is_empty() && !preempted && !self.running.is_empty() && may_give_way > 0 {
                // No running request can take a step and none gave way: the worker would wait
                // forever (SGLang's retraction frees only decoding requests and keeps the last
                // one, so a decoding request and a re-prefilling one can hold every block
                // between them). The newest running request gives way, as a retracted one does.
                may_give_way -= 1;
                self.unstick(&mut out);
                continue;
            }
            break (preempted, admitted);
        };
        if self.tiered {
            // A host written through takes the step's stores now, after its lookups.
            let lower = self.pool.borrow_mut().flush_through();
            if !lower.is_empty() {
                out.log.push(LogItem::Kv(Changes {
                    lower,
                    ..Changes::default()
                }));
            }
        }
        if work.is_empty() && self.running.is_empty() && !self.waiting.is_empty() {
            // An idle worker has every block to give: a head it cannot admit never will be.
            // Admission rejects such requests up front; this is the net under that rule.
            debug_assert!(false, "the head of an idle worker's queue can never start");
            let s = self.pop_waiting();
            self.stats.rejected += 1;
            out.rejected.push(s);
        }
        if work.is_empty() {
            return if out.rejected.is_empty() {
                None
            } else {
                Some(out)
            };
        }
        let step = self.step_work(&work);
        let prefill_tokens = step.prefill_tokens;
        let first = self.cfg.timing.step_ns(&step);
        ends.clear();
        // A step that admitted a request loading blocks from a lower tier starts when they
        // have arrived (`loads_done` is `now` otherwise).
        let start = if self.tiered {
            self.loads_done.max(now)
        } else {
            now
        };
        ends.push(start.saturating_add(first));
        let stretch = self.cfg.decode_stretches
            && !admitted
            && !preempted
            && out.rejected.is_empty()
            && work.len() == self.running.len()
            && prefill_tokens == 0
            && self.all_decode_one(&work)
            // SGLang's admission budget moves with every decode step: stretch only when
            // nothing waits.
            && (self.cfg.sglang.is_none() || self.waiting.is_empty());
        if stretch {
            self.extend_stretch(&mut ends, step.decode_kv_tokens, &mut out.log);
        }
        if self.tiered && self.pool.borrow().selective() {
            self.insert_hits(&work, ends.len() as u64, &mut out.log);
        }
        if let Some(probe) = self.probe.as_deref_mut() {
            let r = self
                .cfg
                .timing
                .roofline()
                .expect("a probe runs under a roofline");
            let n = self.running.len() as u64;
            let mut first = Some(r.features(&step));
            let decode = step.decode_kv_tokens;
            let later = (1..ends.len() as u64).map(|k| {
                let w = StepWork {
                    tokens: n,
                    decode_seqs: n,
                    decode_kv_tokens: decode + n * k,
                    seqs: n,
                    sampled: n,
                    ..StepWork::default()
                };
                r.features(&w)
            });
            probe.planned(now, &ends, first.take().into_iter().chain(later));
        }
        let end = *ends.last().expect("at least one step");
        self.stats.busy_ns += end - now;
        out.end = end;
        out.first_end = ends[0];
        out.steps = ends.len() as u32;
        out.batch = work.len() as u32;
        out.prefill_tokens = prefill_tokens;
        out.decode_tokens = work.iter().map(|w| w.tokens).sum::<u64>() - prefill_tokens;
        self.plan = Some(Plan {
            stretch: ends.len() > 1,
            ends,
            work,
        });
        Some(out)
    }

    /// Steps of the planned step or stretch begun by `now` (those that ended before it and the
    /// one in progress; all of them once `now` is past the last; 0 when none is planned).
    pub fn steps_begun(&self, now: Nanos) -> u32 {
        self.plan.as_ref().map_or(0, |p| {
            p.ends
                .iter()
                .position(|&e| e >= now)
                .map_or(p.ends.len(), |i| i + 1) as u32
        })
    }

    /// Cuts a planned decode stretch at the end of the step in progress at `now` (a message
    /// arrived). Returns the new end if it moved.
    pub fn truncate(&mut self, now: Nanos) -> Option<Nanos> {
        let plan = self.plan.as_mut()?;
        let keep = plan.ends.iter().position(|&e| e >= now)? + 1;
        if keep >= plan.ends.len() {
            return None;
        }
        let old = *plan.ends.last().expect("non-empty");
        plan.ends.truncate(keep);
        if let Some(probe) = self.probe.as_deref_mut() {
            probe.truncated(keep);
        }
        let new = plan.ends[keep - 1];
        self.stats.busy_ns -= old - new;
        Some(new)
    }

    /// Ends the planned step (or stretch): commits its computed tokens and produces its tokens,
    /// stamped with each step's end.
    pub fn apply(&mut self) -> Applied<T> {
        let plan = self.plan.take().expect("a planned step");
        let mut out = Applied {
            finished: Vec::new(),
            prefilled: Vec::new(),
            first_tokens: Vec::new(),
            kv: Vec::new(),
        };
        let steps = plan.ends.len() as u64;
        self.stats.steps += steps;
        if plan.stretch {
            let n = self.running.len() as u64;
            self.stats.batch_tokens += n * steps;
            let mut itl = self.itl.borrow_mut();
            for s in &mut self.running {
                let last = s
                    .last_token_ns
                    .expect("a decoding request has produced a token");
                itl.add(plan.ends[0] - last, 1);
                s.computed += steps;
                s.generated += steps;
                s.last_token_ns = Some(*plan.ends.last().expect("non-empty"));
            }
            for w in plan.ends.windows(2) {
                itl.add(w[1] - w[0], n);
            }
            drop(itl);
            self.retire(&mut out);
            self.sglang_applied(steps - 1);
            self.probe_applied(&out);
            self.spare = Some(plan);
            return out;
        }
        let t = plan.ends[0];
        let mut work = plan.work.iter().peekable();
        for s in &mut self.running {
            let Some(w) = work.next_if(|w| w.id == s.id()) else {
                continue;
            };
            self.stats.batch_tokens += w.tokens;
            s.computed += w.tokens;
            if s.computed == s.target() {
                match s.last_token_ns {
                    None => {
                        s.first_token_ns = Some(t);
                        // A transferred request's prefill ended on its prefill worker.
                        if s.hidden == 0 {
                            out.first_tokens.push(s.id());
                        }
                    }
                    Some(last) => self.itl.borrow_mut().add(t - last, 1),
                }
                s.last_token_ns = Some(t);
                s.generated += 1;
            }
        }
        debug_assert!(work.next().is_none(), "work follows the running order");
        self.retire(&mut out);
        self.sglang_applied(0);
        self.probe_applied(&out);
        self.spare = Some(plan);
        out
    }

    /// Request `id` joined the queue at `now` (for the feature clock, when there is one).
    pub fn note_joined(&mut self, id: RequestId, now: Nanos) {
        if let Some(probe) = self.probe.as_deref_mut() {
            probe.joined(id, now);
        }
    }

    /// What the feature clock found, when there is one.
    pub fn feature_totals(&self) -> Option<&FeatureTotals> {
        self.probe.as_deref().map(FeatureClock::totals)
    }

    /// The plan just applied produced `out`: the feature clock stamps its first and last tokens.
    fn probe_applied(&mut self, out: &Applied<T>) {
        let Some(probe) = self.probe.as_deref_mut() else {
            return;
        };
        probe.applied();
        for &id in &out.first_tokens {
            probe.first_token(id);
        }
        for s in &out.finished {
            probe.finished(s.id(), s.generated());
        }
    }

    /// Takes every request out (the worker went down at `now`): running ones in admission order,
    /// then the waiting queue; the KV pool is emptied.
    pub fn drain(&mut self, now: Nanos) -> Vec<Seq<T>> {
        if let Some(plan) = self.plan.take() {
            let end = *plan.ends.last().expect("non-empty");
            self.stats.busy_ns -= end.saturating_sub(now);
        }
        self.pool.borrow_mut().clear();
        if let Some(rules) = &self.cfg.sglang {
            self.new_token_ratio = rules.init_new_token_ratio();
        }
        let mut all: Vec<Seq<T>> = self.running.drain(..).collect();
        all.extend(self.waiting.drain(..));
        self.waiting_tokens = 0;
        for s in &mut all {
            s.computed = 0;
            s.slots.clear();
            s.held_named = 0;
            s.private = 0;
        }
        all
    }

    /// Whether running request `s` leaves now: `Some(true)` prefilled (a prefill worker's
    /// request whose first token was just produced: it moves on to decode elsewhere, whatever
    /// its length), `Some(false)` finished, `None` stays.
    fn leaves(&self, s: &Seq<T>) -> Option<bool> {
        if self.cfg.prefill_only && !s.decode_side && s.generated == 1 {
            Some(true)
        } else if s.generated >= s.output {
            Some(false)
        } else {
            None
        }
    }

    /// Moves the requests that leave out of the running queue (keeping the others' order),
    /// releasing their blocks.
    fn retire(&mut self, out: &mut Applied<T>) {
        let mut i = 0;
        while i < self.running.len() {
            let Some(prefilled) = self.leaves(&self.running[i]) else {
                i += 1;
                continue;
            };
            let mut s = self.running.remove(i).expect("in range");
            if !prefilled {
                if let Some(changes) = self.keep_answer(&mut s) {
                    out.kv.push(changes);
                }
            }
            // A prefilled request handed back from its decode worker may be sent here again.
            self.free_blocks(&mut s, prefilled);
            if prefilled {
                out.prefilled.push(s);
            } else {
                out.finished.push(s);
            }
        }
    }

    /// Schedules the running requests, then the waiting ones. Returns the work, whether a
    /// preemption happened and whether any request was admitted.
    fn schedule(&mut self, now: Nanos, out: &mut Planned<T>, work: &mut Vec<Work>) -> (bool, bool) {
        if let Some(rules) = self.cfg.sglang {
            return self.schedule_sglang(&rules, now, out, work);
        }
        let mut budget = self.cfg.max_num_batched_tokens.unwrap_or(usize::MAX) as u64;
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let s = &self.running[i];
            let n = (s.target() - s.computed).min(budget);
            if self.cfg.admission == Admission::ToCompletion
                && self.need(s, n) > self.pool.borrow().available()
            {
                // The to-completion gate reserved this growth: never reached. As the crate
                // does, a debug build stops here and a release build declines to preempt.
                debug_assert!(false, "a reserved request lacks a block");
                i += 1;
                continue;
            }
            let mut scheduled = true;
            while self.need(&self.running[i], n) > self.pool.borrow().available() {
                preempted = true;
                let victim = match self.cfg.preemption {
                    Preemption::Lifo => self.running.len() - 1,
                    Preemption::Fifo => 0,
                };
                if victim == i {
                    self.preempt(i);
                    scheduled = false;
                    break;
                }
                if victim < i {
                    // Already scheduled this step: give its tokens back.
                    let id = self.running[victim].id();
                    if let Some(pos) = work.iter().position(|w| w.id == id) {
                        budget += work.remove(pos).tokens;
                    }
                    i -= 1;
                }
                self.preempt(victim);
            }
            if scheduled {
                self.grow(i, n, &mut out.log);
                work.push(Work {
                    id: self.running[i].id(),
                    tokens: n,
                });
                budget -= n;
                i += 1;
            }
        }
        let mut admitted = false;
        if !preempted {
            while budget > 0 && self.seats_left() {
                match self.admit_head(now, budget, out) {
                    Admit::Scheduled(w) => {
                        budget -= w.tokens;
                        work.push(w);
                        admitted = true;
                    }
                    Admit::Rejected => {}
                    Admit::Blocked => break,
                }
            }
        }
        (preempted, admitted)
    }

    fn seats_left(&self) -> bool {
        !self.waiting.is_empty() && self.cfg.max_num_seqs.is_none_or(|m| self.running.len() < m)
    }

    /// Blocks running request `s` takes from the available ones to compute `n` more tokens.
    pub(super) fn need(&self, s: &Seq<T>, n: u64) -> usize {
        let (named_after, private_after) = s.blocks_for(s.computed + n, self.cfg.block_size);
        // Most steps add no named block (a decode token inside its last block): its names,
        // behind the request's spec, are not read then.
        let new = if named_after > s.held_named {
            self.pool.borrow().unpinned_among(
                &s.names()[s.held_named..named_after],
                s.unlisted_from.saturating_sub(s.held_named),
            )
        } else {
            0
        };
        (new + private_after).saturating_sub(s.private)
    }

    /// Gives running request `i` the blocks for `n` more tokens (the caller checked they are
    /// available), logging what was stored and evicted.
    pub(super) fn grow(&mut self, i: usize, n: u64, log: &mut Vec<LogItem>) {
        let bs = self.cfg.block_size;
        let s = &mut self.running[i];
        let (named_after, private_after) = s.blocks_for(s.computed + n, bs);
        let named_after = named_after.max(s.held_named);
        if named_after == s.held_named && private_after == s.private {
            return; // a decode token within the blocks it holds
        }
        if private_after < s.private {
            self.pool
                .borrow_mut()
                .free_private(s.private - private_after);
            s.private = private_after;
        }
        let parent = s.held_named.checked_sub(1).map(|k| s.spec.blocks[k]);
        let extra = private_after - s.private;
        let mut changes = Changes::default();
        self.pool.borrow_mut().acquire(
            parent,
            &s.spec.blocks[s.held_named..named_after],
            extra,
            &mut changes,
            &mut s.slots,
            s.unlisted_from.saturating_sub(s.held_named),
        );
        if self.tiered {
            let mut pool = self.pool.borrow_mut();
            let admitted = s.first.is_some_and(|f| f.at_ns == pool.now());
            pool.write_through_later(&changes, &[&s.spec.blocks[..named_after]], admitted);
        }
        s.held_named = named_after;
        s.private = private_after;
        if !changes.is_empty() {
            log.push(LogItem::Kv(changes));
        }
    }

    /// Under `[kv.host] write_policy = "write_through_selective"`, the inserts SGLang's radix
    /// tree takes as the planned step's results come in, each a hit on the request's full
    /// prompt blocks ([`KvPool::hit`]): a request whose prefill the step completes and whose
    /// token is not its last (`cache_unfinished_req`), and a request the step finishes
    /// (`cache_finished_req`, which inserts the prompt; once if both). `steps`: the steps
    /// planned (a stretch's requests each decode that many tokens).
    fn insert_hits(&mut self, work: &[Work], steps: u64, log: &mut Vec<LogItem>) {
        let bs = self.cfg.block_size as u64;
        let mut lower = Vec::new();
        let mut work = work.iter().peekable();
        for s in &self.running {
            let Some(w) = work.next_if(|w| w.id == s.id()) else {
                continue;
            };
            // Whether the step's work ends in a token, and whether it completes a prefill.
            let (token, prefill) = if steps > 1 {
                (true, false)
            } else {
                (s.computed + w.tokens == s.target(), s.computed < s.prompt)
            };
            let generated = s.generated + steps;
            let finishes = generated >= s.output
                || (self.cfg.prefill_only && !s.decode_side && generated >= 1);
            if token && (prefill || finishes) {
                let full = ((s.prompt / bs) as usize).min(s.held_named);
                lower.extend(self.pool.borrow_mut().hit(&s.spec.blocks[..full]));
            }
        }
        if !lower.is_empty() {
            log.push(LogItem::Kv(Changes {
                lower,
                ..Changes::default()
            }));
        }
    }

    /// Releases the blocks `s` holds; if it may look them up here again (`comes_back`), its own
    /// tail is listed first, so that lookups by name find it.
    fn free_blocks(&mut self, s: &mut Seq<T>, comes_back: bool) {
        let mut pool = self.pool.borrow_mut();
        if comes_back {
            // Slot k holds block k: only those from `unlisted_from` on can be unlisted.
            pool.list(&s.slots[s.unlisted_from.min(s.slots.len())..]);
        }
        pool.release(&s.slots, s.private);
        s.slots.clear();
        s.held_named = 0;
        s.private = 0;
    }

    /// Keeps finished request `s`'s answer cached: the blocks its generated tokens completed,
    /// which the next turn of its session names ([`RequestSpec::answer_blocks`]), as far as its
    /// engine keeps them ([`kept_answer_blocks`]). Those of its private blocks become named
    /// ones, stored (or pinned, if held) and released at once, before its prompt's blocks: vLLM
    /// frees a request's blocks last first, so the answer is evicted before the prompt. Returns
    /// what was stored, for the KV events; `None` when the request names no answer, its engine
    /// keeps none of it, or it does not hold its whole prompt's chain (a decode-side request).
    ///
    /// [`RequestSpec::answer_blocks`]: crate::workload::RequestSpec::answer_blocks
    fn keep_answer(&mut self, s: &mut Seq<T>) -> Option<Changes> {
        let chain = s.spec.blocks.len();
        let k = kept_answer_blocks(s, self.cfg.block_size).min(s.private);
        if k == 0 || s.decode_side || s.held_named != chain {
            return None;
        }
        let answer = &s.spec.answer_blocks[..k];
        let mut pool = self.pool.borrow_mut();
        pool.free_private(k);
        s.private -= k;
        let mut changes = Changes::default();
        let mut slots = Vec::with_capacity(k);
        pool.acquire(
            s.spec.blocks.last().copied(),
            answer,
            0,
            &mut changes,
            &mut slots,
            k,
        );
        if self.tiered {
            pool.write_through_later(&changes, &[&s.spec.blocks, answer], false);
        }
        pool.release(&slots, 0);
        (!changes.is_empty()).then_some(changes)
    }

    /// Frees a running set that cannot move ([`StepScheduler::plan`]'s net, not a rule of any
    /// engine): the newest running request goes to the back of the waiting queue, as SGLang
    /// re-queues a retracted request, and the step admits nobody, so that the blocks it freed
    /// go to the requests left running (admitted, a waiting request sharing their prefix took
    /// them back at once and the worker went round forever); running alone, it can never
    /// move, and is rejected.
    fn unstick(&mut self, out: &mut Planned<T>) {
        let newest = self.running.len() - 1;
        if newest == 0 {
            let mut s = self.running.pop_back().expect("one running");
            self.free_blocks(&mut s, false);
            self.stats.rejected += 1;
            out.rejected.push(s);
            // Nobody left running: the waiting requests may take the worker (an idle worker
            // that admits nobody would refuse its queue's head as never fitting).
            self.admission_held = false;
        } else {
            self.preempt(newest);
            let s = self.waiting.pop_front().expect("just preempted");
            self.waiting.push_back(s);
            self.admission_held = true;
        }
    }

    /// Preempts running request `i`: frees its blocks, forgets its computed tokens, and puts it
    /// at the front of the waiting queue.
    pub(super) fn preempt(&mut self, i: usize) {
        let mut s = self.running.remove(i).expect("a running request");
        // It comes back to look its blocks up.
        self.free_blocks(&mut s, true);
        s.list_every_block();
        s.computed = 0;
        s.preemptions += 1;
        if s.kind == SeqKind::Transferred {
            // Its KV is gone: the decode side recomputes the prompt itself.
            s.kind = SeqKind::Prompt;
        }
        self.stats.preemptions += 1;
        self.waiting_tokens += s.waiting_prompt_tokens();
        self.waiting.push_front(s);
    }

    /// What the planned `work` computes: tokens, uncached prompt tokens, the chunks' attention
    /// pairs, and the decoding requests with the KV tokens they hold.
    fn step_work(&self, work: &[Work]) -> StepWork {
        let mut w = StepWork {
            seqs: work.len() as u64,
            ..StepWork::default()
        };
        let mut items = work.iter().peekable();
        for s in &self.running {
            let Some(item) = items.next_if(|i| i.id == s.id()) else {
                continue;
            };
            let after = s.computed + item.tokens;
            w.tokens += item.tokens;
            w.prefill_tokens += after.min(s.prompt) - s.computed.min(s.prompt);
            if item.tokens > 1 {
                let chunk = item.tokens as f64;
                w.prefill_pairs += chunk * (s.computed as f64 + (chunk + 1.0) / 2.0);
            }
            if after == s.target() {
                w.sampled += 1;
                if s.generated >= 1 {
                    w.decode_seqs += 1;
                    w.decode_kv_tokens += after;
                }
            }
        }
        if w.decode_seqs > 0 {
            w.decode_kv_fraction = self.kv_fraction(w.decode_kv_tokens);
        }
        w
    }

    /// A decode-only step of every running request, their KV holding `kv_tokens`.
    pub(super) fn decode_work(&self, kv_tokens: u64) -> StepWork {
        let n = self.running.len() as u64;
        StepWork {
            tokens: n,
            decode_seqs: n,
            decode_kv_tokens: kv_tokens,
            seqs: n,
            sampled: n,
            decode_kv_fraction: self.kv_fraction(kv_tokens),
            ..StepWork::default()
        }
    }

    pub(super) fn kv_fraction(&self, kv_tokens: u64) -> f64 {
        match self.cfg.kv_capacity {
            Some(cap) => kv_tokens as f64 / (cap as f64 * self.cfg.block_size as f64),
            None => 0.0,
        }
    }

    /// Whether every request in `work` decodes exactly one token (none is in prefill).
    fn all_decode_one(&self, work: &[Work]) -> bool {
        work.iter().zip(&self.running).all(|(w, s)| {
            w.id == s.id()
                && w.tokens == 1
                && s.last_token_ns.is_some()
                && s.computed + 1 == s.target()
        })
    }
}

impl<T> Engine<T> for StepScheduler<T> {
    fn block_size(&self) -> usize {
        self.cfg.block_size
    }

    fn enqueue(&mut self, seq: Seq<T>) {
        StepScheduler::enqueue(self, seq)
    }

    fn note_joined(&mut self, id: RequestId, now: Nanos) {
        StepScheduler::note_joined(self, id, now)
    }

    fn plan(&mut self, now: Nanos) -> Option<Planned<T>> {
        StepScheduler::plan(self, now)
    }

    fn steps_begun(&self, now: Nanos) -> u32 {
        StepScheduler::steps_begun(self, now)
    }

    fn truncate(&mut self, now: Nanos) -> Option<Nanos> {
        StepScheduler::truncate(self, now)
    }

    fn apply(&mut self) -> Applied<T> {
        StepScheduler::apply(self)
    }

    fn drain(&mut self, now: Nanos) -> Vec<Seq<T>> {
        StepScheduler::drain(self, now)
    }

    fn in_step(&self) -> bool {
        StepScheduler::in_step(self)
    }

    fn has_work(&self) -> bool {
        StepScheduler::has_work(self)
    }

    fn running_mut(&mut self, id: RequestId) -> Option<&mut Seq<T>> {
        StepScheduler::running_mut(self, id)
    }

    fn running_seq(&self, id: RequestId) -> Option<&Seq<T>> {
        StepScheduler::running_seq(self, id)
    }

    fn signals(&self) -> WorkerSignals {
        StepScheduler::signals(self)
    }

    fn stats(&self) -> SchedulerStats {
        self.stats
    }

    fn kv(&self) -> KvLevels {
        KvLevels::of(&self.pool.borrow())
    }

    fn cache(&self) -> CacheView {
        CacheView::of(Rc::clone(&self.pool))
    }

    fn snapshot(&self) -> Vec<BlockHash> {
        self.pool.borrow().named_blocks()
    }

    fn lower_snapshot(&self) -> Vec<(Tier, Vec<BlockHash>)> {
        self.pool.borrow().lower_snapshot()
    }

    fn feature_totals(&self) -> Option<&FeatureTotals> {
        StepScheduler::feature_totals(self)
    }
}

/// How many of finished request `s`'s answer blocks ([`RequestSpec::answer_blocks`]: from the
/// prompt's partial block to the last block whose tokens all have KV) its engine's cache keeps:
/// all of them under vLLM v1, which caches every full block up to a request's tokens, generated
/// ones included (`KVCacheManager.allocate_slots`, `vllm/v1/core/kv_cache_manager.py`), and
/// TensorRT-LLM, which stores the blocks of all but a request's last token when it releases
/// them (`WindowBlockManager::storeBlocksForReuse`,
/// `cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`); under SGLang 0.5.6.post2, those its
/// `fill_ids` fill in whole pages (`Seq::kept_output`): `cache_finished_req`
/// (`mem_cache/radix_cache.py`) inserts `fill_ids` page-aligned, and only an admission
/// (`Req.init_next_round_input`) or a mixed pass (`ScheduleBatch.mix_with_running`) extends them
/// past the prompt.
///
/// [`RequestSpec::answer_blocks`]: crate::workload::RequestSpec::answer_blocks
fn kept_answer_blocks<T>(s: &Seq<T>, block_size: usize) -> usize {
    let all = s.spec.answer_blocks.len();
    match s.kept_output {
        None => all,
        Some(output) => {
            let bs = block_size as u64;
            let filled = (s.prompt + output) / bs - s.prompt / bs;
            all.min(filled as usize)
        }
    }
}
