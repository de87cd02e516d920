//! `sim`, `kvcost`, `summarize` and `lab`: the lab calculations.

use std::path::PathBuf;

use clap::Args;

use super::parse::{
    at_least_one, at_least_one_u64, choice, non_negative, positive, workers, yes_no,
};
use super::ExitCode;
use crate::budget;
use crate::disagg::{checked_kv_bytes_per_token, ModelShape};
use crate::error::{Error, Result};
use crate::lab::{self, KvCostParams, LabMode, SimParams, LAB_LINKS_GBPS, LAB_TOKENS};
use crate::output::{
    check_outputs, pretty_json, write_atomic, write_dir, write_stdout, Inputs, Output,
};
use crate::rng::RngKind;
use crate::scenario::validate::{MAX_CONTEXT_TOKENS, MAX_REQUESTS};
use crate::summarize::summarize_file;
use crate::workload::lab::PrefixRepeat;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Routing mode.
    #[arg(long, value_parser = choice::<LabMode>(LabMode::NAMES))]
    mode: LabMode,
    /// Whether workers publish KV events (only with --mode kv-events; default yes).
    #[arg(long, value_parser = yes_no, value_name = "yes|no")]
    publish: Option<bool>,
    /// Workers.
    #[arg(long, default_value = "2", value_parser = workers)]
    workers: usize,
    /// Distinct prefixes.
    #[arg(long, default_value_t = 12)]
    prefixes: usize,
    /// Requests per prefix.
    #[arg(long, default_value_t = 6)]
    reps: usize,
    /// Prefix tokens.
    #[arg(long, default_value_t = 96)]
    plen: usize,
    /// Unique tail tokens per request.
    #[arg(long, default_value_t = 16)]
    tail: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Tokens per block.
    #[arg(long, default_value = "16", value_parser = at_least_one)]
    block: usize,
    /// Generator: python reproduces CPython's random.Random(seed) bit for bit.
    #[arg(long, value_parser = choice::<RngKind>(RngKind::NAMES), default_value = "python")]
    rng: RngKind,
}

/// Prints one JSON line.
fn print_line<T: serde::Serialize>(value: &T) -> Result<()> {
    let line = serde_json::to_string(value).expect("in-memory JSON") + "\n";
    write_stdout(line.as_bytes())
}

pub fn sim(a: SimArgs) -> Result<ExitCode> {
    if a.prefixes.saturating_mul(a.reps) > MAX_REQUESTS {
        return Err(Error::arg(
            "--reps",
            format!("--prefixes x --reps must be at most {MAX_REQUESTS} requests"),
        ));
    }
    if a.plen.saturating_add(a.tail) as u64 > MAX_CONTEXT_TOKENS {
        return Err(Error::arg(
            "--tail",
            format!(
                "--plen + --tail must be at most {MAX_CONTEXT_TOKENS} tokens (the longest context)"
            ),
        ));
    }
    let shape = PrefixRepeat {
        prefixes: a.prefixes,
        reps: a.reps,
        prefix_len: a.plen,
        tail_len: a.tail,
    };
    if matches!(a.mode, LabMode::Kv | LabMode::KvEvents) {
        // The KV router's index keeps every block it is told of (the lab's caches never evict).
        let blocks = shape.distinct_blocks(a.block);
        let index = blocks.saturating_mul(budget::INDEX_BYTES_PER_BLOCK);
        if index > budget::budget() {
            return Err(Error::arg(
                "--reps",
                format!(
                    "the KV router would index up to {} blocks, about {} of memory, more than \
                     the budget of {} (DYNSIM_MEMORY_GIB): lower --prefixes, --reps or --tail, \
                     or raise --block",
                    blocks,
                    budget::size(index),
                    budget::size(budget::budget())
                ),
            ));
        }
    }
    if a.publish.is_some() && a.mode != LabMode::KvEvents {
        return Err(Error::arg(
            "--publish",
            "only applies to --mode kv-events (the other modes have no KV events)",
        ));
    }
    let report = lab::run_sim(&SimParams {
        mode: a.mode,
        publish: a.publish.unwrap_or(true),
        workers: a.workers,
        workload: shape,
        seed: a.seed,
        block: a.block,
        rng: a.rng,
    });
    print_line(&report)?;
    Ok(0)
}

