//! `[kv]`: the KV tiers below each worker's device cache, `[kv.host]` (host memory) and
//! `[kv.disk]` (disk, below host). Blocks the device evicts go to host, blocks host drops go
//! to disk; a request whose prefix continues on a lower tier loads it back instead of
//! recomputing it (see [`crate::cluster::worker::tiers`]). `[kv.host] scope = "cluster"` makes
//! the host tier one pool for the whole cluster (its capacity the pool's), each worker keeping
//! its own bandwidths to it; not with `[kv.disk]` or `[disagg]`.

use serde::{Deserialize, Serialize};

use super::Scenario;
use crate::error::Invalid;

/// The most blocks a tier may hold (2^32).
const MAX_TIER_BLOCKS: usize = 1 << 32;

/// `[kv]`: the lower KV tiers of every worker (absent tables: none).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct KvSettings {
    /// `[kv.host]`: host memory below the device (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<TierSettings>,
    /// `[kv.disk]`: disk below host memory (absent: none; needs `[kv.host]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<TierSettings>,
}

/// Who shares a tier.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TierScope {
    /// Each worker has its own (aisimulate-core's `DpRankLocal`).
    #[default]
    Worker,
    /// One pool for the whole cluster (aisimulate-core's `ClusterShared`; `[kv.host]` only):
    /// its `capacity_blocks` or `capacity_gb` is the pool's, each worker's bandwidths its own
    /// link to it.
    Cluster,
}

/// When blocks are written to a lower tier (`write_policy` of `[kv.host]`, after SGLang
/// HiCache's `--hicache-write-policy`, or of `[kv.disk]`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    /// A block is written to the tier when the tier above drops it (host: when the device
    /// evicts it; disk: when host drops it for room).
    #[default]
    WriteBack,
    /// A block is written to the tier when the tier above stores it. Host: when the device stores
    /// it (computed or loaded back), as vLLM's `OffloadingConnector` and aisimulate-core 0.13's
    /// vLLM host adapter do; eviction then moves no bytes. Disk: when host stores it, as
    /// aisimulate-core 0.13's G3 tier does; what host drops is then gone.
    WriteThrough,
    /// `[kv.host]` only: a block is written to host once it has been hit twice on the device,
    /// as SGLang HiCache's `write_through_selective` (0.5.6.post2, `HiRadixCache`:
    /// `write_through_threshold` 2, `_inc_hit_count` on each `insert`): a request's full prompt
    /// blocks are hit when its prompt has been computed (unless that token is its last) and when
    /// it finishes, so a prompt goes to host at its request's finish, or at a second request's
    /// sooner. Eviction then moves nothing, as under `write_through`.
    WriteThroughSelective,
}

/// Hits on the device after which `write_through_selective` writes a block to host (SGLang
/// 0.5.6.post2's `HiRadixCache.write_through_threshold` for any policy but `write_through`).
pub const SELECTIVE_WRITE_HITS: u32 = 2;

