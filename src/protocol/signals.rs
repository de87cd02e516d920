//! Load signals a worker exposes, as its engine's metrics do (vLLM's `num_requests_waiting`,
//! `num_requests_running`, `kv_cache_usage_perc`) plus the prefill backlog and decode KV a
//! router may track. A router sees them through a snapshot refreshed every
//! `router.signal_refresh_ms` (0: exact at each decision), never live in between: that lag is
//! what a scraping router such as llm-d's (50 ms) works with.

/// One worker's load, as last seen by the router.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkerSignals {
    /// Requests waiting to be admitted.
    pub waiting: u32,
    /// Requests running (admitted and not finished).
    pub running: u32,
    /// Prompt tokens not yet computed, of running and waiting requests.
    pub prefill_tokens: u64,
    /// KV blocks running requests hold.
    pub decode_blocks: u64,
    /// Share of the KV capacity running requests hold (0 with unbounded KV).
    pub kv_usage: f64,
}
