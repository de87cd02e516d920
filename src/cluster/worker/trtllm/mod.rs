//! The TensorRT-LLM engine: TensorRT-LLM's default capacity scheduler, `GUARANTEED_NO_EVICT`,
//! on the vLLM engine's step loop, as `aisimulate-core` 0.13 models it and TensorRT-LLM's
//! source describes it.
//!
//! Sources: `aisimulate-core` 0.13.0, `engine/scheduler/vllm/policy.rs`
//! (`decide_waiting_admission_with_cost`, `blocks_needed_to_finish`, `available_blocks`,
//! `allows_preemption`; the crate runs TensorRT-LLM "through the shared vLLM-style core",
//! `engine/config.rs` `Backend::Trtllm`); TensorRT-LLM's
//! `cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp` (`GuaranteedNoEvictScheduler::impl`,
//! NVIDIA/TensorRT-LLM at commit 02a10fe), and its defaults in
//! `tensorrt_llm/llmapi/llm_args.py`.
//!
//! **The rule.** A waiting request is admitted only when the KV it needs to run to completion
//! fits beside what every running request still needs to run to completion:
//!
//! ```text
//! to_completion(r) = ceil((prompt + output) / block_size)
//! needed           = to_completion(head) - cached prefix blocks running requests hold
//! available        = capacity - blocks running requests hold
//!                    - sum over running r of (to_completion(r) - blocks r holds)
//! admit iff needed <= available
//! ```
//!
//! Cached blocks no running request holds count as available (they are evictable), but the
//! head gets no credit for them: reusing them takes them from the free pool. The head that does
//! not fit stops admission for the step (first come, first served). Since every running
//! request's growth is reserved, a running request never lacks a block: nothing is ever
//! preempted (the crate asserts this in debug builds and declines to preempt in release;
//! dynsim does the same). Everything else (the step loop, the token budget, chunked prefill,
//! prefix caching, decode stretches, KV events) is the vLLM engine's.
//!
//! **Settings** (`[engine.trtllm]`), TensorRT-LLM's names and defaults: `max_batch_size`
//! (2,048 running requests), `max_num_tokens` (8,192 tokens per step), `enable_chunked_prefill`
//! (false: a prompt is scheduled whole, and one longer than `max_num_tokens` is refused).
//!
//! **Where dynsim differs.** A request whose to-completion footprint exceeds the whole KV is
//! refused (the crate clamps its output to the room left, `normalize_max_output_tokens`). A
//! fully cached prompt recomputes its last block, as under vLLM (the crate credits it whole;
//! TensorRT-LLM also computes a prompt's last token to produce its logits). On a disaggregated
//! prefill worker a request leaves with its first token, so it reserves its prompt and that
//! token only. TensorRT-LLM's `beneficialToSkip` (holding back a request whose first new block
//! another request in the batch is computing) is not modelled. The block size is the
//! scenario's `cluster.block_size` for every engine (TensorRT-LLM's `tokens_per_block` is 32).

use super::engine::EngineSetup;
use super::vllm::{Admission, Preemption, SchedulerConfig, VllmRules};

#[cfg(test)]
mod tests;

/// The TensorRT-LLM engine's own rules (`[engine.trtllm]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrtllmRules {
    /// Running requests at most (`None`: unbounded).
    pub max_batch_size: Option<usize>,
    /// Tokens scheduled per step at most (`None`: unbounded).
    pub max_num_tokens: Option<usize>,
    /// Whether a prompt may be computed over several steps.
    pub enable_chunked_prefill: bool,
}

impl TrtllmRules {
    /// The step loop's settings for an engine built from `setup` under these rules: vLLM's
    /// loop with the to-completion gate ([`Admission::ToCompletion`]).
    pub fn scheduler_config(&self, setup: &EngineSetup) -> SchedulerConfig {
        SchedulerConfig::of(
            setup,
            &VllmRules {
                max_num_seqs: self.max_batch_size,
                max_num_batched_tokens: self.max_num_tokens,
                chunked_prefill: self.enable_chunked_prefill,
                // Never used: the gate leaves nothing to preempt.
                preemption: Preemption::Lifo,
                admission: Admission::ToCompletion,
                decode_stretches: true,
            },
        )
    }
}

/// Blocks a request of `tokens` tokens (its prompt and every output token it may produce here)
/// holds by its completion: `ceil(tokens / block_size)`.
pub fn to_completion_blocks(tokens: u64, block_size: usize) -> usize {
    tokens.div_ceil(block_size as u64) as usize
}

/// Blocks left for a new request once every running request's completion is reserved: the
/// `available` blocks (free or evictable) less what each running request, given as
/// (to-completion blocks, blocks it holds), still needs.
pub fn unreserved(available: usize, running: impl Iterator<Item = (usize, usize)>) -> usize {
    let reserved: usize = running
        .map(|(to_completion, held)| to_completion.saturating_sub(held))
        .sum();
    available.saturating_sub(reserved)
}
