//! Where outputs go and what an interrupt leaves: `-`, devices, FIFOs and symbolic links are
//! written, never replaced; SIGINT leaves no temporary file, keeps a sweep's or a plan's
//! finished points, and `--resume` finishes them into byte-identical files.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::{dynsim, write};

const RUN: [&str; 4] = ["run", "scenarios/rr.toml", "--set", "workload.reps=2"];

/// Every file of a folder (hidden ones included), by name; a FIFO's contents are not read.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let regular = e.path().is_file() && !e.file_type().unwrap().is_fifo();
            let bytes = if regular {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

#[test]
fn dev_null_stays_a_device_and_dash_is_stdout() {
    let out = dynsim()
        .args(RUN)
        .args(["--trace", "/dev/null", "--perfetto", "/dev/null"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let null = std::fs::metadata("/dev/null").unwrap().file_type();
    assert!(null.is_char_device(), "/dev/null was replaced");
    // `-`: the trace on stdout, the report on stderr.
    let out = dynsim().args(RUN).args(["--trace", "-"]).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().count() > 10);
    assert!(
        stdout.lines().all(|l| l.starts_with("{\"t_ns\"")),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("scenario      rr"));
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR")).join("-").exists());
    // Two outputs cannot share stdout.
    let two = dynsim()
        .args(RUN)
        .args(["--trace", "-", "--perfetto", "-"])
        .output()
        .unwrap();
    assert_eq!(two.status.code(), Some(2));
}

#[test]
fn a_fifo_is_written_in_place_and_a_symlink_s_target_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("trace.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            std::fs::File::open(fifo)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            text
        })
    };
    let out = dynsim()
        .args(RUN)
        .args(["--trace", fifo.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = reader.join().unwrap();
    assert!(text.lines().count() > 10, "the reader got the trace");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A symbolic link: its target is written, the link stays a link.
    let target = write(dir.path(), "real.jsonl", "old");
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = dynsim()
        .args(RUN)
        .args(["--trace", link.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&target)
        .unwrap()
        .starts_with("{\"t_ns\""));
    let names: Vec<String> = files(dir.path()).into_keys().collect();
    assert_eq!(
        names,
        ["link.jsonl", "real.jsonl", "trace.fifo"],
        "no temp left"
    );
}

/// Starts `dynsim args` with `--progress always`, waits for its first progress line on
/// stderr, sends SIGINT, and returns its exit code and the rest of stderr.
fn interrupt_after_first_progress(args: &[&str]) -> (Option<i32>, String) {
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_dynsim"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(["--progress", "always"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains('/'), "a progress line first: {line:?}");
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    (child.wait().unwrap().code(), rest)
}

#[test]
fn ctrl_c_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let timeline = dir.path().join("t.json");
    let (code, stderr) = interrupt_after_first_progress(&[
        "replay",
        "data/traces/mooncake_conversation_trace.jsonl",
        "--scenario",
        "scenarios/dynamo-mocker.toml",
        "--trace",
        trace.to_str().unwrap(),
        "--perfetto",
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        files(dir.path()).is_empty(),
        "{:?}",
        files(dir.path()).keys()
    );
}

#[test]
fn an_interrupted_calibrate_says_so_and_exits_130_blaming_no_row() {
    let (code, stderr) = interrupt_after_first_progress(&[
        "calibrate",
        "data/measurements/aic_silicon_dense_agg_train.csv",
        "--engine",
        "vllm",
        "--check",
        "--jobs",
        "1",
    ]);
    assert_eq!(code, Some(130), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.ends_with("dynsim: interrupted"), "{stderr}");
    assert!(!stderr.contains("measured row"), "{stderr}");
}

/// A sweep of 24 points of about a few hundred ms each in a debug build.
const SWEEP: &str = r#"base = "base.toml"
metrics = ["block_hit_rate", "ttft_p90_ms"]
[axes]
seed = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
"router.policy" = ["rr", "kv"]
"#;

const BASE: &str = r#"name = "slow"
[workload]
kind = "synthetic"
requests = 1500
groups = 8
rate_per_s = 200.0
[cluster]
workers = 4
kv_capacity_blocks = 2000
"#;

#[test]
fn an_interrupted_sweep_keeps_its_points_and_resumes_to_identical_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.toml", BASE);
    let sweep = write(dir.path(), "sweep.toml", SWEEP);
    let whole = dir.path().join("whole");
    let part = dir.path().join("part");
    let run = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "sweep",
            &sweep,
            "--jobs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = dynsim().args(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&whole, &[]);
    let (code, stderr) = interrupt_after_first_progress(&[
        "sweep",
        &sweep,
        "--jobs",
        "1",
        "--out",
        part.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    let kept = files(&part);
    let names: Vec<&String> = kept.keys().collect();
    assert_eq!(
        names,
        ["results.csv", "results.json"],
        "partial: no plot, no temp"
    );
    let partial: serde_json::Value = serde_json::from_slice(&kept["results.json"]).unwrap();
    let points = partial["points"].as_array().unwrap().len();
    assert!((1..24).contains(&points), "{points} points kept");
    // The base scenario edited since: its points would not be the kept ones'. Refused, and
    // the kept points are left as they were.
    let base = dir.path().join("base.toml");
    std::fs::write(&base, BASE.replace("requests = 1500", "requests = 1501")).unwrap();
    let o = dynsim()
        .args([
            "sweep",
            &sweep,
            "--resume",
            "--jobs",
            "1",
            "--out",
            part.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "cannot resume: not the same sweep (the digest of its input files (contents) differs)"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(files(&part), kept);
    std::fs::write(&base, BASE).unwrap();
    run(&part, &["--resume"]);
    assert_eq!(
        files(&part),
        files(&whole),
        "resumed = uninterrupted, byte for byte"
    );
    // Another sweep's results are not resumed.
    let other = write(
        dir.path(),
        "other.toml",
        &SWEEP.replace("\"kv\"", "\"random\""),
    );
    let o = dynsim()
        .args(["sweep", &other, "--resume", "--out", part.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not the same sweep (axes differs)"));
}

#[test]
fn an_interrupted_plan_resumes_to_identical_files() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(dir.path(), "base.toml", BASE);
    let whole = dir.path().join("whole");
    let part = dir.path().join("part");
    let plan = |out: &Path| -> Vec<String> {
        [
            "plan",
            &scenario,
            "--sla",
            "ttft_p90_ms<=400",
            "--policy",
            "rr",
            "--policy",
            "kv",
            "--workers",
            "1..8",
            "--jobs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let args = plan(&whole);
    let o = dynsim().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = plan(&part);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stderr) = interrupt_after_first_progress(&refs);
    assert_eq!(code, Some(130), "{stderr}");
    let kept = files(&part);
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["plan.partial.json"]);
    let mut resumed = args.clone();
    resumed.push("--resume".into());
    // The scenario edited since (one more request): its runs are not the kept ones, and
    // resuming would mix the two. Refused, naming what changed, the kept runs left as they were.
    std::fs::write(
        &scenario,
        BASE.replace("requests = 1500", "requests = 1501"),
    )
    .unwrap();
    let o = dynsim().args(&resumed).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("plan.partial.json: cannot resume: it belongs to another plan (the input files' contents changed)"),
        "{stderr}"
    );
    assert_eq!(files(&part), kept);
    std::fs::write(&scenario, BASE).unwrap();
    // The same scenario spelled another way (as from another folder) is the same plan.
    let respelled = format!("{}/./base.toml", dir.path().display());
    assert_eq!(resumed[1], scenario);
    resumed[1] = respelled;
    let o = dynsim().args(&resumed).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        files(&part),
        files(&whole),
        "resumed = uninterrupted, byte for byte"
    );
    // Another SLA: named.
    let mut other = resumed.clone();
    other[3] = "ttft_p90_ms<=300".into();
    std::fs::write(part.join("plan.partial.json"), &kept["plan.partial.json"]).unwrap();
    let o = dynsim().args(&other).output().unwrap();
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("(the SLAs changed)"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_partial_plan_file_that_is_not_one_is_refused_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write(dir.path(), "base.toml", BASE);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for (text, needle) in [
        (
            "{\"plan\": {},\n\"points\": [",
            "plan.partial.json:2: line: not a plan's partial result",
        ),
        (
            "{\"plan\": {},\n\"points\": 7}",
            "plan.partial.json:2: points: not a plan's partial result",
        ),
    ] {
        std::fs::write(out.join("plan.partial.json"), text).unwrap();
        let o = dynsim()
            .args([
                "plan",
                &scenario,
                "--sla",
                "ttft_p90_ms<=400",
                "--workers",
                "1..2",
            ])
            .args(["--out", out.to_str().unwrap(), "--resume"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    }
}

/// Each command's files as given, by another spelling (`./`), through a symbolic link and a
/// hard link: an output naming one is refused before any work (exit 2, one line naming the
/// flag and the input), and the input is left as it was.
#[test]
fn an_output_naming_an_input_is_refused_and_the_input_kept() {
    use crate::common::bad;
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let scenario = write(
        dir.path(),
        "s.toml",
        &std::fs::read_to_string("scenarios/lossy-bus.toml").unwrap(),
    );
    std::os::unix::fs::symlink("s.toml", dir.path().join("link.toml")).unwrap();
    std::fs::hard_link(&scenario, dir.path().join("hard.toml")).unwrap();
    let dotted = format!("{}/./s.toml", dir.path().display());
    let trace = write(
        dir.path(),
        "t.jsonl",
        &std::fs::read_to_string("data/traces/mooncake_conversation_trace.jsonl")
            .unwrap()
            .lines()
            .take(3)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    );
    let measured = write(
        dir.path(),
        "m.jsonl",
        "{\"mode\":\"agg\",\"input\":1,\"conc\":1,\"rep\":1,\"ttft_p50_ms\":1}\n\
         {\"mode\":\"disagg\",\"input\":1,\"conc\":1,\"rep\":1,\"ttft_p50_ms\":2}\n",
    );
    let csv_text =
        std::fs::read_to_string("data/measurements/aic_silicon_dense_agg_train.csv").unwrap();
    let mut lines = csv_text.lines();
    let mut rows = format!("{}\n", lines.next().unwrap());
    for l in lines.filter(|l| l.contains(",vllm,")).take(6) {
        rows.push_str(l);
        rows.push('\n');
    }
    let csv = write(dir.path(), "c.csv", &rows);
    // A scenario replaying a trace by a path relative to it.
    let replaying = write(
        dir.path(),
        "r.toml",
        "[workload]\nkind = \"trace\"\npath = \"t.jsonl\"\n",
    );
    let (link, hard) = (d("link.toml"), d("hard.toml"));
    let before = files(dir.path());
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec!["run", &scenario, "--trace", &scenario],
            "--trace",
            "the scenario",
        ),
        (
            vec!["run", &scenario, "--perfetto", &dotted],
            "--perfetto",
            "the scenario",
        ),
        (
            vec!["run", &scenario, "--trace", &link],
            "--trace",
            "the scenario",
        ),
        (
            vec!["run", &scenario, "--trace", &hard],
            "--trace",
            "the scenario",
        ),
        (
            vec!["run", &replaying, "--trace", &trace],
            "--trace",
            "the trace",
        ),
        (
            vec!["replay", &trace, "--trace", &trace],
            "--trace",
            "the trace",
        ),
        (
            vec![
                "replay",
                &trace,
                "--scenario",
                &scenario,
                "--perfetto",
                &scenario,
            ],
            "--perfetto",
            "the base scenario",
        ),
        (
            vec!["summarize", &measured, &measured],
            "OUTPUT",
            "the measurements",
        ),
        (
            vec!["calibrate", &csv, "--check", "--predictions", &csv],
            "--predictions",
            "the measurements",
        ),
    ];
    for (args, flag, what) in &cases {
        let line = bad(args);
        assert!(
            line.starts_with(&format!("dynsim: {flag}: names "))
                && line.contains(&format!("{what} this command reads")),
            "{args:?}: {line}"
        );
    }
    assert_eq!(
        files(dir.path()),
        before,
        "every input as it was, nothing written"
    );
}

/// A folder output writing over one of the command's inputs (a shard's results merged into
/// that shard's folder, lab's measurements named like its summary) is refused before any work;
/// an input beside the outputs that the command does not write is no concern.
#[test]
fn a_folder_output_writing_over_an_input_is_refused() {
    use crate::common::{bad, ok};
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.toml",
        "[workload]\nkind = \"prefix-repeat\"\nreps = 2\n",
    );
    let sweep = write(
        dir.path(),
        "s.toml",
        &format!("base = {base:?}\nmetrics = [\"hit_rate\"]\n[axes]\nseed = [1, 2]\n"),
    );
    let shard = |i: usize| {
        let out = dir.path().join(format!("shard{i}"));
        let spec = format!("{i}/2");
        ok(&[
            "sweep",
            &sweep,
            "--shard",
            &spec,
            "--out",
            out.to_str().unwrap(),
        ]);
        out.to_str().unwrap().to_string()
    };
    let (s0, s1) = (shard(0), shard(1));
    let kept = files(Path::new(&s0));
    let line = bad(&["merge", &s0, &s1, "--out", &s0]);
    assert!(
        line.starts_with("dynsim: --out: would write over ")
            && line.contains("results.json, a shard's results this command reads"),
        "{line}"
    );
    assert_eq!(files(Path::new(&s0)), kept, "the shard as it was");
    // The same folder by another path.
    let line = bad(&["merge", &s0, &s1, "--out", &format!("{s1}/../shard0")]);
    assert!(line.contains("a shard's results"), "{line}");
    // Lab's --measured named like the summary lab writes beside it.
    let lab = dir.path().join("lab");
    std::fs::create_dir(&lab).unwrap();
    let measured = write(
        &lab,
        "measured.json",
        "{\"mode\":\"agg\",\"input\":1,\"conc\":1,\"rep\":1,\"ttft_p50_ms\":1}\n",
    );
    let line = bad(&[
        "lab",
        "--out",
        lab.to_str().unwrap(),
        "--measured",
        &measured,
    ]);
    assert!(
        line.contains("the measurements this command reads"),
        "{line}"
    );
    assert_eq!(files(&lab).len(), 1, "nothing written");
    // The sweep file and its base beside the outputs are not written over: allowed.
    ok(&["sweep", &sweep, "--out", dir.path().to_str().unwrap()]);
}

/// A folder that cannot be made fails in a moment, before any run, for every command with an
/// output folder: one line on stderr (no progress), naming the folder and the system's reason.
#[test]
fn an_output_folder_that_cannot_be_made_fails_before_any_work() {
    use crate::common::bad;
    let dir = tempfile::tempdir().unwrap();
    let base = write(
        dir.path(),
        "base.toml",
        "[workload]\nkind = \"prefix-repeat\"\nreps = 2\n",
    );
    let sweep = write(
        dir.path(),
        "s.toml",
        &format!("base = {base:?}\nmetrics = [\"hit_rate\"]\n[axes]\nseed = [1, 2]\n"),
    );
    let always = ["--progress", "always"];
    let with_progress = |args: &[&str]| -> Vec<String> {
        args.iter().chain(&always).map(|a| a.to_string()).collect()
    };
    let cases: Vec<Vec<String>> = vec![
        with_progress(&[
            "plan",
            &base,
            "--sla",
            "ttft_p90_ms<=100",
            "--workers",
            "1..3",
            "--out",
            "/proc/dynsim-plan",
        ]),
        with_progress(&[
            "compare",
            "scenarios/rr.toml",
            "scenarios/kv.toml",
            "--out",
            "/proc/dynsim-compare",
        ]),
        with_progress(&["sweep", &sweep, "--out", "/proc/dynsim-sweep"]),
        with_progress(&[
            "calibrate",
            "data/measurements/aic_silicon_dense_agg_train.csv",
            "--check",
            "--plots",
            "/proc/dynsim-plots",
        ]),
        vec!["lab".into(), "--out".into(), "/proc/dynsim-lab".into()],
        vec![
            "merge".into(),
            dir.path().display().to_string(),
            "--out".into(),
            "/proc/dynsim-merge".into(),
        ],
    ];
    for args in &cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let line = bad(&refs);
        assert!(
            line.contains("/proc/dynsim-")
                && line.contains(": cannot create the folder: ")
                && line.contains("(os error"),
            "{args:?}: {line}"
        );
    }
}
