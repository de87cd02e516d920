//! Invariants of whole runs over random scenarios, written as a user would write them (TOML,
//! validated): any policy, drop rates from 0 to 100 %, jitter and reordering, bus outages,
//! worker restarts, router replicas, small KV caches, disaggregation. Whatever happens:
//! every request is acknowledged exactly once, routers never apply more KV events than were
//! published to them, and a run repeats exactly. (A KV block released twice trips the pool's
//! own assertions, and every block is back in the pool at the end: `run.rs` checks it in debug
//! builds, which is how tests run.)

use std::collections::HashMap;
use std::path::Path;

use crate::common::push_disagg_and_restart;
use dynsim::router::registry;
use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Shape {
    policy: usize,
    workers: usize,
    block: usize,
    capacity: Option<usize>,
    requests: usize,
    rate: u32,
    turns: u32,
    input: u32,
    output: u32,
    shared: u32,
    publish: bool,
    drop_rate: f64,
    jitter_ms: f64,
    reorder: bool,
    outage: Option<(f64, f64)>,
    on_gap: usize,
    replicas: usize,
    sync: bool,
    restart: Option<(usize, f64, f64)>,
    disagg: Option<(usize, usize)>,
    seed: u64,
}

fn shape() -> impl Strategy<Value = Shape> {
    let a = (
        0usize..64,
        1usize..6,
        prop_oneof![Just(4usize), Just(16)],
        prop::option::of(8usize..80),
        1usize..40,
        20u32..2000,
        1u32..4,
        1u32..120,
        1u32..24,
        prop_oneof![Just(0u32), Just(16), Just(48)],
    );
    let b = (
        any::<bool>(),
        prop_oneof![Just(0.0), Just(0.1), Just(0.5), Just(1.0), 0.0f64..=1.0],
        prop_oneof![Just(0.0), 0.0f64..5.0],
        any::<bool>(),
        prop::option::of((0.0f64..200.0, 1.0f64..300.0)),
        0usize..4,
        1usize..4,
        any::<bool>(),
        prop::option::of((0usize..8, 0.0f64..300.0, 1.0f64..200.0)),
        prop::option::of((1usize..3, 1usize..3)),
        0u64..(1 << 62), // TOML integers are 64-bit signed
    );
    (a, b).prop_map(
        |(
            (policy, workers, block, capacity, requests, rate, turns, input, output, shared),
            (
                publish,
                drop_rate,
                jitter_ms,
                reorder,
                outage,
                on_gap,
                replicas,
                sync,
                restart,
                disagg,
                seed,
            ),
        )| Shape {
            policy,
            workers,
            block,
            capacity,
            requests,
            rate,
            turns,
            input,
            output,
            shared,
            publish,
            drop_rate,
            jitter_ms,
            reorder,
            outage,
            on_gap,
            replicas,
            sync,
            restart,
            disagg,
            seed,
        },
    )
}

/// The scenario as a user would write it.
fn toml_of(s: &Shape) -> String {
    let names = registry::names();
    let policy = names[s.policy % names.len()];
    let on_gap = ["ignore", "replay", "resync", "fallback"][s.on_gap];
    let capacity = s
        .capacity
        .map_or("\"unbounded\"".to_string(), |c| c.to_string());
    let mut t = format!(
        "seed = {seed}\n\
         [workload]\nkind = \"synthetic\"\nrequests = {requests}\nrate_per_s = {rate}.0\n\
         turns = {turns}\nshared_prefix_tokens = {shared}\ngroups = 3\n\
         input = {{ dist = \"uniform\", min = 1, max = {input} }}\n\
         output = {{ dist = \"uniform\", min = 1, max = {output} }}\n\
         [cluster]\nworkers = {workers}\nblock_size = {block}\nkv_capacity_blocks = {capacity}\n\
         [router]\npolicy = \"{policy}\"\non_gap = \"{on_gap}\"\nreplicas = {replicas}\n\
         sync = \"{sync}\"\n\
         [bus]\npublish = {publish}\ndrop_rate = {drop}\njitter_ms = {jitter}\nreorder = {reorder}\n",
        seed = s.seed,
        requests = s.requests,
        rate = s.rate,
        turns = s.turns,
        shared = s.shared,
        input = s.input,
        output = s.output,
        workers = s.workers,
        block = s.block,
        replicas = s.replicas,
        sync = if s.sync { "active-load" } else { "none" },
        publish = s.publish,
        drop = s.drop_rate,
        jitter = s.jitter_ms,
        reorder = s.reorder,
    );
    if let Some((start, len)) = s.outage {
        t.push_str(&format!(
            "outages = [{{ start_ms = {start}, end_ms = {} }}]\n",
            start + len
        ));
    }
    push_disagg_and_restart(&mut t, s.workers, s.disagg, s.restart);
    t
}

