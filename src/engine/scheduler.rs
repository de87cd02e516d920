//! The scheduler: virtual time, one ordered queue of pending deliveries, one mailbox per actor.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crossbeam_channel::{Receiver, Sender};

use super::actor::{Actor, ActorId, Context, Envelope};
use super::Nanos;
use crate::rng::SimRng;

/// Pending deliveries, earliest `(time, seq)` first.
///
/// The heap holds only small keys `(time, seq, slot)`; the messages wait in a slab of slots that
/// are reused, so sifting the heap never moves a message.
pub struct EventQueue<M> {
    heap: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    slots: Vec<Option<Parked<M>>>,
    free: Vec<u32>,
    next_seq: u64,
    /// Deliveries known in advance, in `(time, seq)` order, merged with the heap on pop so that
    /// a long workload does not sit in (and slow down) the heap.
    stream: VecDeque<(Nanos, u64, Parked<M>)>,
}

struct Parked<M> {
    from: ActorId,
    to: ActorId,
    msg: M,
}

impl<M> EventQueue<M> {
    fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            stream: VecDeque::new(),
        }
    }

    /// Appends deliveries known in advance; they get the next `seq`s in order, exactly as if each
    /// had been pushed. Times must not decrease along the stream nor go below earlier stream items.
    fn extend_stream(&mut self, items: impl IntoIterator<Item = (Nanos, ActorId, ActorId, M)>) {
        for (time, from, to, msg) in items {
            debug_assert!(
                self.stream.back().is_none_or(|last| last.0 <= time),
                "a stream is in time order"
            );
            let seq = self.next_seq;
            self.next_seq += 1;
            self.stream.push_back((time, seq, Parked { from, to, msg }));
        }
    }

    /// Schedules a delivery; `seq` is assigned now, in send order.
    pub(super) fn push(&mut self, time: Nanos, from: ActorId, to: ActorId, msg: M) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let parked = Some(Parked { from, to, msg });
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = parked;
                slot
            }
            None => {
                self.slots.push(parked);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 pending messages")
            }
        };
        self.heap.push(Reverse((time, seq, slot)));
    }

    fn pop(&mut self) -> Option<Envelope<M>> {
        let stream_first = match (self.stream.front(), self.heap.peek()) {
            (Some(&(t, q, _)), Some(&Reverse((ht, hq, _)))) => (t, q) < (ht, hq),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if stream_first {
            let (time, seq, Parked { from, to, msg }) =
                self.stream.pop_front().expect("checked non-empty");
            return Some(Envelope {
                time,
                seq,
                from,
                to,
                msg,
            });
        }
        let Reverse((time, seq, slot)) = self.heap.pop()?;
        let Parked { from, to, msg } = self.slots[slot as usize]
            .take()
            .expect("a queued key has a parked message");
        self.free.push(slot);
        Some(Envelope {
            time,
            seq,
            from,
            to,
            msg,
        })
    }
}

struct Slot<A: Actor> {
    actor: A,
    inbox: Sender<Envelope<A::Msg>>,
    mailbox: Receiver<Envelope<A::Msg>>,
}

/// A deterministic simulation of actors of type `A` (typically an enum of the concrete actors).
pub struct Simulation<A: Actor> {
    slots: Vec<Slot<A>>,
    queue: EventQueue<A::Msg>,
    rng: SimRng,
    now: Nanos,
    delivered: u64,
}

impl<A: Actor> Simulation<A> {
    /// An empty simulation drawing from `rng`.
    pub fn new(rng: SimRng) -> Self {
        Simulation {
            slots: Vec::new(),
            queue: EventQueue::new(),
            rng,
            now: 0,
            delivered: 0,
        }
    }

    /// Adds an actor and returns its address (addresses count up from 0).
    pub fn add(&mut self, actor: A) -> ActorId {
        // One delivery at a time: the mailbox never holds more than one message.
        let (inbox, mailbox) = crossbeam_channel::bounded(1);
        self.slots.push(Slot {
            actor,
            inbox,
            mailbox,
        });
        self.slots.len() - 1
    }

