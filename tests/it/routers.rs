//! Every routing policy with every workload, disaggregated or not, through faults; each policy's
//! rule on a small scenario; the hot-spot warning; the refreshed signal snapshot; settings that
//! would change nothing are refused.

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
    // Room for more workers that never come (`cluster.max_workers`) is not a cluster that
    // changed size: it still warns, naming the four workers, not the slots.
    let mut roomy = scenario(WORKLOADS[2], "kv");
    roomy.cluster.max_workers = Some(8);
    let warned = run(&roomy).warnings;
    assert!(
        warned.iter().any(
            |w| w.starts_with("hot spot: worker0 received") && w.contains("on a cluster of 4 ")
        ),
        "{warned:?}"
    );
}

/// Round-robin counts the workers up, not a scaling pool's empty slots: room for 8 workers
/// changes nothing of 2 that never scale (before Dec 5 2026 worker0 took 67 of 72, the turns
/// of the six empty slots after worker1 included).
#[test]
fn round_robin_takes_no_turn_for_empty_slots() {
    let (mut s, base) = crate::common::scenario("rr.toml");
    let fixed = dynsim::run::run_scenario(&s, &base, None).expect("runs");
    s.cluster.max_workers = Some(8);
    let roomy = dynsim::run::run_scenario(&s, &base, None).expect("runs");
    let routed =
        |r: &dynsim::report::Report| r.per_worker.iter().map(|w| w.routed).collect::<Vec<_>>();
    assert_eq!(routed(&fixed), [36, 36]);
    assert_eq!(routed(&roomy), routed(&fixed));
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

/// A bundled lab scenario (2 workers, 72 requests, CPython's draws) with overrides.
fn lab(file: &str, sets: &[&str]) -> Report {
    let (s, base) = crate::common::scenario(file);
    let overrides: Vec<dynsim::scenario::Override> =
        sets.iter().map(|o| o.parse().expect("KEY=VALUE")).collect();
    let text = toml::to_string(&s).expect("serialises");
    let s = parse_scenario(Path::new(file), &text, &overrides).expect("valid");
    run_cached(&s, &base)
}

/// Shared-prefix traffic on 4 workers of 400 blocks, KV events published, with `policy` and
/// overrides: block reuse answers to whether the policy follows caches.
fn shared(policy: &str, sets: &[&str]) -> Report {
    let text = format!(
        r#"
        seed = 5
        [workload]
        kind = "synthetic"
        requests = 160
        groups = 4
        shared_prefix_tokens = 512
        rate_per_s = 20.0
        turns = 4
        [cluster]
        workers = 4
        kv_capacity_blocks = 400
        [router]
        policy = "{policy}"
        "#
    );
    let overrides: Vec<dynsim::scenario::Override> =
        sets.iter().map(|o| o.parse().expect("KEY=VALUE")).collect();
    let s = parse_scenario(Path::new("shared.toml"), &text, &overrides).expect("valid");
    run(&s)
}

fn routed(r: &Report) -> Vec<u64> {
    r.per_worker.iter().map(|w| w.routed).collect()
}

/// Each policy's rule, asserted once on a small scenario: each assertion fails if the rule's
/// defining part is broken (a load balancer that stops balancing, a cache-aware rule whose
/// cache term is dropped).
#[test]
fn each_policy_follows_its_rule() {
    // rr: request i to worker i mod n.
    assert_eq!(routed(&lab("rr.toml", &[])), vec![36, 36]);
    assert_eq!(lab("rr.toml", &[]).hits, 49, "the lab's rr number");
    // random: one seeded draw per request (the lab's 48 of 60 with CPython's generator).
    assert_eq!(lab("random.toml", &[]).hits, 48);
    // kv: most overlap first (60 of 60); kv-events: the same from events, rr's 49 without.
    assert_eq!(lab("kv.toml", &[]).hits, 60);
    assert_eq!(lab("events-on.toml", &[]).hits, 60);
    assert_eq!(lab("events-off.toml", &[]).hits, 49);
    // approx: the lab rule over its own decisions, forgotten after ttl_s.
    assert_eq!(lab("kv.toml", &["router.policy=approx"]).hits, 60);
    let forgetful = lab(
        "kv.toml",
        &["router.policy=approx", "router.approx.ttl_s=0.001"],
    );
    assert!(forgetful.hits < 60, "{}", forgetful.hits);
    // cost: blocks to prefill first (every repeat hits); without the overlap term only load
    // counts, and with every worker idle at each arrival every cost ties: a seeded draw among
    // them, as Dynamo draws, so both workers get requests. Blind (no KV events) the same: it
    // does not send everything to worker 0 and hit by accident.
    assert_eq!(lab("events-on.toml", &["router.policy=cost"]).hits, 60);
    let no_overlap = lab(
        "events-on.toml",
        &["router.policy=cost", "router.cost.overlap_weight=0.0"],
    );
    let r = routed(&no_overlap);
    assert!(r[0] > 20 && r[1] > 20, "{r:?}");
    let blind = lab(
        "events-on.toml",
        &["router.policy=cost", "bus.publish=false"],
    );
    let r = routed(&blind);
    assert!(r[0] > 20 && r[1] > 20, "{r:?}");
    assert!(blind.hits < 60, "{}", blind.hits);
    // least-loaded: fewest in flight, the lowest number on ties: idle workers at every arrival
    // (1 ms steps, 10 ms apart) send everything to worker 0; overlapping requests spread.
    assert_eq!(
        routed(&lab("rr.toml", &["router.policy=least-loaded"])),
        vec![72, 0]
    );
    let overlapping = lab(
        "rr.toml",
        &["router.policy=least-loaded", "timing.service_ms=25.0"],
    );
    assert!(routed(&overlapping)[1] > 20, "{:?}", routed(&overlapping));
    // power-of-two: two random workers, the first drawn on a tie: idle workers do not all
    // send to worker 0.
    let p2 = routed(&lab("rr.toml", &["router.policy=power-of-two"]));
    assert!(p2[0] < 72 && p2[1] > 0, "{p2:?}");

    // The cache-aware production rules keep more of the shared prefixes than round-robin,
    // and lose it when their cache term is turned off.
    let rr = shared("rr", &[]).block_hit_rate;
    let cases: [(&str, &[&str]); 5] = [
        ("dynamo", &["router.dynamo.overlap_score_credit=0.0"]),
        ("sglang", &["router.sglang.cache_threshold=1.0"]),
        ("llm-d", &["router.llm-d.precise_prefix_weight=0.0"]),
        (
            "vllm-prefix-aware",
            &["router.vllm-prefix-aware.prefix_min_match_tokens=1000000"],
        ),
        ("vllm-loadaware", &["router.vllm-loadaware.beta=1000.0"]),
    ];
    for (policy, off) in cases {
        let on = shared(policy, &[]).block_hit_rate;
        let without = shared(policy, off).block_hit_rate;
        assert!(
            on > rr + 0.05 && on > without + 0.05,
            "{policy}: reuse {on} with its cache term, {without} without, rr {rr}"
        );
    }
    // vllm-session: every turn of a session on the worker its hash names, so a conversation's
    // earlier turns are in that worker's cache.
    let session = shared("vllm-session", &[]).block_hit_rate;
    assert!(session > rr + 0.02, "session {session}, rr {rr}");
}

#[test]
fn a_load_kind_with_a_policy_that_never_reads_it_is_refused() {
    let mut rr = scenario(WORKLOADS[0], "rr");
    rr.router.load = dynsim::router::loads::LoadKind::InFlight;
    let err = validate(&rr).expect_err("rr never reads router.load");
    assert_eq!(err.key, "router.load");
    assert!(err.problem.contains("kv, kv-events, approx"), "{err:?}");
    let mut kv = scenario(WORKLOADS[0], "kv");
    kv.router.load = dynsim::router::loads::LoadKind::InFlight;
    assert!(validate(&kv).is_ok());
}
