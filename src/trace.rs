//! Traces: one JSONL line per delivered message, in delivery order.
//!
//! Every line starts `{"t_ns":…,"seq":…,"kind":"…","from":"…","to":"…"` and continues with the
//! message's fields. KV events delivered to the router carry `"applied"`: whether the router's
//! policy feeds its index from events. The same scenario and seed give a byte-identical trace.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::cluster::topology::Topology;
use crate::engine::Envelope;
use crate::hash::BlockHash;
use crate::protocol::kv_event::KvEvent;
use crate::protocol::messages::{Msg, PeerNote};

/// Writes trace lines to any writer.
pub struct TraceWriter<'a> {
    out: io::BufWriter<&'a mut dyn Write>,
    topology: Topology,
    events_applied: bool,
    line: String,
    error: Option<io::Error>,
}

impl<'a> TraceWriter<'a> {
    /// A writer naming actors as `topology` does; `events_applied` says whether the router's
    /// policy applies KV events.
    pub fn new(out: &'a mut dyn Write, topology: Topology, events_applied: bool) -> Self {
        TraceWriter {
            out: io::BufWriter::with_capacity(1 << 16, out),
            topology,
            events_applied,
            line: String::with_capacity(256),
            error: None,
        }
    }

    /// Writes the line of one delivery (an I/O error is kept and returned by `finish`).
    pub fn write(&mut self, env: &Envelope<Msg>) {
        if self.error.is_some() {
            return;
        }
        self.line.clear();
        format_line(&mut self.line, env, &self.topology, self.events_applied);
        if let Err(e) = self.out.write_all(self.line.as_bytes()) {
            self.error = Some(e);
        }
    }

