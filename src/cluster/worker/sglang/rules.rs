//! SGLang's scheduling rules (`[engine.sglang]`) and the arithmetic its scheduler does with them:
//! the output reserve, the `new_token_ratio` and its decay, the retraction victim and the ratio
//! after a retraction. Pure, and apart from the step loop, which reads the rules
//! ([`SchedulerConfig::sglang`](crate::cluster::worker::vllm::SchedulerConfig)) while this file
//! names nothing of it. Sources: the module doc of [`super`].

/// SGLang's clip of each request's remaining output in its estimates (`CLIP_MAX_NEW_TOKENS`).
pub const CLIP_MAX_NEW_TOKENS: u64 = 4096;
/// `SGLANG_INIT_NEW_TOKEN_RATIO`: the reserved share of output before conservativeness.
pub const INIT_NEW_TOKEN_RATIO: f64 = 0.7;
/// `SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`: the floor of the ratio, as a share of its start.
pub const MIN_NEW_TOKEN_RATIO_FACTOR: f64 = 0.14;
/// `SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`: decode passes from the start to the floor.
pub const NEW_TOKEN_RATIO_DECAY_STEPS: f64 = 600.0;
/// `SGLANG_RETRACT_DECODE_STEPS`: decode steps of KV a retraction's new ratio keeps per request.
pub const RETRACT_DECODE_STEPS: u64 = 20;
/// Past this many waiting requests `lpm` falls back to `fcfs`.
pub const LPM_FALLBACK_THRESHOLD: usize = 128;
/// `IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD` and `..._DEPRIORITIZE_THRESHOLD`, tokens.
pub const IN_BATCH_PREFIX_TOKENS: u64 = 32;

/// `schedule_policy`: the order in which waiting requests are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulePolicy {
    /// First come, first served (SGLang's default).
    Fcfs,
    /// Longest cached prefix first.
    Lpm,
}

/// The SGLang engine's own rules (`[engine.sglang]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SglangRules {
    /// The waiting queue's order.
    pub schedule_policy: SchedulePolicy,
    /// Running requests at most (`None`: unbounded).
    pub max_running_requests: Option<usize>,
    /// Prompt tokens per prefill pass across requests (`None`: chunked prefill off).
    pub chunked_prefill_size: Option<usize>,
    /// Prompt tokens per prefill pass at most (the first request may exceed it).
    pub max_prefill_tokens: usize,
    /// Scales the reserved share of running requests' output (1.0).
    pub schedule_conservativeness: f64,
    /// Decoding requests join a prefill batch's forward (`--enable-mixed-chunk`; off).
    pub enable_mixed_chunk: bool,
    /// `max_prefill_tokens` is checked against the chunk a request would be admitted with, as
    /// Dynamo's simulator does, not against its whole uncached prompt, as SGLang does.
    pub charge_chunk: bool,
    /// After a waiting request's matched prefix is locked (its evictable blocks pinned, no
    /// longer room), it is checked against the budget again and waits if it no longer fits,
    /// as SGLang's `PrefillAdder.add_one_req` does ("rem_total_tokens may decrease after the
    /// lock acquisition"); the lock stays on for the rest of the pass. Off, the budget is
    /// checked once, before, as Dynamo's simulator does.
    pub recheck_locked_prefix: bool,
}

impl SglangRules {
    /// The ratio's start: `0.7 x schedule_conservativeness`, at most 1.
    pub fn init_new_token_ratio(&self) -> f64 {
        (INIT_NEW_TOKEN_RATIO * self.schedule_conservativeness).min(1.0)
    }

    /// The ratio's floor.
    pub fn min_new_token_ratio(&self) -> f64 {
        (self.init_new_token_ratio() * MIN_NEW_TOKEN_RATIO_FACTOR).min(1.0)
    }

    /// The ratio after one more decode pass without retraction, from `ratio`.
    pub fn decayed(&self, ratio: f64) -> f64 {
        let step = (self.init_new_token_ratio() - self.min_new_token_ratio())
            / NEW_TOKEN_RATIO_DECAY_STEPS;
        (ratio - step).max(self.min_new_token_ratio())
    }
}

/// Rounds `tokens` up to whole pages of `page` tokens.
pub fn ceil_page(tokens: u64, page: usize) -> u64 {
    tokens.div_ceil(page as u64) * page as u64
}

/// The tokens a prefill batch reserves for the future output of running requests, given each
/// one's remaining output: `sum of min(remaining, 4096) x ratio`.
pub fn reserved_output(remaining: impl Iterator<Item = u64>, ratio: f64) -> f64 {
    remaining
        .map(|r| r.min(CLIP_MAX_NEW_TOKENS) as f64 * ratio)
        .sum()
}

/// Which of the running requests, given as (generated tokens, prompt tokens) in admission
/// order, a retraction takes: the fewest generated, then the longest prompt, then the latest.
pub fn retraction_victim(running: &[(u64, u64)]) -> Option<usize> {
    running
        .iter()
        .enumerate()
        .min_by(|(i, a), (j, b)| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(j.cmp(i)))
        .map(|(i, _)| i)
}

/// The ratio after a retraction, over the requests left, given as (generated, max new tokens):
/// `min(1, (sum generated + 20 x n) / (sum max new + 1))`.
pub fn ratio_after_retraction(left: &[(u64, u64)]) -> f64 {
    let generated: u64 = left.iter().map(|r| r.0).sum();
    let max_new: u64 = left.iter().map(|r| r.1).sum();
    ((generated + RETRACT_DECODE_STEPS * left.len() as u64) as f64 / (max_new as f64 + 1.0))
        .min(1.0)
}
