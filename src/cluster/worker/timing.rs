//! How long a forward pass (a step) takes, from the step's work ([`StepWork`]).
//!
//! - `roofline` (the default with a `[deployment]`): the deployment's GPU and model give each
//!   step's GEMM, attention, KV and all-reduce work, weighted by a fitted profile
//!   ([`crate::deployment::roofline`]).
//! - `steps` (the default without): Dynamo's mocker polynomials (`dynamo-mocker` 1.6.1 on
//!   `aisimulate-core` 0.13, `engine/common/perf_model.rs`), evaluated once per step on the whole
//!   batch: prefill ms = 4.209989e-7·T² + 0.01518344·T + 16.50142 for T uncached prompt tokens
//!   computed in the step (0 if none), plus, if any request decodes in the step, decode ms =
//!   −25.74·p² + 54.01·p + 5.74 with a 1 ms floor, for p = KV tokens of the decoding requests /
//!   the worker's KV capacity in tokens (0 with unbounded KV). The two add; nothing else does.
//! - `fixed`: every step takes `service_ms`, whatever it holds (the lab's model: a one-token
//!   request is served in one step).

use crate::deployment::roofline::Roofline;
pub use crate::deployment::roofline::StepWork;
use crate::engine::{ms_to_ns, Nanos};

/// A worker's step-time model.
#[derive(Clone, Debug, PartialEq)]
pub enum TimingModel {
    /// Every step takes this long.
    Fixed {
        /// Step time, ms.
        step_ms: f64,
    },
    /// The mocker's polynomials.
    Polynomial {
        /// `[a, b, c]` of the prefill polynomial in T.
        prefill: [f64; 3],
        /// `[a, b, c]` of the decode polynomial in p.
        decode: [f64; 3],
        /// Floor of the decode time, ms.
        decode_floor_ms: f64,
    },
    /// A deployment's roofline.
    Roofline(Box<Roofline>),
}

impl TimingModel {
    /// The prefill part of a polynomial step computing `tokens` uncached prompt tokens, ms (0
    /// for none, and under any other model).
    pub fn prefill_ms(&self, tokens: u64) -> f64 {
        match self {
            TimingModel::Polynomial { prefill, .. } if tokens > 0 => {
                let x = tokens as f64;
                let [a, b, c] = *prefill;
                (a * x * x + b * x + c).max(0.0)
            }
            _ => 0.0,
        }
    }

    /// The decode part of a polynomial step whose decoding requests hold `kv_fraction` (0..=1)
    /// of the worker's KV, ms (0 under any other model).
    pub fn decode_ms(&self, kv_fraction: f64) -> f64 {
        match self {
            TimingModel::Polynomial {
                decode,
                decode_floor_ms,
                ..
            } => {
                let [a, b, c] = *decode;
                let u = kv_fraction.clamp(0.0, 1.0);
                (a * u * u + b * u + c).max(*decode_floor_ms)
            }
            _ => 0.0,
        }
    }

    /// A step's duration in ms.
    pub fn step_ms(&self, w: &StepWork) -> f64 {
        match self {
            TimingModel::Fixed { step_ms } => *step_ms,
            TimingModel::Polynomial { .. } => {
                let decode = if w.decode_seqs > 0 {
                    self.decode_ms(w.decode_kv_fraction)
                } else {
                    0.0
                };
                self.prefill_ms(w.prefill_tokens) + decode
            }
            TimingModel::Roofline(r) => r.step_ms(w),
        }
    }

    /// A step's duration: at least 1 ns, so that time always moves.
    pub fn step_ns(&self, w: &StepWork) -> Nanos {
        ms_to_ns(self.step_ms(w)).max(1)
    }

    /// The roofline, under that model.
    pub fn roofline(&self) -> Option<&Roofline> {
        match self {
            TimingModel::Roofline(r) => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::hardware::polynomial;
    use crate::scenario::Timing;

    fn mocker() -> TimingModel {
        polynomial(&Timing::default())
    }

    fn work(prefill: u64, decode: Option<f64>) -> StepWork {
        StepWork::polynomial(prefill, decode)
    }

    #[test]
    fn mocker_polynomial_defaults() {
        let m = mocker();
        let expected = 4.209989e-7 * 1500.0 * 1500.0 + 0.01518344 * 1500.0 + 16.50142;
        assert!((m.prefill_ms(1500) - expected).abs() < 1e-9);
        assert_eq!(m.prefill_ms(0), 0.0);
        assert!((m.decode_ms(0.0) - 5.74).abs() < 1e-12);
        assert!((m.decode_ms(1.0) - (-25.74 + 54.01 + 5.74)).abs() < 1e-9);
        // By hand: 8,192 tokens take 28.2527 + 124.3827 + 16.5014 = 169.1369 ms; decodes at
        // p = 0.38 add −3.7169 + 20.5238 + 5.74 = 22.5469 ms.
        assert_eq!(m.step_ns(&work(8192, None)), 169_136_918);
        assert_eq!(m.step_ns(&work(8192, Some(0.38))), 169_136_918 + 22_546_944);
    }

    #[test]
    fn decode_floor_applies() {
        let m = polynomial(&Timing {
            decode_coeffs: [0.0, 0.0, 0.1],
            ..Timing::default()
        });
        assert_eq!(m.decode_ms(0.3), 1.0);
    }

    #[test]
    fn fixed_steps_take_service_ms_whatever_they_hold() {
        let m = TimingModel::Fixed { step_ms: 2.5 };
        assert_eq!(m.step_ns(&work(9999, Some(0.9))), 2_500_000);
        assert_eq!(m.step_ns(&work(0, None)), 2_500_000);
    }
}
