//! Deployments: a model served on GPUs, named by model, GPU, tensor parallelism and precision.
//!
//! A scenario's `[deployment]` table ([`DeploymentSettings`]) names them; [`Deployment::resolve`]
//! looks the model and GPU up ([`model`], [`gpu`]) and derives what a real server would find, never
//! hand-set: the weights each GPU holds, the KV bytes per token, the KV capacity left in memory
//! (as vLLM sizes it), and the step times ([`roofline`], corrected by a fitted [`profile`]).
//!
//! **Memory, per GPU** (vLLM 0.12 `gpu_worker.py` `determine_available_memory`, as its logs
//! show): KV bytes = `gpu_memory_utilization` (0.9) x the memory CUDA reports − weights − the
//! profile run's activation peak − memory outside torch (NCCL, cuBLAS). Measured on H100 80GB
//! (llm-d-benchmark's `config_explorer/empirical-vllm-memory-results.md`, vLLM V1 logs):
//! - CUDA reports 79.18 GiB of the 80: the datasheet's figure less [`DEVICE_RESERVED_GIB`];
//! - the activation peak is the dummy sampler pass over `max_num_seqs` rows of the vocabulary
//!   (4.76 GiB for Llama-3.1-8B, 5.64 for Qwen3-32B, 5.56 for Qwen3-0.6B, whatever the model's
//!   size): [`SAMPLER_BYTES_PER_LOGIT`] bytes per row and vocabulary entry (fits all three within
//!   1.5 %);
//! - outside torch: 0.13 GiB on one GPU, 0.55 GiB with tensor parallelism.
//!
//! TensorRT-LLM (`engine.kind = "trtllm"`) gives KV a share of what is left instead:
//! `free_gpu_memory_fraction` (0.9, its `KvCacheConfig`) x (the memory CUDA reports − weights −
//! activations − memory outside torch), with vLLM's activation and outside-torch terms (not
//! measured for TensorRT-LLM).
//!
//! SGLang (`engine.kind = "sglang"`) gives weights and KV `mem_fraction_static` of the memory and
//! reserves nothing for a sampler pass ([`sglang_defaults`]: its default share, derived from the
//! GPU, the chunk, its CUDA graphs and the parallelism, stands for activations and graphs).
//!
//! KV bytes per token and GPU: layers x KV heads on the GPU (`max(1, kv_heads / tp)`) x head dim x
//! 2 (K and V) x the KV dtype's bytes; blocks: the KV bytes over a block's bytes, less vLLM's null
//! block. A deployment whose KV cannot hold one request of `max_model_len` tokens is refused, as
//! vLLM refuses to start; so is a `max_model_len` past the model's context (`max_context`, its
//! config's `max_position_embeddings`), which vLLM refuses unless told to allow it.
//!
//! **Weights**: the linear projections at the weight precision (fp8: 1 byte; fp4: NVFP4, half a
//! byte plus one fp8 scale per 16 weights), embeddings, output head and norms in bf16 (as the
//! FP8/FP4 checkpoints keep them), split evenly over the tensor-parallel GPUs.

pub mod features;
pub mod gpu;
pub mod model;
pub mod profile;
pub mod roofline;
pub mod sglang_defaults;

use serde::{Deserialize, Serialize};

use crate::error::{Invalid, Result};
use gpu::GpuSpec;
use model::ModelSpec;

/// The most GPUs one worker may use for tensor parallelism (`deployment.tp`).
pub const MAX_TP: u64 = 64;
use sglang_defaults::SglangMemory;

/// GiB, bytes.
pub const GIB: f64 = 1_073_741_824.0;
/// MiB, bytes.
const MIB: f64 = 1_048_576.0;
/// The memory a GPU's datasheet counts that CUDA does not report as total (80 GiB H100: 79.18).
pub const DEVICE_RESERVED_GIB: f64 = 0.82;
/// Bytes of vLLM's profile-run activation peak per sampled row and vocabulary entry (fp32 logits
/// and the sampler's copies): 4.76 GiB / (1,024 x 128,256) for Llama, 5.64 / (1,024 x 151,936)
/// for Qwen3.
pub const SAMPLER_BYTES_PER_LOGIT: f64 = 38.9;
/// vLLM's memory outside torch on one GPU, GiB.
pub const NON_TORCH_GIB_ONE_GPU: f64 = 0.13;
/// ... and per GPU with tensor parallelism (NCCL's buffers), GiB.
pub const NON_TORCH_GIB_TP: f64 = 0.55;
/// vLLM's block size on CUDA, tokens (the null block is one of these).
pub const VLLM_BLOCK_TOKENS: u64 = 16;

/// The weights' number format (the linear projections'; embeddings and norms stay bf16).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// bfloat16: 2 bytes.
    #[default]
    Bf16,
    /// FP8 (E4M3): 1 byte, FP8 tensor cores.
    Fp8,
    /// FP4 (NVFP4): half a byte and an FP8 scale per 16 weights, FP4 tensor cores.
    Fp4,
}

