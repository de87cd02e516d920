//! A request's own tail (its blocks no other request of a trace names) is kept out of the
//! workers' name tables and the routers' indexes unless a request may be routed twice (faults,
//! workers removed by scaling). Neither instrument needs them: with own tails listed and
//! indexed ([`RunHooks::list_own_tails`]) and not, every run is the same, its misses and index
//! quality included; and loss attribution only observes: with it on and off, every run is the
//! same but for the report's `misses`. Whatever the policy, the engine (vLLM, SGLang,
//! TensorRT-LLM), the KV pressure (preemptions), disaggregation, restarts, a decode worker
//! removed (its requests handed back), router replicas and lost events recovered by snapshots.

use std::fmt::Write as _;
use std::path::Path;

use crate::common::push_disagg_and_restart;
use dynsim::router::registry;
use dynsim::run::{run_scenario_with, RunHooks};
use dynsim::scenario::load::parse_scenario;
use proptest::prelude::*;

/// A Mooncake trace of `rows` requests: each starts with ids of one of 3 families (shared), then
/// ids of its own, some rows repeating an earlier row's ids (a shared whole prompt).
fn trace_text(rows: usize, seed: u64) -> String {
    let mut text = String::new();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut earlier: Vec<Vec<u64>> = Vec::new();
    for r in 0..rows {
        let ids: Vec<u64> = if r > 0 && next() % 5 == 0 {
            earlier[(next() as usize) % earlier.len()].clone()
        } else {
            let family = next() % 3;
            let shared = 1 + next() % 3;
            let own = next() % 6;
            (0..shared)
                .map(|i| family * 100 + i)
                .chain((0..own).map(|i| 1_000_000 + r as u64 * 100 + i))
                .collect()
        };
        let output = 1 + next() % 40;
        let partial = next() % 32;
        let input = (ids.len() as u64 * 32).saturating_sub(partial).max(1);
        writeln!(
            text,
            r#"{{"timestamp": {}, "input_length": {input}, "output_length": {output}, "hash_ids": {ids:?}}}"#,
            r as u64 * (next() % 40)
        )
        .unwrap();
        earlier.push(ids);
    }
    text
}

#[derive(Debug, Clone)]
struct Shape {
    seed: u64,
    rows: usize,
    policy: usize,
    workers: usize,
    capacity: usize,
    rechunk: bool,
    whole_prompt: bool,
    disagg: bool,
    restart: Option<(usize, f64)>,
    drop_rate: f64,
    replicas: usize,
    sync: bool,
    audit: bool,
    /// A decode worker removed (its requests handed back) at this time, s, when disaggregated.
    remove_at: Option<f64>,
    /// The engine: 0 vLLM, 1 SGLang, 2 TensorRT-LLM.
    engine: u8,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (0u64..1 << 40, 5usize..60, 0usize..64, 1usize..4, 6usize..60),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop::option::of((0usize..4, 0.0f64..300.0)),
            prop_oneof![Just(0.0), Just(0.3)],
            1usize..3,
            any::<bool>(),
            any::<bool>(),
        ),
        prop::option::of(0.0f64..0.5),
        0u8..3,
    )
        .prop_map(
            |(
                (seed, rows, policy, workers, capacity),
                (rechunk, whole_prompt, disagg, restart, drop_rate, replicas, sync, audit),
                remove_at,
                engine,
            )| Shape {
                seed,
                rows,
                policy,
                workers,
                capacity,
                rechunk,
                whole_prompt,
                disagg,
                restart,
                drop_rate,
                replicas,
                sync,
                audit,
                remove_at,
                engine,
            },
        )
}

