//! How a benchmark's clients are driven and its server configured: the three conventions the
//! measured rows of `data/measurements/` were taken with.
//!
//! - **AIConfigurator** ([`Protocol::Aiconfigurator`], the default): every prompt exactly `isl`
//!   tokens and every answer exactly `osl`, [`REQUESTS_PER_CLIENT`] (20) requests per client
//!   (`aiperf --num-requests` = 20 x concurrency in its `bench_run.sh.j2`), and the server's
//!   token budget per step its batch size + the prompt + 1,500 (`generator/rule_plugin/
//!   benchmark/vllm.rule` at 095f58a5).
//! - **aiperf** ([`Protocol::Aiperf`]): AIConfigurator's generated benchmark
//!   (`generator/config/backend_templates/benchmark/bench_run.sh.j2` at 095f58a5), aiperf with
//!   AIConfigurator's lengths, requests and server, and no `--num-dataset-entries`: every prompt
//!   drawn from aiperf's default dataset of [`AIPERF_DATASET_ENTRIES`] (100), which the server's
//!   prefix cache serves when a prompt repeats (vLLM and SGLang, not AIConfigurator's TensorRT-LLM
//!   servers: [`Protocol::prompt_pool`]). Its warm-up requests are not simulated.
//! - **InferenceMAX** ([`Protocol::InferenceMax`], SemiAnalysis's benchmark): its client is
//!   vLLM's `benchmark_serving.py` as kept in `kimbochen/bench_serving` @406abc35
//!   (`sample_random_requests`: each prompt's length drawn uniformly from
//!   `int(isl x 0.8) ..= isl` and each answer's from `int(osl x 0.8) ..= osl`, i.e.
//!   `--random-range-ratio 0.8`), `--num-prompts` = 10 x concurrency; its vLLM servers run
//!   `--max-num-seqs` = the concurrency and `--max-num-batched-tokens 8192` (the InferenceMAX
//!   README's launch commands, as kept in `jyothisambolu/InferenceMAX`). Its grid is the
//!   (isl, osl) pairs (1,024, 1,024), (1,024, 8,192) and (8,192, 1,024) at 4 to 128 clients.
//!
//! InferenceMAX's vLLM launch commands also set the KV cache's dtype by GPU
//! ([`Protocol::server_kv_dtype`]; `benchmarks/70b_fp8_*.sh` in `jyothisambolu/InferenceMAX`):
//! the B200's passes `--kv-cache-dtype fp8`; the H200's has since its move to vLLM 0.10.2
//! (a157a04, Sep 15 2025), the H100's only since af4ccd0 (Sep 23 2025), before which it left it
//! at `auto`, in those vLLM images the model's dtype, bf16, even for an FP8 checkpoint. The
//! measured H100 rows are from before: Llama-3.1-70B fp8 on 2 x H100, 64 clients of 1,024 +
//! 8,192 tokens, measures a mean TTFT of 30.8 s, and with a bf16 KV cache dynsim queues them
//! for 26.6 s; with an fp8 one everything fits and TTFT is 0.3 s (`bench --protocol
//! inferencemax`, Dec 5 2026, the profile of 13:10 UTC). So the H100 runs a bf16
//! cache, the H200 and Blackwell an fp8 one (docs/FIDELITY.md, "How the rows were measured").
//!
//! AIConfigurator's generated servers (both of its protocols) name their KV dtype too: its
//! generator passes the configuration's KV cache quantization as `--kv-cache-dtype` to vLLM and
//! SGLang and as `kv_cache_config.dtype` to TensorRT-LLM (`generator/module_bridge.py` and
//! `generator/config/backend_config_mapping.yaml` from f90534bc2 of Feb 11 2026), and that
//! quantization is FP8 for every FP8 or NVFP4 checkpoint (`sdk/models.py`
//! `_infer_quant_modes_from_raw_config`, and the `fp8` and `nvfp4` profiles of `sdk/task.py`'s
//! `_quants`) and the model's dtype for a BF16 one: [`KvDtype::Auto`] as dynsim resolves it,
//! whatever the engine version's own `auto` would have given (vLLM 0.12.0's was bf16 for any
//! weights).
//!
//! dynsim draws the lengths from the scenario's seed, not numpy's: the same distribution, not
//! the same draws. SGLang's and TensorRT-LLM's servers keep AIConfigurator's limits under either
//! protocol (InferenceMAX's launch settings for them are not part of what dynsim cites).

