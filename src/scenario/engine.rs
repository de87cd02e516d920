//! `[engine]`: the serving engine the workers run, and each engine's own settings in its own
//! table (`[engine.vllm]`, ...).

use serde::{Deserialize, Serialize};

use super::{Auto, Limit, Pool, Scenario};
use crate::deployment::ServedKv;

/// `[engine]`: the serving engine whose step scheduler the workers run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSettings {
    /// The engine: `vllm` (vLLM v1's step scheduler), `trtllm` (TensorRT-LLM's
    /// `GUARANTEED_NO_EVICT` capacity scheduler: each admitted request's KV reserved through its
    /// completion, never evicted) or `sglang` (SGLang's scheduler: prefill batches first,
    /// admission against a reserve of future output, retraction when decode runs out of KV).
    pub kind: EngineKind,
    /// `[engine.vllm]`: vLLM's own settings.
    pub vllm: VllmSettings,
    /// `[engine.trtllm]`: TensorRT-LLM's own settings.
    pub trtllm: TrtllmSettings,
    /// `[engine.sglang]`: SGLang's own settings.
    pub sglang: SglangSettings,
}

/// `engine.kind`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// vLLM (v1 scheduler).
    #[default]
    Vllm,
    /// TensorRT-LLM (its default capacity scheduler).
    Trtllm,
    /// SGLang.
    Sglang,
}

impl EngineKind {
    /// Every engine's name.
    pub const NAMES: &'static [&'static str] = &["vllm", "trtllm", "sglang"];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Trtllm => "trtllm",
            EngineKind::Sglang => "sglang",
        }
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "vllm" => Ok(EngineKind::Vllm),
            "trtllm" => Ok(EngineKind::Trtllm),
            "sglang" => Ok(EngineKind::Sglang),
            _ => Err(format!("{s:?} is not an engine (vllm, trtllm, sglang)")),
        }
    }
}

/// `[engine.vllm]`: vLLM's memory setting and its v1 step scheduler's (the defaults are vLLM's
/// and Dynamo's mocker's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct VllmSettings {
    /// The share of each GPU's memory vLLM may take, weights and KV (0.9, vLLM's
    /// `gpu_memory_utilization`); sizes the KV cache of a `[deployment]`.
    pub gpu_memory_utilization: f64,
    /// Running requests at most, or "unbounded". "auto" (the default): with a `[deployment]`,
    /// vLLM's for its GPU, 1,024 on GPUs of 70 GiB or more but the A100, else 256; without,
    /// Dynamo's mocker's 256.
    pub max_num_seqs: Auto<Limit>,
    /// Tokens scheduled in one step at most, decodes and prompt chunks together, or
    /// "unbounded". "auto" (the default): 8,192, or with a `[deployment]` on a GPU under 70 GiB
    /// or an A100, vLLM's 2,048.
    pub max_num_batched_tokens: Auto<Limit>,
    /// Whether a prompt may be computed in chunks over several steps (true); false schedules a
    /// prompt only whole.
    pub chunked_prefill: bool,
    /// Which running request a preemption evicts: "lifo" (the most recently admitted, vLLM's)
    /// or "fifo".
    pub preemption: PreemptionKind,
    /// What a waiting request needs free to be admitted: "chunk" (the blocks of its first
    /// chunk, vLLM's) or "whole-prompt" (its whole sequence's, Dynamo's mocker's).
    pub admission: AdmissionKind,
    /// Plan a run of identical decode-only steps at once (true): a speed setting, see
    /// docs/FIDELITY.md for what it can change; false plans every step on its own.
    pub decode_stretches: bool,
}

impl Default for VllmSettings {
    fn default() -> Self {
        VllmSettings {
            gpu_memory_utilization: 0.9,
            max_num_seqs: Auto::Derived,
            max_num_batched_tokens: Auto::Derived,
            chunked_prefill: true,
            preemption: PreemptionKind::Lifo,
            admission: AdmissionKind::Chunk,
            decode_stretches: true,
        }
    }
}

/// `[engine.trtllm]`: TensorRT-LLM's scheduler settings, with its names and the defaults of its
/// LLM API (`tensorrt_llm/llmapi/llm_args.py`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TrtllmSettings {
    /// The share of the memory weights and activations leave that KV may take (0.9,
    /// `KvCacheConfig.free_gpu_memory_fraction`); sizes the KV cache of a `[deployment]`.
    pub free_gpu_memory_fraction: f64,
    /// Running requests at most, or "unbounded" (2,048).
    pub max_batch_size: Limit,
    /// Tokens scheduled in one step at most, or "unbounded" (8,192).
    pub max_num_tokens: Limit,
    /// Whether a prompt may be computed in chunks over several steps (false: a prompt is
    /// scheduled whole, and one longer than `max_num_tokens` is refused).
    pub enable_chunked_prefill: bool,
}

