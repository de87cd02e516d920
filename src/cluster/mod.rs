//! The simulated cluster: a client, router replicas, an event bus and workers, as actors.
//!
//! ```text
//!  client ──Request──▶ router r ──Request──▶ worker k ──Ack──▶ router r ──Ack──▶ client
//!                        ▲  │                  │  ▲
//!                        │  └─ replay/snapshot ┼──┘  (requests, over the bus)
//!                        └───── bus ◀──────────┘ KvStored / KvRemoved / KvCleared, answers
//! ```
//!
//! Replicas (`router.replicas`) each have their own index and load view; with
//! `router.sync = "active-load"` they tell each other over the bus what they routed.
//!
//! [`build`] wires the actors from a validated scenario in one place; [`Node`] is the actor
//! enum the scheduler steps.

pub mod attribution;
pub mod audit;
pub mod board;
pub mod build;
pub mod bus;
pub mod client;
pub mod hardware;
pub mod membership;
pub mod probes;
pub mod router_actor;
pub mod tally;
pub mod timeline;
pub mod topology;
pub mod truth;
pub mod worker;

use crate::engine::{Actor, Context, Envelope};

use crate::protocol::messages::Msg;
use bus::BusActor;
use client::Client;
use router_actor::RouterActor;
use worker::Worker;

/// Every actor of the cluster.
pub enum Node {
    /// The workload replayer and outcome recorder.
    Client(Box<Client>),
    /// The router.
    Router(Box<RouterActor>),
    /// The KV event bus.
    Bus(Box<BusActor>),
    /// A worker.
    Worker(Box<Worker>),
}

impl Actor for Node {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        match self {
            Node::Client(a) => a.handle(env, ctx),
            Node::Router(a) => a.handle(env, ctx),
            Node::Bus(a) => a.handle(env, ctx),
            Node::Worker(a) => a.handle(env, ctx),
        }
    }
}
