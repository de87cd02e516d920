//! Actors and the context they act through.

use super::envelope::{ActorId, Envelope};
use super::queue::EventQueue;
use super::time::{Nanos, END_OF_TIME};
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

    /// Sends `msg` to `to`, delivered `delay` nanoseconds from now. A delivery at or past the
    /// end of time ([`END_OF_TIME`]) is never made: it is noted, the run stops, and it fails
    /// rather than report wrapped or saturated times ([`super::Simulation::overflowed`]).
    pub fn send(&mut self, to: ActorId, msg: M, delay: Nanos) {
        let at = self.now.saturating_add(delay);
        if at >= END_OF_TIME {
            self.queue.overflow();
            return;
        }
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
