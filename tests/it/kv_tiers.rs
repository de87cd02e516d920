//! Host and disk KV tiers (`[kv.host]`, `[kv.disk]`) end to end: what they add to the report,
//! that tier credit steers the `dynamo` router, and the one-line refusals.

use std::path::Path;

use dynsim::report::Report;
use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;

use crate::common::{bad, ok, write};

/// 600 requests in 40 groups sharing 512-token prefixes on 4 workers of 96 blocks: the device
/// cannot keep the groups' prefixes, a host tier of 4x that can.
const SMALL_DEVICE: &str = r#"
seed = 5
[workload]
kind = "synthetic"
requests = 600
groups = 40
shared_prefix_tokens = 512
rate_per_s = 40.0
input = { dist = "uniform", min = 600, max = 900 }
output = { dist = "uniform", min = 5, max = 20 }
[cluster]
workers = 4
block_size = 16
kv_capacity_blocks = 96
[router]
policy = "dynamo"
"#;

fn run(extra: &str, set: &[&str]) -> Report {
    let set: Vec<_> = set.iter().map(|s| s.parse().unwrap()).collect();
    let text = format!("{SMALL_DEVICE}{extra}");
    let s = parse_scenario(Path::new("tiers.toml"), &text, &set).expect("valid");
    run_scenario(&s, Path::new("."), None).expect("runs")
}

const HOST: &str = "[kv.host]\ncapacity_blocks = 384\nd2h_gbps = 25.0\nh2d_gbps = 25.0\n";

#[test]
fn a_host_tier_turns_recomputation_into_loads_and_tier_credit_changes_decisions() {
    let none = run("", &[]);
    assert!(none.reuse_by_tier.is_none() && none.kv_onload_bytes.is_none());
    let blind = run(HOST, &["router.dynamo.host_cache_hit_weight=0.0"]);
    let credit = run(HOST, &[]);
    for r in [&blind, &credit] {
        let t = r.reuse_by_tier.expect("tiers configured");
        let sum = t.device.unwrap() + t.host + t.disk;
        assert!(
            (sum - r.prefix_reuse).abs() < 2e-4,
            "{t:?} vs {}",
            r.prefix_reuse
        );
        assert!(t.host > 0.0, "{t:?}");
        assert_eq!(t.disk, 0.0);
        let (off, on) = (r.kv_offload_bytes.unwrap(), r.kv_onload_bytes.unwrap());
        // Every block is 16 tokens of Qwen3-0.6B (the default disagg.model): 1,835,008 bytes.
        assert_eq!(off.host % 1_835_008, 0);
        assert!(on.host > 0 && on.host % 1_835_008 == 0);
        assert!(r.prefix_reuse > none.prefix_reuse);
    }
    // Tier credit changes decisions (the hand-computed decision is a unit test of the policy).
    assert_ne!(blind.per_worker, credit.per_worker);
}

#[test]
fn every_engine_loads_its_prefixes_back_from_the_host_tier() {
    // The tiers belong to the shared pool: vLLM, TensorRT-LLM and SGLang all load from them.
    for engine in ["vllm", "trtllm", "sglang"] {
        let set = format!("engine.kind={engine}");
        let none = run("", &[&set]);
        let r = run(HOST, &[&set]);
        let t = r.reuse_by_tier.expect("tiers configured");
        assert!(t.host > 0.0, "{engine}: {t:?}");
        assert!(r.kv_onload_bytes.unwrap().host > 0, "{engine}");
        assert!(r.prefix_reuse > none.prefix_reuse, "{engine}");
    }
}

#[test]
fn disk_takes_what_host_drops() {
    let r = run(
        &format!("{HOST}[kv.disk]\ncapacity_blocks = 2000\n")
            .replace("capacity_blocks = 384", "capacity_blocks = 64"),
        &[],
    );
    let off = r.kv_offload_bytes.unwrap();
    assert!(off.disk > 0, "{off:?}");
    assert!(r.reuse_by_tier.unwrap().disk > 0.0);
}

#[test]
fn a_write_through_host_the_size_of_the_device_mostly_repeats_it() {
    // Host as large as the device (96 blocks). Written back, it holds what the device evicted:
    // more cache. Written through, it holds what the device stored last, mostly what the
    // device still holds: little more to load back (aisimulate-core's vLLM adapter writes
    // through; the compare/dynamo table in docs/FIDELITY.md).
    let host = HOST.replace("capacity_blocks = 384", "capacity_blocks = 96");
    let back = run(&host, &[]);
    let through = run(&format!("{host}write_policy = \"write_through\"\n"), &[]);
    let (b, t) = (back.reuse_by_tier.unwrap(), through.reuse_by_tier.unwrap());
    assert!(t.host < b.host / 2.0, "{t:?} vs {b:?}");
    assert!(through.prefix_reuse < back.prefix_reuse);
}