/// Acks per request id, read from the run's trace.
fn acks_per_request(trace: &[u8]) -> HashMap<u64, usize> {
    let mut acks = HashMap::new();
    for line in trace.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("trace lines are JSON");
        if v["kind"] == "Ack" && v["to"] == "client" {
            *acks
                .entry(v["request"].as_u64().expect("an id"))
                .or_insert(0) += 1;
        }
    }
    acks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn every_request_is_acknowledged_once_and_runs_repeat(s in shape()) {
        let text = toml_of(&s);
        let scenario = match parse_scenario(Path::new("random.toml"), &text, &[]) {
            Ok(sc) => sc,
            // Settings a user could not combine (a policy that cannot be disaggregated, ...)
            // are refused up front: not this test's concern.
            Err(e) => {
                prop_assume!(false, "refused: {}", e);
                unreachable!()
            }
        };
        let mut trace = Vec::new();
        let a = run_scenario(&scenario, Path::new("."), Some(&mut trace)).expect("runs");
        prop_assert_eq!(a.acks, a.requests as u64, "{}", text);
        let acks = acks_per_request(&trace);
        prop_assert_eq!(acks.len(), a.requests, "{}", text);
        prop_assert!(acks.values().all(|&n| n == 1), "{}", text);
        // Workers count completions, not rejections (they counted every ack).
        let completed: u64 = a.per_worker.iter().map(|w| w.completed).sum();
        prop_assert_eq!(completed, a.acks - a.rejected, "{}", text);
        let replicas = scenario.router.replicas as u64;
        prop_assert!(
            a.events.applied <= a.events.published * replicas,
            "applied {} of {} published to {} replicas\n{}",
            a.events.applied, a.events.published, replicas, text
        );
        let b = run_scenario(&scenario, Path::new("."), None).expect("runs");
        prop_assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{}", text
        );
    }
}

/// Runs a scenario's text to the end and checks every request was acknowledged.
fn runs_to_the_end(text: &str) {
    let s = parse_scenario(Path::new("regression.toml"), text, &[]).expect("valid");
    let r = run_scenario(&s, Path::new("."), None).expect("runs");
    assert_eq!(r.acks, r.requests as u64);
}

/// [`runs_to_the_end`] on a Mooncake trace of `rows` (32-token ids, rechunked to the scenario's
/// blocks) with `seed`, the rest of the scenario (`[cluster]` on) in `rest`.
fn trace_runs_to_the_end(seed: u64, rows: &[&str], rest: &str) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, rows.join("\n")).unwrap();
    runs_to_the_end(&format!(
        "seed = {seed}\n\
         [workload]\nkind = \"trace\"\npath = {path:?}\nformat = \"mooncake\"\n\
         trace_block_size = 32\nrechunk = true\n{rest}",
        path = trace.display().to_string()
    ));
}

