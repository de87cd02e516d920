//! The run's output threads: the `--trace` lines and the `--perfetto` timeline are formatted
//! and written on threads of their own, beside the simulation, which hands them what it
//! delivered and what its actors noted in batches through bounded crossbeam channels.
//!
//! The simulation's share is a clone per delivery (a few words and, for a KV event, its block
//! list) and a send per batch; the formatting (most of the cost: a KV event's block names as
//! decimal text) and the writes happen on the other thread. The bytes are those of formatting
//! in place: each thread sees its records in the order the simulation produced them. A write
//! error is kept and returned when the thread is joined (the thread goes on draining its
//! channel, so the simulation never blocks on it); the caller's output file is committed only
//! after a successful run ([`crate::output`]).

use std::io::{self, Write};

use crossbeam_channel::{Receiver, Sender};

use crate::cluster::timeline::Mark;
use crate::cluster::topology::Topology;
use crate::engine::Envelope;
use crate::perfetto::TimelineRenderer;
use crate::protocol::messages::Msg;
use crate::trace::TraceWriter;

/// Deliveries per batch handed to the trace thread.
const TRACE_BATCH: usize = 1024;

/// Batches in flight to a writer thread: the bound on what a slow writer makes the simulation
/// hold.
pub(super) const BATCHES_AHEAD: usize = 16;

/// Timeline marks the simulation gathers before handing them to the timeline thread.
pub(super) const MARKS_BATCH: usize = 4096;

/// The simulation's end of the trace thread: deliveries gathered into batches.
pub(super) struct TraceSink {
    tx: Sender<Vec<Envelope<Msg>>>,
    batch: Vec<Envelope<Msg>>,
}

impl TraceSink {
    /// A sink sending on `tx`.
    pub(super) fn new(tx: Sender<Vec<Envelope<Msg>>>) -> Self {
        TraceSink {
            tx,
            batch: Vec::with_capacity(TRACE_BATCH),
        }
    }

    /// Adds one delivery.
    pub(super) fn push(&mut self, env: &Envelope<Msg>) {
        self.batch.push(env.clone());
        if self.batch.len() == TRACE_BATCH {
            self.send();
        }
    }

    fn send(&mut self) {
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(TRACE_BATCH));
        // A closed channel means the thread ended early (a panic, re-raised when joined).
        let _ = self.tx.send(full);
    }

    /// Hands over the last deliveries and closes the channel.
    pub(super) fn close(mut self) {
        if !self.batch.is_empty() {
            self.send();
        }
    }
}

/// The trace thread: formats every delivery it receives as a trace line onto `out`.
pub(super) fn write_trace(
    out: &mut (dyn Write + Send),
    topology: Topology,
    learns: bool,
    rx: Receiver<Vec<Envelope<Msg>>>,
) -> io::Result<()> {
    let mut w = TraceWriter::new(out, topology, learns);
    for batch in rx {
        for env in &batch {
            w.write(env);
        }
    }
    w.finish()
}

/// The timeline thread: renders the marks it receives (in the order they were noted) as
/// trace-event JSON onto `out`.
pub(super) fn write_timeline(
    out: &mut (dyn Write + Send),
    topology: Topology,
    rx: Receiver<Vec<Mark>>,
) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let mut renderer = TimelineRenderer::new(topology);
    let mut text = String::new();
    let mut failed = None;
    let mut put = |text: &mut String, out: &mut io::BufWriter<_>| {
        if failed.is_none() {
            failed = out.write_all(text.as_bytes()).err();
        }
        text.clear();
    };
    renderer.start(&mut text);
    put(&mut text, &mut out);
    for batch in rx {
        renderer.marks(&batch, &mut text);
        put(&mut text, &mut out);
    }
    renderer.end(&mut text);
    put(&mut text, &mut out);
    match failed {
        Some(e) => Err(e),
        None => out.flush(),
    }
}
