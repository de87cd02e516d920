//! The router actor (one per replica): a thin adapter around a [`RoutingPolicy`], the router's
//! [`LoadBook`] and, for a policy that learns from KV events, the [`StreamTracker`] of every
//! worker's event stream. It routes arrivals and hand-backs, feeds the events the bus delivers
//! to the policy in stream order, recovers gaps per `router.on_gap` through the pure
//! [`Recovery`] (it sends the replay and snapshot requests that asks for over the bus; in
//! fallback, the worker's cache is predicted from its own decisions),
//! keeps its load book from acks (and, with replica sync, from the other replicas' notes), and
//! holds requests while every worker is down.

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use crate::engine::{Actor, ActorId, Context, Envelope, Nanos};
use crate::hashers::IdBuilder;
use crate::ids::RequestId;
use crate::protocol::kv_event::{Blocks, KvEvent};
use crate::router::loads::LoadBook;
use crate::router::policy::{RouteRequest, RoutingPolicy};
use crate::router::recovery::Recovery;
use crate::router::stream::{OnGap, StreamTracker};
use crate::router::Decision;
use crate::workload::RequestSpec;

mod events;

use super::board::SignalBoard;
use super::probes::Probes;
use crate::protocol::messages::{Msg, PeerNote, Routed};

/// The router's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Routing decisions made (re-routes included).
    pub decisions: u64,
    /// Requests handed back by failing workers.
    pub rerouted: u64,
    /// KV events that reached the router.
    pub events_received: u64,
    /// KV events the policy applied to its index (live or replayed).
    pub events_applied: u64,
    /// Events applied from replay answers.
    pub replayed: u64,
    /// Bytes of the snapshots received.
    pub resync_bytes: u64,
    /// Snapshots the policy believed (those a stream awaited; a late or stale one is not).
    pub snapshots_applied: u64,
    /// Acks received.
    pub acks: u64,
    /// When the policy first learned from the streams (a KV event applied, live or replayed, or a
    /// snapshot believed), if it did: knowledge that came only after the router's last decision
    /// routed the whole run blind.
    pub first_applied_ns: Option<Nanos>,
    /// When the router made its last routing decision, if it made one.
    pub last_decided_ns: Option<Nanos>,
}

