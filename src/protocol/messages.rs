//! The one message type of the cluster simulation. Matching it exhaustively means the compiler
//! lists every handler a new kind of message touches.

use std::sync::Arc;

use crate::engine::{ActorId, Nanos};
use crate::hash::BlockHash;
use crate::ids::{RequestId, WorkerId};
use crate::protocol::kv_event::Stamp;
use crate::protocol::kv_event::{KvEvent, Tier};
use crate::workload::RequestSpec;

/// Every message the cluster's actors exchange.
#[derive(Clone, Debug)]
pub enum Msg {
    /// A request: client → router on arrival, router → worker once routed.
    Request(Routed),
    /// A request handed back by a worker that went down before finishing it (worker → router),
    /// to be routed again.
    HandBack(Routed),
    /// A KV event with its place in the worker's stream (worker → bus → every router replica).
    Kv {
        /// The worker's epoch and the event's sequence number.
        stamp: Stamp,
        /// The event.
        event: KvEvent,
    },
    /// A message for `to` that travels over the bus (and may be lost or delayed there): replay
    /// and snapshot requests and answers, and replica notes.
    Via {
        /// Its destination.
        to: ActorId,
        /// The message.
        msg: Box<Msg>,
    },
    /// A router asks a worker for its buffered events from `from` on (router → bus → worker).
    ReplayRequest {
        /// The worker asked.
        worker: WorkerId,
        /// The first sequence number wanted.
        from: u64,
        /// The router replica to answer.
        reply_to: ActorId,
    },
    /// A worker's answer to a replay request (worker → bus → router).
    Replay(Box<ReplayAnswer>),
    /// A router asks a worker for every block it holds (router → bus → worker).
    SnapshotRequest {
        /// The worker asked.
        worker: WorkerId,
        /// The router replica to answer.
        reply_to: ActorId,
    },
    /// A worker's snapshot of its cache (worker → bus → router).
    Snapshot(Box<SnapshotAnswer>),
    /// What one router replica tells the others (`router.sync = "active-load"`; router → bus →
    /// router).
    Peer(PeerNote),
    /// The router's own timer: check its event streams for silence and unanswered requests.
    CheckStreams,
    /// A request produced its first token: its prefill is done (worker → router).
    PrefillDone {
        /// The request.
        request: RequestId,
    },
    /// A disaggregated request's KV reached its decode worker, up (decode worker → router): it
    /// no longer loads its prefill worker (as Dynamo's prefill router frees it when the
    /// hand-off completes).
    Landed {
        /// The request.
        request: RequestId,
    },
    /// A request completed (worker → router, then router → client).
    Ack(Box<Ack>),
    /// A worker's own timer: schedule the next step now (worker → itself, at once, so that
    /// every request reaching the worker at this instant joins the step).
    StepStart {
        /// The worker's restart epoch when the timer was set; stale timers are ignored.
        epoch: u32,
    },
    /// A worker's own timer: the planned step (or decode stretch) ends (worker → itself).
    StepEnd {
        /// The worker's restart epoch when the timer was set.
        epoch: u32,
        /// Which plan: a stretch cut short by an arrival leaves a stale end behind.
        plan: u64,
        /// Steps the plan covers.
        steps: u32,
    },
    /// KV for a disaggregated request arrives at its decode worker (prefill worker → decode worker).
    Handoff(Routed),
    /// The router's own timer: refresh its snapshot of the workers' load signals.
    RefreshSignals,
    /// Fault injection: `worker` goes down (to the worker and to those that send it work).
    WorkerDown {
        /// The worker.
        worker: WorkerId,
    },
    /// Fault injection: `worker` is back.
    WorkerUp {
        /// The worker.
        worker: WorkerId,
    },
    /// Scaling: `worker` joined and serves: the routers add it (its events start afresh).
    Register {
        /// The worker.
        worker: WorkerId,
    },
    /// Scaling: `worker` leaves: the routers send it nothing more and forget what it held.
    Deregister {
        /// The worker.
        worker: WorkerId,
    },
    /// The cluster-shared host tier changed (`[kv.host] scope = "cluster"`; worker → worker):
    /// the receiver reports the pool's changes on its own event stream.
    HostTierChanged,
    /// Transfers queued on the receiver's KV link were lost by their decode worker (decode
    /// worker → prefill worker, for the same instant): those behind them take the link earlier.
    LinkFreed,
    /// Scaling: `worker` leaves, draining what it holds (`drain`) or at once, handing its
    /// requests back (to the worker itself).
    Retire {
        /// The worker.
        worker: WorkerId,
        /// Finish the requests it holds before it goes.
        drain: bool,
    },
}

/// A worker's buffered events from the requested sequence number on.
#[derive(Clone, Debug)]
pub struct ReplayAnswer {
    /// The worker.
    pub worker: WorkerId,
    /// Its epoch.
    pub epoch: u32,
    /// The events, numbered consecutively.
    pub events: Vec<(u64, KvEvent)>,
    /// Its next sequence number.
    pub next: u64,
}