fn scenario_text(s: &Shape, trace: &Path) -> String {
    let names = registry::names();
    let policy = names[s.policy % names.len()];
    let (block, trace_block) = if s.rechunk { (16, 32) } else { (32, 32) };
    let admission = if s.whole_prompt {
        "whole-prompt"
    } else {
        "chunk"
    };
    let mut t = format!(
        "seed = {seed}\n\
         [workload]\nkind = \"trace\"\npath = {path:?}\nformat = \"mooncake\"\n\
         trace_block_size = {trace_block}\nrechunk = {rechunk}\n\
         [cluster]\nworkers = {workers}\nblock_size = {block}\nkv_capacity_blocks = {cap}\n\
         {engine}\
         [router]\npolicy = \"{policy}\"\non_gap = \"resync\"\nreplicas = {replicas}\n\
         sync = \"{sync}\"\naudit_index = {audit}\n\
         [bus]\npublish = true\ndrop_rate = {drop}\n",
        seed = s.seed,
        path = trace.display().to_string(),
        rechunk = s.rechunk,
        workers = s.workers,
        cap = s.capacity,
        drop = s.drop_rate,
        replicas = s.replicas,
        sync = if s.sync { "active-load" } else { "none" },
        audit = s.audit,
        engine = match s.engine {
            0 =>
                format!("[engine.vllm]\nadmission = \"{admission}\"\nmax_num_batched_tokens = 96\n"),
            1 => "[engine]\nkind = \"sglang\"\n[engine.sglang]\nchunked_prefill_size = 96\n"
                .to_string(),
            _ => "[engine]\nkind = \"trtllm\"\n[engine.trtllm]\nmax_num_tokens = 96\n".to_string(),
        },
    );
    // A removal needs a decode worker left to serve: 1 prefill and 2 decode workers, then 1
    // (and no restart, which a scenario may not combine with scaling).
    let removal = s.remove_at.filter(|_| s.disagg && s.restart.is_none());
    push_disagg_and_restart(
        &mut t,
        s.workers,
        s.disagg
            .then_some((1, if removal.is_some() { 2 } else { 1 })),
        s.restart.map(|(w, at)| (w, at, 50.0)),
    );
    if let Some(at) = removal {
        write!(
            t,
            "[[scale]]\nat_s = {at}\npool = \"decode\"\nworkers = 1\nleave = \"remove\"\n"
        )
        .unwrap();
    }
    t
}

/// The message log's lines with every `misses` field emptied.
fn without_misses(log: &[u8]) -> Vec<serde_json::Value> {
    log.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_slice(l).expect("JSON lines");
            if let Some(m) = v.get_mut("misses") {
                *m = serde_json::Value::Null;
            }
            v
        })
        .collect()
}

/// Runs `s` with misses attributed and not, and checks both runs are the same but for the
/// misses. With `list_when_attributed` the attributed run keeps every own tail listed and
/// indexed ([`RunHooks::list_own_tails`]), and the other leaves them out where no request is
/// routed twice.
fn attribution_changes_only_the_misses(
    s: &Shape,
    list_when_attributed: bool,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, trace_text(s.rows, s.seed)).unwrap();
    let text = scenario_text(s, &trace);
    let scenario = parse_scenario(Path::new("own.toml"), &text, &[]).expect("a valid scenario");
    let run = |attribute: bool| {
        let mut sc = scenario.clone();
        sc.router.attribute_misses = attribute;
        let mut log = Vec::new();
        let hooks = RunHooks {
            trace: Some(&mut log),
            list_own_tails: attribute && list_when_attributed,
            ..RunHooks::default()
        };
        let r = run_scenario_with(&sc, Path::new("."), hooks).expect("runs");
        let mut v = serde_json::to_value(&r).unwrap();
        v["misses"] = serde_json::Value::Null;
        (v, log)
    };
    let ((a, log_a), (b, log_b)) = (run(true), run(false));
    prop_assert_eq!(a, b);
    prop_assert_eq!(without_misses(&log_a), without_misses(&log_b));
    Ok(())
}

