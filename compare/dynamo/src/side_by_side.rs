//! Dynamo's mocker and dynsim on the same trace, side by side.
//!
//! Both sides run the same configuration: `--engine vllm|sglang|trtllm` picks Dynamo's `backend`
//! and dynsim's bundled scenario (`scenarios/dynamo-mocker.toml`, `dynamo-mocker-sglang.toml` or
//! `dynamo-mocker-trtllm.toml`, all in the mocker's defaults, with 64-token blocks;
//! `--block-size N` sets another on both: Dynamo's `block_size`, dynsim's `cluster.block_size`);
//! `--num-gpu-blocks N` sets the device KV of each worker on both
//! (Dynamo's `num_gpu_blocks`, dynsim's `cluster.kv_capacity_blocks`); `--host-blocks N` adds a
//! host tier of N blocks per worker on both (Dynamo's `native_host_offload` with its default
//! 32 GB/s each way, no first-byte time and `dp_rank_local` scope, and Qwen3-0.6B's 114,688 KV
//! bytes per token; dynsim's `[kv.host]` with the same figures and its default model, the same,
//! written through as the crate's vLLM adapter writes it). `--host-scope cluster` makes that host
//! tier one pool of N blocks for all workers on both (Dynamo's `cluster_shared` scope, its
//! pool-wide bandwidth caps set to 0, no limit, since dynsim has none: each worker's own 32 GB/s
//! link only; dynsim's `kv.host.scope = "cluster"`). `--disk-blocks N` (needs `--host-blocks`)
//! adds a disk tier of N blocks per worker below host on both (Dynamo's `g3_offload`,
//! `worker_local`, with `--disk-gbps` each way, 10 by default, and `--disk-first-byte-ms`, 0.1 by
//! default, the crate's defaults; dynsim's `[kv.disk]` with the same figures, written through
//! from host as the crate writes it, and its `dynamo` policy's `disk_cache_hit_weight` 0, since
//! the crate publishes no disk residency to its router). `--disagg P,D` serves disaggregated on
//! both sides: P prefill and D decode workers (Dynamo's offline disaggregated replay,
//! `simulate_trace_file_disagg_with_router_mode_and_format`, its `worker_type` prefill and
//! decode, `kv_transfer_bandwidth` from `--link-gbps`, 25 by default, and Qwen3-0.6B's KV bytes per
//! token; dynsim's `[disagg]` with the same link and no fixed overhead); `--workers` is then
//! ignored. `--dynsim-only` runs dynsim's side alone, to re-measure a table after a change to
//! dynsim only.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use dynamo_kv_router::config::KvRouterConfig;
use dynamo_mocker::common::protocols::MockerConfig;
use dynamo_mocker::loadgen::TraceFileFormat;
use dynamo_mocker::replay::{
    simulate_trace_file_disagg_with_router_mode_and_format,
    simulate_trace_file_with_router_mode_and_format, OfflineDisaggReplayConfig, ReplayRouterMode,
    SlaThresholds,
};
use dynsim::scenario::{load_scenario, Override};
use serde_json::json;

/// KV bytes per token of Qwen3-0.6B (28 layers x 8 KV heads x 128 x 2 x 2 bytes): dynsim's
/// default model (`[disagg.model]`), given to Dynamo so that both move the same bytes per block.
const KV_BYTES_PER_TOKEN: usize = 114_688;
/// Host-tier link, GB/s each way: aisimulate-core 0.13's default, set on both sides.
const HOST_GBPS: f64 = 32.0;

/// A disk tier below host, per worker: its blocks, GB/s each way, ms to the first byte.
#[derive(Clone, Copy, Debug)]
struct Disk {
    blocks: usize,
    gbps: f64,
    first_byte_ms: f64,
}

/// Disaggregated serving on both sides: prefill and decode workers and their KV link.
#[derive(Clone, Copy, Debug)]
struct Disagg {
    prefill: usize,
    decode: usize,
    link_gbps: f64,
}