#[test]
fn a_host_sized_by_ratio_is_the_device_times_it_plus_one_block() {
    // 96 device blocks of 16 tokens x 4.0 = 6,144 tokens: 384 blocks, plus one (SGLang's
    // `HostKVCache`): the same run as 385 blocks given outright, and not as 384.
    let tail = "d2h_gbps = 25.0\nh2d_gbps = 25.0\n";
    let by_ratio = run(&format!("[kv.host]\ncapacity_ratio = 4.0\n{tail}"), &[]);
    let given = run(&format!("[kv.host]\ncapacity_blocks = 385\n{tail}"), &[]);
    assert_eq!(by_ratio, given);
    assert_ne!(by_ratio, run(HOST, &[]));
}

#[test]
fn a_selectively_written_host_is_written_and_read() {
    // Every prompt here is hit twice on its own (its prefill, then its finish after 5 to 20
    // tokens), so host takes blocks and later turns load them.
    let r = run(
        &format!("{HOST}write_policy = \"write_through_selective\"\n"),
        &[],
    );
    assert!(r.kv_offload_bytes.unwrap().host > 0);
    assert!(r.reuse_by_tier.unwrap().host > 0.0);
}

#[test]
fn tier_events_reach_a_trace_with_their_tier() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "t.toml", &format!("{SMALL_DEVICE}{HOST}"));
    let trace = dir.path().join("t.jsonl");
    ok(&["run", &path, "--trace", trace.to_str().unwrap()]);
    let text = std::fs::read_to_string(trace).unwrap();
    assert!(
        text.contains(r#""tier":"host""#),
        "a host event in the trace"
    );
}

#[test]
fn bad_tier_settings_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, says) in [
        ("[kv.host]\ncapacity_gb = 10.0\n", "kv.host.capacity_gb"),
        (
            "[kv.host]\ncapacity_blocks = 10\n[kv.disk]\ncapacity_blocks = 10\nscope = \"cluster\"\n",
            "kv.disk.scope",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\nscope = \"cluster\"\n[kv.disk]\ncapacity_blocks = 10\n",
            "kv.host.scope",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\nscope = \"cluster\"\n[disagg]\nenabled = true\n",
            "kv.host.scope",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\nscope = \"rack\"\n",
            "kv.host.scope",
        ),
        (
            "[kv.host]\nscope = \"cluster\"\n",
            "kv.host.capacity_blocks",
        ),
        ("[kv.disk]\ncapacity_blocks = 10\n", "needs [kv.host]"),
        (
            "[kv.host]\ncapacity_blocks = 10\n[kv.disk]\ncapacity_blocks = 10\nwrite_policy = \"sideways\"\n",
            "kv.disk.write_policy",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\ncapacity_gb = 1.0\n",
            "give one",
        ),
        ("[kv.host]\nd2h_gbps = 5.0\n", "kv.host.capacity_blocks"),
        (
            "[kv.host]\ncapacity_blocks = 10\nh2d_gbps = -1.0\n",
            "kv.host.h2d_gbps",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\n[kv.disk]\ncapacity_blocks = 10\nmin_load_tokens = 10\n",
            "kv.disk.min_load_tokens",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\nmin_load_tokens = 4294967297\n",
            "kv.host.min_load_tokens",
        ),
        ("[kv.host]\ncapacity_ratio = 0.5\n", "kv.host.capacity_ratio"),
        (
            "[kv.host]\ncapacity_blocks = 10\n[kv.disk]\ncapacity_blocks = 10\nwrite_policy = \"write_through_selective\"\n",
            "kv.disk.write_policy",
        ),
        (
            "[kv.host]\ncapacity_ratio = 2.0\ncapacity_blocks = 10\n",
            "kv.host.capacity_ratio",
        ),
        (
            "[kv.host]\ncapacity_ratio = 2.0\nscope = \"cluster\"\n",
            "kv.host.capacity_ratio",
        ),
        (
            "[kv.host]\ncapacity_blocks = 10\n[kv.disk]\ncapacity_ratio = 2.0\n",
            "kv.disk.capacity_ratio",
        ),
        // A host of 0 blocks drops nothing, so a disk below it would never be used.
        (
            "[kv.host]\ncapacity_blocks = 0\n[kv.disk]\ncapacity_blocks = 100\n",
            "kv.disk.capacity_blocks = 100 needs kv.host.capacity_blocks > 0",
        ),
        (
            "[kv.host]\ncapacity_blocks = 0\n[kv.disk]\ncapacity_blocks = 100\nwrite_policy = \"write_through\"\n",
            "kv.disk.capacity_blocks = 100 needs kv.host.capacity_blocks > 0",
        ),
    ] {
        let path = write(dir.path(), "bad.toml", &format!("{SMALL_DEVICE}{extra}"));
        let line = bad(&["run", &path]);
        assert!(line.contains(says), "{extra:?}: {line}");
        // file:line: field
        let at = line.split("bad.toml:").nth(1).unwrap_or("");
        let digits = at.chars().take_while(char::is_ascii_digit).count();
        assert!(digits > 0 && at[digits..].starts_with(": kv."), "{line}");
        assert!(!line.contains("not modelled yet"), "{line}");
    }
}