impl Precision {
    /// Every precision, narrowest last.
    pub const ALL: [Precision; 3] = [Precision::Bf16, Precision::Fp8, Precision::Fp4];
    /// Their names.
    pub const NAMES: &'static [&'static str] = &["bf16", "fp8", "fp4"];

    /// Bytes per weight (NVFP4's block scales included).
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
            Precision::Fp4 => 0.5 + 1.0 / 16.0,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Precision::NAMES[self as usize]
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
            .ok_or_else(|| format!("{s:?} is not a precision (bf16, fp8, fp4)"))
    }
}

/// The KV cache's number format.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    /// vLLM's `auto` as of 0.14: the checkpoint's KV dtype. FP8 and FP4 checkpoints ship an FP8
    /// KV cache (ModelOpt's `kv_cache_quant_algo`, compressed-tensors' `kv_cache_scheme`: vLLM
    /// 0.16–0.19 `engine/arg_utils.py` `resolve_kv_cache_dtype_string` and the attention layer
    /// pick it up), so FP8 or FP4 weights mean an FP8 KV cache; BF16 weights the model's dtype,
    /// bf16. (vLLM 0.12 took bf16 whatever the weights; `bf16` asks for that, as does online
    /// quantization of a bf16 checkpoint, `--quantization fp8`.)
    #[default]
    Auto,
    /// bfloat16: 2 bytes.
    Bf16,
    /// FP8: 1 byte.
    Fp8,
}

impl KvDtype {
    /// Their names.
    pub const NAMES: &'static [&'static str] = &["auto", "bf16", "fp8"];

    /// The dtype itself: `auto` resolved for weights in `precision`.
    pub fn resolve(self, precision: Precision) -> KvDtype {
        match (self, precision) {
            (KvDtype::Auto, Precision::Bf16) => KvDtype::Bf16,
            (KvDtype::Auto, _) => KvDtype::Fp8,
            (k, _) => k,
        }
    }

    /// Bytes per element, `auto` resolved for weights in `precision`.
    pub fn bytes(self, precision: Precision) -> u64 {
        match self.resolve(precision) {
            KvDtype::Fp8 => 1,
            _ => 2,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        KvDtype::NAMES[self as usize]
    }
}

impl std::str::FromStr for KvDtype {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(KvDtype::Auto),
            "bf16" => Ok(KvDtype::Bf16),
            "fp8" => Ok(KvDtype::Fp8),
            _ => Err(format!("{s:?} is not a KV dtype (auto, bf16, fp8)")),
        }
    }
}

/// `[deployment]`: a model on GPUs. Every derived number (KV bytes per token, KV capacity, step
/// times) follows from these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DeploymentSettings {
    /// A bundled model's Hugging Face id or alias (`meta-llama/Llama-3.1-70B-Instruct`), or the
    /// path of a model file (ending in `.toml`, relative to the scenario file).
    pub model: String,
    /// A bundled GPU's name (`h100_sxm`, `h200_sxm`, `b200_sxm`, `gb200`, `b300_sxm`, `gb300`,
    /// `a100_sxm`, `l40s`).
    pub gpu: String,
    /// GPUs per worker, tensor parallel (1).
    #[schemars(range(min = 1, max = "MAX_TP"))]
    pub tp: u64,
    /// The weights' precision: bf16, fp8 or fp4 (bf16).
    pub precision: Precision,
    /// The KV cache's dtype: auto (vLLM's: fp8 with fp8 or fp4 weights, else bf16), bf16 or fp8
    /// (auto).
    pub kv_dtype: KvDtype,
    /// The longest request the server accepts, tokens (absent: the model's `max_context`, as
    /// vLLM's `max_model_len`). The KV must hold one such request.
    #[schemars(range(min = 1, max = "crate::limits::MAX_CONTEXT_TOKENS"))]
    pub max_model_len: Option<u64>,
}

impl Default for DeploymentSettings {
    fn default() -> Self {
        DeploymentSettings {
            model: String::new(),
            gpu: String::new(),
            tp: 1,
            precision: Precision::Bf16,
            kv_dtype: KvDtype::Auto,
            max_model_len: None,
        }
    }
}

/// What the engine that serves a deployment reserves of the GPU's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineMemory {
    /// The share of the GPU's memory the engine may use (vLLM's `gpu_memory_utilization`,
    /// SGLang's `mem_fraction_static`), or with `of_free`, the share of the memory left free for
    /// KV (TensorRT-LLM's `free_gpu_memory_fraction`).
    pub share: MemoryShare,
    /// Whether the share is of the memory weights, activations and the rest leave
    /// (TensorRT-LLM's rule) rather than of the whole GPU's (vLLM's and SGLang's).
    pub of_free: bool,
    /// The most requests that run at once (sizes the sampler's activation peak).
    pub max_num_seqs: u64,
    /// The scenario key that sets `max_num_seqs` (`engine.vllm.max_num_seqs`, ...), for errors.
    pub max_num_seqs_key: &'static str,
}

