//! The worker actor: a KV cache, a FIFO queue, `max_batch` slots and a timing model.
//!
//! A request starts prefill when a slot is free and its blocks fit in the cache (pinned until it
//! completes; blocks beyond the whole capacity are computed but not cached). The hit it reports is
//! what it really held at that moment. New blocks are published as `KvStored`, evictions as
//! `KvRemoved`, a restart as `KvCleared`, all through the bus when `bus.publish` is on.
//!
//! Roles: `Unified` (aggregated serving: prefill then decode in one slot), `Prefill` (hands the KV
//! to a decode worker over the link), `Decode` (decodes handed-off requests) and `Colocated`
//! (prefill and decode on one GPU: one phase of one request at a time).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::hashers::IdBuilder;

use crate::disagg;
use crate::engine::{ms_to_ns, Actor, ActorId, Context, Envelope, Nanos};
use crate::ids::{RequestId, WorkerId};
use crate::kv_event::KvEvent;

use super::attribution::classify;
use super::kv_cache::KvCache;
use super::messages::{Ack, Msg, Phase, PrefillOutcome, Routed};
use super::timing::TimingModel;
use super::topology::Role;
use super::truth::SharedTruth;

/// The KV link between prefill and decode workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// KV bytes per token.
    pub bytes_per_token: u64,
    /// GB/s (1e9 bytes/s).
    pub gbps: f64,
    /// Fixed cost per transfer, ms.
    pub overhead_ms: f64,
}

/// Everything a worker is built from.
pub struct WorkerSetup {
    /// The worker's number in events, acks and reports.
    pub index: WorkerId,
    /// Its role.
    pub role: Role,
    /// KV capacity in blocks (`None`: unbounded).
    pub capacity: Option<usize>,
    /// Requests running at once (`None`: unbounded).
    pub max_batch: Option<usize>,
    /// Tokens per block.
    pub block_size: usize,
    /// Timing.
    pub timing: TimingModel,
    /// Whether it publishes KV events.
    pub publish: bool,
    /// The router's address.
    pub router: ActorId,
    /// The bus's address.
    pub bus: ActorId,
    /// Decode workers a prefill worker hands off to, as (worker number, address): the first that
    /// is up, starting from the request id modulo their count.
    pub decode_peers: Vec<(WorkerId, ActorId)>,
    /// The KV link, for prefill roles.
    pub link: Option<Link>,
    /// Ground truth for loss attribution.
    pub truth: SharedTruth,
}

/// A worker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Requests completed here (acks sent).
    pub completed: u64,
    /// Prefills started here.
    pub prefills: u64,
    /// Time with at least one request running, ns.
    pub busy_ns: Nanos,
    /// Blocks evicted.
    pub evicted_blocks: u64,
    /// Restarts.
    pub restarts: u64,
}

enum Job {
    Prefill(Routed),
    Decode(Routed),
}

struct Running {
    routed: Routed,
    /// Blocks of the prompt pinned in the cache, from the front (0 for decode jobs).
    pinned: usize,
    outcome: PrefillOutcome,
    first_token_ns: Nanos,
}

/// The worker actor.
pub struct Worker {
    setup: WorkerSetup,
    cache: KvCache,
    queue: VecDeque<Job>,
    running: HashMap<RequestId, Running, IdBuilder>,
    up: bool,
    epoch: u32,
    busy_since: Option<Nanos>,
    /// Whether each decode peer is up (prefill roles learn of peer faults).
    peers_up: Vec<bool>,
    /// Prefilled requests waiting for a decode peer to come back up.
    waiting_for_peer: VecDeque<Routed>,
    processed: HashSet<u64, IdBuilder>,
    /// What the worker did.
    pub stats: WorkerStats,
}

impl Worker {
    /// A worker with an empty cache.
    pub fn new(setup: WorkerSetup) -> Self {
        Worker {
            cache: KvCache::new(setup.capacity),
            peers_up: vec![true; setup.decode_peers.len()],
            waiting_for_peer: VecDeque::new(),
            setup,
            queue: VecDeque::new(),
            running: HashMap::default(),
            up: true,
            epoch: 0,
            busy_since: None,
            processed: HashSet::default(),
            stats: WorkerStats::default(),
        }
    }

    /// The worker's number.
    pub fn index(&self) -> WorkerId {
        self.setup.index
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.setup.role
    }

    fn has_slot(&self) -> bool {
        self.setup.max_batch.is_none_or(|m| self.running.len() < m)
    }

    fn active_fraction(&self) -> f64 {
        match self.setup.capacity {
            Some(cap) => self.cache.pinned() as f64 / cap as f64,
            None => 0.0,
        }
    }

    fn publish(&mut self, msg: Msg, ctx: &mut Context<'_, Msg>) {
        if self.setup.publish {
            ctx.send(self.setup.bus, msg, 0);
        }
    }

    fn try_start(&mut self, ctx: &mut Context<'_, Msg>) {
        while self.has_slot() {
            let started = match self.queue.front() {
                None => false,
                Some(Job::Prefill(_)) => self.start_prefill(ctx),
                Some(Job::Decode(_)) => {
                    self.start_decode(ctx);
                    true
                }
            };
            if !started {
                break;
            }
        }
    }

