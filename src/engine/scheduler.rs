//! The scheduler: virtual time, the queue of pending deliveries, and the actors it steps.

use super::actor::{Actor, Context};
use super::envelope::{ActorId, Envelope};
use super::queue::EventQueue;
use super::time::Nanos;
use crate::rng::SimRng;

/// A deterministic simulation of actors of type `A` (typically an enum of the concrete actors).
pub struct Simulation<A: Actor> {
    actors: Vec<A>,
    queue: EventQueue<A::Msg>,
    rng: SimRng,
    now: Nanos,
    delivered: u64,
}

impl<A: Actor> Simulation<A> {
    /// An empty simulation drawing from `rng`.
    pub fn new(rng: SimRng) -> Self {
        Simulation {
            actors: Vec::new(),
            queue: EventQueue::new(),
            rng,
            now: 0,
            delivered: 0,
        }
    }

    /// Adds an actor and returns its address (addresses count up from 0).
    pub fn add(&mut self, actor: A) -> ActorId {
        self.actors.push(actor);
        ActorId(u32::try_from(self.actors.len() - 1).expect("fewer than 2^32 actors"))
    }

    /// Schedules a message from outside the actors (the initial workload, injected faults).
    pub fn schedule(&mut self, at: Nanos, from: ActorId, to: ActorId, msg: A::Msg) {
        self.queue.push(at, from, to, msg);
    }

    /// Schedules `count` deliveries known in advance (a workload's arrivals), in time order
    /// (`(time, destination, message)`), made by `items` only when the clock nears them. They
    /// are ordered with every other delivery by `(time, seq)` exactly as if each had been
    /// [`Simulation::schedule`]d now, but wait outside the heap and outside memory, so a long
    /// workload costs nothing per step.
    pub fn schedule_stream(
        &mut self,
        from: ActorId,
        count: u64,
        items: impl Iterator<Item = (Nanos, ActorId, A::Msg)> + 'static,
    ) where
        A::Msg: 'static,
    {
        self.queue.set_stream(
            count,
            Box::new(items.map(move |(t, to, msg)| (t, from, to, msg))),
        );
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

    /// Whether an actor asked for a delivery at or past the end of time
    /// ([`super::END_OF_TIME`]): the run stopped there, and its times cannot be trusted.
    pub fn overflowed(&self) -> bool {
        self.queue.overflowed()
    }

    /// The time of the next pending delivery (`None`: nothing is pending, or the run stopped
    /// at the end of time).
    pub fn next_time(&mut self) -> Option<Nanos> {
        if self.queue.overflowed() {
            return None;
        }
        self.queue.next_time()
    }

    /// Delivers the next pending message, showing it to `observe` first. Returns `false` when
    /// nothing is pending.
    pub fn step(&mut self, observe: &mut impl FnMut(&Envelope<A::Msg>)) -> bool {
        if self.queue.overflowed() {
            return false;
        }
        let Some(env) = self.queue.pop() else {
            return false;
        };
        debug_assert!(env.time >= self.now, "time never goes backwards");
        self.now = env.time;
        self.delivered += 1;
        observe(&env);
        let actor = &mut self.actors[env.to.index()];
        let mut ctx = Context {
            now: self.now,
            me: env.to,
            queue: &mut self.queue,
            rng: &mut self.rng,
        };
        actor.handle(env, &mut ctx);
        true
    }

    /// Runs until nothing is pending.
    pub fn run(&mut self, mut observe: impl FnMut(&Envelope<A::Msg>)) {
        while self.step(&mut observe) {}
    }

    /// The actors, in address order, once the run is over.
    pub fn into_actors(self) -> Vec<A> {
        self.actors
    }

    /// The actor at `id` (what a stepped session reads of its workers).
    pub fn actor(&self, id: ActorId) -> &A {
        &self.actors[id.index()]
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
            peer: ActorId(1),
            seen: vec![],
        });
        let b = sim.add(Echo {
            peer: ActorId(0),
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
            peer: ActorId(0),
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

    #[test]
    fn stream_and_heap_interleave_by_time_then_send_order() {
        // At t = 100: heap 9 (seq 0), stream 11 and 12 (seqs 1, 2), heap 7 (seq 3). Echo answers
        // the 4 delivered at 50 with a 5 for t = 60 (seq 5), after everything scheduled before.
        let mut sim = Simulation::new(SimRng::new(RngKind::Chacha, 0));
        let a = sim.add(Echo {
            peer: ActorId(0),
            seen: vec![],
        });
        sim.schedule(100, a, a, 9);
        sim.schedule_stream(a, 2, vec![(100, a, 11), (100, a, 12)].into_iter());
        sim.schedule(100, a, a, 7);
        sim.schedule(50, a, a, 4);
        let mut order = Vec::new();
        sim.run(|env| order.push((env.time, env.seq, env.msg)));
        assert_eq!(
            order,
            vec![
                (50, 4, 4),
                (60, 5, 5),
                (100, 0, 9),
                (100, 1, 11),
                (100, 2, 12),
                (100, 3, 7),
            ],
            "equal times are delivered in seq order, whether they waited in the heap or the stream"
        );
    }

    #[test]
    fn a_stream_is_pulled_only_as_the_clock_reaches_it() {
        use std::cell::Cell;
        use std::rc::Rc;
        let mut sim = Simulation::new(SimRng::new(RngKind::Chacha, 0));
        let a = sim.add(Echo {
            peer: ActorId(0),
            seen: vec![],
        });
        let pulled = Rc::new(Cell::new(0));
        let counter = Rc::clone(&pulled);
        let items = [(10, 6), (10, 7), (30, 8), (30, 9)]
            .into_iter()
            .map(move |(t, m)| {
                counter.set(counter.get() + 1);
                (t, a, m)
            });
        sim.schedule_stream(a, 4, items);
        sim.schedule(20, a, a, 100); // a heap item between the stream's two instants
        assert_eq!(pulled.get(), 0, "nothing is made before the run");
        let mut order = Vec::new();
        while sim.step(&mut |env| order.push((env.time, env.msg))) {
            // One item ahead of the clock at most: the one compared with the heap's head.
            let delivered = order.iter().filter(|(_, m)| *m != 100).count();
            assert!(pulled.get() <= delivered + 1, "{order:?}");
        }
        assert_eq!(order, vec![(10, 6), (10, 7), (20, 100), (30, 8), (30, 9)]);
    }

    /// Sends itself one message far in the future.
    struct Far;

    impl Actor for Far {
        type Msg = u32;

        fn handle(&mut self, env: Envelope<u32>, ctx: &mut Context<'_, u32>) {
            if env.msg == 0 {
                ctx.send(ctx.me(), 1, Nanos::MAX);
            }
        }
    }

    #[test]
    fn a_delivery_past_the_end_of_time_is_noted_not_wrapped() {
        let mut sim = Simulation::new(SimRng::new(RngKind::Chacha, 0));
        let a = sim.add(Far);
        sim.schedule(5, a, a, 0);
        sim.schedule(7, a, a, 2);
        let mut seen = Vec::new();
        sim.run(|env| seen.push(env.msg));
        assert!(sim.overflowed());
        assert_eq!(seen, vec![0], "the run stops at the overflow");
        assert_eq!(sim.now(), 5);
    }
}
