//! A worker's KV event stream: the events a step's stored and evicted blocks cause (and, with
//! lower tiers, the blocks offloaded to them and dropped from them), stamped
//! with the worker's epoch and a sequence number and kept in a replay buffer; and the worker's
//! answers to routers recovering from a gap (a replay of the events kept, or a snapshot of its
//! cache). See [`crate::router::stream`] for the router's side.
//!
//! A replay or snapshot answer reflects the worker's cache when the request arrives, including
//! the changes of the step in progress, whose live events are still on their way (they arrive
//! after the answer and are dropped as duplicates).

use crate::engine::{ActorId, Context, Nanos};
use crate::protocol::kv_event::KvEvent;
use crate::protocol::kv_event::Stamp;

use super::super::timeline::{note, Mark};
use super::super::topology::Role;
use super::actor::Worker;
use super::kv::Changes;
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
        // reports a store on another medium.
        for m in changes.lower {
            let worker = me;
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
        let runs = changes.stored.len();
        for (k, (parent, blocks)) in changes.stored.into_iter().enumerate() {
            let ev = KvEvent::Stored {
                worker: me,
                parent,
                blocks,
                own_tail: if k + 1 == runs { changes.own_tail } else { 0 },
            };
            self.publish(ev, delay, ctx);
        }
    }

    /// Stamps `event` with the next sequence number, keeps it for replay, and hands it to the
    /// bus `delay` from now.
    pub(super) fn publish(&mut self, event: KvEvent, delay: Nanos, ctx: &mut Context<'_, Msg>) {
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

    /// Answers a router's snapshot request: every named block the worker holds.
    pub(super) fn answer_snapshot(&self, reply_to: ActorId, ctx: &mut Context<'_, Msg>) {
        if !self.answers() {
            return;
        }
        let answer = SnapshotAnswer {
            worker: self.setup.index,
            epoch: self.epoch,
            next: self.next_seq,
            blocks: self.sched.snapshot(),
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
