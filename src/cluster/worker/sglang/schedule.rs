//! SGLang's pass on the shared step loop: a prefill batch if one forms, else a decode batch with
//! retraction, and the `new_token_ratio` bookkeeping (the rules: [`super`]).

use std::cmp::Reverse;
use std::collections::HashSet;

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::hashers::BlockHashBuilder;

use super::{
    ceil_page, ratio_after_retraction, reserved_output, retraction_victim, SchedulePolicy,
    SglangRules, CLIP_MAX_NEW_TOKENS, IN_BATCH_PREFIX_TOKENS, LPM_FALLBACK_THRESHOLD,
};
use crate::cluster::worker::plan::{Admit, Planned, Work};
use crate::cluster::worker::seq::{Seq, SeqKind};
use crate::cluster::worker::vllm::StepScheduler;

/// A prefill batch's budgets, tokens (`PrefillAdder`'s `rem_total_tokens`, `rem_input_tokens`,
/// `rem_chunk_tokens`).
struct Budgets {
    total: f64,
    input: f64,
    chunk: Option<f64>,
    page: usize,
}

impl Budgets {
    /// An admission of `tokens` prompt tokens, reserving `output` tokens of output
    /// (`_update_prefill_budget`).
    fn charge(&mut self, tokens: u64, output: u64) {
        let paged = ceil_page(tokens, self.page) as f64;
        self.total -= paged + output as f64;
        self.input -= paged;
        if let Some(c) = self.chunk.as_mut() {
            *c -= paged;
        }
    }

    /// Whether another request may be tried (`budget_state` is `CONTINUE`).
    fn open(&self) -> bool {
        self.total > 0.0 && self.input > 0.0 && self.chunk.is_none_or(|c| c > 0.0)
    }
}

/// Whether running request `s` has its prompt computed (it decodes, or waits to).
fn decoding<T>(s: &Seq<T>) -> bool {
    s.computed >= s.prompt
}

impl<T> StepScheduler<T> {
    /// SGLang's pass: a prefill batch when one forms, else a decode batch. Returns whether a
    /// request was retracted and whether one was admitted.
    pub(in crate::cluster::worker) fn schedule_sglang(
        &mut self,
        rules: &SglangRules,
        now: Nanos,
        out: &mut Planned<T>,
        work: &mut Vec<Work>,
    ) -> (bool, bool) {
        let admitted = self.sglang_prefill(rules, now, out, work);
        if !work.is_empty() {
            if rules.enable_mixed_chunk {
                self.mix_decodes(out, work);
            }
            return (false, admitted);
        }
        (self.sglang_decode(rules, out, work), admitted)
    }

    /// `--enable-mixed-chunk`: every decoding request rides along with the prefill batch, one
    /// token each (`mix_with_running`), when its block is there; `work` is put back in the
    /// running order.
    ///
    /// One pass over the running batch, in its order: a prefilling request's chunk is taken
    /// from `work` (every one is in the batch), a decoding one grows by a token. The prefills
    /// are a few, found by binary search; no table is built or sorted per step (at 512 running
    /// requests those were half of an SGLang bench's time).
    fn mix_decodes(&mut self, out: &mut Planned<T>, work: &mut Vec<Work>) {
        let mut prefills = std::mem::take(work);
        prefills.sort_unstable_by_key(|w| w.id);
        for i in 0..self.running.len() {
            let id = self.running[i].id();
            if let Ok(at) = prefills.binary_search_by_key(&id, |w| w.id) {
                work.push(prefills[at]);
                continue;
            }
            let s = &self.running[i];
            if !decoding(s) || self.need(s, 1) > self.pool.borrow().available() {
                continue;
            }
            // `mix_with_running` sets its `fill_ids` to the prompt and the output so far.
            self.running[i].kept_output = Some(self.running[i].generated);
            self.grow(i, 1, &mut out.log);
            work.push(Work { id, tokens: 1 });
        }
        debug_assert_eq!(
            work.iter()
                .filter(|w| prefills.binary_search_by_key(&w.id, |p| p.id).is_ok())
                .count(),
            prefills.len(),
            "every prefilling request is in the running batch"
        );
    }

    /// The output tokens `s` may still produce here (`max_new_tokens - len(output_ids)`; a
    /// disaggregated prefill worker's request leaves with its first).
    fn max_new_left(&self, s: &Seq<T>) -> u64 {
        self.max_new(s).saturating_sub(s.generated)
    }

    /// The output tokens `s` may produce here in all.
    fn max_new(&self, s: &Seq<T>) -> u64 {
        if self.cfg.prefill_only && !s.decode_side {
            1
        } else {
            s.output
        }
    }

