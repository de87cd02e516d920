//! Workloads: where requests come from.
//!
//! Every workload produces [`RequestSpec`]s in arrival order; the engine's client actor replays
//! them. The generators are pure: they take a seeded [`crate::rng::SimRng`] or a file read as a
//! stream, and never touch the clock.
//!
//! - [`lab`]: the lab's repeated-prefix workload and its hit definition.
//! - [`synthetic`]: Zipf-popular shared-prefix groups, Poisson or fixed arrivals, multi-turn sessions.
//! - [`mooncake`]: Mooncake JSONL traces (block hash ids, optional sessions).
//! - [`azure`]: Azure LLM inference CSV traces (lengths only).
//! - [`schedule`]: a rate that varies over the run (a daily sine, piecewise), for synthetic
//!   arrivals and trace speedups.
//! - [`trace`]: options and counters shared by the trace parsers, and their streamed row loop.
//! - [`table`]: a trace read once into a compact table.
//! - [`source`]: a built workload ([`source::Recipe`]) and the requests it makes on demand
//!   ([`source::Source`]): a run holds the requests in flight, not the whole workload.

pub mod azure;
pub mod lab;
pub mod mooncake;
pub mod schedule;
pub mod source;
pub mod synthetic;
pub mod table;
pub mod trace;

use crate::hash::BlockHash;
use crate::ids::RequestId;

/// One request as a workload describes it, before the cluster sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// Position in arrival order, from 0.
    pub id: RequestId,
    /// Open-loop arrival time in virtual nanoseconds from the start of the run. For a later turn
    /// of a session ([`RequestSpec::session`]) it is only a lower bound: the turn also waits for
    /// the previous turn to complete.
    pub arrival_ns: u64,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Tokens to generate.
    pub output_tokens: u32,
    /// Chained names of the prompt's full blocks at the engine's block size.
    pub blocks: Vec<BlockHash>,
    /// The shared-prefix group this request belongs to, for the lab's hit definition (`None`:
    /// not counted as a repeat or a hit).
    pub prefix: Option<u64>,
    /// Blocks of the shared prefix: a repeat request hits when its worker still held all of them.
    pub prefix_blocks: usize,
    /// Closed-loop session link: this turn starts `delay_ns` after the previous turn of the same
    /// session completes.
    pub session: Option<SessionLink>,
    /// The first of `blocks` that no other request of the workload names (`blocks.len()`: every
    /// block may be shared, or the workload cannot tell). Blocks from here on are this request's
    /// own tail: a worker keeps them out of its name table, since only this request could look
    /// them up (see [`KvPool`](crate::cluster::worker::kv::KvPool)).
    pub unshared_from: usize,
    /// Names of the full blocks this request's answer completes, as the next turn of its
    /// session names them (its prompt repeats this prompt and answer): the blocks from the
    /// prompt's last partial block through the last one whose tokens all have KV when the
    /// request finishes (the answer's last token never does). The worker keeps them cached
    /// when the request finishes, as vLLM v1 caches a request's generated blocks (every engine
    /// does here; SGLang 0.5.6.post2 does not: docs/FIDELITY.md, "SGLang's scheduler"). Empty
    /// when nothing names the answer (a trace, a single turn, a last turn).
    pub answer_blocks: Vec<BlockHash>,
}

/// How a turn of a multi-turn session depends on the turn before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLink {
    /// The session's id (any number unique to the session).
    pub session: u64,
    /// The `id` of the previous turn, `None` for the first turn.
    pub after: Option<RequestId>,
    /// Think time after the previous turn completes, ns.
    pub delay_ns: u64,
}
