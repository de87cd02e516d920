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
    ok_with_stderr(args).0
}

/// Runs `args`, expects success, returns stdout and stderr.
pub fn ok_with_stderr(args: &[&str]) -> (String, String) {
    let out = dynsim().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "dynsim {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
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

/// A bundled scenario, read and validated.
pub fn scenario(name: &str) -> (dynsim::scenario::Scenario, std::path::PathBuf) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("bundled scenario");
    let s = dynsim::scenario::load::parse_scenario(&path, &text, &[]).expect("valid");
    (s, path.parent().expect("in a folder").to_path_buf())
}

/// The workload of `s`, built once per distinct workload, block size, generator, seed and base
/// folder for the whole test binary: the bundled Mooncake trace is parsed once per such key, not
/// once per test.
pub fn cached_workload(s: &dynsim::scenario::Scenario, base: &Path) -> dynsim::run::BuiltWorkload {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, dynsim::run::BuiltWorkload>>> = OnceLock::new();
    let key = format!(
        "{}|{}|{:?}|{}|{}",
        serde_json::to_string(&s.workload).expect("serialises"),
        s.block_size(),
        s.rng,
        s.seed,
        base.display()
    );
    let mut cache = CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .expect("not poisoned");
    cache
        .entry(key)
        .or_insert_with(|| dynsim::run::build_workload(s, base).expect("workload builds"))
        .clone()
}

/// Runs `s` on its [`cached_workload`].
pub fn run_cached(s: &dynsim::scenario::Scenario, base: &Path) -> dynsim::report::Report {
    run_cached_with(s, base, dynsim::run::RunHooks::default())
}

/// Runs `s` on its [`cached_workload`] with `hooks` (a trace, a timeline).
pub fn run_cached_with(
    s: &dynsim::scenario::Scenario,
    base: &Path,
    hooks: dynsim::run::RunHooks<'_>,
) -> dynsim::report::Report {
    dynsim::run::run_built(s, cached_workload(s, base), hooks).expect("runs")
}

/// Appends a `[disagg]` table (`Some((prefill, decode))` workers) and a restart fault
/// (`Some((worker, at_ms, down_ms))`, the worker taken modulo the cluster's) to scenario text
/// `t` whose cluster has `workers` aggregated workers otherwise.
pub fn push_disagg_and_restart(
    t: &mut String,
    workers: usize,
    disagg: Option<(usize, usize)>,
    restart: Option<(usize, f64, f64)>,
) {
    let workers = match disagg {
        Some((p, d)) => {
            t.push_str(&format!(
                "[disagg]\nenabled = true\nprefill_workers = {p}\ndecode_workers = {d}\n"
            ));
            p + d
        }
        None => workers,
    };
    if let Some((w, at, down)) = restart {
        t.push_str(&format!(
            "[[faults]]\nkind = \"restart\"\nworker = {}\nat_ms = {at}\ndown_ms = {down}\n",
            w % workers
        ));
    }
}

/// `bench` of Qwen3-32B on 2 x H100: `clients` clients of `isl` + `osl` tokens, then `extra`.
pub fn qwen32b_bench<'a>(
    isl: &'a str,
    osl: &'a str,
    clients: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--model",
        "Qwen/Qwen3-32B",
        "--gpu",
        "h100_sxm",
        "--tp",
        "2",
        "--isl",
        isl,
        "--osl",
        osl,
        "--concurrency",
        clients,
    ];
    args.extend_from_slice(extra);
    args
}