/// `[kv.host]` or `[kv.disk]`: one lower tier of each worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TierSettings {
    /// Blocks it holds per worker, or in all under `scope = "cluster"` (give this,
    /// `capacity_gb` or, for `[kv.host]`, `capacity_ratio`).
    pub capacity_blocks: Option<usize>,
    /// GB (1e9 bytes) it holds per worker (in all under `scope = "cluster"`), in blocks of the
    /// `[deployment]` model's KV (needs a `[deployment]`; give this or `capacity_blocks`).
    pub capacity_gb: Option<f64>,
    /// `[kv.host]` only: host holds this many times its worker's device blocks, as SGLang
    /// HiCache sizes its host pool (`--hicache-ratio`, 2.0 by default in 0.5.6.post2;
    /// `HostKVCache.__init__`: the device's tokens times the ratio, rounded down to whole
    /// blocks, plus one block). From 1 (SGLang requires a host larger than the device) to 1e9;
    /// needs a bounded device (a `[deployment]` or `cluster.kv_capacity_blocks`); not with
    /// `scope = "cluster"`. Give one of this, `capacity_blocks` and `capacity_gb`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_ratio: Option<f64>,
    /// Bandwidth into the tier, GB/s; 0 = no limit (absent: aisimulate-core 0.13's defaults,
    /// 32 for host, 10 for disk).
    pub d2h_gbps: Option<f64>,
    /// Bandwidth out of the tier back to the device, GB/s; 0 = no limit (absent: 32 for host,
    /// 10 for disk).
    pub h2d_gbps: Option<f64>,
    /// Time to a transfer's first byte, ms (absent: 0 for host, 0.1 for disk).
    pub first_byte_ms: Option<f64>,
    /// `worker` (each worker its own) or, for `[kv.host]`, `cluster` (one pool every worker
    /// offloads to and loads from, [`crate::cluster::worker::tiers::HostPool`]).
    pub scope: TierScope,
    /// `[kv.host]`: `write_back` (absent: blocks go to host when the device evicts them),
    /// `write_through` (when the device stores them) or `write_through_selective` (at their
    /// second hit on the device, as SGLang HiCache's policy of that name). `[kv.disk]`:
    /// `write_back` (absent: blocks go to disk when host drops them) or `write_through` (when
    /// host stores them, the disk then holding host's blocks too, as aisimulate-core 0.13's G3
    /// tier below its vLLM host adapter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_policy: Option<WritePolicy>,
    /// `[kv.host]` only: a prefix continuing on the lower tiers for fewer than this many tokens
    /// is recomputed, not loaded back (absent: 0, any continuation is loaded). After SGLang
    /// HiCache's `load_back_threshold` (10 tokens, fixed in 0.5.6.post2's
    /// `HiRadixCache.load_back`: the whole host continuation or none of it); it binds only
    /// when blocks are shorter than it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_load_tokens: Option<u64>,
}

impl KvSettings {
    /// Whether the host tier is one pool for the whole cluster (`[kv.host] scope = "cluster"`).
    pub fn host_shared(&self) -> bool {
        self.host
            .as_ref()
            .is_some_and(|h| h.scope == TierScope::Cluster)
    }

    /// Whether no tier is configured.
    pub fn is_empty(&self) -> bool {
        self.host.is_none() && self.disk.is_none()
    }

    /// Each configured tier, highest first, with its defaults, its capacity in blocks of
    /// `block_bytes` (a `capacity_ratio` of `device_blocks` blocks of `block_size` tokens; 0
    /// without a device bound). Call on a validated scenario.
    pub fn resolved(
        &self,
        block_bytes: u64,
        device_blocks: Option<usize>,
        block_size: usize,
    ) -> Vec<ResolvedTier> {
        let one = |disk: bool, t: &TierSettings| {
            // aisimulate-core 0.13's defaults (`engine/config.rs`): host 32 GB/s and no
            // first-byte time (`NativeHostOffloadConfig`), disk 10 GB/s and 0.1 ms
            // (`G3OffloadConfig`).
            let (gbps, first_byte_ms) = if disk { (10.0, 0.1) } else { (32.0, 0.0) };
            let capacity = match (t.capacity_blocks, t.capacity_ratio) {
                (Some(n), _) => n,
                (None, Some(ratio)) => host_blocks_by_ratio(device_blocks, block_size, ratio),
                (None, None) => {
                    let gb = t.capacity_gb.unwrap_or(0.0);
                    (gb * 1e9 / block_bytes.max(1) as f64).floor() as usize
                }
            };
            ResolvedTier {
                disk,
                capacity_blocks: capacity,
                d2h_gbps: t.d2h_gbps.unwrap_or(gbps),
                h2d_gbps: t.h2d_gbps.unwrap_or(gbps),
                first_byte_ms: t.first_byte_ms.unwrap_or(first_byte_ms),
                write_policy: t.write_policy.unwrap_or_default(),
                min_load_tokens: t.min_load_tokens.unwrap_or(0),
            }
        };
        let mut out = Vec::new();
        out.extend(self.host.as_ref().map(|t| one(false, t)));
        out.extend(self.disk.as_ref().map(|t| one(true, t)));
        out
    }
}

/// Host blocks for `ratio` times a device of `device_blocks` blocks of `block_size` tokens, as
/// SGLang 0.5.6.post2 sizes its host pool (`mem_cache/memory_pool_host.py`,
/// `HostKVCache.__init__`: `size = int(device_pool.size * host_to_device_ratio)` tokens, then
/// `size // page_size + 1` pages, a page being a block here); 0 without a device bound.
pub fn host_blocks_by_ratio(device_blocks: Option<usize>, block_size: usize, ratio: f64) -> usize {
    let Some(device) = device_blocks else {
        return 0;
    };
    let bs = block_size.max(1) as u64;
    let tokens = ((device as u64).saturating_mul(bs) as f64 * ratio).floor();
    (tokens as u64 / bs).saturating_add(1) as usize
}