/// The share of memory an engine takes: given, or SGLang's default for the GPU and parallelism.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryShare {
    /// This share.
    Given(f64),
    /// SGLang's own `mem_fraction_static` ([`sglang_defaults::mem_fraction_static`]).
    SglangDefault(SglangMemory),
}

impl EngineMemory {
    /// The share of each of `tp` `gpu`s' memory the engine takes.
    pub fn share(&self, gpu: &GpuSpec, tp: u64) -> f64 {
        match self.share {
            MemoryShare::Given(u) => u,
            MemoryShare::SglangDefault(m) => {
                sglang_defaults::mem_fraction_static(cuda_mib(gpu), tp, m)
            }
        }
    }
}

/// What a worker's deployment gives an engine's defaults that follow its KV: the tokens of KV it
/// holds and its longest request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedKv {
    /// Tokens of KV per worker.
    pub kv_tokens: u64,
    /// The longest request, tokens (the server's context length).
    pub context_len: u64,
}

/// A resolved deployment: the model, the GPU and everything derived from them.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    /// The model.
    pub model: ModelSpec,
    /// The GPU.
    pub gpu: GpuSpec,
    /// GPUs per worker.
    pub tp: u64,
    /// Weight precision.
    pub precision: Precision,
    /// KV dtype (`auto` resolved).
    pub kv_dtype: KvDtype,
    /// The longest request, tokens.
    pub max_model_len: u64,
    /// Weights each GPU holds, bytes.
    pub weight_bytes_per_gpu: f64,
    /// KV bytes per token on each GPU.
    pub kv_bytes_per_token_per_gpu: u64,
    /// KV bytes per token in the whole model (what a transfer moves).
    pub kv_bytes_per_token: u64,
    /// The share of each GPU's memory the engine took ([`EngineMemory::share`]).
    pub memory_share: f64,
    /// Memory each GPU leaves for KV, bytes.
    pub kv_bytes_per_gpu: f64,
    /// Tokens of KV a worker holds (in vLLM's 16-token blocks, the null block left out).
    pub kv_capacity_tokens: u64,
}

