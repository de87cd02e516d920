//! `[router.dynamo]`: the settings of Dynamo's KV router, with dynamo-kv-router 1.6.1's defaults
//! (`scheduling/config.rs`, `KvRouterConfig::default`).

use serde::Deserialize;

/// `[router.dynamo]`.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Blocks of credit per cached block (1.0).
    pub overlap_score_credit: f64,
    /// How fast the credit decays with excess prefill load (0.0: off).
    pub overlap_score_credit_decay: f64,
    /// Weight of the prefill term (1.0).
    pub prefill_load_scale: f64,
    /// Weight of the worker's active request count (0.0).
    pub decode_active_request_weight: f64,
    /// Softmax temperature; 0 = the lowest cost wins (0.0).
    pub router_temperature: f64,
    /// Learn from KV events (true); false: from the router's own decisions, with a TTL.
    pub use_kv_events: bool,
    /// Approximate mode: seconds a decision is believed (120.0).
    pub router_ttl_secs: f64,
    /// Approximate mode: `ttl` (forget decisions after `router_ttl_secs`) or `lru` (model each
    /// worker's cache of its capacity, evicting released blocks least recently released first)
    /// (ttl).
    pub router_approximate_cache_policy: CachePolicy,
    /// Blocks of credit per block that continues the device overlap on the worker's host tier
    /// (0.75).
    pub host_cache_hit_weight: f64,
    /// Blocks of credit per block that continues it further on the worker's disk tier (0.25).
    pub disk_cache_hit_weight: f64,
}

/// `router_approximate_cache_policy` (dynamo-kv-router 1.6.1's `ApproximateCachePolicyKind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// Forget a decision `router_ttl_secs` after it was made.
    #[default]
    Ttl,
    /// Model each worker's KV cache of its capacity (release-order eviction).
    Lru,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            overlap_score_credit: 1.0,
            overlap_score_credit_decay: 0.0,
            prefill_load_scale: 1.0,
            decode_active_request_weight: 0.0,
            router_temperature: 0.0,
            use_kv_events: true,
            router_ttl_secs: 120.0,
            router_approximate_cache_policy: CachePolicy::Ttl,
            host_cache_hit_weight: 0.75,
            disk_cache_hit_weight: 0.25,
        }
    }
}