    /// `PrefillAdder`: the chunked request's next chunk, then waiting requests in the policy's
    /// order while the budgets last, each matched against the cache as it stood before the
    /// batch (a fence: blocks the batch stores are computed by its forward pass, so a later
    /// request of the batch recomputes a prefix an earlier one brings; [`KvPool::fence`]).
    /// Returns whether any request was admitted.
    ///
    /// [`KvPool::fence`]: crate::cluster::worker::kv::KvPool::fence
    fn sglang_prefill(
        &mut self,
        rules: &SglangRules,
        now: Nanos,
        out: &mut Planned<T>,
        work: &mut Vec<Work>,
    ) -> bool {
        self.pool.borrow_mut().fence();
        let admitted = self.sglang_prefill_fenced(rules, now, out, work);
        self.pool.borrow_mut().unfence();
        admitted
    }

    /// [`StepScheduler::sglang_prefill`] behind its fence.
    fn sglang_prefill_fenced(
        &mut self,
        rules: &SglangRules,
        now: Nanos,
        out: &mut Planned<T>,
        work: &mut Vec<Work>,
    ) -> bool {
        let bs = self.cfg.block_size;
        let reserved = reserved_output(
            self.running
                .iter()
                .filter(|s| decoding(s))
                .map(|s| self.max_new_left(s)),
            self.new_token_ratio,
        );
        let available = self.pool.borrow().available();
        // Mixed with decodes, the prefill budgets leave a token for each decoding request.
        let mixed = if rules.enable_mixed_chunk {
            self.running.iter().filter(|s| decoding(s)).count() as f64
        } else {
            0.0
        };
        let mut budget = Budgets {
            total: available as f64 * bs as f64 - reserved,
            input: rules.max_prefill_tokens as f64 - mixed,
            chunk: rules.chunked_prefill_size.map(|c| c as f64 - mixed),
            page: bs,
        };

        // `add_chunked_req`: the request prefilled in chunks goes first.
        if let Some(i) = self.running.iter().position(|s| !decoding(s)) {
            let s = &self.running[i];
            let extend = s.target() - s.computed;
            let mut n = extend;
            if let Some(c) = budget.chunk {
                // `min(rem_chunk, rem_total)`, or the chunk budget when that leaves nothing.
                let limit = c.min(budget.total.floor());
                let limit = if limit <= 0.0 { c.max(0.0) } else { limit } as u64;
                n = n.min((limit / bs as u64 * bs as u64).max(bs as u64));
            }
            // What the pool can give now, in whole pages (the budgets are estimates).
            while n > 0 && self.need(&self.running[i], n) > self.pool.borrow().available() {
                n = (n - 1) / bs as u64 * bs as u64;
            }
            if n > 0 {
                let output = if n == extend {
                    self.max_new_left(&self.running[i]).min(CLIP_MAX_NEW_TOKENS)
                } else {
                    0
                };
                self.grow(i, n, &mut out.log);
                work.push(Work {
                    id: self.running[i].id(),
                    tokens: n,
                });
                budget.charge(n, output);
            }
        }

        if rules.schedule_policy == SchedulePolicy::Lpm
            && self.waiting.len() <= LPM_FALLBACK_THRESHOLD
        {
            self.sort_longest_prefix_first();
        }
        let capacity_tokens = self.cfg.kv_capacity.map(|c| c as u64 * bs as u64);
        let mut admitted = false;
        while !self.waiting.is_empty()
            && self.cfg.max_num_seqs.is_none_or(|m| self.running.len() < m)
            && budget.open()
        {
            let head = self.waiting.front().expect("checked non-empty");
            let max_new = self.max_new_left(head).min(CLIP_MAX_NEW_TOKENS);
            if capacity_tokens.is_some_and(|c| ceil_page(head.prompt, bs) + max_new >= c) {
                // Even an idle worker's budget could never take it.
                let s = self.pop_waiting();
                self.stats.rejected += 1;
                out.rejected.push(s);
                continue;
            }
            let target = Self::head_target(head);
            let (held, _, start) = self.head_start();
            let extend = target - start;
            // Locking the matched prefix pins its evictable blocks: no longer room. SGLang
            // checks the budget before the lock and again after it; the second is the stricter.
            let locked = if rules.recheck_locked_prefix && head.kind == SeqKind::Prompt {
                let pool = self.pool.borrow();
                let on_device = held.min((start / bs as u64) as usize);
                let evictable = head.names()[..on_device]
                    .iter()
                    .filter(|b| !pool.is_pinned(**b))
                    .count();
                (evictable * bs) as f64
            } else {
                0.0
            };
            if (extend + max_new) as f64 >= budget.total - locked {
                break; // NO_TOKEN
            }
            let input = ceil_page(extend, bs) as f64;
            if !rules.charge_chunk && input >= budget.input && !work.is_empty() {
                break; // over max_prefill_tokens, and not the pass's first
            }
            let n = match budget.chunk {
                Some(c) if input > c => {
                    let cut = c as u64 / bs as u64 * bs as u64;
                    match (cut, work.is_empty()) {
                        (0, true) => bs as u64,
                        (0, false) => break,
                        (cut, _) => cut,
                    }
                }
                _ => extend,
            }
            .min(extend);
            if rules.charge_chunk && ceil_page(n, bs) as f64 > budget.input {
                // Dynamo's simulator checks the chunk alone (`get_new_batch_prefill`:
                // `charged_input_tokens > rem_input_tokens`).
                break;
            }
            match self.admit_head(now, n, out) {
                Admit::Scheduled(w) => {
                    // `init_next_round_input` sets its `fill_ids` to the prompt and the output
                    // so far (some, after a retraction); the admitted request is the last running.
                    let s = self.running.back_mut().expect("just admitted");
                    debug_assert_eq!(s.id(), w.id);
                    s.kept_output = Some(s.generated);
                    budget.charge(w.tokens, if w.tokens == extend { max_new } else { 0 });
                    budget.total -= locked;
                    work.push(w);
                    admitted = true;
                }
                Admit::Rejected => {}
                Admit::Blocked => break,
            }
        }
        admitted
    }

