//! The router actor's side of the KV event streams: events applied in stream order through the
//! pure [`Recovery`](crate::router::recovery::Recovery), the replay and snapshot answers, fallback guesses, the asks it sends over
//! the bus and the stream check timer.

use crate::engine::{Context, Nanos};
use crate::ids::WorkerId;
use crate::protocol::kv_event::{KvEvent, Stamp};
use crate::protocol::messages::{Msg, ReplayAnswer, SnapshotAnswer};
use crate::router::policy::RoutingPolicy;
use crate::router::stream::Ask;
use crate::workload::RequestSpec;

use super::{RouterActor, RouterSetup};

impl RouterActor {
    /// What the router now believes, applied to its policy and reported to the audit: the
    /// `believe` callback of [`Recovery`]'s methods (borrowing only those two fields, so that
    /// the recovery state can be borrowed beside it).
    pub(super) fn believer<'a>(
        policy: &'a mut Box<dyn RoutingPolicy>,
        setup: &'a RouterSetup,
        replica: usize,
        now: Nanos,
    ) -> impl FnMut(&KvEvent) + 'a {
        move |event| {
            policy.on_event(event);
            if let Some(audit) = &setup.probes.audit {
                audit.borrow_mut().believe(replica, event, now);
            }
        }
    }

    pub(super) fn live_event(&mut self, stamp: Stamp, event: KvEvent, now: Nanos) {
        let event = self.own_tail_marked_if_unread(event);
        let Some(r) = &mut self.recovery else {
            return;
        };
        let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
        if r.live(stamp, event, now, believe) {
            self.stats.events_applied += 1;
            self.stats.first_applied_ns.get_or_insert(now);
        }
    }

    pub(super) fn replay(&mut self, answer: ReplayAnswer, now: Nanos) {
        let ReplayAnswer {
            worker,
            epoch,
            events,
            next,
        } = answer;
        let events = events
            .into_iter()
            .map(|(seq, event)| (seq, self.own_tail_marked_if_unread(event)))
            .collect();
        let Some(r) = &mut self.recovery else {
            return;
        };
        let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
        let applied = r.replay(worker, epoch, events, next, now, believe);
        self.stats.events_applied += applied;
        self.stats.replayed += applied;
        if applied > 0 {
            self.stats.first_applied_ns.get_or_insert(now);
        }
    }

    pub(super) fn snapshot(&mut self, answer: SnapshotAnswer, bytes: u64, now: Nanos) {
        self.stats.resync_bytes += bytes;
        let Some(r) = &mut self.recovery else {
            return;
        };
        let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
        if r.snapshot(answer, now, believe) {
            self.stats.snapshots_applied += 1;
            self.stats.first_applied_ns.get_or_insert(now);
        }
    }

    /// In fallback, a decision for `w` counts as `w` holding the prompt for the TTL.
    pub(super) fn guess(&mut self, spec: &RequestSpec, w: usize, now: Nanos) {
        if let Some(r) = &mut self.recovery {
            let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
            r.guess(&spec.blocks, w, now, believe);
        }
    }

    /// Forgets predictions whose TTL is up.
    pub(super) fn expire_guesses(&mut self, now: Nanos) {
        if let Some(r) = &mut self.recovery {
            let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
            r.expire_guesses(now, believe);
        }
    }

    /// Sends the replay and snapshot requests gathered while handling a message.
    pub(super) fn send_asks(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some(r) = &mut self.recovery else {
            return;
        };
        for (w, ask) in r.take_asks() {
            let worker = WorkerId::at(w);
            let reply_to = ctx.me();
            let msg = Box::new(match ask {
                Ask::Replay { from } => Msg::ReplayRequest {
                    worker,
                    from,
                    reply_to,
                },
                Ask::Snapshot => Msg::SnapshotRequest { worker, reply_to },
            });
            let to = self.setup.workers[w];
            ctx.send(self.place.bus, Msg::Via { to, msg }, 0);
        }
    }

    /// Starts the stream check timer if it is idle and requests are open (a router with no
    /// request open lets its checks rest, so that a run ends; the next request wakes them).
    pub(super) fn keep_checking(&mut self, ctx: &mut Context<'_, Msg>) {
        let busy = self.busy();
        if let Some(delay) = self.recovery.as_mut().and_then(|r| r.start_check(busy)) {
            ctx.send(ctx.me(), Msg::CheckStreams, delay);
        }
    }

    /// The stream check timer: retries and silences, and the next tick while needed.
    pub(super) fn check_streams(&mut self, ctx: &mut Context<'_, Msg>) {
        let now = ctx.now();
        if let Some(r) = &mut self.recovery {
            let believe = Self::believer(&mut self.policy, &self.setup, self.place.replica, now);
            r.check(now, believe);
        }
        self.keep_checking(ctx);
    }
}