#[derive(Args, Debug)]
pub struct KvcostArgs {
    /// Prompt tokens.
    #[arg(long, allow_hyphen_values = true)]
    tokens: u64,
    /// Link speed in GB/s (1e9 bytes/s).
    #[arg(long, value_parser = positive, allow_hyphen_values = true)]
    gbps: f64,
    /// Model layers (default: Qwen3-0.6B's 28).
    #[arg(long, value_parser = at_least_one_u64)]
    layers: Option<u64>,
    /// KV heads per layer (default 8).
    #[arg(long, value_parser = at_least_one_u64)]
    kv_heads: Option<u64>,
    /// Dimensions per head (default 128).
    #[arg(long, value_parser = at_least_one_u64)]
    head_dim: Option<u64>,
    /// Bytes per element (default 2).
    #[arg(long, value_parser = at_least_one_u64)]
    dtype_bytes: Option<u64>,
    /// Prefill time in ms: adds ttft_disagg_ms.
    #[arg(long, value_parser = non_negative, allow_hyphen_values = true)]
    prefill_ms: Option<f64>,
    /// Fixed transfer overhead in ms (with --prefill-ms).
    #[arg(long, value_parser = non_negative, allow_hyphen_values = true)]
    overhead_ms: Option<f64>,
    /// Time disaggregation saves in ms: adds breakeven_gbps.
    #[arg(long, value_parser = positive, allow_hyphen_values = true)]
    saved_ms: Option<f64>,
}

pub fn kvcost(a: KvcostArgs) -> Result<ExitCode> {
    let d = ModelShape::default();
    let model = ModelShape {
        layers: a.layers.unwrap_or(d.layers),
        kv_heads: a.kv_heads.unwrap_or(d.kv_heads),
        head_dim: a.head_dim.unwrap_or(d.head_dim),
        dtype_bytes: a.dtype_bytes.unwrap_or(d.dtype_bytes),
    };
    if a.overhead_ms.is_some() && a.prefill_ms.is_none() {
        return Err(Error::arg("--overhead-ms", "needs --prefill-ms"));
    }
    if checked_kv_bytes_per_token(
        model.layers,
        model.kv_heads,
        model.head_dim,
        model.dtype_bytes,
    )
    .is_none()
    {
        return Err(Error::arg(
            "--layers",
            "the model's KV bytes per token overflow 64 bits",
        ));
    }
    let report = lab::kvcost(&KvCostParams {
        tokens: a.tokens,
        gbps: a.gbps,
        model,
        prefill_ms: a.prefill_ms,
        overhead_ms: a.overhead_ms,
        saved_ms: a.saved_ms,
    });
    // Valid flags whose result JSON cannot hold (it would print null): the flag that took it
    // out of range.
    for (value, flag, problem) in [
        (
            Some(report.transfer_ms),
            "--gbps",
            "is too small: the transfer time is not a finite number",
        ),
        (
            report.breakeven_gbps,
            "--saved-ms",
            "is too small: the break-even link speed is not a finite number",
        ),
        (
            report.ttft_disagg_ms,
            "--prefill-ms",
            "is too large: the disaggregated TTFT is not a finite number",
        ),
    ] {
        if value.is_some_and(|v| !v.is_finite()) {
            return Err(Error::arg(flag, problem));
        }
    }
    print_line(&report)?;
    Ok(0)
}

#[derive(Args, Debug)]
pub struct SummarizeArgs {
    /// Measured TTFT, JSONL.
    input: PathBuf,
    /// Where to write the summary JSON (`-` for stdout).
    output: PathBuf,
}

