//! The discrete-event engine: actors exchanging typed messages, stepped in virtual time.
//!
//! - [`time`]: virtual time, integer nanoseconds ([`Nanos`]), never floating point, so orderings
//!   are exact.
//! - [`envelope`]: actor addresses ([`ActorId`]) and the [`Envelope`] a message travels in.
//! - [`queue`]: pending deliveries ordered by `(time, seq)`, `seq` a global counter assigned when
//!   a message is sent: a heap of small keys, and beside it a stream of deliveries known in
//!   advance (a workload's arrivals) merged in on pop.
//! - [`actor`]: the [`Actor`] trait and the [`Context`] an actor sends through.
//! - [`scheduler`]: the [`Simulation`]: it pops the next delivery, puts it in the target's
//!   mailbox and steps that actor, one actor at a time, so a run is deterministic.

pub mod actor;
pub mod envelope;
pub mod queue;
pub mod scheduler;
pub mod time;

pub use actor::{Actor, Context};
pub use envelope::{ActorId, Envelope};
pub use scheduler::Simulation;
pub use time::{ms_to_ns, Nanos};
