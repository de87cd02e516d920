//! `--perfetto`: the timeline a run writes follows the Chrome trace-event format's rules, and
//! shows what happened (steps, request phases, transfers, lost events, restarts).

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::common::{ok, write};

const STEP_NAMES: [&str; 3] = ["prefill", "decode", "mixed"];

/// Checks `text` against the trace-event format (JSON object form) and returns its events.
fn check_trace_events(text: &str) -> Vec<Json> {
    let doc: Json = serde_json::from_str(text).expect("valid JSON");
    let events = doc["traceEvents"]
        .as_array()
        .expect("traceEvents array")
        .clone();
    assert!(!events.is_empty());
    let mut spans: HashMap<(u64, u64), Vec<(f64, f64)>> = HashMap::new();
    let mut open: HashMap<(String, u64, String), Vec<f64>> = HashMap::new();
    for e in &events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(e["name"].is_string(), "{e}");
        let (pid, tid) = (
            e["pid"].as_u64().expect("pid"),
            e["tid"].as_u64().expect("tid"),
        );
        if ph == "M" {
            assert!(["process_name", "thread_name"].contains(&e["name"].as_str().unwrap()));
            assert!(e["args"]["name"].is_string(), "{e}");
            continue;
        }
        let ts = e["ts"].as_f64().expect("ts");
        assert!(ts >= 0.0, "{e}");
        match ph {
            "X" => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "{e}");
                spans.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "b" | "e" => {
                let key = (
                    e["cat"].as_str().expect("cat").to_string(),
                    e["id"].as_u64().expect("id"),
                    e["name"].as_str().unwrap().to_string(),
                );
                if ph == "b" {
                    open.entry(key).or_default().push(ts);
                } else {
                    let begun = open.get_mut(&key).and_then(Vec::pop).expect("b before e");
                    assert!(ts >= begun, "{e}");
                }
            }
            "i" => assert!(["g", "p", "t"].contains(&e["s"].as_str().expect("s"))),
            "C" => {
                let args = e["args"].as_object().expect("args");
                assert!(
                    !args.is_empty() && args.values().all(Json::is_number),
                    "{e}"
                );
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "every b has its e");
    // Complete events on one thread do not overlap: a worker runs one step at a time.
    for (track, mut s) in spans {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in s.windows(2) {
            // Times are whole nanoseconds (0.001 us); below half of one is float rounding.
            assert!(w[0].1 <= w[1].0 + 5e-4, "{track:?}: {w:?}");
        }
    }
    events
}

/// Runs `scenario` with `--perfetto` into `dir` and returns the timeline's checked events.
fn timeline_of(dir: &std::path::Path, scenario: &str) -> Vec<Json> {
    let out = dir.join("t.json");
    ok(&["run", scenario, "--perfetto", out.to_str().unwrap()]);
    check_trace_events(&std::fs::read_to_string(&out).unwrap())
}

