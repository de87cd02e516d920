//! `dynsim bench`: the closed-loop benchmark people run against a live server, predicted.
//!
//! `concurrency` clients start at once; each sends its next request when its last completes, so
//! that many are always in flight. Every prompt is `isl` tokens nobody else sends (random text:
//! no shared prefix, no cache hit) and every answer `osl` tokens (`ignore_eos`). The server is one
//! worker of the deployment, behind nothing. The default request count is AIConfigurator's
//! benchmark convention, [`REQUESTS_PER_CLIENT`] per client (`aiperf --num-requests`
//! = 20 x concurrency in `bench_run.sh.j2`; its warm-up requests are not measured, and a
//! warm-up changes nothing here: random prompts leave no reusable cache). `--prompt-pool N`
//! draws every prompt from `N` distinct ones instead (aiperf's synthetic dataset, 100 entries by
//! default, which AIConfigurator's `bench_run.sh` leaves as it is:
//! [`protocol::AIPERF_DATASET_ENTRIES`]), so the server's prefix cache hits on repeats: `N`
//! shared-prefix groups, each prompt its group's first `isl - 1` tokens and one fresh one.
//! `--protocol inferencemax` runs InferenceMAX's convention instead ([`protocol`]: lengths
//! drawn from the top fifth of `isl` and `osl`, 10 requests per client, vLLM's token budget
//! 8,192), and `--protocol aiperf` AIConfigurator's generated aiperf benchmark (prompts from a
//! pool of 100 where the server caches prefixes). The scenario names its protocol
//! (`timing.protocol`), so the step model takes the request overhead the profile fitted for that
//! protocol's serving stack, where it has one.
//!
//! By default the server is configured as AIConfigurator configures the deployments it benchmarks (its
//! generator, `generator/rule_plugin/benchmark/vllm.rule`, at 095f58a5): `max_num_seqs` = the
//! concurrency, `max_num_batched_tokens` = concurrency + `isl` + 1,500, and `max_model_len` =
//! `isl + osl` (a benchmark's server need not hold the model's whole context). These are the
//! settings under which the bundled profile was fitted (see `calibrate`): `--set
//! engine.vllm.max_num_batched_tokens=8192 --set engine.vllm.max_num_seqs=1024` gives vLLM's own
//! defaults instead. TensorRT-LLM (`--engine trtllm`) is configured by the same rule
//! (`trtllm.rule`): `max_batch_size` = the concurrency, `max_num_tokens` = concurrency + `isl` +
//! 1,500. SGLang (`--engine sglang`) by its own (`benchmark/sglang.rule` at 043c66c5):
//! `max_running_requests` = the concurrency, `max_prefill_tokens` = `isl` + 1,500,
//! `enable_mixed_chunk` = true and CUDA graphs for batches of 1 to the concurrency (so
//! `cuda_graph_max_bs` = the concurrency, which sizes SGLang's default `mem_fraction_static`),
//! the rest SGLang's defaults (`chunked_prefill_size` by the GPU's memory: 8,192 on the H100
//! and H200, 16,384 on Blackwell).
//!
//! The run is a scenario like any other ([`scenario`] builds it): a `[deployment]`, the engine,
//! a closed-loop synthetic workload of `concurrency` clients, the roofline step times. Its report
//! is `run`'s, plus what the deployment allows ([`BenchFacts`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cluster::worker::probe::FeatureTotals;
use crate::deployment::profile::Profile;
use crate::deployment::{KvDtype, Precision};
use crate::error::{Error, Result};
use crate::report::Report;
use crate::round::round_py;
use crate::run::{run_scenario_with, RunHooks};
use crate::scenario::load::{parse_scenario, Override};
use crate::scenario::{EngineKind, Scenario};

pub mod protocol;

pub use crate::run::REQUESTS_PER_CLIENT;
pub use protocol::Protocol;

/// One benchmark point.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSpec {
    /// A bundled model's id or alias, or the path of a model file (ending in `.toml`).
    pub model: String,
    /// A bundled GPU's name.
    pub gpu: String,
    /// GPUs, tensor parallel.
    pub tp: u64,
    /// Weight precision.
    pub precision: Precision,
    /// KV dtype.
    pub kv_dtype: KvDtype,
    /// The engine.
    pub engine: EngineKind,
    /// Prompt tokens per request.
    pub isl: u32,
    /// Output tokens per request.
    pub osl: u32,
    /// Clients (requests in flight).
    pub concurrency: usize,
    /// Requests in all (`None`: the protocol's requests per client x concurrency).
    pub requests: Option<usize>,
    /// Distinct prompts the clients draw from, uniformly (`None`: every prompt its own;
    /// `bench --prompt-pool`).
    pub prompt_pool: Option<usize>,
    /// Over how many seconds the clients join, one at a time at even steps (`None`: all at
    /// once; `bench --concurrency-ramp-duration`, aiperf's option of that name).
    pub concurrency_ramp_s: Option<f64>,
    /// The benchmark's convention: request lengths and count, the server's limits.
    pub protocol: Protocol,
    /// A profile file `calibrate` wrote (`None`: the engine's bundled one).
    pub profile: Option<PathBuf>,
    /// Further scenario overrides (`--set`).
    pub set: Vec<Override>,
}

