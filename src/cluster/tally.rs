//! The request-level outcome of a run, tallied online from the acks as the client receives them.

use super::messages::{Ack, Misses};
use crate::round::rate;

/// The request-level part of a report, tallied from the acks.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Completed requests.
    pub acks: u64,
    /// When the last request completed, ns.
    pub last_done_ns: u64,
    /// Repeat requests.
    pub repeat_requests: usize,
    /// Hits.
    pub hits: usize,
    /// Hits per prefill worker.
    pub hits_by_worker: Vec<u64>,
    /// Prompt blocks.
    pub prompt_blocks: u64,
    /// Cached blocks.
    pub cached_blocks: u64,
    /// Predicted blocks.
    pub predicted_blocks: u64,
    /// Misses by cause.
    pub misses: Misses,
    /// TTFT, e2e and queue time of each request, ns.
    pub ttft_ns: Vec<u64>,
    /// End-to-end times, ns.
    pub e2e_ns: Vec<u64>,
    /// Queue times, ns.
    pub queue_ns: Vec<u64>,
}

impl Tally {
    /// An empty tally over `workers` routable workers.
    pub fn new(workers: usize) -> Self {
        Tally {
            hits_by_worker: vec![0; workers],
            ..Tally::default()
        }
    }

    /// Adds one completed request.
    pub fn add(&mut self, a: &Ack) {
        self.acks += 1;
        self.last_done_ns = self.last_done_ns.max(a.done_ns);
        self.repeat_requests += usize::from(a.repeat);
        if a.repeat && a.prefix_hit {
            self.hits += 1;
            self.hits_by_worker[a.prefill_worker.index()] += 1;
        }
        self.prompt_blocks += u64::from(a.prompt_blocks);
        self.cached_blocks += u64::from(a.cached_blocks);
        self.predicted_blocks += u64::from(a.predicted_blocks);
        self.misses.add(&a.misses);
        self.ttft_ns.push(a.first_token_ns - a.arrived_ns);
        self.e2e_ns.push(a.done_ns - a.arrived_ns);
        self.queue_ns.push(a.started_ns - a.arrived_ns);
    }

    /// Cached / prompt blocks, 4 places.
    pub fn block_hit_rate(&self) -> f64 {
        rate(self.cached_blocks as usize, self.prompt_blocks as usize)
    }
}
