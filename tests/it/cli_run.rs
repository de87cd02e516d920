//! `dynsim run` and `dynsim diff` through the real binary, and bad scenarios.

use crate::common::{bad, dynsim, ok, write};

#[test]
fn bundled_lab_scenarios_give_the_lab_numbers() {
    let cases = [
        ("rr", 49),
        ("random", 48),
        ("kv", 60),
        ("events-on", 60),
        ("events-off", 49),
    ];
    for (name, hits) in cases {
        let out = ok(&["run", &format!("scenarios/{name}.toml"), "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hits"], hits, "{name}");
        assert_eq!(v["repeat_requests"], 60, "{name}");
        for key in [
            "requests",
            "hit_rate",
            "block_hit_rate",
            "events",
            "acks",
            "per_worker",
            "warnings",
        ] {
            assert!(v.get(key).is_some(), "{name}: missing {key}");
        }
    }
}

#[test]
fn lossy_and_late_scenarios_fall_between_on_and_off() {
    for name in ["lossy-bus", "late-events"] {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&["run", &format!("scenarios/{name}.toml"), "--json"]))
                .unwrap();
        let hits = v["hits"].as_u64().unwrap();
        assert!((49..60).contains(&hits), "{name}: {hits}");
    }
}

#[test]
fn set_overrides_any_key_and_seed_flag_sets_the_seed() {
    let rr = ok(&[
        "run",
        "scenarios/kv.toml",
        "--json",
        "--set",
        "router.policy=\"rr\"",
    ]);
    assert!(
        rr.contains(r#""policy":"rr""#) && rr.contains(r#""hits":49"#),
        "{rr}"
    );
    let bare = ok(&[
        "run",
        "scenarios/kv.toml",
        "--json",
        "--set",
        "router.policy=rr",
    ]);
    assert_eq!(rr, bare, "a bare word is taken as a string");
    let seeded = ok(&["run", "scenarios/random.toml", "--json", "--seed", "5"]);
    assert!(seeded.contains(r#""seed":5"#));
    let lossy = ok(&[
        "run",
        "scenarios/events-on.toml",
        "--json",
        "--set",
        "bus.drop_rate=1.0",
    ]);
    assert!(lossy.contains(r#""applied":0"#));
}

#[test]
fn events_off_warns_in_the_table_and_on_stderr() {
    let out = dynsim()
        .args(["run", "scenarios/events-off.toml"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stdout.contains("warning: router.policy = \"kv-events\""),
        "{stdout}"
    );
    assert!(stdout.contains("hits          49 of 60"), "{stdout}");
    assert!(stderr.contains("bus.publish = false"), "{stderr}");
}

#[test]
fn traces_are_identical_for_a_seed_and_diff_explains_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let t = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    ok(&["run", "scenarios/lossy-bus.toml", "--trace", &t("a.jsonl")]);
    ok(&["run", "scenarios/lossy-bus.toml", "--trace", &t("b.jsonl")]);
    ok(&[
        "run",
        "scenarios/lossy-bus.toml",
        "--seed",
        "2",
        "--trace",
        &t("c.jsonl"),
    ]);
    assert_eq!(
        std::fs::read(t("a.jsonl")).unwrap(),
        std::fs::read(t("b.jsonl")).unwrap()
    );
    let first = std::fs::read_to_string(t("a.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    for key in ["t_ns", "seq", "kind", "from", "to"] {
        assert!(line.get(key).is_some(), "trace line lacks {key}");
    }

    let same = dynsim()
        .args(["diff", &t("a.jsonl"), &t("b.jsonl")])
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).starts_with("identical"));

    let other = dynsim()
        .args(["diff", &t("a.jsonl"), &t("c.jsonl")])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(1));
    let text = String::from_utf8(other.stdout).unwrap();
    assert!(text.contains("first difference at line"), "{text}");
    assert!(text.contains("t_ns=") && text.contains("kind="), "{text}");
    for metric in [
        "routes.worker0",
        "hits",
        "events.published",
        "events.dropped",
        "events.delivered",
    ] {
        assert!(text.contains(metric), "{metric} missing from {text}");
    }
}

#[test]
fn diff_recomputes_the_run_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl").to_string_lossy().into_owned();
    let b = dir.path().join("b.jsonl").to_string_lossy().into_owned();
    ok(&["run", "scenarios/rr.toml", "--trace", &a]);
    ok(&["run", "scenarios/kv.toml", "--trace", &b]);
    let out = dynsim().args(["diff", &a, &b]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("hits")[1..], ["49", "60", "+11"]);
    assert_eq!(row("repeat_requests")[1..], ["60", "60", "+0"]);
}

#[test]
fn diff_counts_what_router_replicas_route_and_hear() {
    let dir = tempfile::tempdir().unwrap();
    let t = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let mut reports = Vec::new();
    for (sync, trace) in [
        ("\"none\"", t("a.jsonl")),
        ("\"active-load\"", t("b.jsonl")),
    ] {
        let sync = format!("router.sync={sync}");
        let json = ok(&[
            "run",
            "scenarios/router-replicas.toml",
            "--set",
            "workload.limit=60",
            "--set",
            &sync,
            "--json",
            "--trace",
            &trace,
        ]);
        reports.push(serde_json::from_str::<serde_json::Value>(&json).unwrap());
    }
    let out = dynsim()
        .args(["diff", &t("a.jsonl"), &t("b.jsonl")])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| -> [u64; 2] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {text}"));
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(2)
            .map(|x| x.parse().unwrap())
            .collect();
        [v[0], v[1]]
    };
    for (side, report) in reports.iter().enumerate() {
        let mut routed = 0;
        for w in report["per_worker"].as_array().unwrap() {
            let name = w["name"].as_str().unwrap();
            let n = row(&format!("routes.{name}"))[side];
            assert_eq!(
                n,
                w["routed"].as_u64().unwrap(),
                "routes.{name}, side {side}"
            );
            assert!(n > 0, "routes.{name} is 0 on side {side}: {text}");
            routed += n;
        }
        assert_eq!(routed, 60);
        assert_eq!(row("requests")[side], 60);
        assert_eq!(row("acks")[side], report["acks"].as_u64().unwrap());
        // A policy that learns every event it is sent (no gap recovery here) applies each
        // delivery; diff counts deliveries (what a router applied depends on its recovery,
        // which the trace does not carry).
        let delivered = row("events.delivered")[side];
        assert_eq!(delivered, report["events"]["applied"].as_u64().unwrap());
        assert_eq!(
            row("events.dropped")[side],
            report["events"]["dropped"].as_u64().unwrap()
        );
        assert!(delivered > 0, "{text}");
    }
}

#[test]
fn diff_of_bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.jsonl", "{not json\n");
    let line = bad(&["diff", &a, &a]);
    assert!(line.contains("a.jsonl:1: line: not JSON"), "{line}");
    bad(&["diff", "/no/such/trace.jsonl", &a]);
}

#[test]
fn diff_reads_traces_a_line_at_a_time_and_names_the_bad_line() {
    // diff read both traces whole into memory (about 1 GB for two 500 MB traces; a bundled
    // day-long scenario writes 23 GB), and a byte that is not UTF-8 was refused without a line.
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    ok(&["run", "scenarios/kv.toml", "--trace", &a.to_string_lossy()]);
    let text = std::fs::read(&a).unwrap();
    let mut b = text.clone();
    let third = b
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    b.insert(third, 0xff);
    let b_path = dir.path().join("b.jsonl");
    std::fs::write(&b_path, &b).unwrap();
    let (a, b) = (a.to_string_lossy(), b_path.to_string_lossy());
    let line = bad(&["diff", &a, &b]);
    assert!(
        line.ends_with("b.jsonl:3: line: not UTF-8, or longer than 16777216 bytes"),
        "{line}"
    );
    // A trace cut inside its last line is refused naming that line, whichever side it is on.
    let lines = text.iter().filter(|&&c| c == b'\n').count();
    let cut = write(
        dir.path(),
        "cut.jsonl",
        std::str::from_utf8(&text[..text.len() - 9]).unwrap(),
    );
    let line = bad(&["diff", &cut, &a]);
    assert!(
        line.contains(&format!("cut.jsonl:{lines}: line: not JSON")),
        "{line}"
    );
    assert!(ok(&["diff", &a, &a]).starts_with(&format!("identical ({lines} lines)")));
}

#[test]
fn diff_counts_lower_tier_events_as_the_report_does() {
    // The bus carries KvTierStored/KvTierRemoved like any KV event and the report counts them
    // as published and dropped; diff left them out (published 10,452 for the report's 21,554).
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl").to_string_lossy().into_owned();
    let json = ok(&[
        "run",
        "scenarios/kv-tiers.toml",
        "--set",
        "workload.limit=300",
        "--set",
        "bus.drop_rate=0.2",
        "--json",
        "--trace",
        &t,
    ]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let text = std::fs::read_to_string(&t).unwrap();
    assert!(
        text.contains(r#""kind":"KvTierStored""#),
        "the run uses a lower tier"
    );
    let out = ok(&["diff", &t, &t]);
    let row = |name: &str| -> u64 {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {out}"))
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let events = &report["events"];
    assert!(events["dropped"].as_u64().unwrap() > 0);
    assert_eq!(
        row("events.published"),
        events["published"].as_u64().unwrap()
    );
    assert_eq!(row("events.dropped"), events["dropped"].as_u64().unwrap());
}

#[test]
fn diff_counts_no_rejected_request_as_a_repeat() {
    // The report counts a rejected request only as rejected; diff counted its prefix's repeat
    // (60 repeat requests where the report, all 72 rejected, says 0).
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl").to_string_lossy().into_owned();
    let json = ok(&[
        "run",
        "scenarios/kv.toml",
        "--set",
        "cluster.kv_capacity_blocks=6",
        "--json",
        "--trace",
        &t,
    ]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["rejected"], 72);
    let out = ok(&["diff", &t, &t]);
    let row = out
        .lines()
        .find(|l| l.starts_with("repeat_requests"))
        .unwrap_or_else(|| panic!("no repeat_requests row in {out}"));
    let n: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(n, report["repeat_requests"].as_u64().unwrap(), "{out}");
}

#[test]
fn bad_scenarios_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "unknown.toml",
            "seed = 1\n[bus]\npublish = true\ndrop = 0.3\n",
            ":4: bus.drop: unknown field",
        ),
        (
            "type.toml",
            "seed = 1\n\n[cluster]\nworkers = \"two\"\n",
            ":4: cluster.workers: expected a whole number >= 0, got \"two\"",
        ),
        (
            "range.toml",
            "seed = 1\n[bus]\n\ndrop_rate = 1.5\n",
            ":4: bus.drop_rate = 1.5 is outside 0..=1",
        ),
        (
            "zero.toml",
            "[cluster]\nworkers = 0\n",
            ":2: cluster.workers = 0 must be at least 1",
        ),
        (
            "policy.toml",
            "[router]\npolicy = \"best\"\n",
            ":2: router.policy = \"best\" is not a policy (one of rr, random, kv, kv-events, cost, approx, dynamo, sglang, llm-d, vllm-session, vllm-prefix-aware, vllm-loadaware, least-loaded, power-of-two)",
        ),
        (
            "moved.toml",
            "[router]\npolicy = \"approx\"\nttl_s = 5.0\n",
            ":3: router.ttl_s = 5.0 moved to the policy's own table: [router.approx] ttl_s = ...",
        ),
        (
            "table.toml",
            "[router]\npolicy = \"cost\"\n\n[router.cost]\noverlap_weight = 1.0\ntemperature = -1.0\n",
            ":6: router.cost.temperature = -1.0 must be a finite number >= 0",
        ),
        (
            "table_key.toml",
            "[router.approx]\nttl = 5\n",
            ":2: router.approx.ttl = 5 unknown field `ttl`, expected `ttl_s`",
        ),
        (
            "table_type.toml",
            "[router.cost]\ntemperature = \"hot\"\n",
            ":2: router.cost.temperature = \"hot\" expected a number, got \"hot\"",
        ),
        (
            "not_policy.toml",
            "[router.fastest]\nspeed = 1\n",
            ":1: router.fastest = { speed = 1 } is not a [router] setting",
        ),
        ("syntax.toml", "[router\npolicy = 1\n", ":1:"),
        ("timing.toml", "seed = 1\n[engine.vllm]\nmax_num_seqs = 0\n", ":3: engine.vllm.max_num_seqs = 0 must be at least 1"),
        ("moved_scheduler.toml", "seed = 1\n[scheduler]\nmax_num_seqs = 4\n", ":2: scheduler: moved to [engine.vllm]"),
        ("engine_kind.toml", "[engine]\nkind = \"tgi\"\n", ":2: engine.kind: unknown variant `tgi`, expected one of `vllm`, `trtllm`, `sglang`"),
        ("inactive_vllm.toml", "[engine]\nkind = \"trtllm\"\n\n[engine.vllm]\nadmission = \"whole-prompt\"\n", ":5: engine.vllm.admission = \"whole-prompt\" only applies to engine.kind = \"vllm\", and this scenario's engine is \"trtllm\""),
        ("inactive_trtllm.toml", "[engine.trtllm]\nmax_batch_size = 4\n", ":2: engine.trtllm.max_batch_size = 4 only applies to engine.kind = \"trtllm\", and this scenario's engine is \"vllm\""),
        ("inactive_sglang.toml", "[engine.sglang]\nschedule_policy = \"lpm\"\n", ":2: engine.sglang.schedule_policy = \"lpm\" only applies to engine.kind = \"sglang\", and this scenario's engine is \"vllm\""),
        ("sglang_chunk.toml", "[engine]\nkind = \"sglang\"\n[cluster]\nblock_size = 16\n[engine.sglang]\nchunked_prefill_size = 100\n", ":6: engine.sglang.chunked_prefill_size = 100 must be a positive multiple of cluster.block_size (16: whole pages), or -1 for no chunking"),
        ("sglang_auto_chunk.toml", "[engine]\nkind = \"sglang\"\n[cluster]\nblock_size = 48\n[deployment]\nmodel = \"Qwen/Qwen3-8B\"\ngpu = \"h100_sxm\"\n", ":1: engine.sglang.chunked_prefill_size = \"auto\" is 8192 (SGLang's default on h100_sxm), which is not whole pages of cluster.block_size (48): set a multiple of it, or -1 for no chunking"),
        ("sglang_policy.toml", "[engine]\nkind = \"sglang\"\n[engine.sglang]\nschedule_policy = \"lof\"\n", ":4: engine.sglang.schedule_policy: unknown variant `lof`, expected `fcfs` or `lpm`"),
        ("trtllm_zero.toml", "[engine]\nkind = \"trtllm\"\n[engine.trtllm]\nmax_num_tokens = 0\n", ":4: engine.trtllm.max_num_tokens = 0 must be at least 1"),
        ("moved_batch.toml", "[timing]\nmax_batch = 4\n", ":2: timing.max_batch: replaced by the step scheduler's limit, [engine.vllm] max_num_seqs"),
        ("moved_service.toml", "[cluster]\nservice_ms = 4.0\n", ":2: cluster.service_ms: moved: the fixed step time is [timing] service_ms"),
        ("model.toml", "[timing]\nmodel = \"magic\"\n", ":2: timing.model: unknown variant `magic`, expected one of `steps`, `fixed`, `roofline`"),
        ("timing_key.toml", "[timing]\nprefill = [1.0]\n", ":2: timing.prefill: unknown field"),
        ("coeffs.toml", "[timing]\nprefill_coeffs = [1.0, 2.0]\n", ":2: timing.prefill_coeffs: invalid length"),
        ("inactive_service.toml", "[timing]\nservice_ms = 4.0\n", ":2: timing.service_ms = 4.0 only applies to timing.model = \"fixed\", and this scenario's model is \"steps\""),
        ("inactive_floor.toml", "[timing]\nmodel = \"fixed\"\ndecode_floor_ms = 2.0\n", ":3: timing.decode_floor_ms = 2.0 only applies to timing.model = \"steps\""),
        ("disagg.toml", "[disagg]\nenabled = true\n\nlink_gbps = 0.0\n", ":4: disagg.link_gbps = 0.0 must be a finite number > 0"),
        ("coloc.toml", "[disagg]\nenabled = true\ncolocated = true\nprefill_workers = 2\ndecode_workers = 1\n", ":5: disagg.decode_workers = 1 must equal prefill_workers"),
        ("fault.toml", "[cluster]\nworkers = 2\n\n[[faults]]\nkind = \"restart\"\nworker = 5\nat_ms = 1.0\ndown_ms = 2.0\n", ":6: faults[0].worker = 5 is not a worker"),
        ("fault_kind.toml", "[[faults]]\nkind = \"explode\"\nworker = 0\n", ":2: faults.kind: unknown variant"),
        ("fault_time.toml", "faults = [{ kind = \"restart\", worker = 0, at_ms = 1.0, down_ms = -2.0 }]\n", ":1: faults[0].down_ms = -2.0 must be a finite number > 0"),
        ("outage.toml", "[bus]\noutages = [{ start_ms = 5.0, end_ms = 1.0 }]\n", ":2: bus.outages[0].end_ms = 1.0 must be"),
        ("tagged.toml", "[workload]\nkind = \"prefix-repeat\"\nprefixes = 3\nbogus = 1\n", ":4: workload.bogus: unknown field"),
        ("capacity.toml", "[cluster]\nkv_capacity_blocks = \"lots\"\n", ":2: cluster.kv_capacity_blocks:"),
        ("on_gap.toml", "[router]\non_gap = \"retry\"\n", ":2: router.on_gap: unknown variant `retry`"),
        ("sync.toml", "[router]\nsync = \"all\"\n", ":2: router.sync: unknown variant `all`"),
        ("replicas.toml", "[router]\nreplicas = 0\n", ":2: router.replicas = 0 must be at least 1"),
        ("refresh.toml", "[router]\npolicy = \"rr\"\nsignal_refresh_ms = 50.0\n", ":3: router.signal_refresh_ms = 50.0 has no effect: router.policy = \"rr\" reads no load signals (those that do: llm-d); remove it or set it to 0"),
        ("silence.toml", "[router]\ngap_silence_ms = 0.0\n", ":2: router.gap_silence_ms = 0.0 must be a finite number > 0"),
        // The stream check ticks at half the shorter of the two: at 1e-9 ms a run never ended.
        ("silence_tiny.toml", "[router]\non_gap = \"replay\"\ngap_silence_ms = 0.5\n", ":3: router.gap_silence_ms = 0.5 must be at least 1 ms"),
        ("timeout_tiny.toml", "[router]\non_gap = \"replay\"\nrecovery_timeout_ms = 1e-9\n", ":3: router.recovery_timeout_ms = 1e-9 must be at least 1 ms"),
        ("refresh_tiny.toml", "[router]\npolicy = \"llm-d\"\nsignal_refresh_ms = 1e-6\n", ":3: router.signal_refresh_ms = 1e-6 must be 0 (exact at each decision) or at least 1 ms"),
        ("link.toml", "[bus]\nlink_gbps = 0.0\n", ":2: bus.link_gbps = 0.0 must be a finite number > 0"),
        ("buffer.toml", "[bus]\nreplay_buffer = 20000000\n", ":2: bus.replay_buffer = 20000000 must be at most 10000000"),
        ("ramp_open.toml", "[workload]\nkind = \"synthetic\"\nconcurrency_ramp_s = 2.0\n", ":3: workload.concurrency_ramp_s"),
        ("ramp_trace.toml", "[workload]\nkind = \"trace\"\npath = \"t.jsonl\"\nconcurrency = 2\nconcurrency_ramp_s = -1.0\n", ":5: workload.concurrency_ramp_s = -1.0 must be in 0..=1e9 seconds"),
        ("ramp_negative.toml", "[workload]\nkind = \"synthetic\"\nconcurrency = 4\nconcurrency_ramp_s = -1.0\n", ":4: workload.concurrency_ramp_s"),
        // A tagged table's errors point at the table: the line spelling the bad variant, or the
        // inline table lacking the field, is named instead.
        ("dist.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\ninput = { dist = \"nope\" }\n", ":4: workload.input: unknown variant `nope`"),
        ("no_dist.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\nrequests = 3\ninput = { tokens = 5 }\n", ":5: workload.input: missing field `dist`"),
        // A planner deciding every nanosecond would take the run's lifetime (it hung).
        ("planner_interval.toml", "[planner]\nkind = \"threshold\"\nadjustment_interval_s = 1e-30\n", ":3: planner.adjustment_interval_s = 1e-30 must be a number of seconds in 0.1..=1e9"),
        ("no_shape.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\nrate_schedule = { peak = 2.0, trough = 1.0 }\n", ":4: workload.rate_schedule: missing field `shape`"),
        ("no_kind.toml", "name = \"x\"\n[workload]\ninput = { dist = \"fixed\", tokens = 5 }\n", ":2: workload.kind: missing field `kind`"),
        // A type error in a tagged table is reported at the table too: the key holding the
        // refused value is named, in a sub-table, an inline table or an array's later element.
        ("tagged_type.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\nrequests = -3\n", ":4: workload.requests: expected a whole number >= 0, got -3"),
        ("tagged_inline.toml", "[workload]\nkind = \"synthetic\"\nrequests = 3\ninput = { dist = \"fixed\", tokens = \"abc\" }\n", ":4: workload.input.tokens: expected a whole number >= 0, got \"abc\""),
        ("tagged_sub.toml", "[workload]\nkind = \"synthetic\"\nrequests = 3\n[workload.input]\ndist = \"fixed\"\ntokens = 1.5\n", ":6: workload.input.tokens: expected a whole number >= 0, got 1.5"),
        ("tagged_planner.toml", "[planner]\nkind = \"threshold\"\nmin_workers = true\n", ":3: planner.min_workers: expected a whole number >= 0, got true"),
        ("tagged_fault.toml", "[[faults]]\nkind = \"restart\"\nworker = 0\nat_ms = 5.0\ndown_ms = 1.0\n[[faults]]\nkind = \"restart\"\nworker = 0\nat_ms = \"late\"\ndown_ms = 1.0\n", ":9: faults[1].at_ms: expected a number, got \"late\""),
        ("tagged_list.toml", "[workload]\nkind = \"synthetic\"\nrequests = [3]\n", ":3: workload.requests: expected a whole number >= 0, got a list"),
        // A tier sized in GB below one block of the model's KV held nothing, in silence (its
        // disk tier was never used).
        ("tier_gb.toml", "[deployment]\nmodel = \"Qwen/Qwen3-8B\"\ngpu = \"h100_sxm\"\n[kv.host]\ncapacity_gb = 0.001\n[kv.disk]\ncapacity_gb = 10.0\n", ":5: kv.host.capacity_gb = 0.001 holds no block: one block of 16 tokens of the model's KV takes 2359296 bytes"),
        ("tagged_table.toml", "[workload]\nkind = \"synthetic\"\ninput = 5\n", ":3: workload.input: expected a table, got 5"),
        // A value two keys hold: the one refused is named, whichever comes first
        // (`rate_per_s = 1.5` is fine, `requests = 1.5` not); of two that both refuse it, the one
        // serde reads first; lists, which cannot be told apart, leave the table named.
        ("tagged_twice.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\nrate_per_s = 1.5\nrequests = 1.5\n", ":5: workload.requests: expected a whole number >= 0, got 1.5"),
        ("tagged_twice_after.toml", "name = \"x\"\n[workload]\nkind = \"synthetic\"\nrequests = 1.5\nrate_per_s = 1.5\n", ":4: workload.requests: expected a whole number >= 0, got 1.5"),
        ("tagged_both.toml", "[workload]\nkind = \"synthetic\"\ninput = { dist = \"fixed\", tokens = -5 }\noutput = { dist = \"fixed\", tokens = -5 }\n", ":3: workload.input.tokens: expected a whole number >= 0, got -5"),
        ("tagged_lists.toml", "[workload]\nkind = \"synthetic\"\nrequests = [3]\ngroups = [3]\n", ":1: workload: expected a whole number >= 0, got a list"),
        // A sub-table written above its table's header lies outside the table's lines: the one
        // key after the header holding the value is not the one refused (input's, read first).
        ("tagged_above.toml", "[workload.input]\ndist = \"fixed\"\ntokens = -5\n[workload]\nkind = \"synthetic\"\noutput = { dist = \"fixed\", tokens = -5 }\n", ":4: workload: expected a whole number >= 0, got -5"),
        // A list of inline tables over several lines: the element's key, on its line.
        ("tagged_lines.toml", "name = \"x\"\nfaults = [\n  { kind = \"restart\", worker = 0, at_ms = 5.0, down_ms = 1.0 },\n  { kind = \"restart\", worker = 0, at_ms = \"late\", down_ms = 1.0 },\n]\n", ":4: faults[1].at_ms: expected a number, got \"late\""),
    ];
    for (name, text, needle) in cases {
        let path = write(dir.path(), name, text);
        let line = bad(&["run", &path]);
        assert!(
            line.contains(&format!("{name}{needle}")),
            "{line:?} should contain {name}{needle}"
        );
    }
    let line = bad(&["run", "/no/such/scenario.toml"]);
    assert!(
        line.contains("/no/such/scenario.toml: cannot read"),
        "{line}"
    );
    let line = bad(&["run", "scenarios/kv.toml", "--set", "bus.drop_rate=2"]);
    assert!(
        line.contains("--set: bus.drop_rate = 2.0 is outside 0..=1"),
        "{line}"
    );
    let line = bad(&["run", "scenarios/kv.toml", "--set", "router.policy=best"]);
    assert!(
        line.contains("--set: router.policy = \"best\" is not a policy"),
        "{line}"
    );
    let line = bad(&[
        "run",
        "scenarios/kv.toml",
        "--set",
        "scheduler.max_num_seqs=4",
    ]);
    assert!(
        line.contains("--set scheduler.max_num_seqs: moved to [engine.vllm]"),
        "{line}"
    );
}

#[test]
fn a_failed_run_leaves_no_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    bad(&[
        "run",
        "scenarios/kv.toml",
        "--set",
        "cluster.workers=0",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(!trace.exists());
}

#[test]
fn two_outputs_naming_one_file_are_refused_before_the_run() {
    // Both used to be written, the timeline over the trace, and the run exited 0.
    let dir = tempfile::tempdir().unwrap();
    let same = dir.path().join("same.out");
    let same = same.to_str().unwrap();
    let line = bad(&[
        "run",
        "scenarios/kv.toml",
        "--trace",
        same,
        "--perfetto",
        same,
    ]);
    assert!(
        line.starts_with("dynsim: --perfetto: names the same file as --trace"),
        "{line}"
    );
    assert!(!std::path::Path::new(same).exists());
}

#[test]
fn absurd_sizes_and_times_exit_2_instead_of_overflowing() {
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "sim",
                "--mode",
                "random",
                "--workers",
                "18446744073709551615",
            ],
            "--workers",
        ),
        (
            &["sim", "--mode", "kv", "--prefixes", "100000000000"],
            "--reps",
        ),
        (
            &["kvcost", "--tokens", "1500", "--gbps", "1e-320"],
            "--gbps",
        ),
        (
            &[
                "run",
                "scenarios/kv.toml",
                "--set",
                "cluster.workers=1000000000000",
            ],
            "must be at most 65536",
        ),
        (
            &[
                "run",
                "scenarios/kv.toml",
                "--set",
                "workload.interval_ms=1e300",
            ],
            "must be at most 1e12 ms",
        ),
        (
            &[
                "run",
                "scenarios/kv.toml",
                "--set",
                "disagg.model.layers=4611686018427387904",
            ],
            "overflow 64 bits",
        ),
    ];
    for (args, needle) in cases {
        let line = bad(args);
        assert!(line.contains(needle), "{args:?}: {line}");
    }
}

