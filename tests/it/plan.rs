//! `plan`, `compare` and the flags shared across commands (`--set` on `sweep`, `--out` checked
//! before any run).

use serde_json::Value as Json;

use crate::common::{bad, dynsim, ok, ok_with_stderr, write};

const SCENARIO: &str = r#"
seed = 1
[workload]
kind = "synthetic"
requests = 300
groups = 4
rate_per_s = 200.0
[cluster]
workers = 2
[router]
policy = "rr"
"#;

fn read_json(path: &std::path::Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).expect("written")).expect("JSON")
}

#[test]
fn plan_finds_the_fewest_workers_and_runs_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("plan");
    let table = ok(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=50",
        "--sla",
        "tpot_p50_ms<=20",
        "--policy",
        "rr",
        "--policy",
        "least-loaded",
        "--workers",
        "1..12",
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "8",
    ]);
    assert!(table.starts_with("fewest workers meeting ttft_p90_ms<=50, tpot_p50_ms<=20"));
    let plan = read_json(&out.join("plan.json"));
    assert_eq!(plan["search"], "workers");
    for p in plan["policies"].as_array().unwrap() {
        let answer = p["workers"].as_u64().expect("an answer in range");
        let points = p["points"].as_array().unwrap();
        let at = |w: u64| points.iter().find(|pt| pt["workers"] == w);
        let below = at(answer - 1).expect("the point below the answer was run");
        assert_eq!(below["meets"], false);
        let here = at(answer).unwrap();
        assert_eq!(here["meets"], true);
        assert!(here["metrics"]["ttft_p90_ms"].as_f64().unwrap() <= 50.0);
        let above = at(answer + 1).expect("and the point above");
        assert_eq!(p["monotone"], true);
        // The table shows both sides.
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("{} ", p["policy"].as_str().unwrap())))
            .unwrap();
        let verdict = if above["meets"] == true {
            "pass"
        } else {
            "fail"
        };
        for side in [
            format!(" {} fail ", answer - 1),
            format!(" {} {verdict} ", answer + 1),
        ] {
            assert!(row.contains(&side), "{row:?} lacks {side:?}");
        }
        assert!(points.len() < 12, "bisection, not a scan: {}", points.len());
    }
    for svg in ["ttft_p90_ms.svg", "tpot_p50_ms.svg"] {
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(text.contains("SLA ttft_p90_ms&lt;=50") || text.contains("SLA tpot_p50_ms&lt;=20"));
    }
    // Deterministic: the same answer file again.
    let again = dir.path().join("again");
    ok(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=50",
        "--sla",
        "tpot_p50_ms<=20",
        "--policy",
        "rr",
        "--policy",
        "least-loaded",
        "--workers",
        "1..12",
        "--out",
        again.to_str().unwrap(),
        "--jobs",
        "1",
    ]);
    assert_eq!(
        std::fs::read(out.join("plan.json")).unwrap(),
        std::fs::read(again.join("plan.json")).unwrap(),
        "the same points probed whatever the number of jobs (8 vs 1)"
    );
}

