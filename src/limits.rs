//! The product's limits: the largest values a scenario, a workload or a trace may use, chosen
//! so that every run's arithmetic fits its types and its memory follows the cluster. Each is
//! documented with its reason; validation (`scenario::validate`) and the readers refuse
//! anything past them, naming the key or the file, line and field.

/// The longest time a setting may name, ms: about 31.7 years, so that every virtual time fits in
/// 64-bit nanoseconds with room to add.
pub const MAX_MS: f64 = 1e12;
/// The most workers a cluster may have.
pub const MAX_WORKERS: usize = 65_536;
/// The most events a worker may keep for replay.
pub const MAX_REPLAY_BUFFER: usize = 10_000_000;
/// The most router replicas a scenario may have: the index audit follows each replica with one
/// bit of a `u64` beside its "held" bit (`cluster::audit`).
pub const MAX_REPLICAS: usize = 63;
/// The most points a sweep may have: every point's scenario is loaded (and checked) before the
/// first runs, at well under a millisecond each, so a sweep is refused rather than left loading
/// for hours, and the count fits its type.
pub const MAX_SWEEP_POINTS: usize = 1_000_000;
/// The most requests a generated workload may have.
pub const MAX_REQUESTS: usize = 10_000_000;
/// The longest context a request may have, prompt plus output tokens (2^20: a 1M-token
/// context, the longest any served model offers today). Longer trace rows are bad rows.
pub const MAX_CONTEXT_TOKENS: u64 = 1 << 20;
