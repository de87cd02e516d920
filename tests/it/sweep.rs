//! `dynsim sweep` and `dynsim merge` through the real binary, on a small lab-workload base.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{bad, ok, write};

/// A lab-workload scenario small enough for a point to take a few milliseconds.
const BASE: &str = r#"name = "tiny"
seed = 1
[workload]
kind = "prefix-repeat"
prefixes = 4
reps = 3
prefix_len = 32
tail_len = 16
[cluster]
workers = 2
[router]
policy = "kv"
"#;

/// 3 workers x 2 policies x 2 seeds = 12 points.
const SWEEP: &str = r#"base = "base.toml"
metrics = ["hit_rate", "block_hit_rate", "ttft_ms.p50", "events.applied"]
[axes]
"cluster.workers" = [4, 2, 3]
"router.policy" = ["rr", "kv"]
seed = [1, 2]
"#;

fn setup(sweep: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", BASE);
    let path = write(dir.path(), "sweep.toml", sweep);
    (dir, path)
}

fn out(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// Every file of a folder, by name.
fn files(dir: &str) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn json(dir: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(Path::new(dir).join("results.json")).unwrap()).unwrap()
}

#[test]
fn jobs_do_not_change_any_output() {
    let (dir, sweep) = setup(SWEEP);
    let (one, two) = (out(dir.path(), "one"), out(dir.path(), "two"));
    ok(&["sweep", &sweep, "--out", &one, "--jobs", "1"]);
    ok(&["sweep", &sweep, "--out", &two, "--jobs", "2"]);
    let (a, b) = (files(&one), files(&two));
    assert!(a.contains_key("results.csv") && a.contains_key("results.json"));
    assert_eq!(a, b);
}

