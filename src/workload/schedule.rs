//! A rate that varies over the run: a synthetic workload's arrival rate (`rate_schedule`,
//! sessions per second) or a trace's speedup (`speedup_schedule`), as a function of the run's
//! clock.
//!
//! Arrivals follow the schedule by time rescaling: a workload first places its arrivals on an
//! *operational* clock at rate 1 (a Poisson process of rate 1, or one arrival per second; a
//! trace at its own pace), and each operational time `u` becomes the run time `t` at which the
//! schedule's integral reaches it, `∫₀ᵗ rate(s) ds = u` ([`Schedule::time_of`]). For a Poisson
//! workload this is exactly a non-homogeneous Poisson process of intensity `rate(t)`; for a
//! trace, a request at trace time `τ` arrives when the run has played `τ` of the trace.
//!
//! Shapes:
//! - `sine`: a day, `rate(t) = m + a·cos(2π(t − peak_at_s)/period_s)` with `m` the mean of
//!   `peak` and `trough` and `a` half their difference (the trough half a period from the peak;
//!   by default the run starts at its quietest, `peak_at_s = period_s / 2`);
//! - `piecewise`: `points = [[t_s, rate], ...]`, increasing `t_s`, held before the first and
//!   after the last, `linear` between them (or `step`: each held until the next).

use serde::{Deserialize, Serialize};

/// A positive rate as a function of the run's time in seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "shape", rename_all = "lowercase", deny_unknown_fields)]
pub enum Schedule {
    /// A daily sine between `trough` and `peak`.
    Sine {
        /// The highest rate.
        peak: f64,
        /// The lowest rate (> 0).
        trough: f64,
        /// The period, s (86400: a day).
        #[serde(default = "day_s")]
        period_s: f64,
        /// When the rate peaks, s (absent: half a period, so the run starts at the trough).
        #[serde(default)]
        peak_at_s: Option<f64>,
    },
    /// Rates at given times.
    Piecewise {
        /// `[t_s, rate]` pairs, `t_s` increasing.
        points: Vec<[f64; 2]>,
        /// Between points: `linear` (default) or `step`.
        #[serde(default)]
        interpolate: Interpolate,
    },
}

fn day_s() -> f64 {
    86_400.0
}

/// How a piecewise schedule goes from one point to the next.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Interpolate {
    /// A straight line.
    #[default]
    Linear,
    /// Each rate held until the next point.
    Step,
}