/// The report's `reuse_by_tier.host` and `kv_onload_bytes.host` from a `--json` run.
fn host_reuse(json: &str) -> (f64, u64) {
    let r: serde_json::Value = serde_json::from_str(json).expect("a JSON report");
    (
        r["reuse_by_tier"]["host"].as_f64().expect("reuse by tier"),
        r["kv_onload_bytes"]["host"].as_u64().expect("bytes loaded"),
    )
}

#[test]
fn a_cluster_shared_host_serves_every_worker_where_each_workers_own_does_not() {
    // Round-robin spreads each group's requests over the 4 workers. The same host memory,
    // 4 x 96 blocks or one pool of 384: a worker's own host holds only what its device evicted,
    // the shared pool what every device evicted, so one worker's eviction is another's load.
    let dir = tempfile::tempdir().unwrap();
    let rr = SMALL_DEVICE.replace("policy = \"dynamo\"", "policy = \"rr\"");
    let own = write(
        dir.path(),
        "own.toml",
        &format!("{rr}[kv.host]\ncapacity_blocks = 96\nscope = \"worker\"\n"),
    );
    let shared = write(
        dir.path(),
        "shared.toml",
        &format!("{rr}[kv.host]\ncapacity_blocks = 384\nscope = \"cluster\"\n"),
    );
    let trace = dir.path().join("t.jsonl");
    let (own_host, own_bytes) = host_reuse(&ok(&["run", &own, "--json"]));
    let (host, bytes) = host_reuse(&ok(&[
        "run",
        &shared,
        "--json",
        "--trace",
        trace.to_str().unwrap(),
    ]));
    // Measured Dec 4 2026: host reuse 0.0772 against 0.0327, 6.70 GB loaded against 2.84 GB.
    assert!(host > 0.0 && host > 1.5 * own_host, "{host} vs {own_host}");
    assert!(
        bytes as f64 > 1.5 * own_bytes as f64,
        "{bytes} vs {own_bytes}"
    );
    // Every worker reports the pool: the blocks worker 0 first offloads reach the bus on
    // every worker's stream, as the crate's shared pool publishes to every rank.
    let text = std::fs::read_to_string(trace).unwrap();
    let first: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["kind"] == "KvTierStored" && v["to"] == "bus")
        .expect("a host store");
    let blocks = &first["blocks"];
    let reporters: std::collections::BTreeSet<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "KvTierStored" && v["to"] == "bus")
        .filter(|v| &v["blocks"] == blocks)
        .map(|v| v["from"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reporters.len(), 4, "{reporters:?}");
}

