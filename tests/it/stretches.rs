//! Decode stretches against planning each step alone (`engine.vllm.decode_stretches = false`):
//! what a stretch changes, and when it changes nothing.

use std::path::Path;

use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;
use dynsim::scenario::Scenario;
use proptest::prelude::*;

/// A small synthetic run on 2 workers (16-token blocks, `kv` blocks each or unbounded): prompts
/// of 16 to 160 tokens in 4 families, up to `out` output tokens, `rate` requests per second.
fn small_run(seed: u64, kv: Option<usize>, rate: f64, out: u32, policy: &str) -> Scenario {
    let kv = kv.map_or(String::new(), |k| format!("kv_capacity_blocks = {k}"));
    let text = format!(
        r#"
        seed = {seed}
        [workload]
        kind = "synthetic"
        requests = 40
        groups = 4
        shared_prefix_tokens = 64
        rate_per_s = {rate:?}
        input = {{ dist = "uniform", min = 16, max = 160 }}
        output = {{ dist = "uniform", min = 1, max = {out} }}
        [cluster]
        workers = 2
        block_size = 16
        {kv}
        [router]
        policy = "{policy}"
        audit_index = false
        "#
    );
    parse_scenario(Path::new("small.toml"), &text, &[]).expect("a valid scenario")
}

/// The report of `s` with and without decode stretches, as JSON, without the fields named.
fn with_and_without_stretches(
    s: &Scenario,
    skip: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let json = |s: &Scenario| {
        let r = run_scenario(s, Path::new("."), None).expect("runs");
        let mut v = serde_json::to_value(&r).expect("serialises");
        for k in skip {
            v[*k] = serde_json::Value::Null;
        }
        v
    };
    let mut plain = s.clone();
    plain.engine.vllm.decode_stretches = false;
    (json(s), json(&plain))
}

const POLICIES: [&str; 6] = ["rr", "kv", "kv-events", "dynamo", "llm-d", "cost"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Stretches are only a way of planning: when KV never runs short, every result is the same
    /// as planning each step alone, whenever requests arrive (only the number of deliveries
    /// differs), even for a policy that reads the workers' KV use.
    #[test]
    fn decode_stretches_change_nothing_while_kv_never_runs_short(
        seed in 0u64..1000, rate in 2.0f64..80.0, out in 2u32..90, policy in 0usize..6,
    ) {
        let s = small_run(seed, None, rate, out, POLICIES[policy]);
        let (a, b) = with_and_without_stretches(&s, &["messages"]);
        prop_assert_eq!(a, b);
    }

    /// With tight KV, a stretch takes the blocks its decode tokens will fill when it is planned
    /// (evicting then) and reports the evictions in one KV event: when no request arrives during
    /// a stretch (here all arrive at once), nothing but the KV event count differs from planning
    /// each step alone. (A request arriving during a stretch can find fewer cached blocks and
    /// routers learn of the evictions early: docs/FIDELITY.md.)
    #[test]
    fn with_tight_kv_decode_stretches_change_only_the_event_count_without_arrivals_mid_stretch(
        seed in 0u64..1000, kv in 20usize..80, out in 2u32..90, policy in 0usize..6,
    ) {
        let s = small_run(seed, Some(kv), 1e6, out, POLICIES[policy]);
        let (a, b) = with_and_without_stretches(&s, &["messages", "events"]);
        prop_assert_eq!(a, b);
    }
}

/// The properties above compare two settings; they would pass if the setting did nothing. It
/// does: with stretches a run takes fewer deliveries.
#[test]
fn decode_stretches_save_deliveries() {
    let s = small_run(1, None, 20.0, 60, "rr");
    let (a, b) = with_and_without_stretches(&s, &[]);
    let messages = |v: &serde_json::Value| v["messages"].as_u64().expect("a count");
    assert!(
        messages(&a) < messages(&b),
        "{} deliveries with stretches, {} without",
        messages(&a),
        messages(&b)
    );
}
