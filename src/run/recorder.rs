//! What a run measures over time, from the deliveries it sees: each request's arrival (client
//! → router) and completion (router → client). It keeps the interval a planner observes (reset
//! at each observation), the run's SLA attainment, and fixed buckets for the report's
//! `intervals` (load, TTFT p90, ITL p90, prefix reuse and SLA attainment over time).

use crate::engine::{Envelope, Nanos};
use crate::ids::WorkerId;
use crate::planner::Traffic;
use crate::protocol::messages::{Ack, Msg};
use crate::report::IntervalReport;
use crate::round::round_py;
use crate::scenario::SlaSettings;

/// Completions of a window: each request's TTFT and mean ITL, ns, and sums; rejected requests
/// apart (they have no first token).
#[derive(Clone, Debug, Default)]
struct Window {
    arrivals: u64,
    rejected: u64,
    isl_sum: u64,
    ttft: Vec<u64>,
    itl: Vec<u64>,
    osl_sum: u64,
    duration_sum: u64,
    input_sum: u64,
    cached_sum: u64,
    met: u64,
    /// Per worker: (TTFT sum ns, prompt tokens sum, count) of what it prefilled, (ITL sum ns,
    /// count) of what it decoded.
    per_worker: Vec<(u64, u64, u64, u64, u64)>,
}

impl Window {
    fn add(&mut self, a: &Ack, met: bool) {
        if a.rejected {
            // Counted as a completion before: a TTFT of 0 and its prompt among the tokens
            // that missed the caches.
            self.rejected += 1;
            return;
        }
        let ttft = a.first_token_ns - a.arrived_ns;
        self.ttft.push(ttft);
        self.osl_sum += a.output_tokens;
        self.duration_sum += a.done_ns - a.arrived_ns;
        self.input_sum += u64::from(a.input_tokens);
        self.cached_sum += a.cached_tokens;
        self.met += u64::from(met);
        let grow = |v: &mut Vec<(u64, u64, u64, u64, u64)>, w: WorkerId| {
            if v.len() <= w.index() {
                v.resize(w.index() + 1, (0, 0, 0, 0, 0));
            }
        };
        grow(&mut self.per_worker, a.prefill_worker);
        let p = &mut self.per_worker[a.prefill_worker.index()];
        p.0 += ttft;
        p.1 += u64::from(a.input_tokens);
        p.2 += 1;
        if let Some(itl) = itl_ns(a) {
            self.itl.push(itl);
            grow(&mut self.per_worker, a.worker);
            let d = &mut self.per_worker[a.worker.index()];
            d.3 += itl;
            d.4 += 1;
        }
    }

    fn completed(&self) -> u64 {
        self.ttft.len() as u64
    }

    /// Requests answered in the window: completed or rejected.
    fn answered(&self) -> u64 {
        self.completed() + self.rejected
    }
}

/// A request's mean gap between tokens, ns (`None` below two tokens).
fn itl_ns(a: &Ack) -> Option<u64> {
    (a.output_tokens > 1 && !a.rejected)
        .then(|| (a.done_ns - a.first_token_ns) / (a.output_tokens - 1))
}

