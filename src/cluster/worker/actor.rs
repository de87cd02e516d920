//! The worker actor: a thin adapter between messages and its pure [`Engine`].
//!
//! It queues arriving requests, runs one planned step (or decode stretch) at a time with its own
//! `StepStart`/`StepEnd` timers, publishes the KV events a step causes at that step's end
//! (through the bus, when `bus.publish` is on) and answers replay and snapshot requests (both in
//! `events.rs`), acks finished requests to the router replica in charge of them, hands prefilled
//! requests to a decode worker over the KV link, and hands everything back when it goes down.
//!
//! Roles: `Unified` (aggregated serving), `Prefill` (a request leaves when its prompt is
//! computed and its KV crosses the link to a decode worker), `Decode` (decodes transferred
//! requests, holding their KV while it does) and `Colocated` (prefill and decode on one GPU: one
//! engine runs both, and the KV crosses the link between the two engines back to itself).

use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use crate::disagg;
use crate::engine::{ms_to_ns, Actor, ActorId, Context, Envelope, Nanos};
use crate::hashers::IdBuilder;
use crate::ids::WorkerId;
use crate::protocol::kv_event::KvEvent;

use super::super::attribution::classify;
use super::super::board::SignalBoard;
use super::super::probes::Probes;
use super::super::timeline::{note, Mark};
use super::super::topology::Role;
use super::engine::{Engine, EngineSetup, SchedulerStats};
use super::engines::{self, EngineRules};
use super::plan::{LogItem, Planned};
use super::seq::Seq;
use super::transfers::{HandOff, SharedTransfers};
use crate::protocol::messages::{Ack, Misses, Msg, PrefillOutcome, Routed};

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
    /// Its engine's settings.
    pub engine: EngineSetup,
    /// Which engine it runs, with that engine's own rules.
    pub rules: EngineRules,
    /// Whether it publishes KV events.
    pub publish: bool,
    /// Events kept for replay (0: none, when no router asks for replays).
    pub replay_buffer: usize,
    /// The bus's address.
    pub bus: ActorId,
    /// Decode workers a prefill worker hands off to, as (worker number, address): of those up,
    /// the one the request id picks modulo their count.
    pub decode_peers: Vec<(WorkerId, ActorId)>,
    /// The KV link, for prefill roles.
    pub link: Option<Link>,
    /// The transfers on their way and those lost, shared by every worker.
    pub transfers: SharedTransfers,
    /// Where a routable worker posts its load signals (`None` for decode workers).
    pub board: Option<SignalBoard>,
    /// Its instrumentation (an audit only for a routable worker).
    pub probes: Probes,
    /// Under a cluster-shared host tier, every worker's address by worker number (it wakes the
    /// others to report the pool's changes), one list every worker shares; empty otherwise.
    pub host_peers: Rc<[ActorId]>,
}

/// A worker's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerStats {
    /// Requests completed here (acks sent, but for rejections).
    pub completed: u64,
    /// Prompts first admitted here.
    pub prefills: u64,
    /// Blocks evicted.
    pub evicted_blocks: u64,
    /// Restarts.
    pub restarts: u64,
}

/// What the worker keeps about a request besides the engine's state.
#[derive(Clone, Debug)]
pub struct Job {
    routed: Routed,
    /// What its prefill found (set at its first admission on the prompt side, or carried with
    /// a transferred request).
    outcome: Option<PrefillOutcome>,
    /// When its KV arrived here from a prefill worker.
    transferred_ns: Option<Nanos>,
}

/// The step in progress, for the timeline: when it started and what it holds.
#[derive(Clone, Copy, Debug)]
struct Running {
    start: Nanos,
    batch: u32,
    prefill_tokens: u64,
    decode_tokens: u64,
}

