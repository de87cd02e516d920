//! The client actor: replays the workload (open loop at the arrival times, closed loop with a
//! fixed concurrency, session turns after the previous turn completes), spreads requests over
//! the router replicas (`router.spread`), and records every completed request's outcome.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::engine::{Actor, ActorId, Context, Envelope, Nanos};
use crate::ids::RequestId;
use crate::workload::source::{Recipe, Source};
use crate::workload::RequestSpec;

use super::tally::Tally;
use super::timeline::{note, Mark, SharedTimeline};
use crate::protocol::messages::{Msg, Routed};

/// How the client paces requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// At their arrival times; later session turns wait for the previous turn.
    OpenLoop,
    /// Keep this many in flight, ignoring arrival times and sessions.
    ClosedLoop(ClosedLoop),
}

/// A closed loop's clients: each sends its next request when its last completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedLoop {
    /// Clients.
    pub clients: usize,
    /// Over how long the clients join, ns (0: all at once). As aiperf's
    /// `--concurrency-ramp-duration` (its linear ramp, `LinearStrategy` in
    /// `src/aiperf/timing/ramping.py`, nvda-ci/aiperf at 08cf2cc): the limit starts at one
    /// client and rises by one at even steps, reaching every client at the ramp's end.
    pub ramp_ns: Nanos,
}

impl ClosedLoop {
    /// When client `k` (from 0) sends its first request: `k` steps of `ramp / (clients - 1)`.
    pub fn start_ns(&self, k: usize) -> Nanos {
        if self.clients < 2 {
            return 0;
        }
        let k = k.min(self.clients - 1) as u128;
        (u128::from(self.ramp_ns) * k / (self.clients as u128 - 1)) as Nanos
    }
}

/// The workload's requests as the client sends them: shared by the client actor (later turns,
/// closed-loop refills) and the engine's arrival stream ([`Arrivals`]), which pulls the first
/// deliveries one at a time as the clock reaches them.
pub struct Feed {
    source: Source,
    pacing: Pacing,
    routers: Vec<ActorId>,
    /// Whether every turn of a session goes to one replica (else request `i` to replica `i mod
    /// replicas`).
    by_session: bool,
    /// The first deliveries' numbers still to hand to the arrival stream (a closed loop's
    /// client `k` is the `k`-th).
    initial: std::ops::Range<usize>,
    /// What the requests sent and not yet acknowledged hold, bytes (estimated).
    in_flight_bytes: u64,
}

/// The handle the client and its arrival stream share (one simulation runs on one thread).
pub type SharedFeed = Rc<RefCell<Feed>>;

impl Feed {
    /// A feed of `recipe`'s requests sent to the router replicas `routers`: request `i` to
    /// replica `i mod replicas`, or, `by_session`, every turn of a session to the replica of its
    /// session id (requests without one as before; `router.spread`).
    pub fn shared(
        recipe: &Recipe,
        pacing: Pacing,
        routers: Vec<ActorId>,
        by_session: bool,
    ) -> SharedFeed {
        let initial = match pacing {
            Pacing::OpenLoop => recipe.first_turns(),
            Pacing::ClosedLoop(c) => c.clients.min(recipe.total()),
        };
        Rc::new(RefCell::new(Feed {
            source: recipe.source(),
            pacing,
            routers,
            by_session,
            initial: 0..initial,
            in_flight_bytes: 0,
        }))
    }

    /// What the requests sent and not yet acknowledged hold, bytes (estimated as
    /// [`crate::budget::IN_FLIGHT_BYTES`] plus 8 per name of a prompt block; a session turn's
    /// answer names, fewer than its prompt's and dropped when it finishes, are not counted).
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    fn request_bytes(blocks: usize) -> u64 {
        crate::budget::IN_FLIGHT_BYTES + 8 * blocks as u64
    }

    /// Deliveries the arrival stream will make (first turns, or the first closed-loop batch).
    pub fn initial_count(&self) -> usize {
        self.initial.len()
    }

    /// The replica `spec` goes to: by request number, or by session.
    fn replica(&self, spec: &RequestSpec) -> ActorId {
        let n = self.routers.len();
        let k = match spec.session {
            Some(l) if self.by_session => (l.session % n as u64) as usize,
            _ => (spec.id.0 % n as u64) as usize,
        };
        self.routers[k]
    }

