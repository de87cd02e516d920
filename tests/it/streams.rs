//! KV event streams: sequence numbers, gaps and their recovery, the index audit, router
//! replicas and their sync, and the bus link's rate.

use std::path::Path;

use dynsim::cluster::build::{populate, Built};
use dynsim::cluster::Node;
use dynsim::engine::Simulation;
use dynsim::report::Report;
use dynsim::run::{build_workload, run_scenario};
use dynsim::scenario::load::parse_scenario;
use dynsim::scenario::Scenario;

/// The lab workload on 4 workers of 20 blocks (so that workers evict), fixed 1 ms steps.
fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
        seed = 5
        [workload]
        kind = "prefix-repeat"
        prefixes = 12
        reps = 6
        interval_ms = 10.0
        output_tokens = 4
        [cluster]
        workers = 4
        kv_capacity_blocks = 20
        [timing]
        model = "fixed"
        service_ms = 1.0
        {extra}
        "#
    );
    parse_scenario(Path::new("streams.toml"), &text, &[]).expect("valid")
}

fn run(s: &Scenario) -> Report {
    run_scenario(s, Path::new(env!("CARGO_MANIFEST_DIR")), None).expect("runs")
}

/// Runs `s` to the end and says, per replica, whether its belief equals what every worker
/// holds at the end.
fn exact_at_end(s: &Scenario) -> Vec<bool> {
    let built = build_workload(s, Path::new(env!("CARGO_MANIFEST_DIR"))).expect("workload");
    let mut sim: Simulation<Node> = Simulation::new(built.rng);
    let Built { audit, .. } = populate(
        s,
        &Default::default(),
        &built.recipe,
        built.pacing,
        &mut sim,
        Default::default(),
    );
    sim.run(|_| {});
    let audit = audit.expect("an events-fed policy is audited");
    let audit = audit.borrow();
    (0..s.router.replicas).map(|r| audit.exact(r)).collect()
}

#[test]
fn a_perfect_bus_makes_the_belief_equal_the_truth() {
    for policy in ["kv-events", "dynamo", "llm-d"] {
        for on_gap in ["ignore", "replay", "resync", "fallback"] {
            let s = scenario(&format!(
                "[router]\npolicy = \"{policy}\"\non_gap = \"{on_gap}\"\nreplicas = 2"
            ));
            assert_eq!(exact_at_end(&s), vec![true, true], "{policy} {on_gap}");
            let r = run(&s);
            assert_eq!(r.events.gaps_detected, 0, "{policy} {on_gap}");
            let q = r.index.expect("audited");
            // Events reach the router at the end of the step that caused them: close, not exact.
            assert!(
                q.precision > 0.95 && q.recall > 0.9,
                "{policy} {on_gap} {q:?}"
            );
        }
    }
}

#[test]
fn the_audit_can_be_turned_off_and_only_events_fed_policies_have_one() {
    let off = run(&scenario(
        "[router]\npolicy = \"kv-events\"\naudit_index = false",
    ));
    assert_eq!(off.index, None);
    let self_tracking = run(&scenario("[router]\npolicy = \"kv\""));
    assert_eq!(self_tracking.index, None);
    let on = run(&scenario("[router]\npolicy = \"kv-events\""));
    assert!(on.index.is_some());
    assert_eq!(
        (off.hits, off.cached_blocks),
        (on.hits, on.cached_blocks),
        "measuring changes nothing"
    );
}

#[test]
fn after_an_outage_recovery_makes_the_belief_whole_and_ignoring_does_not() {
    let outage = "[bus]\nlatency_ms = 1.0\noutages = [{ start_ms = 100.0, end_ms = 300.0 }]";
    let with = |on_gap: &str, extra: &str| {
        scenario(&format!(
            "[router]\npolicy = \"kv-events\"\non_gap = \"{on_gap}\"\n{outage}\n{extra}"
        ))
    };
    let ignored = with("ignore", "");
    assert_eq!(exact_at_end(&ignored), vec![false], "lost events stay lost");
    let ignored = run(&ignored);
    assert!(ignored.events.gaps_detected > 0);
    assert_eq!(
        (ignored.events.replays, ignored.events.resyncs),
        (0, 0),
        "ignore asks for nothing"
    );
    for on_gap in ["replay", "resync", "fallback"] {
        let s = with(on_gap, "");
        assert_eq!(exact_at_end(&s), vec![true], "{on_gap}");
        let r = run(&s);
        assert!(r.events.gaps_detected > 0, "{on_gap}");
        // A request and its answer: two trips of 1 ms.
        assert!(r.recovery_ms.p50 >= 2.0, "{on_gap}: {:?}", r.recovery_ms);
        let q = r.index.expect("audited");
        let qi = ignored.index.expect("audited");
        assert!(
            q.precision > qi.precision,
            "{on_gap}: recovery removes stale blocks: {q:?} vs {qi:?}"
        );
        match on_gap {
            "replay" => assert!(r.events.replays > 0 && r.events.replayed > 0),
            _ => assert!(
                r.events.resyncs > 0 && r.events.resync_bytes > 0,
                "{on_gap}"
            ),
        }
    }
    // A replay buffer too short for the outage: replays turn into snapshots.
    let short = with("replay", "replay_buffer = 1");
    assert_eq!(exact_at_end(&short), vec![true]);
    let r = run(&short);
    assert!(
        r.events.replays > 0 && r.events.resyncs > 0,
        "{:?}",
        r.events
    );
}

