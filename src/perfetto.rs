//! A run's timeline as Chrome trace-event JSON, the format ui.perfetto.dev and chrome://tracing
//! open (the "JSON Object Format" of the Trace Event Format document: `{"traceEvents": [...]}`,
//! times in microseconds).
//!
//! Layout: process 1 "workers", one thread per worker (its name), with a complete event (`X`)
//! per step or decode stretch, named by what it computed (`prefill`, `decode` or `mixed`: a
//! fixed set of names, so that a viewer groups them; args: steps, batch, prefill and decode
//! tokens), counters (`C`) of its KV blocks in use (held by running requests), its KV blocks
//! resident (in use plus cached) and its queue, and instant events (`i`) for evictions,
//! preemptions and restarts;
//! process 2 "requests", one async track per request (`b`/`e` pairs, id = the request) with its
//! queue, prefill, transfer (disaggregated) and decode phases; process 3 "bus", instant events
//! for every KV event it lost. Metadata events (`M`) name the processes and threads.

use crate::cluster::timeline::{Mark, Timeline};
use crate::cluster::topology::Topology;
use crate::engine::Nanos;

const WORKERS: u32 = 1;
const REQUESTS: u32 = 2;
const BUS: u32 = 3;
/// Workers' starting, serving and draining phases (a scaling run).
const LIFECYCLE: u32 = 4;

/// Microseconds, as the format wants them (three decimals: whole nanoseconds).
fn us(ns: Nanos) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// The trace-event JSON of `timeline`, with worker names from `topology` (what a
/// [`TimelineRenderer`] writes given every mark at once).
pub fn render(timeline: &Timeline, topology: &Topology) -> String {
    let mut r = TimelineRenderer::new(topology.clone());
    let mut out = String::new();
    r.start(&mut out);
    r.marks(&timeline.marks, &mut out);
    r.end(&mut out);
    out
}

/// Renders a timeline as its marks come, in batches: [`TimelineRenderer::start`], then
/// [`TimelineRenderer::marks`] for each batch in the order the marks were noted, then
/// [`TimelineRenderer::end`]. However the marks are cut into batches, the text is the same.
pub struct TimelineRenderer {
    topology: Topology,
    /// Whether the lifecycle process was named (at the first phase mark).
    lifecycle: bool,
    /// Whether an event was written (the next one is preceded by a separator).
    any: bool,
    events: Vec<String>,
}

impl TimelineRenderer {
    /// A renderer naming workers as `topology` does.
    pub fn new(topology: Topology) -> Self {
        TimelineRenderer {
            topology,
            lifecycle: false,
            any: false,
            events: Vec::new(),
        }
    }