/// The worker actor.
pub struct Worker {
    pub(super) setup: WorkerSetup,
    pub(super) sched: Box<dyn Engine<Job>>,
    pub(super) up: bool,
    pub(super) epoch: u32,
    /// The current plan's number (a cut stretch leaves its old end timer stale).
    plan: u64,
    start_pending: bool,
    /// The decode peers that are up, by position in `decode_peers`, in order (prefill roles
    /// learn of peer faults).
    peers_up: Vec<usize>,
    /// Prefilled requests waiting for a decode peer to come back up.
    waiting_for_peer: VecDeque<Routed>,
    /// Prefix groups whose requests this worker admitted (the lab's hit definition).
    processed: HashSet<u64, IdBuilder>,
    /// The next event's sequence number in this epoch.
    pub(super) next_seq: u64,
    /// The last `replay_buffer` events published, oldest first.
    pub(super) replay: VecDeque<(u64, KvEvent)>,
    /// When the last event it published reaches the bus (events published later never reach it
    /// earlier, so that its stream stays in order).
    pub(super) published_until: Nanos,
    /// The step in progress (kept only for a timeline).
    running_step: Option<Running>,
    /// Leaving once it holds nothing (a scaling drain).
    draining: bool,
    /// When it last left the cluster (a drain that finished, or a removal).
    left_at: Option<Nanos>,
    /// What the worker did.
    pub stats: WorkerStats,
}

impl Worker {
    /// A worker with an empty cache; a routable one shows its KV pool to the ground truth.
    pub fn new(setup: WorkerSetup) -> Self {
        let sched = engines::build(&setup.engine, &setup.rules);
        if let Some(truth) = setup
            .probes
            .truth
            .as_ref()
            .filter(|_| setup.role != Role::Decode)
        {
            truth.borrow_mut().add_worker(sched.cache());
        }
        Worker {
            sched,
            peers_up: (0..setup.decode_peers.len()).collect(),
            waiting_for_peer: VecDeque::new(),
            setup,
            up: true,
            epoch: 0,
            plan: 0,
            start_pending: false,
            processed: HashSet::default(),
            next_seq: 0,
            replay: VecDeque::new(),
            published_until: 0,
            running_step: None,
            draining: false,
            left_at: None,
            stats: WorkerStats::default(),
        }
        .subscribed()
    }

    /// The worker as an empty slot of a scaling pool: down until a `WorkerUp` brings it in.
    pub fn absent(mut self) -> Self {
        self.up = false;
        self.unsubscribe();
        self
    }

    /// Its load signals now.
    pub fn signals(&self) -> crate::protocol::signals::WorkerSignals {
        self.sched.signals()
    }

    /// Whether it serves (up, and not draining).
    pub fn serving(&self) -> bool {
        self.up && !self.draining
    }

    /// When it last left the cluster (drained or removed), if it did.
    pub fn left_at(&self) -> Option<Nanos> {
        self.left_at
    }

    /// Leaves the cluster: a drain's end, or a removal (its requests handed back). Its cache
    /// goes with it, and a later occupant of the slot starts a new event stream.
    fn leave(&mut self, ctx: &mut Context<'_, Msg>) {
        self.clear_out(ctx);
        self.draining = false;
        self.left_at = Some(ctx.now());
    }

    /// Whether it holds nothing: no request queued, running, stepping or waiting for a peer, and
    /// no KV on its way to it (a draining decode worker lets its transfers land: leaving before
    /// would hand their requests back to be prefilled again; each hand-off's arrival asks
    /// again). A prefill worker frees a request's KV at its hand-off, so its transfers hold it
    /// back from nothing.
    fn idle(&self) -> bool {
        !self.sched.has_work()
            && !self.sched.in_step()
            && !self.start_pending
            && self.waiting_for_peer.is_empty()
            && !(self.setup.transfers.borrow()).inbound(self.setup.index)
    }

    /// The worker's number.
    pub fn index(&self) -> WorkerId {
        self.setup.index
    }

    /// Its role.
    pub fn role(&self) -> Role {
        self.setup.role
    }

    /// Its engine's counters.
    pub fn scheduler_stats(&self) -> SchedulerStats {
        self.sched.stats()
    }

    /// The most KV blocks its running requests held at once.
    pub fn peak_kv_blocks(&self) -> usize {
        self.sched.kv().peak_active
    }

    /// Bytes its lower KV tiers moved (`None`: it has none).
    pub fn tier_bytes(&self) -> Option<super::tiers::TierBytes> {
        self.sched.kv().tier_bytes
    }

    /// KV blocks its running requests hold now (0 once every request has left: a block kept
    /// or released twice would show here).
    pub fn kv_blocks_in_use(&self) -> usize {
        self.sched.kv().active
    }