    /// Starts the request at the head of the queue if its blocks fit; false if it must wait.
    fn start_prefill(&mut self, ctx: &mut Context<'_, Msg>) -> bool {
        let Some(Job::Prefill(routed)) = self.queue.front() else {
            return false;
        };
        let blocks = &routed.spec.blocks;
        let cacheable = &blocks[..blocks.len().min(self.setup.capacity.unwrap_or(usize::MAX))];
        let Some(adm) = self.cache.admit(cacheable) else {
            return false;
        };
        let pinned = cacheable.len();
        let Some(Job::Prefill(routed)) = self.queue.pop_front() else {
            unreachable!("checked above");
        };
        let me = self.setup.index;
        let misses = classify(
            &routed.spec.blocks,
            adm.cached,
            routed.predicted_blocks as usize,
            routed.others_held_blocks as usize,
            routed.ever_computed_blocks as usize,
            me.index(),
            &self.setup.truth.borrow(),
        );
        {
            let mut truth = self.setup.truth.borrow_mut();
            truth.removed(me.index(), &adm.evicted);
            truth.stored(me.index(), &adm.stored);
        }
        self.stats.evicted_blocks += adm.evicted.len() as u64;
        if !adm.evicted.is_empty() {
            let blocks = adm.evicted;
            self.publish(Msg::Kv(KvEvent::Removed { worker: me, blocks }), ctx);
        }
        if !adm.stored.is_empty() {
            let (parent, blocks) = (adm.parent, adm.stored);
            self.publish(
                Msg::Kv(KvEvent::Stored {
                    worker: me,
                    parent,
                    blocks,
                }),
                ctx,
            );
        }
        let spec = &routed.spec;
        let prefix_hit = spec.prefix.is_some_and(|p| {
            let seen = !self.processed.insert(p);
            seen && adm.cached >= spec.prefix_blocks
        });
        let new_tokens = u64::from(spec.input_tokens)
            .saturating_sub((adm.cached * self.setup.block_size) as u64);
        let duration = self.setup.timing.prefill_ns(new_tokens);
        let outcome = PrefillOutcome {
            worker: me,
            cached_blocks: adm.cached as u32,
            prefix_hit,
            misses,
            started_ns: ctx.now(),
        };
        self.stats.prefills += 1;
        self.begin(routed, pinned, outcome, Phase::Prefill, duration, ctx);
        true
    }

    /// Starts decoding a handed-off request (decode and colocated roles).
    fn start_decode(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some(Job::Decode(routed)) = self.queue.pop_front() else {
            unreachable!("called for a decode job");
        };
        let outcome = *routed
            .prefill
            .as_deref()
            .expect("a handed-off request carries its prefill");
        let duration = self
            .setup
            .timing
            .decode_ns(routed.spec.output_tokens, self.active_fraction());
        self.begin(routed, 0, outcome, Phase::Decode, duration, ctx);
    }

    fn begin(
        &mut self,
        routed: Routed,
        pinned: usize,
        outcome: PrefillOutcome,
        phase: Phase,
        duration: Nanos,
        ctx: &mut Context<'_, Msg>,
    ) {
        let request = routed.spec.id;
        if self.running.is_empty() {
            self.busy_since = Some(ctx.now());
        }
        self.running.insert(
            request,
            Running {
                routed,
                pinned,
                outcome,
                first_token_ns: ctx.now(),
            },
        );
        let epoch = self.epoch;
        ctx.send(
            ctx.me(),
            Msg::Timer {
                request,
                phase,
                epoch,
            },
            duration,
        );
    }

    fn phase_ended(&mut self, request: RequestId, phase: Phase, ctx: &mut Context<'_, Msg>) {
        match (phase, self.setup.role) {
            (Phase::Prefill, Role::Unified) => {
                let u = self.active_fraction();
                let run = self.running.get_mut(&request).expect("running request");
                run.first_token_ns = ctx.now();
                let decode = self
                    .setup
                    .timing
                    .decode_ns(run.routed.spec.output_tokens, u);
                if decode == 0 {
                    self.finish(request, ctx);
                } else {
                    let epoch = self.epoch;
                    let msg = Msg::Timer {
                        request,
                        phase: Phase::Decode,
                        epoch,
                    };
                    ctx.send(ctx.me(), msg, decode);
                }
            }
            (Phase::Prefill, _) => {
                let run = self.remove_running(request, ctx);
                self.cache.release(&run.routed.spec.blocks[..run.pinned]);
                let mut routed = run.routed;
                routed.prefill = Some(Box::new(run.outcome));
                self.hand_off(routed, ctx);
                self.try_start(ctx);
            }
            (Phase::Decode, _) => self.finish(request, ctx),
        }
    }