#[test]
fn a_cluster_shared_host_keeps_its_blocks_through_a_restart_and_the_stream_stays_whole() {
    // Worker 1 restarts: its device is lost, the cluster's pool is not; when it is back it
    // reports every block the pool holds, and no router sees a gap.
    let text = format!(
        "{SMALL_DEVICE}[kv.host]\ncapacity_blocks = 384\nscope = \"cluster\"\n\
         [[faults]]\nkind = \"restart\"\nworker = 1\nat_ms = 3000.0\ndown_ms = 500.0\n"
    );
    let s = parse_scenario(Path::new("t.toml"), &text, &[]).expect("valid");
    let r = run_scenario(&s, Path::new("."), None).expect("runs");
    assert!(r.reuse_by_tier.unwrap().host > 0.0);
    assert_eq!(r.events.gaps_detected, 0);
    assert_eq!(r.events.applied, r.events.published);
    let again = run_scenario(&s, Path::new("."), None).expect("runs");
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
    // Back up at 3.5 s, worker 1 reports the pool at once, before any step of its own: its first
    // host store on the bus from then on is at that instant and names blocks (the whole pool,
    // 384, in the run measured Dec 4 2026). Without the report it would come with a later step.
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "restart.toml", &text);
    let trace = dir.path().join("t.jsonl");
    ok(&["run", &path, "--json", "--trace", trace.to_str().unwrap()]);
    let up_ns = 3_500_000_000u64;
    let first = std::fs::read_to_string(trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| {
            v["kind"] == "KvTierStored"
                && v["from"] == "worker1"
                && v["to"] == "bus"
                && v["t_ns"].as_u64().unwrap() >= up_ns
        })
        .expect("worker 1 stores on host after its restart");
    assert_eq!(first["t_ns"].as_u64(), Some(up_ns));
    assert!(!first["blocks"].as_array().unwrap().is_empty());
}

/// Runs `args` (a `run ... --json`) and returns its report as JSON.
fn json_run(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).expect("a JSON report")
}

