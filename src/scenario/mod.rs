//! Scenario files: the TOML a run is described by.
//!
//! Config flows one way: TOML → validated [`Scenario`] → constructors; no actor reads the file or
//! the command line. Every table rejects unknown keys, and every omitted key takes the default
//! documented on its field, so an old scenario keeps its meaning when new keys are added.
//!
//! - [`load`]: reading a file, `--set KEY=VALUE` overrides, and locating errors (file:line).
//! - [`validate`]: range checks on a deserialised scenario.

mod auto;
pub mod deploy;
mod engine;
pub mod kv;
pub mod load;
pub mod scaling;
pub mod validate;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deployment::DeploymentSettings;
use crate::disagg::ModelShape;
use crate::rng::RngKind;
use crate::router::loads::LoadKind;
use crate::router::stream::OnGap;
use crate::workload::synthetic::SyntheticParams;

pub use auto::Auto;
pub use engine::{
    AdmissionKind, EngineKind, EngineSettings, PreemptionKind, PrefillCharge, SchedulePolicyKind,
    SglangSettings, TrtllmSettings, VllmSettings,
};
pub use load::{load_scenario, Override};
pub use scaling::{
    Leave, PlannerKind, PlannerSettings, PredictorKind, ScaleStep, SlaSettings, ThresholdMetric,
};

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// Short name, shown in reports (absent: the file's stem).
    pub name: String,
    /// What the scenario shows.
    pub description: String,
    /// The seed of every random draw in the run.
    pub seed: u64,
    /// The generator (`chacha`, or `python` for CPython-compatible lab draws).
    pub rng: RngKind,
    /// Where requests come from.
    pub workload: Workload,
    /// Workers and their KV caches.
    pub cluster: Cluster,
    /// The routing policy.
    pub router: Router,
    /// The KV event bus.
    pub bus: Bus,
    /// The model, GPUs and precision every worker serves (absent: no real deployment; step
    /// times from `[timing]`'s polynomials or fixed time, KV capacity from `[cluster]`).
    pub deployment: Option<DeploymentSettings>,
    /// The serving engine and its settings.
    pub engine: EngineSettings,
    /// The KV tiers below each worker's device cache (`[kv.host]`, `[kv.disk]`).
    #[serde(skip_serializing_if = "kv::KvSettings::is_empty")]
    pub kv: kv::KvSettings,
    /// How long a step takes.
    pub timing: Timing,
    /// Disaggregated prefill/decode.
    pub disagg: Disagg,
    /// Injected worker restarts.
    pub faults: Vec<Fault>,
    /// Scheduled changes of a pool's size (`[[scale]] at_s, pool, workers`), for what-if runs.
    pub scale: Vec<ScaleStep>,
    /// An autoscaler in the loop (absent: none).
    pub planner: Option<PlannerSettings>,
    /// The service-level targets the run is measured against.
    pub sla: SlaSettings,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: String::new(),
            description: String::new(),
            seed: 1,
            rng: RngKind::Chacha,
            workload: Workload::default(),
            cluster: Cluster::default(),
            router: Router::default(),
            bus: Bus::default(),
            deployment: None,
            engine: EngineSettings::default(),
            kv: kv::KvSettings::default(),
            timing: Timing::default(),
            disagg: Disagg::default(),
            faults: Vec::new(),
            scale: Vec::new(),
            planner: None,
            sla: SlaSettings::default(),
        }
    }
}

/// Where requests come from, by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Workload {
    /// The lab workload: repeated prefixes with unique tails, shuffled.
    PrefixRepeat(PrefixRepeatWorkload),
    /// A recorded trace (Mooncake JSONL or Azure CSV).
    Trace(TraceWorkload),
    /// Generated shared-prefix traffic.
    Synthetic(SyntheticParams),
}

impl Default for Workload {
    fn default() -> Self {
        Workload::PrefixRepeat(PrefixRepeatWorkload::default())
    }
}

