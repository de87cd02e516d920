//! The router actor: a thin adapter around a [`RoutingPolicy`] and the router's [`LoadBook`].
//! It routes arrivals and hand-backs, feeds the KV events the bus delivers to a policy that
//! learns from them, keeps its load book from acks, and holds requests while every worker is
//! down.

use std::collections::{HashSet, VecDeque};

use crate::engine::{Actor, ActorId, Context, Envelope, Nanos};
use crate::hashers::IdBuilder;
use crate::router::loads::LoadBook;
use crate::router::policy::{RouteRequest, RoutingPolicy};

use super::board::SignalBoard;
use super::messages::{Msg, Routed};
use super::truth::SharedTruth;

/// The router's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Routing decisions made (re-routes included).
    pub decisions: u64,
    /// Requests handed back by failing workers.
    pub rerouted: u64,
    /// KV events that reached the router.
    pub events_received: u64,
    /// KV events the policy applied to its index.
    pub events_applied: u64,
    /// Acks received.
    pub acks: u64,
}

/// The router actor.
pub struct RouterActor {
    policy: Box<dyn RoutingPolicy>,
    loads: LoadBook,
    workers: Vec<ActorId>,
    client: ActorId,
    /// Delay from a decision to the request joining the worker's queue.
    dispatch_ns: Nanos,
    pending: VecDeque<Routed>,
    seen_prefixes: HashSet<u64, IdBuilder>,
    truth: SharedTruth,
    /// The workers' signal board and how often the router refreshes its snapshot of it (0: at
    /// every decision), for a policy that reads signals.
    board: Option<(SignalBoard, Nanos)>,
    /// Whether a snapshot refresh timer is running.
    refreshing: bool,
    /// What the router did.
    pub stats: RouterStats,
}

impl RouterActor {
    /// A router running `policy` (fed KV events if it learns from them), sending to `workers`
    /// (actor addresses, by worker number) `dispatch_ns` after deciding, and acking to `client`.
    pub fn new(
        policy: Box<dyn RoutingPolicy>,
        loads: LoadBook,
        workers: Vec<ActorId>,
        client: ActorId,
        dispatch_ns: Nanos,
        truth: SharedTruth,
        board: Option<(SignalBoard, Nanos)>,
    ) -> Self {
        RouterActor {
            policy,
            loads,
            workers,
            client,
            dispatch_ns,
            pending: VecDeque::new(),
            seen_prefixes: HashSet::default(),
            truth,
            board,
            refreshing: false,
            stats: RouterStats::default(),
        }
    }

    /// The router's load book (requests routed per worker, in flight).
    pub fn loads(&self) -> &LoadBook {
        &self.loads
    }

    fn route(&mut self, mut routed: Routed, ctx: &mut Context<'_, Msg>) {
        if !self.loads.any_up() {
            self.pending.push_back(routed);
            return;
        }
        self.see_signals(ctx);
        let spec = &routed.spec;
        let req = RouteRequest {
            id: spec.id,
            blocks: &spec.blocks,
            input_tokens: spec.input_tokens,
            session: spec.session.map(|l| l.session),
            now: ctx.now(),
        };
        let d = self.policy.decide(&req, &self.loads, ctx.rng());
        self.loads.routed_to(spec.id, d.worker, spec.blocks.len());
        self.policy.on_routed(&req, &d);
        let (others, ever) = {
            let truth = self.truth.borrow();
            let others = truth.others_best(&spec.blocks, d.worker.index());
            (others, truth.ever_computed_depth(&spec.blocks))
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
        let to = self.workers[d.worker.index()];
        ctx.send(to, Msg::Request(routed), self.dispatch_ns);
    }

    /// Brings the snapshot of the workers' signals up to date: at once for an exact view, else
    /// starting the refresh timer if it was idle (the first refresh is now).
    fn see_signals(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some((board, every)) = &self.board else {
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
        let Some((board, every)) = &self.board else {
            return;
        };
        self.loads.refresh_signals(&board.borrow());
        if self.loads.open_requests() > 0 || !self.pending.is_empty() {
            ctx.send(ctx.me(), Msg::RefreshSignals, *every);
        } else {
            self.refreshing = false;
        }
    }

    fn finished(&mut self, request: crate::ids::RequestId) {
        if let Some(worker) = self.loads.finished(request) {
            self.policy.on_finished(worker, request);
        }
    }
}

impl Actor for RouterActor {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        match env.msg {
            Msg::Request(mut routed) => {
                if let Some(p) = routed.spec.prefix {
                    routed.repeat = !self.seen_prefixes.insert(p);
                }
                self.route(routed, ctx);
            }
            Msg::HandBack(routed) => {
                // It no longer counts where it was.
                self.finished(routed.spec.id);
                self.stats.rerouted += 1;
                self.route(routed, ctx);
            }
            Msg::Kv(event) => {
                self.stats.events_received += 1;
                if self.policy.learns_from_events() {
                    self.policy.on_event(&event);
                    self.stats.events_applied += 1;
                }
            }
            Msg::PrefillDone { request } => {
                if let Some(worker) = self.loads.worker_of(request) {
                    self.policy.on_prefill_done(worker, request);
                }
            }
            Msg::Ack(ack) => {
                self.stats.acks += 1;
                self.finished(ack.request);
                ctx.send(self.client, Msg::Ack(ack), 0);
            }
            Msg::WorkerDown { worker } => self.loads.set_up(worker, false),
            Msg::WorkerUp { worker } => {
                self.loads.set_up(worker, true);
                for routed in std::mem::take(&mut self.pending) {
                    self.route(routed, ctx);
                }
            }
            Msg::RefreshSignals => self.refresh(ctx),
            Msg::StepStart { .. } | Msg::StepEnd { .. } | Msg::Handoff(_) => {
                debug_assert!(false, "the router receives no {}", env.msg.kind());
            }
        }
    }
}