    /// `calc_priority` under `lpm`: longest cached prefix first; a request whose cached prefix
    /// is short but whose first 32 tokens an earlier waiting request shares goes last. Stable.
    fn sort_longest_prefix_first(&mut self) {
        let bs = self.cfg.block_size as u64;
        let mut shared: HashSet<BlockHash, BlockHashBuilder> = HashSet::default();
        let keys: Vec<(bool, Reverse<u64>)> = {
            let pool = self.pool.borrow();
            self.waiting
                .iter()
                .map(|s| {
                    let matched = pool.cached_prefix(s.names()) as u64 * bs;
                    let mut deprioritized = false;
                    if matched <= IN_BATCH_PREFIX_TOKENS {
                        let in_batch =
                            s.names().iter().take_while(|b| shared.contains(b)).count() as u64;
                        if in_batch * bs >= IN_BATCH_PREFIX_TOKENS {
                            deprioritized = true;
                        } else {
                            shared.extend(s.names().iter().copied());
                        }
                    }
                    (deprioritized, Reverse(matched))
                })
                .collect()
        };
        let mut keyed: Vec<_> = keys.into_iter().zip(self.waiting.drain(..)).collect();
        keyed.sort_by_key(|(k, _)| *k);
        self.waiting.extend(keyed.into_iter().map(|(_, s)| s));
    }

    /// `update_running_batch`: retract until every decoding request's next token has a block,
    /// update the ratio, and decode one token each. Returns whether any was retracted.
    fn sglang_decode(
        &mut self,
        rules: &SglangRules,
        out: &mut Planned<T>,
        work: &mut Vec<Work>,
    ) -> bool {
        let mut retracted = false;
        loop {
            let decoders: Vec<(usize, (u64, u64))> = self
                .running
                .iter()
                .enumerate()
                .filter(|(_, s)| decoding(s))
                .map(|(i, s)| (i, (s.generated, s.prompt)))
                .collect();
            let growth: usize = decoders
                .iter()
                .map(|&(i, _)| self.need(&self.running[i], 1))
                .sum();
            if decoders.len() <= 1 || growth <= self.pool.borrow().available() {
                break;
            }
            let order: Vec<(u64, u64)> = decoders.iter().map(|d| d.1).collect();
            let victim = retraction_victim(&order).expect("more than one");
            self.preempt(decoders[victim].0);
            // SGLang re-queues a retracted request at the back of the waiting queue.
            let s = self.waiting.pop_front().expect("just retracted");
            self.waiting.push_back(s);
            retracted = true;
        }
        if !self.running.iter().any(decoding) {
            return retracted;
        }
        self.new_token_ratio = if retracted {
            let left: Vec<(u64, u64)> = self
                .running
                .iter()
                .filter(|s| decoding(s))
                .map(|s| (s.generated, self.max_new(s)))
                .collect();
            ratio_after_retraction(&left)
        } else {
            rules.decayed(self.new_token_ratio)
        };
        for i in 0..self.running.len() {
            let s = &self.running[i];
            if !decoding(s) || self.need(s, 1) > self.pool.borrow().available() {
                continue;
            }
            self.grow(i, 1, &mut out.log);
            work.push(Work {
                id: self.running[i].id(),
                tokens: 1,
            });
        }
        retracted
    }

    /// A step (or a stretch of `1 + extra_decode_steps` decode steps) was applied: the ratio
    /// decays once more per extra decode step, and is reset when the worker has nothing left
    /// to do (SGLang's idle check).
    pub(in crate::cluster::worker) fn sglang_applied(&mut self, extra_decode_steps: u64) {
        let Some(rules) = self.cfg.sglang else {
            return;
        };
        for _ in 0..extra_decode_steps {
            self.new_token_ratio = rules.decayed(self.new_token_ratio);
        }
        if !self.has_work() {
            self.new_token_ratio = rules.init_new_token_ratio();
        }
    }

    /// SGLang's `new_token_ratio` now.
    pub fn new_token_ratio(&self) -> f64 {
        self.new_token_ratio
    }
}
