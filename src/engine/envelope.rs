//! Actor addresses and the envelope a message travels in.

use std::fmt;

use super::time::Nanos;

/// An actor's address: its position in the simulation, in the order actors were added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActorId(pub u32);

impl ActorId {
    /// The address as an index into the simulation's actors.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}", self.0)
    }
}

/// A message in flight or being delivered.
#[derive(Clone, Debug)]
pub struct Envelope<M> {
    /// Delivery time.
    pub time: Nanos,
    /// Global send order: ties in `time` are delivered in `seq` order.
    pub seq: u64,
    /// Sender.
    pub from: ActorId,
    /// Receiver.
    pub to: ActorId,
    /// The message.
    pub msg: M,
}