/// `kind = "prefix-repeat"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PrefixRepeatWorkload {
    /// Distinct prefixes (12).
    #[schemars(range(min = 1))]
    pub prefixes: usize,
    /// Requests per prefix (6).
    #[schemars(range(min = 1))]
    pub reps: usize,
    /// Prefix tokens (96).
    pub prefix_len: usize,
    /// Unique tail tokens per request (16).
    pub tail_len: usize,
    /// Gap between arrivals, ms (10.0).
    pub interval_ms: f64,
    /// Tokens each request generates (1).
    pub output_tokens: u32,
}

impl Default for PrefixRepeatWorkload {
    fn default() -> Self {
        PrefixRepeatWorkload {
            prefixes: 12,
            reps: 6,
            prefix_len: 96,
            tail_len: 16,
            interval_ms: 10.0,
            output_tokens: 1,
        }
    }
}

/// Trace file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake JSONL with block hash ids.
    Mooncake,
    /// Azure LLM inference CSV (lengths only).
    Azure,
}

impl TraceFormat {
    /// Every format's name, as scenarios and `--format` spell it.
    pub const NAMES: &'static [&'static str] = &["mooncake", "azure"];

    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Azure => "azure",
        }
    }
}

impl std::str::FromStr for TraceFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mooncake" => Ok(TraceFormat::Mooncake),
            "azure" => Ok(TraceFormat::Azure),
            _ => Err(format!("{s:?} is not a trace format (mooncake, azure)")),
        }
    }
}

/// `kind = "trace"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TraceWorkload {
    /// The trace file, relative to the scenario file.
    pub path: String,
    /// Its format (mooncake).
    pub format: TraceFormat,
    /// Tokens per trace hash id (512; a Mooncake trace's: an Azure trace has no ids, and its
    /// blocks are `cluster.block_size` tokens).
    #[schemars(range(min = 1))]
    pub trace_block_size: usize,
    /// Arrival-time compression factor (1.0).
    pub speedup: f64,
    /// Closed loop: keep this many requests in flight and ignore timestamps (absent: open loop).
    #[schemars(range(min = 1))]
    pub concurrency: Option<usize>,
    /// With `concurrency`: the clients join over this many seconds, one at a time at even
    /// steps, as aiperf's `--concurrency-ramp-duration` (absent: all at once).
    pub concurrency_ramp_s: Option<f64>,
    /// Only the first N rows (absent: all).
    #[schemars(range(min = 1))]
    pub limit: Option<usize>,
    /// Skip malformed rows and count them instead of stopping (false).
    pub skip_bad: bool,
    /// Cut each trace block into `cluster.block_size`-token engine blocks (false: route on the
    /// trace's block ids directly, one engine block per id).
    pub rechunk: bool,
    /// The speedup over the run, as a schedule (a daily sine, or piecewise; see
    /// [`crate::workload::schedule`]): at run time `t` the trace plays at this many times its
    /// own pace. Replaces `speedup`, which must then keep its default (absent: constant).
    pub speedup_schedule: Option<crate::workload::schedule::Schedule>,
    /// Play the trace again and again for this many seconds of the run, each pass after the
    /// last with its blocks and sessions named apart (new users sending the same traffic)
    /// (absent: once).
    pub duration_s: Option<f64>,
}

impl Default for TraceWorkload {
    fn default() -> Self {
        TraceWorkload {
            path: String::new(),
            format: TraceFormat::Mooncake,
            trace_block_size: 512,
            speedup: 1.0,
            concurrency: None,
            concurrency_ramp_s: None,
            limit: None,
            skip_bad: false,
            rechunk: false,
            speedup_schedule: None,
            duration_s: None,
        }
    }
}

impl Scenario {
    /// The step-time model: `timing.model`, or by default `roofline` with a deployment and
    /// `steps` without.
    pub fn timing_kind(&self) -> TimingKind {
        self.timing.model.unwrap_or(if self.has_deployment() {
            TimingKind::Roofline
        } else {
            TimingKind::Steps
        })
    }

