//! The request-level outcome of a run, tallied online from the acks as the client receives them.

use crate::protocol::messages::{Ack, Misses};
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
    /// Blocks after the cached ones loaded back from a lower tier.
    pub loaded_blocks: u64,
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
    /// Time per output token after the first, of requests with two or more, ns.
    pub tpot_ns: Vec<u64>,
    /// Requests refused by a worker (never fit its KV).
    pub rejected: u64,
    /// Prompt tokens of completed requests.
    pub input_tokens: u64,
    /// Prompt tokens taken from a cache instead of computed, at first admission (lower tiers
    /// included).
    pub cached_tokens: u64,
    /// Of `cached_tokens`, those loaded back from a host tier.
    pub host_tokens: u64,
    /// Of `cached_tokens`, those loaded back from a disk tier.
    pub disk_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Preemptions the completed requests went through.
    pub preemptions: u64,
}

impl Tally {
    /// An empty tally over `workers` routable workers.
    pub fn new(workers: usize) -> Self {
        Tally {
            hits_by_worker: vec![0; workers],
            ..Tally::default()
        }
    }

    /// Adds one completed (or rejected) request. A rejected request counts only as rejected.
    pub fn add(&mut self, a: &Ack) {
        self.acks += 1;
        self.last_done_ns = self.last_done_ns.max(a.done_ns);
        if a.rejected {
            self.rejected += 1;
            return;
        }
        self.input_tokens += u64::from(a.input_tokens);
        self.cached_tokens += a.cached_tokens;
        self.host_tokens += a.host_tokens;
        self.disk_tokens += a.disk_tokens;
        self.output_tokens += a.output_tokens;
        self.preemptions += u64::from(a.preemptions);
        if a.output_tokens >= 2 {
            let per = (a.done_ns - a.first_token_ns) as f64 / (a.output_tokens - 1) as f64;
            self.tpot_ns.push(per.round() as u64);
        }
        self.repeat_requests += usize::from(a.repeat);
        if a.repeat && a.prefix_hit {
            self.hits += 1;
            self.hits_by_worker[a.prefill_worker.index()] += 1;
        }
        self.prompt_blocks += u64::from(a.prompt_blocks);
        self.cached_blocks += u64::from(a.cached_blocks);
        self.loaded_blocks += u64::from(a.loaded_blocks);
        self.predicted_blocks += u64::from(a.predicted_blocks);
        if let Some(m) = &a.misses {
            self.misses.add(m);
        }
        self.ttft_ns.push(a.first_token_ns - a.arrived_ns);
        self.e2e_ns.push(a.done_ns - a.arrived_ns);
        self.queue_ns.push(a.started_ns - a.arrived_ns);
    }

    /// Prompt tokens taken from a cache / prompt tokens, 4 places (Dynamo's prefix reuse).
    pub fn prefix_reuse(&self) -> f64 {
        rate(self.cached_tokens as usize, self.input_tokens as usize)
    }

    /// Cached / prompt blocks, 4 places.
    pub fn block_hit_rate(&self) -> f64 {
        rate(self.cached_blocks as usize, self.prompt_blocks as usize)
    }
}
