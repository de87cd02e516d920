//! Admission: whether the head of a worker's waiting queue starts in this step, and where its
//! computation starts (its capped cached prefix, or a transferred prompt's KV).

use crate::engine::Nanos;

use super::{Admission, StepScheduler};
use crate::cluster::worker::kv::Changes;
use crate::cluster::worker::plan::{Admit, LogItem, Planned, Work};
use crate::cluster::worker::seq::{FirstAdmission, Seq, SeqKind};
use crate::cluster::worker::trtllm;

impl<T> StepScheduler<T> {
    /// Blocks of the head's first `pin` (its cached prefix) that running requests hold.
    fn pinned_prefix(&self, pin: usize) -> usize {
        let head = self.waiting.front().expect("checked non-empty");
        let pool = self.pool.borrow();
        head.names()[..pin]
            .iter()
            .filter(|b| pool.is_pinned(**b))
            .count()
    }

    /// The output tokens `s` produces here: all of them, or on a disaggregated prefill worker
    /// its first only (Dynamo sends the prefill worker the request with `max_tokens` 1).
    fn output_here(&self, s: &Seq<T>) -> u64 {
        if self.cfg.prefill_only && !s.decode_side {
            1
        } else {
            s.output
        }
    }

    /// Blocks `s` holds by its completion here: its prompt and every output token (on a
    /// disaggregated prefill worker, its first only), as TensorRT-LLM reserves them.
    fn to_completion_blocks(&self, s: &Seq<T>) -> usize {
        trtllm::to_completion_blocks(s.prompt + self.output_here(s), self.cfg.block_size)
    }

    /// The computed count at which `head`'s next token comes out (a transferred request's
    /// first step computes the KV of the prefill worker's token, hidden, and makes the first).
    pub(in crate::cluster::worker) fn head_target(head: &Seq<T>) -> u64 {
        match head.kind {
            SeqKind::Transferred => head.prompt + head.generated.max(1),
            SeqKind::Prompt => head.target(),
        }
    }

    /// Where the head of the waiting queue would start computing: (cached blocks held,
    /// cached or remembered blocks, start token), its cached prefix capped one token short of
    /// its target, or a transferred prompt's end.
    pub(in crate::cluster::worker) fn head_start(&self) -> (usize, usize, u64) {
        let bs = self.cfg.block_size;
        let head = self.waiting.front().expect("checked non-empty");
        match head.kind {
            SeqKind::Transferred => (0, 0, head.prompt),
            SeqKind::Prompt => {
                let pool = self.pool.borrow();
                let held = pool.cached_prefix(head.names());
                let remembered = if self.cfg.attribute_misses {
                    held + pool.remembered_prefix(&head.names()[held..])
                } else {
                    held
                };
                // The device's prefix continues on the lower tiers, which load it back.
                let lower: usize = if self.tiered {
                    pool.lower_prefix(&head.names()[held..]).iter().sum()
                } else {
                    0
                };
                let held_tokens = ((held + lower) as u64 * bs as u64).min(head.prompt);
                let cap = (Self::head_target(head) - 1) / bs as u64 * bs as u64;
                let start = held_tokens.min(cap);
                // A lower continuation shorter than `[kv.host] min_load_tokens` is recomputed
                // (SGLang HiCache's `load_back_threshold`: all of it or none).
                let on_device = (held as u64 * bs as u64).min(head.prompt).min(cap);
                let start = if start - on_device < pool.min_load_tokens() {
                    on_device
                } else {
                    start
                };
                (held, remembered, start)
            }
        }
    }