#[test]
fn plan_gathers_the_runs_warnings_into_plan_json_and_one_line_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    // Workers that publish nothing: every run of an events-fed router warns.
    let s = write(
        dir.path(),
        "s.toml",
        &SCENARIO.replace(
            r#"policy = "rr""#,
            "policy = \"kv-events\"\n[bus]\npublish = false",
        ),
    );
    let out = dir.path().join("plan");
    let o = dynsim()
        .args([
            "plan",
            &s,
            "--sla",
            "ttft_p90_ms<=50",
            "--workers",
            "1..8",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let plan = read_json(&out.join("plan.json"));
    let points = plan["policies"][0]["points"].as_array().unwrap();
    for pt in points {
        let warnings: Vec<&str> = pt["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        let blind = warnings
            .iter()
            .filter(|w| w.contains("applied no KV event"))
            .count();
        assert_eq!(blind, 1, "once per point: {warnings:?}");
    }
    let stderr = String::from_utf8(o.stderr).unwrap();
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("applied no KV event"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one summary line, not one per run: {stderr}"
    );
    assert!(
        lines[0].contains(&format!("(also at {} more runs)", points.len() - 1)),
        "{}",
        lines[0]
    );
}

#[test]
fn plan_finds_the_highest_load_and_says_when_nothing_meets_the_sla() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("plan");
    ok(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=60",
        "--workers",
        "3",
        "--load",
        "0.5..4",
        "--out",
        out.to_str().unwrap(),
    ]);
    let plan = read_json(&out.join("plan.json"));
    let p = &plan["policies"][0];
    let load = p["load"].as_f64().expect("an answer");
    assert!((0.5..4.0).contains(&load));
    let points = p["points"].as_array().unwrap();
    let above = points
        .iter()
        .filter(|pt| pt["load"].as_f64().unwrap() > load)
        .map(|pt| pt["load"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(
        above <= load * 1.011,
        "the failing point just above is run: {above} vs {load}"
    );
    let none = dir.path().join("none");
    let table = ok(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=0.001",
        "--workers",
        "1..3",
        "--out",
        none.to_str().unwrap(),
    ]);
    assert!(table.contains("none"), "{table}");
    assert_eq!(
        read_json(&none.join("plan.json"))["policies"][0]["workers"],
        Json::Null
    );
}

#[test]
fn plan_refuses_unclear_questions_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["--workers", "1..4", "--load", "1..2"],
            "vary workers or load, not both",
        ),
        // The point's rate is plan's override, made from --load: that flag is named, not --set.
        (
            &["--load", "0.5..1e30"],
            "--load: takes workload.rate_per_s out of range",
        ),
        (&[], "give one range"),
        (&["--workers", "4..1"], "MIN must not exceed MAX"),
        (
            &["--workers", "1..4", "--sla", "ttft_p91_ms<=4"],
            "is not a number in the report",
        ),
        (
            &["--workers", "1..4", "--sla", "ttft_p90_ms=4"],
            "is not KEY<=VALUE",
        ),
    ];
    // `plan INPUT --out o`, the SLA unless `extra` gives its own, then `extra`: refused.
    let refused = |input: &str, extra: &[&str]| {
        let mut args = vec!["plan", input, "--out", o];
        if !extra.contains(&"--sla") {
            args.extend(["--sla", "ttft_p90_ms<=100"]);
        }
        args.extend(extra);
        bad(&args)
    };
    for (extra, needle) in cases {
        let line = refused(&s, extra);
        assert!(line.contains(needle), "{line}");
    }
    assert!(!out.exists() || out.is_dir(), "no half-written output");
    // A closed loop's rate is ignored: scaling it changed nothing, and the plan answered the
    // range's highest load.
    let closed = write(
        dir.path(),
        "closed.toml",
        &SCENARIO.replace("[workload]\n", "[workload]\nconcurrency = 4\n"),
    );
    let line = refused(&closed, &["--load", "1..8"]);
    assert!(line.contains("--load: a closed-loop workload"), "{line}");
    // A bad trace row is the trace's, at its line, not the range's.
    let trace = write(
        dir.path(),
        "t.jsonl",
        "{\"timestamp\": 0, \"input_length\": 100, \"output_length\": 5, \"hash_ids\": [1]}\n\
         {\"timestamp\": 0, \"input_length\": 40160\n",
    );
    let line = refused(&trace, &["--workers", "1..4"]);
    assert!(
        line.starts_with(&format!("dynsim: {trace}:2: line: invalid JSON")),
        "{line}"
    );
    // A fault on worker 1 holds at the scenario's 2 workers but not at the range's 1: the
    // range is named, with the setting and where the file sets it.
    let faulty = write(
        dir.path(),
        "faulty.toml",
        &format!(
            "{SCENARIO}\n[[faults]]\nkind = \"restart\"\nworker = 1\nat_ms = 100.0\ndown_ms = 50.0\n"
        ),
    );
    let line = refused(&faulty, &["--workers", "1..4"]);
    assert!(
        line.starts_with("dynsim: --workers: at ")
            && line.contains(&format!("of the range, faults[0].worker = 1 ({faulty}:"))
            && line.contains("is not a worker"),
        "{line}"
    );
    // Flags that only describe a trace input are refused with a scenario, not ignored.
    for (flag, value) in [("--scenario", s.as_str()), ("--format", "azure")] {
        let line = refused(&s, &["--workers", "1..4", flag, value]);
        assert!(
            line.contains(flag) && line.contains("only with a trace input"),
            "{line}"
        );
    }
}