#[test]
fn overlapping_restarts_of_one_worker_are_rejected() {
    let line = bad(&[
        "run",
        "scenarios/kv.toml",
        "--set",
        r#"faults=[{kind="restart",worker=1,at_ms=100.0,down_ms=200.0},{kind="restart",worker=1,at_ms=200.0,down_ms=50.0}]"#,
    ]);
    assert!(line.contains("faults[1].at_ms = 200.0 overlaps"), "{line}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_stdout_write_is_an_error_not_a_panic() {
    for args in [
        &["sim", "--mode", "kv"][..],
        &["run", "scenarios/kv.toml", "--json"][..],
        &["kvcost", "--tokens", "1", "--gbps", "1"][..],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("dynsim"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("<stdout>: cannot write"));
    }
}

#[test]
fn schema_completions_and_pointers_to_the_right_command() {
    use crate::common::{bad, ok};
    let keys = ok(&["schema"]);
    for key in [
        "bus.drop_rate  (number, default 0.0)",
        "router.dynamo.router_approximate_cache_policy",
        "faults[].worker",
    ] {
        assert!(keys.contains(key), "{key} missing from dynsim schema");
    }
    for which in ["scenario", "report"] {
        let schema: serde_json::Value =
            serde_json::from_str(&ok(&["schema", "--json-schema", which])).unwrap();
        assert!(schema["$schema"]
            .as_str()
            .unwrap()
            .contains("json-schema.org"));
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&["completions", shell]);
        assert!(
            script.contains("replay") && script.contains("resume"),
            "{shell}"
        );
    }
    let line = bad(&["run", "data/traces/mooncake_conversation_trace.jsonl"]);
    assert!(
        line.contains("dynsim replay data/traces/mooncake_conversation_trace.jsonl"),
        "{line}"
    );
    // A scenario file that names no scenario is named after its file.
    let dir = tempfile::tempdir().unwrap();
    let empty = crate::common::write(dir.path(), "my-empty.toml", "");
    let report: serde_json::Value = serde_json::from_str(&ok(&["run", &empty, "--json"])).unwrap();
    assert_eq!(report["scenario"], "my-empty");
}

