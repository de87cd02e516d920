//! KV-transfer cost formulas for disaggregated prefill/decode serving.
//!
//! Units: GB/s means 1e9 bytes per second (not GiB/s), MiB means 2^20 bytes (not 1e6), times are
//! milliseconds. Mixing them is the lab's fourth classic mistake; the tests pin each one.

use serde::{Deserialize, Serialize};

/// Bytes in one MiB (2^20).
pub const MIB: f64 = 1_048_576.0;
/// Bytes per second in one GB/s (1e9).
pub const GBPS: f64 = 1e9;

/// The shape of a model's KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ModelShape {
    /// Transformer layers.
    #[schemars(range(min = 1))]
    pub layers: u64,
    /// KV heads per layer (grouped-query attention: fewer than query heads).
    #[schemars(range(min = 1))]
    pub kv_heads: u64,
    /// Dimensions per head.
    #[schemars(range(min = 1))]
    pub head_dim: u64,
    /// Bytes per element (2 for bf16/fp16).
    #[schemars(range(min = 1))]
    pub dtype_bytes: u64,
}

impl Default for ModelShape {
    /// Qwen3-0.6B: 28 layers, 8 KV heads, head dim 128, bf16.
    fn default() -> Self {
        ModelShape {
            layers: 28,
            kv_heads: 8,
            head_dim: 128,
            dtype_bytes: 2,
        }
    }
}

impl ModelShape {
    /// KV bytes one token occupies for this model (`u64::MAX` if that overflows; scenario and
    /// command-line checks reject such shapes).
    pub fn bytes_per_token(&self) -> u64 {
        kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, self.dtype_bytes)
    }
}

/// KV bytes per token: layers x KV heads x head dim x 2 (K and V) x bytes per element
/// (`u64::MAX` if that overflows; [`checked_kv_bytes_per_token`] tells).
pub fn kv_bytes_per_token(layers: u64, kv_heads: u64, head_dim: u64, dtype_bytes: u64) -> u64 {
    checked_kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes).unwrap_or(u64::MAX)
}

/// [`kv_bytes_per_token`], `None` when the product does not fit in 64 bits.
pub fn checked_kv_bytes_per_token(
    layers: u64,
    kv_heads: u64,
    head_dim: u64,
    dtype_bytes: u64,
) -> Option<u64> {
    [kv_heads, head_dim, 2, dtype_bytes]
        .into_iter()
        .try_fold(layers, u64::checked_mul)
}

/// Bytes of `tokens` tokens' KV, as a float (exact below 2^53 bytes, never overflowing).
fn kv_bytes(tokens: u64, bytes_per_token: u64) -> f64 {
    tokens as f64 * bytes_per_token as f64
}

/// The KV size of `tokens` tokens in MiB (2^20 bytes).
pub fn kv_mib(tokens: u64, bytes_per_token: u64) -> f64 {
    kv_bytes(tokens, bytes_per_token) / MIB
}

/// Milliseconds to move `tokens` tokens' KV over a link of `gbps` GB/s (1e9 bytes/s).
pub fn transfer_ms(tokens: u64, bytes_per_token: u64, gbps: f64) -> f64 {
    kv_bytes(tokens, bytes_per_token) / (gbps * GBPS) * 1e3
}

/// Time to first token with disaggregation: prefill, then the KV transfer, then a fixed overhead.
pub fn ttft_disagg(
    prefill_ms: f64,
    tokens: u64,
    bytes_per_token: u64,
    gbps: f64,
    overhead_ms: f64,
) -> f64 {
    prefill_ms + transfer_ms(tokens, bytes_per_token, gbps) + overhead_ms
}

/// The bandwidth in GB/s that moved `nbytes` bytes in `ms` milliseconds.
pub fn effective_gbps(nbytes: u64, ms: f64) -> f64 {
    nbytes as f64 / (ms / 1e3) / GBPS
}

/// The link speed in GB/s at which moving `tokens` tokens' KV costs exactly `saved_ms`, the time
/// disaggregation saves elsewhere: any faster link pays for the transfer.
pub fn breakeven_gbps(tokens: u64, bytes_per_token: u64, saved_ms: f64) -> f64 {
    kv_bytes(tokens, bytes_per_token) / (saved_ms / 1e3) / GBPS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::round::round_py;

    #[test]
    fn qwen3_0_6b_is_114688_bytes_per_token() {
        assert_eq!(ModelShape::default().bytes_per_token(), 114_688);
    }

    #[test]
    fn mib_is_two_to_the_twenty() {
        // 1500 tokens = 172,032,000 bytes: 164.1 MiB, but 172.0 MB if MB were mistaken for MiB.
        assert_eq!(round_py(kv_mib(1500, 114_688), 1), 164.1);
    }

    #[test]
    fn gbps_is_1e9_bytes_per_second() {
        // With GiB/s (2^30) these would be 1430.6, 263.5 and 12.0.
        assert_eq!(round_py(transfer_ms(1500, 114_688, 0.112), 1), 1536.0);
        assert_eq!(round_py(transfer_ms(1500, 114_688, 0.608), 1), 282.9);
        assert_eq!(round_py(transfer_ms(1500, 114_688, 13.4), 1), 12.8);
    }

    #[test]
    fn ttft_adds_prefill_transfer_and_overhead() {
        let t = ttft_disagg(40.0, 1500, 114_688, 0.608, 5.0);
        assert!((t - (40.0 + 282.947_368_421 + 5.0)).abs() < 1e-6);
    }

    #[test]
    fn breakeven_and_effective_are_inverses_of_transfer() {
        let g = breakeven_gbps(1500, 114_688, 282.947_368_421_052_6);
        assert!((g - 0.608).abs() < 1e-9);
        assert!((effective_gbps(172_032_000, 1536.0) - 0.112).abs() < 1e-12);
    }
}
