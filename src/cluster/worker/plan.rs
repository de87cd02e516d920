//! What a planned step tells the worker actor: the log of what scheduling did, what the step's
//! end produced, and the scheduler's own work list.

use crate::engine::Nanos;
use crate::ids::RequestId;

use super::kv::Changes;
use super::seq::Seq;

/// One entry of a plan's log, in the order things happened while scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogItem {
    /// A request was admitted for the first time ([`Seq::first_admission`] says what it found).
    Admitted(RequestId),
    /// Blocks were stored or evicted.
    Kv(Changes),
}

/// What scheduling a step (or a decode stretch) did, for the actor.
#[derive(Debug)]
pub struct Planned<T> {
    /// When the step (or the stretch's last step) ends.
    pub end: Nanos,
    /// When the first step ends (its KV events are published then).
    pub first_end: Nanos,
    /// Steps planned (more than one for a decode stretch).
    pub steps: u32,
    /// Requests in the (first) step's batch.
    pub batch: u32,
    /// Prompt tokens computed in the first step.
    pub prefill_tokens: u64,
    /// Tokens decoded in the first step.
    pub decode_tokens: u64,
    /// Admissions and KV changes, in order.
    pub log: Vec<LogItem>,
    /// Requests that can never fit in this worker's KV (or budget): refused.
    pub rejected: Vec<Seq<T>>,
}

/// What a step's end produced.
#[derive(Debug)]
pub struct Applied<T> {
    /// Requests that produced their last token.
    pub finished: Vec<Seq<T>>,
    /// Requests whose prompt is computed, leaving a prefill worker.
    pub prefilled: Vec<Seq<T>>,
    /// Requests that produced their first token in the step (prefilled ones included).
    pub first_tokens: Vec<RequestId>,
    /// Blocks stored as requests finished (their answers' blocks, which the next turns of their
    /// sessions name): KV events at the step's end.
    pub kv: Vec<Changes>,
}

/// What one running request does in the planned step.
#[derive(Clone, Copy, Debug)]
pub(super) struct Work {
    pub(super) id: RequestId,
    pub(super) tokens: u64,
}

/// What became of the waiting queue's head.
pub(super) enum Admit {
    /// Admitted and scheduled for this much work.
    Scheduled(Work),
    /// Can never fit: refused.
    Rejected,
    /// Does not fit now: admission stops for this step.
    Blocked,
}