/// Found by the own-tail property tests (the run never ended, and its message log filled 24 GB):
/// an SGLang worker with one request decoding and one prefilling held every block, the step
/// loop's net sent the prefilling one back to the queue, and the next request waiting, sharing
/// its prefix, was admitted at once onto the blocks just freed: the two prefilling requests
/// took turns forever while the decoding one never moved. Now the step in which a request gave
/// way admits nobody (`StepScheduler::unstick`). Under SGLang's own admission, which checks
/// the budget again once the prefix is locked, that request waits and the net is not reached:
/// the case runs the crate's single check (`recheck_locked_prefix = false`), as found.
#[test]
fn a_request_that_gives_way_leaves_its_blocks_to_the_requests_still_running() {
    let rows = [
        r#"{"timestamp": 15, "input_length": 187, "output_length": 22, "hash_ids": [200, 201, 202, 1000300, 1000301, 1000302]}"#,
        r#"{"timestamp": 144, "input_length": 146, "output_length": 33, "hash_ids": [200, 201, 202, 1000800, 1000801]}"#,
        r#"{"timestamp": 150, "input_length": 90, "output_length": 33, "hash_ids": [0, 1, 1001500]}"#,
        r#"{"timestamp": 323, "input_length": 221, "output_length": 26, "hash_ids": [200, 201, 202, 1001700, 1001701, 1001702, 1001703]}"#,
        r#"{"timestamp": 324, "input_length": 149, "output_length": 6, "hash_ids": [200, 1001800, 1001801, 1001802, 1001803]}"#,
        r#"{"timestamp": 294, "input_length": 183, "output_length": 12, "hash_ids": [200, 201, 202, 1002100, 1002101, 1002102]}"#,
        r#"{"timestamp": 828, "input_length": 125, "output_length": 23, "hash_ids": [200, 201, 1002300, 1002301]}"#,
        r#"{"timestamp": 775, "input_length": 74, "output_length": 26, "hash_ids": [200, 201, 1002500]}"#,
        r#"{"timestamp": 868, "input_length": 221, "output_length": 3, "hash_ids": [200, 201, 202, 1001700, 1001701, 1001702, 1001703]}"#,
        r#"{"timestamp": 429, "input_length": 68, "output_length": 23, "hash_ids": [200, 1003300, 1003301]}"#,
        r#"{"timestamp": 456, "input_length": 189, "output_length": 25, "hash_ids": [200, 201, 202, 1003800, 1003801, 1003802]}"#,
        r#"{"timestamp": 936, "input_length": 218, "output_length": 17, "hash_ids": [200, 201, 202, 1003900, 1003901, 1003902, 1003903]}"#,
    ];
    trace_runs_to_the_end(
        285463404817,
        &rows,
        "[cluster]\nworkers = 2\nblock_size = 16\nkv_capacity_blocks = 18\n\
         [engine]\nkind = \"sglang\"\n[engine.sglang]\nchunked_prefill_size = 96\n\
         recheck_locked_prefix = false\n\
         [router]\npolicy = \"kv\"\non_gap = \"resync\"\naudit_index = true\n\
         attribute_misses = true\n\
         [bus]\npublish = true\n",
    );
}

/// Found by the property above (it never ended): two synced replicas, a bus outage that loses
/// a peer's "freed" note, and a policy that learns from events. The replica kept the peer's
/// request open forever, so its stream checks never rested.
#[test]
fn a_lost_peer_note_never_keeps_a_replica_busy_forever() {
    runs_to_the_end(
        r#"seed = 2140636551146621041
[workload]
kind = "synthetic"
requests = 37
rate_per_s = 37.0
turns = 3
shared_prefix_tokens = 48
groups = 3
input = { dist = "uniform", min = 1, max = 98 }
output = { dist = "uniform", min = 1, max = 21 }
[cluster]
workers = 5
block_size = 16
kv_capacity_blocks = 61
[router]
policy = "vllm-loadaware"
on_gap = "fallback"
replicas = 2
sync = "active-load"
[bus]
publish = true
drop_rate = 0
jitter_ms = 1.2884836302193552
reorder = false
outages = [{ start_ms = 170.0866002807687, end_ms = 286.73968495339983 }]
[disagg]
enabled = true
prefill_workers = 2
decode_workers = 2
"#,
    );
}

