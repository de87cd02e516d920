//! The fit itself: the step coefficients and the request overhead that make the rows' simulated
//! means (linear in them, from the feature clock) closest to the measured, in relative terms.

use std::collections::BTreeMap;

use super::measured::MeasuredRow;
use super::nnls;
use super::{Prediction, TPOT_WEIGHT};
use crate::deployment::features::{Features, FEATURES, GPU_FEATURES, RATE_FEATURES};
use crate::deployment::profile::Profile;

/// Fits the step coefficients and the request overhead to `rows` from their `predictions` under
/// the schedule those runs took, the per-request jitter held at `jitter_ms`.
///
/// The coefficients of [`GPU_FEATURES`] are fitted per GPU (a column per GPU and feature:
/// kernels reach different shares of different GPUs' datasheets), the rest and the request
/// overhead once for all. `step`'s are the GPUs' own weighted by their rows: what a GPU the rows
/// do not have is predicted with.
pub fn fit(rows: &[MeasuredRow], predictions: &[Prediction], jitter_ms: f64) -> Profile {
    let gpus: Vec<&str> = rows
        .iter()
        .map(|r| r.gpu.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let shared: Vec<usize> = (0..FEATURES)
        .filter(|k| !GPU_FEATURES.contains(k))
        .collect();
    let per_gpu = gpus.len() * GPU_FEATURES.len();
    let overhead = per_gpu + shared.len();
    // Columns: each GPU's own coefficients, then the shared ones, then the request overhead.
    let column = |feature: usize, gpu: usize| match GPU_FEATURES.iter().position(|&k| k == feature)
    {
        Some(i) => gpu * GPU_FEATURES.len() + i,
        None => per_gpu + shared.iter().position(|&k| k == feature).expect("shared"),
    };
    let columns = |features: &Features, gpu: usize, by: f64, with_overhead: bool| {
        let mut c = vec![0.0; overhead + 1];
        for (k, f) in features.iter().enumerate() {
            c[column(k, gpu)] = f * by;
        }
        c[overhead] = if with_overhead { by } else { 0.0 };
        c
    };
    let mut a = Vec::with_capacity(2 * rows.len());
    let mut b = Vec::with_capacity(2 * rows.len());
    for (row, p) in rows.iter().zip(predictions) {
        let gpu = gpus.binary_search(&row.gpu.as_str()).expect("listed");
        let (ttft, tpot) = p.mean_features();
        // TTFT = overhead + features · coefficients, relative to the measured.
        a.push(columns(&ttft, gpu, 1.0 / row.ttft_ms, true));
        b.push(1.0);
        let w = TPOT_WEIGHT / row.tpot_ms;
        a.push(columns(&tpot, gpu, w, false));
        b.push(row.tpot_ms * w);
    }
    // Rates cannot beat the datasheet: each rate coefficient is 1 plus a non-negative part.
    let rate_columns: Vec<usize> = (0..gpus.len())
        .flat_map(|g| (0..RATE_FEATURES).map(move |k| (k, g)))
        .map(|(k, g)| column(k, g))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for (row, y) in a.iter().zip(b.iter_mut()) {
        *y -= rate_columns.iter().map(|&c| row[c]).sum::<f64>();
    }
    let mut x = least_absolute(&a, &b);
    rate_columns.iter().for_each(|&c| x[c] += 1.0);
    let mut gpu_rates = BTreeMap::new();
    let mut step = [0.0; FEATURES];
    for &k in &shared {
        step[k] = x[column(k, 0)];
    }
    for (g, name) in gpus.iter().enumerate() {
        let own = GPU_FEATURES.map(|k| x[column(k, g)]);
        let share = rows.iter().filter(|row| row.gpu == *name).count() as f64 / rows.len() as f64;
        for (&k, c) in GPU_FEATURES.iter().zip(own) {
            step[k] += share * c;
        }
        gpu_rates.insert(name.to_string(), own);
    }
    Profile {
        step,
        gpu_rates,
        request_overhead_ms: x[overhead],
        request_jitter_ms: jitter_ms,
    }
}

/// Rounds of iteratively reweighted least squares in [`least_absolute`].
const IRLS_ROUNDS: usize = 30;

/// The `x >= 0` minimising Σ |A x − b| (the rows are relative errors, so this is the mean absolute
/// percentage error the targets count): iteratively reweighted non-negative least squares, each
/// row weighted by 1 / its last residual (floored at 0.5 %).
fn least_absolute(a: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut x = nnls::nnls(a, b);
    for _ in 0..IRLS_ROUNDS {
        let weights: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(row, &y)| {
                let r = (row.iter().zip(&x).map(|(p, q)| p * q).sum::<f64>() - y).abs();
                1.0 / r.max(0.005).sqrt()
            })
            .collect();
        let wa: Vec<Vec<f64>> = a
            .iter()
            .zip(&weights)
            .map(|(row, w)| row.iter().map(|v| v * w).collect())
            .collect();
        let wb: Vec<f64> = b.iter().zip(&weights).map(|(y, w)| y * w).collect();
        x = nnls::nnls(&wa, &wb);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::worker::probe::FeatureTotals;
    use crate::deployment::{KvDtype, Precision};

    /// A row on `gpu` whose measured means are exactly `coefficients` · its features.
    fn row(
        i: usize,
        gpu: &str,
        coefficients: &Features,
        overhead: f64,
    ) -> (MeasuredRow, Prediction) {
        // Features that vary independently from row to row (a small linear congruence).
        let mut seed = 7 + 13 * i as u64;
        let mut next = |scale: f64| {
            seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
            scale * (0.2 + seed as f64 / 2_147_483_648.0)
        };
        let ttft: Features =
            std::array::from_fn(|k| next(if k < RATE_FEATURES { 40.0 } else { 1.0 }));
        let tpot: Features =
            std::array::from_fn(|k| next(if k < RATE_FEATURES { 8.0 } else { 0.2 }));
        let dot = |f: &Features| f.iter().zip(coefficients).map(|(a, b)| a * b).sum::<f64>();
        let measured = MeasuredRow {
            line: i + 2,
            id: format!("r{i}"),
            backend: "vllm".into(),
            version: "0.12.0".into(),
            model: "Qwen/Qwen3-32B".into(),
            gpu: gpu.into(),
            precision: Precision::Bf16,
            kv_dtype: KvDtype::Auto,
            isl: 1024,
            osl: 128,
            concurrency: 8,
            tp: 2,
            ttft_ms: overhead + dot(&ttft),
            tpot_ms: dot(&tpot),
        };
        // The clock sums over requests: 3 requests each.
        let prediction = Prediction {
            ttft_ms: 0.0,
            tpot_ms: 0.0,
            preemptions: 0,
            features: FeatureTotals {
                ttft_requests: 3,
                ttft: ttft.map(|x| 3.0 * x),
                tpot_requests: 3,
                tpot: tpot.map(|x| 3.0 * x),
            },
        };
        (measured, prediction)
    }

    /// Rows of two GPUs whose GEMMs, weight and KV reads and all-reduces reach different shares
    /// of their datasheets, the rest shared: the fit finds each GPU's own and the shared ones,
    /// and `step`'s are the GPUs' own weighted by their rows (8 of one, 16 of the other).
    #[test]
    fn each_gpu_gets_its_own_rates_and_the_rest_is_shared() {
        let h100 = [1.25, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 100.0, 10.0];
        let b200 = [2.5, 1.05, 2.0, 1.2, 2.0, 5.0, 50.0, 100.0, 10.0];
        let (rows, predictions): (Vec<_>, Vec<_>) = (0..24)
            .map(|i| {
                let (gpu, c) = if i < 8 {
                    ("h100_sxm", &h100)
                } else {
                    ("b200_sxm", &b200)
                };
                row(i, gpu, c, 20.0)
            })
            .unzip();
        let p = fit(&rows, &predictions, 0.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b.max(1.0);
        for (gpu, want) in [("h100_sxm", &h100), ("b200_sxm", &b200)] {
            let own = p.gpu_rates[gpu];
            for (&k, c) in GPU_FEATURES.iter().zip(own) {
                assert!(close(c, want[k]), "{gpu} feature {k}: {c} vs {}", want[k]);
            }
        }
        for k in (0..FEATURES).filter(|k| !GPU_FEATURES.contains(k)) {
            assert!(
                close(p.step[k], h100[k]),
                "shared feature {k}: {}",
                p.step[k]
            );
        }
        // The gemm coefficient a GPU without rows is predicted with: (8 x 1.25 + 16 x 2.5) / 24.
        assert!(close(p.step[0], 50.0 / 24.0), "{}", p.step[0]);
        assert!(
            close(p.request_overhead_ms, 20.0),
            "{}",
            p.request_overhead_ms
        );
    }
}