/// What the deployment allows, beside the run's report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchFacts {
    /// The deployment, in a line (`Qwen/Qwen3-32B fp8 on 2 x h100_sxm`).
    pub deployment: String,
    /// Prompt tokens per request.
    pub isl: u32,
    /// Output tokens per request.
    pub osl: u32,
    /// Clients.
    pub concurrency: usize,
    /// Over how many seconds they joined (absent: all at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_ramp_s: Option<f64>,
    /// Tokens of KV the worker holds.
    pub kv_capacity_tokens: u64,
    /// The KV cache's dtype as the server runs it (`auto` and the protocol resolved).
    pub kv_dtype: String,
    /// The most requests of `isl + osl` tokens the KV holds at once, each in whole blocks: the
    /// largest batch the KV allows.
    pub max_batch: u64,
    /// The most requests the engine runs at once (`max_num_seqs`).
    pub max_num_seqs: u64,
    /// Output tokens per second per GPU.
    pub output_tokens_per_s_per_gpu: f64,
}

/// A benchmark's result: `run`'s report and the deployment's facts (`bench` in `--json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// The run's report.
    #[serde(flatten)]
    pub report: Report,
    /// What the deployment allows.
    pub bench: BenchFacts,
}

/// The scenario of `spec`: its deployment, one worker, a closed loop of `concurrency` clients.
/// Errors name the bench flag at fault.
pub fn scenario(spec: &BenchSpec) -> Result<Scenario> {
    let per_client = spec.protocol.requests_per_client();
    let requests = spec
        .requests
        .unwrap_or(per_client.saturating_mul(spec.concurrency));
    if spec.requests.is_none() && requests > crate::limits::MAX_REQUESTS {
        // The default count is the clients' doing, not a --requests the user gave.
        return Err(Error::arg(
            format!("--concurrency {}", spec.concurrency),
            format!(
                "is {requests} requests at {per_client} per client, more than the {} a run \
                 may have: give --requests",
                crate::limits::MAX_REQUESTS
            ),
        ));
    }
    let text = format!(
        "name = \"bench\"\n\
         [deployment]\nmodel = {model}\ngpu = {gpu}\ntp = {tp}\nprecision = {precision:?}\n\
         kv_dtype = {kv:?}\nmax_model_len = {len}\n\
         [engine]\nkind = {engine:?}\n\
         [workload]\nkind = \"synthetic\"\nrequests = {requests}\n{prompts}\
         output = {output}\nconcurrency = {c}\n{ramp}\
         [timing]\nprotocol = {protocol:?}\n\
         [cluster]\nworkers = 1\nblock_size = 16\n\
         {limits}\
         [router]\npolicy = \"rr\"\naudit_index = false\nattribute_misses = false\n",
        // As TOML strings: Rust's `{:?}` spells a control character `\u{1b}`, which TOML
        // refuses, and the error would name this generated text instead of the flag.
        model = toml::Value::String(spec.model.clone()),
        gpu = toml::Value::String(spec.gpu.clone()),
        // A TOML integer is an i64: a larger --tp is refused here, with the scenario's range.
        tp = i64::try_from(spec.tp).map_err(|_| {
            Error::arg(
                format!("--tp {}", spec.tp),
                format!("must be 1 to {}", crate::deployment::MAX_TP),
            )
        })?,
        precision = spec.precision.name(),
        kv = spec
            .protocol
            .server_kv_dtype(spec.engine, &spec.gpu, spec.kv_dtype)
            .name(),
        engine = spec.engine.name(),
        prompts = prompts(spec)?,
        output = length_dist(spec.protocol, spec.osl),
        c = spec.concurrency,
        // TOML's spelling (`nan`, `inf`), so that the scenario's own check names a bad one.
        ramp = spec.concurrency_ramp_s.map_or(String::new(), |r| {
            format!("concurrency_ramp_s = {}\n", toml::Value::Float(r))
        }),
        protocol = spec.protocol.name(),
        len = u64::from(spec.isl) + u64::from(spec.osl),
        limits = engine_limits(spec),
    );
    let mut set = spec.set.clone();
    if let Some(p) = &spec.profile {
        let path =
            std::path::absolute(p).map_err(|e| Error::file(p, format!("cannot resolve: {e}")))?;
        set.insert(
            0,
            Override {
                key: "timing.profile".into(),
                value: toml::Value::String(path.display().to_string()),
            },
        );
    }
    parse_scenario(Path::new("bench"), &text, &set).map_err(as_flag_error)
}

