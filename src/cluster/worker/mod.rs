//! A worker: a step scheduler over a KV block pool, wrapped in a thin actor.
//!
//! - [`scheduler`]: the pure step scheduler (vLLM v1's, as Dynamo's mocker models it): running
//!   requests first, then waiting ones FIFO, within a token budget and a sequence limit; chunked
//!   prefill, prefix caching, KV growth and preemption; decode stretches planned at once.
//!   Admission (`admit.rs`) and decode stretches (`stretch.rs`) are its two larger steps.
//! - [`plan`]: what a planned step tells the actor (its log, what its end produced).
//! - [`seq`]: one request's state in the scheduler.
//! - [`kv`]: the worker's KV blocks: named (prefix-cacheable) and private, pins, eviction.
//!   Its table from block name to slot is `names.rs`, its eviction order `lru.rs`.
//! - [`evicted`]: a bounded memory of the blocks a worker lost, for loss attribution.
//! - [`timing`]: how long a step takes.
//! - [`actor`]: the [`Worker`] actor: messages in, timers, acks, hand-offs, faults; its KV
//!   event stream and its answers to replay and snapshot requests are `events.rs`.

pub mod actor;
mod admit;
mod events;
pub mod evicted;
pub mod kv;
mod lru;
mod names;
pub mod plan;
pub mod probe;
pub mod scheduler;
pub mod seq;
mod stretch;
pub mod timing;

#[cfg(test)]
mod tests;

pub use actor::{Link, Worker, WorkerSetup, WorkerStats};