/// Every block a worker holds, on its device and on each lower tier it reports, as of its next
/// sequence number.
#[derive(Clone, Debug)]
pub struct SnapshotAnswer {
    /// The worker.
    pub worker: WorkerId,
    /// Its epoch.
    pub epoch: u32,
    /// Its next sequence number: the snapshot reflects every event before it.
    pub next: u64,
    /// Its device blocks, in increasing order of name.
    pub blocks: Vec<BlockHash>,
    /// Its blocks on each lower tier (host, then disk), each in increasing order of name; empty
    /// without `[kv.host]`.
    pub lower: Vec<(Tier, Vec<BlockHash>)>,
}

impl SnapshotAnswer {
    /// Blocks it names, device and lower tiers together.
    pub fn block_count(&self) -> usize {
        self.blocks.len() + self.lower.iter().map(|(_, b)| b.len()).sum::<usize>()
    }
}

/// A replica's note to the others about a request it routed (Dynamo's active-sequence sync).
#[derive(Clone, Debug)]
pub enum PeerNote {
    /// It routed a request.
    Added {
        /// The request.
        spec: Arc<RequestSpec>,
        /// Where.
        worker: WorkerId,
        /// The blocks it believed the worker held.
        predicted_blocks: u32,
    },
    /// A request it routed produced its first token.
    PrefillDone {
        /// The request.
        request: RequestId,
    },
    /// A request it routed completed or came back.
    Freed {
        /// The request.
        request: RequestId,
    },
}

/// A request with what the router decided and believed about it.
#[derive(Clone, Debug)]
pub struct Routed {
    /// The workload's description of the request.
    pub spec: Arc<RequestSpec>,
    /// The router replica in charge of it (chosen by the client): acks, first-token notes and
    /// hand-backs go there.
    pub router: ActorId,
    /// When the request reached the router (its arrival), ns.
    pub arrived_ns: Nanos,
    /// The worker the router chose (a prefill worker when disaggregated); `None` until routed.
    pub worker: Option<WorkerId>,
    /// Blocks the router believed the chosen worker held, from the front.
    pub predicted_blocks: u32,
    /// The deepest prefix (blocks) any other worker truly held at decision time, for attributing
    /// misses to routing.
    pub others_held_blocks: u32,
    /// The deepest prefix (blocks) some worker had ever computed at decision time, for telling
    /// cold misses from capacity misses.
    pub ever_computed_blocks: u32,
    /// How many times the request was handed back by a failing worker.
    pub retries: u32,
    /// Whether its prefix had reached the router before (set by the router on arrival).
    pub repeat: bool,
    /// Filled by a disaggregated prefill worker: what it found cached and when prefill ended.
    pub prefill: Option<Box<PrefillOutcome>>,
}

impl Routed {
    /// A request arriving at `router` at `arrived_ns`, not yet routed.
    pub fn arriving(spec: Arc<RequestSpec>, router: ActorId, arrived_ns: Nanos) -> Routed {
        Routed {
            spec,
            router,
            arrived_ns,
            worker: None,
            predicted_blocks: 0,
            others_held_blocks: 0,
            ever_computed_blocks: 0,
            retries: 0,
            repeat: false,
            prefill: None,
        }
    }
}

/// What a prefill worker found and did, carried to the decode worker with the KV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefillOutcome {
    /// The prefill worker.
    pub worker: WorkerId,
    /// Blocks it already held.
    pub cached_blocks: u32,
    /// Blocks after those it loaded back from its lower tiers (host, disk).
    pub loaded_blocks: u32,
    /// Whether it still held the whole shared prefix (the lab hit).
    pub prefix_hit: bool,
    /// Missed blocks by cause (`None`: not attributed).
    pub misses: Option<Misses>,
    /// Prompt tokens taken from its cache instead of computed (the hit capped one token short),
    /// the lower tiers' included.
    pub cached_tokens: u64,
    /// Of `cached_tokens`, those loaded back from its host tier.
    pub host_tokens: u64,
    /// Of `cached_tokens`, those loaded back from its disk tier.
    pub disk_tokens: u64,
    /// When the request was first admitted (its prefill started), ns.
    pub started_ns: Nanos,
}

/// Missed prompt blocks of one request, by cause (they sum to the missed blocks: those neither
/// held on the device nor loaded back from a lower tier, so that prompt blocks = cached on the
/// device + loaded from the lower tiers + missed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Misses {
    /// No worker had ever computed the block.
    pub cold: u64,
    /// Another worker held it when the router decided.
    pub routing: u64,
    /// The router believed the chosen worker held it, but it did not.
    pub stale_index: u64,
    /// The chosen worker had held the block and lost it (eviction or restart), or the block had
    /// been computed before the decision and evicted everywhere.
    pub capacity: u64,
}

impl Misses {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Misses) {
        self.cold += other.cold;
        self.routing += other.routing;
        self.stale_index += other.stale_index;
        self.capacity += other.capacity;
    }

    /// All missed blocks.
    pub fn total(&self) -> u64 {
        self.cold + self.routing + self.stale_index + self.capacity
    }
}

