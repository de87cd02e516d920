//! The lab commands (`sim`, `kvcost`, `summarize`, `lab`) through the real binary.

use crate::common::{bad, ok, write};

#[test]
fn sim_defaults_print_the_reference_lines() {
    let cases = [
        (
            vec!["--mode", "rr"],
            r#"{"mode":"rr","workers":2,"requests":72,"repeat_requests":60,"hits":49,"hit_rate":0.8167}"#,
        ),
        (
            vec!["--mode", "random"],
            r#"{"mode":"random","workers":2,"requests":72,"repeat_requests":60,"hits":48,"hit_rate":0.8}"#,
        ),
        (
            vec!["--mode", "kv"],
            r#"{"mode":"kv","workers":2,"requests":72,"repeat_requests":60,"hits":60,"hit_rate":1.0}"#,
        ),
        (
            vec!["--mode", "kv-events", "--publish", "yes"],
            r#"{"mode":"kv-events","workers":2,"requests":72,"repeat_requests":60,"hits":60,"hit_rate":1.0,"publish":"yes"}"#,
        ),
        (
            vec!["--mode", "kv-events", "--publish", "no"],
            r#"{"mode":"kv-events","workers":2,"requests":72,"repeat_requests":60,"hits":49,"hit_rate":0.8167,"publish":"no"}"#,
        ),
    ];
    for (args, expected) in cases {
        let mut full = vec!["sim"];
        full.extend(args);
        assert_eq!(ok(&full), format!("{expected}\n"));
    }
}

#[test]
fn sim_with_chacha_is_deterministic() {
    let a = ok(&["sim", "--mode", "random", "--rng", "chacha", "--seed", "7"]);
    assert_eq!(
        a,
        ok(&["sim", "--mode", "random", "--rng", "chacha", "--seed", "7"])
    );
    assert!(a.contains(r#""hits":"#));
}

#[test]
fn kvcost_prints_the_lab_line() {
    let cases = [("0.112", "1536.0"), ("0.608", "282.9"), ("13.4", "12.8")];
    for (gbps, ms) in cases {
        assert_eq!(
            ok(&["kvcost", "--tokens", "1500", "--gbps", gbps]),
            format!("{{\"bytes_per_token\":114688,\"kv_mib\":164.1,\"transfer_ms\":{ms}}}\n")
        );
    }
}

#[test]
fn kvcost_optional_flags_add_ttft_and_breakeven() {
    let out = ok(&[
        "kvcost",
        "--tokens",
        "1500",
        "--gbps",
        "0.608",
        "--prefill-ms",
        "40",
        "--overhead-ms",
        "5",
        "--saved-ms",
        "100",
    ]);
    assert_eq!(
        out,
        "{\"bytes_per_token\":114688,\"kv_mib\":164.1,\"transfer_ms\":282.9,\"ttft_disagg_ms\":327.9,\"breakeven_gbps\":1.72}\n"
    );
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let cases: [(&[&str], &str); 11] = [
        (&["sim", "--mode", "kv", "--workers", "0"], "--workers"),
        (&["sim", "--mode", "kv", "--block", "0"], "--block"),
        (&["sim", "--mode", "best"], "--mode"),
        (
            &["sim", "--mode", "rr", "--publish", "no"],
            "--publish: only applies to --mode kv-events",
        ),
        (&["kvcost", "--tokens", "1500", "--gbps", "0"], "--gbps"),
        (&["kvcost", "--tokens", "1500", "--gbps", "-1"], "--gbps"),
        (&["kvcost", "--tokens", "1500", "--gbps", "NaN"], "--gbps"),
        (&["kvcost", "--gbps", "1"], "--tokens"),
        // Valid alone, but the break-even speed it gives is no finite number (was a null).
        (
            &[
                "kvcost",
                "--tokens",
                "1500",
                "--gbps",
                "1",
                "--saved-ms",
                "1e-320",
            ],
            "--saved-ms: is too small",
        ),
        (
            &[
                "kvcost",
                "--tokens",
                "1",
                "--gbps",
                "1",
                "--prefill-ms",
                "1e308",
                "--overhead-ms",
                "1e308",
            ],
            "--prefill-ms: is too large",
        ),
        (
            &["sim", "--mode", "kv-events", "--publish", "maybe"],
            "--publish",
        ),
    ];
    for (args, needle) in cases {
        let line = bad(args);
        assert!(
            line.contains(needle),
            "{args:?}: {line:?} should name {needle}"
        );
    }
}

fn measured_rows() -> String {
    let mut rows = Vec::new();
    for (rep, (agg, dis)) in [(40.0, 200.0), (42.0, 210.0), (360.0, 190.0)]
        .iter()
        .enumerate()
    {
        rows.push(format!(
            r#"{{"mode":"agg","input":1500,"conc":1,"rep":{rep},"ttft_p50_ms":{agg}}}"#
        ));
        rows.push(format!(
            r#"{{"mode":"disagg","input":1500,"conc":1,"rep":{rep},"ttft_p50_ms":{dis}}}"#
        ));
    }
    rows.join("\n") + "\n\n"
}

#[test]
fn summarize_writes_medians_and_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "m.jsonl", &measured_rows());
    let out = dir.path().join("out.json");
    ok(&["summarize", &input, out.to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"1500x1": {"agg_ms": 42.0, "disagg_ms": 200.0, "ratio": 4.76}})
    );
    assert_eq!(
        ok(&["summarize", &input, "-"]),
        std::fs::read_to_string(&out).unwrap()
    );
    // A byte-order mark (a file saved on Windows) is not a bad first line.
    let bom = write(
        dir.path(),
        "bom.jsonl",
        &format!("\u{feff}{}", measured_rows()),
    );
    assert_eq!(
        ok(&["summarize", &bom, "-"]),
        std::fs::read_to_string(&out).unwrap()
    );
}