/// A router that resyncs after a gap learns each worker's host blocks again from the snapshot,
/// as a replay (or a lossless stream) tells it: a snapshot used to carry the device's blocks
/// only, and resync forgot every block on the workers' host tiers. Worker 0 holds prefix A
/// (1-5) on host when the last request, A again, arrives after an outage: replay and resync
/// both send it to worker 0, which loads 4 of A's blocks back (host reuse 0.2: 64 of the 320
/// prompt tokens). Resync used to send it to worker 1, host reuse 0.
#[test]
fn a_resync_restores_what_the_workers_hold_on_their_lower_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        r#"{"timestamp":0,"input_length":80,"output_length":1,"hash_ids":[1,2,3,4,5]}"#,
        r#"{"timestamp":10,"input_length":96,"output_length":1,"hash_ids":[21,22,23,24,25,26]}"#,
        r#"{"timestamp":20,"input_length":32,"output_length":1,"hash_ids":[21,31]}"#,
        r#"{"timestamp":30,"input_length":32,"output_length":1,"hash_ids":[21,41]}"#,
        r#"{"timestamp":40,"input_length":80,"output_length":1,"hash_ids":[1,2,3,4,55]}"#,
    ];
    write(dir.path(), "tr.jsonl", &rows.join("\n"));
    let path = write(
        dir.path(),
        "s.toml",
        "[workload]\nkind = \"trace\"\npath = \"tr.jsonl\"\ntrace_block_size = 16\n\
         [cluster]\nworkers = 2\nblock_size = 16\nkv_capacity_blocks = 6\n\
         [kv.host]\ncapacity_blocks = 100\n[router]\npolicy = \"dynamo\"\n\
         [bus]\noutages = [{ start_ms = 15.0, end_ms = 25.0 }]\n\
         [timing]\nmodel = \"fixed\"\nservice_ms = 1.0\n",
    );
    let run = |on_gap: &str| {
        let set = format!("router.on_gap={on_gap}");
        json_run(&["run", &path, "--seed", "7", "--set", &set, "--json"])
    };
    let (replay, resync) = (run("replay"), run("resync"));
    assert!(
        resync["events"]["resyncs"].as_u64().unwrap() > 0,
        "{resync}"
    );
    // Snapshots are charged for their host blocks too: more than 24 bytes of framing and 8 for
    // each of the device's 6 blocks at most (72 bytes, all a snapshot used to cost here).
    assert!(
        resync["events"]["resync_bytes"].as_u64().unwrap() > 24 + 8 * 6,
        "{}",
        resync["events"]
    );
    for k in ["reuse_by_tier", "loaded_blocks", "cached_blocks"] {
        assert_eq!(replay[k], resync[k], "{k}");
    }
    assert_eq!(resync["reuse_by_tier"]["host"].as_f64(), Some(0.2));
    let routed = |r: &serde_json::Value| -> Vec<u64> {
        r["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["routed"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(routed(&replay), routed(&resync));
}

/// A prompt block loaded back from host or disk is reused, not missed: prompt blocks = blocks
/// held on the device + blocks loaded back + missed blocks, whatever the tiers, their write
/// policies, the engine or disaggregation. (The misses used to count the loaded blocks too.)
#[test]
fn prompt_blocks_are_the_cached_the_loaded_and_the_missed() {
    let disk = "[kv.disk]\ncapacity_blocks = 2000\n";
    let small_host = HOST.replace("capacity_blocks = 384", "capacity_blocks = 64");
    let cases: Vec<(String, Vec<&str>)> = vec![
        (HOST.to_string(), vec![]),
        (format!("{small_host}{disk}"), vec![]),
        (
            format!("{small_host}{disk}write_policy = \"write_through\"\n"),
            vec![],
        ),
        (format!("{HOST}write_policy = \"write_through\"\n"), vec![]),
        (
            format!("{HOST}write_policy = \"write_through_selective\"\n"),
            vec![],
        ),
        (
            HOST.replace("h2d_gbps", "scope = \"cluster\"\nh2d_gbps"),
            vec![],
        ),
        (HOST.to_string(), vec!["engine.kind=sglang"]),
        (HOST.to_string(), vec!["engine.kind=trtllm"]),
        (
            format!("{HOST}[disagg]\nenabled = true\nprefill_workers = 2\ndecode_workers = 2\n"),
            vec![],
        ),
        (
            HOST.to_string(),
            vec!["bus.drop_rate=0.3", "router.on_gap=ignore"],
        ),
    ];
    for (extra, set) in cases {
        let r = run(&extra, &set);
        let m = r.misses.expect("attributed");
        let loaded = r.loaded_blocks.expect("tiers configured");
        assert!(loaded > 0, "{extra} {set:?}: nothing loaded");
        assert_eq!(
            r.prompt_blocks,
            r.cached_blocks + loaded + m.total(),
            "{extra} {set:?}: {m:?}"
        );
    }
    // Without tiers, no field, and the identity is the device's alone.
    let r = run("", &[]);
    assert_eq!(r.loaded_blocks, None);
    assert_eq!(r.prompt_blocks, r.cached_blocks + r.misses.unwrap().total());
}

/// The auditor's case: one worker, 2 prefixes x 2 reps of 64 + 16 tokens on 6 device blocks:
/// of the 20 prompt blocks, 2 are held on the device and 6 loaded back from host, so 12 are
/// missed (cold, the first time each prefix is seen), not 18.
#[test]
fn misses_leave_out_the_blocks_loaded_back_from_host() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "m.toml",
        "[workload]\nkind = \"prefix-repeat\"\nprefixes = 2\nreps = 2\nprefix_len = 64\n\
         tail_len = 16\n[cluster]\nworkers = 1\nblock_size = 16\nkv_capacity_blocks = 6\n\
         [kv.host]\ncapacity_blocks = 100\nd2h_gbps = 1.0\nh2d_gbps = 1.0\n\
         [router]\npolicy = \"kv\"\n[timing]\nmodel = \"fixed\"\nservice_ms = 1.0\n",
    );
    let r = json_run(&["run", &path, "--json"]);
    assert_eq!(r["prompt_blocks"], 20);
    assert_eq!(r["cached_blocks"], 2);
    assert_eq!(r["loaded_blocks"], 6);
    let m = &r["misses"];
    assert_eq!(
        (&m["cold"], &m["routing"], &m["stale_index"], &m["capacity"]),
        (&12.into(), &0.into(), &0.into(), &0.into()),
        "{m}"
    );
}

/// Every request rejected (each prompt needs more blocks than a worker has): the workers
/// published nothing, so the router had nothing to learn and the bus lost nothing. It used to
/// warn that "the bus lost every event (0 published, 0 dropped)".
#[test]
fn a_run_whose_requests_are_all_rejected_blames_no_bus() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "rejected.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 20\nrate_per_s = 10.0\n\
         input = { dist = \"uniform\", min = 200, max = 300 }\n\
         output = { dist = \"uniform\", min = 1, max = 5 }\n\
         [cluster]\nworkers = 2\nblock_size = 16\nkv_capacity_blocks = 4\n\
         [router]\npolicy = \"dynamo\"\n[bus]\npublish = true\n",
    );
    let r = json_run(&["run", &path, "--json"]);
    assert_eq!(r["rejected"], 20, "every request rejected");
    assert_eq!(r["events"]["published"], 0);
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings.iter().all(|w| !w.contains("applied no KV event")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("rejected")),
        "the rejections still warn: {warnings:?}"
    );
}
