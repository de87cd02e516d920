//! The discrete-event engine: actors exchanging typed messages, stepped in virtual time.
//!
//! - [`actor`]: the [`Actor`] trait, the [`Context`] an actor sends through, and the [`Envelope`]
//!   a message travels in.
//! - [`scheduler`]: the [`Simulation`]: one heap of pending deliveries ordered by
//!   `(time, seq)`, `seq` a global counter assigned when a message is sent; each actor's mailbox is
//!   a crossbeam channel. The scheduler pops the next delivery, puts it in the target's mailbox and
//!   steps that actor, one actor at a time, so a run is deterministic.
//!
//! Time is integer nanoseconds ([`Nanos`]), never floating point, so orderings are exact.

pub mod actor;
pub mod scheduler;

pub use actor::{Actor, ActorId, Context, Envelope};
pub use scheduler::Simulation;

/// Virtual time and durations, in nanoseconds.
pub type Nanos = u64;