/// One tier with its defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResolvedTier {
    /// The disk tier (else host).
    pub disk: bool,
    /// Blocks it holds.
    pub capacity_blocks: usize,
    /// GB/s into it.
    pub d2h_gbps: f64,
    /// GB/s out of it to the device.
    pub h2d_gbps: f64,
    /// Ms to a transfer's first byte.
    pub first_byte_ms: f64,
    /// When a block is written to it (absent `write_policy`: write-back).
    pub write_policy: WritePolicy,
    /// Fewest tokens of a lower continuation that are loaded back (`[kv.host]` only; 0: any).
    pub min_load_tokens: u64,
}

impl ResolvedTier {
    /// Whether a block is written here as the tier above stores it (`write_through`, or
    /// `write_through_selective` once hit enough), not as the tier above drops it.
    pub fn write_through(&self) -> bool {
        self.write_policy != WritePolicy::WriteBack
    }

    /// Whether a block is written through only after [`SELECTIVE_WRITE_HITS`] hits
    /// (`write_through_selective`).
    pub fn selective(&self) -> bool {
        self.write_policy == WritePolicy::WriteThroughSelective
    }
}

/// Checks `[kv.host]` and `[kv.disk]`.
pub fn validate(s: &Scenario) -> Result<(), Invalid> {
    if s.kv.disk.is_some() && s.kv.host.is_none() {
        return Err(Invalid::new(
            "kv.disk",
            "a table",
            "needs [kv.host]: the disk tier takes the blocks host memory drops",
        ));
    }
    if let (Some(host), Some(disk)) = (&s.kv.host, &s.kv.disk) {
        // A host that holds nothing stores nothing, so it drops (and writes through) nothing
        // to disk: the disk tier would never be used.
        if host.capacity_blocks == Some(0) || host.capacity_gb == Some(0.0) {
            let (key, v) = match (disk.capacity_blocks, disk.capacity_gb) {
                (Some(n), _) => ("kv.disk.capacity_blocks", n.to_string()),
                (None, Some(gb)) => ("kv.disk.capacity_gb", format!("{gb:?}")),
                (None, None) => ("kv.disk", "a table".to_string()),
            };
            return Err(Invalid::new(
                key,
                v,
                "needs kv.host.capacity_blocks > 0: disk takes the blocks host memory drops \
                 (or, written through, stores), and a host of 0 blocks drops none",
            ));
        }
    }
    for (name, t) in [("host", &s.kv.host), ("disk", &s.kv.disk)] {
        let Some(t) = t else { continue };
        let key = |k: &str| format!("kv.{name}.{k}");
        if t.scope == TierScope::Cluster {
            if name == "disk" {
                return Err(Invalid::new(
                    &key("scope"),
                    "\"cluster\"",
                    "is not modelled for disk (only [kv.host] may be shared); use \"worker\"",
                ));
            }
            if s.kv.disk.is_some() {
                return Err(Invalid::new(
                    &key("scope"),
                    "\"cluster\"",
                    "with [kv.disk] is not modelled (a shared host's drops have no one disk to \
                     go to); drop [kv.disk] or use \"worker\"",
                ));
            }
            if s.disagg.enabled {
                return Err(Invalid::new(
                    &key("scope"),
                    "\"cluster\"",
                    "with disagg.enabled is not modelled (prefill and decode workers would share \
                     one pool); use \"worker\"",
                ));
            }
        }
        if name == "disk" && t.write_policy == Some(WritePolicy::WriteThroughSelective) {
            return Err(Invalid::new(
                &key("write_policy"),
                "\"write_through_selective\"",
                "is a [kv.host] policy (SGLang HiCache's); use \"write_back\" or \"write_through\"",
            ));
        }
        if let Some(n) = t.min_load_tokens {
            if name == "disk" {
                return Err(Invalid::new(
                    &key("min_load_tokens"),
                    n,
                    "is a [kv.host] setting (it applies to the whole lower continuation); set \
                     it there",
                ));
            }
            if n > MAX_TIER_BLOCKS as u64 {
                return Err(Invalid::new(
                    &key("min_load_tokens"),
                    n,
                    &format!("must be at most {MAX_TIER_BLOCKS}"),
                ));
            }
        }
        if let Some(r) = t.capacity_ratio {
            let k = key("capacity_ratio");
            if name == "disk" {
                return Err(Invalid::new(
                    &k,
                    r,
                    "is a [kv.host] setting (SGLang's host pool); give the disk capacity_blocks \
                     or capacity_gb",
                ));
            }
            if !r.is_finite() || !(1.0..=1e9).contains(&r) {
                return Err(Invalid::new(
                    &k,
                    format!("{r:?}"),
                    "must be a number from 1 to 1e9 (SGLang requires a host larger than the device)",
                ));
            }
            if t.capacity_blocks.is_some() || t.capacity_gb.is_some() {
                return Err(Invalid::new(
                    &k,
                    format!("{r:?}"),
                    "is set with capacity_blocks or capacity_gb: give one",
                ));
            }
            if t.scope == TierScope::Cluster {
                return Err(Invalid::new(
                    &k,
                    format!("{r:?}"),
                    "with scope = \"cluster\" is not modelled (a pool has no one device); give \
                     capacity_blocks or capacity_gb",
                ));
            }
            if !s.has_deployment() && s.cluster.kv_capacity_blocks.count().is_none() {
                return Err(Invalid::new(
                    &k,
                    format!("{r:?}"),
                    "needs a bounded device: a [deployment] or cluster.kv_capacity_blocks",
                ));
            }
        }
        match (t.capacity_blocks, t.capacity_gb) {
            (Some(_), Some(_)) => {
                return Err(Invalid::new(
                    &key("capacity_gb"),
                    "set",
                    "and capacity_blocks are both set: give one",
                ))
            }
            (None, None) if t.capacity_ratio.is_some() => {}
            (None, None) => {
                return Err(Invalid::new(
                    &key("capacity_blocks"),
                    "absent",
                    "is needed (or capacity_gb, or for [kv.host] capacity_ratio)",
                ))
            }
            (None, Some(gb)) => {
                up_to_1e9(&key("capacity_gb"), gb)?;
                if !s.has_deployment() {
                    return Err(Invalid::new(
                        &key("capacity_gb"),
                        format!("{gb:?}"),
                        "needs a [deployment] (the model's KV bytes per block); without one, give \
                         capacity_blocks",
                    ));
                }
            }
            (Some(n), None) => {
                if n > MAX_TIER_BLOCKS {
                    return Err(Invalid::new(
                        &key("capacity_blocks"),
                        n,
                        &format!("must be at most {MAX_TIER_BLOCKS}"),
                    ));
                }
            }
        }
        for (k, x) in [
            ("d2h_gbps", t.d2h_gbps),
            ("h2d_gbps", t.h2d_gbps),
            ("first_byte_ms", t.first_byte_ms),
        ] {
            if let Some(x) = x {
                up_to_1e9(&key(k), x)?;
            }
        }
    }
    Ok(())
}

