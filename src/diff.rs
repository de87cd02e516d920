//! Comparing two traces: the first diverging line and the per-metric deltas recomputed from each
//! trace alone (routes per worker, requests, repeats, hits, acks, KV events).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::cluster::topology::ActorKind;
use crate::error::{Error, Result};
use crate::workload::trace::{numbered_lines, open, Line, MAX_LINE_BYTES};

/// Metrics recomputed from one trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceMetrics {
    /// Lines in the trace.
    pub lines: u64,
    /// Metric name → value, in name order (`routes.<worker>` per worker).
    pub values: BTreeMap<String, u64>,
}

/// The first line where two traces differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// 1-based line number.
    pub line: usize,
    /// Side A's line there (`None`: A ended).
    pub a: Option<String>,
    /// Side B's line there (`None`: B ended).
    pub b: Option<String>,
}

/// The comparison of two traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceDiff {
    /// The first divergence, `None` when identical.
    pub first: Option<Divergence>,
    /// A's metrics.
    pub a: TraceMetrics,
    /// B's metrics.
    pub b: TraceMetrics,
}

/// Compares the traces at `a` and `b`, read a line at a time side by side: memory holds the
/// counters and the first diverging pair of lines, never a whole trace (a day's trace runs to
/// tens of GB). A line is checked on side A before side B.
pub fn diff_files(a: &Path, b: &Path) -> Result<TraceDiff> {
    let mut la = numbered_lines(a, open(a)?);
    let mut lb = numbered_lines(b, open(b)?);
    let (mut ma, mut mb) = (Counter::new(), Counter::new());
    let mut first = None;
    let mut line = 0;
    loop {
        let x = next_text(a, la.next())?;
        let y = next_text(b, lb.next())?;
        if x.is_none() && y.is_none() {
            break;
        }
        line += 1;
        if let Some(x) = &x {
            ma.line(a, line, x)?;
        }
        if let Some(y) = &y {
            mb.line(b, line, y)?;
        }
        if first.is_none() && x != y {
            first = Some(Divergence { line, a: x, b: y });
        }
    }
    Ok(TraceDiff {
        first,
        a: ma.finish(),
        b: mb.finish(),
    })
}

/// The text of a trace's next line (`None` at its end); a line that is not UTF-8 or is too long
/// to be one of a trace's is an error naming it.
fn next_text(path: &Path, item: Option<Result<Line>>) -> Result<Option<String>> {
    match item.transpose()? {
        None => Ok(None),
        Some((_, Some(text))) => Ok(Some(text)),
        Some((line_no, None)) => Err(Error::field(
            path,
            line_no,
            "line",
            format!("not UTF-8, or longer than {MAX_LINE_BYTES} bytes"),
        )),
    }
}

/// The metrics of one trace, counted a line at a time.
struct Counter {
    m: TraceMetrics,
    /// Prefixes requested so far (only looked up, never iterated).
    seen_prefixes: HashSet<u64>,
    /// Requests counted as repeats and not yet acknowledged to the client (only looked up).
    open_repeats: HashSet<u64>,
    routers: std::collections::BTreeSet<String>,
}

impl Counter {
    fn new() -> Self {
        let mut m = TraceMetrics::default();
        for key in [
            "requests",
            "repeat_requests",
            "hits",
            "acks",
            "events.published",
            "events.delivered",
        ] {
            m.values.insert(key.to_string(), 0);
        }
        Counter {
            m,
            seen_prefixes: HashSet::new(),
            open_repeats: HashSet::new(),
            routers: std::collections::BTreeSet::new(),
        }
    }