impl Default for TrtllmSettings {
    fn default() -> Self {
        TrtllmSettings {
            free_gpu_memory_fraction: 0.9,
            max_batch_size: Limit::Count(2048),
            max_num_tokens: Limit::Count(8192),
            enable_chunked_prefill: false,
        }
    }
}

/// `[engine.sglang]`: SGLang's scheduler settings, with its server argument names and defaults
/// (`python/sglang/srt/server_args.py`; the request limit is Dynamo's mocker's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SglangSettings {
    /// The share of each GPU's memory for weights and KV (`--mem-fraction-static`), which sizes
    /// the KV cache of a `[deployment]`: a number in (0, 1], or "auto" (the default) for
    /// SGLang's own, derived as its `server_args.py` derives it from the GPU's memory, the chunk
    /// size, `cuda_graph_max_bs` and the tensor parallelism (with no reserve for a sampler pass,
    /// which SGLang does not profile).
    pub mem_fraction_static: Auto<f64>,
    /// The largest batch SGLang captures a CUDA graph for (`--cuda-graph-max-bs`, or the largest
    /// of `--cuda-graph-bs`); only sizes the memory SGLang's "auto" `mem_fraction_static`
    /// reserves (2 MiB per batch entry). "auto" (the default): SGLang's per GPU and parallelism
    /// (256 below TP 4 and 512 from it on GPUs of 60 to 160 GiB, 512 above, fewer below).
    pub cuda_graph_max_bs: Auto<usize>,
    /// The order waiting requests are tried in: "fcfs" (arrival, SGLang's default) or "lpm"
    /// (longest cached prefix first; past 128 waiting requests, fcfs).
    pub schedule_policy: SchedulePolicyKind,
    /// Running requests at most, or "unbounded". "auto" (the default): SGLang's own from a
    /// deployment's KV (its request table: KV tokens / context x 512, held between 2,048 and
    /// 4,096, and at most half the KV's tokens), or 256 (Dynamo's mocker's) without a deployment.
    pub max_running_requests: Auto<Limit>,
    /// Prompt tokens per prefill pass, a long prompt cut into chunks of it; a multiple of
    /// `cluster.block_size`, or -1 for no chunking. "auto" (the default): SGLang's for the
    /// deployment's GPU (2,048 below 35 GiB, 4,096 below 60, 8,192 below 160, 16,384 above), or
    /// 8,192 (Dynamo's mocker's) without a deployment.
    pub chunked_prefill_size: Auto<i64>,
    /// Prompt tokens per prefill pass at most; the pass's first request may exceed it (16,384).
    #[schemars(range(min = 1))]
    pub max_prefill_tokens: u64,
    /// Scales the share of running requests' remaining output that admission reserves (1.0:
    /// `new_token_ratio` starts at 0.7).
    pub schedule_conservativeness: f64,
    /// Decoding requests join a prefill pass's forward (false).
    pub enable_mixed_chunk: bool,
    /// What a request is checked against what is left of `max_prefill_tokens` by, once the
    /// pass holds a request: "prompt" (its whole uncached prompt, in pages: SGLang 0.5.6.post2's
    /// `PrefillAdder.add_one_req`, the default) or "chunk" (only the chunk it would be admitted
    /// with, so a long prompt's first chunk fills the pass: `aisimulate-core` 0.13's
    /// `get_new_batch_prefill`, which `scenarios/dynamo-mocker-sglang.toml` follows).
    pub max_prefill_tokens_charge: PrefillCharge,
    /// Whether a waiting request whose matched prefix, once locked, leaves too little room is
    /// checked again and waits (true: SGLang 0.5.6.post2's `PrefillAdder.add_one_req`, where
    /// locking the prefix takes its evictable blocks out of the budget, the default) or is
    /// admitted on the budget seen before the lock (false: `aisimulate-core` 0.13's
    /// `get_new_batch_prefill`, which `scenarios/dynamo-mocker-sglang.toml` follows).
    pub recheck_locked_prefix: bool,
}

/// `engine.sglang.max_prefill_tokens_charge`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PrefillCharge {
    /// The request's whole uncached prompt (SGLang's).
    #[default]
    Prompt,
    /// The chunk it would be admitted with (Dynamo's simulator's).
    Chunk,
}