/// The bench workload's prompts, as scenario keys. Without a pool, one group with no shared
/// prefix: every prompt is fresh tokens. With a pool of `N` (`--prompt-pool`), `N` groups drawn
/// uniformly (`zipf_s = 0`), each prompt its group's `isl - 1` shared tokens and one fresh one:
/// the prompts of a group are the same text as far as a prefix cache sees, which stores and
/// matches whole blocks only and takes a hit one token short of the prompt (vLLM's rule). aiperf
/// draws its entries by `shuffle` (each once per `N` requests); uniform draws with replacement
/// repeat prompts as often on average. The warm-up requests aiperf sends before measuring are
/// not simulated: the first request of each prompt misses in the measured run.
fn prompts(spec: &BenchSpec) -> Result<String> {
    let Some(pool) = spec.prompt_pool.or(spec.protocol.prompt_pool(spec.engine)) else {
        return Ok(format!(
            "groups = 1\nshared_prefix_tokens = 0\ninput = {}\n",
            length_dist(spec.protocol, spec.isl)
        ));
    };
    let (min, max) = spec.protocol.length_range(spec.isl);
    if min != max {
        return Err(Error::arg(
            "--prompt-pool",
            format!(
                "needs every prompt isl tokens; --protocol {} varies them",
                spec.protocol.name()
            ),
        ));
    }
    if spec.isl < 2 {
        return Err(Error::arg("--prompt-pool", "needs --isl 2 or more"));
    }
    Ok(format!(
        "groups = {pool}\nzipf_s = 0.0\nshared_prefix_tokens = {}\n\
         input = {{ dist = \"fixed\", tokens = 1 }}\n",
        spec.isl - 1
    ))
}

/// A workload length of nominal `tokens` under `protocol`, as a scenario's inline table.
fn length_dist(protocol: Protocol, tokens: u32) -> String {
    match protocol.length_range(tokens) {
        (min, max) if min == max => format!("{{ dist = \"fixed\", tokens = {max} }}"),
        (min, max) => format!("{{ dist = \"uniform\", min = {min}, max = {max} }}"),
    }
}

/// The bench scenario's engine table: the concurrency and [`engine_token_budget`] as the
/// engine's own limits.
fn engine_limits(spec: &BenchSpec) -> String {
    let (c, budget) = (spec.concurrency, engine_token_budget(spec));
    match spec.engine {
        EngineKind::Vllm => {
            format!("[engine.vllm]\nmax_num_seqs = {c}\nmax_num_batched_tokens = {budget}\n")
        }
        EngineKind::Trtllm => {
            format!("[engine.trtllm]\nmax_batch_size = {c}\nmax_num_tokens = {budget}\n")
        }
        EngineKind::Sglang => format!(
            "[engine.sglang]\nmax_running_requests = {c}\nmax_prefill_tokens = {}\n\
             enable_mixed_chunk = true\ncuda_graph_max_bs = {c}\n",
            u64::from(spec.isl) + AIC_TOKEN_MARGIN
        ),
    }
}

/// The server's token budget per step: as AIConfigurator configures a benchmarked deployment,
/// its batch size (the concurrency) + the prompt + 1,500; InferenceMAX's vLLM servers run 8,192.
pub fn engine_token_budget(spec: &BenchSpec) -> u64 {
    match (spec.protocol, spec.engine) {
        (Protocol::InferenceMax, EngineKind::Vllm) => protocol::INFERENCEMAX_BATCHED_TOKENS,
        _ => spec.concurrency as u64 + u64::from(spec.isl) + AIC_TOKEN_MARGIN,
    }
}

/// What AIConfigurator's generator adds to the batch size and prompt for an aggregated worker's
/// token budget (`generator/rule_plugin/benchmark/vllm.rule`, and `trtllm.rule` at 581e4591:
/// `agg max_num_tokens = max_batch_size + isl + 1500`).
pub const AIC_TOKEN_MARGIN: u64 = 1500;

