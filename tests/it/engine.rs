//! The engine through the library: equivalence with the lab, determinism, the bus, conservation.

use std::path::Path;

use dynsim::lab::{run_sim, LabMode, SimParams};
use dynsim::report::Report;
use dynsim::rng::RngKind;
use dynsim::run::run_scenario;
use dynsim::scenario::{PrefixRepeatWorkload, Scenario, Workload};
use dynsim::workload::lab::PrefixRepeat;
use proptest::prelude::*;

fn lab_scenario(policy: &str, publish: bool) -> Scenario {
    let mut s = Scenario {
        rng: RngKind::Python,
        ..Scenario::default()
    };
    s.timing.model = Some(dynsim::scenario::TimingKind::Fixed);
    s.router.policy = policy.into();
    s.bus.publish = publish;
    s
}

fn run(s: &Scenario) -> Report {
    run_scenario(s, Path::new("."), None).expect("scenario runs")
}

fn run_traced(s: &Scenario) -> (Report, Vec<u8>) {
    let mut trace = Vec::new();
    let report = run_scenario(s, Path::new("."), Some(&mut trace)).expect("scenario runs");
    (report, trace)
}

const MODES: [(&str, bool, LabMode); 5] = [
    ("rr", true, LabMode::Rr),
    ("random", true, LabMode::Random),
    ("kv", true, LabMode::Kv),
    ("kv-events", true, LabMode::KvEvents),
    ("kv-events", false, LabMode::KvEvents),
];