    /// What its feature clock found (`None` unless features were recorded).
    pub fn feature_totals(&self) -> Option<&super::probe::FeatureTotals> {
        self.sched.feature_totals()
    }

    /// Its KV capacity in blocks (`None`: unbounded).
    pub fn kv_capacity(&self) -> Option<usize> {
        self.sched.kv().capacity
    }

    /// Starts a step soon if there is work and none runs.
    fn wake(&mut self, ctx: &mut Context<'_, Msg>) {
        if self.up && !self.sched.in_step() && !self.start_pending && self.sched.has_work() {
            self.start_pending = true;
            let epoch = self.epoch;
            ctx.send(ctx.me(), Msg::StepStart { epoch }, 0);
        }
    }

    /// A request reaches the worker: a message during a decode stretch cuts it at the end of
    /// the step in progress, so that the request joins the next step.
    fn arrive(&mut self, seq: Seq<Job>, ctx: &mut Context<'_, Msg>) {
        if let Some(end) = self.sched.truncate(ctx.now()) {
            self.plan += 1;
            let (epoch, plan) = (self.epoch, self.plan);
            let steps = self.sched.steps_begun(ctx.now());
            ctx.send(
                ctx.me(),
                Msg::StepEnd { epoch, plan, steps },
                end - ctx.now(),
            );
        }
        let id = seq.id();
        self.sched.enqueue(seq);
        self.sched.note_joined(id, ctx.now());
        self.wake(ctx);
    }

    fn start_step(&mut self, ctx: &mut Context<'_, Msg>) {
        self.start_pending = false;
        let now = ctx.now();
        let preempted_before = self.sched.stats().preemptions;
        let Some(planned) = self.sched.plan(now) else {
            return;
        };
        let Planned {
            end,
            first_end,
            steps,
            batch,
            prefill_tokens,
            decode_tokens,
            log,
            rejected,
        } = planned;
        if self.setup.probes.timeline.is_some() {
            self.note_levels(now, preempted_before);
            if self.sched.in_step() {
                self.running_step = Some(Running {
                    start: now,
                    batch,
                    prefill_tokens,
                    decode_tokens,
                });
            }
        }
        for item in log {
            match item {
                LogItem::Admitted(id) => self.admitted(id, now),
                LogItem::Kv(changes) => self.kv_changed(changes, first_end - now, ctx),
            }
        }
        for seq in rejected {
            self.ack(seq, now, true, ctx);
        }
        if self.sched.in_step() {
            self.plan += 1;
            let (epoch, plan) = (self.epoch, self.plan);
            ctx.send(ctx.me(), Msg::StepEnd { epoch, plan, steps }, end - now);
        } else {
            self.wake(ctx);
        }
    }

    /// Notes the worker's levels, and the requests preempted since `preempted_before`.
    fn note_levels(&self, now: Nanos, preempted_before: u64) {
        let worker = self.setup.index;
        let signals = self.sched.signals();
        let resident = self.sched.kv().resident as u64;
        note(&self.setup.probes.timeline, || Mark::Levels {
            worker,
            at: now,
            kv_blocks: signals.decode_blocks,
            resident_blocks: resident,
            waiting: signals.waiting,
            running: signals.running,
        });
        let preempted = self.sched.stats().preemptions - preempted_before;
        if preempted > 0 {
            note(&self.setup.probes.timeline, || Mark::Preempted {
                worker,
                at: now,
                requests: preempted as u32,
            });
        }
    }

    /// The step in progress ends at `now` after `steps` forward passes: noted on the timeline.
    fn note_step(&mut self, now: Nanos, steps: u32) {
        if let Some(r) = self.running_step.take() {
            let worker = self.setup.index;
            note(&self.setup.probes.timeline, || Mark::Step {
                worker,
                start: r.start,
                end: now,
                steps,
                batch: r.batch,
                prefill_tokens: r.prefill_tokens,
                decode_tokens: r.decode_tokens,
            });
        }
    }