use crate::deployment::{gpu, KvDtype};
use crate::error::{Error, Result};
use crate::run::REQUESTS_PER_CLIENT;
use crate::scenario::EngineKind;

/// The distinct prompts aiperf's synthetic dataset holds when `--num-dataset-entries` is not
/// given (`InputDefaults.NUM_DATASET_ENTRIES` / `PromptDefaults.NUM` = 100 in aiperf 0.3.0 to
/// 0.5.0, `aiperf/common/config/config_defaults.py`), which AIConfigurator's generated
/// `bench_run.sh` (`generator/config/backend_templates/benchmark/bench_run.sh.j2` at 095f58a5)
/// does not give: its 20 x concurrency requests (and 2 x concurrency warm-up requests) reuse
/// 100 prompts, drawn by aiperf's default `shuffle` sampler (each once per 100 requests). The
/// value `bench --prompt-pool` is meant for when predicting that script.
pub const AIPERF_DATASET_ENTRIES: usize = 100;
/// Requests per client under InferenceMAX's (`--num-prompts $(( CONC * 10 ))`).
pub const INFERENCEMAX_REQUESTS_PER_CLIENT: usize = 10;
/// InferenceMAX's `--random-range-ratio`: lengths are drawn from `int(len x ratio) ..= len`.
pub const INFERENCEMAX_RANGE_RATIO: f64 = 0.8;
/// InferenceMAX's vLLM `--max-num-batched-tokens`.
pub const INFERENCEMAX_BATCHED_TOKENS: u64 = 8192;
/// InferenceMAX's (isl, osl) grid.
pub const INFERENCEMAX_GRID: [(u32, u32); 3] = [(1024, 1024), (1024, 8192), (8192, 1024)];

/// A benchmark convention: how many requests, of what lengths, against what server limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// AIConfigurator's: fixed lengths, 20 requests per client, budget = batch + prompt + 1,500.
    #[default]
    Aiconfigurator,
    /// InferenceMAX's: lengths uniform over the top fifth, 10 requests per client, vLLM's
    /// budget 8,192.
    InferenceMax,
    /// AIConfigurator's generated aiperf benchmark (`bench_run.sh`): AIConfigurator's lengths,
    /// requests and server, every prompt drawn from aiperf's default dataset of
    /// [`AIPERF_DATASET_ENTRIES`] (100).
    Aiperf,
}

impl Protocol {
    /// The names the CLI and profiles accept.
    pub const NAMES: [&'static str; 3] = crate::deployment::profile::PROTOCOL_NAMES;

    /// Every protocol, in the order of [`Protocol::NAMES`].
    pub const ALL: [Protocol; 3] = [
        Protocol::Aiconfigurator,
        Protocol::InferenceMax,
        Protocol::Aiperf,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Aiconfigurator => Self::NAMES[0],
            Protocol::InferenceMax => Self::NAMES[1],
            Protocol::Aiperf => Self::NAMES[2],
        }
    }

    /// Requests per client.
    pub fn requests_per_client(self) -> usize {
        match self {
            Protocol::Aiconfigurator | Protocol::Aiperf => REQUESTS_PER_CLIENT,
            Protocol::InferenceMax => INFERENCEMAX_REQUESTS_PER_CLIENT,
        }
    }

    /// The distinct prompts its clients draw from, as far as an `engine` server's prefix cache
    /// sees them, when the benchmark does not say (`None`: every prompt its own). aiperf's
    /// prompts repeat from its dataset, and AIConfigurator's generated vLLM and SGLang servers
    /// keep prefix caching at the engine's default, on; its TensorRT-LLM servers run
    /// `enable_block_reuse: false` (the `extra_engine_args.*.yaml.j2` templates' default, which
    /// `generator/rendering/engine.py` turns on only when the model config names a shared
    /// prefix), so there a repeated prompt finds nothing cached, as a fresh one.
    pub fn prompt_pool(self, engine: EngineKind) -> Option<usize> {
        match (self, engine) {
            (Protocol::Aiperf, EngineKind::Vllm | EngineKind::Sglang) => {
                Some(AIPERF_DATASET_ENTRIES)
            }
            _ => None,
        }
    }

