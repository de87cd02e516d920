//! Inputs that pass validation and would then go wrong are refused in one line (exit 2): times
//! past the clock, trace rows that do not describe their prompt, runs that would need more
//! memory than the budget, overrides of the wrong type.

use crate::common::{bad, dynsim, ok, write};

#[test]
fn an_arrival_past_the_clock_names_the_trace_line_and_field() {
    let line = bad(&[
        "run",
        "scenarios/mooncake-conversation.toml",
        "--set",
        "workload.speedup=1e-9",
    ]);
    assert!(
        line.contains("mooncake_conversation_trace.jsonl:")
            && line.contains(": timestamp: ")
            && line.contains("past the clock's limit"),
        "{line}"
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "t.jsonl",
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n\
         {\"timestamp\": 1e300, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [2]}\n",
    );
    let line = bad(&["replay", &trace]);
    assert!(line.contains("t.jsonl:2: timestamp: "), "{line}");
}

#[test]
fn an_arrival_past_the_clock_from_a_rate_schedule_names_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(
        dir.path(),
        "s.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 3\n\
         rate_schedule = { shape = \"piecewise\", points = [[0.0, 1e-300]] }\n",
    );
    let line = bad(&["run", &s]);
    assert!(
        line.contains("s.toml:4: workload.rate_schedule")
            && line.contains("past the clock's limit"),
        "{line}"
    );
}

#[test]
fn a_run_that_would_pass_the_end_of_time_fails_instead_of_saturating() {
    let line = bad(&[
        "run",
        "scenarios/rr.toml",
        "--set",
        "timing.service_ms=1e12",
        "--set",
        "workload.output_tokens=100",
    ]);
    assert!(line.contains("virtual time passed its end"), "{line}");
}

/// A bandwidth so small that one transfer outlasts the clock (1e-300 GB/s) used to wrap its
/// end time around to a small one: the tier's loads, and the bus's snapshots, were instant.
/// Every such link now saturates, and the run fails with the clock's error (not a misleading
/// one about workers that never come, for the disaggregated KV link).
#[test]
fn a_link_too_slow_for_the_clock_fails_the_run_instead_of_wrapping() {
    for (scenario, key, limit) in [
        ("scenarios/kv-tiers.toml", "kv.host.h2d_gbps", true),
        ("scenarios/kv-tiers.toml", "kv.host.d2h_gbps", true),
        ("scenarios/disagg-one-gpu.toml", "disagg.link_gbps", false),
        ("scenarios/events-on.toml", "bus.link_gbps", false),
    ] {
        let set = format!("{key}=1e-300");
        let mut args = vec!["run", scenario, "--set", &set];
        if limit {
            args.extend(["--set", "workload.limit=300"]);
        }
        let line = bad(&args);
        assert!(
            line.contains("virtual time passed its end"),
            "{scenario} {set}: {line}"
        );
        assert!(!line.contains("none is coming"), "{scenario} {set}: {line}");
    }
}

#[test]
fn mooncake_rows_must_cover_their_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let rows = [
        r#"{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [1, 2]}"#,
        r#"{"timestamp": 1, "input_length": 100000, "output_length": 1, "hash_ids": [1]}"#,
        r#"{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [1, 3]}"#,
    ];
    let trace = write(dir.path(), "m.jsonl", &rows.join("\n"));
    let line = bad(&["replay", &trace]);
    assert!(
        line.contains("m.jsonl:2: hash_ids: 1 ids for input_length 100000: expected 196"),
        "{line}"
    );
    let report = ok(&["replay", &trace, "--skip-bad", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        (v["trace"]["rows"].as_u64(), v["trace"]["skipped"].as_u64()),
        (Some(2), Some(1))
    );
}

#[test]
fn overrides_of_the_wrong_type_name_the_key_and_what_it_takes() {
    let line = bad(&[
        "run",
        "scenarios/rr.toml",
        "--set",
        "cluster.kv_capacity_blocks=-5",
    ]);
    assert_eq!(
        line,
        "dynsim: --set cluster.kv_capacity_blocks: expected a whole number >= 1 or \
         \"unbounded\", got -5"
    );
    let line = bad(&["run", "scenarios/rr.toml", "--set", "cluster.workers=two"]);
    assert!(
        line.ends_with("expected a whole number >= 0, got \"two\""),
        "{line}"
    );
    let line = bad(&["run", "scenarios/rr.toml", "--set", "cluster\n.workers=2"]);
    assert!(line.contains("is not a dotted key"), "{line}");
}

#[test]
fn a_product_limit_names_both_keys_at_the_override() {
    let line = bad(&[
        "run",
        "scenarios/rr.toml",
        "--set",
        "workload.prefixes=100000000",
    ]);
    assert!(
        line.starts_with("dynsim: --set: workload.prefixes = 100000000 times workload.reps = 6"),
        "{line}"
    );
}

