//! Load predictors: the next interval's value of a series (requests, prompt and output
//! lengths), as Dynamo's planner predicts them (`planner/utils/load_predictor.py` at
//! ai-dynamo/dynamo 0ff50012: `ConstantPredictor`, `KalmanPredictor`). Like Dynamo's, every
//! predictor skips the idle run of zeros before the first traffic and reads a missing value as
//! 0. `moving-average` is dynsim's own (Dynamo also has ARIMA and Prophet, which need their
//! Python libraries); its `kalman` is Dynamo's local linear trend with its defaults (q_level 1,
//! q_trend 0.1, r 10, 5 points before it predicts).

use crate::scenario::PredictorKind;

/// A predictor of one series.
#[derive(Clone, Debug)]
pub struct Predictor {
    kind: PredictorKind,
    window: usize,
    values: Vec<f64>,
    seen_nonzero: bool,
    kalman: Kalman,
}

impl Predictor {
    /// A predictor of `kind` (`window`: the moving average's length).
    pub fn new(kind: PredictorKind, window: usize) -> Self {
        Predictor {
            kind,
            window: window.max(1),
            values: Vec::new(),
            seen_nonzero: false,
            kalman: Kalman::default(),
        }
    }

    /// Adds the last interval's value (`None`: missing, read as 0).
    pub fn add(&mut self, value: Option<f64>) {
        let v = value.filter(|v| v.is_finite()).unwrap_or(0.0);
        if v == 0.0 && !self.seen_nonzero {
            return; // the idle start
        }
        self.seen_nonzero |= v != 0.0;
        self.values.push(v);
        if self.values.len() > 4096 {
            self.values.drain(..2048);
        }
        self.kalman.update(v);
    }

    /// The next interval's value (`None` before any value).
    pub fn predict(&mut self) -> Option<f64> {
        let last = *self.values.last()?;
        Some(match self.kind {
            PredictorKind::Constant => last,
            PredictorKind::MovingAverage => {
                let k = self.values.len().min(self.window);
                self.values[self.values.len() - k..].iter().sum::<f64>() / k as f64
            }
            PredictorKind::Kalman => {
                if self.values.len() < KALMAN_MIN_POINTS {
                    last
                } else {
                    self.kalman.forecast().max(0.0)
                }
            }
        })
    }
}

/// Points before the Kalman filter predicts (Dynamo's `kalman_min_points`).
const KALMAN_MIN_POINTS: usize = 5;

/// A local linear trend filter: state (level, trend), `x' = F x + w`, observing the level.
#[derive(Clone, Debug)]
struct Kalman {
    x: [f64; 2],
    p: [[f64; 2]; 2],
    initialized: bool,
}

impl Default for Kalman {
    fn default() -> Self {
        Kalman {
            x: [0.0, 0.0],
            p: [[1000.0, 0.0], [0.0, 1000.0]],
            initialized: false,
        }
    }
}

/// Dynamo's defaults: process noise of the level and the trend, measurement noise.
const Q_LEVEL: f64 = 1.0;
const Q_TREND: f64 = 0.1;
const R: f64 = 10.0;

impl Kalman {
    /// One predict step: `x = F x`, `P = F P Fᵀ + Q` with `F = [[1, 1], [0, 1]]`.
    fn predict(&mut self) {
        let [l, t] = self.x;
        self.x = [l + t, t];
        let p = self.p;
        let a = p[0][0] + p[0][1] + p[1][0] + p[1][1];
        let b = p[0][1] + p[1][1];
        let c = p[1][0] + p[1][1];
        self.p = [[a + Q_LEVEL, b], [c, p[1][1] + Q_TREND]];
    }

    fn update(&mut self, z: f64) {
        if !self.initialized {
            self.x = [z, 0.0];
            self.initialized = true;
            return;
        }
        self.predict();
        // H = [1, 0]: innovation z - level, its variance P00 + R.
        let s = self.p[0][0] + R;
        let k = [self.p[0][0] / s, self.p[1][0] / s];
        let y = z - self.x[0];
        self.x = [self.x[0] + k[0] * y, self.x[1] + k[1] * y];
        let p = self.p;
        self.p = [
            [(1.0 - k[0]) * p[0][0], (1.0 - k[0]) * p[0][1]],
            [p[1][0] - k[1] * p[0][0], p[1][1] - k[1] * p[0][1]],
        ];
    }

    /// The one-step forecast of the level, without moving the filter.
    fn forecast(&self) -> f64 {
        self.x[0] + self.x[1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predictors_skip_the_idle_start_and_follow_the_series() {
        let mut c = Predictor::new(PredictorKind::Constant, 1);
        c.add(Some(0.0));
        c.add(None);
        assert_eq!(c.predict(), None, "leading zeros are skipped");
        c.add(Some(4.0));
        c.add(Some(0.0));
        assert_eq!(c.predict(), Some(0.0), "a zero after traffic counts");
        let mut m = Predictor::new(PredictorKind::MovingAverage, 3);
        for v in [3.0, 6.0, 9.0, 12.0] {
            m.add(Some(v));
        }
        assert_eq!(m.predict(), Some(9.0), "(6 + 9 + 12) / 3");
        // A steady ramp: the trend filter forecasts ahead of the last value.
        let mut k = Predictor::new(PredictorKind::Kalman, 1);
        for i in 0..40 {
            k.add(Some(10.0 * f64::from(i)));
        }
        let next = k.predict().unwrap();
        assert!((next - 400.0).abs() < 5.0, "{next}");
    }
}