/// A conversation's next turn repeats the answer before it, and the worker keeps that answer's
/// full blocks cached as vLLM and TensorRT-LLM do: two turns of 640-token prompts and answers,
/// 64-token blocks, one worker with room. Turn 2's 30 blocks find turn 1's 10 prompt blocks and
/// the 9 answer blocks whose tokens all have KV (the answer's last token has none): 19 of the
/// run's 40 prompt blocks. SGLang caches a finished request's `fill_ids`, which no decode pass
/// extends past the prompt: 10, as if the answer were freed.
#[test]
fn the_next_turn_finds_the_answer_before_it_cached_as_its_engine_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "turns.toml",
        "name = \"turns\"\nseed = 1\n\
         [workload]\nkind = \"synthetic\"\nrequests = 2\ngroups = 1\nturns = 2\nshared_prefix_tokens = 0\n\
         input = { dist = \"fixed\", tokens = 640 }\noutput = { dist = \"fixed\", tokens = 640 }\n\
         [cluster]\nworkers = 1\nblock_size = 64\nkv_capacity_blocks = 1000\n\
         [router]\npolicy = \"rr\"\n",
    );
    for (engine, cached, reuse) in [
        ("vllm", 19, 0.475),
        ("trtllm", 19, 0.475),
        ("sglang", 10, 0.25),
    ] {
        let kind = format!("engine.kind={engine}");
        let v: serde_json::Value =
            serde_json::from_str(&ok(&["run", &path, "--set", &kind, "--json"])).unwrap();
        assert_eq!(
            (&v["prompt_blocks"], &v["cached_blocks"], &v["prefix_reuse"]),
            (
                &serde_json::json!(40),
                &serde_json::json!(cached),
                &serde_json::json!(reuse)
            ),
            "{engine}"
        );
    }
}

