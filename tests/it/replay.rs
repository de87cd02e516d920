//! Trace replay through the real binary: the published reuse figure, bad rows, Azure CSV,
//! closed-loop sessions and concurrency.

use std::collections::HashMap;

use crate::common::{bad, ok, write};
use serde_json::Value;

const CONVERSATION: &str = "data/traces/mooncake_conversation_trace.jsonl";

fn json(out: &str) -> Value {
    serde_json::from_str(out).expect("one JSON object")
}

#[test]
fn conversation_trace_reuses_36_64_percent_with_one_unbounded_worker() {
    let r = json(&ok(&["replay", CONVERSATION, "--workers", "1", "--json"]));
    assert_eq!(r["block_hit_rate"], 0.3664);
    assert_eq!(r["requests"], 12_031);
    assert_eq!(r["trace"]["rows"], 12_031);
    assert_eq!(r["trace"]["skipped"], 0);
    assert_eq!(r["acks"], 12_031);
}

#[test]
fn bundled_mooncake_scenario_runs_from_its_own_folder() {
    let r = json(&ok(&[
        "run",
        "scenarios/mooncake-conversation.toml",
        "--json",
        "--set",
        "router.policy=rr",
    ]));
    assert_eq!(r["requests"], 12_031);
    let rate = r["block_hit_rate"].as_f64().unwrap();
    assert!(rate > 0.05 && rate < 0.3664, "{rate}");
}

fn mooncake_row(ts: u64, ids: &[u64], extra: &str) -> String {
    let input = ids.len() * 512;
    format!(
        r#"{{"timestamp": {ts}, "input_length": {input}, "output_length": 4, "hash_ids": {ids:?}{extra}}}"#
    )
}