impl Schedule {
    /// Checks the shape; on failure the field (relative to the schedule) and the problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        let positive = |x: f64| x.is_finite() && x > 0.0;
        match self {
            Schedule::Sine {
                peak,
                trough,
                period_s,
                peak_at_s,
            } => {
                if !positive(*trough) {
                    return err("trough", "must be a finite number > 0");
                }
                if !(peak.is_finite() && peak >= trough) {
                    return err("peak", "must be a finite number >= trough");
                }
                if !positive(*period_s) {
                    return err("period_s", "must be a finite number > 0");
                }
                if peak_at_s.is_some_and(|p| !p.is_finite()) {
                    return err("peak_at_s", "must be a finite number");
                }
                Ok(())
            }
            Schedule::Piecewise { points, .. } => {
                if points.is_empty() {
                    return err("points", "must have at least one [t_s, rate] pair");
                }
                for (i, [t, r]) in points.iter().enumerate() {
                    if !(t.is_finite() && *t >= 0.0) {
                        return err(&format!("points[{i}]"), "t_s must be a finite number >= 0");
                    }
                    if !positive(*r) {
                        return err(
                            &format!("points[{i}]"),
                            "the rate must be a finite number > 0",
                        );
                    }
                    if i > 0 && *t <= points[i - 1][0] {
                        return err(&format!("points[{i}]"), "t_s must increase");
                    }
                }
                Ok(())
            }
        }
    }

    /// The rate at `t` s.
    pub fn rate(&self, t: f64) -> f64 {
        match self {
            Schedule::Sine { .. } => {
                let (m, a, w, pk) = self.sine_terms();
                m + a * (w * (t - pk)).cos()
            }
            Schedule::Piecewise {
                points,
                interpolate,
            } => {
                let k = points.partition_point(|p| p[0] <= t);
                if k == 0 {
                    return points[0][1];
                }
                if k == points.len() {
                    return points[k - 1][1];
                }
                let ([t0, r0], [t1, r1]) = (points[k - 1], points[k]);
                match interpolate {
                    Interpolate::Step => r0,
                    Interpolate::Linear => r0 + (r1 - r0) * (t - t0) / (t1 - t0),
                }
            }
        }
    }

    /// The mean, amplitude, angular frequency and peak time of a sine.
    fn sine_terms(&self) -> (f64, f64, f64, f64) {
        let Schedule::Sine {
            peak,
            trough,
            period_s,
            peak_at_s,
        } = self
        else {
            unreachable!("a sine")
        };
        (
            (peak + trough) / 2.0,
            (peak - trough) / 2.0,
            std::f64::consts::TAU / period_s,
            peak_at_s.unwrap_or(period_s / 2.0),
        )
    }

    /// `∫₀ᵗ rate(s) ds` for `t >= 0` s.
    pub fn integral(&self, t: f64) -> f64 {
        match self {
            Schedule::Sine { .. } => {
                let (m, a, w, pk) = self.sine_terms();
                m * t + a / w * ((w * (t - pk)).sin() - (-w * pk).sin())
            }
            Schedule::Piecewise { points, .. } => {
                let mut sum = 0.0;
                let mut at = 0.0;
                for p in points {
                    if p[0] >= t {
                        break;
                    }
                    if p[0] > at {
                        sum += self.segment(at, p[0]);
                        at = p[0];
                    }
                }
                sum + self.segment(at, t)
            }
        }
    }

    /// `∫ rate` from `a` to `b` within one piece of a piecewise schedule (no point strictly
    /// between them): exact for linear and step pieces.
    fn segment(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        match self {
            Schedule::Piecewise {
                interpolate: Interpolate::Step,
                ..
            } => self.rate(a) * (b - a),
            _ => (self.rate(a) + self.rate(b)) / 2.0 * (b - a),
        }
    }

    /// The time `t` >= 0 s at which `∫₀ᵗ rate = u` (`u` >= 0): the inverse of
    /// [`Schedule::integral`], found by bisection to within 0.1 ns, or one step of an `f64`
    /// where that is coarser (past about 6 days of schedule time; 1 ns a month in).
    ///
    /// It never decreases as `u` grows, whatever the rounding of the integral: the bisection
    /// starts from `[0, H]`, `H` the smallest power of two seconds with `H · min rate >= u`,
    /// so two values of `u` follow the same midpoints until the first one that parts them, and
    /// the smaller ends below it and the larger above. (Before Dec 5 2026 the bisection started
    /// from `[u / max rate, u / min rate]` and stopped at a relative width of 1e-9, about 86 µs
    /// a day in: two Poisson arrivals closer than that could come out in reverse order, and the
    /// run panicked.)
    pub fn time_of(&self, u: f64) -> f64 {
        if u <= 0.0 {
            return 0.0;
        }
        let (lo_rate, _) = self.bounds();
        let mut hi = 1.0f64;
        while hi * lo_rate < u && hi < f64::MAX / 2.0 {
            hi *= 2.0;
        }
        let mut lo = 0.0f64;
        while hi - lo > 1e-10 {
            let mid = lo + (hi - lo) / 2.0;
            if mid <= lo || mid >= hi {
                break;
            }
            if self.integral(mid) < u {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// The lowest and highest rate.
    fn bounds(&self) -> (f64, f64) {
        match self {
            Schedule::Sine { peak, trough, .. } => (*trough, *peak),
            Schedule::Piecewise { points, .. } => {
                points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
                    (lo.min(p[1]), hi.max(p[1]))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine() -> Schedule {
        Schedule::Sine {
            peak: 8.0,
            trough: 2.0,
            period_s: 86_400.0,
            peak_at_s: None,
        }
    }

    #[test]
    fn a_daily_sine_starts_at_its_trough_and_peaks_at_noon() {
        let s = sine();
        assert!((s.rate(0.0) - 2.0).abs() < 1e-12);
        assert!((s.rate(43_200.0) - 8.0).abs() < 1e-12);
        assert!((s.rate(86_400.0) - 2.0).abs() < 1e-12);
        // A whole day integrates to the mean rate times a day: 5 x 86,400.
        assert!((s.integral(86_400.0) - 432_000.0).abs() < 1e-6);
    }

    #[test]
    fn time_of_inverts_the_integral() {
        let linear = Schedule::Piecewise {
            points: vec![[0.0, 1.0], [10.0, 3.0], [20.0, 3.0]],
            interpolate: Interpolate::Linear,
        };
        // Hand-computed: 0..10 s ramps 1 -> 3 (20 units), then 3 per second.
        assert!((linear.integral(10.0) - 20.0).abs() < 1e-12);
        assert!((linear.integral(30.0) - 80.0).abs() < 1e-12);
        let step = Schedule::Piecewise {
            points: vec![[5.0, 2.0], [10.0, 4.0]],
            interpolate: Interpolate::Step,
        };
        assert!((step.integral(12.0) - (10.0 * 2.0 + 2.0 * 4.0)).abs() < 1e-12);
        for s in [sine(), linear, step] {
            for u in [0.5, 7.0, 20.0, 1234.5, 400_000.0] {
                let t = s.time_of(u);
                assert!(
                    (s.integral(t) - u).abs() < 1e-6 * u.max(1.0),
                    "{s:?} {u} {t}"
                );
            }
        }
    }

    #[test]
    fn time_of_never_decreases_between_close_values() {
        // Operational times a few microseconds apart, a day in (Poisson gaps are often that
        // short): the old bisection's 1e-9 relative width put 8 of 200,000 such arrivals in
        // reverse order.
        let step = Schedule::Piecewise {
            points: vec![[0.0, 1.0], [1000.0, 100.0]],
            interpolate: Interpolate::Step,
        };
        for s in [sine(), step] {
            let mut last = 0.0;
            for k in 0..20_000u32 {
                let u = 200_000.0 + f64::from(k) * 3.7e-6;
                let t = s.time_of(u);
                assert!(t >= last, "{s:?}: u = {u} gives {t} < {last}");
                last = t;
            }
        }
    }

    #[test]
    fn bad_shapes_name_their_field() {
        let bad = |s: Schedule| s.validate().unwrap_err().0;
        assert_eq!(
            bad(Schedule::Sine {
                peak: 1.0,
                trough: 0.0,
                period_s: 1.0,
                peak_at_s: None
            }),
            "trough"
        );
        assert_eq!(
            bad(Schedule::Piecewise {
                points: vec![[1.0, 1.0], [1.0, 2.0]],
                interpolate: Interpolate::Linear
            }),
            "points[1]"
        );
        let parsed: Schedule =
            toml::from_str("shape = \"sine\"\npeak = 4.0\ntrough = 1.0").unwrap();
        assert_eq!(parsed.rate(0.0), 1.0);
    }
}
