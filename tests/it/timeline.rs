//! `--perfetto`: the timeline a run writes follows the Chrome trace-event format's rules, and
//! shows what happened (steps, request phases, transfers, lost events, restarts).

use std::collections::HashMap;

use serde_json::Value as Json;

use crate::common::{ok, write};

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
            assert!(w[0].1 <= w[1].0 + 1e-9, "{track:?}: {w:?}");
        }
    }
    events
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
    assert!(names(&events, "C").iter().any(|n| n.ends_with("kv blocks")));
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
    let out = dir.path().join("t.json");
    ok(&["run", &scenario, "--perfetto", out.to_str().unwrap()]);
    let events = check_trace_events(&std::fs::read_to_string(&out).unwrap());
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
