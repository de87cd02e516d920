//! The pipelined I/O threads change no byte and no error: a trace read ahead on its own thread
//! fails on a late bad row exactly as a trace read in place did (one line naming the file, line
//! and field, exit code 2, no output written), and the `--trace`/`--perfetto` writers on their
//! own thread write what the in-memory path writes.

use std::path::Path;

use crate::common::bad;

/// The bundled conversation trace's first `rows` rows, row `broken` (1-based) replaced by
/// `with`.
fn trace_with_bad_row(dir: &Path, rows: usize, broken: usize, with: &str) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/traces/mooncake_conversation_trace.jsonl"),
    )
    .expect("bundled trace");
    let lines: Vec<&str> = text
        .lines()
        .take(rows)
        .enumerate()
        .map(|(i, l)| if i + 1 == broken { with } else { l })
        .collect();
    crate::common::write(dir, "t.jsonl", &(lines.join("\n") + "\n"))
}

#[test]
fn a_bad_row_late_in_the_trace_is_one_line_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    // Line 9,000: many read-ahead batches after the first, so the reader thread is far ahead.
    let bad_row = r#"{"timestamp": 1, "input_length": 512, "output_length": -3, "hash_ids": [1]}"#;
    let trace = trace_with_bad_row(dir.path(), 9_500, 9_000, bad_row);
    let old = dir.path().join("old.jsonl");
    std::fs::write(&old, "kept\n").unwrap();
    let timeline = dir.path().join("p.json");
    let line = bad(&[
        "replay",
        &trace,
        "--scenario",
        "scenarios/dynamo-mocker.toml",
        "--json",
        "--trace",
        old.to_str().unwrap(),
        "--perfetto",
        timeline.to_str().unwrap(),
    ]);
    assert_eq!(
        line,
        format!(
            "dynsim: {trace}:9000: output_length: expected a token count (0..=4294967295), got -3"
        )
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["old.jsonl", "t.jsonl"],
        "no output, no temporary file"
    );
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept\n");
    // Not UTF-8, on the last line: the same one-line form, field `line`.
    let good = trace_with_bad_row(dir.path(), 9_500, 0, "");
    std::fs::write(
        dir.path().join("t.jsonl"),
        [
            std::fs::read(&good).unwrap(),
            b"{\"timestamp\": \xff}\n".to_vec(),
        ]
        .concat(),
    )
    .unwrap();
    let line = bad(&["replay", &trace, "--json", "--trace", old.to_str().unwrap()]);
    assert_eq!(
        line,
        format!("dynsim: {trace}:9501: line: not UTF-8 text, or longer than 16 MiB")
    );
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept\n");
}

/// The pinned replay's command (tests/it/pinned.rs) with `outputs` added.
fn replay(outputs: &[&str]) -> std::process::Output {
    let mut args = crate::pinned::REPLAY.to_vec();
    args.extend_from_slice(outputs);
    let out = crate::common::dynsim().args(&args).output().expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_writer_threads_write_the_same_bytes_to_a_file_and_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let timeline = dir.path().join("p.json");
    let files = replay(&[
        "--trace",
        trace.to_str().unwrap(),
        "--perfetto",
        timeline.to_str().unwrap(),
    ]);
    let trace = std::fs::read(&trace).unwrap();
    let timeline = std::fs::read(&timeline).unwrap();
    // The bytes pinned in tests/it/pinned.rs (written in place before the threads came).
    assert_eq!(
        (
            xxhash_rust::xxh3::xxh3_64(&trace),
            xxhash_rust::xxh3::xxh3_64(&timeline)
        ),
        (7_594_052_168_121_974_922, 18_104_164_659_496_033_882)
    );
    let on_stdout = replay(&["--trace", "-"]);
    assert_eq!(on_stdout.stdout, trace, "--trace -");
    assert_eq!(on_stdout.stderr, files.stdout, "the report moves to stderr");
    let on_stdout = replay(&["--perfetto", "-"]);
    assert_eq!(on_stdout.stdout, timeline, "--perfetto -");
}
