//! Routing: which worker gets a request.
//!
//! - [`select`]: the lab's selection rule (most overlap, then least load, then lowest index),
//!   shared by the lab router and the engine's router actor so both choose identically.
//! - [`kv_router`]: the lab's [`KvRouter`], self-tracking or fed by KV events.

pub mod kv_router;
pub mod select;

pub use kv_router::KvRouter;