impl Default for SglangSettings {
    fn default() -> Self {
        SglangSettings {
            mem_fraction_static: Auto::Derived,
            cuda_graph_max_bs: Auto::Derived,
            schedule_policy: SchedulePolicyKind::Fcfs,
            max_running_requests: Auto::Derived,
            chunked_prefill_size: Auto::Derived,
            max_prefill_tokens: 16384,
            schedule_conservativeness: 1.0,
            enable_mixed_chunk: false,
            max_prefill_tokens_charge: PrefillCharge::Prompt,
            recheck_locked_prefix: true,
        }
    }
}

/// `engine.sglang.schedule_policy`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SchedulePolicyKind {
    /// First come, first served.
    #[default]
    Fcfs,
    /// Longest cached prefix first.
    Lpm,
}

/// `engine.vllm.preemption`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PreemptionKind {
    /// The most recently admitted running request.
    #[default]
    Lifo,
    /// The earliest admitted running request.
    Fifo,
}

/// `engine.vllm.admission`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionKind {
    /// The first chunk's blocks.
    #[default]
    Chunk,
    /// The whole sequence's blocks.
    WholePrompt,
}

impl Scenario {
    /// Whether vLLM takes its larger defaults on the deployment's GPU: 70 GiB or more of
    /// memory, and not an A100 (vLLM 0.12 `EngineArgs.get_batch_defaults`). `None` without a
    /// deployment (or with an unknown GPU).
    fn vllm_large_gpu(&self) -> Option<bool> {
        let gpu = crate::deployment::gpu::find(
            &self
                .deployment_of(Pool::Workers)
                .or(self.deployment_of(Pool::Prefill))?
                .gpu,
        )?;
        Some(gpu.memory_gb >= 70.0 && !gpu.name.contains("a100"))
    }

    /// SGLang's running requests at most per worker (`None`: unbounded):
    /// `engine.sglang.max_running_requests`, or with "auto" SGLang's own for the KV the worker's
    /// deployment `kv` holds, or 256 (Dynamo's mocker's) without one.
    pub fn sglang_max_running_requests(&self, kv: Option<ServedKv>) -> Option<usize> {
        match self.engine.sglang.max_running_requests {
            Auto::Set(limit) => limit.count(),
            Auto::Derived => Some(kv.map_or(256, |k| {
                crate::deployment::sglang_defaults::default_max_running_requests(
                    k.kv_tokens,
                    k.context_len,
                )
            })),
        }
    }

    /// SGLang's prefill chunk, tokens (-1: no chunking), on a worker of `gpu`:
    /// `engine.sglang.chunked_prefill_size`, or SGLang's default for the GPU, or 8,192 without a
    /// deployment.
    pub fn sglang_chunked_prefill_size(
        &self,
        gpu: Option<&crate::deployment::gpu::GpuSpec>,
    ) -> i64 {
        match self.engine.sglang.chunked_prefill_size {
            Auto::Set(c) => c,
            Auto::Derived => gpu.map_or(8192, |gpu| {
                crate::deployment::sglang_defaults::default_chunked_prefill_size(
                    crate::deployment::cuda_mib(gpu),
                )
            }),
        }
    }

    /// Running requests at most per worker (`None`: unbounded) whose deployment holds `kv`
    /// (`None` without a deployment): `engine.vllm.max_num_seqs`, or the engine's default;
    /// under TensorRT-LLM, `engine.trtllm.max_batch_size`; under SGLang,
    /// [`Scenario::sglang_max_running_requests`], which follows the KV.
    pub fn max_num_seqs(&self, kv: Option<ServedKv>) -> Option<usize> {
        match self.engine.kind {
            EngineKind::Trtllm => return self.engine.trtllm.max_batch_size.count(),
            EngineKind::Sglang => return self.sglang_max_running_requests(kv),
            EngineKind::Vllm => {}
        }
        let default = match self.vllm_large_gpu() {
            Some(true) => 1024,
            _ => 256,
        };
        self.engine
            .vllm
            .max_num_seqs
            .set()
            .unwrap_or(Limit::Count(default))
            .count()
    }

    /// Tokens per step at most (`None`: unbounded): `engine.vllm.max_num_batched_tokens`, or
    /// the engine's default; under TensorRT-LLM, `engine.trtllm.max_num_tokens`; under SGLang,
    /// none (its prefill budgets bound a pass instead).
    pub fn max_num_batched_tokens(&self) -> Option<usize> {
        match self.engine.kind {
            EngineKind::Trtllm => return self.engine.trtllm.max_num_tokens.count(),
            EngineKind::Sglang => return None,
            EngineKind::Vllm => {}
        }
        let default = match self.vllm_large_gpu() {
            Some(false) => 2048,
            _ => 8192,
        };
        self.engine
            .vllm
            .max_num_batched_tokens
            .set()
            .unwrap_or(Limit::Count(default))
            .count()
    }
}
