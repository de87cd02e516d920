//! One request's state inside a worker's step scheduler: how far its prompt is computed, how many
//! tokens it has generated, and which KV blocks it holds.
//!
//! Token counts follow vLLM's: `computed` tokens have KV; a request's *target* is its prompt plus
//! the tokens generated so far (`prompt + generated`), and a step that brings `computed` to the
//! target produces one token. So a prompt's last chunk produces the first token, and each later
//! step computes the KV of the last generated token and produces the next.

use std::sync::Arc;

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::ids::RequestId;
use crate::workload::RequestSpec;

/// What a request needs before it can decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqKind {
    /// Its prompt is to be computed here (prefix caching applies to its named blocks).
    Prompt,
    /// Its prompt's KV arrived from a prefill worker; it only decodes here.
    Transferred,
}

/// What the first admission found, kept for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstAdmission {
    /// When it was admitted (the start of the step that first scheduled it), ns.
    pub at_ns: Nanos,
    /// Named prompt blocks the worker held, counted from the front (the true hit).
    pub held_blocks: usize,
    /// Named prompt blocks the worker held or remembered having held (evicted not long ago),
    /// counted from the front.
    pub remembered_blocks: usize,
    /// Named prompt blocks after `held_blocks` loaded back from the lower tiers (host and disk)
    /// instead of computed.
    pub lower_blocks: usize,
    /// Prompt tokens taken from the cache instead of computed (the hit capped one token short
    /// of the sequence, as vLLM caps it), the lower tiers' included.
    pub cached_tokens: u64,
    /// Of `cached_tokens`, those loaded back from the host tier.
    pub host_tokens: u64,
    /// Of `cached_tokens`, those loaded back from the disk tier.
    pub disk_tokens: u64,
}

/// A request in a worker's scheduler, carrying the actor's own data `payload`.
#[derive(Clone, Debug)]
pub struct Seq<T> {
    /// The actor's data about the request.
    pub payload: T,
    /// `spec.id`, kept beside the counters: every step names each request it schedules, and
    /// reading it through the spec, another allocation, cost a cache miss per request and step
    /// on a busy worker.
    id: RequestId,
    pub(super) spec: Arc<RequestSpec>,
    pub(super) kind: SeqKind,
    /// Computed on the decode side of a disaggregated pair: never handed off.
    pub(super) decode_side: bool,
    pub(super) prompt: u64,
    /// Tokens it generates here, `hidden` included.
    pub(super) output: u64,
    /// Tokens among `output` the client never gets: a transferred request's first (it stands
    /// for the prefill worker's token, which is discarded: the decode worker makes the first
    /// token the client gets, one decode step after the KV lands).
    pub(super) hidden: u64,
    /// Named blocks usable for prefix caching (0 on the decode side).
    pub(super) named: usize,
    pub(super) generated: u64,
    pub(super) computed: u64,
    pub(super) held_named: usize,
    /// The pool's slots of its held named blocks (its handle for releasing them).
    pub(super) slots: Vec<u32>,
    /// Its named blocks from here on are its own tail, stored out of the pool's name table
    /// (`usize::MAX`: none; see [`Seq::list_every_block`]).
    pub(super) unlisted_from: usize,
    pub(super) private: usize,
    /// The output tokens whose KV the engine's cache keeps, with the prompt's, when the request
    /// finishes: `None` every full block (vLLM, TensorRT-LLM); under SGLang the output its
    /// `fill_ids` held at its last admission or mixed pass (`cache_finished_req` inserts
    /// `fill_ids`, which decode passes do not extend).
    pub(super) kept_output: Option<u64>,
    pub(super) first: Option<FirstAdmission>,
    pub(super) first_token_ns: Option<Nanos>,
    pub(super) last_token_ns: Option<Nanos>,
    pub(super) preemptions: u32,
}

