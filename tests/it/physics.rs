//! Simulator physics: KV capacity, timing, cost and approx policies, loss attribution,
//! disaggregation and faults.

use std::path::Path;

use dynsim::disagg::{self, ModelShape};
use dynsim::report::Report;
use dynsim::rng::RngKind;
use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;
use dynsim::scenario::{Auto, Fault, Limit, Scenario, Timing, TimingKind, Window};

/// The lab workload and timing (every step 1 ms) on 2 workers.
fn lab(policy: &str) -> Scenario {
    let mut s = Scenario {
        rng: RngKind::Python,
        ..Scenario::default()
    };
    s.timing.model = Some(TimingKind::Fixed);
    s.router.policy = policy.into();
    s
}

fn run(s: &Scenario) -> Report {
    run_scenario(s, Path::new("."), None).expect("runs")
}

fn run_traced(s: &Scenario) -> (Report, String) {
    let mut trace = Vec::new();
    let r = run_scenario(s, Path::new("."), Some(&mut trace)).expect("runs");
    (r, String::from_utf8(trace).unwrap())
}

fn scenario_file(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    parse_scenario(&path, &text, &[]).unwrap()
}

#[test]
fn more_capacity_never_lowers_rr_hits() {
    for seed in 1..=4 {
        let mut last = 0;
        for cap in (7..=140).step_by(3) {
            let mut s = lab("rr");
            s.seed = seed;
            s.cluster.kv_capacity_blocks = Limit::Count(cap);
            let hits = run(&s).hits;
            assert!(
                hits >= last,
                "seed {seed}: capacity {cap} gives {hits} < {last}"
            );
            last = hits;
        }
        let unbounded = run(&Scenario { seed, ..lab("rr") }).hits;
        assert_eq!(last, unbounded, "enough capacity equals unbounded");
    }
}