#[test]
fn a_restart_starts_a_new_stream_without_a_false_gap() {
    let s = scenario(
        "[router]\npolicy = \"kv-events\"\non_gap = \"replay\"\n\
         [[faults]]\nkind = \"restart\"\nworker = 1\nat_ms = 200.0\ndown_ms = 50.0",
    );
    assert_eq!(exact_at_end(&s), vec![true]);
    let r = run(&s);
    assert_eq!(r.events.gaps_detected, 0, "{:?}", r.events);
    assert_eq!(r.acks, r.requests as u64);
}

#[test]
fn fallback_predicts_a_silent_workers_cache_from_its_own_decisions() {
    let silent = |on_gap: &str| {
        run(&scenario(&format!(
            "[router]\npolicy = \"kv-events\"\non_gap = \"{on_gap}\"\ngap_silence_ms = 20.0\n\
             [bus]\npublish = false"
        )))
    };
    let blind = silent("ignore");
    let fallback = silent("fallback");
    assert_eq!(blind.predicted_blocks, 0, "no event, no belief");
    assert!(fallback.predicted_blocks > 0, "predictions from decisions");
    assert!(fallback.events.gaps_detected > 0, "silence while serving");
    assert!(
        blind.events.gaps_detected > 0,
        "ignore counts silences too, though it asks for nothing"
    );
    assert_eq!((blind.events.replays, blind.events.resyncs), (0, 0));
    assert!(
        fallback.hits > blind.hits,
        "fallback routes on predictions: {} vs {} hits",
        fallback.hits,
        blind.hits
    );
    assert_eq!(fallback.acks, fallback.requests as u64);
}

#[test]
fn a_fallback_router_that_found_no_gap_is_called_blind_not_predicting() {
    // Every event lost, and no worker silent for the default 1000 ms after a request in this
    // 0.7 s run: fallback never engaged and predicted nothing, yet the warning said "the router
    // routes on predictions from its own decisions".
    let lost = |silence_ms: f64| {
        run(&scenario(&format!(
            "[router]\npolicy = \"kv-events\"\non_gap = \"fallback\"\n\
             gap_silence_ms = {silence_ms:?}\n[bus]\ndrop_rate = 1.0"
        )))
    };
    let r = lost(1000.0);
    assert_eq!((r.events.gaps_detected, r.predicted_blocks), (0, 0));
    let w = r.warnings.join("\n");
    assert!(
        w.contains("the bus lost every event")
            && w.contains("the router is blind")
            && w.contains("found none: no stream stayed silent router.gap_silence_ms = 1000 ms")
            && !w.contains("predictions"),
        "{w}"
    );
    // A silence it found: fallback predicts, and says so.
    let r = lost(20.0);
    assert!(r.events.gaps_detected > 0 && r.predicted_blocks > 0);
    let w = r.warnings.join("\n");
    assert!(
        w.contains("routes on predictions from its own decisions") && !w.contains("blind"),
        "{w}"
    );
}

#[test]
fn a_snapshot_on_a_slow_link_takes_time() {
    let resync = |link: &str| {
        run(&scenario(&format!(
            "[router]\npolicy = \"kv-events\"\non_gap = \"resync\"\n\
             [bus]\noutages = [{{ start_ms = 100.0, end_ms = 300.0 }}]\n{link}"
        )))
    };
    let fast = resync("");
    // 1e-6 GB/s: a kilobyte per second, so a snapshot of a few hundred bytes takes a while.
    let slow = resync("link_gbps = 1e-6");
    assert!(slow.events.resync_bytes > 0);
    assert!(
        slow.recovery_ms.mean > fast.recovery_ms.mean + 100.0,
        "{} vs {}",
        slow.recovery_ms.mean,
        fast.recovery_ms.mean
    );
}

