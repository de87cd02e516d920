//! Step times from a step's work and the GPU's datasheet: a roofline with fitted corrections.
//!
//! A forward pass (a step) of a batch on one worker of `tp` GPUs does, on each GPU:
//!
//! - **GEMMs**: 2 FLOPs per linear parameter per token, plus the output head for each sampled
//!   token, at the weights' precision's dense peak; and reads every weight once (the linear
//!   projections at their precision, the output head in bf16) at the memory bandwidth. A step
//!   costs both, each times its own coefficient: no overlap is assumed between the two, and the
//!   fitted efficiencies absorb what overlap there is. (A hard roofline, the larger of the two
//!   alone, fitted the measured vLLM rows worse: 24.2 % TTFT and 8.3 % TPOT against 21.2 % and
//!   7.8 %, docs/FIDELITY.md; near the ridge point, at batches of 64 to 128 decodes, it
//!   predicted TPOT 10 to 25 % short.)
//! - **Attention**: prefill chunks compute 4 x head dim FLOPs per query-key pair per query head
//!   (QKᵀ and PV; a chunk of c tokens after p computed ones has c x (p + (c+1)/2) pairs), at the
//!   BF16 peak (attention runs in bf16 whatever the weights); decoding requests read their whole
//!   KV at the memory bandwidth.
//! - **Tensor parallelism**: two all-reduces per layer of the step's activations (tokens x hidden
//!   x 2 bytes), a ring's 2(tp−1)/tp of it over the GPU's link (NVLink, or PCIe without; the
//!   network's NIC when the group spans more GPUs than a node holds, as a ring is as fast as its
//!   slowest hop), and a latency per all-reduce. A group across nodes is charged no more
//!   latency than one inside a node, and NCCL's trees across nodes are not modelled: no measured
//!   row here runs across nodes, so the network's share is the datasheet's figure alone.
//! - **Overheads**: per layer (kernel launches), per step (scheduling, input preparation,
//!   sampling) and per request in the batch.
//!
//! Each term is a *feature* (in ms at the datasheet's rates, or a count) and the step's time is
//! their sum weighted by a [`Profile`]'s coefficients: efficiencies for the rate terms (1 / MFU,
//! 1 / bandwidth utilisation), microseconds for the counts. `dynsim calibrate` fits them on
//! measured servers; the same form with BLIS's physics-informed step model in mind
//! (inference-sim `sim/latency/trained_physics_model.go`), which differs in its terms
//! (attention over whole prompts).

use super::features::{dot, Features};
use super::profile::Profile;
use super::Deployment;

/// What one forward pass computes, as the step scheduler plans it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepWork {
    /// Tokens computed: prompt chunks, recomputed tokens of preempted requests, and one per
    /// decoding request.
    pub tokens: u64,
    /// Uncached prompt tokens computed (prefill chunks).
    pub prefill_tokens: u64,
    /// Query-key pairs of the chunks' causal attention (every request computing more than one
    /// token): Σ c x (p + (c+1)/2) for a chunk of c tokens after p already computed.
    pub prefill_pairs: f64,
    /// Requests decoding one token each.
    pub decode_seqs: u64,
    /// KV tokens the decoding requests attend over (each one's whole context).
    pub decode_kv_tokens: u64,
    /// Requests in the step, prefilling or decoding.
    pub seqs: u64,
    /// Tokens sampled: one per decoding request and per prompt whose last chunk this is.
    pub sampled: u64,
    /// The decoding requests' share of the worker's KV capacity (Dynamo's mocker polynomial
    /// reads it; 0 with unbounded KV).
    pub decode_kv_fraction: f64,
}

impl StepWork {
    /// A step as Dynamo's mocker polynomials see it: `prefill` uncached prompt tokens and, if
    /// `decode` is given, decoding requests holding that share of the worker's KV.
    pub fn polynomial(prefill: u64, decode: Option<f64>) -> Self {
        StepWork {
            tokens: prefill + u64::from(decode.is_some()),
            prefill_tokens: prefill,
            decode_seqs: u64::from(decode.is_some()),
            decode_kv_fraction: decode.unwrap_or(0.0),
            ..StepWork::default()
        }
    }
}