    /// A request's first admission on the prompt side: what it found, for the report.
    fn admitted(&mut self, id: crate::ids::RequestId, now: Nanos) {
        let me = self.setup.index;
        let Some(seq) = self.sched.running_mut(id) else {
            return; // a transferred request completed at once
        };
        if seq.payload.outcome.is_some() {
            return; // transferred: its prefill happened elsewhere
        }
        let first = seq.first_admission().expect("admitted");
        let routed = &seq.payload.routed;
        let spec = &routed.spec;
        let misses = self.setup.probes.truth.is_some().then(|| {
            // A block loaded back from host or disk is reused, not missed.
            classify(
                &spec.blocks,
                first.held_blocks + first.lower_blocks,
                routed.predicted_blocks as usize,
                routed.others_held_blocks as usize,
                routed.ever_computed_blocks as usize,
                first.remembered_blocks,
            )
        });
        let prefix_hit = spec.prefix.is_some_and(|p| {
            let seen = !self.processed.insert(p);
            seen && first.held_blocks >= spec.prefix_blocks
        });
        seq.payload.outcome = Some(PrefillOutcome {
            worker: me,
            cached_blocks: first.held_blocks as u32,
            loaded_blocks: first.lower_blocks as u32,
            prefix_hit,
            misses,
            cached_tokens: first.cached_tokens,
            host_tokens: first.host_tokens,
            disk_tokens: first.disk_tokens,
            started_ns: now,
        });
        self.stats.prefills += 1;
    }

    fn end_step(&mut self, steps: u32, ctx: &mut Context<'_, Msg>) {
        let mut applied = self.sched.apply();
        let now = ctx.now();
        self.note_step(now, steps);
        for changes in std::mem::take(&mut applied.kv) {
            self.kv_changed(changes, 0, ctx);
        }
        for request in applied.first_tokens {
            let router = applied
                .finished
                .iter()
                .chain(&applied.prefilled)
                .find(|s| s.id() == request)
                .or_else(|| self.sched.running_seq(request))
                .map(|s| s.payload.routed.router)
                .expect("a request with a first token is running or just left");
            ctx.send(router, Msg::PrefillDone { request }, 0);
        }
        for seq in applied.finished {
            self.ack(seq, now, false, ctx);
        }
        for seq in applied.prefilled {
            let Job {
                mut routed,
                outcome,
                ..
            } = seq.payload;
            routed.prefill = outcome.map(Box::new);
            self.hand_off(routed, ctx);
        }
        self.wake(ctx);
    }

    fn ack(&mut self, seq: Seq<Job>, now: Nanos, rejected: bool, ctx: &mut Context<'_, Msg>) {
        let me = self.setup.index;
        let first_token = seq.first_token_ns().unwrap_or(now);
        let done = seq.last_token_ns().unwrap_or(now);
        let (generated, preemptions) = (seq.generated(), seq.preemptions());
        let Job {
            routed,
            outcome,
            transferred_ns,
        } = seq.payload;
        let o = outcome.unwrap_or(PrefillOutcome {
            worker: me,
            cached_blocks: 0,
            loaded_blocks: 0,
            prefix_hit: false,
            misses: self.setup.probes.truth.as_ref().map(|_| Misses::default()),
            cached_tokens: 0,
            host_tokens: 0,
            disk_tokens: 0,
            started_ns: now,
        });
        let spec = &routed.spec;
        let ack = Ack {
            request: spec.id,
            worker: me,
            prefill_worker: o.worker,
            prompt_blocks: spec.blocks.len() as u32,
            cached_blocks: o.cached_blocks,
            loaded_blocks: o.loaded_blocks,
            predicted_blocks: routed.predicted_blocks,
            repeat: routed.repeat,
            prefix_hit: o.prefix_hit,
            misses: o.misses,
            arrived_ns: routed.arrived_ns,
            started_ns: o.started_ns,
            first_token_ns: first_token,
            done_ns: done,
            input_tokens: spec.input_tokens,
            cached_tokens: o.cached_tokens,
            host_tokens: o.host_tokens,
            disk_tokens: o.disk_tokens,
            transferred_ns,
            output_tokens: generated,
            preemptions,
            rejected,
        };
        // A rejected request is answered, not completed.
        self.stats.completed += u64::from(!rejected);
        ctx.send(routed.router, Msg::Ack(Box::new(ack)), 0);
    }

