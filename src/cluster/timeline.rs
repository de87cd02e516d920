//! What happened when, for a timeline viewer: each worker's steps and its KV and queue levels,
//! each request's phases, and the moments something was lost (KV events dropped, blocks
//! evicted, requests preempted, workers restarted).
//!
//! Instrumentation like the ground truth: actors that hold the shared [`Timeline`] note marks as
//! they happen, only when a run asked for one (`--perfetto`); nothing reads it during the run.
//! [`crate::perfetto`] writes it out.

use std::cell::RefCell;
use std::rc::Rc;

use crate::engine::Nanos;
use crate::ids::{RequestId, WorkerId};

/// The handle actors share (one simulation runs on one thread).
pub type SharedTimeline = Rc<RefCell<Timeline>>;

/// The marks of one run, in the order they were noted.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Every mark.
    pub marks: Vec<Mark>,
}

/// One thing that happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Mark {
    /// A worker ran a step (or a decode stretch of `steps` steps) from `start` to `end`.
    Step {
        /// The worker.
        worker: WorkerId,
        /// When it started, ns.
        start: Nanos,
        /// When it ended, ns (earlier than planned if the worker went down).
        end: Nanos,
        /// Forward passes (more than one for a decode stretch).
        steps: u32,
        /// Requests in the batch.
        batch: u32,
        /// Prompt tokens computed in the first pass.
        prefill_tokens: u64,
        /// Tokens decoded in the first pass.
        decode_tokens: u64,
    },
    /// A worker's levels when it planned a step.
    Levels {
        /// The worker.
        worker: WorkerId,
        /// When, ns.
        at: Nanos,
        /// KV blocks its running requests hold.
        kv_blocks: u64,
        /// KV blocks in its cache: those running requests hold plus cached, evictable ones.
        resident_blocks: u64,
        /// Requests waiting.
        waiting: u32,
        /// Requests running.
        running: u32,
    },
    /// A worker evicted blocks.
    Evicted {
        /// The worker.
        worker: WorkerId,
        /// When, ns.
        at: Nanos,
        /// How many.
        blocks: u32,
    },
    /// A worker preempted requests (to recompute them later).
    Preempted {
        /// The worker.
        worker: WorkerId,
        /// When, ns.
        at: Nanos,
        /// How many.
        requests: u32,
    },
    /// A worker of a scaling pool was `starting` (loading its model), `serving` or `draining`
    /// from `start` to `end`.
    Phase {
        /// The worker.
        worker: WorkerId,
        /// The phase.
        kind: &'static str,
        /// From, ns.
        start: Nanos,
        /// To, ns.
        end: Nanos,
    },
    /// A worker went down (its cache and requests lost).
    Restart {
        /// The worker.
        worker: WorkerId,
        /// When, ns.
        at: Nanos,
    },
    /// The bus lost a KV event on its way to a router.
    Dropped {
        /// The worker that published it.
        worker: WorkerId,
        /// When, ns.
        at: Nanos,
        /// Its kind (`KvStored`, ...).
        kind: &'static str,
    },
    /// A request's life, noted when it completed.
    Request {
        /// The request.
        id: RequestId,
        /// The worker that prefilled it.
        prefill_worker: WorkerId,
        /// The worker that produced its output.
        worker: WorkerId,
        /// Arrival at the router, ns.
        arrived: Nanos,
        /// Prefill start (first admission), ns.
        started: Nanos,
        /// First token, ns.
        first_token: Nanos,
        /// When its KV reached the decode worker (disaggregated), ns.
        transferred: Option<Nanos>,
        /// Last token, ns.
        done: Nanos,
        /// Refused: it could never fit.
        rejected: bool,
    },
}

impl Timeline {
    /// An empty timeline to share.
    pub fn shared() -> SharedTimeline {
        Rc::new(RefCell::new(Timeline::default()))
    }

    /// Notes `mark`.
    pub fn note(&mut self, mark: Mark) {
        self.marks.push(mark);
    }
}

/// Notes `mark` on `timeline`, if there is one (the mark is built only then).
pub fn note(timeline: &Option<SharedTimeline>, mark: impl FnOnce() -> Mark) {
    if let Some(t) = timeline {
        t.borrow_mut().note(mark());
    }
}
