//! Typed ids: a worker's number and a request's id are different things from each other and from
//! an actor's address ([`crate::engine::ActorId`]), so mixing them is a compile error.

use std::fmt;

/// A worker's number: routable workers count from 0 (prefill workers when disaggregated), then
/// come the decode workers. It names the worker in KV events, acks and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(pub u32);

impl WorkerId {
    /// The number as an index (into per-worker tables, the index's worker sets).
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The worker at position `i`.
    ///
    /// # Panics
    /// Panics if `i` does not fit in 32 bits (validation bounds worker counts far below).
    pub fn at(i: usize) -> Self {
        WorkerId(u32::try_from(i).expect("worker numbers fit in 32 bits"))
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A request's id: its position in the workload's arrival order, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

impl RequestId {
    /// The id as an index into the workload.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
