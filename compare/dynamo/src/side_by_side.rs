//! Dynamo's mocker and dynsim on the same trace, side by side.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dynamo_kv_router::config::KvRouterConfig;
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::replay::{simulate_trace_file_with_router_mode, ReplayRouterMode};
use dynsim::scenario::{load_scenario, Override};

/// One side's numbers.
#[derive(Clone, Copy, Debug)]
struct Side {
    reuse: f64,
    ttft_p50: f64,
    ttft_p90: f64,
    tpot_p50: f64,
    rps: f64,
    wall_s: f64,
}

fn dynamo(trace: &Path, workers: usize, speedup: f64, kv: bool, seed: Option<u64>) -> Result<Side> {
    if let Some(seed) = seed {
        fastrand::seed(seed);
    }
    let mode = if kv {
        ReplayRouterMode::KvRouter
    } else {
        ReplayRouterMode::RoundRobin
    };
    let start = Instant::now();
    let r = simulate_trace_file_with_router_mode(
        MockerConfig::default(),
        Some(KvRouterConfig::default()),
        None,
        trace,
        512,
        workers,
        speedup,
        mode,
    )?;
    Ok(Side {
        reuse: r.first_admission_prefix_cache_reused_ratio,
        ttft_p50: r.latency.ttft.median_ms,
        ttft_p90: r.latency.ttft.p90_ms,
        tpot_p50: r.latency.tpot.median_ms,
        rps: r.throughput.request_throughput_rps,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

fn dynsim(trace: &Path, workers: usize, speedup: f64, kv: bool, seed: Option<u64>) -> Result<Side> {
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/dynamo-mocker.toml");
    let set = |key: &str, value: toml::Value| Override {
        key: key.into(),
        value,
    };
    let mut overrides = vec![
        set(
            "workload.path",
            std::path::absolute(trace)?.display().to_string().into(),
        ),
        set("workload.speedup", speedup.into()),
        set("cluster.workers", (workers as i64).into()),
        set("router.policy", if kv { "dynamo" } else { "rr" }.into()),
    ];
    if let Some(seed) = seed {
        overrides.push(set("seed", (seed as i64).into()));
    }
    let start = Instant::now();
    let loaded = load_scenario(&scenario, &overrides).map_err(|e| anyhow::anyhow!("{e}"))?;
    let r = dynsim::run::run_scenario(&loaded.scenario, &loaded.base_dir, None)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Side {
        reuse: r.prefix_reuse,
        ttft_p50: r.ttft_ms.p50,
        ttft_p90: r.ttft_ms.p90,
        tpot_p50: r.tpot_ms.p50,
        rps: r.throughput_rps,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// Requests per second the trace offers at speedup 1.
fn arrival_rate(trace: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(trace)?;
    let times: Vec<f64> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)?;
            Ok(v["timestamp"].as_f64().unwrap_or(0.0))
        })
        .collect::<Result<_>>()?;
    let span_s = (times.iter().copied().fold(f64::MIN, f64::max)
        - times.iter().copied().fold(f64::MAX, f64::min))
        / 1e3;
    Ok(times.len() as f64 / span_s.max(1e-9))
}

/// `dynsim` within `rel` of `dynamo`, as a mark.
fn mark(dynsim: f64, dynamo: f64, rel: f64) -> &'static str {
    ok_or_miss((dynsim - dynamo).abs() <= dynamo.abs() * rel)
}

/// `dynsim` within a factor of 2 of `dynamo` either way (half to twice), as a mark.
fn within_2x(dynsim: f64, dynamo: f64) -> &'static str {
    ok_or_miss(dynamo / 2.0 <= dynsim && dynsim <= 2.0 * dynamo)
}

fn ok_or_miss(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "**miss**"
    }
}

pub fn run(args: Vec<String>) -> Result<()> {
    let mut trace: Option<PathBuf> = None;
    let mut workers = 8;
    let mut speedups = vec![1.0, 4.0, 8.0];
    let mut seed = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--workers" => workers = it.next().context("--workers N")?.parse()?,
            "--speedups" => {
                speedups = it
                    .next()
                    .context("--speedups 1,4,8")?
                    .split(',')
                    .map(|s| s.parse::<f64>())
                    .collect::<Result<_, _>>()?
            }
            "--seed" => seed = Some(it.next().context("--seed N")?.parse()?),
            s if s.starts_with('-') => bail!("unknown flag {s}"),
            s => trace = Some(PathBuf::from(s)),
        }
    }
    let trace = trace.context(
        "usage: dynamo-replay side-by-side TRACE [--workers N] [--speedups 1,4,8] [--seed N]",
    )?;
    let base_rate = arrival_rate(&trace)?;
    println!("| speedup | router | prefix reuse (Dynamo / dynsim) | TTFT p50 ms | TTFT p90 ms | TPOT p50 ms | req/s | wall s (Dynamo / dynsim) |");
    println!("|---|---|---|---|---|---|---|---|");
    for &speedup in &speedups {
        for kv in [false, true] {
            let d = dynamo(&trace, workers, speedup, kv, seed)?;
            let s = dynsim(&trace, workers, speedup, kv, seed)?;
            // Targets: reuse ±0.03; below saturation TTFT p50 ±25 %, p90 ±30 %, TPOT p50 ±25 %;
            // past it (the request rate falls short of the arrivals) throughput ±10 %, TTFT 2x.
            let saturated = d.rps < 0.95 * speedup * base_rate;
            let reuse_ok = ok_or_miss((s.reuse - d.reuse).abs() <= 0.03);
            let (p50, p90) = if saturated {
                (
                    within_2x(s.ttft_p50, d.ttft_p50),
                    within_2x(s.ttft_p90, d.ttft_p90),
                )
            } else {
                (
                    mark(s.ttft_p50, d.ttft_p50, 0.25),
                    mark(s.ttft_p90, d.ttft_p90, 0.30),
                )
            };
            println!(
                "| {speedup} | {} | {:.4} / {:.4} {reuse_ok} | {:.1} / {:.1} {p50} | {:.1} / {:.1} {p90} | {:.2} / {:.2} {} | {:.3} / {:.3} {} | {:.2} / {:.3} ({:.0}x) |",
                if kv { "kv (dynamo)" } else { "rr" },
                d.reuse,
                s.reuse,
                d.ttft_p50,
                s.ttft_p50,
                d.ttft_p90,
                s.ttft_p90,
                d.tpot_p50,
                s.tpot_p50,
                mark(s.tpot_p50, d.tpot_p50, 0.25),
                d.rps,
                s.rps,
                mark(s.rps, d.rps, if saturated { 0.10 } else { 0.02 }),
                d.wall_s,
                s.wall_s,
                d.wall_s / s.wall_s
            );
        }
    }
    Ok(())
}
