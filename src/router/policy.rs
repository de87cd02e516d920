//! A routing policy: the small trait every router policy implements, and what it is given.
//!
//! A policy is pure: it sees the request, the router's own [`LoadBook`] and the run's generator,
//! never a channel or the clock (the time comes in the request). The router actor calls
//! [`RoutingPolicy::decide`] for every arrival (and every request a failing worker hands back),
//! then [`RoutingPolicy::on_routed`] with the decision, [`RoutingPolicy::on_prefill_done`] when
//! its first token comes, [`RoutingPolicy::on_finished`] when the request completes or comes
//! back, and [`RoutingPolicy::on_event`] for each KV event that reaches the router if the policy
//! says it learns from events ([`RoutingPolicy::learns_from_events`], asked when the run is
//! built).

use serde::de::DeserializeOwned;

use crate::engine::Nanos;
use crate::error::Invalid;
use crate::hash::BlockHash;
use crate::ids::{RequestId, WorkerId};
use crate::protocol::kv_event::{Blocks, KvEvent};
use crate::rng::SimRng;

use super::loads::LoadBook;
use super::Decision;

/// A request as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct RouteRequest<'a> {
    /// The request's id.
    pub id: RequestId,
    /// Its prompt's block names (the last of them perhaps its own tail, see [`Blocks`]: only an
    /// index of what workers hold reads that).
    pub blocks: Blocks<&'a [BlockHash]>,
    /// Its prompt tokens.
    pub input_tokens: u32,
    /// Its session, if the workload has sessions.
    pub session: Option<u64>,
    /// The time of the decision.
    pub now: Nanos,
}

/// A routing policy. See the module documentation for when each method is called.
pub trait RoutingPolicy {
    /// Chooses a worker for `req` among the workers that are up; `None` when none is (the router
    /// then holds the request until one comes back).
    fn decide(
        &mut self,
        req: &RouteRequest<'_>,
        loads: &LoadBook,
        rng: &mut SimRng,
    ) -> Option<Decision>;

    /// The request was sent to `decision.worker` (the book already counts it).
    fn on_routed(&mut self, _req: &RouteRequest<'_>, _decision: &Decision) {}

    /// Another router replica sent `req` to `decision.worker` (`router.sync = "active-load"`;
    /// the book already counts it in flight): load bookkeeping only, nothing about caches.
    fn on_peer_routed(&mut self, _req: &RouteRequest<'_>, _decision: &Decision) {}

    /// A request this router (or, with replica sync, another replica) had sent to `worker`
    /// produced its first token (its prefill is done).
    fn on_prefill_done(&mut self, _worker: WorkerId, _request: RequestId) {}

    /// A request this router (or, with replica sync, another replica) had sent to `worker`
    /// completed or was handed back.
    fn on_finished(&mut self, _worker: WorkerId, _request: RequestId) {}

    /// A KV event reached the router (only for policies that learn from events).
    fn on_event(&mut self, _event: &KvEvent) {}

    /// Whether it learns from KV events: the router then feeds it every event that arrives,
    /// and warns when none does. The one place that says so.
    fn learns_from_events(&self) -> bool {
        false
    }

    /// Whether it reads the workers' load signals: the router then keeps a snapshot of them.
    fn reads_signals(&self) -> bool {
        false
    }

    /// Whether it asks the load book for the least or most loaded worker of all
    /// ([`LoadBook::least_in_flight`](crate::router::loads::LoadBook::least_in_flight),
    /// `in_flight_range`, the lab rule's `least_of_all`): the book then keeps its trees of
    /// loads up to date on every routed and finished request; for a policy that does not, it
    /// keeps only the counts (and refuses those questions).
    fn reads_load_trees(&self) -> bool {
        true
    }

    /// Whether it reads `router.load` (the lab rule's second step: requests routed, or in
    /// flight); validation refuses a load other than the default for a policy that does not.
    fn reads_load_kind(&self) -> bool {
        false
    }

    /// Bytes its memory of its own decisions may grow to in a run that routes `blocks`
    /// distinct prompt blocks (for the run's memory estimate, `crate::budget`). 0 for a policy
    /// whose memory follows the cluster (KV events) or stays under small caps of its own.
    fn history_bytes(&self, blocks: u64) -> u64 {
        let _ = blocks;
        0
    }
}

/// A policy's entry in the registry.
#[derive(Clone, Copy)]
pub struct PolicyEntry {
    /// Its name in scenarios (`router.policy`) and on the command line (`--policy`).
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Builds it, checking its `[router.NAME]` settings.
    pub build: fn(&PolicySetup<'_>) -> Result<Box<dyn RoutingPolicy>, Invalid>,
    /// The JSON Schema of its `[router.NAME]` table (`dynsim schema`).
    pub settings: fn() -> schemars::schema::RootSchema,
}

/// The JSON Schema of a policy's settings type `T`, for [`PolicyEntry::settings`].
pub fn settings_schema<T: schemars::JsonSchema>() -> schemars::schema::RootSchema {
    schemars::schema_for!(T)
}

/// What a policy is built from.
#[derive(Clone, Copy, Debug)]
pub struct PolicySetup<'a> {
    /// The policy's name (its `[router.NAME]` table).
    pub name: &'a str,
    /// Routable workers.
    pub workers: usize,
    /// Tokens per KV block of the engine.
    pub block_size: usize,
    /// Each worker's KV capacity in blocks (`None`: unbounded).
    pub kv_capacity_blocks: Option<usize>,
    /// Its `[router.NAME]` table, if the scenario has one.
    pub settings: Option<&'a toml::Value>,
}

impl PolicySetup<'_> {
    /// The policy's settings: its `[router.NAME]` table read into `T` (every key optional,
    /// unknown keys refused), or `T::default()` without a table. Errors name the key
    /// (`router.NAME.KEY`).
    pub fn settings<T: DeserializeOwned + Default>(&self) -> Result<T, Invalid> {
        let table_key = format!("router.{}", self.name);
        let Some(value) = self.settings else {
            return Ok(T::default());
        };
        let Some(table) = value.as_table() else {
            return Err(Invalid {
                key: table_key,
                value: value.to_string(),
                problem: "must be a table of the policy's settings".into(),
            });
        };
        // One key at a time first, so that an error names the key at fault.
        for (key, v) in table {
            let mut one = toml::Table::new();
            one.insert(key.clone(), v.clone());
            if let Err(e) = T::deserialize(toml::Value::Table(one)) {
                return Err(Invalid {
                    key: format!("{table_key}.{key}"),
                    value: v.to_string(),
                    problem: e.message().trim().to_string(),
                });
            }
        }
        T::deserialize(value.clone()).map_err(|e| Invalid {
            key: table_key,
            value: String::new(),
            problem: e.message().trim().to_string(),
        })
    }
}

impl PolicySetup<'_> {
    /// Checks that setting `key` of this policy is a finite number in `lo..=hi`; the error names
    /// `router.NAME.KEY` and says "must be a finite number >= lo" when `hi` is infinite.
    pub fn check_number(&self, key: &str, x: f64, lo: f64, hi: f64) -> Result<(), Invalid> {
        if x.is_finite() && (lo..=hi).contains(&x) {
            return Ok(());
        }
        let problem = if hi.is_infinite() {
            format!("must be a finite number >= {lo}")
        } else {
            format!("must be a finite number in {lo}..={hi:e}")
        };
        Err(Invalid {
            key: format!("router.{}.{key}", self.name),
            value: format!("{x:?}"),
            problem,
        })
    }
}

/// Settings of a policy that has none: its table, if present, must be empty.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}