    fn line(&mut self, path: &Path, line_no: usize, line: &str) -> Result<()> {
        let m = &mut self.m;
        m.lines += 1;
        let v: Value = serde_json::from_str(line)
            .map_err(|e| Error::field(path, line_no, "line", format!("not JSON: {e}")))?;
        let field = |name: &str| {
            v.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| Error::field(path, line_no, name, "missing or not a string"))
        };
        let (kind, from, to) = (field("kind")?, field("from")?, field("to")?);
        let (from_kind, to_kind) = (ActorKind::of_name(from), ActorKind::of_name(to));
        let (client, router, bus) = (
            Some(ActorKind::Client),
            Some(ActorKind::Router),
            Some(ActorKind::Bus),
        );
        let flag = |name: &str| v.get(name).and_then(Value::as_bool).unwrap_or(false);
        let request = v.get("request").and_then(Value::as_u64);
        let bump = |values: &mut BTreeMap<String, u64>, key: String| {
            *values.entry(key).or_insert(0) += 1;
        };
        match kind {
            "Request" if from_kind == client => {
                bump(&mut m.values, "requests".into());
                if let Some(p) = v.get("prefix").and_then(Value::as_u64) {
                    if !self.seen_prefixes.insert(p) {
                        bump(&mut m.values, "repeat_requests".into());
                        if let Some(r) = request {
                            self.open_repeats.insert(r);
                        }
                    }
                }
            }
            "Request" if from_kind == router => bump(&mut m.values, format!("routes.{to}")),
            "Ack" if to_kind == router => bump(&mut m.values, "acks".into()),
            "Ack" if to_kind == client => {
                // As in the report, a rejected request is no repeat (it counts as rejected).
                let was_repeat = request.is_some_and(|r| self.open_repeats.remove(&r));
                if was_repeat && flag("rejected") {
                    if let Some(n) = m.values.get_mut("repeat_requests") {
                        *n = n.saturating_sub(1);
                    }
                }
                if flag("repeat") && flag("prefix_hit") {
                    bump(&mut m.values, "hits".into());
                }
            }
            // Every KV event the bus carries, lower tiers' included, as the report counts them.
            "KvStored" | "KvRemoved" | "KvCleared" | "KvTierStored" | "KvTierRemoved"
                if to_kind == bus =>
            {
                bump(&mut m.values, "events.published".into());
            }
            "KvStored" | "KvRemoved" | "KvCleared" | "KvTierStored" | "KvTierRemoved"
                if to_kind == router =>
            {
                bump(&mut m.values, "events.delivered".into());
            }
            _ => {}
        }
        for (name, kind) in [(from, from_kind), (to, to_kind)] {
            if kind == router && !self.routers.contains(name) {
                self.routers.insert(name.to_string());
            }
        }
        Ok(())
    }

    fn finish(self) -> TraceMetrics {
        let mut m = self.m;
        // Every replica is sent every event (counting deliveries against one copy of each read
        // 0 dropped with two replicas). What a router applied depends on its gap recovery, which
        // the trace does not carry: the report's events.applied is not recomputed.
        let (published, delivered) = (m.values["events.published"], m.values["events.delivered"]);
        let replicas = self.routers.len().max(1) as u64;
        m.values.insert(
            "events.dropped".into(),
            (published * replicas).saturating_sub(delivered),
        );
        m
    }
}

impl TraceDiff {
    /// The report `dynsim diff` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        match &self.first {
            None => out.push_str(&format!("identical ({} lines)\n", self.a.lines)),
            Some(d) => {
                out.push_str(&format!("first difference at line {}:\n", d.line));
                for (side, l) in [("A", &d.a), ("B", &d.b)] {
                    out.push_str(&format!("  {side}: {}\n", describe(l.as_deref())));
                }
            }
        }
        let keys: std::collections::BTreeSet<&String> =
            self.a.values.keys().chain(self.b.values.keys()).collect();
        out.push_str(&format!(
            "{:<22}{:>10}{:>10}{:>10}\n",
            "metric", "A", "B", "B-A"
        ));
        for k in keys {
            let (a, b) = (
                self.a.values.get(k).copied().unwrap_or(0),
                self.b.values.get(k).copied().unwrap_or(0),
            );
            out.push_str(&format!(
                "{k:<22}{a:>10}{b:>10}{:>+10}\n",
                b as i64 - a as i64
            ));
        }
        out
    }
}

fn describe(line: Option<&str>) -> String {
    let Some(line) = line else {
        return "(trace ended)".to_string();
    };
    let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    format!(
        "t_ns={} kind={}  {}",
        v.get("t_ns").map_or("?".to_string(), Value::to_string),
        v.get("kind").and_then(Value::as_str).unwrap_or("?"),
        line
    )
}
