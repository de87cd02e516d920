//! A worker's KV event stream: the events a step's stored and evicted blocks cause (and, with
//! lower tiers, the blocks offloaded to them and dropped from them), stamped
//! with the worker's epoch and a sequence number and kept in a replay buffer; and the worker's
//! answers to routers recovering from a gap (a replay of the events kept, or a snapshot of its
//! cache, lower tiers included). See [`crate::router::stream`] for the router's side.
//!
//! A replay or snapshot answer reflects the worker's cache when the request arrives, including
//! the changes of the step in progress, whose live events are still on their way (they arrive
//! after the answer and are dropped as duplicates).

use crate::engine::{ActorId, Context, Nanos};
use crate::protocol::kv_event::{Blocks, KvEvent, Stamp};

use super::super::timeline::{note, Mark};
use super::super::topology::Role;
use super::actor::Worker;
use super::kv::Changes;
use super::tiers::{SharedHost, TierMove};
use crate::protocol::kv_event::Tier;
use crate::protocol::messages::{Msg, ReplayAnswer, SnapshotAnswer};

impl Worker {
    /// Blocks stored and evicted while scheduling: their KV events reach the bus at the end of
    /// the step (`delay` from now).
    pub(super) fn kv_changed(
        &mut self,
        changes: Changes,
        delay: Nanos,
        ctx: &mut Context<'_, Msg>,
    ) {
        let me = self.setup.index;
        self.stats.evicted_blocks += changes.evicted.len() as u64;
        if !changes.evicted.is_empty() {
            let (at, blocks) = (ctx.now(), changes.evicted.len() as u32);
            note(&self.setup.probes.timeline, || Mark::Evicted {
                worker: me,
                at,
                blocks,
            });
        }
        if let Some(audit) = &self.setup.probes.audit {
            let mut audit = audit.borrow_mut();
            audit.truth_removed(me.index(), &changes.evicted, ctx.now());
            for (_, blocks) in &changes.stored {
                audit.truth_stored(me.index(), blocks, ctx.now());
            }
        }
        if !self.setup.publish {
            return;
        }
        if !changes.evicted.is_empty() {
            let ev = KvEvent::Removed {
                worker: me,
                blocks: changes.evicted,
            };
            self.publish(ev, delay, ctx);
        }
        // The evicted blocks' offload to the lower tiers, tier by tier, as vLLM's publisher
        // reports a store on another medium. A cluster-shared host pool's changes, this
        // worker's and the others' since it last reported, come from the pool's log instead,
        // and the other workers are woken to report them as well.
        match self.shared_host() {
            None => self.publish_moves(changes.lower, delay, ctx),
            Some(pool) => {
                let moves = pool.borrow_mut().drain(me.index());
                self.publish_moves(moves, delay, ctx);
                let wake = pool.borrow_mut().to_wake(me.index());
                for w in wake {
                    ctx.send(self.setup.host_peers[w], Msg::HostTierChanged, delay);
                }
            }
        }
        let runs = changes.stored.len();
        for (k, (parent, blocks)) in changes.stored.into_iter().enumerate() {
            let ev = KvEvent::Stored {
                worker: me,
                parent,
                blocks: Blocks::with_own_tail(
                    blocks,
                    if k + 1 == runs { changes.own_tail } else { 0 },
                ),
            };
            self.publish(ev, delay, ctx);
        }
    }

    /// Publishes lower-tier changes, each as its stores then its drops.
    fn publish_moves(&mut self, moves: Vec<TierMove>, delay: Nanos, ctx: &mut Context<'_, Msg>) {
        let worker = self.setup.index;
        for m in moves {
            if !m.stored.is_empty() {
                let (tier, blocks) = (m.tier, m.stored);
                self.publish(
                    KvEvent::TierStored {
                        worker,
                        tier,
                        blocks,
                    },
                    delay,
                    ctx,
                );
            }
            if !m.removed.is_empty() {
                let (tier, blocks) = (m.tier, m.removed);
                self.publish(
                    KvEvent::TierRemoved {
                        worker,
                        tier,
                        blocks,
                    },
                    delay,
                    ctx,
                );
            }
        }
    }

    /// The cluster-shared host pool (`[kv.host] scope = "cluster"`), if the worker's host tier
    /// is one.
    fn shared_host(&self) -> Option<SharedHost> {
        self.setup
            .engine
            .tiers
            .as_ref()
            .and_then(|t| t.shared_host.clone())
    }

    /// Whether it reports a cluster-shared host pool on its stream: it publishes and is
    /// routable (as every publishing rank of `aisimulate-core`'s shared pool reports the pool).
    fn reports_shared_host(&self) -> bool {
        self.setup.publish && !matches!(self.setup.role, Role::Decode)
    }