/// A completed request, as the serving worker reports it.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The request's id.
    pub request: RequestId,
    /// The worker that produced the output (the decode worker when disaggregated).
    pub worker: WorkerId,
    /// The worker that prefilled it (equal to `worker` unless disaggregated).
    pub prefill_worker: WorkerId,
    /// Prompt blocks.
    pub prompt_blocks: u32,
    /// Prompt blocks the prefill worker really held when prefill started.
    pub cached_blocks: u32,
    /// Prompt blocks after those that it loaded back from its lower tiers (host, disk).
    pub loaded_blocks: u32,
    /// Blocks the router believed it held.
    pub predicted_blocks: u32,
    /// Whether its prefix had reached the router before (the lab's repeat request).
    pub repeat: bool,
    /// Whether the prefill worker had processed the prefix before and still held all of it.
    pub prefix_hit: bool,
    /// Missed blocks by cause (`None`: not attributed).
    pub misses: Option<Misses>,
    /// Arrival at the router, ns.
    pub arrived_ns: Nanos,
    /// Prefill start, ns (after queueing).
    pub started_ns: Nanos,
    /// First token, ns.
    pub first_token_ns: Nanos,
    /// Last token, ns.
    pub done_ns: Nanos,
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Prompt tokens the prefill worker took from its cache instead of computing them (its
    /// lower tiers' included).
    pub cached_tokens: u64,
    /// Of `cached_tokens`, those loaded back from the host tier.
    pub host_tokens: u64,
    /// Of `cached_tokens`, those loaded back from the disk tier.
    pub disk_tokens: u64,
    /// When its KV reached the decode worker (disaggregated serving), ns.
    pub transferred_ns: Option<Nanos>,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Times it was preempted (and recomputed).
    pub preemptions: u32,
    /// Refused: its whole sequence can never fit in the worker's KV (or its prompt in one step
    /// without chunked prefill). No token was produced.
    pub rejected: bool,
}

impl Msg {
    /// The kind's name, as written in traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Request(_) => "Request",
            Msg::HandBack(_) => "HandBack",
            Msg::Kv { event, .. } => event.kind(),
            Msg::Via { msg, .. } => msg.kind(),
            Msg::ReplayRequest { .. } => "ReplayRequest",
            Msg::Replay(_) => "Replay",
            Msg::SnapshotRequest { .. } => "SnapshotRequest",
            Msg::Snapshot(_) => "Snapshot",
            Msg::Peer(PeerNote::Added { .. }) => "PeerAdded",
            Msg::Peer(PeerNote::PrefillDone { .. }) => "PeerPrefillDone",
            Msg::Peer(PeerNote::Freed { .. }) => "PeerFreed",
            Msg::CheckStreams => "CheckStreams",
            Msg::PrefillDone { .. } => "PrefillDone",
            Msg::Landed { .. } => "Landed",
            Msg::Ack(_) => "Ack",
            Msg::StepStart { .. } => "StepStart",
            Msg::StepEnd { .. } => "StepEnd",
            Msg::Handoff(_) => "Handoff",
            Msg::RefreshSignals => "RefreshSignals",
            Msg::HostTierChanged => "HostTierChanged",
            Msg::LinkFreed => "LinkFreed",
            Msg::WorkerDown { .. } => "WorkerDown",
            Msg::WorkerUp { .. } => "WorkerUp",
            Msg::Register { .. } => "Register",
            Msg::Deregister { .. } => "Deregister",
            Msg::Retire { .. } => "Retire",
        }
    }

    /// Its size on the bus, bytes, in a compact binary encoding like vLLM's msgpack batches:
    /// 24 bytes of framing (kind, worker, epoch, sequence number), 8 per block name or request
    /// id (a snapshot's blocks on the device and on the lower tiers alike). Only messages the
    /// bus carries have one (0 for the rest).
    pub fn wire_bytes(&self) -> u64 {
        const FRAME: u64 = 24;
        let blocks = |n: usize| 8 * n as u64;
        match self {
            Msg::Kv { event, .. } => FRAME + event_bytes(event),
            Msg::Via { msg, .. } => msg.wire_bytes(),
            Msg::ReplayRequest { .. } | Msg::SnapshotRequest { .. } => FRAME,
            Msg::Replay(a) => {
                FRAME
                    + a.events
                        .iter()
                        .map(|(_, e)| FRAME + event_bytes(e))
                        .sum::<u64>()
            }
            Msg::Snapshot(a) => FRAME + blocks(a.block_count()),
            Msg::Peer(PeerNote::Added { spec, .. }) => FRAME + 8 + blocks(spec.blocks.len()),
            Msg::Peer(_) => FRAME + 8,
            _ => 0,
        }
    }
}

/// An event's payload bytes beyond the framing: 8 per block (and 8 for a stored run's parent).
fn event_bytes(event: &KvEvent) -> u64 {
    match event {
        KvEvent::Stored { blocks, .. } => 8 + 8 * blocks.len() as u64,
        KvEvent::Removed { blocks, .. }
        | KvEvent::TierStored { blocks, .. }
        | KvEvent::TierRemoved { blocks, .. } => 8 * blocks.len() as u64,
        KvEvent::Cleared { .. } => 0,
    }
}