impl Deployment {
    /// Resolves `s` serving `model` (looked up or read by the caller: [`model::find`],
    /// [`model::parse`]): the GPU, and the derived numbers under `engine`'s memory settings.
    /// Errors name the `deployment.` key.
    pub fn resolve(
        s: &DeploymentSettings,
        model: &ModelSpec,
        engine: EngineMemory,
    ) -> Result<Self, Invalid> {
        let model = model.clone();
        let gpu = gpu::find(&s.gpu).ok_or_else(|| {
            if s.gpu.is_empty() {
                bad(
                    "deployment.gpu",
                    "\"\"",
                    &format!("must name a GPU (one of {})", gpu::known()),
                )
            } else {
                bad(
                    "deployment.gpu",
                    format!("{:?}", s.gpu),
                    &format!("is not a known GPU (one of {})", gpu::known()),
                )
            }
        })?;
        if s.tp == 0 || s.tp > MAX_TP {
            return Err(bad(
                "deployment.tp",
                s.tp,
                &format!("must be 1 to {MAX_TP}"),
            ));
        }
        if model.attention_heads % s.tp != 0
            || (model.kv_heads % s.tp != 0 && s.tp % model.kv_heads != 0)
        {
            return Err(bad(
                "deployment.tp",
                s.tp,
                &format!(
                    "must divide the model's {} attention heads, and divide or be a multiple of \
                     its {} KV heads",
                    model.attention_heads, model.kv_heads
                ),
            ));
        }
        if gpu.link_bytes_per_s(s.tp).is_none() {
            return Err(bad(
                "deployment.tp",
                s.tp,
                &format!(
                    "spans more than the {} GPUs of one {} server, and data/gpus/ gives no \
                     network bandwidth for its all-reduces across servers: use tp <= {}",
                    gpu.gpus_per_node, gpu.name, gpu.gpus_per_node
                ),
            ));
        }
        if gpu.peak_flops(s.precision).is_none() {
            let has: Vec<&str> = gpu.precisions().iter().map(|p| p.name()).collect();
            return Err(bad(
                "deployment.precision",
                format!("{:?}", s.precision.name()),
                &format!(
                    "needs {} tensor cores, which {} lacks (it has {})",
                    s.precision.name().to_uppercase(),
                    gpu.name,
                    has.join(", ")
                ),
            ));
        }
        let kv_dtype = s.kv_dtype.resolve(s.precision);
        if kv_dtype == KvDtype::Fp8 && gpu.fp8_tflops.is_none() {
            return Err(bad(
                "deployment.kv_dtype",
                "\"fp8\"",
                &format!("needs FP8 support, which {} lacks", gpu.name),
            ));
        }
        let max_model_len = s.max_model_len.unwrap_or(model.max_context);
        if max_model_len == 0 || max_model_len > crate::limits::MAX_CONTEXT_TOKENS {
            return Err(bad(
                "deployment.max_model_len",
                max_model_len,
                &format!("must be 1 to {}", crate::limits::MAX_CONTEXT_TOKENS),
            ));
        }
        if max_model_len > model.max_context {
            // vLLM refuses it at start ("User-specified max_model_len ... is greater than the
            // derived max_model_len"), unless told to allow it.
            return Err(bad(
                "deployment.max_model_len",
                max_model_len,
                &format!(
                    "tokens is more than {}'s context of {} tokens (`max_context`, its config's \
                     max_position_embeddings), which vLLM refuses",
                    model.name, model.max_context
                ),
            ));
        }
        let weight_bytes = weight_bytes(&model, s.precision);
        let weight_bytes_per_gpu = weight_bytes / s.tp as f64;
        let kv_bytes_per_token_per_gpu =
            model.kv_bytes_per_token_per_gpu(s.tp, kv_dtype.bytes(s.precision));
        let kv_bytes_per_gpu = kv_memory_per_gpu(&model, gpu, s.tp, weight_bytes_per_gpu, engine);
        let memory_share = engine.share(gpu, s.tp);
        if let MemoryShare::SglangDefault(m) = engine.share {
            if memory_share <= 0.0 {
                return Err(bad(
                    "engine.sglang.mem_fraction_static",
                    "\"auto\"",
                    &format!(
                        "is SGLang's default on {} at tp = {}: {memory_share}, its reserve for \
                         prefill activations and CUDA graphs ({:.0} MiB) taking all of the GPU's \
                         {:.0} MiB: lower engine.sglang.chunked_prefill_size or \
                         engine.sglang.cuda_graph_max_bs, or set mem_fraction_static",
                        gpu.name,
                        s.tp,
                        sglang_defaults::reserved_mib(cuda_mib(gpu), s.tp, m),
                        cuda_mib(gpu)
                    ),
                ));
            }
        }
        // What weights and the rest leave for the sampler's reserve (under TensorRT-LLM's rule
        // before the engine takes its share of it), and that reserve per running request.
        let per_seq = SAMPLER_BYTES_PER_LOGIT * model.vocab_size as f64;
        let no_seqs = EngineMemory {
            max_num_seqs: 0,
            ..engine
        };
        let room = kv_memory_per_gpu(&model, gpu, s.tp, weight_bytes_per_gpu, no_seqs)
            / if engine.of_free { memory_share } else { 1.0 };
        if kv_bytes_per_gpu <= 0.0 && room > per_seq {
            // The weights fit; the sampler's reserve for that many running requests does not.
            // The hint is the largest limit that runs: one whose KV holds the longest request.
            let runs = |n: u64| {
                let with_n = EngineMemory {
                    max_num_seqs: n,
                    ..engine
                };
                let kv = kv_memory_per_gpu(&model, gpu, s.tp, weight_bytes_per_gpu, with_n);
                kv > 0.0 && kv_capacity_tokens(kv, kv_bytes_per_token_per_gpu) >= max_model_len
            };
            let hint = match largest_true(engine.max_num_seqs, runs) {
                0 => format!(
                    "no limit leaves room for one {max_model_len}-token request (the longest): \
                     serve shorter requests, or raise tp"
                ),
                most => format!(
                    "at most {most} leave room for one {max_model_len}-token request (the \
                     longest)"
                ),
            };
            return Err(bad(
                engine.max_num_seqs_key,
                engine.max_num_seqs,
                &format!(
                    "running requests leave no KV on {} x {}: the sampler's reserve for them \
                     ({SAMPLER_BYTES_PER_LOGIT} bytes x {} vocabulary entries each, {:.1} GB per \
                     GPU) is more than the {:.1} GB the weights leave; {hint}",
                    s.tp,
                    gpu.name,
                    model.vocab_size,
                    per_seq * engine.max_num_seqs as f64 / 1e9,
                    room / 1e9,
                ),
            ));
        }
        if kv_bytes_per_gpu <= 0.0 {
            // What each GPU leaves for weights and KV once the engine's own reserve is taken:
            // the KV memory rule with no weights, before TensorRT-LLM's share of what is left
            // (its share applies to the KV alone, not to the weights).
            let room = kv_memory_per_gpu(&model, gpu, s.tp, 0.0, engine)
                / if engine.of_free { memory_share } else { 1.0 };
            let share = if engine.of_free {
                format!(
                    "less the engine's reserve; KV gets {memory_share} of what the weights leave"
                )
            } else {
                format!("at the engine's memory share {memory_share}, less its reserve")
            };
            let fits = min_tp(&model, gpu, s.precision, engine);
            return Err(bad(
                "deployment.tp",
                s.tp,
                &format!(
                    "{} in {} needs {:.1} GB of weights; tp = {} x {} holds {} GiB = {:.1} GB \
                     ({:.1} GB for weights and KV {share}): {}",
                    model.name,
                    s.precision.name(),
                    weight_bytes / 1e9,
                    s.tp,
                    gpu.name,
                    gpu.memory_gb * s.tp as f64,
                    gpu.memory_bytes() * s.tp as f64 / 1e9,
                    room.max(0.0) * s.tp as f64 / 1e9,
                    fits.map_or_else(
                        || if gpu.link_bytes_per_s(MAX_TP).is_some() {
                            format!("no tensor parallelism up to {MAX_TP} GPUs fits it")
                        } else {
                            // min_tp tries no group past a server without a network figure.
                            format!(
                                "no tensor parallelism within one {}-GPU {} server fits it \
                                 (data/gpus/ gives no network bandwidth for a larger group)",
                                gpu.gpus_per_node, gpu.name
                            )
                        },
                        |t| format!("use tp >= {t}")
                    )
                ),
            ));
        }
        let kv_capacity_tokens = kv_capacity_tokens(kv_bytes_per_gpu, kv_bytes_per_token_per_gpu);
        if kv_capacity_tokens < max_model_len {
            return Err(bad(
                "deployment.max_model_len",
                max_model_len,
                &format!(
                    "tokens (the longest request) is more than the {kv_capacity_tokens} tokens of KV \
                     that {} in {} on {} x {} leaves (one such request must fit, as vLLM checks \
                     at start): serve shorter requests, or raise tp",
                    model.name,
                    s.precision.name(),
                    s.tp,
                    gpu.name
                ),
            ));
        }
        Ok(Deployment {
            kv_bytes_per_token: model.kv_bytes_per_token(kv_dtype.bytes(s.precision)),
            model,
            gpu: gpu.clone(),
            tp: s.tp,
            precision: s.precision,
            kv_dtype,
            max_model_len,
            weight_bytes_per_gpu,
            kv_bytes_per_token_per_gpu,
            memory_share,
            kv_bytes_per_gpu,
            kv_capacity_tokens,
        })
    }

