//! A worker: an engine (a step scheduler over a KV block pool) wrapped in a thin actor.
//!
//! - [`engine`]: the interface the actor drives and the settings every engine shares;
//!   [`engines`]: each engine's own rules and the one place that builds an engine from them.
//! - The engines, one folder each with its own rules: [`vllm`] (vLLM v1's step scheduler:
//!   running requests first, then waiting ones FIFO, within a token budget and a sequence limit;
//!   chunked prefill, prefix caching, KV growth and preemption; decode stretches planned at
//!   once) and [`trtllm`] (TensorRT-LLM's `GUARANTEED_NO_EVICT` capacity scheduler on vLLM's
//!   step loop: a request is admitted only when its KV to completion is reserved) and
//!   [`sglang`] (SGLang's scheduler on the same loop: prefill batches first, `lpm` or `fcfs`,
//!   admission against a reserve of future output by `new_token_ratio`, decode retraction).
//! - What the engines share: [`seq`] (one request's state), [`kv`] (the KV blocks: named
//!   (prefix-cacheable) and private, pins, eviction; its table from block name to slot is
//!   `names.rs`, its eviction order `lru.rs`), [`evicted`] (a bounded memory of the blocks a
//!   worker lost, for loss attribution), [`tiers`] (host and disk tiers below the device: blocks
//!   the pool evicts are offloaded there and loaded back), [`plan`] (what a planned step tells the actor),
//!   [`timing`] (how long a step takes) and [`probe`] (the feature clock of calibration).
//! - [`actor`]: the [`Worker`] actor: messages in, timers, acks, hand-offs, faults; its KV
//!   event stream and its answers to replay and snapshot requests are `events.rs`; the ledger
//!   of KV transfers on their way, which every worker shares, is `transfers.rs`.

pub mod actor;
pub mod engine;
pub mod engines;
mod events;
pub mod evicted;
pub mod held_by;
pub mod kv;
mod lru;
mod names;
pub mod plan;
pub mod probe;
pub mod seq;
pub mod sglang;
pub mod tiers;
pub mod timing;
mod transfers;
pub mod trtllm;
pub mod vllm;

pub use actor::{Link, Worker, WorkerSetup, WorkerStats};
pub use transfers::{SharedTransfers, Transfers};