    /// Whether any worker serves a named deployment.
    pub fn has_deployment(&self) -> bool {
        self.deployment.is_some()
            || self.disagg.prefill_deployment.is_some()
            || self.disagg.decode_deployment.is_some()
    }

    /// The deployment the workers of `pool` serve: `[deployment]`, or with disaggregation the
    /// pool's own `disagg.prefill_deployment` / `disagg.decode_deployment` where given.
    pub fn deployment_of(&self, pool: Pool) -> Option<&DeploymentSettings> {
        let own = match pool {
            Pool::Workers => None,
            Pool::Prefill => self.disagg.prefill_deployment.as_ref(),
            Pool::Decode => self.disagg.decode_deployment.as_ref(),
        };
        own.or(self.deployment.as_ref())
    }

    /// Tokens per engine block: the trace's own block size when a Mooncake trace is routed on
    /// its block ids, `cluster.block_size` otherwise (an Azure trace has no ids: before
    /// Dec 5 2026 it was cut into `trace_block_size` blocks, documented as unused).
    pub fn block_size(&self) -> usize {
        match &self.workload {
            Workload::Trace(t) if !t.rechunk && t.format == TraceFormat::Mooncake => {
                t.trace_block_size
            }
            _ => self.cluster.block_size,
        }
    }
}

/// A count or `"unbounded"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Limit {
    /// At most this many.
    Count(usize),
    /// No limit.
    #[default]
    Unbounded,
}

impl Limit {
    /// The count, `None` when unbounded.
    pub fn count(self) -> Option<usize> {
        match self {
            Limit::Count(n) => Some(n),
            Limit::Unbounded => None,
        }
    }
}

impl schemars::JsonSchema for Limit {
    fn schema_name() -> String {
        "Limit".into()
    }

    fn json_schema(g: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{InstanceType, Metadata, SchemaObject, SubschemaValidation};
        let count = SchemaObject {
            instance_type: Some(InstanceType::Integer.into()),
            number: Some(Box::new(schemars::schema::NumberValidation {
                minimum: Some(1.0),
                ..Default::default()
            })),
            ..Default::default()
        };
        let unbounded = SchemaObject {
            const_value: Some("unbounded".into()),
            ..Default::default()
        };
        let _ = g;
        SchemaObject {
            metadata: Some(Box::new(Metadata {
                description: Some("a whole number >= 1, or \"unbounded\"".into()),
                ..Default::default()
            })),
            subschemas: Some(Box::new(SubschemaValidation {
                one_of: Some(vec![count.into(), unbounded.into()]),
                ..Default::default()
            })),
            ..Default::default()
        }
        .into()
    }
}