    /// Appends the document's opening and the metadata events naming processes and workers.
    pub fn start(&mut self, out: &mut String) {
        out.push_str("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
        let events = &mut self.events;
        events.push(meta(WORKERS, 0, "process_name", "workers"));
        events.push(meta(REQUESTS, 0, "process_name", "requests"));
        events.push(meta(BUS, 0, "process_name", "bus"));
        for w in self.topology.workers() {
            events.push(meta(WORKERS, w.id.0, "thread_name", &w.name));
        }
        self.flush(out);
    }

    /// Appends the events of `marks`, the next marks of the timeline.
    pub fn marks(&mut self, marks: &[Mark], out: &mut String) {
        let topology = &self.topology;
        let events = &mut self.events;
        let name = |w: crate::ids::WorkerId| topology.worker(w).name.as_str();
        // Workers' phases (scaling runs only) get their own process, noted once.
        let lifecycle = &mut self.lifecycle;
        for mark in marks {
            match *mark {
                Mark::Step {
                    worker,
                    start,
                    end,
                    steps,
                    batch,
                    prefill_tokens,
                    decode_tokens,
                } => {
                    // A stretch (steps > 1) is decode only; its length is in the args.
                    let label = match (prefill_tokens > 0, decode_tokens > 0) {
                        (true, true) => "mixed",
                        (true, false) => "prefill",
                        (false, _) => "decode",
                    };
                    events.push(format!(
                        r#"{{"ph":"X","name":"{label}","cat":"step","pid":{WORKERS},"tid":{},"ts":{},"dur":{},"args":{{"steps":{steps},"batch":{batch},"prefill_tokens":{prefill_tokens},"decode_tokens":{decode_tokens}}}}}"#,
                        worker.0,
                        us(start),
                        us(end - start)
                    ));
                }
                Mark::Levels {
                    worker,
                    at,
                    kv_blocks,
                    resident_blocks,
                    waiting,
                    running,
                } => {
                    // Two counters, not one stacked counter: the blocks in use are among the
                    // resident ones.
                    for (what, n) in [("used", kv_blocks), ("resident", resident_blocks)] {
                        events.push(format!(
                            r#"{{"ph":"C","name":"{} kv blocks {what}","pid":{WORKERS},"tid":{},"ts":{},"args":{{"{what}":{n}}}}}"#,
                            name(worker),
                            worker.0,
                            us(at)
                        ));
                    }
                    events.push(format!(
                        r#"{{"ph":"C","name":"{} queue","pid":{WORKERS},"tid":{},"ts":{},"args":{{"waiting":{waiting},"running":{running}}}}}"#,
                        name(worker),
                        worker.0,
                        us(at)
                    ));
                }
                Mark::Evicted { worker, at, blocks } => events.push(instant(
                    "evicted",
                    WORKERS,
                    worker.0,
                    at,
                    &format!(r#""blocks":{blocks}"#),
                )),
                Mark::Preempted {
                    worker,
                    at,
                    requests,
                } => events.push(instant(
                    "preempted",
                    WORKERS,
                    worker.0,
                    at,
                    &format!(r#""requests":{requests}"#),
                )),
                Mark::Phase {
                    worker,
                    kind,
                    start,
                    end,
                } => {
                    if !*lifecycle {
                        *lifecycle = true;
                        events.push(meta(LIFECYCLE, 0, "process_name", "lifecycle"));
                        for w in topology.workers() {
                            events.push(meta(LIFECYCLE, w.id.0, "thread_name", &w.name));
                        }
                    }
                    events.push(format!(
                        r#"{{"ph":"X","name":"{kind}","cat":"lifecycle","pid":{LIFECYCLE},"tid":{},"ts":{},"dur":{}}}"#,
                        worker.0,
                        us(start),
                        us(end - start)
                    ));
                }
                Mark::Restart { worker, at } => {
                    events.push(instant("restart", WORKERS, worker.0, at, ""))
                }
                Mark::Dropped { worker, at, kind } => events.push(instant(
                    &format!("dropped {kind}"),
                    BUS,
                    0,
                    at,
                    &format!(r#""worker":"{}""#, name(worker)),
                )),
                Mark::Request {
                    id,
                    prefill_worker,
                    worker,
                    arrived,
                    started,
                    first_token,
                    transferred,
                    done,
                    rejected,
                } => {
                    if rejected {
                        events.push(instant(
                            &format!("rejected r{id}"),
                            REQUESTS,
                            0,
                            done,
                            &format!(r#""worker":"{}""#, name(worker)),
                        ));
                        continue;
                    }
                    let mut phases = vec![
                        ("queue", arrived, started, prefill_worker),
                        ("prefill", started, first_token, prefill_worker),
                    ];
                    match transferred {
                        Some(t) => {
                            phases.push(("transfer", first_token, t, worker));
                            phases.push(("decode", t, done, worker));
                        }
                        None => phases.push(("decode", first_token, done, worker)),
                    }
                    for (phase, from, to, on) in phases {
                        let args = format!(r#""request":{id},"worker":"{}""#, name(on));
                        for (ph, at) in [("b", from), ("e", to.max(from))] {
                            events.push(format!(
                                r#"{{"ph":"{ph}","name":"{phase}","cat":"request","id":{id},"pid":{REQUESTS},"tid":0,"ts":{},"args":{{{args}}}}}"#,
                                us(at)
                            ));
                        }
                    }
                }
            }
        }
        self.flush(out);
    }

    /// Appends the document's end.
    pub fn end(&mut self, out: &mut String) {
        self.flush(out);
        out.push_str("\n]}\n");
    }

    /// Appends the events made so far, one per line, comma-separated.
    fn flush(&mut self, out: &mut String) {
        for e in self.events.drain(..) {
            out.push_str(if self.any { ",\n" } else { "" });
            out.push_str(&e);
            self.any = true;
        }
    }
}

/// A metadata event naming a process or a thread.
fn meta(pid: u32, tid: u32, what: &str, name: &str) -> String {
    format!(r#"{{"ph":"M","name":"{what}","pid":{pid},"tid":{tid},"args":{{"name":"{name}"}}}}"#)
}

fn instant(name: &str, pid: u32, tid: u32, at: Nanos, args: &str) -> String {
    format!(
        r#"{{"ph":"i","s":"t","name":"{name}","pid":{pid},"tid":{tid},"ts":{},"args":{{{args}}}}}"#,
        us(at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{RequestId, WorkerId};
    use crate::scenario::Scenario;

    #[test]
    fn marks_become_trace_events() {
        let topo = Topology::of(&Scenario::default());
        let mut t = Timeline::default();
        t.note(Mark::Step {
            worker: WorkerId(1),
            start: 1_500,
            end: 2_000_250,
            steps: 1,
            batch: 2,
            prefill_tokens: 96,
            decode_tokens: 1,
        });
        t.note(Mark::Request {
            id: RequestId(7),
            prefill_worker: WorkerId(0),
            worker: WorkerId(0),
            arrived: 0,
            started: 1_000,
            first_token: 3_000,
            transferred: None,
            done: 9_000,
            rejected: false,
        });
        let json: serde_json::Value = serde_json::from_str(&render(&t, &topo)).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let step = events.iter().find(|e| e["ph"] == "X").unwrap();
        assert_eq!(step["ts"].as_f64(), Some(1.5));
        assert_eq!(step["dur"].as_f64(), Some(1998.75));
        assert_eq!(
            (step["tid"].as_u64(), step["name"].as_str()),
            (Some(1), Some("mixed")),
            "96 prompt tokens and one decoded token in one step"
        );
        let phases: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "b")
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(phases, ["queue", "prefill", "decode"]);
        assert!(events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "worker1"));
    }

    #[test]
    fn marks_rendered_in_batches_give_the_text_of_one_render() {
        let topo = Topology::of(&Scenario::default());
        let mut t = Timeline::default();
        for i in 0..7u64 {
            t.note(Mark::Step {
                worker: WorkerId((i % 2) as u32),
                start: i * 1_000,
                end: i * 1_000 + 700,
                steps: 1,
                batch: 1,
                prefill_tokens: 0,
                decode_tokens: 1,
            });
            // Phases (a scaling run's): the lifecycle process is named once, at the first.
            t.note(Mark::Phase {
                worker: WorkerId(0),
                kind: "serving",
                start: i,
                end: i + 1,
            });
        }
        let whole = render(&t, &topo);
        assert_eq!(whole.matches(r#""name":"lifecycle""#).count(), 1);
        for size in [1, 2, 3, 14] {
            let mut r = TimelineRenderer::new(topo.clone());
            let mut text = String::new();
            r.start(&mut text);
            for batch in t.marks.chunks(size) {
                r.marks(batch, &mut text);
            }
            r.marks(&[], &mut text);
            r.end(&mut text);
            assert_eq!(text, whole, "batches of {size}");
        }
    }
}