    /// Tries to admit the head of the waiting queue with `budget` tokens left.
    pub(in crate::cluster::worker) fn admit_head(
        &mut self,
        now: Nanos,
        budget: u64,
        out: &mut Planned<T>,
    ) -> Admit {
        if self.admission_held {
            return Admit::Blocked;
        }
        let bs = self.cfg.block_size;
        let head = self.waiting.front().expect("checked non-empty");
        // Longer than the KV can ever hold, or than the server accepts (vLLM refuses a request
        // past max_model_len with an error). A disaggregated prefill worker is asked for the
        // prompt and one token: the whole request is the decode worker's to check.
        let output = self.output_here(head);
        let footprint = match self.cfg.admission {
            Admission::ToCompletion => self.to_completion_blocks(head),
            Admission::Chunk | Admission::WholePrompt => head.max_blocks(output, bs),
        };
        let too_big = self.cfg.kv_capacity.is_some_and(|cap| footprint > cap)
            || self
                .cfg
                .max_model_len
                .is_some_and(|m| head.prompt + output - head.hidden > m);
        let target = Self::head_target(head);
        let too_long = !self.cfg.chunked_prefill
            && head.kind == SeqKind::Prompt
            && self
                .cfg
                .max_num_batched_tokens
                .is_some_and(|b| target > b as u64);
        if too_big || too_long {
            let s = self.pop_waiting();
            self.stats.rejected += 1;
            out.rejected.push(s);
            return Admit::Rejected;
        }
        if self.tiered && head.kind == SeqKind::Prompt {
            // Each lookup of a waiting request touches its blocks on host, whether it is then
            // admitted or not (vLLM's offloading connector, `get_num_new_matched_tokens`).
            self.pool.borrow_mut().touch_host(head.names());
        }
        let (held, remembered, start) = self.head_start();
        let pin = (start / bs as u64) as usize;
        let pin = if head.kind == SeqKind::Prompt { pin } else { 0 };
        let remaining = target - start;
        if !self.cfg.chunked_prefill && remaining > budget {
            return Admit::Blocked;
        }
        let n = remaining.min(budget);
        let fits = match self.cfg.admission {
            Admission::Chunk => {
                let pins = self
                    .pool
                    .borrow()
                    .unpinned_among(&head.names()[..pin], usize::MAX);
                let (named_after, private_after) = head.blocks_for(start + n, bs);
                let new = self.pool.borrow().unpinned_among(
                    &head.names()[pin..named_after],
                    head.unlisted_from.saturating_sub(pin),
                );
                pins + new + private_after <= self.pool.borrow().available()
            }
            Admission::WholePrompt => {
                let whole = target.div_ceil(bs as u64) as usize;
                whole - self.pinned_prefix(pin) <= self.pool.borrow().available()
            }
            Admission::ToCompletion => {
                let needed = self.to_completion_blocks(head) - self.pinned_prefix(pin);
                let running = self
                    .running
                    .iter()
                    .map(|s| (self.to_completion_blocks(s), s.held_named + s.private));
                needed <= trtllm::unreserved(self.pool.borrow().available(), running)
            }
        };
        if !fits {
            return Admit::Blocked;
        }
        let mut s = self.pop_waiting();
        // Blocks of its prefix past the device's come back from the lower tiers: the step
        // waits for them.
        let loaded = if pin > held {
            let (done, hits) = self.pool.borrow_mut().load(&s.spec.blocks[held..pin], now);
            self.loads_done = self.loads_done.max(done);
            hits
        } else {
            [0; 2]
        };
        if s.first.is_none() {
            let cached_tokens = if s.kind == SeqKind::Prompt { start } else { 0 };
            let upto = |blocks: usize| (blocks as u64 * bs as u64).min(cached_tokens);
            let host_tokens = upto(held + loaded[0]) - upto(held);
            s.first = Some(FirstAdmission {
                at_ns: now,
                held_blocks: held,
                remembered_blocks: remembered,
                lower_blocks: loaded[0] + loaded[1],
                cached_tokens,
                host_tokens,
                disk_tokens: cached_tokens - upto(held + loaded[0]),
            });
            out.log.push(LogItem::Admitted(s.id()));
        }
        s.computed = start;
        // Room for the slots of every named block it will hold, once (kept across preemptions).
        s.slots.reserve_exact(s.named);
        if pin > 0 {
            let mut changes = Changes::default();
            self.pool.borrow_mut().acquire(
                None,
                &s.spec.blocks[..pin],
                0,
                &mut changes,
                &mut s.slots,
                usize::MAX,
            );
            debug_assert!(
                pin > held || changes.is_empty(),
                "a cached prefix is only pinned"
            );
            if pin > held {
                // Loaded, not computed: a later request of an SGLang batch may share them.
                self.pool.borrow_mut().ready(&s.spec.blocks[held..pin]);
            }
            if self.tiered {
                (self.pool.borrow_mut()).write_through_later(
                    &changes,
                    &[&s.spec.blocks[..pin]],
                    true,
                );
            }
            s.held_named = pin;
            if !changes.is_empty() {
                // Blocks loaded back from a lower tier are stored on the device.
                out.log.push(LogItem::Kv(changes));
            }
        }
        if s.kind == SeqKind::Transferred && s.generated == 0 {
            // The prefill worker's token, hidden: the first decode step computes its KV and
            // makes the first token the client gets.
            s.generated = 1;
        }
        let n = (s.target() - s.computed).min(budget);
        self.running.push_back(s);
        let i = self.running.len() - 1;
        self.grow(i, n, &mut out.log);
        Admit::Scheduled(Work {
            id: self.running[i].id(),
            tokens: n,
        })
    }
}