#[test]
fn a_lower_bound_sla_is_said_to_be_outside_what_the_bisection_assumes() {
    // block_hit_rate>= falls with workers where ttft<= rises: both ends of a range can fail
    // with points between meeting both, and the plan answered none without a word.
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("o");
    let o = out.to_str().unwrap();
    let (_, err) = ok_with_stderr(&[
        "plan",
        &s,
        "--out",
        o,
        "--workers",
        "1..3",
        "--sla",
        "ttft_p90_ms<=100000",
        "--sla",
        "block_hit_rate>=0.0",
    ]);
    assert!(
        err.contains("block_hit_rate>=0: the search assumes"),
        "{err}"
    );
    assert!(
        !err.contains("ttft_p90_ms<=100000: the search assumes"),
        "{err}"
    );
}

#[test]
fn compare_runs_scenarios_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "rr.toml", SCENARIO);
    let b = write(
        dir.path(),
        "kv.toml",
        &SCENARIO.replace(r#"policy = "rr""#, r#"policy = "kv""#),
    );
    let out = dir.path().join("cmp");
    let table = ok(&[
        "compare",
        &a,
        &b,
        "--set",
        "cluster.workers=3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(table.lines().nth(1).unwrap().starts_with("rr ") && table.contains("\nkv "));
    // Columns line up under a label of non-ASCII characters, ...
    let accented = write(dir.path(), "débit-équilibré.toml", SCENARIO);
    let wide_out = dir.path().join("cmp-wide");
    let wide = ok(&[
        "compare",
        &accented,
        &b,
        "--out",
        wide_out.to_str().unwrap(),
    ]);
    // Where each line's second column (the policy, right-aligned) ends, in characters.
    let policy_end = |line: &str| {
        let chars: Vec<char> = line.chars().collect();
        let mut tokens = 0;
        (1..=chars.len()).find(|&i| {
            let ends = chars[i - 1] != ' ' && chars.get(i).is_none_or(|&c| c == ' ');
            tokens += usize::from(ends);
            ends && tokens == 2
        })
    };
    let ends: Vec<_> = wide.lines().map(policy_end).collect();
    assert!(ends.iter().all(|&e| e.is_some() && e == ends[0]), "{wide}");
    // ... as wide as the label's 15 characters (not its 19 bytes), two spaces, 12 for the policy.
    assert_eq!(ends[0], Some(15 + 2 + 12), "{wide}");
    let json = read_json(&out.join("compare.json"));
    let scenarios = json["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    for s in scenarios {
        assert_eq!(s["ttft_cdf_ms"].as_array().unwrap().len(), 101);
        assert_eq!(
            s["report"]["per_worker"].as_array().unwrap().len(),
            3,
            "--set applied"
        );
    }
    for svg in ["ttft_cdf.svg", "tpot_cdf.svg", "per_worker_load.svg"] {
        assert!(std::fs::read_to_string(out.join(svg))
            .unwrap()
            .contains("<svg"));
    }
    assert!(bad(&["compare", &a, "--out", "x"]).contains("SCENARIO"));
    assert!(
        !table.contains("gpu-h"),
        "no scaling, no [sla]: the table as it was"
    );
}

/// A run of one-token outputs has no time per output token: its TPOT columns say `-`, not 0.
#[test]
fn compare_shows_no_tpot_for_one_token_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let table = ok(&[
        "compare",
        "scenarios/events-off.toml",
        "scenarios/scale-up-reuse.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    let cols = |name: &str| -> Vec<String> {
        let line = table.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(cols("events-off")[6..8], ["-", "-"], "{table}");
    assert!(
        cols("scale-up-reuse")[6].parse::<f64>().unwrap() > 0.0,
        "{table}"
    );
}

/// The per-worker bars go by worker name: the one-GPU cluster's `gpu0` (or a disaggregated
/// cluster's prefill and decode workers) is its own group, not drawn under another cluster's
/// `worker0` (as it was, by position, before Dec 5 2026).
#[test]
fn compare_draws_each_worker_under_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    ok(&[
        "compare",
        "scenarios/disagg-one-gpu.toml",
        "scenarios/rr.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(out.join("per_worker_load.svg")).unwrap();
    let json = read_json(&out.join("compare.json"));
    for s in json["scenarios"].as_array().unwrap() {
        for w in s["report"]["per_worker"].as_array().unwrap() {
            let name = w["name"].as_str().unwrap();
            assert!(svg.contains(name), "{name} has its own bar group");
        }
    }
}

/// One `--set` goes to every scenario and may fit one and not another: the error names which.
#[test]
fn a_compare_set_error_names_the_scenario_it_does_not_fit() {
    let line = bad(&[
        "compare",
        "scenarios/dynamo-mocker.toml",
        "scenarios/rr.toml",
        "--set",
        "workload.speedup=2",
        "--out",
        "x",
    ]);
    assert!(line.contains("(on scenarios/rr.toml)"), "{line}");
}

#[test]
fn compare_shows_what_a_planner_saves_and_what_it_costs() {
    let dir = tempfile::tempdir().unwrap();
    let body = "[workload]\nkind = \"synthetic\"\nrequests = 200\nrate_per_s = 20.0\n\
                [cluster]\nworkers = 3\nstartup_s = 1.0\n[sla]\nttft_p90_ms = 500.0\n";
    let fixed = write(dir.path(), "fixed.toml", body);
    let planned = write(
        dir.path(),
        "planned.toml",
        &format!("{body}[planner]\nkind = \"threshold\"\nmetric = \"queue\"\nadjustment_interval_s = 1.0\n"),
    );
    let out = dir.path().join("cmp");
    let table = ok(&["compare", &fixed, &planned, "--out", out.to_str().unwrap()]);
    let header = table.lines().next().unwrap();
    assert!(header.ends_with("gpu-h     sla  goodput"), "{header}");
    let json = read_json(&out.join("compare.json"));
    for (line, s) in table
        .lines()
        .skip(1)
        .zip(json["scenarios"].as_array().unwrap())
    {
        let r = &s["report"];
        let cols: Vec<&str> = line.split_whitespace().rev().take(3).collect();
        // Three significant digits: never 0 for a run that paid for GPUs.
        let gpu_h = r["gpu_seconds"].as_f64().unwrap() / 3600.0;
        let shown = cols[2].parse::<f64>().unwrap();
        assert!(
            gpu_h > 0.0 && (shown - gpu_h).abs() <= gpu_h * 5e-3,
            "{line}"
        );
        assert_eq!(
            cols[1].parse::<f64>().unwrap(),
            r["sla_attainment"].as_f64().unwrap()
        );
        assert_eq!(
            cols[0].parse::<f64>().unwrap(),
            r["goodput_rps"].as_f64().unwrap()
        );
    }
}

#[test]
fn sweep_takes_set_and_checks_out_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.toml", SCENARIO);
    let sweep = write(
        dir.path(),
        "s.toml",
        &format!(
            "base = {:?}\nmetrics = [\"throughput_rps\"]\n[axes]\nseed = [1, 2]\n",
            base
        ),
    );
    let out = dir.path().join("out");
    ok(&[
        "sweep",
        &sweep,
        "--out",
        out.to_str().unwrap(),
        "--set",
        "cluster.workers=5",
    ]);
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["set"][0], "cluster.workers=5");
    let file = write(dir.path(), "a_file", "x");
    let line = bad(&["sweep", &sweep, "--out", &file]);
    assert!(line.contains("is a file, not a folder"), "{line}");
}

#[test]
fn the_slurm_script_shards_and_merges_like_an_unsharded_sweep() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.toml", SCENARIO);
    let sweep = write(
        dir.path(),
        "s.toml",
        &format!(
            "base = {:?}\nmetrics = [\"ttft_ms.p90\"]\n[axes]\n\"cluster.workers\" = [1, 2, 3]\n\
             \"router.policy\" = [\"rr\", \"kv\"]\n",
            base
        ),
    );
    let out = dir.path().join("out");
    let binary = assert_cmd::cargo::cargo_bin("dynsim");
    let script = root.join("examples/slurm-array.sh");
    let run = |args: &[&str], index: Option<usize>| {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(&script).args(args).current_dir(root);
        cmd.env("SWEEP", &sweep)
            .env("OUT", &out)
            .env("DYNSIM", &binary)
            .env("SLURM_ARRAY_TASK_COUNT", "3")
            .env("SLURM_ARRAY_TASK_MIN", "1");
        if let Some(i) = index {
            cmd.env("SLURM_ARRAY_TASK_ID", i.to_string());
        }
        let o = cmd.output().expect("bash runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    // A 1-based array (sbatch --array=1-3): shards 0, 1 and 2 of 3.
    for i in 1..=3 {
        run(&[], Some(i));
    }
    for shard in 0..3 {
        assert!(out.join(format!("shard-{shard}")).is_dir(), "shard-{shard}");
    }
    run(&["merge"], None);
    let whole = dir.path().join("whole");
    ok(&["sweep", &sweep, "--out", whole.to_str().unwrap()]);
    for file in ["results.json", "results.csv", "ttft_ms_p90.svg"] {
        assert_eq!(
            std::fs::read(out.join("merged").join(file)).unwrap(),
            std::fs::read(whole.join(file)).unwrap(),
            "{file}"
        );
    }
}

#[test]
fn a_range_whose_largest_point_cannot_fit_is_refused_before_any_run() {
    // 65,536 workers take 152 MiB when built (src/budget.rs), above a 0.1 GiB budget.
    let dir = tempfile::tempdir().unwrap();
    let out = dynsim()
        .env("DYNSIM_MEMORY_GIB", "0.1")
        .args([
            "plan",
            "data/traces/mooncake_conversation_trace.jsonl",
            "--scenario",
            "scenarios/dynamo-mocker.toml",
            "--sla",
            "ttft_p90_ms<=1000",
            "--workers",
            "1..65536",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let line = stderr.trim_end();
    assert!(
        line.starts_with("dynsim: --workers: the largest point of the range cannot run"),
        "{line}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn fixed_timing_on_a_trace_is_refused_then_warned_and_bounds_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let base = [
        "plan",
        "data/traces/mooncake_conversation_trace.jsonl",
        "--scenario",
        "scenarios/rr.toml",
        "--set",
        "workload.limit=200",
        "--sla",
        "ttft_p90_ms<=100",
        "--workers",
        "1..2",
        "--out",
        out,
    ];
    let line = crate::common::bad(&base);
    assert!(line.contains("timing.model = \"fixed\"") && line.contains("--allow-fixed-timing"));
    let mut allowed = base.to_vec();
    allowed.push("--allow-fixed-timing");
    let o = crate::common::dynsim().args(&allowed).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("whatever its batch"),
        "warned on stderr: {stderr}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("plan.json")).unwrap()).unwrap();
    let warnings = plan["policies"][0]["points"][0]["warnings"].to_string();
    assert!(
        warnings.contains("timing.model"),
        "in the report: {warnings}"
    );
    // A latency bound below 0 can never be met: refused.
    let line = crate::common::bad(&[
        "plan",
        "scenarios/rr.toml",
        "--sla",
        "ttft_p90_ms<=-5",
        "--workers",
        "1..2",
        "--out",
        out,
    ]);
    assert!(line.contains("a latency bound must be positive"), "{line}");
}

#[test]
fn a_policy_meeting_nothing_shows_its_nearest_point() {
    let dir = tempfile::tempdir().unwrap();
    let o = crate::common::dynsim()
        .args([
            "plan",
            "scenarios/kv.toml",
            "--set",
            "timing.service_ms=30.0",
            "--sla",
            "ttft_p90_ms<=1",
            "--workers",
            "1..4",
            "--out",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    let row = table.lines().nth(2).unwrap();
    assert!(
        row.contains("none") && row.contains("nearest at workers "),
        "{row}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("plan.json")).unwrap()).unwrap();
    assert!(plan["policies"][0]["nearest"]["metrics"]["ttft_p90_ms"].is_number());
}

/// The table prints each number as plan.json holds it: a p99 of 1981.694 ms was shown as
/// 1981.69 (six significant digits).
#[test]
fn the_plan_table_prints_the_numbers_of_plan_json() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("plan");
    let table = ok(&[
        "plan",
        &s,
        "--sla",
        "e2e_p99_ms<=1",
        "--workers",
        "1..3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let plan = read_json(&out.join("plan.json"));
    let nearest = &plan["policies"][0]["nearest"];
    let value = &nearest["metrics"]["e2e_p99_ms"];
    assert!(value.as_f64().unwrap() >= 1000.0, "{value}");
    let row = table.lines().nth(2).unwrap();
    let shown = format!(
        "nearest at workers {}: e2e_p99_ms {value}",
        nearest["workers"]
    );
    assert!(row.ends_with(&shown), "{row:?} lacks {shown:?}");
}

/// Two SLAs on one metric: each gets its plot. The second was written over the first under the
/// same name, so the bound of 60 ms was drawn nowhere.
#[test]
fn two_slas_on_one_metric_get_a_plot_each() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let out = dir.path().join("plan");
    ok(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=60",
        "--sla",
        "ttft_p90_ms<=80",
        "--workers",
        "1..4",
        "--out",
        out.to_str().unwrap(),
    ]);
    for (file, bound) in [
        ("ttft_p90_ms.svg", "SLA ttft_p90_ms&lt;=60"),
        ("ttft_p90_ms_2.svg", "SLA ttft_p90_ms&lt;=80"),
    ] {
        let svg = std::fs::read_to_string(out.join(file)).unwrap_or_default();
        assert!(svg.contains(bound), "{file} lacks {bound:?}");
    }
}

/// A folder where an output file goes fails the command before any file is written: plan
/// wrote plan.json, then stopped at the SVG, leaving a new plan.json beside no plot (compare
/// likewise wrote compare.json and ttft_cdf.svg before tpot_cdf.svg).
#[test]
fn a_folder_in_an_output_files_place_leaves_the_folder_unwritten() {
    let dir = tempfile::tempdir().unwrap();
    let s = write(dir.path(), "s.toml", SCENARIO);
    let plan = dir.path().join("plan");
    std::fs::create_dir_all(plan.join("ttft_p90_ms.svg")).unwrap();
    let line = bad(&[
        "plan",
        &s,
        "--sla",
        "ttft_p90_ms<=60",
        "--workers",
        "1..3",
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert!(
        line.ends_with("ttft_p90_ms.svg: is a folder, not a file"),
        "{line}"
    );
    assert!(!plan.join("plan.json").exists(), "plan.json written");
    let cmp = dir.path().join("cmp");
    std::fs::create_dir_all(cmp.join("tpot_cdf.svg")).unwrap();
    let line = bad(&["compare", &s, &s, "--out", cmp.to_str().unwrap()]);
    assert!(
        line.ends_with("tpot_cdf.svg: is a folder, not a file"),
        "{line}"
    );
    let written: Vec<_> = std::fs::read_dir(&cmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(written, ["tpot_cdf.svg"], "nothing written beside it");
}
