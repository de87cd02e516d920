//! The fit itself: the step coefficients and the request overhead that make the rows' simulated
//! means (linear in them, from the feature clock) closest to the measured, in relative terms.

use std::collections::BTreeMap;

use super::measured::MeasuredRow;
use super::nnls;
use super::{Prediction, TPOT_WEIGHT};
use crate::bench::Protocol;
use crate::deployment::features::{Features, FEATURES, GPU_FEATURES, RATE_FEATURES};
use crate::deployment::profile::{Profile, STEP_US};
use crate::deployment::Precision;

/// How [`fit()`] treats what it is not told by the rows.
#[derive(Clone, Copy, Debug, Default)]
pub struct FitOptions<'a> {
    /// Holds the rate coefficients at this profile's (see [`fit()`]).
    pub rates_from: Option<&'a Profile>,
    /// Fits a request overhead per benchmark protocol of the rows ([`Protocol::of_row`]): each
    /// protocol's clients reached the engine through their own serving stack.
    pub overhead_by_protocol: bool,
    /// Fits the GEMMs' coefficient per (GPU, weight precision) of the rows instead of per GPU
    /// ([`Profile::gemm_by_precision`]): a GPU's FP8 and FP4 GEMMs reach a different share of
    /// their peaks than its BF16 ones.
    pub gemm_by_precision: bool,
    /// Gives a GPU a GEMM coefficient at each weight precision this profile has one for on that
    /// GPU and the rows lack: the GPU's fitted one at the precision of most of its rows (that
    /// this profile also has) times this profile's ratio of the two. See [`borrow_ratios`].
    pub gemm_ratios_from: Option<&'a Profile>,
    /// Fits the per-step cost (`step_us`) once per benchmark protocol of the rows instead of
    /// once for all ([`Profile::protocol_step_us`]): a serving stack that handles each step's
    /// tokens on the way out adds to every step. With `rates_from`, a protocol the rows lack
    /// takes that profile's.
    pub step_by_protocol: bool,
    /// Step coefficients held at a value, by index in [`FEATURE_NAMES`] (on every GPU): for a
    /// coefficient the rows cannot pin, or one measured elsewhere. A rate held here gives way to
    /// `rates_from`'s (`calibrate` refuses the two together).
    ///
    /// [`FEATURE_NAMES`]: crate::deployment::features::FEATURE_NAMES
    pub held: &'a [(usize, f64)],
}