    /// The range of a length of nominal `tokens`: `(min, max)`, both inclusive.
    pub fn length_range(self, tokens: u32) -> (u32, u32) {
        match self {
            Protocol::Aiconfigurator | Protocol::Aiperf => (tokens, tokens),
            Protocol::InferenceMax => {
                let min = (f64::from(tokens) * INFERENCEMAX_RANGE_RATIO) as u32;
                (min.max(1), tokens)
            }
        }
    }

    /// The KV dtype the protocol's `engine` server runs on `gpu` when the benchmark asks for
    /// `requested`: an explicit dtype stays; `auto` becomes what the protocol's launch command
    /// gives. InferenceMAX's vLLM servers: `fp8` on Blackwell GPUs and the H200 (their
    /// commands' `--kv-cache-dtype fp8`), `bf16` elsewhere (the H100's command set none when its
    /// rows were measured, and that vLLM's `auto` is the model's dtype; the module's doc).
    /// AIConfigurator's servers, and other engines', keep `auto`: the checkpoint's dtype, FP8
    /// for FP8 or FP4 weights, as AIConfigurator's generator passes it (the module's doc).
    pub fn server_kv_dtype(
        self,
        engine: EngineKind,
        gpu_name: &str,
        requested: KvDtype,
    ) -> KvDtype {
        match (self, engine, requested) {
            (Protocol::InferenceMax, EngineKind::Vllm, KvDtype::Auto) => {
                match gpu::find(gpu_name) {
                    Some(g) if g.architecture == "blackwell" || g.name == "h200_sxm" => {
                        KvDtype::Fp8
                    }
                    Some(_) => KvDtype::Bf16,
                    None => KvDtype::Auto,
                }
            }
            _ => requested,
        }
    }

