//! # dynsim — a deterministic simulator of an LLM serving cluster
//!
//! dynsim answers the questions serving engineers ask before they spend GPU time: how many cache
//! hits does KV-aware routing buy over round-robin or random? What happens when workers do not
//! publish their KV events, or the event bus drops or delays them? How much KV capacity is needed?
//! Does disaggregated prefill/decode pay for its KV transfer on this link?
//!
//! ## Concepts
//!
//! - **Token, block, block name.** A prompt is a slice of `u32` tokens, cut into full blocks of
//!   `block_size` tokens (the tail is dropped). Each block gets a [`BlockHash`] that chains the
//!   previous block's name with this block's tokens ([`block_hashes`]), so an equal name at
//!   position *i* means the whole prefix up to block *i* is equal.
//! - **Overlap.** How many blocks a worker holds counted from the front, stopping at the first
//!   miss ([`overlap`]): a block is only reusable if every block before it is.
//! - **Index.** The router's belief of which worker holds which block ([`index::KvIndex`]). It is
//!   fed either by the router's own decisions (self-tracking, "kv") or only by KV events from the
//!   workers ("kv-events"). An events router that records its own decisions would hide the failure
//!   where workers publish nothing — which in real deployments degrades silently to round-robin.
//! - **Routing rule.** Most overlap, then the least load, then the lowest index ([`KvRouter`]).
//! - **Hit (lab definition).** A request whose prefix was seen before and that went to a worker
//!   that had processed that prefix; first-seen prefixes are not in the denominator.
//! - **KV transfer.** Disaggregated serving moves a prompt's KV from the prefill to the decode GPU:
//!   [`disagg`] holds the formulas (GB/s = 1e9 bytes/s, MiB = 2^20 bytes).
//!
//! ## The simulator
//!
//! - **Actors and messages.** A client, one or more router replicas, a KV event bus and workers
//!   are actors ([`cluster::Node`]) exchanging one message type ([`protocol::messages::Msg`]): a
//!   `Request`, its `HandBack` when a worker fails, KV events (`Kv`, each stamped with its
//!   worker's epoch and sequence number), `PrefillDone`, `Ack`, a worker's own
//!   `StepStart`/`StepEnd` timers, and the control traffic that crosses the bus (`Via`: replay
//!   and snapshot requests and answers, replicas' notes). Where each actor lives is the run's
//!   [`cluster::topology::Topology`].
//! - **Scheduler.** [`engine::Simulation`] owns virtual time (integer nanoseconds) and one queue of
//!   pending deliveries ordered by `(time, seq)`, `seq` assigned when a message is sent. It
//!   delivers one message at a time to the target actor, which replies only through its
//!   [`engine::Context`]. One seeded generator serves the run, so the same scenario and seed give
//!   a byte-identical trace.
//! - **Workers step.** A worker advances in forward passes, as vLLM's scheduler does
//!   ([`cluster::worker::vllm`]): running requests first (one decode token, or the next
//!   prompt chunk), then waiting ones, within a token budget, a sequence limit and its KV blocks;
//!   prefix caching, KV growth and preemption; each step's duration from Dynamo's mocker
//!   polynomials. Requests share each step, so latency answers to load. The worker actor drives
//!   its engine through one interface ([`cluster::worker::engine::Engine`]); `engine.kind =
//!   "trtllm"` runs TensorRT-LLM's capacity rule instead ([`cluster::worker::trtllm`]: each
//!   admitted request's KV reserved to completion, never preempted), `"sglang"` SGLang's
//!   scheduler ([`cluster::worker::sglang`]: prefill passes apart from decode passes, `lpm` or
//!   `fcfs`, admission against a reserve of running output by `new_token_ratio`, retraction).
//! - **KV tiers.** With `[kv.host]` (and `[kv.disk]` below it) the blocks a worker's device
//!   evicts are offloaded to host memory, host's evictions to disk, and a request whose prefix
//!   continues there loads it back over the tier's link instead of recomputing it
//!   ([`cluster::worker::tiers`], owned by the shared KV pool, so every engine has it). KV events
//!   say which tier a block is on; Dynamo's router credits lower-tier blocks
//!   (`host_cache_hit_weight`, `disk_cache_hit_weight`), and the report splits reuse by tier.
//!   With `scope = "cluster"` the host tier is one pool for every worker (one capacity, one
//!   LRU, each worker's own link), whose blocks every worker's event stream reports.
//! - **Routing policies.** The router runs a [`router::policy::RoutingPolicy`] chosen by name from
//!   [`router::registry`]: round-robin, random, the lab rule fed by the router's own decisions or
//!   by KV events, the older Dynamo-style cost, a TTL-forgetting approximation, Dynamo's current
//!   KV router, SGLang's, llm-d's and vLLM's production-stack rules, least-loaded and
//!   power-of-two.
//! - **Event streams and their gaps.** A router fed by events tracks each worker's stream
//!   ([`router::stream`]): a skipped sequence number, or silence after it sent work, is a gap,
//!   recovered per `router.on_gap` (ignore, replay from the worker's buffer, resync from a
//!   snapshot, or predict from its own decisions meanwhile). How right its index stayed is
//!   measured against the workers' caches ([`cluster::audit`]: precision and recall).
//! - **Replicas.** Several routers, each with its own index and load view, optionally telling
//!   each other what they routed (`router.sync`).
//! - **Workers that come and go.** A pool's size may change during a run: `[[scale]]` steps, a
//!   planner in the loop ([`planner`]: `threshold`, `dynamo-throughput`, `dynamo-load`, acting
//!   every interval on what a real one observes) or the stepping API ([`run::Session`]). A
//!   joining worker serves `startup_s` after it starts, with an empty cache, and the routers
//!   learn of it when it registers; a leaving one drains or is removed, its requests routed
//!   again. The ledger ([`cluster::membership`]) counts the GPU-seconds paid; the report adds
//!   replicas over time, scale events, SLA attainment and goodput against `[sla]`.
//! - **Scenario.** A TOML file ([`scenario::Scenario`]): workload, cluster, router, bus, timing,
//!   scheduler, disaggregation and faults, every key with a default. [`run::run_scenario`] runs
//!   one and returns a [`report::Report`].
//! - **Workloads stream; memory follows the cluster.** A built workload
//!   ([`workload::source::Recipe`]) makes each request when it is sent, and a trace is read a line
//!   at a time, so a run holds its cluster's KV, its requests in flight and 32 bytes per request
//!   for the report. What could still grow with a run is estimated before it starts and refused
//!   past the budget ([`budget`]); limits on times, lengths and sizes are in [`limits`].
//! - **The silent failure.** An events-fed router whose workers publish nothing (or whose bus
//!   loses the events) routes knowing no worker's cache (`kv-events` exactly as round-robin,
//!   Dynamo's rule at the level of random choice), and real deployments raise no
//!   error. dynsim puts a warning in the report when a kv-events run applied no event, or far
//!   fewer than were published.
//! - **Where the misses come from.** Every missed prompt block is attributed to one cause:
//!   `cold` (nobody had computed it when the router decided), `routing` (another worker held
//!   it), `stale_index` (the router believed the chosen worker held it) or `capacity` (the chosen
//!   worker had it and lost it, or it was evicted everywhere).
//! - **Real deployments.** A scenario's `[deployment]` names a model (a Hugging Face id, or a
//!   model file), a GPU, tensor parallelism and precision ([`deployment`]); dynsim derives the
//!   weights per GPU, the KV bytes per token, the KV capacity vLLM would find in memory, and each
//!   step's time from the roofline of its work on the GPU, weighted by a profile fitted on
//!   measured servers. [`bench`](mod@bench) predicts a closed-loop benchmark of one deployment;
//!   [`calibrate`] fits a profile to measured benchmark rows (one simulation per row: a feature
//!   clock makes each row's mean TTFT and TPOT linear in the coefficients).
//! - **Own tails.** A trace request's blocks from its first id that no other row names
//!   ([`workload::RequestSpec::unshared_from`]) can only be looked up by that request. When no
//!   request is routed twice (no faults, no worker removed: no hand-back), workers store them
//!   outside their name tables and the
//!   routers' indexes leave them out: half of a trace's blocks, with results unchanged (a
//!   property test compares both ways; the index audit and loss attribution see the same
//!   numbers, as neither looks up another request's own tail). A single-turn synthetic
//!   request's blocks past its shared prefix are its own tail too (fresh tokens, see
//!   [`workload::synthetic`]). The mark travels as one type,
//!   [`protocol::kv_event::Blocks`] (a `KvStored` event's blocks, a routed request's), which
//!   everything but the pool, the router actor and the `dynamo` policy's count of active
//!   blocks reads as a plain list of names.
//!
//! ```
//! use std::path::Path;
//! use dynsim::scenario::Scenario;
//!
//! // The lab workload on 2 workers, an events router, workers publishing nothing.
//! let mut s = Scenario::default();
//! s.router.policy = "kv-events".into();
//! s.bus.publish = false;
//! let report = dynsim::run::run_scenario(&s, Path::new("."), None).unwrap();
//! assert_eq!(report.events.applied, 0);
//! assert!(report.warnings[0].contains("bus.publish = false"));
//! assert_eq!(report.acks, report.requests as u64); // requests are never lost, only events
//! ```
//!
//! ## The lab calculations
//!
//! ```
//! use dynsim::lab::{run_sim, LabMode, SimParams};
//!
//! // The lab's defaults: 2 workers, 12 prefixes x 6 repetitions, CPython's generator, seed 1.
//! let kv = run_sim(&SimParams { mode: LabMode::Kv, ..SimParams::default() });
//! let rr = run_sim(&SimParams { mode: LabMode::Rr, ..SimParams::default() });
//! assert_eq!((kv.hits, rr.hits), (60, 49));
//!
//! // Workers that publish no KV events leave the events router blind: it routes like rr.
//! let blind = run_sim(&SimParams { mode: LabMode::KvEvents, publish: false, ..SimParams::default() });
//! assert_eq!(blind.hits, rr.hits);
//!
//! // Qwen3-0.6B's KV: 114,688 bytes per token; 1,500 tokens over 0.608 GB/s take 282.9 ms.
//! let bpt = dynsim::disagg::ModelShape::default().bytes_per_token();
//! assert_eq!(bpt, 114_688);
//! assert_eq!(dynsim::round::round_py(dynsim::disagg::transfer_ms(1500, bpt, 0.608), 1), 282.9);
//! ```
//!
//! ## Layout
//!
//! Pure logic (no channels, threads, clocks or files): [`hash`], [`ids`], [`protocol`] (what crosses the bus: messages, KV events, load signals), [`index`],
//! [`worker_set`], [`router`], [`disagg`], [`summarize`], [`round`], [`rng`], [`py_random`],
//! [`sketch`], [`workload`] (all but its trace reader, which reads ahead on a thread), [`lab`], and
//! the pure parts of the cluster (the worker's step
//! scheduler and KV pool in [`cluster::worker`], [`cluster::bus::BusModel`]). The engine ([`engine`]) and the thin actors around the pure core
//! ([`cluster`]), wired from a [`scenario`] by [`run`] (which writes `--trace` and `--perfetto`
//! on threads beside the simulation's); results in [`report`] (which assembles a finished run's
//! report, [`report::assemble`]), [`trace`], [`diff`].
//! At the edge: [`output`] (the one file writer: atomic for regular files, in place for devices
//! and FIFOs, `-` for stdout), [`interrupt`] (SIGINT/SIGTERM stop work cleanly), [`schema`]
//! (every scenario key, from the types), [`error`] (one-line errors), [`cli`]; [`metrics`] names
//! the report's metrics for charts and SLAs; [`sweep`]
//! runs a scenario over a grid of settings on threads and writes results and plots, [`plan`]
//! searches for the fewest workers (or the highest load) meeting SLAs, [`compare`] runs
//! scenarios side by side, [`perfetto`] writes a run's timeline; [`parallel`] runs their
//! simulations on threads and [`chart`] draws their line charts.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod budget;
pub mod calibrate;
pub mod chart;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod deployment;
pub mod diff;
pub mod disagg;
pub mod engine;
pub mod error;
pub mod fuzzing;
pub mod hash;
pub mod hashers;
pub mod ids;
pub mod index;
pub mod interrupt;
pub mod lab;
pub mod limits;
pub mod metrics;
pub mod output;
pub mod parallel;
pub mod perfetto;
pub mod plan;
pub mod planner;
pub mod protocol;
pub mod py_random;
pub mod report;
pub mod rng;
pub mod round;
pub mod router;
pub mod run;
pub mod scenario;
pub mod schema;
pub mod sketch;
pub mod summarize;
pub mod sweep;
pub mod toml_file;
pub mod trace;
pub mod warnings;
pub mod worker_set;
pub mod workload;

use std::collections::HashSet;
use std::hash::BuildHasher;

pub use error::{Error, Result};
pub use hash::{block_hashes, BlockHash};
pub use router::KvRouter;

/// Blocks of `hashes` that `cached` holds, counted from the front and stopping at the first miss.
///
/// Counting every match instead (the lab's second classic mistake) credits blocks that cannot be
/// reused: a block's KV is only valid after every block before it.
pub fn overlap<S: BuildHasher>(hashes: &[BlockHash], cached: &HashSet<BlockHash, S>) -> usize {
    hashes.iter().take_while(|h| cached.contains(h)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_stops_at_the_first_miss() {
        let h = block_hashes(&(0..64).collect::<Vec<u32>>(), 16);
        let cached: HashSet<BlockHash> = [h[0], h[1], h[3]].into_iter().collect();
        assert_eq!(overlap(&h, &cached), 2); // not 3: block 3 is unusable without block 2
        assert_eq!(overlap(&h[1..], &cached), 1);
        assert_eq!(overlap(&[], &cached), 0);
    }
}