    /// Sends a prefilled request's KV over the link to a decode peer that is up (the one the
    /// request id picks modulo their count, so that they take turns), or keeps it until one
    /// comes back. Empty slots of a scaling pool and peers that are down take no turn.
    fn hand_off(&mut self, routed: Routed, ctx: &mut Context<'_, Msg>) {
        if self.peers_up.is_empty() {
            self.waiting_for_peer.push_back(routed);
            return;
        }
        let k = self.peers_up[(routed.spec.id.0 % self.peers_up.len() as u64) as usize];
        let link = self.setup.link.expect("prefill roles have a link");
        let tokens = u64::from(routed.spec.input_tokens);
        let moving_ms = disagg::transfer_ms(tokens, link.bytes_per_token, link.gbps);
        // The link carries one transfer at a time (they ran side by side at full rate each
        // before Dec 5 2026): the ledger has this one wait for those before it. The fixed
        // overhead (a handshake) does not hold the link.
        let now = ctx.now();
        let (to, peer) = self.setup.decode_peers[k];
        let hand_off = HandOff {
            from: (self.setup.index, ctx.me()),
            to: (to, peer),
            moving: ms_to_ns(moving_ms),
            landing: ms_to_ns(moving_ms + link.overhead_ms),
        };
        let lands = (self.setup.transfers.borrow_mut()).send(hand_off, routed.clone(), now);
        ctx.send(peer, Msg::Handoff(routed), lands - now);
    }

    /// Transfers on this worker's link were lost by their decode worker: those queued behind
    /// them take the link earlier, and their hand-offs are sent again for then.
    fn link_freed(&mut self, ctx: &mut Context<'_, Msg>) {
        let now = ctx.now();
        let again = (self.setup.transfers.borrow_mut()).retime(self.setup.index, now);
        for (routed, peer, delay) in again {
            ctx.send(peer, Msg::Handoff(routed), delay);
        }
    }

    /// The KV of the transfers not yet landed from this worker (still on its link) or to it
    /// (being read into its memory, or waiting to be) is gone with this worker's memory: each
    /// request goes back to its router, and its hand-off, when it arrives, is dropped.
    fn lose_transfers(&mut self, ctx: &mut Context<'_, Msg>) {
        let now = ctx.now();
        let lost = (self.setup.transfers.borrow_mut()).lose(self.setup.index, now);
        for routed in lost.requests {
            self.hand_back(routed, ctx);
        }
        for link in lost.links_freed {
            ctx.send(link, Msg::LinkFreed, 0);
        }
    }

    /// `routed`'s hand-off arrives: whether it is dropped (it carries KV its source or
    /// destination lost, or it was sent again for an earlier instant).
    fn transfer_dropped(&self, routed: &Routed, now: Nanos) -> bool {
        (self.setup.transfers.borrow_mut()).arrived(routed, now)
    }

    /// A decode peer went down or came back.
    fn peer_changed(&mut self, worker: WorkerId, up: bool, ctx: &mut Context<'_, Msg>) {
        if let Some(k) = self.setup.decode_peers.iter().position(|p| p.0 == worker) {
            match (self.peers_up.binary_search(&k), up) {
                (Err(at), true) => self.peers_up.insert(at, k),
                (Ok(at), false) => {
                    self.peers_up.remove(at);
                }
                _ => {}
            }
        }
        if up {
            for routed in std::mem::take(&mut self.waiting_for_peer) {
                self.hand_off(routed, ctx);
            }
        }
    }

    fn hand_back(&self, mut routed: Routed, ctx: &mut Context<'_, Msg>) {
        routed.retries += 1;
        routed.prefill = None;
        ctx.send(routed.router, Msg::HandBack(routed), 0);
    }

    fn go_down(&mut self, ctx: &mut Context<'_, Msg>) {
        let (worker, now) = (self.setup.index, ctx.now());
        note(&self.setup.probes.timeline, || Mark::Restart {
            worker,
            at: now,
        });
        self.stats.restarts += 1;
        self.lose_transfers(ctx);
        self.clear_out(ctx);
    }

