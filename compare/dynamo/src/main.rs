//! `dynamo-replay`: replay a Mooncake JSONL trace through Dynamo's offline
//! replay (`dynamo_mocker::replay::simulate_trace_file_with_router_mode`) with
//! the default `MockerConfig` and `KvRouterConfig::default()`, and print one
//! JSON object summarising the run on stdout.
//!
//! Usage:
//!   dynamo-replay TRACE --workers N --speedup S --router rr|kv [--trace-block-size 512]
//!   dynamo-replay side-by-side TRACE [--workers 8] [--speedups 1,4,8] [--seed N]
//!                 [--engine vllm|sglang|trtllm] [--block-size 64] [--num-gpu-blocks N]
//!                 [--host-blocks N] [--host-scope worker|cluster] [--disk-blocks N]
//!                 [--disk-gbps 10] [--disk-first-byte-ms 0.1]
//!
//! `side-by-side` replays the trace through Dynamo's mocker and through dynsim
//! (`scenarios/dynamo-mocker.toml`: rr against rr, Dynamo's KV router against
//! dynsim's `dynamo` policy) at each speedup, one after the other in one process, and prints
//! a Markdown table of both, with each metric's target from the fidelity issue and the wall
//! time of each side.

mod side_by_side;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dynamo_kv_router::config::KvRouterConfig;
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::replay::{
    simulate_trace_file_with_router_mode, ReplayRouterMode, TraceDistributionStats,
    TraceSimulationReport,
};
use serde_json::{json, Value};

const USAGE: &str = "usage: dynamo-replay TRACE --workers N --speedup S --router rr|kv \
[--trace-block-size 512] [--seed N] [--full-report]";

struct Args {
    trace: PathBuf,
    workers: usize,
    speedup: f64,
    router: ReplayRouterMode,
    trace_block_size: usize,
    seed: Option<u64>,
    full_report: bool,
}

fn parse_args() -> Result<Args> {
    let mut trace = None;
    let mut workers = None;
    let mut speedup = None;
    let mut router = None;
    let mut trace_block_size = 512usize;
    let mut seed = None;
    let mut full_report = false;

    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().with_context(|| format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--workers" => workers = Some(value("--workers")?.parse().context("--workers")?),
            "--speedup" => speedup = Some(value("--speedup")?.parse().context("--speedup")?),
            "--router" => {
                router = Some(match value("--router")?.as_str() {
                    "rr" | "round-robin" | "round_robin" => ReplayRouterMode::RoundRobin,
                    "kv" | "kv-router" | "kv_router" => ReplayRouterMode::KvRouter,
                    other => bail!("--router must be rr or kv, got {other:?}"),
                })
            }
            "--trace-block-size" => {
                trace_block_size = value("--trace-block-size")?
                    .parse()
                    .context("--trace-block-size")?
            }
            "--seed" => seed = Some(value("--seed")?.parse().context("--seed")?),
            "--full-report" => full_report = true,
            s if s.starts_with('-') => bail!("unknown flag {s}\n{USAGE}"),
            _ => {
                if trace.is_some() {
                    bail!("unexpected extra positional argument {arg:?}\n{USAGE}");
                }
                trace = Some(PathBuf::from(arg));
            }
        }
    }

    Ok(Args {
        trace: trace.with_context(|| format!("missing TRACE\n{USAGE}"))?,
        workers: workers.with_context(|| format!("missing --workers\n{USAGE}"))?,
        speedup: speedup.with_context(|| format!("missing --speedup\n{USAGE}"))?,
        router: router.with_context(|| format!("missing --router\n{USAGE}"))?,
        trace_block_size,
        seed,
        full_report,
    })
}

fn dist(d: &TraceDistributionStats) -> Value {
    json!({
        "p50": d.median_ms,
        "p90": d.p90_ms,
        "p99": d.p99_ms,
        "mean": d.mean_ms,
    })
}

fn summarize(args: &Args, report: &TraceSimulationReport, wall_s: f64) -> Result<Value> {
    let lat = &report.latency;
    let tp = &report.throughput;
    let rc = &report.request_counts;
    let mut out = json!({
        "engine": "dynamo-mocker 1.6.1 offline replay",
        "trace": args.trace.display().to_string(),
        "trace_block_size": args.trace_block_size,
        "router": match args.router {
            ReplayRouterMode::RoundRobin => "rr",
            ReplayRouterMode::KvRouter => "kv",
        },
        "workers": args.workers,
        "speedup": args.speedup,
        "seed": args.seed,
        "requests": rc.num_requests,
        "completed_requests": rc.completed_requests,
        "total_input_tokens": rc.total_input_tokens,
        "total_output_tokens": rc.total_output_tokens,
        // ReplayReport::prefix_cache_reused_ratio: over completed requests,
        // sum(per-request prefix-cache-hit input tokens, max over all of that
        // request's admissions) / sum(input tokens).
        "prefix_reuse": report.prefix_cache_reused_ratio,
        // ReplayReport::first_admission_prefix_cache_reused_ratio: the same
        // ratio using only the hit at each request's first admission (differs
        // from prefix_reuse only when requests are preempted and re-admitted).
        "first_admission_prefix_reuse": report.first_admission_prefix_cache_reused_ratio,
        "ttft_ms": dist(&lat.ttft),
        "tpot_ms": dist(&lat.tpot),
        "itl_ms": dist(&lat.itl.distribution),
        "itl_max_ms": lat.itl.max_ms,
        "e2e_ms": dist(&lat.e2e),
        "num_ttft_samples": lat.num_ttft_samples,
        "num_tpot_samples": lat.num_tpot_samples,
        "num_e2e_samples": lat.num_e2e_latency_samples,
        "sim_duration_ms": tp.duration_ms,
        "throughput_req_s": tp.request_throughput_rps,
        "output_tokens_s": tp.output_throughput_tok_s,
        "input_tokens_s": tp.input_throughput_tok_s,
        "committed_prefill_tokens": report.committed_prefill_tokens,
        "wall_s": wall_s,
    });
    if args.full_report {
        // The crate's own compact summary serialisation (ReplayReport: Serialize).
        out["report"] = serde_json::to_value(report)?;
        // The (default) MockerConfig actually used, as Dynamo serialises it.
        out["mocker_config"] = serde_json::to_value(MockerConfig::default())?;
    }
    Ok(out)
}

fn run() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("side-by-side") {
        return side_by_side::run(std::env::args().skip(2).collect());
    }
    let args = parse_args()?;
    let mocker = MockerConfig::default();
    let router_config = Some(KvRouterConfig::default());

    // Optional: seed the calling thread's fastrand RNG, which the KV router's
    // tie-breaking uses when no canonical selector seed is configured (the
    // default `ReplayDeterminism::Random`). Without --seed, behaviour is
    // exactly Dynamo's default (fresh random seed per process).
    if let Some(seed) = args.seed {
        fastrand::seed(seed);
    }

    let start = Instant::now();
    let report = simulate_trace_file_with_router_mode(
        mocker,
        router_config,
        None,
        &args.trace,
        args.trace_block_size,
        args.workers,
        args.speedup,
        args.router,
    )?;
    let wall_s = start.elapsed().as_secs_f64();

    let summary = summarize(&args, &report, wall_s)?;
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dynamo-replay: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