#[test]
fn a_malformed_row_stops_the_run_naming_its_line_unless_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let text = [
        mooncake_row(0, &[1, 2], ""),
        mooncake_row(5, &[1, 3], ""),
        r#"{"timestamp": 9, "input_length": "many", "output_length": 1, "hash_ids": [1]}"#
            .to_string(),
        mooncake_row(12, &[1, 2, 4], ""),
    ]
    .join("\n");
    let path = write(dir.path(), "t.jsonl", &text);
    let line = bad(&["replay", &path, "--json"]);
    assert!(line.contains("t.jsonl:3: input_length:"), "{line}");
    let r = json(&ok(&["replay", &path, "--json", "--skip-bad"]));
    assert_eq!(
        (r["trace"]["rows"].as_u64(), r["trace"]["skipped"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(r["requests"], 3);
}

#[test]
fn workers_on_a_disaggregated_base_is_refused_not_ignored() {
    // cluster.workers does not size a disaggregated cluster: --workers would change nothing.
    let line = bad(&[
        "replay",
        CONVERSATION,
        "--scenario",
        "scenarios/disagg-one-gpu.toml",
        "--workers",
        "4",
    ]);
    assert!(
        line.contains("--workers") && line.contains("disagg.prefill_workers"),
        "{line}"
    );
}

#[test]
fn azure_csv_replays_lengths_without_reuse() {
    let r = json(&ok(&[
        "replay",
        "data/traces/azure_llm_inference_2023_conv.csv",
        "--workers",
        "4",
        "--json",
    ]));
    assert_eq!(r["trace"]["rows"], 19_366);
    assert_eq!(r["acks"], 19_366);
    assert_eq!(r["block_hit_rate"], 0.0);
}

#[test]
fn azure_quirks_crlf_and_no_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let text = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:50.9951690,396,109";
    let path = write(dir.path(), "a.csv", text);
    let r = json(&ok(&["replay", &path, "--json", "--set", "timing={}"]));
    assert_eq!(r["trace"]["rows"], 2);
    let bad_text =
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,x,44\r\n";
    let path = write(dir.path(), "b.csv", bad_text);
    let line = bad(&["replay", &path]);
    assert!(line.contains("b.csv:2: ContextTokens"), "{line}");
}

/// Parses a trace into (t_ns, line) pairs.
fn trace_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn closed_loop_sessions_never_start_a_turn_before_the_previous_one_completes() {
    let dir = tempfile::tempdir().unwrap();
    // Two sessions of three turns, all stamped at time 0: the timestamps alone would start every
    // turn at once. Each turn has a 30 ms think time.
    let mut rows = Vec::new();
    for turn in 0..3u64 {
        for s in ["a", "b"] {
            let ids: Vec<u64> = (0..=turn)
                .map(|k| k + if s == "a" { 100 } else { 200 })
                .collect();
            rows.push(mooncake_row(
                0,
                &ids,
                &format!(r#", "session_id": "{s}", "delay_ms": 30"#),
            ));
        }
    }
    let path = write(dir.path(), "s.jsonl", &rows.join("\n"));
    let trace = dir.path().join("t.jsonl");
    let r = json(&ok(&[
        "replay",
        &path,
        "--json",
        "--set",
        "timing={}",
        "--trace",
        trace.to_str().unwrap(),
    ]));
    assert_eq!(r["acks"], 6);
    let lines = trace_lines(&trace);
    let mut done_at: HashMap<u64, u64> = HashMap::new();
    let mut started_at: HashMap<u64, u64> = HashMap::new();
    for l in &lines {
        let t = l["t_ns"].as_u64().unwrap();
        match (l["kind"].as_str(), l["from"].as_str(), l["to"].as_str()) {
            (Some("Request"), Some("client"), _) => {
                started_at.insert(l["request"].as_u64().unwrap(), t);
            }
            (Some("Ack"), _, Some("client")) => {
                done_at.insert(l["request"].as_u64().unwrap(), t);
            }
            _ => {}
        }
    }
    // Rows keep file order at equal timestamps: ids 0,1 are turn 0 of a,b; 2,3 turn 1; 4,5 turn 2.
    for (turn, prev) in [(2u64, 0u64), (3, 1), (4, 2), (5, 3)] {
        assert!(
            started_at[&turn] >= done_at[&prev] + 30_000_000,
            "turn {turn} started at {} before {prev} completed at {} + think time",
            started_at[&turn],
            done_at[&prev]
        );
    }
}

#[test]
fn concurrency_keeps_at_most_n_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    ok(&[
        "replay",
        CONVERSATION,
        "--json",
        "--workers",
        "2",
        "--set",
        "workload.concurrency=3",
        "--set",
        "workload.limit=200",
        "--set",
        "timing={}",
        "--trace-out",
        trace.to_str().unwrap(),
    ]);
    let mut in_flight = 0i64;
    let mut peak = 0;
    for l in trace_lines(&trace) {
        match (l["kind"].as_str(), l["from"].as_str(), l["to"].as_str()) {
            (Some("Request"), Some("client"), _) => in_flight += 1,
            (Some("Ack"), _, Some("client")) => in_flight -= 1,
            _ => {}
        }
        peak = peak.max(in_flight);
    }
    assert_eq!((peak, in_flight), (3, 0));
}

/// Found by the Dec 5 2026 audit of the workloads; each would come back unseen without a test.
#[test]
fn repeated_and_scheduled_traces_keep_time_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // 1. A speedup schedule that jumps from 0.001x to 50x: arrivals 1 ms apart in the trace
    //    came out of the old bisection (a relative width of 1e-9) in reverse order, and the
    //    run panicked ("a stream is in time order").
    let rows: Vec<String> = (0..1000u64)
        .map(|i| mooncake_row(100_000 + i, &[i], ""))
        .collect();
    let late = write(dir.path(), "late.jsonl", &rows.join("\n"));
    let r = json(&ok(&[
        "replay",
        &late,
        "--set",
        "workload.speedup_schedule={shape=\"piecewise\",points=[[0.0,0.001],[100000.0,50.0]],interpolate=\"step\"}",
        "--set",
        "timing={}",
        "--json",
    ]));
    assert_eq!(r["acks"], 1000);
    // 2. A pass of a trace whose first row is at 1,000 ms lasts its last arrival plus the mean
    //    gap, 1,030 ms (the mean gap was taken as if the first row were at 0: 1,530 ms).
    let off: Vec<String> = [(1000, 2), (1010, 3), (1020, 4)]
        .iter()
        .map(|&(t, id)| mooncake_row(t, &[1, id], ""))
        .collect();
    let off = write(dir.path(), "off.jsonl", &off.join("\n"));
    let out = dir.path().join("off.trace.jsonl");
    ok(&[
        "replay",
        &off,
        "--set",
        "workload.duration_s=3.0",
        "--set",
        "timing={}",
        "--trace",
        out.to_str().unwrap(),
    ]);
    let sent: Vec<u64> = trace_lines(&out)
        .iter()
        .filter(|l| l["from"] == "client")
        .map(|l| l["t_ns"].as_u64().unwrap())
        .collect();
    let ms: Vec<u64> = sent.iter().map(|t| t / 1_000_000).collect();
    assert_eq!(ms, [1000, 1010, 1020, 2030, 2040, 2050]);
    // 3. A trace whose rows all arrive at 0 ms has no pass length: refused at once, where the
    //    old loop counted passes of 1 ns (6e10 of them in a minute) and hung.
    let zero = write(dir.path(), "zero.jsonl", &mooncake_row(0, &[1], ""));
    let line = bad(&["replay", &zero, "--set", "workload.duration_s=60.0"]);
    assert!(
        line.contains("its one row arrives at 0 ms, so a pass has no length"),
        "{line}"
    );
}

/// An Azure trace has no block ids, so its blocks are `cluster.block_size` tokens: before
/// Dec 5 2026 it was cut into `trace_block_size` (512) blocks, documented as unused.
#[test]
fn azure_blocks_follow_the_cluster_block_size() {
    let dir = tempfile::tempdir().unwrap();
    let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1000,4\n2023-11-16 18:15:50.9951690,600,4\n";
    let path = write(dir.path(), "a.csv", text);
    let blocks = |bs: &str| {
        json(&ok(&[
            "replay",
            &path,
            "--json",
            "--set",
            "timing={}",
            "--set",
            bs,
        ]))["prompt_blocks"]
            .as_u64()
            .unwrap()
    };
    // 1000 / 16 = 62 and 600 / 16 = 37 full blocks.
    assert_eq!(blocks("cluster.block_size=16"), 62 + 37);
    assert_eq!(blocks("cluster.block_size=100"), 10 + 6);
}
