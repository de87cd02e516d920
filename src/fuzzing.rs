//! Entry points for fuzzing: each takes arbitrary bytes, feeds them to one of dynsim's input
//! readers, and checks what must hold for any input: no panic, no abort, no hang, and a refusal
//! that is one line naming where the bad input is. The cargo-fuzz targets in `fuzz/` call these,
//! and so do the short mutation tests in `tests/it/fuzz.rs`; docs/RELIABILITY.md records the
//! long runs.
//!
//! A target that runs a simulation (`scenario_run`) runs only scenarios small enough to finish
//! at once (a few hundred requests on a few workers); larger ones are parsed and validated only.

use std::path::Path;
use std::str::FromStr;

use crate::error::Error;
use crate::run::run_scenario;
use crate::scenario::load::parse_scenario;
use crate::scenario::{Override, Scenario, Workload};
use crate::workload::trace::TraceOptions;
use crate::workload::{azure, mooncake};

/// Checks that a refusal is one line (the CLI prints it as is).
fn one_line(e: &Error) {
    let text = e.to_string();
    assert!(!text.contains('\n'), "an error is one line: {text:?}");
    assert!(!text.is_empty(), "an error says something");
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A scenario file's text: parsed, overridden by nothing, validated.
pub fn scenario_toml(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Err(e) = parse_scenario(Path::new("fuzz.toml"), text, &[]) {
        one_line(&e);
    }
}

/// A sweep file's text: parsed, and every point's overrides listed.
pub fn sweep_toml(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match crate::sweep::parse_sweep(Path::new("fuzz-sweep.toml"), text) {
        Ok(sweep) => {
            for i in 0..sweep.points_total().min(64) {
                let _ = sweep.overrides(i);
            }
        }
        Err(e) => one_line(&e),
    }
}

/// A `--set KEY=VALUE` argument applied to the default scenario.
pub fn set_value(data: &[u8]) {
    let Some(arg) = text(data) else { return };
    let Ok(o) = Override::from_str(arg) else {
        return;
    };
    if let Err(e) = parse_scenario(Path::new("fuzz.toml"), "", &[o]) {
        one_line(&e);
    }
}

/// Options for the trace targets: the first byte picks the engine's block size and `skip_bad`.
fn trace_options(selector: u8) -> TraceOptions {
    TraceOptions {
        trace_block_size: 512,
        block_size: [512, 64, 16, 1][usize::from(selector & 3)],
        speedup: 1.0,
        limit: None,
        skip_bad: selector & 4 != 0,
    }
}

/// A Mooncake JSONL trace: read into a table, every request made with its block names.
pub fn mooncake_jsonl(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let opts = trace_options(selector);
    match mooncake::read_mooncake(Path::new("fuzz.jsonl"), rest, &opts) {
        Ok(table) => {
            for i in 0..table.len() {
                // One name per block of the prompt at most (a partial last one included).
                let spec = table.spec(i);
                let most = u64::from(spec.input_tokens).div_ceil(opts.block_size as u64);
                assert!(spec.blocks.len() as u64 <= most);
            }
        }
        Err(e) => one_line(&e),
    }
}

/// An Azure CSV trace: read into a table, every request made.
pub fn azure_csv(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match azure::read_azure(Path::new("fuzz.csv"), rest, &trace_options(selector)) {
        Ok(table) => {
            for i in 0..table.len() {
                let _ = table.spec(i);
            }
        }
        Err(e) => one_line(&e),
    }
}

/// The measured JSONL that `dynsim summarize` reads.
pub fn measured_jsonl(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Err(e) = crate::summarize::summarize_text(Path::new("fuzz.jsonl"), text) {
        one_line(&e);
    }
}

/// Whether a valid scenario is small enough to run inside a fuzzing loop.
fn small(s: &Scenario) -> bool {
    let requests = match &s.workload {
        Workload::PrefixRepeat(w) => w.prefixes.saturating_mul(w.reps),
        Workload::Synthetic(p) => p.requests,
        Workload::Trace(_) => return false,
    };
    // The longest context a request can have (a session's last turn carries every earlier one).
    let tokens = match &s.workload {
        Workload::PrefixRepeat(w) => (w.prefix_len + w.tail_len + w.output_tokens as usize) as u64,
        Workload::Synthetic(p) => u64::from(p.shared_prefix_tokens)
            .saturating_add(u64::from(p.turns).saturating_mul(p.input.max() + p.output.max())),
        Workload::Trace(_) => return false,
    };
    requests <= 300
        && tokens <= 4096
        && crate::scenario::validate::worker_count(s) <= 16
        && s.router.replicas <= 4
}

/// A scenario file's text, and if it is valid and small, a whole run of it (twice, to check
/// that the run is deterministic, and that every request was acknowledged once).
pub fn scenario_run(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let s = match parse_scenario(Path::new("fuzz.toml"), text, &[]) {
        Ok(s) => s,
        Err(e) => return one_line(&e),
    };
    if !small(&s) {
        return;
    }
    match run_scenario(&s, Path::new("."), None) {
        Ok(a) => {
            assert_eq!(a.acks, a.requests as u64, "every request acknowledged once");
            let b = run_scenario(&s, Path::new("."), None).expect("ran once");
            assert_eq!(
                serde_json::to_string(&a).expect("serialises"),
                serde_json::to_string(&b).expect("serialises"),
                "a run is deterministic"
            );
        }
        Err(e) => one_line(&e),
    }
}