    /// The worker, built, reporting the shared host pool if it has one (empty: the run has not
    /// started).
    pub(super) fn subscribed(self) -> Self {
        if let Some(pool) = self.shared_host().filter(|_| self.reports_shared_host()) {
            let held = pool.borrow_mut().subscribe(self.setup.index.index());
            debug_assert!(held.is_empty(), "workers are built before the run");
        }
        self
    }

    /// Stops reporting the shared host pool (down, or out of the cluster).
    pub(super) fn unsubscribe(&mut self) {
        if let Some(pool) = self.shared_host() {
            pool.borrow_mut().unsubscribe(self.setup.index.index());
        }
    }

    /// Back up: reports the shared host pool again, starting with every block it holds (its
    /// `Cleared` on going down took them out of the routers' view), as a rank subscribing to
    /// `aisimulate-core`'s shared pool starts from a snapshot of its residency.
    pub(super) fn resubscribe(&mut self, ctx: &mut Context<'_, Msg>) {
        let me = self.setup.index.index();
        let Some(pool) = self.shared_host().filter(|_| self.reports_shared_host()) else {
            return;
        };
        if pool.borrow().subscribed(me) {
            return;
        }
        let blocks = pool.borrow_mut().subscribe(me);
        if !blocks.is_empty() {
            let delay = self.published_until.saturating_sub(ctx.now());
            let ev = KvEvent::TierStored {
                worker: self.setup.index,
                tier: Tier::Host,
                blocks,
            };
            self.publish(ev, delay, ctx);
        }
    }

    /// Another worker changed the shared host pool: reports what changed since it last did,
    /// after what it already published.
    pub(super) fn report_shared_host(&mut self, ctx: &mut Context<'_, Msg>) {
        let Some(pool) = self.shared_host() else {
            return;
        };
        let moves = pool.borrow_mut().drain(self.setup.index.index());
        if !moves.is_empty() {
            let delay = self.published_until.saturating_sub(ctx.now());
            self.publish_moves(moves, delay, ctx);
        }
    }

    /// Stamps `event` with the next sequence number, keeps it for replay, and hands it to the
    /// bus `delay` from now.
    pub(super) fn publish(&mut self, event: KvEvent, delay: Nanos, ctx: &mut Context<'_, Msg>) {
        self.published_until = self.published_until.max(ctx.now() + delay);
        let stamp = Stamp {
            epoch: self.epoch,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        if self.setup.replay_buffer > 0 {
            if self.replay.len() == self.setup.replay_buffer {
                self.replay.pop_front();
            }
            self.replay.push_back((stamp.seq, event.clone()));
        }
        ctx.send(self.setup.bus, Msg::Kv { stamp, event }, delay);
    }

    /// Whether it answers replay and snapshot requests: a routable worker that is up and
    /// publishes (one that does not has no publisher to ask).
    fn answers(&self) -> bool {
        self.up && self.setup.publish && !matches!(self.setup.role, Role::Decode)
    }

    /// Answers a router's replay request: the events kept from sequence number `from` on.
    pub(super) fn answer_replay(&self, from: u64, reply_to: ActorId, ctx: &mut Context<'_, Msg>) {
        if !self.answers() {
            return;
        }
        let events = self
            .replay
            .iter()
            .filter(|(seq, _)| *seq >= from)
            .cloned()
            .collect();
        let answer = ReplayAnswer {
            worker: self.setup.index,
            epoch: self.epoch,
            events,
            next: self.next_seq,
        };
        let msg = Box::new(Msg::Replay(Box::new(answer)));
        ctx.send(self.setup.bus, Msg::Via { to: reply_to, msg }, 0);
    }

    /// Answers a router's snapshot request: every named block the worker holds on its device
    /// and on each lower tier, all of which its events report (a cluster-shared host pool's
    /// whole residency: the pool changes it has not reported yet come after, on its stream,
    /// and re-applying them leaves the router where the pool is). As Dynamo's worker-side
    /// recovery dump covers every tier: `LocalKvIndexer::dump_all_tiers` in
    /// `lib/kv-router/src/indexer/local.rs` (a 2026 revision: the device tree's events, then
    /// each lower tier's with its `storage_tier`, under one reset of every tier).
    pub(super) fn answer_snapshot(&self, reply_to: ActorId, ctx: &mut Context<'_, Msg>) {
        if !self.answers() {
            return;
        }
        let answer = SnapshotAnswer {
            worker: self.setup.index,
            epoch: self.epoch,
            next: self.next_seq,
            blocks: self.sched.snapshot(),
            lower: self.sched.lower_snapshot(),
        };
        let msg = Box::new(Msg::Snapshot(Box::new(answer)));
        ctx.send(self.setup.bus, Msg::Via { to: reply_to, msg }, 0);
    }

    /// A new process after a restart: a new stream, from 0, with an empty replay buffer.
    pub(super) fn restart_stream(&mut self) {
        self.next_seq = 0;
        self.replay.clear();
    }
}