#[test]
fn merged_shards_equal_the_unsharded_sweep_byte_for_byte() {
    let (dir, sweep) = setup(SWEEP);
    let whole = out(dir.path(), "whole");
    ok(&["sweep", &sweep, "--out", &whole, "--jobs", "2"]);
    let shards: Vec<String> = (0..3).map(|i| out(dir.path(), &format!("s{i}"))).collect();
    for (i, s) in shards.iter().enumerate() {
        ok(&["sweep", &sweep, "--out", s, "--shard", &format!("{i}/3")]);
    }
    let merged = out(dir.path(), "merged");
    let mut args = vec!["merge"];
    args.extend(shards.iter().rev().map(String::as_str));
    args.extend(["--out", &merged]);
    ok(&args);
    let (w, m) = (files(&whole), files(&merged));
    assert_eq!(w.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
    assert_eq!(w.len(), 6, "results.json, results.csv and 4 plots");
    for (name, bytes) in &w {
        assert!(bytes == &m[name], "{name} differs");
    }
}

#[test]
fn a_shard_writes_its_points_and_no_plot() {
    let (dir, sweep) = setup(SWEEP);
    let s1 = out(dir.path(), "s1");
    ok(&["sweep", &sweep, "--out", &s1, "--shard", "1/3"]);
    let names: Vec<String> = files(&s1).into_keys().collect();
    assert_eq!(names, ["results.csv", "results.json"]);
    let v = json(&s1);
    let indices: Vec<u64> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [1, 4, 7, 10]);
    assert_eq!(v["points_total"], 12);
    let csv = std::fs::read_to_string(Path::new(&s1).join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    // A shard written over a complete sweep leaves no plot of the old results behind.
    let full = out(dir.path(), "full");
    ok(&["sweep", &sweep, "--out", &full]);
    assert!(files(&full).keys().any(|n| n.ends_with(".svg")));
    ok(&["sweep", &sweep, "--out", &full, "--shard", "0/3"]);
    let names: Vec<String> = files(&full).into_keys().collect();
    assert_eq!(names, ["results.csv", "results.json"]);
}

#[test]
fn merge_rejects_missing_shards_and_different_sweeps() {
    let (dir, sweep) = setup(SWEEP);
    let (s0, s1, s2) = (
        out(dir.path(), "s0"),
        out(dir.path(), "s1"),
        out(dir.path(), "s2"),
    );
    ok(&["sweep", &sweep, "--out", &s0, "--shard", "0/3"]);
    ok(&["sweep", &sweep, "--out", &s1, "--shard", "1/3"]);
    let merged = out(dir.path(), "merged");
    let err = bad(&["merge", &s0, &s1, "--out", &merged]);
    assert_eq!(
        err,
        "dynsim: merge: 4 of 12 points missing (is a shard missing?): 2, 5, 8, 11"
    );
    let err = bad(&["merge", &s0, &s1, &s1, "--out", &merged]);
    assert!(err.contains("points given more than once: 1 (in"), "{err}");
    let other = write(
        dir.path(),
        "other.toml",
        &SWEEP.replace("[4, 2, 3]", "[4, 2, 5]"),
    );
    ok(&["sweep", &other, "--out", &s2, "--shard", "2/3"]);
    let err = bad(&["merge", &s0, &s1, &s2, "--out", &merged]);
    assert_eq!(
        err,
        format!("dynsim: {s2}: not the same sweep as {s0}: axes differs")
    );
    let err = bad(&["merge", &s0, &merged, "--out", &merged]);
    assert!(err.contains("results.json: cannot read"), "{err}");
    assert!(!Path::new(&merged).exists(), "nothing written");
}

#[test]
fn shards_run_from_other_folders_on_the_same_files_merge() {
    // The same trace files, named relative to the sweep file and by absolute path: a shard
    // run as `sweep sweep.toml` inside the folder and one run with the sweep's absolute path
    // read the same files, so their input digests agree and they merge.
    let dir = tempfile::tempdir().unwrap();
    let trace: String = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/traces/mooncake_conversation_trace.jsonl"
    ))
    .unwrap()
    .lines()
    .take(12)
    .map(|l| format!("{l}\n"))
    .collect();
    for sub in ["a", "z"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    write(dir.path(), "a/t.jsonl", &trace);
    let half: String = trace.split_inclusive('\n').take(6).collect();
    write(dir.path(), "z/t.jsonl", &half);
    let base = "name = \"t\"\n[workload]\nkind = \"trace\"\npath = \"a/t.jsonl\"\n\
                format = \"mooncake\"\ntrace_block_size = 512\n[cluster]\nworkers = 2\n";
    write(dir.path(), "base.toml", base);
    let abs = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let sweep = write(
        dir.path(),
        "sweep.toml",
        &format!(
            "base = \"base.toml\"\nmetrics = [\"ttft_ms.p50\"]\n[axes]\n\
             \"workload.path\" = [\"a/t.jsonl\", {:?}, {:?}]\n",
            abs("z/t.jsonl"),
            abs("a/t.jsonl"),
        ),
    );
    let (s0, s1, whole) = (
        out(dir.path(), "s0"),
        out(dir.path(), "s1"),
        out(dir.path(), "w"),
    );
    ok(&["sweep", &sweep, "--out", &s0, "--shard", "0/2"]);
    let inside = crate::common::dynsim()
        .current_dir(dir.path())
        .args(["sweep", "sweep.toml", "--out", &s1, "--shard", "1/2"])
        .output()
        .unwrap();
    assert!(
        inside.status.success(),
        "{}",
        String::from_utf8_lossy(&inside.stderr)
    );
    assert_eq!(json(&s0)["contents"], json(&s1)["contents"]);
    ok(&["sweep", &sweep, "--out", &whole]);
    let merged = out(dir.path(), "m");
    ok(&["merge", &s0, &s1, "--out", &merged]);
    assert_eq!(files(&merged), files(&whole));
}

#[test]
fn the_inputs_digest_is_taken_before_the_points_run() {
    // A base scenario edited while the sweep runs: the points ran on the file as it was, and
    // results.json records its digest, not the edited file's (which a --resume or a merge
    // would then take for the inputs these points ran on).
    let (dir, path) = setup(SWEEP);
    let whole = out(dir.path(), "whole");
    ok(&["sweep", &path, "--out", &whole]);
    let sweep = dynsim::sweep::load_sweep(Path::new(&path)).unwrap();
    let points = sweep.load_points().unwrap();
    let base = dir.path().join("base.toml");
    let edit = || std::fs::write(&base, format!("{BASE}# edited\n")).unwrap();
    let outcome = dynsim::sweep::run_sweep(
        &sweep,
        points,
        dynsim::sweep::Shard::ALL,
        1,
        &edit,
        Vec::new(),
    )
    .unwrap();
    assert_eq!(
        outcome.results.contents.as_deref(),
        json(&whole)["contents"].as_str()
    );
}