impl std::ops::AddAssign for RouterStats {
    /// Adds another replica's counters to these.
    fn add_assign(&mut self, other: RouterStats) {
        self.decisions += other.decisions;
        self.rerouted += other.rerouted;
        self.events_received += other.events_received;
        self.events_applied += other.events_applied;
        self.replayed += other.replayed;
        self.resync_bytes += other.resync_bytes;
        self.snapshots_applied += other.snapshots_applied;
        self.acks += other.acks;
        self.first_applied_ns = match (self.first_applied_ns, other.first_applied_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_decided_ns = self.last_decided_ns.max(other.last_decided_ns);
    }
}

/// Where the router sits among the replicas.
pub struct Placement {
    /// Its replica number.
    pub replica: usize,
    /// The other replicas' addresses.
    pub peers: Vec<ActorId>,
    /// The bus's address.
    pub bus: ActorId,
}

/// What the router recovers with and reports to, beyond its policy.
pub struct RouterSetup {
    /// The worker addresses, by worker number.
    pub workers: Vec<ActorId>,
    /// The client's address.
    pub client: ActorId,
    /// Delay from a decision to the request joining the worker's queue.
    pub dispatch_ns: Nanos,
    /// The workers' signal board and the refresh period (0: at every decision), for a policy
    /// that reads signals.
    pub board: Option<(SignalBoard, Nanos)>,
    /// Its instrumentation (ground truth, the audit it reports what it believes to).
    pub probes: Probes,
    /// Whether requests' own tails (blocks no other request names) go unread: no request is
    /// routed twice (no hand-back: no faults, no `[[scale]]` step, no planner). Then only the
    /// request itself could look its own tail up, at
    /// its one decision, before any worker stored it: the policy's index keeps no stored own
    /// tail, and the policy counts a request's own tail without its names
    /// ([`Blocks::own_tail`]). The index audit and gap recovery see every name either way.
    pub own_tails_unread: bool,
    /// Whether replicas tell each other what they routed, added, prefilled and freed
    /// (`router.sync = "active-load"`, Dynamo's replica sync of active sequences).
    pub shares_active_load: bool,
    /// How it recovers its KV event streams, for a policy that learns from events.
    pub recovery: GapRecovery,
    /// The prefix groups a request reaching any replica named before (the lab's "repeat"),
    /// one set for all replicas: each kept its own, and a repeat of a group another replica
    /// had seen went uncounted.
    pub seen_prefixes: SeenPrefixes,
}

/// The prefix groups requests named so far, shared by a run's router replicas (one
/// simulation runs on one thread).
pub type SeenPrefixes = Rc<RefCell<HashSet<u64, IdBuilder>>>;

/// How a router recovers a KV event stream's gaps (`router.on_gap` and its timers).
#[derive(Clone, Copy, Debug)]
pub struct GapRecovery {
    /// Replay, resync or fall back to predictions.
    pub on_gap: OnGap,
    /// A stream silent this long after a request is a gap.
    pub silence_ns: Nanos,
    /// A replay or snapshot request unanswered this long goes again.
    pub timeout_ns: Nanos,
    /// How long a prediction made in fallback is believed.
    pub guess_ttl_ns: Nanos,
}

/// The router actor.
pub struct RouterActor {
    policy: Box<dyn RoutingPolicy>,
    loads: LoadBook,
    setup: RouterSetup,
    place: Placement,
    shares_active_load: bool,
    pending: VecDeque<Routed>,
    /// Requests this replica routed that have not come back (acked or handed back). Its timers
    /// run only while it has some: a peer's note that was lost on the bus must not keep a
    /// replica busy forever.
    own_open: u64,
    /// Whether a snapshot refresh timer is running.
    refreshing: bool,
    /// For a policy that learns from events.
    recovery: Option<Recovery>,
    /// What the router did.
    pub stats: RouterStats,
}

impl RouterActor {
    /// A router running `policy` over `loads`, as `setup` says, placed among the replicas as
    /// `place` says.
    pub fn new(
        policy: Box<dyn RoutingPolicy>,
        loads: LoadBook,
        setup: RouterSetup,
        place: Placement,
    ) -> Self {
        let gaps = setup.recovery;
        let recovery = policy.learns_from_events().then(|| {
            Recovery::new(
                loads.workers(),
                gaps.on_gap,
                gaps.silence_ns,
                gaps.timeout_ns,
                gaps.guess_ttl_ns,
            )
        });
        RouterActor {
            policy,
            loads,
            shares_active_load: setup.shares_active_load,
            setup,
            place,
            pending: VecDeque::new(),
            own_open: 0,
            refreshing: false,
            recovery,
            stats: RouterStats::default(),
        }
    }

    /// The router's load book (requests routed per worker, in flight).
    pub fn loads(&self) -> &LoadBook {
        &self.loads
    }

    /// Its stream tracker, for a policy that learns from events.
    pub fn streams(&self) -> Option<&StreamTracker> {
        self.recovery.as_ref().map(Recovery::streams)
    }

