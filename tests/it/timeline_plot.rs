//! `run --timeline-plot`: a scaling run's load, replicas, TTFT p90 and prefix reuse over time as SVG, and the
//! flag refused on a run that reports no intervals.

use crate::common::{bad, ok, write};

/// Two workers grow to four at 30 s (serving from 35 s), with an [sla]: about 80 s of virtual
/// time, so two of the 60 s intervals a run without a planner reports; under a second in debug.
const SCALING: &str = r#"
name = "scale-step"
seed = 3
[workload]
kind = "synthetic"
requests = 400
rate_per_s = 5.0
input = { dist = "uniform", min = 100, max = 600 }
output = { dist = "uniform", min = 5, max = 30 }
[cluster]
workers = 2
block_size = 16
kv_capacity_blocks = 4000
startup_s = 5.0
[router]
policy = "dynamo"
[sla]
ttft_p90_ms = 250.0
[[scale]]
at_s = 30.0
pool = "workers"
workers = 4
"#;

#[test]
fn a_scaling_run_draws_load_replicas_and_ttft_against_time() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(dir.path(), "scale.toml", SCALING);
    let svg_path = dir.path().join("timeline.svg");
    let report = ok(&[
        "run",
        &scenario,
        "--json",
        "--timeline-plot",
        svg_path.to_str().unwrap(),
    ]);
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(json["intervals"].as_array().map(Vec::len), Some(2));
    let svg = std::fs::read_to_string(&svg_path).expect("the plot is written");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for title in [
        "scale-step: load, replicas, TTFT and reuse over time",
        "Offered load per interval",
        "Replicas per pool",
        "TTFT p90 per interval",
        "Prefix reuse per interval",
        "[sla] target 250 ms",
        "workers serving",
        "time (s)",
    ] {
        assert!(texts.contains(&title), "{title} missing from {texts:?}");
    }
    // The same run again draws the same bytes.
    let again = dir.path().join("again.svg");
    ok(&["run", &scenario, "--timeline-plot", again.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(again).unwrap(), svg);
}

#[test]
fn a_run_without_intervals_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let svg_path = dir.path().join("timeline.svg");
    let err = bad(&[
        "run",
        "scenarios/rr.toml",
        "--timeline-plot",
        svg_path.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--timeline-plot") && err.contains("no intervals"),
        "{err}"
    );
    assert!(!svg_path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