#[test]
fn run_equals_sim_on_the_lab_defaults() {
    let expected = [49, 48, 60, 60, 49];
    for ((policy, publish, _), hits) in MODES.into_iter().zip(expected) {
        let r = run(&lab_scenario(policy, publish));
        assert_eq!(
            (r.requests, r.repeat_requests, r.hits),
            (72, 60, hits),
            "{policy:?} {publish}"
        );
        assert_eq!(r.acks, 72);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// With zero bus latency and an arrival gap longer than the service time, the engine gives
    /// exactly the lab's numbers, for every mode.
    #[test]
    fn run_equals_sim_for_random_parameters(
        workers in 1usize..6,
        prefixes in 1usize..10,
        reps in 1usize..6,
        prefix_len in 0usize..80,
        tail_len in 0usize..40,
        block in 1usize..20,
        seed in any::<u64>(),
    ) {
        for (policy, publish, mode) in MODES {
            let mut s = lab_scenario(policy, publish);
            s.seed = seed;
            s.cluster.workers = workers;
            s.cluster.block_size = block;
            s.workload = Workload::PrefixRepeat(PrefixRepeatWorkload {
                prefixes,
                reps,
                prefix_len,
                tail_len,
                ..PrefixRepeatWorkload::default()
            });
            let engine = run(&s);
            let lab = run_sim(&SimParams {
                mode,
                publish,
                workers,
                workload: PrefixRepeat { prefixes, reps, prefix_len, tail_len },
                seed,
                block,
                rng: RngKind::Python,
            });
            prop_assert_eq!(
                (engine.requests, engine.repeat_requests, engine.hits, engine.hit_rate),
                (lab.requests, lab.repeat_requests, lab.hits, lab.hit_rate),
                "{:?} publish={}", policy, publish
            );
        }
    }
}

#[test]
fn same_seed_gives_a_byte_identical_trace() {
    for policy in ["random", "kv-events"] {
        let mut s = lab_scenario(policy, true);
        s.rng = RngKind::Chacha;
        s.bus.drop_rate = 0.3;
        s.bus.jitter_ms = 15.0;
        let (_, a) = run_traced(&s);
        let (_, b) = run_traced(&s);
        assert!(!a.is_empty());
        assert_eq!(a, b, "{policy:?}");
        s.seed = 2;
        let (_, c) = run_traced(&s);
        assert_ne!(
            a, c,
            "{policy:?}: another seed changes a random or lossy run"
        );
    }
}

#[test]
fn drop_rate_0_is_events_on_and_1_is_events_off() {
    let on = run(&lab_scenario("kv-events", true));
    let off = run(&lab_scenario("kv-events", false));
    let mut s = lab_scenario("kv-events", true);
    s.bus.drop_rate = 0.0;
    assert_eq!(run(&s).hits, on.hits);
    s.bus.drop_rate = 1.0;
    let all_lost = run(&s);
    assert_eq!(all_lost.hits, off.hits);
    assert_eq!(all_lost.events.applied, 0);
    assert_eq!(all_lost.events.dropped, all_lost.events.published);
    assert!(
        all_lost.warnings[0].contains("the bus lost every event"),
        "{:?}",
        all_lost.warnings
    );
}

#[test]
fn no_publishing_applies_nothing_and_warns() {
    let r = run(&lab_scenario("kv-events", false));
    assert_eq!((r.events.published, r.events.applied), (0, 0));
    assert_eq!(r.warnings.len(), 1);
    assert!(
        r.warnings[0].contains("bus.publish = false"),
        "{:?}",
        r.warnings
    );
    // A healthy run has no warning.
    assert!(run(&lab_scenario("kv-events", true)).warnings.is_empty());
}

#[test]
fn events_later_than_the_arrival_gap_lose_hits() {
    let prompt = run(&lab_scenario("kv-events", true));
    let mut late = lab_scenario("kv-events", true);
    late.bus.latency_ms = 25.0; // arrivals are 10 ms apart
    let late = run(&late);
    assert!(
        late.hits < prompt.hits,
        "late {} vs prompt {}",
        late.hits,
        prompt.hits
    );
    assert_eq!(late.events.applied, late.events.published, "late, not lost");
}

#[test]
fn every_request_gets_exactly_one_ack_whatever_the_bus_loses() {
    for drop_rate in [0.0, 0.3, 0.7, 1.0] {
        let mut s = lab_scenario("kv-events", true);
        s.rng = RngKind::Chacha;
        s.bus.drop_rate = drop_rate;
        let (r, trace) = run_traced(&s);
        assert_eq!(r.acks, r.requests as u64, "drop_rate {drop_rate}");
        let text = String::from_utf8(trace).unwrap();
        let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
        let sent = count(r#""kind":"Request","from":"client","to":"router""#);
        let routed = count(r#""kind":"Request","from":"router""#);
        let acked = count(r#""kind":"Ack","from":"router","to":"client""#);
        assert_eq!(
            (sent, routed, acked),
            (72, 72, 72),
            "only KV events may be lost"
        );
        let mut acked_ids: Vec<u64> = text
            .lines()
            .filter(|l| l.contains(r#""kind":"Ack","from":"router""#))
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["request"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        acked_ids.sort_unstable();
        assert_eq!(acked_ids, (0..72).collect::<Vec<u64>>());
    }
}

/// Empty prompts (prefix and tail of zero tokens) are routed and acknowledged like the lab's,
/// never an arithmetic overflow in the step scheduler (found by the proptest above).
#[test]
fn empty_prompts_run_like_the_lab() {
    for (policy, publish, mode) in MODES {
        let mut s = lab_scenario(policy, publish);
        s.seed = 0;
        s.cluster.workers = 1;
        s.cluster.block_size = 1;
        s.workload = Workload::PrefixRepeat(PrefixRepeatWorkload {
            prefixes: 1,
            reps: 1,
            prefix_len: 0,
            tail_len: 0,
            ..PrefixRepeatWorkload::default()
        });
        let engine = run(&s);
        let lab = run_sim(&SimParams {
            mode,
            publish,
            workers: 1,
            workload: PrefixRepeat {
                prefixes: 1,
                reps: 1,
                prefix_len: 0,
                tail_len: 0,
            },
            seed: 0,
            block: 1,
            rng: RngKind::Python,
        });
        assert_eq!(
            (engine.requests, engine.hits, engine.acks),
            (lab.requests, lab.hits, lab.requests as u64),
            "{policy:?} publish={publish}"
        );
    }
}