/// A scenario error as the bench flag that caused it (`deployment.tp` → `--tp`).
fn as_flag_error(e: Error) -> Error {
    let Error::Setting {
        key,
        value,
        problem,
        at,
    } = &e
    else {
        return e;
    };
    // A `--set` of the user's own is theirs to hear about as they wrote it (`--set
    // engine.vllm.max_num_seqs=0` is not `--concurrency 0`); of the overrides, only
    // `timing.profile` is bench's, made from `--profile`.
    if at.starts_with("--set") && key != "timing.profile" {
        return e;
    }
    let flag = FLAGS
        .iter()
        .find(|(k, _)| key == k || key.starts_with(&format!("{k}.")))
        .map(|(_, f)| *f)
        // `--model-file` puts its file's path where `--model` puts a name.
        .map(|f| {
            if f == "--model" && crate::deployment::model::names_a_file(value.trim_matches('"')) {
                "--model-file"
            } else {
                f
            }
        });
    match flag {
        Some(flag) if value.is_empty() => Error::arg(flag, problem.clone()),
        Some("--isl") => Error::arg("--isl", format!("isl + osl = {value} {problem}")),
        Some(flag) => Error::arg(
            format!("{flag} {}", value.trim_matches('"')),
            problem.clone(),
        ),
        None => e,
    }
}

/// Scenario keys and the bench flags that set them.
const FLAGS: &[(&str, &str)] = &[
    ("deployment.model", "--model"),
    ("deployment.gpu", "--gpu"),
    ("deployment.tp", "--tp"),
    ("deployment.precision", "--precision"),
    ("deployment.kv_dtype", "--kv-dtype"),
    ("deployment.max_model_len", "--isl"),
    ("timing.profile", "--profile"),
    ("workload.requests", "--requests"),
    ("workload.groups", "--prompt-pool"),
    ("workload.input", "--isl"),
    ("workload.output", "--osl"),
    ("workload.concurrency", "--concurrency"),
    ("workload.concurrency_ramp_s", "--concurrency-ramp-duration"),
    ("engine.vllm.max_num_seqs", "--concurrency"),
    ("engine.trtllm.max_batch_size", "--concurrency"),
    ("engine.sglang.max_running_requests", "--concurrency"),
];

/// Runs `spec`.
pub fn run(spec: &BenchSpec) -> Result<BenchReport> {
    let s = scenario(spec)?;
    let report = run_scenario_with(&s, Path::new("."), RunHooks::default())?;
    Ok(with_facts(spec, &s, report))
}

/// Runs `spec` with `profile`'s coefficients, its worker's feature clock summed into
/// `features` (for `calibrate`).
pub fn run_with_profile(
    spec: &BenchSpec,
    profile: Profile,
    features: Option<&mut FeatureTotals>,
) -> Result<BenchReport> {
    let s = scenario(spec)?;
    let hooks = RunHooks {
        features,
        profile: Some(profile),
        ..RunHooks::default()
    };
    let report = run_scenario_with(&s, Path::new("."), hooks)?;
    Ok(with_facts(spec, &s, report))
}

/// The most requests of `isl + osl` tokens a KV cache of `capacity_tokens` holds at once, each
/// in whole blocks of `block_size` tokens (a request of 3 tokens takes a block of 16).
fn max_batch(capacity_tokens: u64, block_size: u64, isl: u32, osl: u32) -> u64 {
    let block_size = block_size.max(1);
    let per_request = (u64::from(isl) + u64::from(osl))
        .div_ceil(block_size)
        .max(1);
    capacity_tokens / block_size / per_request
}

/// `report` with what the deployment of `spec` allows.
fn with_facts(spec: &BenchSpec, s: &Scenario, report: Report) -> BenchReport {
    let d = report
        .deployments
        .first()
        .expect("a bench scenario has a deployment");
    let seats = report.running_limit(s).map_or(u64::MAX, |n| n as u64);
    let max_batch = max_batch(
        d.kv_capacity_tokens,
        s.block_size() as u64,
        spec.isl,
        spec.osl,
    );
    let bench = BenchFacts {
        deployment: format!("{} {} on {} x {}", d.model, d.precision, d.tp, d.gpu),
        isl: spec.isl,
        osl: spec.osl,
        concurrency: spec.concurrency,
        concurrency_ramp_s: spec.concurrency_ramp_s,
        kv_capacity_tokens: d.kv_capacity_tokens,
        kv_dtype: d.kv_dtype.clone(),
        max_batch,
        max_num_seqs: seats,
        output_tokens_per_s_per_gpu: round_py(report.output_tokens_per_s / d.tp as f64, 3),
    };
    BenchReport { report, bench }
}