impl Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Count(n) => s.serialize_u64(*n as u64),
            Limit::Unbounded => s.serialize_str("unbounded"),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    /// A whole number or `"unbounded"`; anything else is refused naming both.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        const EXPECTED: &str = "a whole number >= 1 or \"unbounded\"";
        fn refuse<E: serde::de::Error>(got: impl std::fmt::Display) -> E {
            E::custom(format!("expected {EXPECTED}, got {got}"))
        }
        impl serde::de::Visitor<'_> for Visit {
            type Value = Limit;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(EXPECTED)
            }

            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Limit, E> {
                usize::try_from(n).map(Limit::Count).map_err(|_| refuse(n))
            }

            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Limit, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(refuse(n)),
                }
            }

            fn visit_f64<E: serde::de::Error>(self, x: f64) -> Result<Limit, E> {
                Err(refuse(x))
            }

            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Limit, E> {
                Err(refuse(b))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Limit, E> {
                match v {
                    "unbounded" => Ok(Limit::Unbounded),
                    other => Err(refuse(format!("{other:?}"))),
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `[cluster]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// Workers (2); with disaggregation, `disagg.prefill_workers` + `disagg.decode_workers` instead.
    #[schemars(range(min = 1, max = "crate::limits::MAX_WORKERS"))]
    pub workers: usize,
    /// Tokens per KV block (16); a trace routed on its block ids uses the trace's block size.
    #[schemars(range(min = 1))]
    pub block_size: usize,
    /// KV capacity per worker in blocks, or "unbounded" (the default).
    pub kv_capacity_blocks: Limit,
    /// Seconds a worker that joins during the run takes to serve (loading the model), its
    /// GPUs paid meanwhile (60.0).
    pub startup_s: f64,
    /// The most workers each pool may grow to when something outside the scenario scales it
    /// (the stepping API, a planner written in Python) (absent: the pool cannot grow unless a
    /// `[[scale]]` step or a `[planner]` says how far).
    pub max_workers: Option<usize>,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            workers: 2,
            block_size: 16,
            kv_capacity_blocks: Limit::Unbounded,
            startup_s: 60.0,
            max_workers: None,
        }
    }
}

/// `[router]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Router {
    /// The routing policy, by name (kv): one of [`crate::router::registry::POLICIES`].
    pub policy: String,
    /// The load of the lab rule's second step: routed | in-flight (routed).
    pub load: LoadKind,
    /// How often the router refreshes its snapshot of the workers' load signals, for a policy
    /// that reads them, ms; 0 = exact at each decision, else at least 1 (0.0). Validation
    /// refuses any other value with a policy that reads none.
    pub signal_refresh_ms: f64,
    /// What the router does when a worker's KV event stream has a gap (ignore): see
    /// [`crate::router::stream`].
    pub on_gap: OnGap,
    /// A worker serving this router's requests that publishes nothing for this long is treated
    /// as a gap, ms, at least 1 (1000.0); under `ignore` only counted.
    pub gap_silence_ms: f64,
    /// A replay or snapshot request not answered in this long is sent again, ms, at least 1
    /// (100.0).
    pub recovery_timeout_ms: f64,
    /// `on_gap = "fallback"`: how long a routing decision counts as the worker holding the
    /// prompt, ms (120000.0, Dynamo's `router_ttl_secs`).
    pub fallback_ttl_ms: f64,
    /// Router replicas, each with its own index and load view (1).
    #[schemars(range(min = 1, max = "crate::limits::MAX_REPLICAS"))]
    pub replicas: usize,
    /// How the client spreads requests over replicas (round-robin).
    pub spread: Spread,
    /// What replicas tell each other (none).
    pub sync: ReplicaSync,
    /// Measure how right the routers' indexes are (`index` in the report: precision and recall
    /// against the workers' caches), for a policy fed by events (true). It costs about a fifth
    /// of a replay's time; Dynamo's mocker measures nothing like it, so `dynamo-mocker.toml`
    /// turns it off for a fair speed comparison.
    pub audit_index: bool,
    /// Attribute every missed prompt block to a cause (`misses` in the report: cold, routing,
    /// stale index, capacity) (true). It reads every routable worker's cache at each decision
    /// and keeps a memory of each worker's evictions; Dynamo's mocker does neither, so
    /// `dynamo-mocker.toml` turns it off, and its report then shows `misses` as not attributed
    /// (`null`), not as zeros.
    pub attribute_misses: bool,
    /// Policies' settings, one `[router.NAME]` table per policy (for example `[router.cost]`
    /// `temperature = 0.5`), each documented in the policy's module under
    /// [`crate::router::policies`]. Only the chosen policy's table is used; every table is
    /// checked.
    #[serde(flatten)]
    #[schemars(skip)]
    pub settings: BTreeMap<String, toml::Value>,
}

impl Default for Router {
    fn default() -> Self {
        Router {
            policy: "kv".to_string(),
            load: LoadKind::Routed,
            signal_refresh_ms: 0.0,
            on_gap: OnGap::Ignore,
            gap_silence_ms: 1000.0,
            recovery_timeout_ms: 100.0,
            fallback_ttl_ms: 120_000.0,
            replicas: 1,
            spread: Spread::RoundRobin,
            sync: ReplicaSync::None,
            audit_index: true,
            attribute_misses: true,
            settings: BTreeMap::new(),
        }
    }
}

/// How the client spreads requests over router replicas (`router.spread`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// Request `i` to replica `i mod replicas`.
    RoundRobin,
    /// Every turn of a session to one replica (by the session id); requests without one
    /// round-robin.
    Session,
}

/// What router replicas tell each other (`router.sync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicaSync {
    /// Nothing: each replica knows only the load it routed.
    None,
    /// Fire-and-forget notes over the bus when a request is added, finishes its prefill and is
    /// freed (Dynamo's replica sync of active sequences).
    ActiveLoad,
}

/// `[bus]`: how KV events travel from workers to the router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Bus {
    /// Whether workers publish KV events at all (true).
    pub publish: bool,
    /// Probability each event is lost, 0..=1 (0.0).
    pub drop_rate: f64,
    /// Delivery latency, ms (0.0).
    pub latency_ms: f64,
    /// Extra uniform random latency in [0, jitter_ms), ms (0.0).
    pub jitter_ms: f64,
    /// Whether events may overtake each other within the jitter (false: FIFO).
    pub reorder: bool,
    /// Windows in which every event is lost.
    pub outages: Vec<Window>,
    /// Events each worker keeps for replay, newest last (10000, vLLM's `buffer_steps`).
    pub replay_buffer: usize,
    /// The bus link's rate, GB/s (1e9 bytes/s), when a message's size should cost time (a
    /// resync of a full cache on a slow link); absent: sizes cost no time.
    pub link_gbps: Option<f64>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus {
            publish: true,
            drop_rate: 0.0,
            latency_ms: 0.0,
            jitter_ms: 0.0,
            reorder: false,
            outages: Vec::new(),
            replay_buffer: 10_000,
            link_gbps: None,
        }
    }
}

