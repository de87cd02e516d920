//! A scenario's deployments, resolved for the workers that serve them: per pool, the model on
//! its GPUs with its derived numbers, and the step-time model each worker runs.
//!
//! Without a `[deployment]` nothing is derived: KV capacity is `cluster.kv_capacity_blocks`,
//! step times are `[timing]`'s polynomials (or fixed time) and the KV link moves
//! `disagg.model`'s bytes. With one, all three follow from it: the KV capacity vLLM would find
//! in memory, the roofline with the engine's profile, and the model's KV bytes.

use std::path::Path;

use serde::Serialize;

use crate::deployment::profile::Profile;
use crate::deployment::roofline::Roofline;
use crate::deployment::Deployment;
use crate::error::{Error, Result};
use crate::scenario::deploy::{self, Resolved};
use crate::scenario::{Pool, Scenario, Timing, TimingKind};

use super::topology::Role;
use super::worker::timing::TimingModel;

/// The scenario's deployments per pool, and the roofline's profile.
#[derive(Clone, Debug, Default)]
pub struct Hardware(Resolved);

/// What a run reports of a pool's deployment (`deployments` in `--json`).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DeploymentReport {
    /// `workers`, `prefill` or `decode`.
    pub pool: Pool,
    /// The model's id.
    pub model: String,
    /// The GPU.
    pub gpu: String,
    /// GPUs per worker.
    pub tp: u64,
    /// Weight precision.
    pub precision: String,
    /// KV dtype (`auto` resolved).
    pub kv_dtype: String,
    /// The share of each GPU's memory the engine took (vLLM's `gpu_memory_utilization`,
    /// SGLang's `mem_fraction_static`, derived when "auto"; TensorRT-LLM's
    /// `free_gpu_memory_fraction` of what weights leave).
    pub memory_share: f64,
    /// Weights per GPU, GB (1e9 bytes).
    pub weights_gb_per_gpu: f64,
    /// KV bytes per token, whole model.
    pub kv_bytes_per_token: u64,
    /// KV memory per GPU, GB.
    pub kv_gb_per_gpu: f64,
    /// Tokens of KV per worker.
    pub kv_capacity_tokens: u64,
    /// KV blocks per worker, at the run's block size.
    pub kv_capacity_blocks: u64,
    /// The longest request, tokens.
    pub max_model_len: u64,
}

impl DeploymentReport {
    /// What its KV gives an engine's defaults that follow the KV (SGLang's running requests).
    pub fn served_kv(&self) -> crate::deployment::ServedKv {
        crate::deployment::ServedKv {
            kv_tokens: self.kv_capacity_tokens,
            context_len: self.max_model_len,
        }
    }
}

impl Hardware {
    /// Resolves `s`'s deployments (model files and the profile relative to `base_dir`).
    pub fn resolve(s: &Scenario, base_dir: &Path) -> Result<Hardware> {
        deploy::resolve(s, Some(base_dir))
            .map(Hardware)
            .map_err(|inv| Error::setting(scenario_name(s), inv.key, inv.value, inv.problem))
    }

    /// Replaces the roofline's profile, when the run has one.
    pub fn set_profile(&mut self, p: Profile) {
        if self.0.profile.is_some() {
            self.0.profile = Some(p);
        }
    }

    /// The deployment a worker of `role` serves.
    pub fn of(&self, role: Role) -> Option<&Deployment> {
        match role {
            Role::Unified => self.0.workers.as_ref(),
            Role::Prefill | Role::Colocated => self.0.prefill.as_ref(),
            Role::Decode => self.0.decode.as_ref(),
        }
    }