/// Fits the step coefficients and the request overhead to `rows` from their `predictions` under
/// the schedule those runs took, the per-request jitter held at `jitter_ms`.
///
/// The coefficients of [`GPU_FEATURES`] are fitted per GPU (a column per GPU and feature:
/// kernels reach different shares of different GPUs' datasheets), the rest and the request
/// overhead once for all. `step`'s are the GPUs' own weighted by their rows: what a GPU the rows
/// do not have is predicted with.
///
/// With `rates_from`, the rate coefficients (the first [`RATE_FEATURES`]: GEMMs, weight reads,
/// attention, KV reads, all-reduces) are that profile's, on each GPU as it would run there
/// ([`Profile::step_on`]), and only the fixed costs and the request overhead are fitted; the
/// result keeps that profile's rates for every GPU it names, so a GPU the rows do not have is
/// predicted at rates measured elsewhere rather than at these rows'.
///
/// With `overhead_by_protocol`, the request overhead has a column per protocol the rows were
/// measured under, and the profile's `request_overhead_ms` is their row-weighted mean: what a
/// protocol the rows do not have is predicted with.
pub fn fit(
    rows: &[MeasuredRow],
    predictions: &[Prediction],
    jitter_ms: f64,
    options: FitOptions<'_>,
) -> Profile {
    let rates_from = options.rates_from;
    // Each row's protocol, found once. A request-overhead column per protocol of the rows (one,
    // unnamed, for all without `overhead_by_protocol`); with `step_by_protocol`, a per-step cost
    // column per protocol too, in place of the shared one.
    let names: Vec<&str> = rows
        .iter()
        .map(|r| Protocol::of_row(&r.version, r.isl, r.osl).name())
        .collect();
    let (protocols, row_protocol) =
        distinct(
            names
                .iter()
                .map(|&n| if options.overhead_by_protocol { n } else { "" }),
        );
    let (step_protocols, row_step_protocol): (Vec<&str>, Vec<Option<usize>>) =
        if options.step_by_protocol {
            let (p, at) = distinct(names.iter().copied());
            (p, at.into_iter().map(Some).collect())
        } else {
            (Vec::new(), vec![None; rows.len()])
        };
    let (gpus, row_gpu) = distinct(rows.iter().map(|r| r.gpu.as_str()));
    // The GEMMs' classes: with `gemm_by_precision` the (GPU, weight precision) pairs of the
    // rows, else one per GPU (its precision unused). A GEMM column each; the other rates a
    // column per GPU. Rates held from a profile are held at each precision's own.
    let by_precision = options.gemm_by_precision || rates_from.is_some();
    let (classes, row_class) = distinct(rows.iter().zip(&row_gpu).map(|(r, &gpu)| {
        let precision = if by_precision {
            r.precision
        } else {
            Precision::default()
        };
        (gpu, precision)
    }));
    let shared: Vec<usize> = (0..FEATURES)
        .filter(|k| !GPU_FEATURES.contains(k))
        .collect();
    let per_gpu = classes.len() + gpus.len() * (GPU_FEATURES.len() - 1);
    let overhead = per_gpu + shared.len();
    // Columns: each class's GEMMs, each GPU's other rates, then the shared coefficients, then
    // the request overhead.
    let column =
        |feature: usize, class: usize| match GPU_FEATURES.iter().position(|&k| k == feature) {
            Some(0) => class,
            Some(i) => classes.len() + classes[class].0 * (GPU_FEATURES.len() - 1) + i - 1,
            None => per_gpu + shared.iter().position(|&k| k == feature).expect("shared"),
        };
    // The overhead columns: one per protocol (one in all without `overhead_by_protocol`); then,
    // with `step_by_protocol`, a per-step cost column per protocol, which takes the step count
    // from the shared `step_us` column.
    let step_base = overhead + protocols.len();
    let columns = |features: &Features,
                   class: usize,
                   by: f64,
                   protocol: Option<usize>,
                   step_protocol: Option<usize>| {
        let mut c = vec![0.0; step_base + step_protocols.len()];
        for (k, f) in features.iter().enumerate() {
            c[column(k, class)] = f * by;
        }
        if let Some(p) = step_protocol {
            c[step_base + p] = c[column(STEP_US, class)];
            c[column(STEP_US, class)] = 0.0;
        }
        if let Some(p) = protocol {
            c[overhead + p] = by;
        }
        c
    };
    let mut a = Vec::with_capacity(2 * rows.len());
    let mut b = Vec::with_capacity(2 * rows.len());
    for (i, (row, p)) in rows.iter().zip(predictions).enumerate() {
        let (class, protocol, step_protocol) =
            (row_class[i], row_protocol[i], row_step_protocol[i]);
        let (ttft, tpot) = p.mean_features();
        // TTFT = overhead + features · coefficients, relative to the measured.
        a.push(columns(
            &ttft,
            class,
            1.0 / row.ttft_ms,
            Some(protocol),
            step_protocol,
        ));
        b.push(1.0);
        let w = TPOT_WEIGHT / row.tpot_ms;
        a.push(columns(&tpot, class, w, None, step_protocol));
        b.push(row.tpot_ms * w);
    }
    // Rates cannot beat the datasheet: each rate coefficient is 1 plus a non-negative part
    // (or, held, the given one: its column leaves the fit).
    let held: Option<Vec<Features>> = rates_from.map(|p| {
        classes
            .iter()
            .map(
                |&(g, precision)| match crate::deployment::gpu::find(gpus[g]) {
                    Some(spec) => p.step_on(spec, precision),
                    None => p.step,
                },
            )
            .collect()
    });
    let rate_columns: Vec<(usize, f64)> = (0..classes.len())
        .flat_map(|c| (0..RATE_FEATURES).map(move |k| (k, c)))
        .map(|(k, c)| {
            let value = held.as_ref().map_or(1.0, |h| h[c][k]);
            (column(k, c), value)
        })
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    for (row, y) in a.iter_mut().zip(b.iter_mut()) {
        *y -= rate_columns.iter().map(|&(c, v)| row[c] * v).sum::<f64>();
        if held.is_some() {
            rate_columns.iter().for_each(|&(c, _)| row[c] = 0.0);
        }
    }
    // Held coefficients leave the fit: their part of each row moves to the measured side. A
    // rate's column stands for its part above 1, which the loop above already moved.
    let held_columns: Vec<(usize, f64)> = options
        .held
        .iter()
        .flat_map(|&(k, v)| {
            let above = if k < RATE_FEATURES { v - 1.0 } else { v };
            (0..classes.len()).map(move |c| (column(k, c), above))
        })
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    for (row, y) in a.iter_mut().zip(b.iter_mut()) {
        for &(c, above) in &held_columns {
            *y -= row[c] * above;
            row[c] = 0.0;
        }
    }
    let mut x = least_absolute(&a, &b);
    for &(c, above) in &held_columns {
        x[c] = above;
    }
    for &(c, v) in &rate_columns {
        x[c] = if held.is_some() { v } else { x[c] + 1.0 };
    }
    let mut gpu_rates = BTreeMap::new();
    let mut gemm_by_precision = BTreeMap::new();
    let mut step = [0.0; FEATURES];
    for &k in &shared {
        step[k] = x[column(k, 0)];
    }
    for (g, name) in gpus.iter().enumerate() {
        let own_classes: Vec<usize> = (0..classes.len()).filter(|&c| classes[c].0 == g).collect();
        let rows_of = |c: usize| row_class.iter().filter(|&&r| r == c).count() as f64;
        let gpu_rows: f64 = own_classes.iter().map(|&c| rows_of(c)).sum();
        let mut own = GPU_FEATURES.map(|k| x[column(k, own_classes[0])]);
        // The GEMMs at a precision the GPU has no rows of: its classes' row-weighted mean.
        own[0] = own_classes.iter().map(|&c| rows_of(c) * x[c]).sum::<f64>() / gpu_rows;
        if own_classes.len() > 1 {
            let by: BTreeMap<String, f64> = own_classes
                .iter()
                .map(|&c| (classes[c].1.name().to_string(), x[c]))
                .collect();
            gemm_by_precision.insert(name.to_string(), by);
        }
        let share = gpu_rows / rows.len() as f64;
        for (&k, c) in GPU_FEATURES.iter().zip(own) {
            step[k] += share * c;
        }
        gpu_rates.insert(name.to_string(), own);
    }
    if let Some(from) = options.gemm_ratios_from {
        for name in &gpus {
            borrow_missing_precisions(name, rows, &gpu_rates, &mut gemm_by_precision, from);
        }
    }
    if let Some(p) = rates_from {
        // Every GPU the held profile names keeps its rates; the step's rates are its own.
        step[..RATE_FEATURES].copy_from_slice(&p.step[..RATE_FEATURES]);
        for (name, own) in &p.gpu_rates {
            gpu_rates.insert(name.clone(), *own);
            gemm_by_precision.remove(name);
        }
        for (name, by) in &p.gemm_by_precision {
            gemm_by_precision.insert(name.clone(), by.clone());
        }
    }
    // What a protocol the rows do not have is predicted with: the row-weighted mean, or with
    // `rates_from`, that profile's (its own for the protocol if it has one).
    let mut request_overhead_ms =
        row_protocol.iter().map(|&i| x[overhead + i]).sum::<f64>() / rows.len() as f64;
    let mut protocol_overhead_ms: BTreeMap<String, f64> = if options.overhead_by_protocol {
        protocols
            .iter()
            .enumerate()
            .map(|(i, p)| (p.to_string(), x[overhead + i]))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut protocol_step_us: BTreeMap<String, f64> = step_protocols
        .iter()
        .enumerate()
        .map(|(i, p)| (p.to_string(), x[step_base + i]))
        .collect();
    if options.step_by_protocol {
        step[STEP_US] = row_step_protocol
            .iter()
            .map(|&i| x[step_base + i.expect("every row's protocol")])
            .sum::<f64>()
            / rows.len() as f64;
    }
    if let Some(p) = rates_from {
        if options.overhead_by_protocol {
            request_overhead_ms = p.request_overhead_ms;
            protocol_overhead_ms = overlay(&p.protocol_overhead_ms, protocol_overhead_ms);
        }
        if options.step_by_protocol {
            step[STEP_US] = p.step[STEP_US];
            protocol_step_us = overlay(&p.protocol_step_us, protocol_step_us);
        }
    }
    Profile {
        step,
        gpu_rates,
        gemm_by_precision,
        protocol_step_us,
        request_overhead_ms,
        protocol_overhead_ms,
        request_jitter_ms: jitter_ms,
    }
}

/// The distinct `keys`, in order, and each key's index among them.
fn distinct<K: Ord + Copy>(keys: impl Iterator<Item = K>) -> (Vec<K>, Vec<usize>) {
    let keys: Vec<K> = keys.collect();
    let mut values = keys.clone();
    values.sort_unstable();
    values.dedup();
    let at = keys
        .iter()
        .map(|k| values.binary_search(k).expect("listed"))
        .collect();
    (values, at)
}

/// `under`'s entries with `over`'s in their place where both have one.
fn overlay(under: &BTreeMap<String, f64>, over: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let mut all = under.clone();
    all.extend(over);
    all
}

/// Gives GPU `name` a GEMM coefficient at each precision `from` has one for on it and `rows`
/// lack ([`borrow_ratios`]), in `gemm_by_precision` (written where the rows split the GPU's
/// GEMMs by precision or a precision was borrowed; else its `gpu_rates` one stands).
fn borrow_missing_precisions(
    name: &str,
    rows: &[MeasuredRow],
    gpu_rates: &BTreeMap<String, [f64; GPU_FEATURES.len()]>,
    gemm_by_precision: &mut BTreeMap<String, BTreeMap<String, f64>>,
    from: &Profile,
) {
    let mut counts: BTreeMap<Precision, usize> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.gpu == name) {
        *counts.entry(r.precision).or_default() += 1;
    }
    let split = gemm_by_precision.contains_key(name);
    let own = gemm_by_precision.remove(name).unwrap_or_else(|| {
        let gemm = gpu_rates[name][0];
        counts
            .keys()
            .map(|p| (p.name().to_string(), gemm))
            .collect()
    });
    let before = own.len();
    let by = borrow_ratios(own, &counts, from.gemm_by_precision.get(name));
    if split || by.len() > before {
        gemm_by_precision.insert(name.to_string(), by);
    }
}