    /// The protocol a measured row was taken with, as far as the row shows it: rows with no
    /// engine version on InferenceMAX's (isl, osl) grid are InferenceMAX's (in the bundled file
    /// those are exactly the `_ep1_` runs of Llama-3.1-70B on H100, H200 and B200, at
    /// InferenceMAX's concurrencies); rows whose lengths are both whole hundreds (the 1,000 to
    /// 8,000 by 100 to 2,000 grid of the bundled SGLang 0.5.6.post2, vLLM 0.12.0 Llama-3.1-8B
    /// and TensorRT-LLM 1.2 and 1.3 rows) are aiperf's as AIConfigurator's `bench_run.sh` runs
    /// it; every other row (the powers of two of the vLLM 0.12.0 Qwen3-32B and TensorRT-LLM
    /// 1.0.0rc3 rows) is AIConfigurator's with every prompt its own. docs/FIDELITY.md ("How the
    /// rows were measured") gives the evidence for each.
    pub fn of_row(version: &str, isl: u32, osl: u32) -> Self {
        if version.trim().is_empty() && INFERENCEMAX_GRID.contains(&(isl, osl)) {
            Protocol::InferenceMax
        } else if isl % 100 == 0 && osl % 100 == 0 {
            Protocol::Aiperf
        } else {
            Protocol::Aiconfigurator
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                Error::arg(
                    "--protocol",
                    format!("must be one of {}, not {s:?}", Self::NAMES.join(", ")),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_is_read_back_from_its_name() {
        for (p, name) in Protocol::ALL.into_iter().zip(Protocol::NAMES) {
            assert_eq!(p.name(), name);
            assert_eq!(name.parse::<Protocol>().unwrap(), p);
        }
        let e = "aic".parse::<Protocol>().unwrap_err().to_string();
        assert!(e.contains("aiconfigurator, inferencemax, aiperf"), "{e}");
    }

    #[test]
    fn inferencemax_draws_from_the_top_fifth_as_numpy_randint_does() {
        // int(1024 x 0.8) = 819, int(8192 x 0.8) = 6553 (truncated, as Python's int()).
        assert_eq!(Protocol::InferenceMax.length_range(1024), (819, 1024));
        assert_eq!(Protocol::InferenceMax.length_range(8192), (6553, 8192));
        assert_eq!(Protocol::InferenceMax.length_range(1), (1, 1));
        assert_eq!(Protocol::Aiconfigurator.length_range(1024), (1024, 1024));
    }

    #[test]
    fn rows_without_a_version_on_the_grid_are_inferencemax() {
        assert_eq!(Protocol::of_row("", 1024, 8192), Protocol::InferenceMax);
        assert_eq!(Protocol::of_row("", 8192, 1024), Protocol::InferenceMax);
        // A versioned row on the grid is AIConfigurator's (Qwen3-32B on vLLM 0.12.0 ran 1024 x 1024).
        assert_eq!(
            Protocol::of_row("0.12.0", 1024, 1024),
            Protocol::Aiconfigurator
        );
        // Whole hundreds are aiperf's, versioned or not; other lengths off the grid are
        // AIConfigurator's own.
        assert_eq!(Protocol::of_row("0.12.0", 1000, 100), Protocol::Aiperf);
        assert_eq!(Protocol::of_row("", 4000, 1000), Protocol::Aiperf);
        assert_eq!(Protocol::of_row("", 4096, 1000), Protocol::Aiconfigurator);
        assert_eq!(
            Protocol::of_row("1.0.0rc3", 2048, 256),
            Protocol::Aiconfigurator
        );
    }

    #[test]
    fn inferencemax_vllm_runs_fp8_kv_on_blackwell_and_the_h200_and_bf16_on_the_h100() {
        use EngineKind::{Trtllm, Vllm};
        use KvDtype::{Auto, Bf16, Fp8};
        use Protocol::{Aiconfigurator, InferenceMax};
        for (protocol, engine, gpu, requested, runs) in [
            (InferenceMax, Vllm, "b200_sxm", Auto, Fp8),
            (InferenceMax, Vllm, "h100_sxm", Auto, Bf16),
            (InferenceMax, Vllm, "h200_sxm", Auto, Fp8),
            (InferenceMax, Vllm, "a100_sxm", Auto, Bf16),
            // An explicit dtype stays; other engines and AIConfigurator's protocol keep `auto`.
            (InferenceMax, Vllm, "h100_sxm", Fp8, Fp8),
            (InferenceMax, Trtllm, "h100_sxm", Auto, Auto),
            (Aiconfigurator, Vllm, "h100_sxm", Auto, Auto),
        ] {
            assert_eq!(
                protocol.server_kv_dtype(engine, gpu, requested),
                runs,
                "{protocol:?} {engine:?} {gpu} {requested:?}"
            );
        }
    }

    /// aiperf's prompts repeat from its 100-entry dataset, and the repeats hit where the server
    /// caches prefixes: vLLM and SGLang as AIConfigurator launches them, not its TensorRT-LLM
    /// servers (`enable_block_reuse: false`); the other protocols send every prompt fresh.
    #[test]
    fn aiperf_prompts_repeat_where_the_server_caches_prefixes() {
        use EngineKind::{Sglang, Trtllm, Vllm};
        assert_eq!(Protocol::Aiperf.prompt_pool(Vllm), Some(100));
        assert_eq!(Protocol::Aiperf.prompt_pool(Sglang), Some(100));
        assert_eq!(Protocol::Aiperf.prompt_pool(Trtllm), None);
        for e in [Vllm, Sglang, Trtllm] {
            assert_eq!(Protocol::Aiconfigurator.prompt_pool(e), None);
            assert_eq!(Protocol::InferenceMax.prompt_pool(e), None);
        }
    }

    #[test]
    fn names_round_trip() {
        for n in Protocol::NAMES {
            assert_eq!(n.parse::<Protocol>().unwrap().name(), n);
        }
        assert!("aic".parse::<Protocol>().is_err());
    }
}