/// A time window `[start_ms, end_ms)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Start, ms.
    pub start_ms: f64,
    /// End, ms.
    pub end_ms: f64,
}

/// `[timing]`: how long a worker's forward pass (a step) takes. A setting of the model not in
/// use (`service_ms` under `steps`; the coefficients and `decode_floor_ms` under `fixed`;
/// `profile` under either) must keep its default: validation refuses it rather than ignore it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Timing {
    /// `roofline`: each step from its work and the deployment's GPU, corrected by a fitted
    /// profile (the default with a `[deployment]`, and only with one); `steps`: Dynamo's mocker
    /// polynomials per step (the default without); `fixed`: every step takes `service_ms` (the
    /// lab's model: a one-token request is served in one step).
    pub model: Option<TimingKind>,
    /// `fixed`: the duration of every step, ms (1.0).
    pub service_ms: f64,
    /// `steps`: prefill ms = a·T² + b·T + c for T uncached prompt tokens computed in the step:
    /// `[a, b, c]` (4.209989e-7, 0.01518344, 16.50142).
    pub prefill_coeffs: [f64; 3],
    /// `steps`: decode ms = a·p² + b·p + c for p the decoding requests' share of the worker's KV
    /// capacity in tokens: `[a, b, c]` (−25.74, 54.01, 5.74).
    pub decode_coeffs: [f64; 3],
    /// `steps`: floor of the decode part, ms (1.0).
    pub decode_floor_ms: f64,
    /// `roofline`: the profile of fitted corrections, a file `dynsim calibrate` wrote (relative
    /// to the scenario file; absent: the engine's bundled profile, `data/profiles/ENGINE.toml`).
    pub profile: Option<String>,
    /// Time between a request reaching a worker and joining its queue (HTTP, tokenisation:
    /// not GPU time), ms (0.0; under `roofline`, absent takes the profile's fitted
    /// `request.overhead_ms`).
    pub request_overhead_ms: Option<f64>,
    /// A client's reply delay: after a response, a closed-loop client (or a session's next
    /// turn) waits a further uniform draw from `[0, request_jitter_ms)` before sending, ms
    /// (clients and HTTP stacks do not answer in lockstep, so a benchmark's clients do not move
    /// in one wave; not part of any request's latency) (0.0; under `roofline`, absent takes the
    /// profile's fitted `request.jitter_ms`).
    pub request_jitter_ms: Option<f64>,
    /// `roofline`: the benchmark protocol (`aiconfigurator`, `aiperf`, `inferencemax`) whose
    /// serving stack's request overhead applies, where the profile was fitted with one per
    /// protocol (`[request.by_protocol]`; absent, or a profile without it: the profile's
    /// `request.overhead_ms`). `bench` sets it to its `--protocol`.
    pub protocol: Option<String>,
}