    /// Goes down: the step in progress stops, its requests go back to their routers, its cache
    /// is lost and its event stream starts a new epoch.
    fn clear_out(&mut self, ctx: &mut Context<'_, Msg>) {
        let now = ctx.now();
        // The stretch in progress is cut here: the steps it began, not all it planned.
        let steps = self.sched.steps_begun(now);
        self.note_step(now, steps);
        self.up = false;
        self.epoch += 1;
        self.restart_stream();
        self.start_pending = false;
        for seq in self.sched.drain(ctx.now()) {
            self.hand_back(seq.payload.routed, ctx);
        }
        for r in std::mem::take(&mut self.waiting_for_peer) {
            self.hand_back(r, ctx);
        }
        self.processed.clear();
        self.unsubscribe();
        if matches!(self.setup.role, Role::Decode) {
            return;
        }
        let worker = self.setup.index;
        if let Some(audit) = &self.setup.probes.audit {
            audit.borrow_mut().truth_cleared(worker.index(), ctx.now());
        }
        if self.setup.publish {
            self.publish(KvEvent::Cleared { worker }, 0, ctx);
        }
    }

    fn prompt_seq(&self, routed: Routed) -> Seq<Job> {
        let decode_side = matches!(self.setup.role, Role::Decode);
        let spec = Arc::clone(&routed.spec);
        let handed_back = routed.retries > 0;
        let job = Job {
            routed,
            outcome: None,
            transferred_ns: None,
        };
        let mut seq = Seq::prompt(spec, job, self.sched.block_size(), decode_side);
        if handed_back {
            // It may have been here before, its own tail still cached: let admission find it.
            seq.list_every_block();
        }
        seq
    }
}

impl Actor for Worker {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        match env.msg {
            Msg::Request(routed) if self.up => {
                let seq = self.prompt_seq(routed);
                self.arrive(seq, ctx);
            }
            // Lost (back at its router), or stale (sent again for an earlier instant).
            Msg::Handoff(routed) if self.transfer_dropped(&routed, ctx.now()) => {}
            Msg::Handoff(mut routed) if self.up => {
                ctx.send(
                    routed.router,
                    Msg::Landed {
                        request: routed.spec.id,
                    },
                    0,
                );
                let outcome = routed.prefill.take().map(|b| *b);
                let spec = Arc::clone(&routed.spec);
                let job = Job {
                    routed,
                    outcome,
                    transferred_ns: Some(ctx.now()),
                };
                let seq = Seq::transferred(spec, job);
                self.arrive(seq, ctx);
            }
            Msg::Request(routed) | Msg::Handoff(routed) => self.hand_back(routed, ctx),
            Msg::StepStart { epoch } if epoch == self.epoch && self.start_pending => {
                self.start_step(ctx)
            }
            Msg::StepEnd { epoch, plan, steps } if epoch == self.epoch && plan == self.plan => {
                self.end_step(steps, ctx)
            }
            Msg::StepStart { .. } | Msg::StepEnd { .. } => {} // stale: a restart or a cut stretch
            Msg::WorkerDown { worker } if worker == self.setup.index => self.go_down(ctx),
            Msg::WorkerUp { worker } if worker == self.setup.index => {
                self.up = true;
                self.draining = false;
                self.left_at = None;
                self.resubscribe(ctx);
                self.wake(ctx);
            }
            Msg::HostTierChanged => self.report_shared_host(ctx),
            Msg::LinkFreed => self.link_freed(ctx),
            Msg::Retire { drain: true, .. } if self.up => self.draining = true,
            Msg::Retire { .. } if self.up => {
                self.lose_transfers(ctx);
                self.leave(ctx)
            }
            Msg::Retire { .. } => {}
            Msg::WorkerDown { worker } => self.peer_changed(worker, false, ctx),
            Msg::WorkerUp { worker } => self.peer_changed(worker, true, ctx),
            Msg::ReplayRequest { from, reply_to, .. } => self.answer_replay(from, reply_to, ctx),
            Msg::SnapshotRequest { reply_to, .. } => self.answer_snapshot(reply_to, ctx),
            Msg::Kv { .. }
            | Msg::Via { .. }
            | Msg::Replay(_)
            | Msg::Snapshot(_)
            | Msg::Peer(_)
            | Msg::CheckStreams
            | Msg::Ack(_)
            | Msg::HandBack(_)
            | Msg::PrefillDone { .. }
            | Msg::Landed { .. }
            | Msg::RefreshSignals
            | Msg::Register { .. }
            | Msg::Deregister { .. } => {
                debug_assert!(false, "workers receive no {}", env.msg.kind());
            }
        }
        if self.draining && self.idle() {
            self.leave(ctx);
        }
        if let Some(board) = &self.setup.board {
            board.borrow_mut()[self.setup.index.index()] = self.sched.signals();
        }
    }
}