    /// Flushes, returning the first error met.
    pub fn finish(mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

fn blocks_json(s: &mut String, blocks: &[BlockHash]) {
    s.push('[');
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{}", b.0);
    }
    s.push(']');
}

/// The fields of a message of stream recovery or replica sync.
fn control_fields(s: &mut String, msg: &Msg) {
    match msg {
        Msg::ReplayRequest { worker, from, .. } => {
            let _ = write!(s, r#","worker":{worker},"from_seq":{from}"#);
        }
        Msg::Replay(a) => {
            let _ = write!(
                s,
                r#","worker":{},"epoch":{},"events":{},"next":{}"#,
                a.worker,
                a.epoch,
                a.events.len(),
                a.next
            );
        }
        Msg::SnapshotRequest { worker, .. } => {
            let _ = write!(s, r#","worker":{worker}"#);
        }
        Msg::Snapshot(a) => {
            let _ = write!(
                s,
                r#","worker":{},"epoch":{},"next":{},"blocks":{}"#,
                a.worker,
                a.epoch,
                a.next,
                a.blocks.len()
            );
            // With lower tiers, the blocks on them too (absent without: traces of runs
            // without tiers read as before).
            if !a.lower.is_empty() {
                let lower: usize = a.lower.iter().map(|(_, b)| b.len()).sum();
                let _ = write!(s, r#","lower_blocks":{lower}"#);
            }
        }
        Msg::Peer(PeerNote::Added { spec, worker, .. }) => {
            let _ = write!(s, r#","request":{},"worker":{worker}"#, spec.id);
        }
        Msg::Peer(PeerNote::PrefillDone { request } | PeerNote::Freed { request }) => {
            let _ = write!(s, r#","request":{request}"#);
        }
        _ => {}
    }
}

/// Appends the JSONL line (with its newline) of one delivery to `s`.
pub fn format_line(s: &mut String, env: &Envelope<Msg>, topology: &Topology, events_applied: bool) {
    let _ = write!(
        s,
        r#"{{"t_ns":{},"seq":{},"kind":"{}","from":"{}","to":"{}""#,
        env.time,
        env.seq,
        env.msg.kind(),
        topology.name(env.from),
        topology.name(env.to)
    );
    let to_router = topology.is_router(env.to);
    let applied = |s: &mut String| {
        if to_router {
            let _ = write!(s, r#","applied":{events_applied}"#);
        }
    };
    match &env.msg {
        Msg::Request(r) | Msg::HandBack(r) | Msg::Handoff(r) => {
            let prefix = r.spec.prefix.map_or("null".to_string(), |p| p.to_string());
            let worker = r.worker.map_or("null".to_string(), |w| w.to_string());
            let _ = write!(
                s,
                r#","request":{},"prefix":{},"blocks":{},"worker":{},"predicted_blocks":{},"repeat":{},"retries":{}"#,
                r.spec.id,
                prefix,
                r.spec.blocks.len(),
                worker,
                r.predicted_blocks,
                r.repeat,
                r.retries
            );
        }
        Msg::Kv { stamp, event } => {
            match event {
                KvEvent::Stored {
                    worker,
                    parent,
                    blocks,
                } => {
                    let parent = parent.map_or("null".to_string(), |p| p.0.to_string());
                    let _ = write!(s, r#","worker":{worker},"parent":{parent},"blocks":"#);
                    blocks_json(s, blocks);
                }
                KvEvent::Removed { worker, blocks } => {
                    let _ = write!(s, r#","worker":{worker},"blocks":"#);
                    blocks_json(s, blocks);
                }
                KvEvent::TierStored {
                    worker,
                    tier,
                    blocks,
                }
                | KvEvent::TierRemoved {
                    worker,
                    tier,
                    blocks,
                } => {
                    let _ = write!(
                        s,
                        r#","worker":{worker},"tier":"{}","blocks":"#,
                        tier.name()
                    );
                    blocks_json(s, blocks);
                }
                KvEvent::Cleared { worker } => {
                    let _ = write!(s, r#","worker":{worker}"#);
                }
            }
            let _ = write!(s, r#","epoch":{},"event_seq":{}"#, stamp.epoch, stamp.seq);
            applied(s);
        }
        Msg::Via { to, msg } => {
            let _ = write!(s, r#","dest":"{}""#, topology.name(*to));
            control_fields(s, msg);
        }
        Msg::ReplayRequest { .. }
        | Msg::Replay(_)
        | Msg::SnapshotRequest { .. }
        | Msg::Snapshot(_)
        | Msg::Peer(_) => control_fields(s, &env.msg),
        Msg::CheckStreams => {}
        Msg::Ack(a) => {
            let _ = write!(
                s,
                r#","request":{},"worker":{},"prefill_worker":{},"prompt_blocks":{},"cached_blocks":{},"predicted_blocks":{},"repeat":{},"prefix_hit":{},"misses":"#,
                a.request,
                a.worker,
                a.prefill_worker,
                a.prompt_blocks,
                a.cached_blocks,
                a.predicted_blocks,
                a.repeat,
                a.prefix_hit,
            );
            match &a.misses {
                Some(m) => {
                    let _ = write!(
                        s,
                        r#"{{"cold":{},"routing":{},"stale_index":{},"capacity":{}}}"#,
                        m.cold, m.routing, m.stale_index, m.capacity
                    );
                }
                None => s.push_str("null"),
            }
            let _ = write!(
                s,
                r#","ttft_ns":{},"e2e_ns":{},"output_tokens":{},"preemptions":{},"rejected":{}"#,
                a.first_token_ns - a.arrived_ns,
                a.done_ns - a.arrived_ns,
                a.output_tokens,
                a.preemptions,
                a.rejected
            );
        }
        Msg::PrefillDone { request } | Msg::Landed { request } => {
            let _ = write!(s, r#","request":{request}"#);
        }
        Msg::StepStart { epoch } => {
            let _ = write!(s, r#","epoch":{epoch}"#);
        }
        Msg::StepEnd { epoch, plan, steps } => {
            let _ = write!(s, r#","epoch":{epoch},"plan":{plan},"steps":{steps}"#);
        }
        Msg::RefreshSignals | Msg::HostTierChanged | Msg::LinkFreed => {}
        Msg::WorkerDown { worker }
        | Msg::WorkerUp { worker }
        | Msg::Register { worker }
        | Msg::Deregister { worker } => {
            let _ = write!(s, r#","worker":{worker}"#);
        }
        Msg::Retire { worker, drain } => {
            let _ = write!(s, r#","worker":{worker},"drain":{drain}"#);
        }
    }
    s.push_str("}\n");
}
