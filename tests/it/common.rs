//! Helpers shared by the integration tests that drive the real `dynsim` binary.

use std::path::Path;

use assert_cmd::Command;

/// The `dynsim` binary, run from the repository root.
pub fn dynsim() -> Command {
    let mut cmd = Command::cargo_bin("dynsim").expect("binary built");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

/// Runs `args`, expects success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = dynsim().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "dynsim {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs `args`, expects exit code 2 and exactly one line on stderr; returns that line.
pub fn bad(args: &[&str]) -> String {
    let out = dynsim().args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "dynsim {args:?} should exit 2");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(
        stderr.lines().count(),
        1,
        "one line expected, got {stderr:?}"
    );
    stderr.trim_end().to_string()
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write fixture");
    path.to_string_lossy().into_owned()
}