/// Found by the property above (it never ended): a decode worker with 8 blocks received a
/// 128-token prompt whose one output token came with the transfer. Admission asked for room
/// for a second token the request would never compute, blocked forever, and every later
/// request queued behind it.
#[test]
fn a_transferred_request_done_on_arrival_needs_no_room() {
    runs_to_the_end(
        r#"seed = 3774159503033462434
[workload]
kind = "synthetic"
requests = 16
rate_per_s = 492.0
turns = 2
shared_prefix_tokens = 0
groups = 3
input = { dist = "uniform", min = 1, max = 90 }
output = { dist = "uniform", min = 1, max = 11 }
[cluster]
workers = 4
block_size = 16
kv_capacity_blocks = 8
[router]
policy = "dynamo"
on_gap = "replay"
replicas = 1
sync = "none"
[bus]
publish = true
drop_rate = 0
jitter_ms = 0
reorder = true
[disagg]
enabled = true
prefill_workers = 1
decode_workers = 1
"#,
    );
}

/// Found by the own-tail property tests with the engine varied (it never ended): a SGLang
/// decode worker of 16 blocks ran a transferred request decoding (6 blocks, wanting a 7th) and
/// one whose transferred KV a retraction had dropped, prefilling again (10 blocks). Every block
/// was theirs, SGLang's retraction frees only decoding requests and keeps the last one, so the
/// worker planned no step again; the newest running request now gives way.
#[test]
fn a_sglang_worker_whose_running_requests_hold_every_block_gives_way() {
    let rows = [
        r#"{"timestamp": 21, "input_length": 146, "output_length": 13, "hash_ids": [200, 201, 202, 1000100, 1000101]}"#,
        r#"{"timestamp": 58, "input_length": 157, "output_length": 31, "hash_ids": [200, 201, 202, 1000100, 1000101]}"#,
        r#"{"timestamp": 85, "input_length": 25, "output_length": 7, "hash_ids": [200]}"#,
        r#"{"timestamp": 132, "input_length": 126, "output_length": 23, "hash_ids": [0, 1, 1000600, 1000601]}"#,
        r#"{"timestamp": 252, "input_length": 140, "output_length": 36, "hash_ids": [200, 201, 202, 1000100, 1000101]}"#,
        r#"{"timestamp": 136, "input_length": 106, "output_length": 18, "hash_ids": [200, 201, 1000800, 1000801]}"#,
        r#"{"timestamp": 0, "input_length": 37, "output_length": 35, "hash_ids": [0, 1000900]}"#,
        r#"{"timestamp": 90, "input_length": 201, "output_length": 9, "hash_ids": [0, 1, 2, 1001000, 1001001, 1001002, 1001003]}"#,
        r#"{"timestamp": 121, "input_length": 181, "output_length": 18, "hash_ids": [0, 1001100, 1001101, 1001102, 1001103, 1001104]}"#,
        r#"{"timestamp": 348, "input_length": 11, "output_length": 29, "hash_ids": [200]}"#,
        r#"{"timestamp": 26, "input_length": 28, "output_length": 19, "hash_ids": [100]}"#,
        r#"{"timestamp": 350, "input_length": 162, "output_length": 15, "hash_ids": [100, 101, 1001400, 1001401, 1001402, 1001403]}"#,
        r#"{"timestamp": 300, "input_length": 153, "output_length": 27, "hash_ids": [100, 101, 1001500, 1001501, 1001502]}"#,
        r#"{"timestamp": 432, "input_length": 211, "output_length": 19, "hash_ids": [200, 201, 202, 1001600, 1001601, 1001602, 1001603]}"#,
        r#"{"timestamp": 510, "input_length": 89, "output_length": 25, "hash_ids": [200, 201, 202]}"#,
    ];
    trace_runs_to_the_end(
        200987384761,
        &rows,
        "[cluster]\nworkers = 1\nblock_size = 16\nkv_capacity_blocks = 16\n\
         [engine]\nkind = \"sglang\"\n[engine.sglang]\nchunked_prefill_size = 96\n\
         [router]\npolicy = \"llm-d\"\non_gap = \"resync\"\nreplicas = 2\n\
         [bus]\npublish = true\n\
         [disagg]\nenabled = true\nprefill_workers = 1\ndecode_workers = 2\n",
    );
}
