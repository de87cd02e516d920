//! Actors and the context they act through.

use super::envelope::{ActorId, Envelope};
use super::queue::EventQueue;
use super::time::Nanos;
use crate::rng::SimRng;

/// What an actor can do while it handles a message: read the clock, draw from the run's one
/// generator, and send messages (delivered after a delay, never immediately re-entrant).
pub struct Context<'a, M> {
    pub(super) now: Nanos,
    pub(super) me: ActorId,
    pub(super) queue: &'a mut EventQueue<M>,
    pub(super) rng: &'a mut SimRng,
}

impl<M> Context<'_, M> {
    /// The current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// This actor's address.
    pub fn me(&self) -> ActorId {
        self.me
    }

    /// Sends `msg` to `to`, delivered `delay` nanoseconds from now. A delivery past the end of
    /// time (`u64::MAX` ns) is made at the end of time and noted: the run then fails rather
    /// than report wrapped or saturated times ([`super::Simulation::overflowed`]).
    pub fn send(&mut self, to: ActorId, msg: M, delay: Nanos) {
        let at = self.now.checked_add(delay).unwrap_or_else(|| {
            self.queue.overflow();
            Nanos::MAX
        });
        self.queue.push(at, self.me, to, msg);
    }

    /// The run's seeded generator (one per simulation: draws happen in delivery order).
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }
}

/// A simulated component: it reacts to each delivered message, and acts only through its context.
pub trait Actor {
    /// The message type of the simulation.
    type Msg;

    /// Handles one delivered message.
    fn handle(&mut self, env: Envelope<Self::Msg>, ctx: &mut Context<'_, Self::Msg>);
}