/// The engine both sides run: Dynamo's `backend`, dynsim's `engine.kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Vllm,
    Sglang,
    Trtllm,
}

/// What both sides run.
#[derive(Clone, Copy, Debug)]
struct Setup {
    engine: Engine,
    /// Tokens per KV block on both sides (64 unless `--block-size`).
    block_size: usize,
    num_gpu_blocks: Option<usize>,
    host_blocks: Option<usize>,
    /// The host tier is one pool for all workers (else one per worker).
    host_shared: bool,
    /// A disk tier below host (`--disk-blocks`).
    disk: Option<Disk>,
    /// Disaggregated serving (`--disagg`).
    disagg: Option<Disagg>,
}

impl Setup {
    /// Dynamo's mocker configuration for one role of a disaggregated run: `worker_type`
    /// (`prefill` or `decode`), the link's bandwidth and the KV bytes it moves per token.
    fn mocker_role(&self, worker_type: &str, d: &Disagg) -> Result<MockerConfig> {
        let mut v = serde_json::to_value(self.mocker()?)?;
        let engine = &mut v["engine"];
        engine["worker_type"] = json!(worker_type);
        engine["kv_transfer_bandwidth"] = json!(d.link_gbps);
        engine["kv_transfer_bytes_per_token"] = json!(KV_BYTES_PER_TOKEN);
        MockerConfig::from_value(v)
    }

    /// Dynamo's mocker configuration: the defaults, the block size, and what the flags set.
    fn mocker(&self) -> Result<MockerConfig> {
        // 64-token blocks on every backend unless `--block-size`: SGLang's own default page is
        // 1 token and TensorRT-LLM's (aisimulate-core 0.13, `Backend::default_block_size`) 32.
        let mut engine = json!({ "block_size": self.block_size });
        match self.engine {
            Engine::Vllm => {}
            Engine::Sglang => engine["backend"] = json!("sglang"),
            Engine::Trtllm => engine["backend"] = json!("trtllm"),
        }
        if let Some(n) = self.num_gpu_blocks {
            engine["num_gpu_blocks"] = json!(n);
        }
        if let Some(n) = self.host_blocks {
            engine["kv_cache_bytes_per_token"] = json!(KV_BYTES_PER_TOKEN);
            engine["native_host_offload"] = json!({
                "num_host_blocks": n,
                "d2h_bandwidth_gbps": HOST_GBPS,
                "h2d_bandwidth_gbps": HOST_GBPS,
            });
            if self.host_shared {
                let h = &mut engine["native_host_offload"];
                h["scope"] = json!("cluster_shared");
                h["kv_layout_id"] = json!("qwen3-0.6b");
                // No pool-wide cap (0 = no limit): dynsim models none.
                h["shared_d2h_bandwidth_gbps"] = json!(0.0);
                h["shared_h2d_bandwidth_gbps"] = json!(0.0);
            }
        }
        if let Some(d) = self.disk {
            // aisimulate-core 0.13's `G3OffloadConfig` (`engine/config.rs`): one store per
            // worker, its read and write bandwidths and first-byte latency.
            engine["g3_offload"] = json!({
                "scope": "worker_local",
                "num_g3_blocks": d.blocks,
                "latency_to_first_byte_ms": d.first_byte_ms,
                "read_bandwidth_gbps": d.gbps,
                "write_bandwidth_gbps": d.gbps,
            });
        }
        MockerConfig::from_value(json!({ "engine": engine }))
    }