#[test]
fn finite_capacity_evicts_and_publishes_removals() {
    let mut s = lab("kv-events");
    s.cluster.kv_capacity_blocks = Limit::Count(30);
    let (r, trace) = run_traced(&s);
    let evicted: u64 = r.per_worker.iter().map(|w| w.evicted_blocks).sum();
    assert!(evicted > 0);
    assert!(trace.contains(r#""kind":"KvRemoved","from":"worker"#));
    let m = r.misses.expect("attributed by default");
    assert!(m.capacity > 0, "{m:?}");
}

#[test]
fn measured_scenario_reproduces_the_measured_shape() {
    for seed in 1..=3 {
        let mut s = scenario_file("measured-2026-10-07.toml");
        s.seed = seed;
        s.router.policy = "rr".into();
        let rr = run(&s).hits;
        assert!((35..=43).contains(&rr), "seed {seed}: rr {rr}");
        s.router.policy = "kv".into();
        let kv = run(&s).hits;
        assert!(kv >= 53, "seed {seed}: kv {kv}");
        s.router.policy = "kv-events".into();
        s.bus.publish = false;
        let blind = run(&s);
        assert!(
            (35..=43).contains(&blind.hits),
            "seed {seed}: events off {}",
            blind.hits
        );
        assert!(!blind.warnings.is_empty());
    }
}

/// One 1,500-token prompt answered with `output` tokens.
fn lone_workload_text(output: u32) -> String {
    format!(
        "[workload]\nkind = \"synthetic\"\nrequests = 1\nshared_prefix_tokens = 0\n\
         input = {{ dist = \"fixed\", tokens = 1500 }}\n\
         output = {{ dist = \"fixed\", tokens = {output} }}\n"
    )
}

fn lone_request(timing: Timing) -> Scenario {
    let mut s = lab("kv");
    let text = lone_workload_text(20);
    s.workload = parse_scenario(Path::new("x.toml"), &text, &[])
        .unwrap()
        .workload;
    s.timing = timing;
    s
}

#[test]
fn a_lone_requests_ttft_is_the_timing_formula() {
    let timing = Timing {
        request_overhead_ms: Some(3.0),
        ..Timing::default()
    };
    let r = run(&lone_request(timing.clone()));
    let [a, b, c] = timing.prefill_coeffs;
    let prefill = a * 1500.0 * 1500.0 + b * 1500.0 + c + 3.0;
    assert!(
        (r.ttft_ms.p50 - prefill).abs() < 1e-3,
        "{} vs {prefill}",
        r.ttft_ms.p50
    );
    let decode = 19.0 * 5.74; // 19 more tokens at an empty (unbounded) cache
    assert!(
        (r.e2e_ms.p50 - (prefill + decode)).abs() < 1e-3,
        "{}",
        r.e2e_ms.p50
    );
}

#[test]
fn a_lone_disaggregated_requests_ttft_is_ttft_disagg() {
    for colocated in [false, true] {
        let timing = Timing::default();
        let mut s = lone_request(timing.clone());
        s.disagg.enabled = true;
        s.disagg.colocated = colocated;
        s.disagg.link_gbps = 0.608;
        s.disagg.transfer_overhead_ms = 2.5;
        let r = run(&s);
        let [a, b, c] = timing.prefill_coeffs;
        let prefill = a * 1500.0 * 1500.0 + b * 1500.0 + c;
        let bpt = ModelShape::default().bytes_per_token();
        // The lab's TTFT (prefill, transfer and its overhead) and the decode worker's first
        // step, which makes the first token (5.74 ms at an empty, unbounded cache): the
        // prefill worker's token is not the client's, as in Dynamo.
        let expected = disagg::ttft_disagg(prefill, 1500, bpt, 0.608, 2.5) + 5.74;
        assert!(
            (r.ttft_ms.p50 - expected).abs() < 1e-3,
            "{} vs {expected}",
            r.ttft_ms.p50
        );
        // Its 20 tokens are all the decode worker's: 20 decode steps from the KV's landing.
        let e2e = disagg::ttft_disagg(prefill, 1500, bpt, 0.608, 2.5) + 20.0 * 5.74;
        assert!(
            (r.e2e_ms.p50 - e2e).abs() < 1e-3,
            "{} vs {e2e}",
            r.e2e_ms.p50
        );
        // A one-token answer is the decode worker's too: it no longer completes on arrival.
        let mut one = s.clone();
        let text = lone_workload_text(1);
        one.workload = parse_scenario(Path::new("x.toml"), &text, &[])
            .unwrap()
            .workload;
        let r = run(&one);
        assert!(
            (r.e2e_ms.p50 - expected).abs() < 1e-3 && (r.ttft_ms.p50 - expected).abs() < 1e-3,
            "{} / {} vs {expected}",
            r.ttft_ms.p50,
            r.e2e_ms.p50
        );
    }
}

#[test]
fn disagg_on_one_gpu_is_in_the_measured_band() {
    for seed in 1..=3 {
        let mut s = scenario_file("disagg-one-gpu.toml");
        s.seed = seed;
        s.disagg.enabled = false;
        let agg = run(&s).ttft_ms.p50;
        s.disagg.enabled = true;
        let dis = run(&s).ttft_ms.p50;
        let ratio = dis / agg;
        assert!(
            (4.7..=7.2).contains(&ratio),
            "seed {seed}: {dis} / {agg} = {ratio}"
        );
    }
}

#[test]
fn approx_with_zero_ttl_is_kv_events_without_events() {
    for seed in 1..=5 {
        let mut blind = lab("kv-events");
        blind.seed = seed;
        blind.bus.publish = false;
        let mut approx = lab("approx");
        approx.seed = seed;
        approx
            .router
            .settings
            .insert("approx".into(), toml::toml! { ttl_s = 0.0 }.into());
        let (a, b) = (run(&blind), run(&approx));
        assert_eq!(a.hits, b.hits, "seed {seed}");
        let routed = |r: &Report| r.per_worker.iter().map(|w| w.routed).collect::<Vec<_>>();
        assert_eq!(routed(&a), routed(&b), "seed {seed}");
        // With a long TTL approx remembers its decisions: it routes like kv.
        approx
            .router
            .settings
            .insert("approx".into(), toml::toml! { ttl_s = 120.0 }.into());
        let mut kv = lab("kv");
        kv.seed = seed;
        assert_eq!(run(&approx).hits, run(&kv).hits, "seed {seed}");
    }
}

#[test]
fn cost_policy_prefers_cached_workers_and_is_deterministic() {
    let mut s = lab("cost");
    let r = run(&s);
    assert_eq!(
        r.hits, 60,
        "overlap dominates the cost when nothing is in flight"
    );
    s.router
        .settings
        .insert("cost".into(), toml::toml! { temperature = 0.5 }.into());
    s.rng = RngKind::Chacha;
    let (a, ta) = run_traced(&s);
    let (b, tb) = run_traced(&s);
    assert_eq!((a.hits, ta), (b.hits, tb));
    assert!(
        a.hits < 60,
        "sampling sometimes leaves the cached worker: {}",
        a.hits
    );
}

#[test]
fn every_policy_reports_its_predicted_overlap() {
    let rr = run(&lab("rr"));
    assert_eq!(rr.predicted_blocks, 0, "rr believes nothing");
    let kv = run(&lab("kv"));
    assert_eq!(
        kv.predicted_blocks, kv.cached_blocks,
        "an exact index predicts the truth"
    );
    let mut lossy = lab("kv-events");
    lossy.cluster.kv_capacity_blocks = Limit::Count(30);
    lossy.bus.drop_rate = 0.5;
    lossy.rng = RngKind::Chacha;
    let m = run(&lossy).misses.expect("attributed by default");
    assert!(
        m.stale_index > 0,
        "lost removals leave stale beliefs: {m:?}"
    );
}

#[test]
fn each_miss_is_attributed_to_the_cause_that_made_it() {
    let causes = |s: &Scenario| {
        let r = run(s);
        let m = r.misses.expect("attributed by default");
        assert_eq!(
            m.total(),
            r.prompt_blocks - r.cached_blocks,
            "causes sum to the misses"
        );
        (m.cold, m.routing, m.stale_index, m.capacity)
    };
    // Cold: the 6 prefix blocks of each of the 12 prefixes' first request, and every request's
    // own tail block (72): 144, whatever the policy.
    assert_eq!(causes(&lab("kv")), (144, 0, 0, 0));
    // Routing: rr sends 11 repeats to the worker without their prefix: 11 x 6 blocks.
    assert_eq!(causes(&lab("rr")), (144, 66, 0, 0));
    // Capacity: with 60 blocks per worker, rr evicts prefixes that come back.
    let mut small = lab("rr");
    small.cluster.kv_capacity_blocks = Limit::Count(60);
    assert_eq!(causes(&small), (144, 66, 0, 49));
    // A restart of worker 0 at 300 ms empties its cache. The self-tracking router does not know
    // and sends it 4 repeats whose prefix it believes there: stale index. The events router
    // learns of the loss (KvCleared) and still sends them there as the least loaded: the worker
    // had held those blocks and lost them: capacity.
    let restart = vec![Fault::Restart {
        worker: 0,
        at_ms: 300.0,
        down_ms: 5.0,
    }];
    let mut kv = lab("kv");
    kv.faults = restart.clone();
    assert_eq!(causes(&kv), (144, 0, 24, 0));
    let mut events = lab("kv-events");
    events.faults = restart;
    assert_eq!(causes(&events), (144, 0, 0, 24));
}

#[test]
fn misses_are_not_attributed_when_the_scenario_turns_attribution_off() {
    let mut s = lab("kv-events");
    s.cluster.kv_capacity_blocks = Limit::Count(30);
    let (on, trace_on) = run_traced(&s);
    s.router.attribute_misses = false;
    let (off, trace_off) = run_traced(&s);
    assert!(on.misses.is_some_and(|m| m.total() > 0));
    assert_eq!(
        off.misses, None,
        "not attributed: no zeros that look measured"
    );
    assert!(off.table().contains("misses        not attributed"));
    let json = |r: &Report| {
        let mut v = serde_json::to_value(r).unwrap();
        v["misses"] = serde_json::Value::Null;
        v
    };
    assert_eq!(json(&on), json(&off), "nothing but the misses changes");
    assert!(trace_off.contains(r#""misses":null"#));
    assert_eq!(
        trace_on.lines().count(),
        trace_off.lines().count(),
        "the same deliveries"
    );
}

#[test]
fn restarts_and_outages_lose_no_request() {
    let mut s = lab("kv-events");
    s.rng = RngKind::Chacha;
    s.timing.service_ms = 25.0; // requests are in flight when the worker goes down
    s.faults = vec![
        Fault::Restart {
            worker: 0,
            at_ms: 100.0,
            down_ms: 150.0,
        },
        Fault::Restart {
            worker: 1,
            at_ms: 200.0,
            down_ms: 100.0,
        },
    ];
    s.bus.outages = vec![Window {
        start_ms: 300.0,
        end_ms: 450.0,
    }];
    let (r, trace) = run_traced(&s);
    assert_eq!(r.acks, r.requests as u64);
    assert!(r.rerouted > 0, "in-flight requests were handed back");
    assert_eq!(r.per_worker[0].restarts, 1);
    // Between the router learning that worker 0 is down and learning it is back, worker 0 gets
    // no request.
    let mut down = false;
    for line in trace.lines() {
        if line.contains(r#""kind":"WorkerDown","from":"worker0","to":"router""#) {
            down = true;
        } else if line.contains(r#""kind":"WorkerUp","from":"worker0","to":"router""#) {
            down = false;
        } else if down {
            assert!(
                !line.contains(r#""kind":"Request","from":"router","to":"worker0""#),
                "routed to a down worker: {line}"
            );
        }
    }
    assert!(trace.contains(r#""kind":"KvCleared""#));
}

#[test]
fn all_workers_down_holds_requests_until_one_is_back() {
    let mut s = lab("rr");
    s.cluster.workers = 1;
    s.faults = vec![Fault::Restart {
        worker: 0,
        at_ms: 50.0,
        down_ms: 200.0,
    }];
    let r = run(&s);
    assert_eq!(r.acks, 72);
    assert!(
        r.queue_ms.p99 > 100.0,
        "held requests waited: {:?}",
        r.queue_ms
    );
}

#[test]
fn max_num_seqs_queues_requests_fifo() {
    let mut s = lab("rr");
    s.cluster.workers = 1;
    s.timing = Timing::default();
    s.engine.vllm.max_num_seqs = Auto::Set(Limit::Count(1));
    if let dynsim::scenario::Workload::PrefixRepeat(w) = &mut s.workload {
        w.interval_ms = 1.0; // much faster than a ~18 ms prefill
    }
    let r = run(&s);
    assert!(r.queue_ms.p90 > 100.0, "{:?}", r.queue_ms);
    assert!(r.per_worker[0].utilisation > 0.9, "{:?}", r.per_worker[0]);
}

#[test]
fn in_flight_load_counts_only_unfinished_requests() {
    use dynsim::router::loads::LoadKind;
    // A blind events router breaks ties on load. Counting requests routed so far alternates
    // workers (like rr); counting requests in flight sees every worker idle at each arrival
    // (service 1 ms, arrivals 10 ms apart) and keeps the lowest index.
    let mut s = lab("kv-events");
    s.bus.publish = false;
    let routed = |r: &Report| r.per_worker.iter().map(|w| w.routed).collect::<Vec<_>>();
    assert_eq!(routed(&run(&s)), vec![36, 36]);
    s.router.load = LoadKind::InFlight;
    assert_eq!(routed(&run(&s)), vec![72, 0]);
    // With requests overlapping (service 25 ms), in-flight load spreads them again.
    s.timing.service_ms = 25.0;
    let spread = routed(&run(&s));
    assert!(spread[1] > 20, "{spread:?}");
}

#[test]
fn no_eviction_and_no_restart_means_no_capacity_miss() {
    // All requests arrive at once: every decision is made before any prefill starts, so blocks
    // computed later by other workers were cold when the router decided, not evicted.
    for policy in ["rr", "random", "kv"] {
        let mut s = lab(policy);
        if let dynsim::scenario::Workload::PrefixRepeat(w) = &mut s.workload {
            w.interval_ms = 0.0;
        }
        let m = run(&s).misses.expect("attributed by default");
        assert_eq!(m.capacity, 0, "{policy:?}: {m:?}");
        s.timing = Timing::default();
        s.engine.vllm.max_num_seqs = Auto::Set(Limit::Count(1));
        if let dynsim::scenario::Workload::PrefixRepeat(w) = &mut s.workload {
            w.interval_ms = 1.0;
        }
        let m = run(&s).misses.expect("attributed by default");
        assert_eq!(m.capacity, 0, "{policy:?} queued: {m:?}");
    }
}

/// Twenty 1,000-token prompts at once, unrelated, on one prefill worker and `decode_workers`
/// decode workers joined by a 1 GB/s link (each transfer 114.7 ms, one at a time), `rr`, plus
/// `extra` (a fault or a scaling step).
fn twenty_transfers(decode_workers: usize, extra: &str) -> dynsim::scenario::Scenario {
    let text = format!(
        "[workload]\nkind = \"synthetic\"\nrequests = 20\ngroups = 20\n\
         shared_prefix_tokens = 0\nrate_per_s = 1000.0\narrival = \"fixed\"\n\
         input = {{ dist = \"fixed\", tokens = 1000 }}\n\
         output = {{ dist = \"fixed\", tokens = 4 }}\n\
         [router]\npolicy = \"rr\"\n\
         [disagg]\nenabled = true\nprefill_workers = 1\ndecode_workers = {decode_workers}\n\
         link_gbps = 1.0\ntransfer_overhead_ms = 3.0\n{extra}"
    );
    parse_scenario(Path::new("transfers.toml"), &text, &[]).unwrap()
}

#[test]
fn a_prefill_worker_restart_loses_the_transfers_still_on_its_link() {
    // Twenty 1,000-token prompts at once, one prefill worker, a 1 GB/s link: each transfer
    // takes 114.7 ms, the last lands at 2.4 s. The prefill worker goes down at 500 ms: request
    // 3's transfer is half done and 4-19 wait behind it, their KV in the lost memory. Each goes
    // back to the router and is prefilled again; the stale hand-offs are dropped on arrival.
    // (Before, all 17 landed after the restart and none was re-routed.)
    let s = twenty_transfers(
        4,
        "[[faults]]\nkind = \"restart\"\nworker = 0\nat_ms = 500.0\ndown_ms = 100.0\n",
    );
    let r = run(&s);
    assert_eq!((r.acks, r.rejected), (20, 0));
    assert_eq!(r.rerouted, 17);
    assert_eq!(r.per_worker[0].routed, 37, "17 prompts prefilled twice");
    let decoded: u64 = r.per_worker[1..].iter().map(|w| w.completed).sum();
    assert_eq!(decoded, 20, "each request decoded once");
    // Without the fault nothing is lost.
    let mut clean = s.clone();
    clean.faults.clear();
    assert_eq!(run(&clean).rerouted, 0);
}

#[test]
fn a_decode_worker_restart_loses_the_transfers_on_their_way_to_it() {
    // Twenty 1,000-token prompts at once, one prefill worker (worker 0), two decode workers
    // (1 and 2, taking even and odd requests), a 1 GB/s link: each transfer takes 114.7 ms, the
    // last lands at 2.4 s. Decode worker 1 goes down at 500 ms and is back at 600 ms: the KV of
    // requests 4, 6, .., 18, on the link or queued for it, was being read into the memory the
    // restart lost. Each goes back to the router at 500 ms and is prefilled again; the stale
    // hand-offs are dropped on arrival. (Before, all 8 landed after the restart and were
    // decoded as if nothing had happened: none was re-routed.)
    let s = twenty_transfers(
        2,
        "[[faults]]\nkind = \"restart\"\nworker = 1\nat_ms = 500.0\ndown_ms = 100.0\n",
    );
    let (r, trace) = run_traced(&s);
    assert_eq!((r.acks, r.rejected), (20, 0));
    assert_eq!(r.per_worker[1].restarts, 1);
    assert_eq!(r.rerouted, 8);
    assert_eq!(r.per_worker[0].routed, 28, "8 prompts prefilled twice");
    let decoded: u64 = r.per_worker[1..].iter().map(|w| w.completed).sum();
    assert_eq!(decoded, 20, "each request decoded once");
    // Each is handed back by decode worker 1 when it goes down, not when its transfer lands.
    let handed_back: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains(r#""kind":"HandBack""#))
        .collect();
    assert_eq!(handed_back.len(), 8);
    for (line, request) in handed_back.iter().zip((4..=18).step_by(2)) {
        assert!(
            line.starts_with(r#"{"t_ns":500000000,"#)
                && line.contains(r#""from":"decode0","to":"router","request":"#)
                && line.contains(&format!(r#""request":{request},"#)),
            "request {request} handed back at the restart: {line}"
        );
    }
    // Without the fault nothing is lost.
    let mut clean = s.clone();
    clean.faults.clear();
    assert_eq!(run(&clean).rerouted, 0);
}

#[test]
fn a_transfer_lost_by_its_decode_worker_frees_the_prefill_link_at_once() {
    // The workload above: transfers of 114.688 ms (1,000 tokens x 114,688 bytes at 1 GB/s)
    // plus 3 ms of overhead, one at a time, to decode workers 1 and 2 in turn. Decode worker 1
    // goes down at 500 ms, while request 3's transfer (to worker 2) is on the link: the queued
    // transfers of 4, 6, .., 18 to worker 1 are lost and no longer hold the link, so 5, 7, ..,
    // 19 follow one another from the end of 3's. Before, each still waited for the lost one
    // before it: 229.376 ms apart.
    let s = twenty_transfers(
        2,
        "[[faults]]\nkind = \"restart\"\nworker = 1\nat_ms = 500.0\ndown_ms = 100.0\n",
    );
    let (r, trace) = run_traced(&s);
    // When each request's KV first reached decode worker 2 ("decode1").
    let landed = |request: u64| -> u64 {
        let line = trace
            .lines()
            .find(|l| {
                l.contains(r#""kind":"Handoff","from":"prefill0","to":"decode1","#)
                    && l.contains(&format!(r#""request":{request},"#))
            })
            .unwrap_or_else(|| panic!("request {request} reaches decode1"));
        let t = line.trim_start_matches(r#"{"t_ns":"#);
        t[..t.find(',').unwrap()].parse().unwrap()
    };
    const TRANSFER_NS: u64 = 114_688_000;
    assert!(
        landed(3) < 500_000_000 + TRANSFER_NS,
        "3 is on the link at 500 ms"
    );
    for k in (3..19).step_by(2) {
        assert_eq!(
            landed(k + 2) - landed(k),
            TRANSFER_NS,
            "request {} takes the link as {k} leaves it",
            k + 2
        );
    }
    // The first hand-offs of 5, 7, .., 19, sent for the old times, were dropped: each
    // request is decoded once.
    assert_eq!((r.acks, r.rejected, r.rerouted), (20, 0, 8));
    let decoded: u64 = r.per_worker[1..].iter().map(|w| w.completed).sum();
    assert_eq!(decoded, 20, "each request decoded once");
    let freed: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains(r#""kind":"LinkFreed","from":"decode0","to":"prefill0"}"#))
        .collect();
    assert!(
        freed.len() == 1 && freed[0].starts_with(r#"{"t_ns":500000000,"#),
        "the decode worker tells the prefill worker once, at once: {freed:?}"
    );
}

#[test]
fn a_disaggregated_request_leaves_its_prefill_workers_load_when_its_kv_lands() {
    // Four 1,000-token prompts 1 s apart on two prefill workers and one decode worker, routed
    // to the fewest requests in flight (the lowest number on ties). Each prefill and transfer
    // take well under 1 s; each 500-token answer about 2.9 s. A request counts on its prefill
    // worker until its KV lands (Dynamo's prefill router frees it when the hand-off completes),
    // so every arrival finds both prefill workers idle and takes worker 0. Before, it counted
    // until its answer was done: request 1 found worker 0 busy and went to worker 1 (3 and 1).
    let text = "[workload]\nkind = \"synthetic\"\nrequests = 4\ngroups = 4\n\
        shared_prefix_tokens = 0\nrate_per_s = 1.0\narrival = \"fixed\"\n\
        input = { dist = \"fixed\", tokens = 1000 }\noutput = { dist = \"fixed\", tokens = 500 }\n\
        [router]\npolicy = \"least-loaded\"\n\
        [disagg]\nenabled = true\nprefill_workers = 2\ndecode_workers = 1\nlink_gbps = 25.0\n";
    let s = parse_scenario(Path::new("landed.toml"), text, &[]).unwrap();
    let (r, trace) = run_traced(&s);
    assert_eq!(r.acks, 4);
    assert!(
        r.e2e_ms.p50 > 2000.0,
        "answers outlast the gaps between arrivals"
    );
    let routed: Vec<u64> = r.per_worker[..2].iter().map(|w| w.routed).collect();
    assert_eq!(routed, [4, 0]);
    let landed = trace
        .lines()
        .filter(|l| l.contains(r#""kind":"Landed","from":"decode0","to":"router""#))
        .count();
    assert_eq!(
        landed, 4,
        "the decode worker tells the router as each KV lands"
    );
}

#[test]
fn a_draining_decode_worker_waits_for_the_transfers_on_their_way_to_it() {
    // The workload above; at 500 ms the decode pool shrinks to one worker with a drain. The
    // leaving worker's transfers still on the link land after it: it leaves only when the
    // last has landed and been decoded. (Before, it counted itself idle with 9 transfers on
    // their way and left at once; each was handed back on landing and prefilled again.)
    let s = twenty_transfers(
        2,
        "[[scale]]\nat_s = 0.5\npool = \"decode\"\nworkers = 1\nleave = \"drain\"\n",
    );
    let r = run(&s);
    assert_eq!((r.acks, r.rejected), (20, 0));
    assert_eq!(r.rerouted, 0, "no transfer handed back");
    assert_eq!(r.per_worker[0].routed, 20, "each prompt prefilled once");
    let decoded: Vec<u64> = r.per_worker[1..3].iter().map(|w| w.completed).collect();
    assert_eq!(decoded.iter().sum::<u64>(), 20);
    assert!(
        decoded.iter().all(|&d| d == 10),
        "each decode worker decodes the requests handed to it: {decoded:?}"
    );
}

#[test]
fn a_draining_decode_worker_waits_for_a_transfer_landing_as_its_last_step_ends() {
    // Fixed 10 ms steps, 50 requests/s and a link that moves a 1,000-token prompt in exactly
    // 10 ms: times fall on a 10 ms grid. At 150 ms the decode pool shrinks to one worker with a
    // drain; at 160 ms the leaving worker's last decode stretch ends and request 7's hand-off
    // lands, both due then, the stretch's end first. The worker once counted a transfer landing
    // at that very instant as landed: it left, and the hand-off, delivered a moment later,
    // went back to the router to be prefilled again (1 re-routed, 41 prefills). (Four output
    // tokens: four decode steps each, as five made when the prefill worker's token counted.)
    let text = "[workload]\nkind = \"synthetic\"\nrequests = 40\ngroups = 40\n\
        shared_prefix_tokens = 0\nrate_per_s = 50.0\narrival = \"fixed\"\n\
        input = { dist = \"fixed\", tokens = 1000 }\noutput = { dist = \"fixed\", tokens = 4 }\n\
        [router]\npolicy = \"rr\"\n[timing]\nmodel = \"fixed\"\nservice_ms = 10.0\n\
        [disagg]\nenabled = true\nprefill_workers = 1\ndecode_workers = 2\n\
        link_gbps = 11.4688\ntransfer_overhead_ms = 0.0\n\
        [[scale]]\nat_s = 0.15\npool = \"decode\"\nworkers = 1\nleave = \"drain\"\n";
    let s = parse_scenario(Path::new("drain-grid.toml"), text, &[]).unwrap();
    let (r, trace) = run_traced(&s);
    assert_eq!((r.acks, r.rejected), (40, 0));
    // Request 7's KV lands on the draining worker (decode1, worker 3) as its stretch ends.
    assert!(
        trace.contains(
            r#"{"t_ns":160000000,"seq":130,"kind":"StepEnd","from":"decode1","to":"decode1""#
        ) && trace.contains(
            r#"{"t_ns":160000000,"seq":143,"kind":"Handoff","from":"prefill0","to":"decode1","request":7,"#
        ),
        "the stretch's end and the hand-off no longer coincide: this test checks nothing"
    );
    assert_eq!(r.rerouted, 0, "no transfer handed back");
    assert_eq!(r.per_worker[0].routed, 40, "each prompt prefilled once");
}

#[test]
fn decode_workers_take_turns_when_their_pool_has_empty_slots() {
    // A run that scales keeps twice each pool's workers as slots; the empty decode slots
    // passed their turns to the first decode worker (11, 3, 3, 3 of 20 requests).
    let text = "[workload]\nkind = \"synthetic\"\nrequests = 20\ngroups = 20\n\
        rate_per_s = 10.0\narrival = \"fixed\"\n\
        input = { dist = \"fixed\", tokens = 100 }\noutput = { dist = \"fixed\", tokens = 4 }\n\
        [router]\npolicy = \"rr\"\n\
        [disagg]\nenabled = true\nprefill_workers = 1\ndecode_workers = 4\n\
        [[scale]]\nat_s = 100.0\npool = \"prefill\"\nworkers = 1\n";
    let s = parse_scenario(Path::new("turns.toml"), text, &[]).unwrap();
    let r = run(&s);
    let decoded: Vec<u64> = r.per_worker[1..].iter().map(|w| w.completed).collect();
    assert_eq!(decoded, [5, 5, 5, 5]);
}

#[test]
fn a_decode_worker_restart_neither_loops_nor_loses_requests() {
    let mut s = lab("kv");
    s.disagg.enabled = true;
    s.disagg.prefill_workers = 1;
    s.disagg.decode_workers = 2;
    s.faults = vec![Fault::Restart {
        worker: 1, // the first decode worker
        at_ms: 100.0,
        down_ms: 1_000.0,
    }];
    let r = run(&s);
    assert_eq!(r.acks, 72);
    assert!(
        r.rerouted <= 2,
        "handed back at most what it held: {}",
        r.rerouted
    );
    // With every decode worker down, prefilled requests wait for one instead of bouncing.
    s.disagg.decode_workers = 1;
    s.timing.service_ms = 0.0;
    s.disagg.link_gbps = 1e6;
    let r = run(&s);
    assert_eq!(r.acks, 72);
    assert!(r.rerouted <= 2, "{}", r.rerouted);
}

#[test]
fn a_decode_worker_decodes_at_the_kv_it_holds_like_an_aggregated_worker() {
    // One request, 1,600-token prompt, 101 output tokens, 200 blocks of 16 tokens per worker:
    // its KV is about half of a worker's, so a decode step takes about
    // −25.74·0.5² + 54.01·0.5 + 5.74 = 26.3 ms, whether it decodes where it was prefilled or on
    // a decode worker that received its KV (which used to decode as if its KV were empty).
    let text = r#"
        [workload]
        kind = "synthetic"
        requests = 1
        shared_prefix_tokens = 0
        input = { dist = "fixed", tokens = 1600 }
        output = { dist = "fixed", tokens = 101 }
        [cluster]
        workers = 1
        kv_capacity_blocks = 200
    "#;
    let mut s = parse_scenario(Path::new("x.toml"), text, &[]).unwrap();
    let agg = run(&s).tpot_ms.p50;
    s.disagg.enabled = true;
    let dis = run(&s).tpot_ms.p50;
    assert!((agg - 26.3).abs() < 0.5, "aggregated {agg}");
    assert!(
        (dis - agg).abs() < 0.5,
        "disaggregated {dis} vs aggregated {agg}"
    );
}

#[test]
fn a_kv_link_carries_one_transfer_at_a_time() {
    // Four prompts of 1,000 tokens reach one prefill worker 1 ms apart; each moves
    // 1,000 x 114,688 bytes (Qwen3-0.6B) over 0.1 GB/s: 1,146.88 ms. One after another the
    // last arrives after 4 x 1,146.88 = 4,587.52 ms; side by side (as before) all four took
    // the link's full rate and the run ended after about 1.25 s.
    let text = r#"
name = "link"
[workload]
kind = "synthetic"
requests = 4
groups = 1
zipf_s = 0.0
shared_prefix_tokens = 0
rate_per_s = 1000.0
arrival = "fixed"
input = { dist = "fixed", tokens = 1000 }
output = { dist = "fixed", tokens = 2 }
[cluster]
workers = 1
block_size = 16
[router]
policy = "rr"
[disagg]
enabled = true
prefill_workers = 1
decode_workers = 1
link_gbps = 0.1
"#;
    let s = parse_scenario(Path::new("link.toml"), text, &[]).expect("valid");
    let r = run(&s);
    let transfer_ms = disagg::transfer_ms(1000, 114_688, 0.1);
    assert!((transfer_ms - 1146.88).abs() < 1e-9);
    assert!(
        r.duration_ms >= 4.0 * transfer_ms && r.duration_ms < 4.0 * transfer_ms + 100.0,
        "{}",
        r.duration_ms
    );
    // The first waits for nothing, the last for three transfers.
    assert!(r.ttft_ms.p99 > 3.5 * transfer_ms && r.ttft_ms.mean > 2.0 * transfer_ms);
}
