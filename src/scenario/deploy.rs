//! A scenario's deployments resolved: each pool's model (a bundled one, or a model file relative
//! to the scenario) on its GPUs with the numbers derived from them, and the roofline's profile
//! (the engine's bundled one, or a file `timing.profile` names).
//!
//! Validation resolves them once with the scenario's folder, so that a deployment that cannot
//! serve (weights that do not fit, a precision the GPU lacks, a model file with a bad line) is
//! refused with the key that set it; a run resolves them again to build its workers.

use std::path::Path;

use super::{Auto, EngineKind, Pool, Scenario, TimingKind};
use crate::deployment::profile::{self, Profile};
use crate::deployment::sglang_defaults::SglangMemory;
use crate::deployment::{model, Deployment, DeploymentSettings, EngineMemory, MemoryShare};
use crate::error::{read_text, Invalid};

/// Each pool's deployment, and the profile of the roofline step model (under `timing.model =
/// "roofline"`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    /// Aggregated workers' deployment.
    pub workers: Option<Deployment>,
    /// Prefill (and colocated) workers'.
    pub prefill: Option<Deployment>,
    /// Decode workers'.
    pub decode: Option<Deployment>,
    /// The roofline's coefficients.
    pub profile: Option<Profile>,
}

/// The engine's memory settings under `s`.
pub fn engine_memory(s: &Scenario) -> EngineMemory {
    let trtllm = s.engine.kind == EngineKind::Trtllm;
    let g = &s.engine.sglang;
    EngineMemory {
        share: match s.engine.kind {
            EngineKind::Trtllm => MemoryShare::Given(s.engine.trtllm.free_gpu_memory_fraction),
            EngineKind::Sglang => match g.mem_fraction_static {
                Auto::Set(u) => MemoryShare::Given(u),
                Auto::Derived => MemoryShare::SglangDefault(SglangMemory {
                    chunked_prefill_size: g.chunked_prefill_size.set(),
                    max_prefill_tokens: g.max_prefill_tokens,
                    cuda_graph_max_bs: g.cuda_graph_max_bs.set().map(|n| n as u64),
                }),
            },
            EngineKind::Vllm => MemoryShare::Given(s.engine.vllm.gpu_memory_utilization),
        },
        of_free: trtllm,
        // SGLang profiles no sampler pass (its share leaves room for activations); vLLM's and
        // TensorRT-LLM's is profiled at vLLM's default when running requests are unbounded.
        max_num_seqs: if s.engine.kind == EngineKind::Sglang {
            0
        } else {
            s.max_num_seqs(None).unwrap_or(1024) as u64
        },
        max_num_seqs_key: match s.engine.kind {
            EngineKind::Trtllm => "engine.trtllm.max_batch_size",
            EngineKind::Sglang => "engine.sglang.max_running_requests",
            EngineKind::Vllm => "engine.vllm.max_num_seqs",
        },
    }
}

/// Resolves every pool's deployment and the profile; files are read relative to `base_dir`
/// (with `None`, a model or profile given as a file is left unresolved).
pub fn resolve(s: &Scenario, base_dir: Option<&Path>) -> Result<Resolved, Invalid> {
    let engine = engine_memory(s);
    let one = |pool: Pool| -> Result<Option<Deployment>, Invalid> {
        let Some(d) = s.deployment_of(pool) else {
            return Ok(None);
        };
        let key = key_of(s, pool);
        let Some(m) = model_of(d, base_dir).map_err(|inv| rekey(inv, key))? else {
            return Ok(None);
        };
        Deployment::resolve(d, &m, engine)
            .map(Some)
            .map_err(|inv| rekey(inv, key))
    };
    let mut r = Resolved::default();
    if s.disagg.enabled {
        r.prefill = one(Pool::Prefill)?;
        r.decode = one(Pool::Decode)?;
        if let (Some(p), Some(d)) = (&r.prefill, &r.decode) {
            if p.model.name != d.model.name {
                return Err(Invalid {
                    key: format!("{}.model", key_of(s, Pool::Decode)),
                    value: format!("{:?}", d.model.name),
                    problem: format!(
                        "must be the prefill workers' model ({}): the KV crosses between them",
                        p.model.name
                    ),
                });
            }
        }
    } else {
        r.workers = one(Pool::Workers)?;
    }
    if s.timing_kind() == TimingKind::Roofline {
        r.profile = profile_of(s, base_dir)?;
    }
    Ok(r)
}

/// `deployment.KEY` as `TABLE.KEY` for the table that set it.
fn rekey(inv: Invalid, table: &str) -> Invalid {
    Invalid {
        key: inv.key.replacen("deployment", table, 1),
        ..inv
    }
}

/// The dotted key of `pool`'s deployment table as the scenario spells it.
fn key_of(s: &Scenario, pool: Pool) -> &'static str {
    match pool {
        Pool::Prefill if s.disagg.prefill_deployment.is_some() => "disagg.prefill_deployment",
        Pool::Decode if s.disagg.decode_deployment.is_some() => "disagg.decode_deployment",
        _ => "deployment",
    }
}

/// The model `d` names: a bundled id or alias, or (ending in `.toml`) a model file relative to
/// `base_dir` (`None` when there is no folder to read it from).
fn model_of(
    d: &DeploymentSettings,
    base_dir: Option<&Path>,
) -> Result<Option<model::ModelSpec>, Invalid> {
    let bad = |problem: String| Invalid {
        key: "deployment.model".into(),
        value: format!("{:?}", d.model),
        problem,
    };
    if d.model.is_empty() {
        return Err(bad(format!(
            "must name a model (one of {}) or a model file",
            model::known()
        )));
    }
    if model::names_a_file(&d.model) {
        let Some(base) = base_dir else {
            return Ok(None);
        };
        let path = base.join(&d.model);
        let text = read_text(&path).map_err(|e| bad(format!("cannot be used: {e}")))?;
        return model::parse(&path, &text)
            .map(Some)
            .map_err(|e| bad(format!("cannot be used: {e}")));
    }
    model::find(&d.model).cloned().map(Some).ok_or_else(|| {
        bad(format!(
            "is not a known model (one of {}; their instruct and quantized checkpoints are \
             aliases), nor a model file (a path ending in .toml)",
            model::known()
        ))
    })
}

/// The profile `timing.profile` names (relative to `base_dir`), or the engine's bundled one.
fn profile_of(s: &Scenario, base_dir: Option<&Path>) -> Result<Option<Profile>, Invalid> {
    let engine = s.engine.kind.name();
    let Some(path) = &s.timing.profile else {
        return profile::bundled(engine)
            .map(|f| Some(Profile::of_file(f)))
            .ok_or_else(|| Invalid {
                key: "engine.kind".into(),
                value: format!("{engine:?}"),
                problem: format!(
                    "has no bundled roofline profile (engines with one: {}): name one with \
                     timing.profile",
                    profile::engines().join(", ")
                ),
            });
    };
    let Some(base) = base_dir else {
        return Ok(None);
    };
    let bad = |problem: String| Invalid {
        key: "timing.profile".into(),
        value: format!("{path:?}"),
        problem,
    };
    let file = base.join(path);
    let f = read_text(&file)
        .and_then(|text| profile::parse(&file, &text))
        .map_err(|e| bad(format!("cannot be used: {e}")))?;
    if f.engine != engine {
        return Err(bad(format!(
            "was fitted for engine {:?}, and this scenario's engine is {engine:?}",
            f.engine
        )));
    }
    Ok(Some(Profile::of_file(&f)))
}
