//! `dynsim compare`: scenarios side by side. Each runs once (on its own thread); the output is a
//! table, `compare.json` (every scenario's full report and its TTFT and TPOT quantiles) and three
//! plots: the TTFT and TPOT distributions (CDFs, one line per scenario) and the requests each
//! worker received (bars from 0, one per scenario and worker).

use serde::Serialize;

use crate::chart::{bar_svg, line_svg, BarChart, LineChart, Series};
use crate::metrics::Kind;
use crate::output::pretty_json;
use crate::report::Report;

/// One compared scenario: its label (the file's stem, numbered if two share one) and report.
#[derive(Clone, Debug)]
pub struct Compared {
    /// Its label in the table and the legends.
    pub label: String,
    /// The scenario file as given.
    pub file: String,
    /// Its run's report.
    pub report: Report,
}

#[derive(Serialize)]
struct Entry<'a> {
    label: &'a str,
    file: &'a str,
    report: &'a Report,
    ttft_cdf_ms: &'a [f64],
    tpot_cdf_ms: &'a [f64],
}

#[derive(Serialize)]
struct CompareJson<'a> {
    scenarios: Vec<Entry<'a>>,
}

/// Labels for scenario files: each file's stem, numbered by position when stems repeat; a
/// label that still names two rows (a file whose stem is `rr (1)` beside two `rr`s) becomes
/// its path and position.
pub fn labels(files: &[String]) -> Vec<String> {
    let labels = stem_labels(files);
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if labels.iter().filter(|m| *m == l).count() > 1 {
                format!("{} ({})", files[i], i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

fn stem_labels(files: &[String]) -> Vec<String> {
    let stems: Vec<String> = files
        .iter()
        .map(|f| {
            std::path::Path::new(f)
                .file_stem()
                .map_or(f.clone(), |s| s.to_string_lossy().into_owned())
        })
        .collect();
    stems
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if stems.iter().filter(|t| *t == s).count() > 1 {
                format!("{s} ({})", i + 1)
            } else {
                s.clone()
            }
        })
        .collect()
}

/// The readable table: one row per scenario. When a run scales or has an `[sla]`, three more
/// columns show the trade: GPU-hours paid, SLA attainment and goodput.
pub fn table(runs: &[Compared]) -> String {
    // Padding counts characters, so the width does too (a label "débit" is 6 bytes, 5 wide).
    let width = (runs.iter().map(|r| r.label.chars().count()).max())
        .unwrap_or(8)
        .max(8);
    let costed = runs
        .iter()
        .any(|c| c.report.sla_attainment.is_some() || !c.report.scale_events.is_empty());
    let mut out = format!(
        "{:<width$}  {:>12} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8}",
        "scenario",
        "policy",
        "reuse",
        "ttft p50",
        "ttft p90",
        "ttft p99",
        "tpot p50",
        "tpot p90",
        "req/s",
        "busiest"
    );
    if costed {
        out.push_str(&format!(" {:>9} {:>7} {:>8}", "gpu-h", "sla", "goodput"));
    }
    out.push('\n');
    let or_dash = |x: Option<f64>| x.map_or("-".to_string(), |v| v.to_string());
    for c in runs {
        let r = &c.report;
        // A run whose outputs are one token each has no time per output token: not 0 ms.
        let tpot = |p: f64| or_dash((!r.tpot_cdf_ms.is_empty()).then_some(p));
        out.push_str(&format!(
            "{:<width$}  {:>12} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8}",
            c.label,
            r.policy,
            r.block_hit_rate,
            r.ttft_ms.p50,
            r.ttft_ms.p90,
            r.ttft_ms.p99,
            tpot(r.tpot_ms.p50),
            tpot(r.tpot_ms.p90),
            r.throughput_rps,
            r.busiest_worker_share
        ));
        if costed {
            out.push_str(&format!(
                " {:>9} {:>7} {:>8}",
                crate::round::significant(r.gpu_seconds / 3600.0, 3),
                or_dash(r.sla_attainment),
                or_dash(r.goodput_rps)
            ));
        }
        out.push('\n');
    }
    out
}

/// The output folder's files, by name: `compare.json`, `ttft_cdf.svg`, `tpot_cdf.svg`,
/// `per_worker_load.svg`.
pub fn render(runs: &[Compared]) -> Vec<(String, Vec<u8>)> {
    let json = CompareJson {
        scenarios: runs
            .iter()
            .map(|c| Entry {
                label: &c.label,
                file: &c.file,
                report: &c.report,
                ttft_cdf_ms: &c.report.ttft_cdf_ms,
                tpot_cdf_ms: &c.report.tpot_cdf_ms,
            })
            .collect(),
    };
    let cdf = |pick: fn(&Report) -> &[f64]| -> Vec<Series> {
        runs.iter()
            .map(|c| Series {
                label: c.label.clone(),
                points: pick(&c.report)
                    .iter()
                    .enumerate()
                    .map(|(k, &ms)| (ms, k as f64 / 100.0))
                    .collect(),
            })
            .collect()
    };
    let ttft = cdf(|r| &r.ttft_cdf_ms);
    let tpot = cdf(|r| &r.tpot_cdf_ms);
    // Workers by name, in the order they first appear (`worker3` is the same bar group in two
    // clusters, `prefill0` and `decode0` are their own); a scenario without one draws no bar
    // there. Before Dec 5 2026 the bars went by position under the largest cluster's names.
    let mut workers: Vec<String> = Vec::new();
    for c in runs {
        for w in &c.report.per_worker {
            if !workers.contains(&w.name) {
                workers.push(w.name.clone());
            }
        }
    }
    let load: Vec<(String, Vec<Option<f64>>)> = runs
        .iter()
        .map(|c| {
            let routed = workers.iter().map(|name| {
                let w = c.report.per_worker.iter().find(|w| &w.name == name)?;
                Some(w.routed as f64)
            });
            (c.label.clone(), routed.collect())
        })
        .collect();
    let chart = |title: &str, x: &str, y: &str, series: &[Series]| {
        line_svg(&LineChart {
            title,
            x_desc: x,
            x_kind: Kind::Latency,
            y_desc: y,
            y_kind: Kind::Share,
            legend: "scenario",
            series,
            threshold: None,
            runs: false,
        })
        .into_bytes()
    };
    vec![
        ("compare.json".to_string(), pretty_json(&json)),
        (
            "ttft_cdf.svg".to_string(),
            chart(
                "TTFT distribution",
                "TTFT (ms)",
                "share of requests at most this TTFT",
                &ttft,
            ),
        ),
        (
            "tpot_cdf.svg".to_string(),
            chart(
                "TPOT distribution",
                "TPOT (ms)",
                "share of requests at most this TPOT",
                &tpot,
            ),
        ),
        (
            "per_worker_load.svg".to_string(),
            bar_svg(&BarChart {
                title: "requests per worker",
                x_desc: "worker",
                y_desc: "requests routed",
                legend: "scenario",
                categories: &workers,
                series: &load,
            })
            .into_bytes(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_stems_numbered_when_they_repeat() {
        let files = ["a/x.toml", "b/x.toml", "y.toml"].map(String::from);
        assert_eq!(labels(&files), ["x (1)", "x (2)", "y"]);
        // A stem that reads like a numbered one: each row still has its own label.
        let files = ["rr.toml", "kv.toml", "./rr.toml", "d/rr (1).toml"].map(String::from);
        assert_eq!(
            labels(&files),
            ["rr.toml (1)", "kv", "rr (3)", "d/rr (1).toml (4)"]
        );
    }
}
