//! How long a worker takes: prefill from the new (uncached) tokens, decode per output token.
//!
//! Without a `[timing]` table every request takes the fixed `cluster.service_ms` (all of it
//! before the first token). With one, the defaults are Dynamo's mocker polynomials: prefill
//! ms = 4.209989e-7·t² + 0.01518344·t + 16.50142 for t new tokens, decode ms per token =
//! −25.74·u² + 54.01·u + 5.74 for u the worker's active KV fraction, with a 1 ms floor.

use crate::engine::{ms_to_ns, Nanos};
use crate::scenario::Timing;

/// A worker's timing model.
#[derive(Clone, Debug, PartialEq)]
pub enum TimingModel {
    /// Every request takes this long, all of it prefill.
    Fixed {
        /// Service time, ms.
        service_ms: f64,
    },
    /// Polynomial prefill and decode times.
    Polynomial(Timing),
}

impl TimingModel {
    /// Prefill time in ms for `new_tokens` uncached prompt tokens, overhead included.
    pub fn prefill_ms(&self, new_tokens: u64) -> f64 {
        match self {
            TimingModel::Fixed { service_ms } => *service_ms,
            TimingModel::Polynomial(t) => {
                let x = new_tokens as f64;
                let [a, b, c] = t.prefill_coeffs;
                (a * x * x + b * x + c).max(0.0) + t.request_overhead_ms
            }
        }
    }

    /// One decode step in ms at active KV fraction `u` (0..=1).
    pub fn decode_step_ms(&self, u: f64) -> f64 {
        match self {
            TimingModel::Fixed { .. } => 0.0,
            TimingModel::Polynomial(t) => {
                let [a, b, c] = t.decode_coeffs;
                (a * u * u + b * u + c).max(t.decode_floor_ms)
            }
        }
    }

    /// Time after the first token to generate the remaining `output_tokens − 1` tokens, ns.
    pub fn decode_ns(&self, output_tokens: u32, u: f64) -> Nanos {
        let steps = output_tokens.saturating_sub(1) as f64;
        ms_to_ns(steps * self.decode_step_ms(u))
    }

    /// Prefill time in ns.
    pub fn prefill_ns(&self, new_tokens: u64) -> Nanos {
        ms_to_ns(self.prefill_ms(new_tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mocker_polynomial_defaults() {
        let m = TimingModel::Polynomial(Timing::default());
        let expected = 4.209989e-7 * 1500.0 * 1500.0 + 0.01518344 * 1500.0 + 16.50142;
        assert!((m.prefill_ms(1500) - expected).abs() < 1e-9);
        assert!((m.decode_step_ms(0.0) - 5.74).abs() < 1e-12);
        assert!((m.decode_step_ms(1.0) - (-25.74 + 54.01 + 5.74)).abs() < 1e-9);
        assert_eq!(m.decode_ns(1, 0.5), 0);
    }

    #[test]
    fn decode_floor_applies() {
        let m = TimingModel::Polynomial(Timing {
            decode_coeffs: [0.0, 0.0, 0.1],
            ..Timing::default()
        });
        assert_eq!(m.decode_step_ms(0.3), 1.0);
    }

    #[test]
    fn fixed_service_is_all_prefill() {
        let m = TimingModel::Fixed { service_ms: 2.5 };
        assert_eq!(m.prefill_ns(9999), 2_500_000);
        assert_eq!(m.decode_ns(100, 0.9), 0);
    }
}