    /// Sends a prefilled request's KV over the link to the first decode peer that is up (from the
    /// request id modulo their count), or keeps it until one comes back.
    fn hand_off(&mut self, routed: Routed, ctx: &mut Context<'_, Msg>) {
        let n = self.setup.decode_peers.len();
        let start = (routed.spec.id.0 % n as u64) as usize;
        let Some(k) = (0..n).map(|k| (start + k) % n).find(|&k| self.peers_up[k]) else {
            self.waiting_for_peer.push_back(routed);
            return;
        };
        let link = self.setup.link.expect("prefill roles have a link");
        let tokens = u64::from(routed.spec.input_tokens);
        let delay_ms = disagg::ttft_disagg(
            0.0,
            tokens,
            link.bytes_per_token,
            link.gbps,
            link.overhead_ms,
        );
        let peer = self.setup.decode_peers[k].1;
        ctx.send(peer, Msg::Handoff(routed), ms_to_ns(delay_ms));
    }

    /// A decode peer went down or came back.
    fn peer_changed(&mut self, worker: WorkerId, up: bool, ctx: &mut Context<'_, Msg>) {
        if let Some(k) = self.setup.decode_peers.iter().position(|p| p.0 == worker) {
            self.peers_up[k] = up;
        }
        if up {
            for routed in std::mem::take(&mut self.waiting_for_peer) {
                self.hand_off(routed, ctx);
            }
        }
    }

    fn remove_running(&mut self, request: RequestId, ctx: &Context<'_, Msg>) -> Running {
        let run = self.running.remove(&request).expect("running request");
        if self.running.is_empty() {
            if let Some(since) = self.busy_since.take() {
                self.stats.busy_ns += ctx.now() - since;
            }
        }
        run
    }

    fn finish(&mut self, request: RequestId, ctx: &mut Context<'_, Msg>) {
        let run = self.remove_running(request, ctx);
        self.cache.release(&run.routed.spec.blocks[..run.pinned]);
        let o = run.outcome;
        let spec = &run.routed.spec;
        let ack = Ack {
            request,
            worker: self.setup.index,
            prefill_worker: o.worker,
            prompt_blocks: spec.blocks.len() as u32,
            cached_blocks: o.cached_blocks,
            predicted_blocks: run.routed.predicted_blocks,
            repeat: run.routed.repeat,
            prefix_hit: o.prefix_hit,
            misses: o.misses,
            arrived_ns: run.routed.arrived_ns,
            started_ns: o.started_ns,
            first_token_ns: run.first_token_ns,
            done_ns: ctx.now(),
        };
        self.stats.completed += 1;
        ctx.send(self.setup.router, Msg::Ack(Box::new(ack)), 0);
        self.try_start(ctx);
    }

    fn hand_back(&self, mut routed: Routed, ctx: &mut Context<'_, Msg>) {
        routed.retries += 1;
        routed.prefill = None;
        ctx.send(self.setup.router, Msg::HandBack(routed), 0);
    }

    fn go_down(&mut self, ctx: &mut Context<'_, Msg>) {
        self.up = false;
        self.epoch += 1;
        self.stats.restarts += 1;
        if let Some(since) = self.busy_since.take() {
            self.stats.busy_ns += ctx.now() - since;
        }
        // Hand back in request order: the map's own order must not leak into the run.
        let mut running: Vec<(RequestId, Running)> =
            std::mem::take(&mut self.running).into_iter().collect();
        running.sort_unstable_by_key(|(id, _)| *id);
        for (_, run) in running {
            self.hand_back(run.routed, ctx);
        }
        for job in std::mem::take(&mut self.queue) {
            let (Job::Prefill(r) | Job::Decode(r)) = job;
            self.hand_back(r, ctx);
        }
        for r in std::mem::take(&mut self.waiting_for_peer) {
            self.hand_back(r, ctx);
        }
        self.cache.clear();
        self.processed.clear();
        if matches!(self.setup.role, Role::Decode) {
            return;
        }
        self.setup
            .truth
            .borrow_mut()
            .cleared(self.setup.index.index());
        let worker = self.setup.index;
        self.publish(Msg::Kv(KvEvent::Cleared { worker }), ctx);
    }
}

impl Actor for Worker {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        match env.msg {
            Msg::Request(routed) if self.up => {
                self.queue.push_back(Job::Prefill(routed));
                self.try_start(ctx);
            }
            Msg::Handoff(routed) if self.up => {
                self.queue.push_back(Job::Decode(routed));
                self.try_start(ctx);
            }
            Msg::Request(routed) | Msg::Handoff(routed) => self.hand_back(routed, ctx),
            Msg::Timer {
                request,
                phase,
                epoch,
            } if epoch == self.epoch => self.phase_ended(request, phase, ctx),
            Msg::Timer { .. } => {} // set before a restart: the request was handed back
            Msg::WorkerDown { worker } if worker == self.setup.index => self.go_down(ctx),
            Msg::WorkerUp { worker } if worker == self.setup.index => {
                self.up = true;
                self.try_start(ctx);
            }
            Msg::WorkerDown { worker } => self.peer_changed(worker, false, ctx),
            Msg::WorkerUp { worker } => self.peer_changed(worker, true, ctx),
            Msg::Kv(_) | Msg::Ack(_) | Msg::HandBack(_) => {
                debug_assert!(false, "workers receive no {}", env.msg.kind());
            }
        }
    }
}
