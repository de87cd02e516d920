//! Every routing policy with every workload, disaggregated or not, through faults; the hot-spot
//! warning; the refreshed signal snapshot.

use std::path::Path;

use dynsim::report::Report;
use dynsim::router::registry;
use dynsim::scenario::load::parse_scenario;
use dynsim::scenario::validate::validate;
use dynsim::scenario::{Fault, Scenario};

use crate::common::run_cached;

fn scenario(workload: &str, policy: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 3
        [workload]
        {workload}
        [cluster]
        workers = 4
        kv_capacity_blocks = 400
        [router]
        policy = "{policy}"
        "#
    );
    parse_scenario(Path::new("x.toml"), &text, &[]).expect("valid")
}

/// Runs `s` on its workload, built (the Mooncake rows parsed) once per test binary.
fn run(s: &Scenario) -> Report {
    run_cached(s, Path::new(env!("CARGO_MANIFEST_DIR")))
}

const WORKLOADS: [&str; 3] = [
    r#"kind = "prefix-repeat"
        prefixes = 6
        reps = 4
        interval_ms = 5.0"#,
    r#"kind = "synthetic"
        requests = 60
        groups = 3
        rate_per_s = 40.0
        turns = 2"#,
    r#"kind = "trace"
        path = "data/traces/mooncake_conversation_trace.jsonl"
        limit = 60
        speedup = 20.0"#,
];

#[test]
fn every_policy_serves_every_workload_aggregated_and_disaggregated_through_faults() {
    for entry in registry::POLICIES {
        for w in WORKLOADS {
            for disagg in [false, true] {
                let mut s = scenario(w, entry.name);
                s.faults = vec![Fault::Restart {
                    worker: 1,
                    at_ms: 40.0,
                    down_ms: 30.0,
                }];
                if disagg {
                    s.disagg.enabled = true;
                    s.disagg.prefill_workers = 2;
                    s.disagg.decode_workers = 2;
                }
                let r = run(&s);
                let what = format!("{} disagg={disagg} {}", entry.name, &w[..30]);
                assert_eq!(r.acks, r.requests as u64, "{what}: every request acked");
                assert_eq!(r, run(&s), "{what}: deterministic");
            }
        }
    }
}

#[test]
fn one_worker_taking_most_requests_warns_of_a_hot_spot() {
    // The lab rule over its own decisions piles a shared prefix on one worker.
    let hot = run(&scenario(WORKLOADS[2], "kv"));
    assert!(
        hot.warnings
            .iter()
            .any(|w| w.starts_with("hot spot: worker0 received")),
        "{:?}",
        hot.warnings
    );
    let spread = run(&scenario(WORKLOADS[2], "rr"));
    assert!(!spread.warnings.iter().any(|w| w.starts_with("hot spot")));
}

#[test]
fn a_refreshed_snapshot_lags_the_signals_and_an_exact_one_does_not() {
    // llm-d reads waiting queues and KV usage: with a snapshot refreshed every 200 ms a burst
    // is routed on stale signals, so the choices differ from exact signals; both are repeatable.
    let burst = r#"kind = "synthetic"
        requests = 80
        groups = 2
        rate_per_s = 400.0"#;
    let exact = scenario(burst, "llm-d");
    let mut lagged = exact.clone();
    lagged.router.signal_refresh_ms = 200.0;
    let routed = |r: &Report| r.per_worker.iter().map(|w| w.routed).collect::<Vec<_>>();
    let (a, b) = (run(&exact), run(&lagged));
    assert_ne!(routed(&a), routed(&b));
    assert_eq!(b, run(&lagged));
    // A policy that reads no signals would not be affected by the setting: it is refused.
    let mut rr = scenario(burst, "rr");
    rr.router.signal_refresh_ms = 200.0;
    let err = validate(&rr).expect_err("rr reads no signals");
    assert_eq!(err.key, "router.signal_refresh_ms");
    assert!(err.problem.contains("router.policy = \"rr\""), "{err:?}");
    rr.router.signal_refresh_ms = 0.0;
    assert!(validate(&rr).is_ok());
}
