//! The router actor: a thin adapter around [`Policy`]. It routes arrivals (and requests handed
//! back by a failing worker), applies the KV events the bus delivers, keeps load bookkeeping from
//! acks, and holds requests while every worker is down.

use std::collections::{HashSet, VecDeque};

use crate::hashers::IdBuilder;

use crate::engine::{Actor, ActorId, Context, Envelope};
use crate::router::policy::Policy;

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
    policy: Policy,
    workers: Vec<ActorId>,
    client: ActorId,
    pending: VecDeque<Routed>,
    seen_prefixes: HashSet<u64, IdBuilder>,
    truth: SharedTruth,
    /// What the router did.
    pub stats: RouterStats,
}

impl RouterActor {
    /// A router sending to `workers` (actor addresses, by worker number) and acking to `client`.
    pub fn new(policy: Policy, workers: Vec<ActorId>, client: ActorId, truth: SharedTruth) -> Self {
        RouterActor {
            policy,
            workers,
            client,
            pending: VecDeque::new(),
            seen_prefixes: HashSet::default(),
            truth,
            stats: RouterStats::default(),
        }
    }

    /// The policy (its counters and index).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn route(&mut self, mut routed: Routed, ctx: &mut Context<'_, Msg>) {
        if !self.policy.any_up() {
            self.pending.push_back(routed);
            return;
        }
        let blocks = &routed.spec.blocks;
        let now = ctx.now();
        let d = self.policy.route(blocks, now, ctx.rng());
        let (others, ever) = {
            let mut truth = self.truth.borrow_mut();
            let others = truth.others_best(blocks, d.worker);
            (others, truth.ever_computed_depth(blocks))
        };
        tracing::trace!(
            request = routed.spec.id,
            worker = d.worker,
            predicted = d.predicted_blocks,
            "route"
        );
        routed.worker = d.worker;
        routed.predicted_blocks = d.predicted_blocks as u32;
        routed.others_held_blocks = others as u32;
        routed.ever_computed_blocks = ever as u32;
        self.stats.decisions += 1;
        ctx.send(self.workers[d.worker], Msg::Request(routed), 0);
    }
}

impl Actor for RouterActor {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        match env.msg {
            Msg::Request(mut routed) => {
                if env.from == self.client {
                    if let Some(p) = routed.spec.prefix {
                        routed.repeat = !self.seen_prefixes.insert(p);
                    }
                } else {
                    // Handed back by a worker that went down: it no longer counts there.
                    self.policy
                        .finished(routed.worker, routed.spec.blocks.len());
                    self.stats.rerouted += 1;
                }
                self.route(routed, ctx);
            }
            Msg::KvStored { worker, blocks, .. } => {
                self.stats.events_received += 1;
                self.stats.events_applied += u64::from(self.policy.on_stored(worker, &blocks));
            }
            Msg::KvRemoved { worker, blocks } => {
                self.stats.events_received += 1;
                self.stats.events_applied += u64::from(self.policy.on_removed(worker, &blocks));
            }
            Msg::KvCleared { worker } => {
                self.stats.events_received += 1;
                self.stats.events_applied += u64::from(self.policy.on_cleared(worker));
            }
            Msg::Ack(ack) => {
                self.stats.acks += 1;
                self.policy
                    .finished(ack.prefill_worker, ack.prompt_blocks as usize);
                ctx.send(self.client, Msg::Ack(ack), 0);
            }
            Msg::WorkerDown { worker } => self.policy.set_up(worker, false),
            Msg::WorkerUp { worker } => {
                self.policy.set_up(worker, true);
                for routed in std::mem::take(&mut self.pending) {
                    self.route(routed, ctx);
                }
            }
            Msg::Timer { .. } | Msg::Handoff(_) => {
                debug_assert!(false, "the router receives no {}", env.msg.kind());
            }
        }
    }
}