    /// The step-time model of a worker of `role`.
    pub fn timing(&self, s: &Scenario, role: Role) -> TimingModel {
        match s.timing_kind() {
            TimingKind::Fixed => TimingModel::Fixed {
                step_ms: s.timing.service_ms,
            },
            TimingKind::Steps => polynomial(&s.timing),
            TimingKind::Roofline => {
                let d = self
                    .of(role)
                    .expect("validation: roofline needs a deployment");
                let p = self
                    .0
                    .profile
                    .clone()
                    .expect("resolved with the deployment");
                let p = p.for_protocol(s.timing.protocol.as_deref());
                TimingModel::Roofline(Box::new(Roofline::new(d, p)))
            }
        }
    }

    /// KV capacity of a worker of `role`, in blocks of the run's block size (`None`: unbounded).
    pub fn kv_capacity(&self, s: &Scenario, role: Role) -> Option<usize> {
        match self.of(role) {
            Some(d) => Some(d.kv_capacity_blocks(s.block_size()).max(1)),
            None => s.cluster.kv_capacity_blocks.count(),
        }
    }

    /// KV bytes per token a prefill-to-decode transfer moves.
    pub fn transfer_bytes_per_token(&self, s: &Scenario) -> u64 {
        self.0.prefill.as_ref().map_or_else(
            || s.disagg.model.bytes_per_token(),
            |d| d.kv_bytes_per_token,
        )
    }

    /// Time between a request reaching a worker and joining its queue, ms: the setting, or
    /// under the roofline the profile's fitted request overhead (that of `timing.protocol`'s
    /// serving stack, if the profile has one).
    pub fn request_overhead_ms(&self, s: &Scenario) -> f64 {
        s.timing.request_overhead_ms.unwrap_or_else(|| {
            self.0
                .profile
                .as_ref()
                .filter(|_| s.timing_kind() == TimingKind::Roofline)
                .map_or(0.0, |p| {
                    p.request_overhead_for(s.timing.protocol.as_deref())
                })
        })
    }

    /// A client's reply delay, at most (a uniform draw per reply), ms: the setting, or under the
    /// roofline the profile's fitted jitter.
    pub fn request_jitter_ms(&self, s: &Scenario) -> f64 {
        s.timing.request_jitter_ms.unwrap_or_else(|| {
            self.0
                .profile
                .as_ref()
                .filter(|_| s.timing_kind() == TimingKind::Roofline)
                .map_or(0.0, |p| p.request_jitter_ms)
        })
    }

    /// The deployments, for the report (empty without one).
    pub fn report(&self, s: &Scenario) -> Vec<DeploymentReport> {
        [
            (Pool::Workers, &self.0.workers),
            (Pool::Prefill, &self.0.prefill),
            (Pool::Decode, &self.0.decode),
        ]
        .into_iter()
        .filter_map(|(pool, d)| d.as_ref().map(|d| (pool, d)))
        .map(|(pool, d)| DeploymentReport {
            pool,
            model: d.model.name.clone(),
            gpu: d.gpu.name.clone(),
            tp: d.tp,
            precision: d.precision.name().to_string(),
            kv_dtype: d.kv_dtype.name().to_string(),
            memory_share: d.memory_share,
            weights_gb_per_gpu: crate::round::round_py(d.weight_bytes_per_gpu / 1e9, 2),
            kv_bytes_per_token: d.kv_bytes_per_token,
            kv_gb_per_gpu: crate::round::round_py(d.kv_bytes_per_gpu / 1e9, 2),
            kv_capacity_tokens: d.kv_capacity_tokens,
            kv_capacity_blocks: d.kv_capacity_blocks(s.block_size()) as u64,
            max_model_len: d.max_model_len,
        })
        .collect()
    }
}

/// The scenario's name for errors.
fn scenario_name(s: &Scenario) -> String {
    if s.name.is_empty() {
        "scenario".to_string()
    } else {
        format!("scenario {}", s.name)
    }
}

/// The mocker's polynomials as `[timing]` sets them.
pub(crate) fn polynomial(t: &Timing) -> TimingModel {
    TimingModel::Polynomial {
        prefill: t.prefill_coeffs,
        decode: t.decode_coeffs,
        decode_floor_ms: t.decode_floor_ms,
    }
}