#[test]
fn summarize_bad_input_names_file_line_field_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"mode":"agg","input":1,"conc":1,"rep":0,"ttft_p50_ms":1.0}"#;
    let cases = [
        (
            "notjson.jsonl",
            format!("{good}\n{{oops\n"),
            ":2: line: not JSON",
        ),
        (
            "nottft.jsonl",
            r#"{"mode":"agg","input":1,"conc":1,"rep":0}"#.to_string(),
            ":1: ttft_p50_ms: missing",
        ),
        (
            "mode.jsonl",
            good.replace("\"agg\"", "\"hybrid\""),
            ":1: mode:",
        ),
        (
            "aggonly.jsonl",
            good.to_string(),
            ":1: mode: cell 1x1 has agg rows but no disagg rows",
        ),
        ("empty.jsonl", String::new(), "empty.jsonl: no measurements"),
    ];
    for (name, text, needle) in cases {
        let input = write(dir.path(), name, &text);
        let out = dir.path().join(format!("{name}.out.json"));
        let line = bad(&["summarize", &input, out.to_str().unwrap()]);
        assert!(
            line.contains(name) && line.contains(needle),
            "{line:?} should contain {needle:?}"
        );
        assert!(!out.exists(), "no partial output for {name}");
    }
    let line = bad(&["summarize", "/does/not/exist.jsonl", "-"]);
    assert!(
        line.contains("/does/not/exist.jsonl: cannot read"),
        "{line}"
    );
}

#[test]
fn lab_writes_every_artefact() {
    let dir = tempfile::tempdir().unwrap();
    let measured = write(dir.path(), "m.jsonl", &measured_rows());
    let out = dir.path().join("lab");
    ok(&[
        "lab",
        "--out",
        out.to_str().unwrap(),
        "--measured",
        &measured,
    ]);
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(name)).unwrap()).unwrap()
    };
    let modes = read("modes.json");
    let hits: Vec<_> = modes
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["hits"].as_u64().unwrap())
        .collect();
    assert_eq!(hits, [49, 48, 60]);
    let events = read("events.json");
    assert_eq!(events[0]["publish"], "yes");
    assert_eq!(events[1]["hits"], 49);
    assert_eq!(read("kvcost.json")["0.608"]["transfer_ms"], 282.9);
    assert_eq!(read("measured.json")["1500x1"]["ratio"], 4.76);
    // Run again without measurements: that summary is not this run's, and goes.
    ok(&["lab", "--out", out.to_str().unwrap()]);
    assert!(out.join("modes.json").exists());
    assert!(!out.join("measured.json").exists());
}

#[test]
fn lab_with_bad_measurements_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let measured = write(dir.path(), "m.jsonl", "{broken\n");
    let out = dir.path().join("lab");
    bad(&[
        "lab",
        "--out",
        out.to_str().unwrap(),
        "--measured",
        &measured,
    ]);
    assert!(!out.exists());
}

/// `lab --out DIR` plus `extra`, with a folder named `folder` in DIR and an earlier run's
/// modes.json: the command is refused naming the folder, and modes.json is left as it was.
/// Returns DIR.
fn lab_refused_for_a_folder_named(
    dir: &std::path::Path,
    folder: &str,
    extra: &[&str],
) -> std::path::PathBuf {
    let out = dir.join("lab");
    std::fs::create_dir_all(out.join(folder)).unwrap();
    std::fs::write(out.join("modes.json"), "earlier\n").unwrap();
    let mut args = vec!["lab", "--out", out.to_str().unwrap()];
    args.extend(extra);
    let line = bad(&args);
    assert!(
        line.contains(&format!("{folder}: is a folder, not a file")),
        "{line}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("modes.json")).unwrap(),
        "earlier\n"
    );
    out
}

/// A folder where a later artefact goes (events.json) fails the command before the earlier ones
/// are written: an earlier run's modes.json is left as it was, not replaced beside a failure.
#[test]
fn lab_with_an_unwritable_artefact_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab_refused_for_a_folder_named(dir.path(), "events.json", &["--seed", "7"]);
    assert!(!out.join("kvcost.json").exists());
}

/// Without --measured, lab removes an earlier measured.json; a folder by that name cannot be
/// removed, and is refused before any artefact is written.
#[test]
fn lab_refuses_a_folder_for_measured_json_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let out = lab_refused_for_a_folder_named(dir.path(), "measured.json", &[]);
    assert!(!out.join("events.json").exists());
}
