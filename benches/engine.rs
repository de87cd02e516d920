//! Engine benchmarks: messages delivered per second on a scaled-up lab workload, requests per
//! second replaying the Mooncake conversation trace, and simulated steps per second replaying it
//! in Dynamo's mocker defaults (targets 5, 6 and 9 of docs/BENCHMARKS.md).
//!
//! Each iteration is a whole `run_scenario`: workload generation (or trace parsing), the run and
//! the report. Run with `cargo bench --bench engine`.
// criterion_group! and criterion_main! define public functions without docs.
#![allow(missing_docs)]

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dynsim::run::run_scenario;
use dynsim::scenario::load::{load_scenario, parse_scenario};
use dynsim::scenario::Scenario;

/// The lab workload scaled up: 1,000 prefixes x 20 repetitions (20,000 requests) on 8 workers,
/// the events router with workers publishing, the lab's fixed step time: every request costs
/// ten deliveries (arrival, route, the step's start and end, KvStored to the bus and on to the
/// router, the prefill-done note, two acks).
fn scaled_lab() -> Scenario {
    let text = r#"
        seed = 1
        [workload]
        kind = "prefix-repeat"
        prefixes = 1000
        reps = 20
        interval_ms = 1.0
        [cluster]
        workers = 8
        [router]
        policy = "kv-events"
        [timing]
        model = "fixed"
    "#;
    parse_scenario(Path::new("scaled-lab.toml"), text, &[]).expect("valid scenario")
}

fn messages_per_second(c: &mut Criterion) {
    let s = scaled_lab();
    let messages = run_scenario(&s, Path::new("."), None).unwrap().messages;
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(messages));
    group.bench_function("scaled_lab_messages", |b| {
        b.iter(|| run_scenario(&s, Path::new("."), None).unwrap())
    });
    group.finish();
}

fn mooncake_replay(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/mooncake-conversation.toml");
    let loaded = load_scenario(&path, &[]).expect("bundled scenario");
    let requests = run_scenario(&loaded.scenario, &loaded.base_dir, None)
        .unwrap()
        .requests as u64;
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(requests));
    group.bench_function("mooncake_conversation_requests", |b| {
        b.iter(|| run_scenario(&loaded.scenario, &loaded.base_dir, None).unwrap())
    });
    group.finish();
}

/// `scenarios/dynamo-mocker.toml`: the conversation trace on 8 workers in Dynamo's mocker
/// defaults; throughput in simulated forward passes (steps, all workers together).
fn dynamo_mocker_replay(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/dynamo-mocker.toml");
    let mut group = c.benchmark_group("replay");
    for policy in ["rr", "dynamo"] {
        let set = dynsim::scenario::Override {
            key: "router.policy".into(),
            value: policy.into(),
        };
        let loaded = load_scenario(&path, &[set]).expect("bundled scenario");
        let report = run_scenario(&loaded.scenario, &loaded.base_dir, None).unwrap();
        let steps: u64 = report.per_worker.iter().map(|w| w.steps).sum();
        group.throughput(Throughput::Elements(steps));
        group.bench_function(format!("dynamo_mocker_{policy}_steps"), |b| {
            b.iter(|| run_scenario(&loaded.scenario, &loaded.base_dir, None).unwrap())
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = messages_per_second, mooncake_replay, dynamo_mocker_replay
}
criterion_main!(benches);