    fn route(&mut self, mut routed: Routed, ctx: &mut Context<'_, Msg>) {
        if !self.loads.any_up() {
            self.pending.push_back(routed);
            return;
        }
        self.see_signals(ctx);
        let now = ctx.now();
        self.expire_guesses(now);
        let spec = Arc::clone(&routed.spec);
        let req = self.request_of(&spec, now);
        let Some(d) = self.policy.decide(&req, &self.loads, ctx.rng()) else {
            self.pending.push_back(routed);
            return;
        };
        let w = d.worker.index();
        if let Some(r) = &mut self.recovery {
            r.sent_request(w, now);
        }
        self.loads.routed_to(spec.id, d.worker, spec.blocks.len());
        self.own_open += 1;
        self.policy.on_routed(&req, &d);
        self.guess(&spec, w, now);
        let (others, ever) = match &self.setup.probes.truth {
            Some(truth) => {
                let truth = truth.borrow();
                let others = truth.others_best(&spec.blocks, w);
                (others, truth.ever_computed_depth(&spec.blocks))
            }
            None => (0, 0),
        };
        tracing::trace!(
            request = spec.id.0,
            worker = d.worker.0,
            predicted = d.predicted_blocks,
            "route"
        );
        routed.worker = Some(d.worker);
        routed.predicted_blocks = d.predicted_blocks as u32;
        routed.others_held_blocks = others as u32;
        routed.ever_computed_blocks = ever as u32;
        self.stats.decisions += 1;
        self.stats.last_decided_ns = Some(now);
        self.tell_peers(
            || PeerNote::Added {
                spec: Arc::clone(&spec),
                worker: d.worker,
                predicted_blocks: d.predicted_blocks as u32,
            },
            ctx,
        );
        ctx.send(
            self.setup.workers[w],
            Msg::Request(routed),
            self.setup.dispatch_ns,
        );
        self.keep_checking(ctx);
    }

    /// A request as its policy sees it, at `now`.
    fn request_of<'a>(&self, spec: &'a RequestSpec, now: Nanos) -> RouteRequest<'a> {
        RouteRequest {
            id: spec.id,
            blocks: if self.setup.own_tails_unread {
                Blocks::with_own_tail(&spec.blocks[..], spec.blocks.len() - spec.unshared_from)
            } else {
                (&spec.blocks).into()
            },
            input_tokens: spec.input_tokens,
            session: spec.session.map(|l| l.session),
            now,
        }
    }

    /// `event` with the own tail it reports marked only when own tails go unread (see
    /// [`RouterSetup::own_tails_unread`]): the index then holds the blocks other requests could
    /// find, about half as many on a trace, and stays smaller and faster. Otherwise the mark is
    /// forgotten and the index keeps every block.
    fn own_tail_marked_if_unread(&self, mut event: KvEvent) -> KvEvent {
        if let KvEvent::Stored { blocks, .. } = &mut event {
            if !self.setup.own_tails_unread {
                blocks.forget_own_tail();
            }
        }
        event
    }

    /// Brings the snapshot of the workers' signals up to date: at once for an exact view, else
    /// starting the refresh timer if it was idle (the first refresh is now).
    fn see_signals(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some((board, every)) = &self.setup.board else {
            return;
        };
        if *every == 0 {
            self.loads.refresh_signals(&board.borrow());
        } else if !self.refreshing {
            self.loads.refresh_signals(&board.borrow());
            self.refreshing = true;
            ctx.send(ctx.me(), Msg::RefreshSignals, *every);
        }
    }

    /// The refresh timer: a new snapshot, and the next tick while requests are in flight.
    fn refresh(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some((board, every)) = &self.setup.board else {
            return;
        };
        self.loads.refresh_signals(&board.borrow());
        if self.busy() {
            ctx.send(ctx.me(), Msg::RefreshSignals, *every);
        } else {
            self.refreshing = false;
        }
    }

    /// Whether requests it routed are open, or requests wait for a worker.
    fn busy(&self) -> bool {
        self.own_open > 0 || !self.pending.is_empty()
    }

    /// `request` no longer loads the worker it was sent to (it completed, was handed back, or
    /// its KV left its prefill worker): whether it still did.
    fn finished(&mut self, request: RequestId) -> bool {
        let worker = self.loads.finished(request);
        if let Some(worker) = worker {
            self.policy.on_finished(worker, request);
        }
        worker.is_some()
    }

    /// `request` no longer loads its worker here: counted down, and synced peers told.
    fn release(&mut self, request: RequestId, ctx: &mut Context<'_, Msg>) {
        if self.finished(request) {
            self.tell_peers(|| PeerNote::Freed { request }, ctx);
        }
    }

    /// Sends a note to every other replica, when replicas sync their load.
    fn tell_peers(&self, note: impl Fn() -> PeerNote, ctx: &mut Context<'_, Msg>) {
        if !self.shares_active_load {
            return;
        }
        for &to in &self.place.peers {
            let msg = Box::new(Msg::Peer(note()));
            ctx.send(self.place.bus, Msg::Via { to, msg }, 0);
        }
    }

    fn peer_note(&mut self, note: PeerNote, ctx: &mut Context<'_, Msg>) {
        match note {
            PeerNote::Added {
                spec,
                worker,
                predicted_blocks,
            } => {
                let now = ctx.now();
                if let Some(r) = &mut self.recovery {
                    r.sent_request(worker.index(), now);
                }
                self.loads.peer_routed(spec.id, worker, spec.blocks.len());
                let d = Decision {
                    worker,
                    predicted_blocks: predicted_blocks as usize,
                };
                let req = self.request_of(&spec, now);
                self.policy.on_peer_routed(&req, &d);
            }
            PeerNote::PrefillDone { request } => {
                if let Some(worker) = self.loads.worker_of(request) {
                    self.policy.on_prefill_done(worker, request);
                }
            }
            PeerNote::Freed { request } => {
                self.finished(request);
            }
        }
    }
}