    /// dynsim's scenario and the overrides that match the flags.
    fn dynsim(&self) -> (&'static str, Vec<Override>) {
        let set = |key: &str, value: toml::Value| Override {
            key: key.into(),
            value,
        };
        let scenario = match self.engine {
            Engine::Vllm => "dynamo-mocker.toml",
            Engine::Sglang => "dynamo-mocker-sglang.toml",
            Engine::Trtllm => "dynamo-mocker-trtllm.toml",
        };
        let mut out = vec![set("cluster.block_size", (self.block_size as i64).into())];
        if let Some(n) = self.num_gpu_blocks {
            out.push(set("cluster.kv_capacity_blocks", (n as i64).into()));
        }
        if let Some(n) = self.host_blocks {
            out.push(set("kv.host.capacity_blocks", (n as i64).into()));
            out.push(set("kv.host.d2h_gbps", HOST_GBPS.into()));
            out.push(set("kv.host.h2d_gbps", HOST_GBPS.into()));
            out.push(set("kv.host.first_byte_ms", 0.0.into()));
            // The crate's vLLM adapter writes each computed prompt block to host as it is
            // computed (vLLM's OffloadingConnector), not on eviction.
            out.push(set("kv.host.write_policy", "write_through".into()));
            if self.host_shared {
                out.push(set("kv.host.scope", "cluster".into()));
            }
        }
        if let Some(d) = self.disk {
            out.push(set("kv.disk.capacity_blocks", (d.blocks as i64).into()));
            out.push(set("kv.disk.d2h_gbps", d.gbps.into()));
            out.push(set("kv.disk.h2d_gbps", d.gbps.into()));
            out.push(set("kv.disk.first_byte_ms", d.first_byte_ms.into()));
            // The crate hands every block whose host write completes to disk (its G3 tier), so
            // the disk holds host's blocks too; host's drops are gone.
            out.push(set("kv.disk.write_policy", "write_through".into()));
            // The crate's tiers publish host residency only (`HostPinned` events), never disk:
            // its router has no disk block to credit.
            out.push(set("router.dynamo.disk_cache_hit_weight", 0.0.into()));
        }
        if let Some(d) = self.disagg {
            out.push(set("disagg.enabled", true.into()));
            out.push(set("disagg.prefill_workers", (d.prefill as i64).into()));
            out.push(set("disagg.decode_workers", (d.decode as i64).into()));
            out.push(set("disagg.link_gbps", d.link_gbps.into()));
            out.push(set("disagg.transfer_overhead_ms", 0.0.into()));
        }
        (scenario, out)
    }
}

/// One side's numbers.
#[derive(Clone, Copy, Debug)]
struct Side {
    reuse: f64,
    /// The part of `reuse` loaded back from the lower tiers (the crate stages a disk block
    /// through host, and counts it as host's; so, with a disk tier, dynsim's host + disk).
    host_reuse: f64,
    /// KV bytes read from the disk tier.
    disk_read_bytes: u64,
    ttft_p50: f64,
    ttft_p90: f64,
    tpot_p50: f64,
    rps: f64,
    /// Requests that ran to completion (dynsim: all but the refused).
    completed: usize,
    wall_s: f64,
}