fn names(events: &[Json], ph: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["ph"] == ph)
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_disaggregated_run_shows_steps_and_every_phase_with_its_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    ok(&[
        "run",
        "scenarios/disagg-one-gpu.toml",
        "--perfetto",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let events = check_trace_events(&text);
    let phases = names(&events, "b");
    for p in ["queue", "prefill", "transfer", "decode"] {
        assert_eq!(phases.iter().filter(|n| *n == p).count(), 200, "{p}");
    }
    assert!(names(&events, "X").iter().any(|n| n == "prefill"));
    for counter in ["kv blocks used", "kv blocks resident"] {
        assert!(names(&events, "C").iter().any(|n| n.ends_with(counter)));
    }
    // Deterministic: the same run writes the same bytes.
    ok(&[
        "run",
        "scenarios/disagg-one-gpu.toml",
        "--perfetto",
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

#[test]
fn losses_evictions_and_restarts_are_instant_events() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "s.toml",
        r#"
        seed = 2
        [workload]
        kind = "prefix-repeat"
        output_tokens = 8
        [cluster]
        workers = 2
        kv_capacity_blocks = 20
        [router]
        policy = "kv-events"
        [bus]
        drop_rate = 0.3
        [[faults]]
        kind = "restart"
        worker = 1
        at_ms = 300.0
        down_ms = 50.0
        "#,
    );
    let events = timeline_of(dir.path(), &scenario);
    let instants = names(&events, "i");
    for what in ["restart", "evicted"] {
        assert!(instants.iter().any(|n| n == what), "{what}");
    }
    assert!(instants.iter().any(|n| n.starts_with("dropped Kv")));
    // The replay command writes one too.
    let out2 = dir.path().join("r.json");
    ok(&[
        "replay",
        "data/traces/mooncake_conversation_trace.jsonl",
        "--set",
        "workload.limit=30",
        "--perfetto",
        out2.to_str().unwrap(),
    ]);
    check_trace_events(&std::fs::read_to_string(&out2).unwrap());
}

#[test]
fn a_small_cache_shows_preemptions_and_steps_keep_three_names() {
    let dir = tempfile::tempdir().unwrap();
    // One worker with room for about two requests (48 prompt blocks each, growing by 8):
    // decoding runs out of blocks and preempts.
    let scenario = write(
        dir.path(),
        "s.toml",
        r#"
        seed = 3
        [workload]
        kind = "synthetic"
        requests = 40
        rate_per_s = 100.0
        [cluster]
        workers = 1
        kv_capacity_blocks = 120
        "#,
    );
    let out = dir.path().join("t.json");
    let report: Json = serde_json::from_str(&ok(&[
        "run",
        &scenario,
        "--json",
        "--perfetto",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let events = check_trace_events(&std::fs::read_to_string(&out).unwrap());
    let preempted: u64 = events
        .iter()
        .filter(|e| e["ph"] == "i" && e["name"] == "preempted")
        .map(|e| e["args"]["requests"].as_u64().unwrap())
        .sum();
    assert!(preempted > 0, "the cache is too small not to preempt");
    assert_eq!(preempted, report["preemptions"].as_u64().unwrap());
    let steps = names(&events, "X");
    assert!(
        steps.iter().all(|n| STEP_NAMES.contains(&n.as_str())),
        "fixed names, the stretch length in args: {:?}",
        steps.iter().find(|n| !STEP_NAMES.contains(&n.as_str()))
    );
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["args"]["steps"].as_u64().unwrap() > 1));
    // Resident blocks (in use + cached) never fewer than those in use, and the cache keeps
    // blocks that no running request holds.
    let level = |what: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == format!("worker0 kv blocks {what}"))
            .map(|e| e["args"][what].as_u64().unwrap())
            .collect()
    };
    let (used, resident) = (level("used"), level("resident"));
    assert_eq!(used.len(), resident.len());
    assert!(used.iter().zip(&resident).all(|(u, r)| u <= r && *r <= 120));
    assert!(used.iter().zip(&resident).any(|(u, r)| u < r));
}

#[test]
fn a_scaling_run_shows_each_worker_starting_serving_and_draining() {
    let dir = tempfile::tempdir().unwrap();
    // worker1 starts at 0.5 s and serves at 1.5 s; at 3 s the pool goes back to one, worker1
    // (the highest slot) draining what it holds.
    let scenario = write(
        dir.path(),
        "s.toml",
        r#"
        [workload]
        kind = "synthetic"
        requests = 120
        rate_per_s = 30.0
        [cluster]
        workers = 1
        startup_s = 1.0
        [[scale]]
        at_s = 0.5
        pool = "workers"
        workers = 2
        [[scale]]
        at_s = 3.0
        pool = "workers"
        workers = 1
        "#,
    );
    let events = timeline_of(dir.path(), &scenario);
    let phases: Vec<(u64, &str, f64, f64)> = events
        .iter()
        .filter(|e| e["cat"] == "lifecycle")
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap() / 1e6;
            let end = ts + e["dur"].as_f64().unwrap() / 1e6;
            (
                e["tid"].as_u64().unwrap(),
                e["name"].as_str().unwrap(),
                ts,
                end,
            )
        })
        .collect();
    let of = |w: u64| -> Vec<&str> { phases.iter().filter(|p| p.0 == w).map(|p| p.1).collect() };
    assert_eq!(of(0), ["serving"]);
    assert_eq!(of(1), ["starting", "serving", "draining"]);
    let w1: Vec<_> = phases.iter().filter(|p| p.0 == 1).collect();
    assert_eq!((w1[0].2, w1[0].3), (0.5, 1.5), "a second's model load");
    assert_eq!((w1[1].3, w1[2].2), (3.0, 3.0));
    assert!(w1[2].3 >= 3.0, "the drain ends when its requests do");
    // A run that does not scale has no lifecycle track (its timeline is unchanged).
    let fixed = write(
        dir.path(),
        "f.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 20\n",
    );
    let events = timeline_of(dir.path(), &fixed);
    assert!(events.iter().all(|e| e["cat"] != "lifecycle"));
}

/// A restart cuts the decode stretch in progress: its mark counts the steps it began (those
/// done and the one cut), not every step it planned (here 1 of 16: the mark said 16 before
/// Dec 5 2026, while the report counts none of a stretch the restart discards).
#[test]
fn a_stretch_cut_by_a_restart_counts_the_steps_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "s.toml",
        r#"
        [workload]
        kind = "synthetic"
        requests = 1
        input = { dist = "fixed", tokens = 64 }
        output = { dist = "fixed", tokens = 100 }
        [cluster]
        workers = 1
        [timing]
        model = "fixed"
        service_ms = 10.0
        [[faults]]
        kind = "restart"
        worker = 0
        at_ms = 500.0
        down_ms = 10.0
        "#,
    );
    let events = timeline_of(dir.path(), &scenario);
    let restart = events
        .iter()
        .find(|e| e["ph"] == "i" && e["name"] == "restart")
        .expect("a restart")["ts"]
        .as_f64()
        .unwrap();
    let cut = events
        .iter()
        .find(|e| {
            e["cat"] == "step"
                && (e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap() - restart).abs() < 1e-3
        })
        .expect("a step cut at the restart");
    let dur_ms = cut["dur"].as_f64().unwrap() / 1e3;
    let steps = cut["args"]["steps"].as_u64().unwrap();
    assert_eq!(steps, (dur_ms / 10.0).ceil() as u64, "{cut}");
}