#[test]
fn rejected_requests_are_not_completions_of_a_worker_or_an_interval() {
    // A KV cache of 15 blocks of 64 tokens holds no 2,048-token shared prefix: every request
    // is rejected. Workers and intervals counted each as completed (intervals with a TTFT of
    // 0 ms); run-level and interval SLA attainment count them as misses.
    let text = ok(&[
        "run",
        "scenarios/scale.toml",
        "--json",
        "--set",
        "workload.requests=200",
        "--set",
        "cluster.workers=4",
        "--set",
        "workload.rate_per_s=8.0",
        "--set",
        "cluster.kv_capacity_blocks=15",
        "--set",
        "sla.ttft_p90_ms=500.0",
    ]);
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["rejected"], 200);
    for w in r["per_worker"].as_array().unwrap() {
        assert_eq!(w["completed"], 0, "{w}");
    }
    let intervals = r["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty());
    for i in intervals {
        assert_eq!(i["completed"], 0, "{i}");
        assert!(i["ttft_p90_ms"].is_null(), "{i}");
        assert!(i["prefix_reuse"].is_null(), "{i}");
    }
    assert!(intervals.iter().any(|i| i["sla_attainment"] == 0.0));
    assert_eq!(r["sla_attainment"], 0.0);
}

#[test]
fn diff_reads_a_trace_with_replayed_events() {
    // A replay request's trace line named "from" twice (its sender, then the first sequence
    // number wanted), and diff refused every trace of a run that recovered lost events.
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl").to_string_lossy().into_owned();
    ok(&[
        "run",
        "scenarios/event-gaps.toml",
        "--set",
        "workload.limit=200",
        "--trace",
        &a,
    ]);
    let text = std::fs::read_to_string(&a).unwrap();
    let replay = text
        .lines()
        .find(|l| l.contains("\"ReplayRequest\""))
        .expect("the run replays lost events");
    assert_eq!(replay.matches("\"from\":").count(), 1, "{replay}");
    assert!(ok(&["diff", &a, &a]).starts_with("identical"));
}

