//! A scenario's scaling: workers that join and leave during the run (`[[scale]]` steps for
//! what-if runs), the SLA a run is measured against (`[sla]`), and their checks.

use serde::{Deserialize, Serialize};

use super::{Pool, Scenario};
use crate::error::Invalid;

/// `[[scale]]`: at `at_s`, the pool's target becomes `workers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScaleStep {
    /// When, s from the start of the run.
    pub at_s: f64,
    /// Which pool: `workers` (aggregated), `prefill` or `decode` (disaggregated).
    pub pool: Pool,
    /// The pool's new size (workers starting or serving; 0 allowed).
    pub workers: usize,
    /// How a worker leaves when the pool shrinks (drain).
    #[serde(default)]
    pub leave: Leave,
}

/// How a leaving worker goes.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Leave {
    /// It takes no new request and finishes those it holds (a pod's graceful termination).
    #[default]
    Drain,
    /// It goes at once; its requests go back to the router and are routed again (counted in
    /// `rerouted`).
    Remove,
}

/// `[sla]`: the targets a run is measured against (`sla_attainment`, `goodput_rps`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SlaSettings {
    /// A request meets the SLA only if its TTFT is at most this, ms.
    pub ttft_p90_ms: Option<f64>,
    /// A request meets it only if its mean inter-token latency is at most this, ms.
    pub itl_p90_ms: Option<f64>,
}

impl SlaSettings {
    /// Whether any target is set.
    pub fn is_set(&self) -> bool {
        self.ttft_p90_ms.is_some() || self.itl_p90_ms.is_some()
    }
}

impl Scenario {
    /// Whether workers may join and leave during the run.
    pub fn scales(&self) -> bool {
        !self.scale.is_empty() || self.cluster.max_workers.is_some()
    }

    /// The pools this scenario has: `workers`, or `prefill` and `decode`.
    pub fn pools(&self) -> &'static [Pool] {
        if self.disagg.enabled {
            &[Pool::Prefill, Pool::Decode]
        } else {
            &[Pool::Workers]
        }
    }

    /// A pool's workers at the start.
    pub fn initial_workers(&self, pool: Pool) -> usize {
        match pool {
            Pool::Workers => self.cluster.workers,
            Pool::Prefill => self.disagg.prefill_workers,
            Pool::Decode => self.disagg.decode_workers,
        }
    }

    /// The most workers a pool may have starting or serving at once: its size at the start,
    /// the largest `[[scale]]` target and `cluster.max_workers`.
    pub fn max_workers(&self, pool: Pool) -> usize {
        let scheduled = self
            .scale
            .iter()
            .filter(|s| s.pool == pool)
            .map(|s| s.workers);
        scheduled
            .chain(self.cluster.max_workers)
            .chain([self.initial_workers(pool)])
            .max()
            .unwrap_or(0)
    }

    /// Worker slots a pool is built with: as many as it has when it does not scale, else twice
    /// its most (draining workers hold their slot until they are done, so a pool that drains
    /// while it grows back needs room for both).
    pub fn pool_slots(&self, pool: Pool) -> usize {
        if self.scales() {
            2 * self.max_workers(pool)
        } else {
            self.initial_workers(pool)
        }
    }
}

fn bad(key: &str, value: impl ToString, problem: &str) -> Invalid {
    Invalid {
        key: key.to_string(),
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

fn positive(key: &str, x: f64) -> Result<(), Invalid> {
    if !(x.is_finite() && x > 0.0) {
        return Err(bad(key, format!("{x:?}"), "must be a finite number > 0"));
    }
    Ok(())
}

/// Checks `[[scale]]`, `[sla]` and `cluster.startup_s`.
pub fn validate(s: &Scenario) -> Result<(), Invalid> {
    let startup = s.cluster.startup_s;
    if !(startup.is_finite() && (0.0..=1e9).contains(&startup)) {
        return Err(bad(
            "cluster.startup_s",
            format!("{startup:?}"),
            "must be a finite number in 0..=1e9 s",
        ));
    }
    for (key, v) in [
        ("sla.ttft_p90_ms", s.sla.ttft_p90_ms),
        ("sla.itl_p90_ms", s.sla.itl_p90_ms),
    ] {
        if let Some(x) = v {
            positive(key, x)?;
        }
    }
    if s.scales() {
        if !s.faults.is_empty() {
            return Err(bad(
                "faults",
                "",
                "cannot be combined with [[scale]] (a restart would bring back a worker that \
                 left)",
            ));
        }
        if s.disagg.enabled && s.disagg.colocated {
            return Err(bad(
                "disagg.colocated",
                "true",
                "cannot scale: a colocated GPU is one prefill and one decode worker",
            ));
        }
    }
    if let Some(max) = s.cluster.max_workers {
        if max > crate::limits::MAX_WORKERS / 2 {
            return Err(bad(
                "cluster.max_workers",
                max,
                &format!("must be at most {}", crate::limits::MAX_WORKERS / 2),
            ));
        }
    }
    for (i, step) in s.scale.iter().enumerate() {
        let key = |k: &str| format!("scale[{i}].{k}");
        if !(step.at_s.is_finite() && (0.0..=1e9).contains(&step.at_s)) {
            return Err(bad(
                &key("at_s"),
                format!("{:?}", step.at_s),
                "must be a finite number in 0..=1e9 s",
            ));
        }
        if !s.pools().contains(&step.pool) {
            let pools = if s.disagg.enabled {
                "prefill or decode (disaggregated)"
            } else {
                "workers (aggregated)"
            };
            return Err(bad(
                &key("pool"),
                format!("{:?}", step.pool),
                &format!("is not a pool of this cluster: {pools}"),
            ));
        }
        if step.workers > crate::limits::MAX_WORKERS / 2 {
            return Err(bad(
                &key("workers"),
                step.workers,
                &format!("must be at most {}", crate::limits::MAX_WORKERS / 2),
            ));
        }
    }
    Ok(())
}
