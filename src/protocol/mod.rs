//! What crosses the cluster's bus and links, as data: the one place its types live.
//!
//! - [`messages`]: [`Msg`](messages::Msg), the one message type the actors exchange, and its
//!   payloads (a routed request, an ack, replay and snapshot traffic, replica notes).
//! - [`kv_event`]: [`KvEvent`](kv_event::KvEvent), what a worker tells the routers of its
//!   cache (vLLM's and Dynamo's schema), and the [`Stamp`](kv_event::Stamp) that places it in
//!   the worker's stream.
//! - [`signals`]: [`WorkerSignals`](signals::WorkerSignals), the load a worker exposes to a
//!   router that reads signals.
//!
//! Pure data: no actor, channel or clock. The routers' policies and the workers' engines read
//! and write these types; the actors in [`crate::cluster`] carry them.

pub mod kv_event;
pub mod messages;
pub mod signals;