#[test]
fn router_replicas_count_a_repeat_against_every_request_before_it() {
    // Each replica kept its own set of prefix groups seen: 10 repeats with one replica, 7 with
    // two and 5 with four, where diff, reading the trace, counted 10 in each.
    let repeats = |replicas: &str| -> serde_json::Value {
        let set = format!("router.replicas={replicas}");
        let text = ok(&[
            "run",
            "scenarios/router-replicas.toml",
            "--json",
            "--set",
            "workload.limit=200",
            "--set",
            &set,
        ]);
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["repeat_requests"].clone()
    };
    assert_eq!(repeats("1"), 10);
    assert_eq!(repeats("2"), 10);
    assert_eq!(repeats("4"), 10);
}

#[test]
fn diff_and_the_warning_count_every_replicas_copy_of_an_event() {
    // Two replicas are each sent every event: diff counted deliveries against one copy (0
    // dropped where the report said 90) and the warning read "190 of 140 published".
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl").to_string_lossy().into_owned();
    let text = ok(&[
        "run",
        "scenarios/measured-2026-10-07.toml",
        "--json",
        "--trace",
        &t,
        "--set",
        "router.policy=\"kv-events\"",
        "--set",
        "cluster.kv_capacity_blocks=20",
        "--set",
        "router.replicas=2",
        "--set",
        "bus.drop_rate=0.3",
    ]);
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = &r["events"];
    let (published, dropped) = (
        events["published"].as_u64().unwrap(),
        events["dropped"].as_u64().unwrap(),
    );
    assert!(dropped > 0);
    let text = ok(&["diff", &t, &t]);
    let value = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value("events.dropped"), dropped, "{text}");
    assert_eq!(value("events.delivered"), 2 * published - dropped, "{text}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains(&format!(
            "of {} KV events ({published} published to each",
            2 * published
        )),
        "{warnings}"
    );
}