/// A deployment's step-time model: the per-step constants of its roofline and the coefficients.
#[derive(Clone, Debug, PartialEq)]
pub struct Roofline {
    /// GEMM FLOPs per token on one GPU (2 x linear parameters / tp).
    flops_per_token: f64,
    /// Output-head FLOPs per sampled token on one GPU.
    head_flops_per_sample: f64,
    /// Dense peak at the weights' precision, FLOP/ms.
    gemm_flop_per_ms: f64,
    /// Weights read per step on one GPU, bytes.
    weight_bytes: f64,
    /// Memory bandwidth, bytes/ms.
    bytes_per_ms: f64,
    /// Attention FLOPs per query-key pair on one GPU (4 x head dim x query heads / tp x layers).
    flops_per_pair: f64,
    /// BF16 dense peak, FLOP/ms.
    attention_flop_per_ms: f64,
    /// KV bytes per token on one GPU.
    kv_bytes_per_token: f64,
    /// All-reduce bytes on the link per token (0 without tensor parallelism).
    allreduce_bytes_per_token: f64,
    /// Link bandwidth, bytes/ms.
    link_bytes_per_ms: f64,
    /// All-reduces per step (2 per layer with tensor parallelism, else 0).
    allreduces: f64,
    /// Layers.
    layers: f64,
    /// The coefficients.
    profile: Profile,
    /// The step coefficients on this deployment's GPU.
    step: Features,
}

impl Roofline {
    /// The model of deployment `d` with `profile`'s coefficients.
    pub fn new(d: &Deployment, profile: Profile) -> Self {
        let m = &d.model;
        let tp = d.tp as f64;
        let head_params = m.head_params() as f64;
        let allreduce_bytes_per_token = if d.tp > 1 {
            2.0 * m.layers as f64 * m.hidden_size as f64 * 2.0 * 2.0 * (tp - 1.0) / tp
        } else {
            0.0
        };
        Roofline {
            flops_per_token: 2.0 * m.linear_params() as f64 / tp,
            head_flops_per_sample: 2.0 * head_params / tp,
            gemm_flop_per_ms: d.gpu.peak_flops(d.precision).expect("resolved precision") / 1e3,
            weight_bytes: (m.linear_params() as f64 * d.precision.bytes() + head_params * 2.0) / tp,
            bytes_per_ms: d.gpu.memory_bytes_per_s() / 1e3,
            flops_per_pair: 4.0
                * m.head_dim as f64
                * (m.attention_heads as f64 / tp)
                * m.layers as f64,
            attention_flop_per_ms: d.gpu.peak_flops(super::Precision::Bf16).expect("bf16") / 1e3,
            kv_bytes_per_token: d.kv_bytes_per_token_per_gpu as f64,
            allreduce_bytes_per_token,
            link_bytes_per_ms: d.gpu.link_bytes_per_s(d.tp).expect("resolved tp") / 1e3,
            allreduces: if d.tp > 1 { 2.0 * m.layers as f64 } else { 0.0 },
            layers: m.layers as f64,
            step: profile.step_on(&d.gpu, d.precision),
            profile,
        }
    }

    /// The coefficients.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The step's features: its GEMMs charged to both compute and weight reads.
    pub fn features(&self, w: &StepWork) -> Features {
        let tokens = w.tokens as f64;
        let compute = (self.flops_per_token * tokens
            + self.head_flops_per_sample * w.sampled as f64)
            / self.gemm_flop_per_ms;
        let memory = self.weight_bytes / self.bytes_per_ms;
        [
            compute,
            memory,
            self.flops_per_pair * w.prefill_pairs / self.attention_flop_per_ms,
            self.kv_bytes_per_token * w.decode_kv_tokens as f64 / self.bytes_per_ms,
            self.allreduce_bytes_per_token * tokens / self.link_bytes_per_ms,
            self.allreduces / 1e3,
            self.layers / 1e3,
            1.0 / 1e3,
            w.seqs as f64 / 1e3,
        ]
    }