/// A finite number from 0 to 1e9.
fn up_to_1e9(key: &str, x: f64) -> Result<(), Invalid> {
    if !x.is_finite() || !(0.0..=1e9).contains(&x) {
        return Err(Invalid::new(
            key,
            format!("{x:?}"),
            "must be a number from 0 to 1e9",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::host_blocks_by_ratio;

    #[test]
    fn a_host_ratio_rounds_the_devices_tokens_down_to_blocks_and_adds_one() {
        // SGLang's default 2.0 on 4,096 blocks of 64 tokens: 524,288 tokens, 8,192 blocks, +1.
        assert_eq!(host_blocks_by_ratio(Some(4096), 64, 2.0), 8193);
        // 1.0 still gives one block more than the device (SGLang's host > device).
        assert_eq!(host_blocks_by_ratio(Some(4096), 64, 1.0), 4097);
        // 3 blocks of 4 tokens x 1.5 = 18 tokens: 4 whole blocks, +1.
        assert_eq!(host_blocks_by_ratio(Some(3), 4, 1.5), 5);
        // 10 blocks of 16 x 1.3 = 208.00000000000003 tokens (as Python computes it): 13, +1.
        assert_eq!(host_blocks_by_ratio(Some(10), 16, 1.3), 14);
        // An unbounded device gives no host.
        assert_eq!(host_blocks_by_ratio(None, 16, 2.0), 0);
    }
}