    /// What its KV gives an engine's defaults that follow the KV (SGLang's running requests).
    pub fn served_kv(&self) -> ServedKv {
        ServedKv {
            kv_tokens: self.kv_capacity_tokens,
            context_len: self.max_model_len,
        }
    }

    /// KV capacity in blocks of `block_size` tokens.
    pub fn kv_capacity_blocks(&self, block_size: usize) -> usize {
        (self.kv_capacity_tokens / block_size as u64) as usize
    }

    /// A one-line description: `Qwen/Qwen3-32B fp8 on 2 x h100_sxm`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} on {} x {}",
            self.model.name,
            self.precision.name(),
            self.tp,
            self.gpu.name
        )
    }
}

fn bad(key: &str, value: impl ToString, problem: &str) -> Invalid {
    Invalid {
        key: key.to_string(),
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

/// Bytes of `model`'s weights at `precision` (linear projections at the precision, the rest in
/// bf16).
pub fn weight_bytes(model: &ModelSpec, precision: Precision) -> f64 {
    model.linear_params() as f64 * precision.bytes() + model.other_params() as f64 * 2.0
}

/// Bytes each of `tp` GPUs leaves for KV once weights and the engine's reserve are taken
/// (negative when they do not fit).
fn kv_memory_per_gpu(
    model: &ModelSpec,
    gpu: &GpuSpec,
    tp: u64,
    weight_bytes_per_gpu: f64,
    engine: EngineMemory,
) -> f64 {
    let usable = usable_bytes(gpu);
    let share = engine.share(gpu, tp);
    let activation = SAMPLER_BYTES_PER_LOGIT * model.vocab_size as f64 * engine.max_num_seqs as f64;
    let non_torch = if tp == 1 {
        NON_TORCH_GIB_ONE_GPU
    } else {
        NON_TORCH_GIB_TP
    } * GIB;
    let rest = weight_bytes_per_gpu + activation + non_torch;
    if engine.of_free {
        (usable - rest) * share
    } else {
        usable * share - rest
    }
}

/// The tokens of KV a GPU's `kv_bytes` hold at `kv_bytes_per_token` bytes each: whole
/// [`VLLM_BLOCK_TOKENS`]-token blocks, less vLLM's null block.
fn kv_capacity_tokens(kv_bytes: f64, kv_bytes_per_token: u64) -> u64 {
    let blocks = (kv_bytes / (kv_bytes_per_token * VLLM_BLOCK_TOKENS) as f64).floor() as u64;
    blocks.saturating_sub(1) * VLLM_BLOCK_TOKENS
}

/// The largest `n` in `0..below` for which `holds(n)` is true, for a `holds` that is true up to
/// some `n` and false after it (0 when it holds for none past 0).
fn largest_true(below: u64, holds: impl Fn(u64) -> bool) -> u64 {
    let (mut lo, mut hi) = (0, below);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The memory CUDA reports of `gpu`, bytes: the datasheet's less [`DEVICE_RESERVED_GIB`].
fn usable_bytes(gpu: &GpuSpec) -> f64 {
    gpu.memory_bytes() - DEVICE_RESERVED_GIB * GIB
}

/// The memory CUDA reports of `gpu`, MiB (what SGLang's defaults read).
pub fn cuda_mib(gpu: &GpuSpec) -> f64 {
    usable_bytes(gpu) / MIB
}

/// The smallest power-of-two tensor parallelism whose GPUs leave room for KV.
fn min_tp(
    model: &ModelSpec,
    gpu: &GpuSpec,
    precision: Precision,
    engine: EngineMemory,
) -> Option<u64> {
    let total = weight_bytes(model, precision);
    (0..7)
        .map(|k| 1u64 << k)
        .filter(|&tp| gpu.link_bytes_per_s(tp).is_some())
        .find(|&tp| kv_memory_per_gpu(model, gpu, tp, total / tp as f64, engine) > 0.0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deployment of a bundled model, vLLM's memory settings, requests of 8,192 tokens.
    pub(crate) fn deployment(model: &str, gpu: &str, tp: u64, precision: Precision) -> Deployment {
        resolve(&settings(model, gpu, tp, precision)).expect("fits")
    }

    fn settings(model: &str, gpu: &str, tp: u64, precision: Precision) -> DeploymentSettings {
        DeploymentSettings {
            model: model.into(),
            gpu: gpu.into(),
            tp,
            precision,
            kv_dtype: KvDtype::Auto,
            max_model_len: Some(8192),
        }
    }

    const VLLM: EngineMemory = EngineMemory {
        share: MemoryShare::Given(0.9),
        of_free: false,
        max_num_seqs: 1024,
        max_num_seqs_key: "engine.vllm.max_num_seqs",
    };

    fn resolve(s: &DeploymentSettings) -> Result<Deployment, Invalid> {
        Deployment::resolve(s, model::find(&s.model).expect("bundled"), VLLM)
    }

    /// Llama-3.1-8B in bf16 on one H100, by hand: CUDA's 79.18 GiB x 0.9 = 76,516,989,861.9
    /// bytes; weights 16,060,522,496 (the checkpoint's size); the sampler's peak 38.9 x 128,256
    /// x 1,024 = 5,108,898,201.6; outside torch 0.13 GiB = 139,586,437.1; KV 55,207,982,727.2
    /// bytes = 51.42 GiB (vLLM logs 51.38 for this deployment). At 131,072 bytes per token
    /// that is 26,325 blocks of 16, one of them vLLM's null block: 421,184 tokens.
    #[test]
    fn llama_8b_on_one_h100_has_the_kv_vllm_logs() {
        let d = resolve(&settings(
            "meta-llama/Llama-3.1-8B-Instruct",
            "h100_sxm",
            1,
            Precision::Bf16,
        ))
        .expect("fits");
        assert_eq!(d.weight_bytes_per_gpu, 16_060_522_496.0);
        assert_eq!(d.kv_bytes_per_token_per_gpu, 131_072);
        assert!(
            (d.kv_bytes_per_gpu - 55_207_982_727.2).abs() < 1.0,
            "{}",
            d.kv_bytes_per_gpu
        );
        assert!((d.kv_bytes_per_gpu / GIB - 51.38).abs() < 0.05);
        assert_eq!(d.kv_capacity_tokens, 421_184);
        assert_eq!(d.kv_capacity_blocks(16), 26_324);
        assert_eq!(d.kv_capacity_blocks(64), 6_581);
    }

    /// The same deployment under TensorRT-LLM's rule: 0.9 x what weights, the sampler's peak
    /// and the memory outside torch leave of CUDA's 79.18 GiB: 0.9 x (85,018,877,624.3 −
    /// 16,060,522,496 − 5,108,898,201.6 − 139,586,437.1) = 57,338,883,440.6 bytes.
    #[test]
    fn tensorrt_llm_gives_kv_a_share_of_the_memory_left() {
        let s = settings(
            "meta-llama/Llama-3.1-8B-Instruct",
            "h100_sxm",
            1,
            Precision::Bf16,
        );
        let trt = EngineMemory {
            of_free: true,
            ..VLLM
        };
        let d = Deployment::resolve(&s, model::find(&s.model).unwrap(), trt).expect("fits");
        assert!(
            (d.kv_bytes_per_gpu - 57_338_883_440.6).abs() < 1.0,
            "{}",
            d.kv_bytes_per_gpu
        );
    }

    #[test]
    fn fp8_weights_bring_an_fp8_kv_cache_unless_asked_otherwise() {
        let mut s = settings("meta-llama/Llama-3.1-70B", "h100_sxm", 2, Precision::Fp8);
        let d = resolve(&s).unwrap();
        assert_eq!(d.kv_dtype, KvDtype::Fp8);
        assert_eq!(d.kv_bytes_per_token, 163_840);
        assert_eq!(d.kv_bytes_per_token_per_gpu, 81_920);
        s.kv_dtype = KvDtype::Bf16;
        let bf16 = resolve(&s).unwrap();
        assert_eq!(bf16.kv_bytes_per_token, 327_680);
        // The same memory holds half the tokens (to a block, and the null block).
        assert!((2 * bf16.kv_capacity_tokens).abs_diff(d.kv_capacity_tokens) <= 32);
    }

    /// vLLM refuses a `max_model_len` past the model's `max_position_embeddings`; so does the
    /// deployment, naming the model's context. Exactly the context is accepted.
    #[test]
    fn requests_longer_than_the_models_context_are_refused() {
        let mut s = settings("Qwen/Qwen3-8B", "h100_sxm", 1, Precision::Bf16);
        s.max_model_len = Some(40_961);
        let e = resolve(&s).unwrap_err();
        assert_eq!(e.key, "deployment.max_model_len");
        assert!(
            e.problem.contains("context of 40960 tokens"),
            "{}",
            e.problem
        );
        s.max_model_len = Some(40_960);
        assert_eq!(resolve(&s).unwrap().max_model_len, 40_960);
    }

    /// Weights that fit with a running-request limit whose sampler reserve does not: the error
    /// names the limit, not the tensor parallelism, and its "at most" is exact (that many run;
    /// one more leaves too little KV for the longest request).
    #[test]
    fn too_many_running_requests_are_refused_naming_the_limit() {
        let s = settings("Qwen/Qwen3-8B", "h100_sxm", 1, Precision::Bf16);
        let model = model::find(&s.model).unwrap();
        let with = |n: u64| {
            let engine = EngineMemory {
                max_num_seqs: n,
                ..VLLM
            };
            Deployment::resolve(&s, model, engine)
        };
        let e = with(100_000).unwrap_err();
        assert_eq!(e.key, "engine.vllm.max_num_seqs");
        assert!(e.problem.contains("591.0 GB per GPU"), "{}", e.problem);
        let most: u64 = e
            .problem
            .rsplit("at most ")
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(with(most).is_ok(), "{most} running requests should run");
        assert!(with(most + 1).is_err());
    }

    /// When no running-request limit leaves room for the longest request, the hint says so
    /// (and names what to change) instead of a count that would not run.
    #[test]
    fn no_running_request_limit_that_runs_is_said() {
        let mut s = settings("Qwen/Qwen3-8B", "h100_sxm", 1, Precision::Bf16);
        s.max_model_len = Some(40_960);
        let model = model::find(&s.model).unwrap();
        // A memory share that leaves 1 GB past the weights: room for a few running requests'
        // sampler reserve, too little for one 40,960-token request's KV (6 GB).
        let gpu = gpu::find("h100_sxm").unwrap();
        let rest = weight_bytes(model, s.precision) + NON_TORCH_GIB_ONE_GPU * GIB + 1e9;
        let e = Deployment::resolve(
            &s,
            model,
            EngineMemory {
                max_num_seqs: 100_000,
                share: MemoryShare::Given(rest / usable_bytes(gpu)),
                ..VLLM
            },
        )
        .unwrap_err();
        assert_eq!(e.key, "engine.vllm.max_num_seqs");
        assert!(e.problem.contains("no limit leaves room"), "{}", e.problem);
    }

    /// A tensor-parallel group larger than a server whose network no file gives is refused,
    /// naming the server's size; and no such group is suggested for a model too large.
    #[test]
    fn tp_past_a_server_without_a_network_is_refused() {
        let e = resolve(&settings(
            "meta-llama/Llama-3.1-70B",
            "l40s",
            16,
            Precision::Fp8,
        ))
        .unwrap_err();
        assert_eq!(e.key, "deployment.tp");
        assert!(
            e.problem
                .contains("more than the 8 GPUs of one l40s server"),
            "{}",
            e.problem
        );
        // Llama-3.1-70B in bf16 at a 40 % memory share would need 16 L40S: more than a server.
        let s = settings("meta-llama/Llama-3.1-70B", "l40s", 1, Precision::Bf16);
        let small_share = EngineMemory {
            share: MemoryShare::Given(0.4),
            ..VLLM
        };
        let e = Deployment::resolve(&s, model::find(&s.model).unwrap(), small_share).unwrap_err();
        // Not "up to 64 GPUs": 16 would hold it, but no group past the server is tried.
        assert!(
            e.problem
                .ends_with("no tensor parallelism within one 8-GPU l40s server fits it (data/gpus/ gives no network bandwidth for a larger group)"),
            "{}",
            e.problem
        );
    }

    #[test]
    fn largest_true_finds_the_last_holding_value() {
        for edge in 0..20 {
            assert_eq!(largest_true(20, |n| n <= edge), edge.min(19));
        }
        assert_eq!(largest_true(1, |_| true), 0);
    }

    #[test]
    fn weights_that_do_not_fit_are_refused_with_the_numbers() {
        let e = resolve(&settings(
            "meta-llama/Llama-3.1-70B",
            "h100_sxm",
            1,
            Precision::Bf16,
        ))
        .unwrap_err();
        assert_eq!(e.key, "deployment.tp");
        assert!(
            e.problem.starts_with(
                "meta-llama/Llama-3.1-70B in bf16 needs 141.1 GB of weights; tp = 1 x h100_sxm \
                 holds 80 GiB = 85.9 GB ("
            ),
            "{}",
            e.problem
        );
        assert!(e.problem.ends_with("use tp >= 2"), "{}", e.problem);
    }

    /// Under TensorRT-LLM's rule (KV a share of what the weights leave) the room the refusal
    /// gives for weights and KV is what the GPUs hold less the engine's reserve, never more
    /// than the GPUs' memory (it once said 90.5 GB for one 80 GB H100, and 104.2 GB for two
    /// 48 GB L40S).
    #[test]
    fn weights_that_do_not_fit_under_trtllm_say_a_room_the_gpus_hold() {
        let trtllm = EngineMemory {
            share: MemoryShare::Given(0.9),
            of_free: true,
            max_num_seqs: 8,
            max_num_seqs_key: "engine.trtllm.max_batch_size",
        };
        for (model, gpu, tp, precision) in [
            ("meta-llama/Llama-3.1-70B", "h100_sxm", 1, Precision::Bf16),
            ("meta-llama/Llama-3.1-70B", "l40s", 2, Precision::Bf16),
        ] {
            let s = settings(model, gpu, tp, precision);
            let e = Deployment::resolve(&s, model::find(model).unwrap(), trtllm).unwrap_err();
            assert_eq!(e.key, "deployment.tp");
            let room: f64 = e
                .problem
                .split(" GB (")
                .nth(1)
                .and_then(|t| t.split(" GB for weights and KV").next())
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("{}", e.problem));
            let g = gpu::find(gpu).unwrap();
            let usable = (g.memory_gb - DEVICE_RESERVED_GIB) * GIB * tp as f64 / 1e9;
            assert!(
                room < usable && room > 0.9 * usable,
                "{room} of {usable}: {}",
                e.problem
            );
            assert!(e.problem.contains(" GiB = "), "{}", e.problem);
            assert!(
                e.problem.contains("KV gets 0.9 of what the weights leave"),
                "{}",
                e.problem
            );
        }
    }

    #[test]
    fn a_precision_the_gpu_lacks_is_refused() {
        let e = resolve(&settings("Qwen/Qwen3-32B", "h100_sxm", 2, Precision::Fp4)).unwrap_err();
        assert_eq!(e.key, "deployment.precision");
        assert!(
            e.problem.contains("h100_sxm lacks (it has bf16, fp8)"),
            "{}",
            e.problem
        );
        let e = resolve(&settings("Qwen/Qwen3-8B", "a100_sxm", 1, Precision::Fp8)).unwrap_err();
        assert_eq!(e.key, "deployment.precision");
        assert!(resolve(&settings("Qwen/Qwen3-32B", "b200_sxm", 1, Precision::Fp4)).is_ok());
    }

    #[test]
    fn kv_that_cannot_hold_one_longest_request_is_refused() {
        let mut s = settings("Qwen/Qwen3-32B", "h100_sxm", 1, Precision::Bf16);
        s.max_model_len = None; // the model's 40,960 tokens
        let e = resolve(&s).unwrap_err();
        assert_eq!(e.key, "deployment.max_model_len");
        assert!(e.problem.contains("tokens of KV"), "{}", e.problem);
        s.max_model_len = Some(8192);
        assert!(resolve(&s).is_ok());
    }

    #[test]
    fn tensor_parallelism_must_split_the_heads() {
        let e = resolve(&settings("Qwen/Qwen3-32B", "h100_sxm", 3, Precision::Bf16)).unwrap_err();
        assert_eq!(e.key, "deployment.tp");
        // 16 GPUs: 8 KV heads replicated, one per GPU.
        let d = resolve(&settings(
            "meta-llama/Llama-3.1-70B",
            "h100_sxm",
            16,
            Precision::Bf16,
        ))
        .unwrap();
        assert_eq!(d.kv_bytes_per_token_per_gpu, 80 * 128 * 2 * 2);
    }
}