    /// The step's duration, ms.
    pub fn step_ms(&self, w: &StepWork) -> f64 {
        dot(&self.step, &self.features(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::deployment;
    use crate::deployment::Precision;

    /// A decode step of 8 requests holding 1,000 KV tokens each.
    fn eight_decodes() -> StepWork {
        StepWork {
            tokens: 8,
            decode_seqs: 8,
            decode_kv_tokens: 8000,
            seqs: 8,
            sampled: 8,
            ..StepWork::default()
        }
    }

    /// One step by hand: Qwen3-32B bf16 on 2 x h100_sxm, every coefficient 1.
    ///
    /// A decode step of 8 requests holding 1,000 KV tokens each. Linear parameters
    /// 31,205,621,760 (64 x 487,587,840); head 151,936 x 5,120 = 777,912,320.
    /// - GEMMs: (2 x 31,205,621,760 x 8 + 2 x 777,912,320 x 8) / 2 = 255,868,272,640 FLOPs at
    ///   989e9 FLOP/ms = 0.258714 ms; weights (31,205,621,760 x 2 + 777,912,320 x 2) / 2 =
    ///   31,983,534,080 bytes at 3.35e9 bytes/ms = 9.547324 ms, both charged.
    /// - KV: 64 layers x 4 heads x 128 x 2 x 2 = 131,072 bytes per token x 8,000 tokens at 3.35e9
    ///   = 0.313008 ms.
    /// - All-reduce: 2 x 64 x 5,120 x 2 bytes x 2 x (1/2) = 1,310,720 bytes per token x 8 at
    ///   450e6 bytes/ms = 0.023302 ms; 128 all-reduces (0.128 at 1 µs each).
    /// - Overheads: 64 layers (0.064), one step (0.001), 8 requests (0.008).
    ///
    /// Total: 0.258714 + 9.547324 + 0.313008 + 0.023302 + 0.128 + 0.064 + 0.001 + 0.008 =
    /// 10.343347 ms.
    #[test]
    fn one_decode_step_by_hand() {
        let d = deployment("Qwen/Qwen3-32B", "h100_sxm", 2, Precision::Bf16);
        let r = Roofline::new(&d, Profile::ones());
        let w = eight_decodes();
        let f = r.features(&w);
        assert!((f[0] - 0.258714).abs() < 1e-6, "{}", f[0]);
        assert!((f[1] - 9.547324).abs() < 1e-6, "{}", f[1]);
        assert!((f[3] - 0.313008).abs() < 1e-6, "{}", f[3]);
        assert!((f[4] - 0.023302).abs() < 1e-6, "{}", f[4]);
        assert!(
            (r.step_ms(&w) - 10.343347).abs() < 1e-5,
            "{}",
            r.step_ms(&w)
        );
    }

    /// A prefill chunk of 4,096 tokens (nothing cached): GEMMs 2 x
    /// 31,205,621,760 x 4,096 / 2 + one sampled token's head 777,912,320 = 1.278190e14 FLOPs at
    /// 989e9 = 129.2407 ms; attention 4,096 x 2,048.5 = 8,390,656 pairs x 4 x 128 x 32 heads x
    /// 64 layers = 8.798e12 FLOPs at 989e9 = 8.8961 ms; the weights are read once, as in a
    /// decode step (9.547324 ms).
    #[test]
    fn one_prefill_chunk_by_hand() {
        let d = deployment("Qwen/Qwen3-32B", "h100_sxm", 2, Precision::Bf16);
        let r = Roofline::new(&d, Profile::ones());
        let w = StepWork {
            tokens: 4096,
            prefill_tokens: 4096,
            prefill_pairs: 4096.0 * 2048.5,
            seqs: 1,
            sampled: 1,
            ..StepWork::default()
        };
        let f = r.features(&w);
        assert!((f[1] - 9.547324).abs() < 1e-6, "{}", f[1]);
        assert!((f[0] - 129.2407).abs() < 1e-3, "{}", f[0]);
        assert!((f[2] - 8.8961).abs() < 1e-3, "{}", f[2]);
    }

    /// Tensor parallelism past a node crosses the network: Llama-3.1-70B (80 layers, hidden
    /// 8,192) fp8 on h100_sxm, 8 decode tokens. At tp 8, 2 x 80 x 8,192 x 2 bytes x 2 x 7/8 =
    /// 4,587,520 bytes per token over NVLink's 450e6 bytes/ms: 0.081556 ms. At tp 16 (two HGX
    /// boards), 2 x 80 x 8,192 x 2 x 2 x 15/16 = 4,915,200 bytes per token over a 400 Gb/s
    /// ConnectX-7's 50e6 bytes/ms: 0.786432 ms, so a step of the larger group is slower.
    #[test]
    fn all_reduces_across_nodes_go_at_the_network_s_speed() {
        let w = eight_decodes();
        let at = |tp| {
            let d = deployment("meta-llama/Llama-3.1-70B", "h100_sxm", tp, Precision::Fp8);
            Roofline::new(&d, Profile::ones()).features(&w)[4]
        };
        assert!((at(8) - 0.081556).abs() < 1e-6, "{}", at(8));
        assert!((at(16) - 0.786432).abs() < 1e-6, "{}", at(16));
    }

    #[test]
    fn fp8_weights_halve_the_read_and_double_the_peak() {
        let bf16 = deployment("meta-llama/Llama-3.1-70B", "h100_sxm", 4, Precision::Bf16);
        let fp8 = deployment("meta-llama/Llama-3.1-70B", "h100_sxm", 4, Precision::Fp8);
        let (a, b) = (
            Roofline::new(&bf16, Profile::ones()),
            Roofline::new(&fp8, Profile::ones()),
        );
        let decode = StepWork {
            tokens: 1,
            decode_seqs: 1,
            seqs: 1,
            sampled: 1,
            decode_kv_tokens: 100,
            ..StepWork::default()
        };
        // The head stays bf16: a bit more than half.
        let ratio = b.features(&decode)[1] / a.features(&decode)[1];
        assert!(ratio > 0.5 && ratio < 0.53, "{ratio}");
        let prefill = StepWork {
            tokens: 8192,
            prefill_tokens: 8192,
            seqs: 1,
            ..StepWork::default()
        };
        let ratio = b.features(&prefill)[0] / a.features(&prefill)[0];
        assert!((ratio - 0.5).abs() < 1e-3, "{ratio}");
    }
}