#[test]
fn replicas_share_the_work_and_sync_their_load() {
    let with = |replicas: usize, sync: &str, spread: &str| {
        let s = scenario(&format!(
            "[router]\npolicy = \"dynamo\"\nreplicas = {replicas}\nsync = \"{sync}\"\n\
             spread = \"{spread}\""
        ));
        let mut trace = Vec::new();
        let r = run_scenario(&s, Path::new("."), Some(&mut trace)).expect("runs");
        (r, String::from_utf8(trace).expect("utf-8"))
    };
    let (one, one_trace) = with(1, "none", "round-robin");
    let (three, trace) = with(3, "none", "round-robin");
    assert_eq!(three.acks, three.requests as u64);
    assert_eq!(
        three.per_worker.iter().map(|w| w.routed).sum::<u64>(),
        one.per_worker.iter().map(|w| w.routed).sum::<u64>()
    );
    assert!(trace.contains(r#""to":"router2""#) && !trace.contains("PeerAdded"));
    assert!(one_trace.contains(r#""to":"router""#));
    let (synced, trace) = with(3, "active-load", "session");
    assert_eq!(synced.acks, synced.requests as u64);
    for kind in ["PeerAdded", "PeerPrefillDone", "PeerFreed"] {
        assert!(trace.contains(kind), "{kind}");
    }
    // Each replica hears of every event: three deliveries per published event.
    assert_eq!(synced.events.applied, 3 * synced.events.published);
    assert!(synced.busiest_worker_share > 0.0 && synced.busiest_worker_share <= 1.0);
    // Deterministic for a seed.
    assert_eq!(with(3, "active-load", "session").1, trace);
}

#[test]
fn events_that_arrive_after_the_last_completion_neither_score_nor_hide_a_blind_router() {
    // Every event takes longer than the whole run (the last request completes near 0.7 s):
    // the router routes blind, as with no events at all. The events still reach it after the
    // end and are applied; the audit used to integrate up to their arrival (recall 0.11 at a
    // 700 ms latency, precision 0.24 at 1e6 ms where the router believed nothing during the
    // run), and no warning said that the router knew nothing while it routed.
    let late = |latency_ms: f64| {
        run(&scenario(&format!(
            "[router]\npolicy = \"kv-events\"\n[bus]\nlatency_ms = {latency_ms:?}\n"
        )))
    };
    let blind = run(&scenario(
        "[router]\npolicy = \"kv-events\"\n[bus]\npublish = false\n",
    ));
    for latency_ms in [700.0, 1e6] {
        let r = late(latency_ms);
        assert_eq!(r.events.applied, r.events.published, "{latency_ms}");
        assert_eq!(
            r.predicted_blocks, 0,
            "{latency_ms}: no decision saw an event"
        );
        assert_eq!(r.hits, blind.hits, "{latency_ms}");
        let q = r.index.expect("audited");
        assert!(q.recall < 0.01, "{latency_ms}: {q:?}");
    }
    let r = late(1e6);
    assert_eq!(r.index.expect("audited").precision, 1.0, "never defined");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("before it applied its first KV event")
                && w.contains("routed the whole run blind")),
        "{:?}",
        r.warnings
    );
    // A latency the run outlasts is no blindness: no such warning.
    let r = late(25.0);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn events_that_arrive_after_the_last_decision_but_before_the_end_are_a_blind_router() {
    // 10 ms steps: the last request arrives (and is routed) near 710 ms and completes some
    // 40 ms later. At a 720 ms latency the first event reaches the router after its last
    // decision and before the last completion: no decision saw an event, as with none at all,
    // and the warning (which once asked only for events after the last completion) says so.
    let with = |bus: &str| {
        let mut s = scenario(&format!("[router]\npolicy = \"kv-events\"\n[bus]\n{bus}\n"));
        s.timing.service_ms = 10.0;
        run(&s)
    };
    let blind = with("publish = false");
    let r = with("latency_ms = 720.0");
    assert!(r.events.applied > 0);
    assert_eq!(r.predicted_blocks, 0, "no decision saw an event");
    assert_eq!(r.hits, blind.hits);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("before it applied its first KV event")
                && w.contains("routed the whole run blind")),
        "{:?} (the run ended at {} ms)",
        r.warnings,
        r.duration_ms
    );
    // Events that arrive while requests are still being routed: no such warning.
    let r = with("latency_ms = 25.0");
    assert!(r.predicted_blocks > 0);
    assert!(
        !r.warnings
            .iter()
            .any(|w| w.contains("routed the whole run blind")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_router_that_learned_only_from_snapshots_or_from_too_few_replays_is_warned_truly() {
    // The event-gaps trace with the bus losing all but a handful of events. A few events get
    // through, each during a gap's recovery, so the router applies none of them: the warning
    // once said "the bus lost every event (9549 published, 9495 dropped)", and, under
    // "resync", "blind" although a snapshot had taught the router the workers' caches.
    let with_replicas = |on_gap: &str, drop_rate: &str, replicas: u32| {
        let (_, stderr) = crate::common::ok_with_stderr(&[
            "run",
            "scenarios/event-gaps.toml",
            "--set",
            "workload.limit=2000",
            "--set",
            &format!("bus.drop_rate={drop_rate}"),
            "--set",
            &format!("router.on_gap=\"{on_gap}\""),
            "--set",
            &format!("router.replicas={replicas}"),
        ]);
        stderr
    };
    let warnings = |on_gap: &str, drop_rate: &str| with_replicas(on_gap, drop_rate, 1);
    let resync = warnings("resync", "0.995");
    assert!(
        resync.contains("applied no KV event: the bus lost 9495 of 9549 events, and the 54 that")
            && resync.contains("(router.on_gap = \"resync\")")
            && resync.contains("only from the 1 snapshot it resynced with")
            && !resync.contains("lost every event")
            && !resync.contains("blind"),
        "{resync}"
    );
    // All but 13 lost and nothing recovered: blind, and said so without "every event".
    let none = warnings("resync", "0.999");
    assert!(
        none.contains("the bus lost 9592 of 9605 events") && none.contains("the router is blind"),
        "{none}"
    );
    // A replaying router that recovered a few events: its stale index was not warned of
    // (only "ignore" was).
    let replay = warnings("replay", "0.99");
    assert!(
        replay.contains(
            "applied only 1069 of 9605 published KV events (the bus dropped 9513; \
             router.on_gap = \"replay\" recovered 1068)"
        ),
        "{replay}"
    );
    // A replaying router whose recovery keeps up is not warned. (Warnings reach stderr as
    // " WARN ..." lines: looking for "warning" there found nothing, warned or not.)
    assert!(replay.contains(" WARN "), "{replay}");
    let kept_up = warnings("replay", "0.3");
    assert!(!kept_up.contains("WARN"), "{kept_up}");
    // A resyncing or falling-back router applies few events by design (snapshots and
    // predictions stand in), so the audit judges its index: at drop_rate 0.99 resync knew
    // 0.6 % of the pairs and fallback at 0.9 knew 29 %, and neither was warned.
    let resync = warnings("resync", "0.99");
    assert!(
        resync.contains("the router's index held 1 % of the (worker, block) pairs the workers held (index.recall = 0.006")
            && resync.contains("the bus dropped 9513 of 9605 events; bus.latency_ms = 1, router.on_gap = \"resync\""),
        "{resync}"
    );
    let fallback = warnings("fallback", "0.9");
    assert!(fallback.contains("held 29 % of the"), "{fallback}");
    let kept_up = warnings("resync", "0.3");
    assert!(!kept_up.contains("WARN"), "{kept_up}");
    // Two replicas: each is sent a copy of every event, dropped apart, so the copies are
    // counted (it once read "the bus lost 18905 of 9495 events").
    let two = with_replicas("resync", "0.995", 2);
    assert!(
        two.contains("and the 85 copies that reached the replicas were set aside"),
        "{two}"
    );
    assert!(
        two.contains("the bus lost 18905 of the 18990 copies it carries (9495 events, a copy to each of 2 router replicas)"),
        "{two}"
    );
    let two = with_replicas("resync", "1.0", 2);
    assert!(
        two.contains("the bus lost every event (9550 published, a copy to each of 2 router replicas: 19100 copies dropped)"),
        "{two}"
    );
}

#[test]
fn a_fallback_router_that_predicted_and_resynced_is_said_to_have_done_both() {
    // The event-gaps trace (seed 2) with the bus losing 99 % of events under fallback: the
    // router predicted 74,539 blocks from its own decisions and believed 2 snapshots, but
    // applied no event; the warning once said only that it "knew the workers' caches only from
    // the 2 snapshots it resynced with", leaving out the predictions it routed on.
    let (stdout, stderr) = crate::common::ok_with_stderr(&[
        "run",
        "scenarios/event-gaps.toml",
        "--set",
        "workload.limit=2000",
        "--set",
        "seed=2",
        "--set",
        "bus.drop_rate=0.99",
        "--set",
        "router.on_gap=\"fallback\"",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(report["events"]["applied"], 0);
    assert!(report["predicted_blocks"].as_u64().unwrap() > 0);
    assert!(
        stderr.contains(
            "applied no KV event: the bus lost 8683 of 8757 events, and the 74 that reached the \
             router were set aside (each came while its worker's stream was recovering from a \
             gap, or was stale); the router routes on predictions from its own decisions (router.on_gap = \"fallback\") and on \
             the 2 snapshots it resynced with"
        ) && !stderr.contains("only from"),
        "{stderr}"
    );
}