    fn request(&mut self, spec: RequestSpec, at: Nanos) -> (ActorId, Msg) {
        self.in_flight_bytes += Feed::request_bytes(spec.blocks.len());
        let router = self.replica(&spec);
        let msg = Msg::Request(Routed::arriving(Arc::new(spec), router, at));
        (router, msg)
    }

    /// The arrival stream's next delivery: `(time, router replica, message)`.
    fn next_initial(&mut self) -> Option<(Nanos, ActorId, Msg)> {
        let k = self.initial.next()?;
        let (spec, at) = match self.pacing {
            Pacing::OpenLoop => {
                let spec = self.source.next_first_turn()?;
                let at = spec.arrival_ns;
                (spec, at)
            }
            Pacing::ClosedLoop(c) => (self.source.next_in_order()?, c.start_ns(k)),
        };
        let (to, msg) = self.request(spec, at);
        Some((at, to, msg))
    }

    /// What request `done` (of `blocks` block names) completing at `now` sends next, if
    /// anything: `(time, replica, message)` (open loop: its session's next turn; closed loop:
    /// the next request).
    fn after(
        &mut self,
        done: RequestId,
        blocks: usize,
        now: Nanos,
    ) -> Option<(Nanos, ActorId, Msg)> {
        self.in_flight_bytes -= Feed::request_bytes(blocks);
        let (spec, at) = match self.pacing {
            Pacing::OpenLoop => {
                let spec = self.source.follower_of(done)?;
                let delay_ns = spec.session.map_or(0, |l| l.delay_ns);
                let at = now.saturating_add(delay_ns).max(spec.arrival_ns);
                (spec, at)
            }
            Pacing::ClosedLoop(_) => (self.source.next_in_order()?, now),
        };
        let (to, msg) = self.request(spec, at);
        Some((at, to, msg))
    }
}

/// The engine's stream of first deliveries, pulled from the shared feed.
pub struct Arrivals(pub SharedFeed);

impl Iterator for Arrivals {
    type Item = (Nanos, ActorId, Msg);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.borrow_mut().next_initial()
    }
}

/// The client actor.
pub struct Client {
    feed: SharedFeed,
    total: usize,
    /// A client's reply delay: after a response, the next request of a closed loop or a session
    /// waits a further uniform draw from `[0, reply_jitter_ns)` (0: none, and no draw).
    reply_jitter_ns: Nanos,
    /// The outcomes of completed requests.
    pub tally: Tally,
    timeline: Option<SharedTimeline>,
}

impl Client {
    /// A client sending `feed`'s requests, each next one `reply_jitter_ns` at most later than
    /// the pacing says. Outcomes are tallied over `workers` routable workers.
    pub fn new(feed: SharedFeed, workers: usize, reply_jitter_ns: Nanos) -> Self {
        let total = feed.borrow().source.total();
        Client {
            feed,
            total,
            reply_jitter_ns,
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
        self.total
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
        let reply = match self.reply_jitter_ns {
            0 => 0,
            j => (ctx.rng().unit() * j as f64) as Nanos,
        };
        let next =
            self.feed
                .borrow_mut()
                .after(ack.request, ack.prompt_blocks as usize, now + reply);
        if let Some((at, to, msg)) = next {
            ctx.send(to, msg, at - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ClosedLoop;

    /// aiperf's linear ramp of 5 clients over 2 s, by hand: the limit starts at 1 and rises by
    /// one every 2 s / 4 = 0.5 s, so the clients join at 0, 0.5, 1, 1.5 and 2 s (the last at
    /// the ramp's end, not at 2 s x 4/5).
    #[test]
    fn clients_join_at_even_steps_ending_at_the_ramp() {
        let ramp = ClosedLoop {
            clients: 5,
            ramp_ns: 2_000_000_000,
        };
        let starts: Vec<u64> = (0..5).map(|k| ramp.start_ns(k)).collect();
        assert_eq!(
            starts,
            [0, 500_000_000, 1_000_000_000, 1_500_000_000, 2_000_000_000]
        );
        assert_eq!(
            ramp.start_ns(9),
            2_000_000_000,
            "no client joins after the ramp"
        );
        let one = ClosedLoop {
            clients: 1,
            ramp_ns: 2_000_000_000,
        };
        assert_eq!(one.start_ns(0), 0);
        let at_once = ClosedLoop {
            clients: 5,
            ramp_ns: 0,
        };
        assert!((0..5).all(|k| at_once.start_ns(k) == 0));
    }
}