impl Actor for RouterActor {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        let now = ctx.now();
        let bytes = env.msg.wire_bytes();
        match env.msg {
            Msg::Request(mut routed) => {
                if let Some(p) = routed.spec.prefix {
                    routed.repeat = !self.setup.seen_prefixes.borrow_mut().insert(p);
                }
                self.route(routed, ctx);
            }
            Msg::HandBack(routed) => {
                // It no longer counts where it was.
                self.own_open -= 1;
                self.release(routed.spec.id, ctx);
                self.stats.rerouted += 1;
                self.route(routed, ctx);
            }
            Msg::Kv { stamp, event } => {
                self.stats.events_received += 1;
                self.live_event(stamp, event, now);
            }
            Msg::Replay(answer) => self.replay(*answer, now),
            Msg::Snapshot(answer) => self.snapshot(*answer, bytes, now),
            Msg::Peer(note) => self.peer_note(note, ctx),
            Msg::PrefillDone { request } => {
                if let Some(worker) = self.loads.worker_of(request) {
                    self.policy.on_prefill_done(worker, request);
                    self.tell_peers(|| PeerNote::PrefillDone { request }, ctx);
                }
            }
            Msg::Ack(ack) => {
                self.stats.acks += 1;
                self.own_open -= 1;
                // The run may end with this completion: the index audit keeps its averages
                // here, so that events applied after the end do not count.
                if let Some(audit) = &self.setup.probes.audit {
                    audit.borrow_mut().settle(now);
                }
                // (A disaggregated request left its prefill worker's load when it landed.)
                self.release(ack.request, ctx);
                ctx.send(self.setup.client, Msg::Ack(ack), 0);
            }
            Msg::Landed { request } => self.release(request, ctx),
            Msg::WorkerDown { worker } => self.loads.set_up(worker, false),
            Msg::Register { worker } => {
                self.loads.set_present(worker, true);
                for routed in std::mem::take(&mut self.pending) {
                    self.route(routed, ctx);
                }
            }
            Msg::Deregister { worker } => {
                // As a router's indexer removes a worker that left: what it held is gone.
                self.loads.set_present(worker, false);
                let mut believe =
                    Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
                believe(&KvEvent::Cleared { worker });
            }
            Msg::WorkerUp { worker } => {
                self.loads.set_up(worker, true);
                for routed in std::mem::take(&mut self.pending) {
                    self.route(routed, ctx);
                }
            }
            Msg::RefreshSignals => self.refresh(ctx),
            Msg::CheckStreams => self.check_streams(ctx),
            Msg::StepStart { .. }
            | Msg::StepEnd { .. }
            | Msg::Handoff(_)
            | Msg::Via { .. }
            | Msg::ReplayRequest { .. }
            | Msg::SnapshotRequest { .. }
            | Msg::HostTierChanged
            | Msg::LinkFreed
            | Msg::Retire { .. } => {
                debug_assert!(false, "the router receives no {}", env.msg.kind());
            }
        }
        self.send_asks(ctx);
        self.keep_checking(ctx);
    }
}