/// `timing.model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimingKind {
    /// Dynamo's mocker polynomials.
    Steps,
    /// A fixed time per step.
    Fixed,
    /// The deployment's roofline with a fitted profile.
    Roofline,
}

impl TimingKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            TimingKind::Steps => "steps",
            TimingKind::Fixed => "fixed",
            TimingKind::Roofline => "roofline",
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            model: None,
            service_ms: 1.0,
            prefill_coeffs: [4.209989e-7, 0.01518344, 16.50142],
            decode_coeffs: [-25.74, 54.01, 5.74],
            decode_floor_ms: 1.0,
            profile: None,
            request_overhead_ms: None,
            request_jitter_ms: None,
            protocol: None,
        }
    }
}

/// `[disagg]`: disaggregated prefill/decode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Disagg {
    /// Whether prefill and decode run on different workers (false).
    pub enabled: bool,
    /// Prefill workers (1).
    #[schemars(range(min = 1, max = "crate::limits::MAX_WORKERS"))]
    pub prefill_workers: usize,
    /// Decode workers (1).
    #[schemars(range(min = 1, max = "crate::limits::MAX_WORKERS"))]
    pub decode_workers: usize,
    /// KV transfer link, GB/s = 1e9 bytes/s (13.4): each prefill worker's, carrying one
    /// transfer at a time.
    pub link_gbps: f64,
    /// Fixed cost per transfer, ms (0.0).
    pub transfer_overhead_ms: f64,
    /// Prefill and decode share one GPU: one step scheduler runs both, so their work serialises,
    /// and the KV still crosses the link between the two engines (false).
    pub colocated: bool,
    /// The model's KV shape (Qwen3-0.6B); with a deployment, derived from its model instead.
    pub model: ModelShape,
    /// The prefill workers' deployment, when it differs from `[deployment]` (the same model).
    pub prefill_deployment: Option<DeploymentSettings>,
    /// The decode workers' deployment, when it differs from `[deployment]` (the same model).
    pub decode_deployment: Option<DeploymentSettings>,
}

/// A pool of workers: all of them when aggregated, or the prefill or decode ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pool {
    /// Every worker of an aggregated cluster.
    Workers,
    /// Disaggregated prefill workers (colocated ones too).
    Prefill,
    /// Disaggregated decode workers.
    Decode,
}

impl Pool {
    /// The pool's name as scenarios spell it (`scale[].pool`).
    pub fn name(self) -> &'static str {
        match self {
            Pool::Workers => "workers",
            Pool::Prefill => "prefill",
            Pool::Decode => "decode",
        }
    }
}

impl Default for Disagg {
    fn default() -> Self {
        Disagg {
            enabled: false,
            prefill_workers: 1,
            decode_workers: 1,
            link_gbps: 13.4,
            transfer_overhead_ms: 0.0,
            colocated: false,
            model: ModelShape::default(),
            prefill_deployment: None,
            decode_deployment: None,
        }
    }
}

/// `[[faults]]`: an injected failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// The worker restarts: down for `down_ms` from `at_ms`, its cache lost.
    Restart {
        /// The worker's index.
        worker: usize,
        /// When it goes down, ms.
        at_ms: f64,
        /// How long it stays down, ms.
        down_ms: f64,
    },
}