impl BenchReport {
    /// The readable summary.
    pub fn table(&self) -> String {
        let b = &self.bench;
        let r = &self.report;
        let mut out = format!(
            "deployment    {}\nkv            {} tokens per worker in {}{}: {} requests of {} + {} \
             tokens at once (the engine runs {} at most)\nbenchmark     {} clients{}, {} requests of \
             {} + {} tokens\n",
            b.deployment,
            b.kv_capacity_tokens,
            b.kv_dtype,
            r.deployments
                .first()
                .map_or(String::new(), |d| format!(" (memory share {})", d.memory_share)),
            b.max_batch,
            b.isl,
            b.osl,
            b.max_num_seqs,
            b.concurrency,
            b.concurrency_ramp_s
                .map_or(String::new(), |s| format!(" joining over {s} s")),
            r.requests,
            b.isl,
            b.osl
        );
        for (name, p) in [
            ("ttft ms", &r.ttft_ms),
            ("tpot ms", &r.tpot_ms),
            ("itl ms", &r.itl_ms),
            ("e2e ms", &r.e2e_ms),
        ] {
            out.push_str(&format!(
                "{name:<14}mean {}  p50 {}  p90 {}  p99 {}\n",
                p.mean, p.p50, p.p90, p.p99
            ));
        }
        out.push_str(&format!(
            "throughput    {} req/s  {} output tokens/s  {} per GPU\n",
            r.throughput_rps, r.output_tokens_per_s, b.output_tokens_per_s_per_gpu
        ));
        if r.preemptions > 0 {
            out.push_str(&format!("preemptions   {}\n", r.preemptions));
        }
        for w in &r.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(isl: u32, prompt_pool: Option<usize>, protocol: Protocol) -> BenchSpec {
        BenchSpec {
            model: "Qwen/Qwen3-32B".into(),
            gpu: "h100_sxm".into(),
            tp: 2,
            precision: Precision::Bf16,
            kv_dtype: KvDtype::Auto,
            engine: EngineKind::Vllm,
            isl,
            osl: 100,
            concurrency: 8,
            requests: None,
            prompt_pool,
            concurrency_ramp_s: None,
            protocol,
            profile: None,
            set: Vec::new(),
        }
    }

    #[test]
    fn the_largest_batch_counts_whole_blocks() {
        // 30,206 blocks of 16 tokens: a request of 1 + 2 tokens takes one block, not 3 of the
        // 483,296 tokens (which gave 161,098 at once).
        assert_eq!(max_batch(30_206 * 16, 16, 1, 2), 30_206);
        // 1,000 + 100 tokens are 69 blocks (68.75): 40,968 / 69 = 593, not 655,488 / 1,100 = 595.
        assert_eq!(max_batch(40_968 * 16, 16, 1_000, 100), 593);
        // 1,024 + 1,024 tokens fill 128 blocks exactly.
        assert_eq!(max_batch(177_841 * 16, 16, 1_024, 1_024), 1_389);
    }

    #[test]
    fn a_prompt_pool_is_groups_sharing_all_but_the_last_token() {
        let pool = Some(protocol::AIPERF_DATASET_ENTRIES);
        assert_eq!(
            prompts(&spec(1000, pool, Protocol::Aiconfigurator)).unwrap(),
            "groups = 100\nzipf_s = 0.0\nshared_prefix_tokens = 999\n\
             input = { dist = \"fixed\", tokens = 1 }\n"
        );
        assert_eq!(
            prompts(&spec(1000, None, Protocol::Aiconfigurator)).unwrap(),
            "groups = 1\nshared_prefix_tokens = 0\ninput = { dist = \"fixed\", tokens = 1000 }\n"
        );
        // The scenario parses it: 100 groups of 999 shared tokens, 20 requests per client.
        let s = scenario(&spec(1000, pool, Protocol::Aiconfigurator)).unwrap();
        let crate::scenario::Workload::Synthetic(w) = &s.workload else {
            panic!("a bench workload is synthetic");
        };
        assert_eq!(
            (w.groups, w.shared_prefix_tokens, w.requests),
            (100, 999, 160)
        );
        assert_eq!(w.zipf_s, 0.0);
        for bad in [
            spec(1000, pool, Protocol::InferenceMax),
            spec(1, pool, Protocol::Aiconfigurator),
        ] {
            let e = prompts(&bad).unwrap_err().to_string();
            assert!(e.contains("--prompt-pool"), "{e}");
        }
    }
}
