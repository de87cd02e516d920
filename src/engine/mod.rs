//! The discrete-event engine: actors exchanging typed messages, stepped in virtual time.
//!
//! - [`time`]: virtual time, integer nanoseconds ([`Nanos`]), never floating point, so orderings
//!   are exact.
//! - [`envelope`]: actor addresses ([`ActorId`]) and the [`Envelope`] a message travels in.
//! - [`queue`]: pending deliveries ordered by `(time, seq)`, `seq` a global counter assigned when
//!   a message is sent: a heap of small keys, and beside it a stream of deliveries known in
//!   advance (a workload's arrivals) merged in on pop.
//! - [`actor`]: the [`Actor`] trait and the [`Context`] an actor sends through.
//! - [`scheduler`]: the [`Simulation`]: it pops the next delivery and hands it to the target
//!   actor, one actor at a time, so a run is deterministic.
//!
//! ## Why there are no mailbox channels
//!
//! The design sketch gives every actor a crossbeam channel as its mailbox. With one delivery at
//! a time on one thread, such a channel only adds a send and a receive to each delivery (about
//! 24 ns, 2 % of a replay), so it was removed. It would earn its place if actors could run in
//! parallel: deliveries due at the same virtual instant to different actors, none of them sent
//! while handling another of that instant, could be handled on worker threads and their sends
//! merged in a fixed order. Measured on the replay of the Mooncake conversation trace through
//! `scenarios/dynamo-mocker.toml` (342,328 deliveries), only 5.3 % of deliveries could run
//! beside another at the same instant: an instant's deliveries are almost always one causal
//! chain (a step ends, its ack goes to the router, the router's to the client, the next step
//! starts), and two workers' steps rarely end at the same nanosecond. Handing a delivery of
//! about a microsecond of work to another thread costs several microseconds, so a run stays
//! single-threaded and parallelism comes from running many simulations at once (`dynsim
//! sweep`, one run per core).
//!
//! Measured again at 512 workers (issue 22; `scenarios/scale.toml` scaled to 153,600 requests,
//! 2,300,336 deliveries; docs/BENCHMARKS.md, "Pipelined I/O"): 6.68 % of deliveries could run
//! beside another at the same instant. Between two arrivals, when the router decides nothing,
//! there are 15.0 deliveries, 9.0 of them to workers, on 5.3 distinct workers on average (58.6 %
//! of all deliveries go to a worker while another worker also has some): too little work per
//! window (131 µs of CPU in all, most of it the router's) to pay for a hand-out and a merge per
//! window, so actors still run on one thread. What does run beside the simulation is its I/O: the
//! trace reader, and the `--trace` and `--perfetto` writers ([`crate::run`]).

pub mod actor;
pub mod envelope;
pub mod queue;
pub mod scheduler;
pub mod time;

pub use actor::{Actor, Context};
pub use envelope::{ActorId, Envelope};
pub use scheduler::Simulation;
pub use time::{ms_to_ns, Nanos, END_OF_TIME};