/// The p90 of `v` in ms (sorts it).
fn p90_ms(v: &mut [u64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let pos = 0.9 * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let f = pos - lo as f64;
    Some(round_py(
        (v[lo] as f64 * (1.0 - f) + v[hi] as f64 * f) / 1e6,
        3,
    ))
}

fn mean_ms(v: &[u64]) -> Option<f64> {
    (!v.is_empty()).then(|| round_py(v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6, 3))
}

/// A worker's means over an interval: TTFT ms and prompt tokens of what it prefilled, ITL ms
/// of what it decoded.
pub type WorkerMeans = (Option<f64>, Option<f64>, Option<f64>);

/// Whether a run of `s` reports `intervals`: its load or size changes (`[[scale]]`, a planner,
/// a rate or speedup schedule, a trace's `duration_s`) or it has an `[sla]`.
pub fn has_intervals(s: &crate::scenario::Scenario) -> bool {
    s.scales()
        || s.sla.is_set()
        || matches!(&s.workload, crate::scenario::Workload::Trace(t) if t.speedup_schedule.is_some() || t.duration_s.is_some())
        || matches!(&s.workload, crate::scenario::Workload::Synthetic(p) if p.rate_schedule.is_some())
}

/// The run's recorder.
#[derive(Clone, Debug)]
pub struct Recorder {
    sla: SlaSettings,
    /// The planner's window (since its last observation).
    window: Window,
    bucket_ns: Nanos,
    buckets: Vec<Window>,
    met: u64,
    requests: u64,
}

impl Recorder {
    /// A recorder of `[sla]`, with buckets of `bucket_ns` for the report's intervals (0: none).
    pub fn new(sla: SlaSettings, bucket_ns: Nanos) -> Self {
        Recorder {
            sla,
            window: Window::default(),
            bucket_ns,
            buckets: Vec::new(),
            met: 0,
            requests: 0,
        }
    }

    fn bucket(&mut self, at: Nanos) -> Option<&mut Window> {
        if self.bucket_ns == 0 {
            return None;
        }
        let k = (at / self.bucket_ns) as usize;
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, Window::default());
        }
        Some(&mut self.buckets[k])
    }

    /// Sees one delivery (`client`: the client's address).
    pub fn see(&mut self, env: &Envelope<Msg>, client: crate::engine::ActorId) {
        match &env.msg {
            Msg::Request(r) if env.from == client => {
                let isl = u64::from(r.spec.input_tokens);
                self.window.arrivals += 1;
                self.window.isl_sum += isl;
                if let Some(b) = self.bucket(env.time) {
                    b.arrivals += 1;
                    b.isl_sum += isl;
                }
            }
            Msg::Ack(a) if env.to == client => {
                let met = self.meets(a);
                self.requests += 1;
                self.met += u64::from(met);
                self.window.add(a, met);
                if let Some(b) = self.bucket(env.time) {
                    b.add(a, met);
                }
            }
            _ => {}
        }
    }

    /// Whether `a` meets `[sla]`: served, TTFT and mean ITL within their targets.
    fn meets(&self, a: &Ack) -> bool {
        let ttft = (a.first_token_ns - a.arrived_ns) as f64 / 1e6;
        let itl = itl_ns(a).map_or(0.0, |v| v as f64 / 1e6);
        !a.rejected
            && self.sla.ttft_p90_ms.is_none_or(|t| ttft <= t)
            && self.sla.itl_p90_ms.is_none_or(|t| itl <= t)
    }

    /// The planner's window as traffic over `interval_s`, and per worker `(TTFT ms, ISL, ITL
    /// ms)` means; the window starts again.
    pub fn take(&mut self, interval_s: f64) -> (Traffic, Vec<WorkerMeans>) {
        let mut w = std::mem::take(&mut self.window);
        let n = w.completed();
        let div = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        let traffic = Traffic {
            requests: w.arrivals,
            request_rate: if interval_s > 0.0 {
                w.arrivals as f64 / interval_s
            } else {
                0.0
            },
            isl: div(w.isl_sum, w.arrivals),
            osl: div(w.osl_sum, n),
            completed: n,
            ttft_mean_ms: mean_ms(&w.ttft),
            ttft_p90_ms: p90_ms(&mut w.ttft),
            itl_mean_ms: mean_ms(&w.itl),
            itl_p90_ms: p90_ms(&mut w.itl),
            request_duration_s: div(w.duration_sum, n).map(|ns| ns / 1e9),
            prefix_reuse: div(w.cached_sum, w.input_sum),
        };
        let per_worker = w
            .per_worker
            .iter()
            .map(|&(ttft, isl, k, itl, j)| {
                (
                    div(ttft, k).map(|v| v / 1e6),
                    div(isl, k),
                    div(itl, j).map(|v| v / 1e6),
                )
            })
            .collect();
        (traffic, per_worker)
    }

    /// The share of requests completed within `[sla]` (4 places; `None` without one).
    pub fn sla_attainment(&self, requests: usize) -> Option<f64> {
        self.sla
            .is_set()
            .then(|| round_py(self.met as f64 / requests.max(1) as f64, 4))
    }

    /// Requests within `[sla]` per second of `duration_ns` (3 places; `None` without one).
    pub fn goodput_rps(&self, duration_ns: Nanos) -> Option<f64> {
        self.sla.is_set().then(|| {
            if duration_ns == 0 {
                0.0
            } else {
                round_py(self.met as f64 / (duration_ns as f64 / 1e9), 3)
            }
        })
    }

    /// The report's intervals (`None` without buckets).
    pub fn intervals(&mut self) -> Option<Vec<IntervalReport>> {
        if self.bucket_ns == 0 {
            return None;
        }
        let secs = self.bucket_ns as f64 / 1e9;
        let sla = self.sla.is_set();
        Some(
            self.buckets
                .iter_mut()
                .enumerate()
                .map(|(k, b)| IntervalReport {
                    t_s: round_py(k as f64 * secs, 3),
                    load_rps: round_py(b.arrivals as f64 / secs, 3),
                    completed: b.completed(),
                    ttft_p90_ms: p90_ms(&mut b.ttft),
                    itl_p90_ms: p90_ms(&mut b.itl),
                    prefix_reuse: (b.input_sum > 0)
                        .then(|| round_py(b.cached_sum as f64 / b.input_sum as f64, 4)),
                    sla_attainment: (sla && b.answered() > 0)
                        .then(|| round_py(b.met as f64 / b.answered() as f64, 4)),
                })
                .collect(),
        )
    }
}
