//! A FIFO transfer lane of a tier: a transfer queued at `t` starts its first byte at
//! `max(lane free, t + first_byte_ms)` and ends `bytes / GB/s` later.

use crate::engine::{ms_to_ns, Nanos};

/// A FIFO transfer lane.
#[derive(Clone, Copy, Debug)]
pub struct Lane {
    gbps: f64,
    first_byte_ns: Nanos,
    /// When the lane is free again.
    free_at: Nanos,
}

impl Lane {
    /// An idle lane of `gbps` (0: no limit) and `first_byte_ms` to a transfer's first byte.
    pub fn new(gbps: f64, first_byte_ms: f64) -> Self {
        Lane {
            gbps,
            first_byte_ns: ms_to_ns(first_byte_ms),
            free_at: 0,
        }
    }

    /// Queues `bytes` that may start at `ready`; returns when the last byte arrives:
    /// `max(free, ready + first byte) + bytes / GB/s`. The sum saturates at `Nanos::MAX` (a
    /// bandwidth so small the transfer outlasts the clock), never wraps: a step waiting for it
    /// then asks for a delivery past the end of time and the run fails
    /// ([`crate::engine::Context::send`]).
    pub fn submit(&mut self, ready: Nanos, bytes: u64) -> Nanos {
        let start = self.free_at.max(ready.saturating_add(self.first_byte_ns));
        let ns = if self.gbps > 0.0 {
            // `as` saturates a float past `Nanos::MAX` (and 1e-300 GB/s makes one).
            (bytes as f64 / self.gbps).round() as Nanos
        } else {
            0
        };
        self.free_at = start.saturating_add(ns);
        self.free_at
    }
}