#[test]
fn bad_sweep_files_exit_2_with_file_and_line() {
    let cases = [
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\nbogus = 1\n[axes]\nseed = [1]\n",
            ":3: bogus: unknown key",
        ),
        ("metrics = [\"hit_rate\"]\n[axes]\nseed = [1]\n", ":1: base: missing"),
        (
            "base = \"nope.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\nseed = [1]\n",
            ":1: base: cannot read",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\n",
            ":3: axes: no axis",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\nseed = [1]\n\"router.policy\" = \"rr\"\n",
            ":5: router.policy: must be a non-empty array",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\nseed = []\n",
            ":4: seed: must be a non-empty array",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\" \"x\"]\n[axes]\nseed = [1]\n",
            ":2: metrics: ",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\n\"cluster.workers\" = [\n  2,\n  0,\n]\n",
            ":6: cluster.workers = 0 must be at least 1",
        ),
        (
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\n\"router.policy\" = [\"rr\", \"best\"]\n",
            ":4: router.policy = \"best\" is not a policy",
        ),
    ];
    for (text, expected) in cases {
        let (dir, sweep) = setup(text);
        let outdir = out(dir.path(), "out");
        let err = bad(&["sweep", &sweep, "--out", &outdir]);
        assert!(
            err.starts_with(&format!("dynsim: {sweep}{expected}")),
            "{text:?}: {err}"
        );
        assert!(!Path::new(&outdir).exists());
    }
    let (dir, sweep) = setup(SWEEP);
    let outdir = out(dir.path(), "out");
    let err = bad(&["sweep", &sweep, "--out", &outdir, "--shard", "3/3"]);
    assert!(err.contains("--shard"), "{err}");
}

#[test]
fn an_unknown_metric_exits_2_and_writes_nothing() {
    let (dir, sweep) = setup(&SWEEP.replace("\"ttft_ms.p50\"", "\"ttft_ms.p55\""));
    let outdir = out(dir.path(), "out");
    let err = bad(&["sweep", &sweep, "--out", &outdir]);
    assert_eq!(
        err,
        format!(
            "dynsim: {sweep}:2: metrics: unknown metric \"ttft_ms.p55\": ttft_ms has p50, p90, p99, mean"
        )
    );
    assert!(!Path::new(&outdir).exists());
    let (dir, sweep) = setup(&SWEEP.replace("\"events.applied\"", "\"events\""));
    let err = bad(&["sweep", &sweep, "--out", &out(dir.path(), "out")]);
    assert!(err.contains("metric \"events\" is not a number"), "{err}");
}

#[test]
fn each_metric_gets_an_svg_plot_titled_by_it() {
    let (dir, sweep) = setup(SWEEP);
    let outdir = out(dir.path(), "out");
    ok(&["sweep", &sweep, "--out", &outdir]);
    for (title, file) in [
        (
            "hit rate (lab: repeats sent to a holder) against workers",
            "hit_rate.svg",
        ),
        ("TTFT p50 (ms) against workers", "ttft_ms_p50.svg"),
        ("KV events applied against workers", "events_applied.svg"),
    ] {
        let svg = std::fs::read_to_string(Path::new(&outdir).join(file)).unwrap();
        assert!(svg.starts_with("<svg"), "{file}");
        assert!(svg.contains(title), "{file}: its metric's human name");
        assert!(svg.contains(">\nrouting policy\n<"), "{file}: legend title");
        assert!(svg.contains(">\nkv\n<"), "{file}: legend entry");
        assert!(!svg.contains("ttft_ms.p50"), "{file}: no raw key");
    }
    // Either spelling of a latency names one metric.
    let spelled = SWEEP.replace("\"ttft_ms.p50\"", "\"ttft_p50_ms\"");
    let (dir2, sweep2) = setup(&spelled);
    let outdir2 = out(dir2.path(), "out");
    ok(&["sweep", &sweep2, "--out", &outdir2]);
    let a = json(&outdir);
    let b = json(&outdir2);
    assert_eq!(
        a["points"][3]["metrics"]["ttft_ms.p50"],
        b["points"][3]["metrics"]["ttft_p50_ms"]
    );
}

