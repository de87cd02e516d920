//! The SGLang engine: SGLang's scheduler (prefill batches first, admission against a reserve of
//! future output tokens, decode retraction) on the shared step loop and block pool, as
//! `aisimulate-core` 0.13 models it and SGLang's source describes it.
//!
//! Sources: `aisimulate-core` 0.13.0, `engine/scheduler/sglang/` (`prefill.rs`
//! `get_new_batch_prefill`, `policy.rs` `apply_schedule_policy`, `decode.rs`
//! `check_decode_mem_for_burst` and `retraction_ratio_estimate`, `core.rs` the pass and the
//! ratio's decay and reset, `config.rs` the defaults), a model of sgl-project/sglang v0.5.6.post2
//! (`5c8bd8b5`); SGLang's own `python/sglang/srt/managers/schedule_policy.py`
//! (`SchedulePolicy.calc_priority`, `_compute_prefix_matches`, `_sort_by_longest_prefix`,
//! `PrefillAdder`: `add_chunked_req`, `add_one_req`, `_update_prefill_budget`, `budget_state`,
//! `CLIP_MAX_NEW_TOKENS`, the in-batch prefix thresholds; read at commit 00550cd),
//! `managers/scheduler.py` (`get_next_batch_to_run`, `get_new_batch_prefill`,
//! `update_running_batch`, the idle reset) and `managers/schedule_batch.py`
//! (`ScheduleBatch.retract_decode`), and `mem_cache/radix_cache.py` (LRU leaf eviction).
//!
//! **A pass** is a prefill batch when one can be formed, else a decode batch of every running
//! request (`get_next_batch_to_run`: "run prefill first"; prefill and decode share a forward
//! only with `--enable-mixed-chunk`). Requests already decoding wait out a prefill pass; with
//! `enable_mixed_chunk` they decode one token each in it (`mix_with_running`: no retraction
//! check, no ratio decay), and the prefill budgets leave them a token each.
//!
//! **A prefill batch** (`PrefillAdder`) starts from three budgets:
//!
//! ```text
//! rem_total = free + evictable tokens
//!             - sum over decoding r of min(max_new(r) - generated(r), 4096) * new_token_ratio
//! rem_input = max_prefill_tokens         rem_chunk = chunked_prefill_size
//! ```
//!
//! The request being prefilled in chunks goes first (`add_chunked_req`: up to
//! `min(rem_chunk, rem_total)` tokens). Then waiting requests, in the policy's order: `fcfs`
//! keeps arrival order; `lpm` sorts by longest cached prefix, a request with a short cached
//! prefix (at most 32 tokens) whose first 32 tokens an earlier waiting request shares last
//! (in-batch prefix caching: let one of them fill the cache first), and falls back to `fcfs`
//! past 128 waiting requests. A request (its prefix matched once, capped one token short of its
//! prompt) is admitted while `extend + min(max_new, 4096) < rem_total` (`extend`: its prompt
//! less its cached prefix) and, unless it is the pass's first, `extend < rem_input`; if
//! `extend` exceeds `rem_chunk` it is cut to a chunk of `rem_chunk` rounded down to whole pages
//! and continues in the next passes. Each admission charges its page-rounded chunk to all three
//! budgets and, when its prompt completes in this pass, `min(max_new, 4096)` to `rem_total`;
//! the batch closes when any budget is spent or the running-request limit is reached.
//!
//! **A decode batch** (`update_running_batch`) first checks that the free and evictable blocks
//! cover the next token of every running request; if not it retracts, one at a time, the
//! request with the fewest generated tokens (ties: the longest prompt, then the latest
//! admitted) until they do, never the last one (`retract_decode`). A retracted request frees
//! its KV, goes to the back of the waiting queue and is recomputed when admitted again.
//!
//! **`new_token_ratio`**, the share of each running request's remaining output reserved:
//! starts at `0.7 x schedule_conservativeness` (at most 1), decays by `(init - min) / 600` per
//! decode pass to `min = 0.14 x init`; a retraction resets it to `min(1, (generated + 20 x n) /
//! (max_new + 1))` over the `n` requests left; a worker with nothing to do resets it to `init`.
//!
//! **The radix cache** at page granularity with LRU leaf eviction is the shared block pool
//! ([`kv`](super::kv)) with page = block: a block's name chains its whole prefix, so a lookup
//! by names finds the longest cached prefix as a radix-tree match does; blocks are released
//! last-first and evicted longest-released first, so a prefix's leaf goes before its parent,
//! as SGLang's eviction takes least recently used leaves.
//!
//! **Where dynsim differs.** SGLang's default `page_size` is 1 (token granularity); here a page
//! is `cluster.block_size` tokens (the crate does the same), so a prefix matches in whole
//! blocks and the in-batch prefix check compares whole blocks. A finished request's output is
//! cached only where it names it (a synthetic session turn's answer, which the next turn
//! repeats; a trace names no output), and only as far as SGLang caches it: `cache_finished_req`
//! (`mem_cache/radix_cache.py`) inserts the request's `fill_ids`, its prompt and the output it
//! had at its last admission (after a retraction) or its last mixed pass
//! (`ScheduleBatch.mix_with_running`), in whole pages; a decode pass does not extend them. A retracted request's
//! computed blocks stay cached until evicted (SGLang frees the tokens past the prefix it
//! matched). A request whose `ceil(prompt) + min(max_new, 4096)` tokens, or whose whole sequence,
//! cannot fit the worker's KV is refused. `max_running_requests` defaults to the crate's 256
//! without a deployment and to SGLang's own from the KV with one
//! (`crate::deployment::sglang_defaults`); priority scheduling and
//! the other policies (`lof`, `dfs-weight`, `random`) are not modelled. The crate charges
//! `rem_total` with the chunk alone; SGLang (and dynsim) with the whole `extend`. It checks
//! `max_prefill_tokens` (`rem_input`) with the chunk alone too, where SGLang checks the whole
//! uncached prompt; `max_prefill_tokens_charge = "chunk"` ([`SglangRules::charge_chunk`])
//! follows the crate there, and the crate-comparison scenario sets it.

use super::engine::EngineSetup;
use super::vllm::{Admission, Preemption, SchedulerConfig, VllmRules};

pub mod rules;
mod schedule;
#[cfg(test)]
mod tests;

pub use rules::{
    ceil_page, ratio_after_retraction, reserved_output, retraction_victim, SchedulePolicy,
    SglangRules, CLIP_MAX_NEW_TOKENS, INIT_NEW_TOKEN_RATIO, IN_BATCH_PREFIX_TOKENS,
    LPM_FALLBACK_THRESHOLD, MIN_NEW_TOKEN_RATIO_FACTOR, NEW_TOKEN_RATIO_DECAY_STEPS,
    RETRACT_DECODE_STEPS,
};

impl SglangRules {
    /// The step loop's settings for an engine built from `setup` under these rules.
    pub fn scheduler_config(&self, setup: &EngineSetup) -> SchedulerConfig {
        let loop_rules = VllmRules {
            max_num_seqs: self.max_running_requests,
            // SGLang's budgets replace the step's token budget.
            max_num_batched_tokens: None,
            chunked_prefill: self.chunked_prefill_size.is_some(),
            // Never used: retraction picks its own victims.
            preemption: Preemption::Lifo,
            // The physical check behind SGLang's budgets: the chunk's blocks must be free or
            // evictable.
            admission: Admission::Chunk,
            decode_stretches: true,
        };
        SchedulerConfig {
            sglang: Some(*self),
            ..SchedulerConfig::of(setup, &loop_rules)
        }
    }
}
