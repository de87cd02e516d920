//! The client actor: replays the workload (open loop at the arrival times, closed loop with a
//! fixed concurrency, session turns after the previous turn completes), spreads requests over
//! the router replicas (`router.spread`), and records every completed request's outcome.

use std::collections::HashMap;
use std::sync::Arc;

use crate::engine::{Actor, ActorId, Context, Envelope, Nanos};
use crate::ids::RequestId;
use crate::scenario::Spread;
use crate::workload::RequestSpec;

use super::messages::{Msg, Routed};
use super::tally::Tally;
use super::timeline::{note, Mark, SharedTimeline};

/// How the client paces requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// At their arrival times; later session turns wait for the previous turn.
    OpenLoop,
    /// Keep this many in flight, ignoring arrival times and sessions.
    ClosedLoop(usize),
}

/// The client actor.
pub struct Client {
    specs: Vec<Arc<RequestSpec>>,
    pacing: Pacing,
    routers: Vec<ActorId>,
    spread: Spread,
    next: usize,
    /// Later session turns by the turn they wait for (looked up only, never iterated).
    followers: HashMap<RequestId, Vec<usize>>,
    sent: usize,
    /// The outcomes of completed requests.
    pub tally: Tally,
    timeline: Option<SharedTimeline>,
}

impl Client {
    /// A client for `specs` (in arrival order, ids equal to positions) sending to the router
    /// replicas `routers` as `spread` says. Outcomes are tallied over `workers` routable workers.
    pub fn new(
        specs: Vec<RequestSpec>,
        pacing: Pacing,
        routers: Vec<ActorId>,
        spread: Spread,
        workers: usize,
    ) -> Self {
        let mut followers: HashMap<RequestId, Vec<usize>> = HashMap::new();
        if pacing == Pacing::OpenLoop {
            for (i, s) in specs.iter().enumerate() {
                if let Some(after) = s.session.and_then(|l| l.after) {
                    followers.entry(after).or_default().push(i);
                }
            }
        }
        Client {
            specs: specs.into_iter().map(Arc::new).collect(),
            pacing,
            routers,
            spread,
            next: 0,
            followers,
            sent: 0,
            tally: Tally::new(workers),
            timeline: None,
        }
    }

    /// Notes every completed request's phases on `timeline`.
    pub fn with_timeline(mut self, timeline: Option<SharedTimeline>) -> Self {
        self.timeline = timeline;
        self
    }

    /// Requests in the workload.
    pub fn total(&self) -> usize {
        self.specs.len()
    }

    /// Requests sent so far.
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// The first deliveries to schedule before the run: `(time, router replica, message)`.
    pub fn initial(&mut self) -> Vec<(Nanos, ActorId, Msg)> {
        let picks: Vec<usize> = match self.pacing {
            Pacing::OpenLoop => (0..self.specs.len())
                .filter(|&i| self.specs[i].session.and_then(|l| l.after).is_none())
                .collect(),
            Pacing::ClosedLoop(n) => {
                self.next = n.min(self.specs.len());
                (0..self.next).collect()
            }
        };
        picks
            .into_iter()
            .map(|i| {
                let at = match self.pacing {
                    Pacing::OpenLoop => self.specs[i].arrival_ns,
                    Pacing::ClosedLoop(_) => 0,
                };
                let (to, msg) = self.request(i, at);
                (at, to, msg)
            })
            .collect()
    }

    /// The replica request `i` goes to: by request number, or by session.
    fn replica(&self, i: usize) -> ActorId {
        let n = self.routers.len();
        let k = match (self.spread, self.specs[i].session) {
            (Spread::Session, Some(l)) => (l.session % n as u64) as usize,
            _ => i % n,
        };
        self.routers[k]
    }

    fn request(&mut self, i: usize, at: Nanos) -> (ActorId, Msg) {
        self.sent += 1;
        let router = self.replica(i);
        let msg = Msg::Request(Routed {
            spec: Arc::clone(&self.specs[i]),
            router,
            arrived_ns: at,
            worker: None,
            predicted_blocks: 0,
            others_held_blocks: 0,
            ever_computed_blocks: 0,
            retries: 0,
            repeat: false,
            prefill: None,
        });
        (router, msg)
    }
}

impl Actor for Client {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        let Msg::Ack(ack) = env.msg else {
            debug_assert!(false, "the client receives only acks");
            return;
        };
        self.tally.add(&ack);
        note(&self.timeline, || Mark::Request {
            id: ack.request,
            prefill_worker: ack.prefill_worker,
            worker: ack.worker,
            arrived: ack.arrived_ns,
            started: ack.started_ns,
            first_token: ack.first_token_ns,
            transferred: ack.transferred_ns,
            done: ack.done_ns,
            rejected: ack.rejected,
        });
        let now = ctx.now();
        match self.pacing {
            Pacing::OpenLoop => {
                if self.followers.is_empty() {
                    return;
                }
                for next in self.followers.remove(&ack.request).unwrap_or_default() {
                    let spec = &self.specs[next];
                    let delay_ns = spec.session.map_or(0, |l| l.delay_ns);
                    let at = (now + delay_ns).max(spec.arrival_ns);
                    let (to, msg) = self.request(next, at);
                    ctx.send(to, msg, at - now);
                }
            }
            Pacing::ClosedLoop(_) => {
                if self.next < self.specs.len() {
                    let next = self.next;
                    self.next += 1;
                    let (to, msg) = self.request(next, now);
                    ctx.send(to, msg, 0);
                }
            }
        }
    }
}