#[test]
fn a_run_that_would_need_more_memory_than_the_budget_is_refused_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "big.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 1000000\nrate_per_s = 200.0\n\
         [cluster]\nworkers = 8\n[router]\npolicy = \"kv-events\"\n",
    );
    // Unbounded caches of 16M blocks, and the instruments' entry for each.
    let line = bad(&["run", &scenario]);
    assert!(
        line.contains("would need about 2.4 GiB")
            && line.contains("ground truth 610.4 MiB")
            && line.contains("index audit 610.4 MiB")
            && line.contains("more than the budget of 2.0 GiB")
            && line.contains("cluster.kv_capacity_blocks"),
        "{line}"
    );
    // The same run with bounded caches needs little.
    let out = dynsim()
        .args(["run", &scenario, "--set", "workload.requests=2000"])
        .args(["--set", "cluster.kv_capacity_blocks=10000"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn requests_piling_up_past_the_budget_stop_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "flood.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 100000\nrate_per_s = 1e6\n\
         [cluster]\nworkers = 1\nkv_capacity_blocks = 1000\n[router]\npolicy = \"rr\"\n",
    );
    let out = dynsim()
        .env("DYNSIM_MEMORY_GIB", "0.02")
        .args(["run", &scenario])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("the requests in flight at"), "{stderr}");
    let out = dynsim()
        .env("DYNSIM_MEMORY_GIB", "lots")
        .args(["run", "scenarios/rr.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Snapshots re-asked for faster than a slow bus link carries them queue on the link: the run
/// stops at the budget naming the bus (before Dec 5 2026 the 1 MB/s resync of the README's
/// table peaked at 4.7 GB under a 1 GiB budget and exited 0). Without a link to queue on, the
/// same run fits the same budget.
#[test]
fn messages_queued_on_a_slow_bus_link_count_against_the_budget() {
    let run = |link: &[&str]| {
        let mut args = vec![
            "run",
            "scenarios/event-gaps.toml",
            "--set",
            "workload.limit=300",
            "--set",
            r#"router.on_gap="resync""#,
            "--set",
            "router.recovery_timeout_ms=1",
        ];
        args.extend(link);
        dynsim()
            .env("DYNSIM_MEMORY_GIB", "0.03")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--set", "bus.link_gbps=0.00001"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("the KV event bus holds"), "{stderr}");
    assert!(run(&[]).status.success());
}

#[test]
fn the_lab_sim_refuses_an_index_past_the_budget_instead_of_aborting() {
    let line = bad(&[
        "sim",
        "--mode",
        "kv",
        "--prefixes",
        "1",
        "--reps",
        "10000000",
        "--tail",
        "999984",
    ]);
    assert!(line.contains("the KV router would index up to"), "{line}");
}

/// A capacity far beyond what the workload fills costs nothing up front; remembering a
/// capacity of lost blocks (attributed misses) is estimated, and refused past the budget.
#[test]
fn a_huge_kv_capacity_costs_only_what_attribution_remembers() {
    let huge = [
        "run",
        "scenarios/rr.toml",
        "--set",
        "cluster.kv_capacity_blocks=50000000",
        "--set",
        "cluster.workers=64",
    ];
    let line = bad(&huge);
    assert!(line.contains("memory of lost blocks 47.7 GiB"), "{line}");
    let mut plain = huge.to_vec();
    plain.extend(["--set", "router.attribute_misses=false"]);
    ok(&plain);
}

#[test]
fn per_worker_allocations_are_estimated_before_the_run_allocates_them() {
    // Each worker allocates its actor, scheduler and empty pool when the run is built (2,304
    // bytes and a 16-cell name table: pools grow their name tables as names enter them, they
    // are not sized for the capacity). The most workers a scenario may have, 65,536, under a
    // budget below that: refused at once, with the estimate, no allocation failure.
    let out = dynsim()
        .env("DYNSIM_MEMORY_GIB", "0.1")
        .args([
            "run",
            "scenarios/dynamo-mocker.toml",
            "--set",
            "cluster.workers=65536",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("workers 152.0 MiB"), "{stderr}");
}

/// A router that leaves requests' own tails out of its index (nothing reads them: no request
/// is routed twice) is estimated with the blocks other requests could name, not every block:
/// 5,000 requests of 64 own-tail blocks (16-token blocks, a 256-token shared prefix of 4 groups
/// and 1,024 tokens of its own each) and unbounded caches run under a 41 MiB budget, audited
/// or not (the audit charged 12.2 MiB, an entry per pair held), where the same run with a fault
/// (a handed-back request is routed twice) is refused for its 29.3 MiB index.
#[test]
fn an_index_without_own_tails_is_estimated_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(
        dir.path(),
        "tails.toml",
        "[workload]\nkind = \"synthetic\"\nrequests = 5000\ngroups = 4\n\
         shared_prefix_tokens = 256\nrate_per_s = 40.0\n\
         input = { dist = \"fixed\", tokens = 1024 }\noutput = { dist = \"fixed\", tokens = 8 }\n\
         [cluster]\nworkers = 4\nblock_size = 16\nkv_capacity_blocks = \"unbounded\"\n\
         [router]\npolicy = \"dynamo\"\nattribute_misses = false\naudit_index = false\n\
         [bus]\npublish = true\n",
    );
    let run = |extra: &[&str]| {
        dynsim()
            .env("DYNSIM_MEMORY_GIB", "0.04")
            .args(["run", &scenario, "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let unread = run(&[]);
    assert!(
        unread.status.success(),
        "{}",
        String::from_utf8_lossy(&unread.stderr)
    );
    let audited = run(&["--set", "router.audit_index=true"]);
    assert!(
        audited.status.success(),
        "{}",
        String::from_utf8_lossy(&audited.stderr)
    );
    let faulty = std::fs::read_to_string(&scenario).unwrap()
        + "[[faults]]\nkind = \"restart\"\nworker = 0\nat_ms = 1.0\ndown_ms = 1.0\n";
    std::fs::write(&scenario, faulty).unwrap();
    let read = run(&["--set", "router.audit_index=true"]);
    assert_eq!(read.status.code(), Some(2));
    let line = String::from_utf8(read.stderr).unwrap();
    assert!(
        line.contains("routers' indexes 29.3 MiB")
            && line.contains("index audit 12.2 MiB")
            && line.contains("budget of 41.0 MiB"),
        "{line}"
    );
}