/// Runs `s` with misses attributed, own tails listed and indexed everywhere and not, and
/// checks both runs are the same, misses, index quality and message log included.
fn listing_own_tails_changes_nothing(s: &Shape) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, trace_text(s.rows, s.seed)).unwrap();
    let text = scenario_text(s, &trace);
    let mut scenario = parse_scenario(Path::new("own.toml"), &text, &[]).expect("a valid scenario");
    scenario.router.attribute_misses = true;
    let run = |list_own_tails: bool| {
        let mut log = Vec::new();
        let hooks = RunHooks {
            trace: Some(&mut log),
            list_own_tails,
            ..RunHooks::default()
        };
        let r = run_scenario_with(&scenario, Path::new("."), hooks).expect("runs");
        (serde_json::to_value(&r).unwrap(), log)
    };
    let ((a, log_a), (b, log_b)) = (run(true), run(false));
    prop_assert!(a["misses"].is_object());
    prop_assert_eq!(a, b);
    prop_assert!(log_a == log_b, "the message logs differ");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Attribution and the audit see the same with own tails unlisted and unindexed (no
    /// restart and no worker removed: either lists them anyway).
    #[test]
    fn own_tails_out_of_tables_and_indexes_change_no_instrument(s in shape()) {
        let s = Shape { restart: None, remove_at: None, ..s };
        listing_own_tails_changes_nothing(&s)?;
    }

    /// A decode worker removed mid-run hands its requests back: routed again, a request may
    /// find its own tail on the prefill worker it left, so the run reads own tails (were they
    /// left out of the index, its second decision would differ).
    #[test]
    fn a_removed_workers_handed_back_requests_read_their_own_tails(
        s in shape(),
        at in 0.0f64..0.5,
        policy in prop::sample::select(vec!["dynamo", "cost", "llm-d"]),
    ) {
        let names = registry::names();
        let s = Shape {
            policy: names.iter().position(|&n| n == policy).expect("registered"),
            disagg: true,
            restart: None,
            remove_at: Some(at),
            ..s
        };
        listing_own_tails_changes_nothing(&s)?;
    }

    #[test]
    fn own_tails_out_of_the_name_table_change_nothing_but_the_misses(s in shape()) {
        attribution_changes_only_the_misses(&s, false)?;
    }

    /// Every own tail listed and indexed in the attributed run against none in the other (no
    /// restart, no worker removed: no request routed twice): out of the routers' index, and
    /// counted without names in `dynamo`'s active blocks.
    #[test]
    fn own_tails_left_unread_by_routers_change_nothing_but_the_misses(
        s in shape(),
        dynamo in any::<bool>(),
    ) {
        let names = registry::names();
        let policy = if dynamo { "dynamo" } else { "cost" };
        let s = Shape {
            policy: names.iter().position(|&n| n == policy).expect("registered"),
            restart: None,
            remove_at: None,
            ..s
        };
        attribution_changes_only_the_misses(&s, true)?;
    }
}

#[test]
fn a_trace_row_names_its_own_tail_from_its_first_unshared_id() {
    use dynsim::workload::trace::TraceOptions;
    let text = [
        r#"{"timestamp": 0, "input_length": 96, "output_length": 1, "hash_ids": [1, 2, 7]}"#,
        r#"{"timestamp": 1, "input_length": 70, "output_length": 1, "hash_ids": [1, 2, 8]}"#,
        r#"{"timestamp": 2, "input_length": 64, "output_length": 1, "hash_ids": [1, 9]}"#,
        r#"{"timestamp": 3, "input_length": 64, "output_length": 1, "hash_ids": [1, 9]}"#,
        r#"{"timestamp": 4, "input_length": 64, "output_length": 1, "hash_ids": [5, 5]}"#,
    ]
    .join("\n");
    let opts = |block_size| TraceOptions {
        block_size,
        trace_block_size: 32,
        ..TraceOptions::default()
    };
    let unshared = |block_size| {
        let t = dynsim::workload::mooncake::read_mooncake(
            Path::new("t.jsonl"),
            text.as_bytes(),
            &opts(block_size),
        )
        .unwrap();
        let from: Vec<usize> = (0..t.len()).map(|i| t.spec(i).unshared_from).collect();
        // What the memory estimate counts for an index without own tails: every row's blocks
        // before its own tail.
        assert_eq!(t.listed_blocks(), from.iter().sum::<usize>() as u64);
        from
    };
    // One block per id: ids 7 and 8 are each named by one row only; 9 by two; 5 by one row
    // (twice in it).
    assert_eq!(unshared(32), vec![2, 2, 2, 2, 0]);
    // Played again and again (each pass names its blocks apart), the bound still holds: every
    // block some request names before its own tail, over all passes, is counted.
    let t =
        dynsim::workload::mooncake::read_mooncake(Path::new("t.jsonl"), text.as_bytes(), &opts(32))
            .unwrap()
            .replayed(None, Some(0.012))
            .unwrap();
    assert!(t.len() > 10, "{} requests: several passes", t.len());
    let listed: std::collections::HashSet<_> = (0..t.len())
        .flat_map(|i| {
            let r = t.spec(i);
            r.blocks[..r.unshared_from].to_vec()
        })
        .collect();
    assert!(
        listed.len() as u64 <= t.listed_blocks(),
        "{} > {}",
        listed.len(),
        t.listed_blocks()
    );
    // Rows at 0-4 ms, a pass every 5 ms, 12 ms played: two whole passes and the first two
    // rows of a third. A pass names 3 distinct blocks before own tails ([1], [1 2], [1 9]),
    // each pass its own, and the third's two rows 2: 8, against a bound of 3 passes x 8.
    assert_eq!((t.len(), listed.len(), t.listed_blocks()), (12, 8, 24));
    // Re-chunked into 16-token blocks (at most input / 16 of them: 6, 4, 4, 4, 4).
    assert_eq!(unshared(16), vec![4, 4, 4, 4, 0]);
}