#[test]
fn points_and_axes_follow_the_file_order() {
    let (dir, sweep) = setup(SWEEP);
    let outdir = out(dir.path(), "out");
    ok(&["sweep", &sweep, "--out", &outdir]);
    let v = json(&outdir);
    assert_eq!(v["base"], "base.toml");
    let keys: Vec<&str> = v["axes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["cluster.workers", "router.policy", "seed"]);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 12);
    let p = &points[5]; // workers index 1 (2), policy index 0 (rr), seed index 1 (2)
    assert_eq!(p["index"], 5);
    assert_eq!(
        p["axes"],
        serde_json::json!({"cluster.workers": 2, "router.policy": "rr", "seed": 2})
    );
    let point_keys: Vec<&String> = p["axes"].as_object().unwrap().keys().collect();
    assert_eq!(point_keys, ["cluster.workers", "router.policy", "seed"]);
    let metric_keys: Vec<&String> = p["metrics"].as_object().unwrap().keys().collect();
    assert_eq!(
        metric_keys,
        [
            "hit_rate",
            "block_hit_rate",
            "ttft_ms.p50",
            "events.applied"
        ]
    );
    let csv = std::fs::read_to_string(Path::new(&outdir).join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "cluster.workers,router.policy,seed,hit_rate,block_hit_rate,ttft_ms.p50,events.applied"
    );
    assert!(lines[1].starts_with("4,rr,1,"), "{}", lines[1]);
    assert!(lines[6].starts_with("2,rr,2,"), "{}", lines[6]);
    assert!(lines[12].starts_with("3,kv,2,"), "{}", lines[12]);
    // kv routing never does worse than round-robin here.
    let hit = |i: usize| points[i]["metrics"]["hit_rate"].as_f64().unwrap();
    assert!(hit(2) >= hit(0));
}

#[test]
fn an_output_that_is_a_file_is_refused_before_any_point_runs() {
    let (dir, sweep) = setup(SWEEP);
    let file = write(dir.path(), "taken", "not a folder");
    let line = bad(&["sweep", &sweep, "--out", &file]);
    assert!(
        line.ends_with("is a file, not a folder (--out takes a folder)"),
        "{line}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a folder");
}

#[test]
fn warnings_are_kept_per_point_and_printed_once_per_kind() {
    // kv on 4 workers sends every request of a shared prefix to one worker: a hot spot at
    // each kv point with 4 workers (2 seeds; 4 requests, since fewer than the workers make
    // none); rr spreads them.
    let (dir, sweep) = setup(SWEEP);
    let o = out(dir.path(), "o");
    let run = crate::common::dynsim()
        .args(["sweep", &sweep, "--out", &o, "--jobs", "2"])
        .args(["--set", "workload.prefixes=1", "--set", "workload.reps=4"])
        .output()
        .unwrap();
    assert!(run.status.success());
    let points = json(&o)["points"].as_array().unwrap().clone();
    let warned: Vec<u64> = points
        .iter()
        .filter(|p| p["warnings"].as_array().is_some_and(|w| !w.is_empty()))
        .map(|p| p["index"].as_u64().unwrap())
        .collect();
    assert!(!warned.is_empty());
    let stderr = String::from_utf8(run.stderr).unwrap();
    let hot: Vec<&str> = stderr.lines().filter(|l| l.contains("hot spot")).collect();
    assert_eq!(hot.len(), 1, "one line for the kind: {stderr}");
    assert!(hot[0].contains("point "), "{}", hot[0]);
    let hot_points = points
        .iter()
        .filter(|p| p["warnings"].to_string().contains("hot spot"))
        .count();
    assert!(hot_points >= 2, "kv on 4 workers, two seeds");
    let more = match hot_points - 1 {
        1 => "(also at 1 more point)".to_string(),
        n => format!("(also at {n} more points)"),
    };
    assert!(hot[0].ends_with(&more), "{}", hot[0]);
}

#[test]
fn a_point_that_fails_is_named_by_its_axes() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = write(
        dir.path(),
        "sweep.toml",
        &format!(
            "base = {:?}\nmetrics = [\"hit_rate\"]\n[axes]\n\"timing.service_ms\" = [1.0, 1e12]\n",
            concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/rr.toml")
        ),
    );
    let o = out(dir.path(), "o");
    let line = bad(&[
        "sweep",
        &sweep,
        "--out",
        &o,
        "--set",
        "workload.output_tokens=100",
    ]);
    assert!(
        line.starts_with(&format!(
            "dynsim: {sweep}: point 1 (timing.service_ms = 1000000000000.0): scenario rr: \
             virtual time passed its end"
        )),
        "{line}"
    );
    assert!(!Path::new(&o).exists(), "nothing written");
}