/// A negative number for a whole-number flag is refused naming the flag, as `--isl=-1` was;
/// before Dec 5 2026 clap read `-1` as an unknown argument ("unexpected argument '-1' found").
#[test]
fn a_negative_number_for_a_count_names_its_flag() {
    let cases: [&[&str]; 3] = [
        &[
            "bench",
            "--model",
            "Qwen/Qwen3-0.6B",
            "--gpu",
            "h100_sxm",
            "--isl",
            "-1",
            "--osl",
            "8",
            "--concurrency",
            "1",
        ],
        &["sim", "--mode", "rr", "--seed", "-1"],
        &[
            "compare",
            "scenarios/rr.toml",
            "scenarios/kv.toml",
            "--jobs",
            "-1",
            "--out",
            "x",
        ],
    ];
    for (args, flag) in cases.iter().zip(["--isl", "--seed", "--jobs"]) {
        let line = bad(args);
        assert!(
            line.contains(&format!("invalid value '-1' for '{flag}")),
            "{line}"
        );
    }
}

/// A fault after the last completion changed nothing the run measured: it is said, not
/// passed over; one inside the run is not.
#[test]
fn a_fault_the_run_outlived_is_warned_about() {
    let warnings = |at_ms: &str| {
        let set = format!(r#"faults=[{{kind="restart",worker=1,at_ms={at_ms},down_ms=50.0}}]"#);
        let out = ok(&["run", "scenarios/kv.toml", "--set", &set, "--json"]);
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        report["warnings"].to_string()
    };
    let late = warnings("1e6");
    assert!(
        late.contains("faults[0]: worker 1 went down at 1000000 ms, after the last request"),
        "{late}"
    );
    assert!(!warnings("100.0").contains("faults[0]"));
}

/// Router settings a run cannot act on are said: gap recovery for a policy that learns no KV
/// events, and replica settings with one replica; the same settings where they act are not.
#[test]
fn router_settings_without_effect_are_warned_about() {
    let warnings = |sets: &[&str]| {
        let mut args = vec!["run", "scenarios/rr.toml", "--json"];
        for set in sets {
            args.extend(["--set", set]);
        }
        let report: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
        report["warnings"].to_string()
    };
    let blind = warnings(&[r#"router.on_gap="replay""#, r#"router.sync="active-load""#]);
    assert!(
        blind.contains(r#"router.on_gap = \"replay\" has no effect: router.policy = \"rr\""#),
        "{blind}"
    );
    assert!(
        blind.contains("router.sync has no effect with one router replica"),
        "{blind}"
    );
    let acting = warnings(&[
        r#"router.policy="kv-events""#,
        r#"router.on_gap="replay""#,
        "router.replicas=2",
        r#"router.sync="active-load""#,
    ]);
    assert!(!acting.contains("has no effect"), "{acting}");
}
