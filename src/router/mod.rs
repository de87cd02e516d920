//! Routing: which worker gets a request.
//!
//! - [`select`]: the lab's selection rule (most overlap, then least load, then lowest index),
//!   shared by the lab router and the engine's policies so both choose identically.
//! - [`kv_router`]: the lab's [`KvRouter`], self-tracking or fed by KV events.
//! - [`policy`]: the engine's policies (rr, random, kv, kv-events, cost, approx).
//! - [`ttl`]: expiring beliefs for the approx policy.

pub mod kv_router;
pub mod policy;
pub mod select;
pub mod ttl;

pub use kv_router::KvRouter;