fn dynamo(
    setup: &Setup,
    trace: &Path,
    workers: usize,
    speedup: f64,
    kv: bool,
    seed: Option<u64>,
) -> Result<Side> {
    if let Some(seed) = seed {
        fastrand::seed(seed);
    }
    let mode = if kv {
        ReplayRouterMode::KvRouter
    } else {
        ReplayRouterMode::RoundRobin
    };
    let start = Instant::now();
    // simulate_trace_file_with_router_mode's own arguments, with per-request records on: they
    // carry each first admission's host-tier share.
    let r = if let Some(d) = setup.disagg {
        let config = OfflineDisaggReplayConfig {
            prefill_args: setup.mocker_role("prefill", &d)?,
            decode_args: setup.mocker_role("decode", &d)?,
            num_prefill_workers: d.prefill,
            num_decode_workers: d.decode,
        };
        simulate_trace_file_disagg_with_router_mode_and_format(
            config,
            Some(KvRouterConfig::default()),
            None,
            trace,
            512,
            speedup,
            mode,
            TraceFileFormat::Mooncake,
            0.0,
            0,
            true,
            None,
            SlaThresholds::default(),
        )?
    } else {
        simulate_trace_file_with_router_mode_and_format(
            setup.mocker()?,
            Some(KvRouterConfig::default()),
            None,
            trace,
            512,
            workers,
            speedup,
            mode,
            TraceFileFormat::Mooncake,
            0.0,
            0,
            true,
            None,
            SlaThresholds::default(),
        )?
    };
    // For tracing a difference to the request where the two sides part: Dynamo's per-request
    // records (arrival, worker, first admission, prefix reused, TTFT, end), one JSON line each,
    // to `$DYNAMO_PER_REQUEST-{speedup}x-{rr|kv}.jsonl`.
    if let Ok(prefix) = std::env::var("DYNAMO_PER_REQUEST") {
        let mut out = String::new();
        for q in &r.per_request {
            out.push_str(&serde_json::to_string(q)?);
            out.push('\n');
        }
        let router = if kv { "kv" } else { "rr" };
        std::fs::write(format!("{prefix}-{speedup}x-{router}.jsonl"), out)?;
    }
    // ReplayReport's first-admission ratio sums over completed requests; so does this.
    let input: usize = r.per_request.iter().map(|q| q.input_length).sum();
    let host: usize = (r.per_request.iter())
        .filter_map(|q| q.first_admission_host_reused_input_tokens)
        .sum();
    Ok(Side {
        reuse: r.first_admission_prefix_cache_reused_ratio,
        host_reuse: host as f64 / input.max(1) as f64,
        disk_read_bytes: r.g3_offload.as_ref().map_or(0, |g| g.read.completed_bytes),
        ttft_p50: r.latency.ttft.median_ms,
        ttft_p90: r.latency.ttft.p90_ms,
        tpot_p50: r.latency.tpot.median_ms,
        rps: r.throughput.request_throughput_rps,
        completed: r.request_counts.completed_requests,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

fn dynsim(
    setup: &Setup,
    trace: &Path,
    workers: usize,
    speedup: f64,
    kv: bool,
    seed: Option<u64>,
) -> Result<Side> {
    let (file, extra) = setup.dynsim();
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
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
    overrides.extend(extra);
    let start = Instant::now();
    let loaded = load_scenario(&scenario, &overrides).map_err(|e| anyhow::anyhow!("{e}"))?;
    let r = dynsim::run::run_scenario(&loaded.scenario, &loaded.base_dir, None)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Side {
        reuse: r.prefix_reuse,
        host_reuse: r.reuse_by_tier.map_or(0.0, |t| t.host + t.disk),
        disk_read_bytes: r.kv_onload_bytes.map_or(0, |b| b.disk),
        ttft_p50: r.ttft_ms.p50,
        ttft_p90: r.ttft_ms.p90,
        tpot_p50: r.tpot_ms.p50,
        rps: r.throughput_rps,
        completed: r.requests - r.rejected as usize,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// Requests per second the trace offers at speedup 1, and its prompt tokens.
fn arrival_rate(trace: &Path) -> Result<(f64, u64)> {
    let text = std::fs::read_to_string(trace)?;
    let mut prompt_tokens = 0u64;
    let times: Vec<f64> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)?;
            prompt_tokens += v["input_length"].as_u64().unwrap_or(0);
            Ok(v["timestamp"].as_f64().unwrap_or(0.0))
        })
        .collect::<Result<_>>()?;
    let span_s = (times.iter().copied().fold(f64::MIN, f64::max)
        - times.iter().copied().fold(f64::MAX, f64::min))
        / 1e3;
    Ok((times.len() as f64 / span_s.max(1e-9), prompt_tokens))
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
    const USAGE: &str = "usage: dynamo-replay side-by-side TRACE [--workers N] [--speedups 1,4,8] \
[--seed N] [--engine vllm|sglang|trtllm] [--block-size 64] [--num-gpu-blocks N] [--host-blocks N] \
[--host-scope worker|cluster] [--disk-blocks N] [--disk-gbps 10] [--disk-first-byte-ms 0.1] \
[--disagg P,D] [--link-gbps 25] [--dynsim-only]";
    let mut trace: Option<PathBuf> = None;
    let mut workers = 8;
    let mut speedups = vec![1.0, 4.0, 8.0];
    let mut seed = None;
    let mut dynsim_only = false;
    let mut setup = Setup {
        engine: Engine::Vllm,
        block_size: 64,
        num_gpu_blocks: None,
        host_blocks: None,
        host_shared: false,
        disk: None,
        disagg: None,
    };
    let mut link_gbps = 25.0;
    let mut disk = Disk {
        blocks: 0,
        gbps: 10.0,
        first_byte_ms: 0.1,
    };
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
            "--engine" => {
                setup.engine = match it.next().context("--engine vllm|sglang|trtllm")?.as_str() {
                    "vllm" => Engine::Vllm,
                    "sglang" => Engine::Sglang,
                    "trtllm" => Engine::Trtllm,
                    other => bail!("--engine must be vllm, sglang or trtllm, got {other:?}"),
                }
            }
            "--block-size" => setup.block_size = it.next().context("--block-size N")?.parse()?,
            "--num-gpu-blocks" => {
                setup.num_gpu_blocks = Some(it.next().context("--num-gpu-blocks N")?.parse()?)
            }
            "--host-blocks" => {
                setup.host_blocks = Some(it.next().context("--host-blocks N")?.parse()?)
            }
            "--host-scope" => {
                setup.host_shared = match it.next().context("--host-scope worker|cluster")?.as_str()
                {
                    "worker" => false,
                    "cluster" => true,
                    other => bail!("--host-scope must be worker or cluster, got {other:?}"),
                }
            }
            "--disk-blocks" => {
                disk.blocks = it.next().context("--disk-blocks N")?.parse()?;
                setup.disk = Some(disk);
            }
            "--disk-gbps" => disk.gbps = it.next().context("--disk-gbps G")?.parse()?,
            "--disk-first-byte-ms" => {
                disk.first_byte_ms = it.next().context("--disk-first-byte-ms L")?.parse()?
            }
            "--disagg" => {
                let v = it.next().context("--disagg P,D")?;
                let (p, d) = v.split_once(',').context("--disagg P,D")?;
                setup.disagg = Some(Disagg {
                    prefill: p.parse()?,
                    decode: d.parse()?,
                    link_gbps,
                });
            }
            "--link-gbps" => link_gbps = it.next().context("--link-gbps G")?.parse()?,
            "--dynsim-only" => dynsim_only = true,
            s if s.starts_with('-') => bail!("unknown flag {s}\n{USAGE}"),
            s => trace = Some(PathBuf::from(s)),
        }
    }
    let trace = trace.context(USAGE)?;
    // The flags may come in any order: the link is the one given last.
    if let Some(d) = &mut setup.disagg {
        d.link_gbps = link_gbps;
    }
    // The flags may come in any order: the disk's figures are those given last.
    if setup.disk.is_some() {
        setup.disk = Some(disk);
        if setup.host_blocks.is_none() {
            bail!("--disk-blocks needs --host-blocks (the disk tier sits below host)");
        }
    }
    let (base_rate, prompt_tokens) = arrival_rate(&trace)?;
    if dynsim_only {
        return print_dynsim_only(&setup, &trace, workers, &speedups, seed, prompt_tokens);
    }
    let tiered = setup.host_blocks.is_some();
    let disked = setup.disk.is_some();
    let host_header = match (tiered, disked) {
        (_, true) => " host+disk reuse | disk read |",
        (true, false) => " host reuse |",
        _ => "",
    };
    println!("| speedup | router | prefix reuse (Dynamo / dynsim) |{host_header} TTFT p50 ms | TTFT p90 ms | TPOT p50 ms | req/s | wall s (Dynamo / dynsim) |");
    println!(
        "|---|---|---|{}{}---|---|---|---|---|",
        if tiered { "---|" } else { "" },
        if disked { "---|" } else { "" }
    );
    // Prompt tokens' worth of KV read from disk / prompt tokens.
    let disk_share =
        |bytes: u64| bytes as f64 / KV_BYTES_PER_TOKEN as f64 / prompt_tokens.max(1) as f64;
    for &speedup in &speedups {
        for kv in [false, true] {
            let d = dynamo(&setup, &trace, workers, speedup, kv, seed)?;
            let s = dynsim(&setup, &trace, workers, speedup, kv, seed)?;
            // Targets: reuse ±0.03; below saturation TTFT p50 ±25 %, p90 ±30 %, TPOT p50 ±25 %;
            // past it (the request rate falls short of the arrivals) throughput ±10 %, TTFT 2x.
            let saturated = d.rps < 0.95 * speedup * base_rate;
            let reuse_ok = ok_or_miss((s.reuse - d.reuse).abs() <= 0.03);
            let host_cell = if tiered {
                let ok = ok_or_miss((s.host_reuse - d.host_reuse).abs() <= 0.03);
                let mut cell = format!(" {:.4} / {:.4} {ok} |", d.host_reuse, s.host_reuse);
                if disked {
                    let (dd, sd) = (disk_share(d.disk_read_bytes), disk_share(s.disk_read_bytes));
                    let ok = ok_or_miss((sd - dd).abs() <= 0.03);
                    cell.push_str(&format!(" {dd:.4} / {sd:.4} {ok} |"));
                }
                cell
            } else {
                String::new()
            };
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
                "| {speedup} | {} | {:.4} / {:.4} {reuse_ok} |{host_cell} {:.1} / {:.1} {p50} | {:.1} / {:.1} {p90} | {:.2} / {:.2} {} | {:.3} / {:.3} {} | {:.2} / {:.3} ({:.0}x) |",
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
            if d.completed != s.completed {
                // Off the table (stderr): the sides ran different requests to completion, e.g.
                // dynsim refuses one whose to-completion KV exceeds a worker's, which the
                // crate's TensorRT-LLM backend runs with its output clamped.
                eprintln!(
                    "{speedup}x {}: completed requests differ: Dynamo {} / dynsim {}",
                    if kv { "kv" } else { "rr" },
                    d.completed,
                    s.completed
                );
            }
        }
    }
    Ok(())
}