impl<T> Seq<T> {
    /// A request whose prompt this worker computes (`decode_side`: it stays here afterwards even
    /// if the worker is a prefill worker, and uses no prefix caching).
    pub fn prompt(
        spec: Arc<RequestSpec>,
        payload: T,
        block_size: usize,
        decode_side: bool,
    ) -> Self {
        // An empty prompt is computed as one token: a tokenizer always adds at least a
        // start-of-sequence token, and the scheduler's arithmetic needs a first token to compute.
        let prompt = u64::from(spec.input_tokens.max(1));
        let named = if decode_side {
            0
        } else {
            spec.blocks
                .len()
                .min(prompt.div_ceil(block_size as u64) as usize)
        };
        Seq {
            payload,
            id: spec.id,
            kind: SeqKind::Prompt,
            decode_side,
            prompt,
            output: u64::from(spec.output_tokens.max(1)),
            hidden: 0,
            named,
            generated: 0,
            computed: 0,
            held_named: 0,
            slots: Vec::new(),
            unlisted_from: spec.unshared_from,
            private: 0,
            kept_output: None,
            first: None,
            first_token_ns: None,
            last_token_ns: None,
            preemptions: 0,
            spec,
        }
    }

    /// A request whose prompt's KV arrived from a prefill worker. The prefill worker's token
    /// counts as generated on admission but is hidden: every token the client gets is made
    /// here, the first by the first decode step (as in Dynamo: aisimulate-core 0.13.0,
    /// `src/replay/disagg.rs`, records tokens from decode workers' output only).
    pub fn transferred(spec: Arc<RequestSpec>, payload: T) -> Self {
        let mut s = Seq::prompt(spec, payload, 1, true);
        s.kind = SeqKind::Transferred;
        s.hidden = 1;
        s.output += 1;
        s
    }

    /// Stores every named block of this request in the pool's name table, its own tail too: for
    /// a request that may look its tail up again here (one handed back to the router may come
    /// back to a worker that computed part of it).
    pub fn list_every_block(&mut self) {
        self.unlisted_from = usize::MAX;
    }

    /// The request's id.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The workload's description of it.
    pub fn spec(&self) -> &Arc<RequestSpec> {
        &self.spec
    }

    /// Tokens generated so far that the client gets.
    pub fn generated(&self) -> u64 {
        self.generated.saturating_sub(self.hidden)
    }

    /// Tokens it generates in all that the client gets.
    pub fn output(&self) -> u64 {
        self.output - self.hidden
    }

    /// What its first admission found (`None` until admitted).
    pub fn first_admission(&self) -> Option<FirstAdmission> {
        self.first
    }

    /// When it produced its first token.
    pub fn first_token_ns(&self) -> Option<Nanos> {
        self.first_token_ns
    }

    /// When it produced its latest token.
    pub fn last_token_ns(&self) -> Option<Nanos> {
        self.last_token_ns
    }

    /// Times it was preempted.
    pub fn preemptions(&self) -> u32 {
        self.preemptions
    }

    /// Prompt tokens.
    pub fn prompt_tokens(&self) -> u64 {
        self.prompt
    }

    /// Tokens whose KV it has.
    pub fn computed(&self) -> u64 {
        self.computed
    }

    /// Prompt tokens it has still to compute while it waits (none for a transferred prompt).
    pub(super) fn waiting_prompt_tokens(&self) -> u64 {
        match self.kind {
            SeqKind::Prompt => self.prompt,
            SeqKind::Transferred => 0,
        }
    }

    /// The named blocks prefix caching may use.
    pub(super) fn names(&self) -> &[BlockHash] {
        &self.spec.blocks[..self.named]
    }

    /// The computed count at which the next token comes out.
    pub(super) fn target(&self) -> u64 {
        self.prompt + self.generated
    }

    /// Named blocks complete once `computed` tokens have KV (a named block that covers the
    /// prompt's partial tail is complete with the prompt).
    pub(super) fn complete_named(&self, computed: u64, block_size: usize) -> usize {
        if computed >= self.prompt {
            self.named
        } else {
            self.named.min((computed / block_size as u64) as usize)
        }
    }

    /// Blocks it must hold with `computed` tokens of KV: (named, private).
    pub(super) fn blocks_for(&self, computed: u64, block_size: usize) -> (usize, usize) {
        let total = computed.div_ceil(block_size as u64) as usize;
        let named = self.complete_named(computed, block_size);
        (named, total.saturating_sub(named))
    }

    /// Blocks its sequence needs at most when it produces `output` tokens here: the KV of the
    /// prompt and of every generated token but the last (whose KV is never computed).
    pub(super) fn max_blocks(&self, output: u64, block_size: usize) -> usize {
        (self.prompt + output.max(1) - 1).div_ceil(block_size as u64) as usize
    }
}