/// A GPU's GEMM coefficients by precision (`own`, from its rows, `counts` of which are at each
/// precision) with those at the precisions `from` (another profile's coefficients on the same
/// GPU) has and the rows lack: the own coefficient at the precision of most rows that `from`
/// also has, times `from`'s ratio of the two. `own` unchanged if no precision is shared.
pub fn borrow_ratios(
    mut own: BTreeMap<String, f64>,
    counts: &BTreeMap<Precision, usize>,
    from: Option<&BTreeMap<String, f64>>,
) -> BTreeMap<String, f64> {
    let Some(from) = from else { return own };
    let base = counts
        .iter()
        .filter(|(p, _)| from.contains_key(p.name()) && own.contains_key(p.name()))
        .max_by_key(|&(p, &n)| (n, std::cmp::Reverse(*p)))
        .map(|(p, _)| p.name());
    let Some(base) = base else { return own };
    let at = own[base] / from[base];
    for (p, c) in from {
        own.entry(p.clone()).or_insert(c * at);
    }
    own
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

    /// Whether `a` is `b` but for rounding.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6 * b.max(1.0)
    }

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

    /// 24 rows on one GPU, the `i`th's means exactly `coefficients(i)` · its features: the first 6
    /// under AIConfigurator's protocol with no request overhead, the other 18 under aiperf's
    /// (lengths of whole hundreds, `Protocol::of_row`) with 30 ms.
    fn two_protocols(
        coefficients: impl Fn(usize) -> Features,
    ) -> (Vec<MeasuredRow>, Vec<Prediction>) {
        (0..24)
            .map(|i| {
                let overhead = if i < 6 { 0.0 } else { 30.0 };
                let (mut r, p) = row(i, "h100_sxm", &coefficients(i), overhead);
                if i >= 6 {
                    (r.isl, r.osl) = (1000, 100);
                }
                (r, p)
            })
            .unzip()
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
        let p = fit(&rows, &predictions, 0.0, FitOptions::default());
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

    /// Rows of one GPU at two weight precisions whose GEMMs reach different shares of their
    /// peaks (coefficient 1.3 at BF16, 2.1 at FP8), the rest the same: asked to, the fit finds
    /// each precision's GEMMs, writes them for that GPU, and gives the GPU's `gemm_compute`
    /// their row-weighted mean (8 BF16 rows and 16 FP8: 5.5 / 3 = 1.8333); not asked, one GEMM
    /// coefficient for the GPU at every precision and no precision named.
    #[test]
    fn each_weight_precision_gets_its_own_gemms_when_asked() {
        let bf16 = [1.3, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 100.0, 10.0];
        let fp8 = [2.1, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 100.0, 10.0];
        let (rows, predictions): (Vec<_>, Vec<_>) = (0..24)
            .map(|i| {
                let (c, precision) = if i < 8 {
                    (&bf16, Precision::Bf16)
                } else {
                    (&fp8, Precision::Fp8)
                };
                let (mut r, p) = row(i, "h100_sxm", c, 20.0);
                r.precision = precision;
                (r, p)
            })
            .unzip();
        let asked = FitOptions {
            gemm_by_precision: true,
            ..FitOptions::default()
        };
        let p = fit(&rows, &predictions, 0.0, asked);
        let by = &p.gemm_by_precision["h100_sxm"];
        assert_eq!(by.keys().collect::<Vec<_>>(), ["bf16", "fp8"]);
        assert!(close(by["bf16"], 1.3) && close(by["fp8"], 2.1), "{by:?}");
        assert!(close(p.gpu_rates["h100_sxm"][0], 5.5 / 3.0));
        for (k, want) in bf16.iter().enumerate().skip(1) {
            assert!(close(p.step[k], *want), "feature {k}: {}", p.step[k]);
        }
        let gpu = crate::deployment::gpu::find("h100_sxm").unwrap();
        assert!(close(p.step_on(gpu, Precision::Fp8)[0], 2.1));
        assert!(close(p.step_on(gpu, Precision::Fp4)[0], 5.5 / 3.0));
        let one = fit(&rows, &predictions, 0.0, FitOptions::default());
        assert!(one.gemm_by_precision.is_empty());
        assert_eq!(
            one.step_on(gpu, Precision::Bf16)[0],
            one.step_on(gpu, Precision::Fp8)[0]
        );
    }

    /// Another profile's ratios between precisions on a GPU give the precisions the rows lack:
    /// the own coefficient at the precision of most rows (FP8, 10 rows against 3 BF16) times
    /// the other's ratio (FP4: 2.5 x 3.0 / 2.0 = 3.75); precisions the rows have keep their
    /// own; nothing to go by (no such GPU, no shared precision), nothing borrowed.
    #[test]
    fn precisions_the_rows_lack_borrow_another_profiles_ratios() {
        let map = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|&(p, c)| (p.to_string(), c)).collect()
        };
        let from = map(&[("bf16", 1.5), ("fp8", 2.0), ("fp4", 3.0)]);
        let counts = BTreeMap::from([(Precision::Bf16, 3), (Precision::Fp8, 10)]);
        let own = map(&[("bf16", 1.2), ("fp8", 2.5)]);
        let by = borrow_ratios(own.clone(), &counts, Some(&from));
        assert_eq!(by, map(&[("bf16", 1.2), ("fp8", 2.5), ("fp4", 3.75)]));
        let fp8_only = BTreeMap::from([(Precision::Fp8, 10)]);
        let by = borrow_ratios(map(&[("fp8", 2.5)]), &fp8_only, Some(&from));
        assert_eq!(by, map(&[("bf16", 1.875), ("fp8", 2.5), ("fp4", 3.75)]));
        assert_eq!(borrow_ratios(own.clone(), &counts, None), own);
        let fp4_only = map(&[("fp4", 3.0)]);
        assert_eq!(borrow_ratios(own.clone(), &counts, Some(&fp4_only)), own);
    }

    /// Rows measured under two protocols whose stacks add different per-step costs (0.5 ms
    /// under AIConfigurator's, 20 ms under aiperf's), the rest the same: fitted per protocol,
    /// each gets its own and `step_us` is their row-weighted mean (6 and 18 rows: 15.125 ms);
    /// on top of another profile's rates, a protocol the rows lack takes that profile's per-step
    /// cost and request overhead, and `step_us` and `request_overhead_ms` are its.
    #[test]
    fn each_protocol_gets_its_own_step_cost() {
        let c = [1.25, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 0.0, 10.0];
        let (rows, predictions) = two_protocols(|i| {
            let mut c = c;
            c[STEP_US] = if i < 6 { 500.0 } else { 20_000.0 };
            c
        });
        let by = FitOptions {
            overhead_by_protocol: true,
            step_by_protocol: true,
            ..FitOptions::default()
        };
        let p = fit(&rows, &predictions, 0.0, by);
        let own = &p.protocol_step_us;
        assert_eq!(own.keys().collect::<Vec<_>>(), ["aiconfigurator", "aiperf"]);
        assert!(
            close(own["aiconfigurator"], 500.0) && close(own["aiperf"], 20_000.0),
            "{own:?}"
        );
        assert!(close(p.step[STEP_US], 15_125.0), "{}", p.step[STEP_US]);
        assert_eq!(
            p.clone().for_protocol(Some("aiperf")).step[STEP_US],
            own["aiperf"]
        );
        assert_eq!(p.clone().for_protocol(Some("inferencemax")).step, p.step);
        for k in (0..FEATURES).filter(|&k| k != STEP_US) {
            assert!(close(p.step[k], c[k]), "feature {k}: {}", p.step[k]);
        }
        // Only aiperf's rows, on top of a profile that has every protocol's.
        let mut held = Profile::ones();
        held.step = c;
        held.step[STEP_US] = 1_800.0;
        held.request_overhead_ms = 12.0;
        held.protocol_overhead_ms =
            BTreeMap::from([("aiconfigurator".into(), 0.0), ("aiperf".into(), 19.0)]);
        let (rows, predictions): (Vec<_>, Vec<_>) = (rows[6..].to_vec(), predictions[6..].to_vec());
        let on_top = FitOptions {
            rates_from: Some(&held),
            ..by
        };
        let p = fit(&rows, &predictions, 0.0, on_top);
        assert_eq!(p.protocol_step_us.keys().collect::<Vec<_>>(), ["aiperf"]);
        assert!(close(p.protocol_step_us["aiperf"], 20_000.0));
        assert!(close(p.protocol_overhead_ms["aiperf"], 30.0));
        assert_eq!(p.protocol_overhead_ms["aiconfigurator"], 0.0);
        assert_eq!((p.step[STEP_US], p.request_overhead_ms), (1_800.0, 12.0));
    }

    /// Rows of one GPU whose rates are another profile's and whose fixed costs are their own:
    /// held at that profile's rates (`rates_from`), the fit finds the fixed costs and the
    /// request overhead exactly, keeps the held rates on the rows' GPU and carries every GPU
    /// the held profile names (the B200, which no row has, and the step's own rates, which a
    /// free fit would take from the H200 rows: both fail without the hold).
    #[test]
    fn rates_held_from_another_profile_leave_only_the_fixed_costs_to_fit() {
        let mut held = Profile::ones();
        held.step = [1.4, 1.1, 1.8, 1.3, 1.9, 0.0, 0.0, 0.0, 0.0];
        held.gpu_rates
            .insert("h200_sxm".into(), [1.2, 1.05, 1.25, 1.5]);
        held.gpu_rates
            .insert("b200_sxm".into(), [2.5, 1.0, 1.0, 3.0]);
        // On the H200: the held rates (GEMM 1.2, weights 1.05, attention 1.8, KV 1.25,
        // all-reduce 1.5), and fixed costs 4, 30, 16,000 and 9 us.
        let truth = [1.2, 1.05, 1.8, 1.25, 1.5, 4.0, 30.0, 16_000.0, 9.0];
        let (rows, predictions): (Vec<_>, Vec<_>) =
            (0..16).map(|i| row(i, "h200_sxm", &truth, 200.0)).unzip();
        let p = fit(
            &rows,
            &predictions,
            0.0,
            FitOptions {
                rates_from: Some(&held),
                ..FitOptions::default()
            },
        );
        for (k, want) in truth.iter().enumerate().skip(RATE_FEATURES) {
            assert!(close(p.step[k], *want), "fixed cost {k}: {}", p.step[k]);
        }
        assert!(
            close(p.request_overhead_ms, 200.0),
            "{}",
            p.request_overhead_ms
        );
        assert_eq!(p.gpu_rates["h200_sxm"], [1.2, 1.05, 1.25, 1.5]);
        assert_eq!(
            p.gpu_rates["b200_sxm"],
            [2.5, 1.0, 1.0, 3.0],
            "carried over"
        );
        assert_eq!(p.step[..RATE_FEATURES], held.step[..RATE_FEATURES]);
    }

    /// Rows of one GPU measured under two protocols, whose clients reached the engine with 0 and
    /// 30 ms of overhead: fitted per protocol, each gets its own and the profile's
    /// `request_overhead_ms` is their row-weighted mean (6 and 18 rows: 22.5 ms); fitted once
    /// for all, no protocol is named and the one overhead sits between them.
    #[test]
    fn each_protocol_gets_its_own_request_overhead() {
        let c = [1.25, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 100.0, 10.0];
        let (rows, predictions) = two_protocols(|_| c);
        let by = FitOptions {
            overhead_by_protocol: true,
            ..FitOptions::default()
        };
        let p = fit(&rows, &predictions, 0.0, by);
        let own = &p.protocol_overhead_ms;
        assert_eq!(own.keys().collect::<Vec<_>>(), ["aiconfigurator", "aiperf"]);
        assert!(close(own["aiconfigurator"], 0.0), "{own:?}");
        assert!(close(own["aiperf"], 30.0), "{own:?}");
        assert!(
            close(p.request_overhead_ms, 22.5),
            "{}",
            p.request_overhead_ms
        );
        assert_eq!(p.request_overhead_for(Some("aiperf")), own["aiperf"]);
        assert_eq!(
            p.request_overhead_for(Some("inferencemax")),
            p.request_overhead_ms
        );
        let shared = fit(&rows, &predictions, 0.0, FitOptions::default());
        assert!(shared.protocol_overhead_ms.is_empty());
        assert!(
            shared.request_overhead_ms > 0.5 && shared.request_overhead_ms < 29.5,
            "{}",
            shared.request_overhead_ms
        );
    }

    /// A coefficient held at its true value leaves the others to fit exactly; held elsewhere, it
    /// stays where it is held (a rate at 2.5, a fixed cost at 0, a rate fitted per GPU at 1.7 on
    /// the GPU's own) whatever the rows say.
    #[test]
    fn a_held_coefficient_stays_where_it_is_held() {
        let c = [1.25, 1.1, 2.0, 1.5, 1.2, 5.0, 50.0, 100.0, 10.0];
        let (rows, predictions): (Vec<_>, Vec<_>) =
            (0..24).map(|i| row(i, "h100_sxm", &c, 20.0)).unzip();
        let fit_holding = |held: &[(usize, f64)]| {
            fit(
                &rows,
                &predictions,
                0.0,
                FitOptions {
                    held,
                    ..FitOptions::default()
                },
            )
        };
        let p = fit_holding(&[(2, 2.0)]);
        for (k, want) in c.iter().enumerate() {
            assert!(close(p.step[k], *want), "feature {k}: {}", p.step[k]);
        }
        assert!(close(p.request_overhead_ms, 20.0));
        let p = fit_holding(&[(2, 2.5), (7, 0.0)]);
        assert_eq!((p.step[2], p.step[7]), (2.5, 0.0));
        // A rate fitted per GPU is held on every GPU's own coefficients too.
        let p = fit_holding(&[(3, 1.7)]);
        let at = GPU_FEATURES.iter().position(|&k| k == 3).unwrap();
        assert_eq!((p.gpu_rates["h100_sxm"][at], p.step[3]), (1.7, 1.7));
    }
}
