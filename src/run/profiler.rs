//! A pool's capacity for `dynamo-throughput`, predicted as `dynsim bench` predicts a
//! benchmark (`bench`: a closed loop of clients sending random prompts nobody else
//! sends, 20 requests per client), on one worker of the pool's own deployment and engine
//! settings, at 1, 2, 4, ... clients until the SLA breaks. Profiles are kept per pool and
//! length, so a run makes each once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::planner::capacity::{BenchPoint, BenchProfile, Profiler};
use crate::scenario::{Pool, Scenario};
use crate::workload::synthetic::{LengthDist, SyntheticParams};

/// Requests per client of a closed-loop benchmark when the count is not given:
/// AIConfigurator's benchmark convention (`dynsim bench`'s, and a planner profile's).
pub const REQUESTS_PER_CLIENT: usize = 20;

/// The most clients a profile tries.
const MAX_CLIENTS: usize = 1024;

/// Profiles by simulation.
pub struct BenchProfiler {
    s: Scenario,
    base_dir: PathBuf,
    cache: BTreeMap<(u8, u32, u32), Option<BenchProfile>>,
}

impl BenchProfiler {
    /// A profiler of `s`'s pools (files relative to `base_dir`).
    pub fn new(s: &Scenario, base_dir: &Path) -> Self {
        BenchProfiler {
            s: s.clone(),
            base_dir: base_dir.to_path_buf(),
            cache: BTreeMap::new(),
        }
    }

    /// The benchmark scenario of one worker of `pool` at `clients` clients.
    pub fn scenario(&self, pool: Pool, isl: u32, osl: u32, clients: usize) -> Scenario {
        let mut b = self.s.clone();
        b.name = format!("{}-bench", self.s.name);
        b.deployment = self.s.deployment_of(pool).cloned();
        b.disagg = Default::default();
        b.disagg.model = self.s.disagg.model;
        b.cluster.workers = 1;
        // The engine's block size (a trace routed on its ids has the trace's).
        b.cluster.block_size = self.s.block_size();
        b.scale.clear();
        b.planner = None;
        b.sla = Default::default();
        b.faults.clear();
        b.router = Default::default();
        b.router.policy = "rr".into();
        b.router.audit_index = false;
        b.router.attribute_misses = false;
        b.workload = crate::scenario::Workload::Synthetic(SyntheticParams {
            requests: REQUESTS_PER_CLIENT * clients,
            groups: 1,
            shared_prefix_tokens: 0,
            input: LengthDist::Fixed { tokens: isl },
            output: LengthDist::Fixed {
                tokens: if pool == Pool::Prefill { 1 } else { osl },
            },
            concurrency: Some(clients),
            ..SyntheticParams::default()
        });
        b
    }
}

impl Profiler for BenchProfiler {
    fn profile(
        &mut self,
        pool: Pool,
        isl: u32,
        osl: u32,
        ttft_ms: f64,
        itl_ms: f64,
    ) -> Option<BenchProfile> {
        let key = (pool as u8, isl, osl);
        if let Some(p) = self.cache.get(&key) {
            return p.clone();
        }
        let mut points = Vec::new();
        let mut gpus = 1;
        let mut clients = 1;
        while clients <= MAX_CLIENTS {
            let b = self.scenario(pool, isl, osl, clients);
            let Ok(r) = crate::run::run_scenario(&b, &self.base_dir, None) else {
                break;
            };
            if r.rejected > 0 {
                break; // the worker cannot hold a request of these lengths
            }
            gpus = r.deployments.first().map_or(1, |d| d.tp);
            let p = BenchPoint {
                concurrency: clients,
                ttft_p90_ms: r.ttft_ms.p90,
                itl_p90_ms: r.tpot_ms.p90,
                rps: r.throughput_rps,
                output_tps: r.output_tokens_per_s,
            };
            points.push(p);
            let seats = r.running_limit(&b).unwrap_or(usize::MAX);
            if p.ttft_p90_ms > ttft_ms || p.itl_p90_ms > itl_ms || clients >= seats {
                break;
            }
            clients *= 2;
        }
        let profile = (!points.is_empty()).then_some(BenchProfile {
            isl,
            osl,
            gpus,
            points,
        });
        self.cache.insert(key, profile.clone());
        profile
    }
}