    /// Schedules a message from outside the actors (the initial workload, injected faults).
    pub fn schedule(&mut self, at: Nanos, from: ActorId, to: ActorId, msg: A::Msg) {
        self.queue.push(at, from, to, msg);
    }

    /// Schedules deliveries known in advance (a workload's arrivals), sorted here by time (stably,
    /// so equal times keep their order). They are ordered with every other delivery by
    /// `(time, seq)` exactly as if each had been [`Simulation::schedule`]d, but wait outside the
    /// heap, so a long workload costs nothing per step.
    pub fn schedule_stream(&mut self, from: ActorId, to: ActorId, mut items: Vec<(Nanos, A::Msg)>) {
        items.sort_by_key(|(t, _)| *t);
        self.queue
            .extend_stream(items.into_iter().map(|(t, msg)| (t, from, to, msg)));
    }

    /// The run's generator, for draws made before the first delivery (e.g. a workload shuffle).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Messages delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Delivers the next pending message, showing it to `observe` first. Returns `false` when
    /// nothing is pending.
    pub fn step(&mut self, observe: &mut impl FnMut(&Envelope<A::Msg>)) -> bool {
        let Some(env) = self.queue.pop() else {
            return false;
        };
        debug_assert!(env.time >= self.now, "time never goes backwards");
        self.now = env.time;
        self.delivered += 1;
        observe(&env);
        let slot = &mut self.slots[env.to];
        slot.inbox
            .send(env)
            .expect("the simulation owns both ends of every mailbox");
        let mut ctx = Context {
            now: self.now,
            me: 0,
            queue: &mut self.queue,
            rng: &mut self.rng,
        };
        while let Ok(env) = slot.mailbox.try_recv() {
            ctx.me = env.to;
            slot.actor.handle(env, &mut ctx);
        }
        true
    }

    /// Runs until nothing is pending.
    pub fn run(&mut self, mut observe: impl FnMut(&Envelope<A::Msg>)) {
        while self.step(&mut observe) {}
    }

    /// The actors, in address order, once the run is over.
    pub fn into_actors(self) -> Vec<A> {
        self.slots.into_iter().map(|s| s.actor).collect()
    }

    /// The actor at `id`.
    pub fn actor(&self, id: ActorId) -> &A {
        &self.slots[id].actor
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKind;

    /// Replies to every message with the next number until a limit, recording what it saw.
    struct Echo {
        peer: ActorId,
        seen: Vec<(Nanos, u32)>,
    }

    impl Actor for Echo {
        type Msg = u32;
        fn handle(&mut self, env: Envelope<u32>, ctx: &mut Context<'_, u32>) {
            self.seen.push((ctx.now(), env.msg));
            if env.msg < 5 {
                ctx.send(self.peer, env.msg + 1, 10);
            }
        }
    }

    #[test]
    fn ping_pong_advances_virtual_time() {
        let mut sim = Simulation::new(SimRng::new(RngKind::Chacha, 0));
        let a = sim.add(Echo {
            peer: 1,
            seen: vec![],
        });
        let b = sim.add(Echo {
            peer: 0,
            seen: vec![],
        });
        sim.schedule(0, b, a, 0);
        sim.run(|_| {});
        assert_eq!(sim.delivered(), 6);
        assert_eq!(sim.now(), 50);
        let actors = sim.into_actors();
        assert_eq!(actors[0].seen, vec![(0, 0), (20, 2), (40, 4)]);
        assert_eq!(actors[1].seen, vec![(10, 1), (30, 3), (50, 5)]);
    }

    #[test]
    fn ties_are_delivered_in_send_order() {
        let mut sim = Simulation::new(SimRng::new(RngKind::Chacha, 0));
        let a = sim.add(Echo {
            peer: 0,
            seen: vec![],
        });
        for n in [9, 7, 8] {
            sim.schedule(100, a, a, n);
        }
        sim.schedule(50, a, a, 6);
        let mut order = Vec::new();
        sim.run(|env| order.push((env.time, env.seq, env.msg)));
        assert_eq!(
            order,
            vec![(50, 3, 6), (100, 0, 9), (100, 1, 7), (100, 2, 8)]
        );
    }
}