pub fn summarize(a: SummarizeArgs) -> Result<ExitCode> {
    let mut inputs = Inputs::new();
    inputs.add("the measurements", &a.input);
    check_outputs(&[Output::File("OUTPUT", Some(&a.output))], &inputs)?;
    let summary = summarize_file(&a.input)?;
    write_atomic(&a.output, &pretty_json(&summary))?;
    Ok(0)
}

#[derive(Args, Debug)]
pub struct LabArgs {
    /// Folder to write the artefacts into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Measured TTFT JSONL: also writes measured.json (its summary). Without it, a
    /// measured.json an earlier run left in the folder is removed.
    #[arg(long)]
    measured: Option<PathBuf>,
    /// Generator seed for modes.json and events.json.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The files `lab` writes into its folder, by artefact (the output check and the writes read
/// the same names).
const MODES_FILE: &str = "modes.json";
const EVENTS_FILE: &str = "events.json";
const KVCOST_FILE: &str = "kvcost.json";
const MEASURED_FILE: &str = "measured.json";
const LAB_FILES: [&str; 4] = [MODES_FILE, EVENTS_FILE, KVCOST_FILE, MEASURED_FILE];

pub fn lab(a: LabArgs) -> Result<ExitCode> {
    let mut inputs = Inputs::new();
    if let Some(measured) = &a.measured {
        inputs.add("the measurements", measured);
    }
    let writes = |name: &str| LAB_FILES.contains(&name);
    check_outputs(&[Output::Folder("--out", &a.out, &writes)], &inputs)?;
    let sim = |mode, publish| {
        lab::run_sim(&SimParams {
            mode,
            publish,
            seed: a.seed,
            ..SimParams::default()
        })
    };
    let modes: Vec<_> = [LabMode::Rr, LabMode::Random, LabMode::Kv]
        .map(|m| sim(m, true))
        .to_vec();
    let events = [sim(LabMode::KvEvents, true), sim(LabMode::KvEvents, false)].to_vec();
    let mut kvcost = serde_json::Map::new();
    for gbps in LAB_LINKS_GBPS {
        let report = lab::kvcost(&KvCostParams {
            tokens: LAB_TOKENS,
            gbps,
            model: ModelShape::default(),
            prefill_ms: None,
            overhead_ms: None,
            saved_ms: None,
        });
        kvcost.insert(
            gbps.to_string(),
            serde_json::to_value(report).expect("plain struct"),
        );
    }
    // Everything is computed before anything is written: bad input leaves no partial artefacts.
    let measured = a.measured.as_deref().map(summarize_file).transpose()?;
    // Written together: a destination that cannot be written (a folder where events.json
    // goes) fails the command before modes.json is replaced.
    let mut files = vec![
        (MODES_FILE.to_string(), pretty_json(&modes)),
        (EVENTS_FILE.to_string(), pretty_json(&events)),
        (KVCOST_FILE.to_string(), pretty_json(&kvcost)),
    ];
    // Without measurements, an earlier run's summary of other ones would sit beside this run's
    // artefacts as if it were theirs: it goes (it is derived, and rebuilt by --measured). A
    // folder in its place cannot go, and is refused before anything is written.
    let stale = measured.is_none().then(|| a.out.join(MEASURED_FILE));
    if let Some(stale) = &stale {
        if std::fs::symlink_metadata(stale).is_ok_and(|m| m.is_dir()) {
            return Err(Error::file(stale, "is a folder, not a file"));
        }
    }
    if let Some(measured) = measured {
        files.push((MEASURED_FILE.to_string(), pretty_json(&measured)));
    }
    write_dir(&a.out, &files)?;
    if let Some(stale) = stale {
        match std::fs::remove_file(&stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::file(&stale, format!("cannot remove: {e}")));
            }
            _ => {}
        }
    }
    Ok(0)
}