/// `--dynsim-only`: dynsim's side of each row alone, in one layout of ten columns whatever the
/// tiers (for
/// re-measuring dynsim's side after a change to dynsim only; Dynamo's side, deterministic for a
/// seed, is the table's).
fn print_dynsim_only(
    setup: &Setup,
    trace: &Path,
    workers: usize,
    speedups: &[f64],
    seed: Option<u64>,
    prompt_tokens: u64,
) -> Result<()> {
    println!("| speedup | router | prefix reuse | host(+disk) reuse | disk read | TTFT p50 ms | TTFT p90 ms | TPOT p50 ms | req/s | wall s |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &speedup in speedups {
        for kv in [false, true] {
            let s = dynsim(setup, trace, workers, speedup, kv, seed)?;
            let disk =
                s.disk_read_bytes as f64 / KV_BYTES_PER_TOKEN as f64 / prompt_tokens.max(1) as f64;
            println!(
                "| {speedup} | {} | {:.4} | {:.4} | {disk:.4} | {:.1} | {:.1} | {:.2} | {:.3} | {:.3} |",
                if kv { "kv (dynamo)" } else { "rr" },
                s.reuse,
                s.host_reuse,
                s.ttft_p50,
                s.ttft_p90,
                s.tpot_p50,
                s.rps,
                s.wall_s
            );
        }
    }
    Ok(())
}
