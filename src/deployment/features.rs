//! A step's features: the terms of the roofline ([`roofline`](super::roofline)) whose weighted
//! sum is a step's time, named as profiles ([`profile`](super::profile)) and `dynsim calibrate`
//! spell their coefficients. Both read these names; neither owns them.

/// The number of features (and of step coefficients in a profile).
pub const FEATURES: usize = 9;

/// The first `RATE_FEATURES` features are times at a datasheet rate (FLOP/s, bytes/s): their
/// coefficients are 1 / the share of the rate reached, at least 1, and can differ by GPU.
pub const RATE_FEATURES: usize = 5;

/// The features whose coefficients a profile may hold per GPU (`[gpu.NAME]`): the GEMMs, the
/// weight and KV reads and the all-reduces, whose kernels reach different shares of different
/// GPUs' datasheets. Attention's coefficient and the fixed costs are one for all GPUs.
pub const GPU_FEATURES: [usize; 4] = [0, 1, 3, 4];

/// The features' names, as profiles and `calibrate` spell them (the coefficients' names).
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "gemm_compute",
    "weight_read",
    "attention_compute",
    "kv_read",
    "allreduce",
    "allreduce_us",
    "layer_us",
    "step_us",
    "sequence_us",
];

/// A step's features: ms at the datasheet's rates for the first five, counts / 1,000 for the
/// rest (so their coefficients are microseconds).
pub type Features = [f64; FEATURES];

/// Σ a·b.
pub fn dot(a: &Features, b: &Features) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
