//! Comparing two traces: the first diverging line and the per-metric deltas recomputed from each
//! trace alone (routes per worker, requests, repeats, hits, acks, KV events).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::cluster::topology::ActorKind;
use crate::error::{read_text, Error, Result};

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

/// Compares the traces at `a` and `b`.
pub fn diff_files(a: &Path, b: &Path) -> Result<TraceDiff> {
    let (ta, tb) = (read_text(a)?, read_text(b)?);
    let (ma, mb) = (metrics(a, &ta)?, metrics(b, &tb)?);
    let mut la = ta.lines();
    let mut lb = tb.lines();
    let mut line = 0;
    let first = loop {
        line += 1;
        match (la.next(), lb.next()) {
            (None, None) => break None,
            (x, y) if x == y => continue,
            (x, y) => {
                break Some(Divergence {
                    line,
                    a: x.map(str::to_string),
                    b: y.map(str::to_string),
                })
            }
        }
    };
    Ok(TraceDiff {
        first,
        a: ma,
        b: mb,
    })
}

/// Recomputes the run's metrics from a trace's text; `path` names it in errors.
pub fn metrics(path: &Path, text: &str) -> Result<TraceMetrics> {
    let mut m = TraceMetrics::default();
    let mut seen_prefixes = HashSet::new();
    let mut routers = std::collections::BTreeSet::new();
    let bump = |values: &mut BTreeMap<String, u64>, key: String| {
        *values.entry(key).or_insert(0) += 1;
    };
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
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
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
        match kind {
            "Request" if from_kind == client => {
                bump(&mut m.values, "requests".into());
                if let Some(p) = v.get("prefix").and_then(Value::as_u64) {
                    if !seen_prefixes.insert(p) {
                        bump(&mut m.values, "repeat_requests".into());
                    }
                }
            }
            "Request" if from_kind == router => bump(&mut m.values, format!("routes.{to}")),
            "Ack" if to_kind == router => bump(&mut m.values, "acks".into()),
            "Ack" if to_kind == client && flag("repeat") && flag("prefix_hit") => {
                bump(&mut m.values, "hits".into())
            }
            "KvStored" | "KvRemoved" | "KvCleared" if to_kind == bus => {
                bump(&mut m.values, "events.published".into())
            }
            "KvStored" | "KvRemoved" | "KvCleared" if to_kind == router => {
                bump(&mut m.values, "events.delivered".into());
            }
            _ => {}
        }
        for (name, kind) in [(from, from_kind), (to, to_kind)] {
            if kind == router && !routers.contains(name) {
                routers.insert(name.to_string());
            }
        }
    }
    // Every replica is sent every event (counting deliveries against one copy of each read 0
    // dropped with two replicas). What a router applied depends on its gap recovery, which
    // the trace does not carry: the report's events.applied is not recomputed.
    let published = m.values["events.published"];
    let delivered = m.values["events.delivered"];
    let replicas = routers.len().max(1) as u64;
    m.values.insert(
        "events.dropped".into(),
        (published * replicas).saturating_sub(delivered),
    );
    Ok(m)
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
