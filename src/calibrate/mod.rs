//! `dynsim calibrate`: fits a roofline profile's coefficients to measured benchmark rows, and
//! says how far its predictions are from them.
//!
//! Each measured row is a closed-loop benchmark of one deployment ([`measured`]); dynsim runs the
//! same benchmark ([`crate::bench`]) with a feature clock on its worker
//! ([`crate::cluster::worker::probe`]), which gives the row's mean TTFT and mean TPOT as linear
//! functions of the step coefficients and the per-request overhead. The fit minimises the
//! squared relative errors of both over every row, coefficients kept >= 0 ([`nnls`]); a
//! schedule can depend on the step times (a longer prefill delays the next client's request
//! within the steps), so the rows are simulated again with the fit and fitted again, a fixed
//! number of rounds ([`ROUNDS`]). The errors reported are those of full simulations with the
//! final profile, never of the linear model.
//!
//! The clients' reply jitter (clients and servers not answering in lockstep, which keeps a
//! benchmark's clients from moving in one wave) is not linear in anything: it is held at the
//! caller's value.

pub mod fit;
pub mod measured;
pub mod nnls;

use std::collections::BTreeMap;

use crate::bench::{self, BenchSpec, Protocol};
use crate::cluster::worker::probe::FeatureTotals;
use crate::deployment::features::{dot, Features, FEATURES};
use crate::deployment::model;
use crate::deployment::profile::{
    FitError, GpuCoefficients, Profile, ProfileFile, RequestCoefficients, StepCoefficients,
};
use crate::error::{Error, Result};
use crate::scenario::{EngineKind, Override};
pub use fit::{fit, FitOptions};
use measured::MeasuredRow;

/// Rounds of simulate-then-fit.
pub const ROUNDS: usize = 3;
/// The weight of a row's TPOT error against its TTFT error in the fit.
pub const TPOT_WEIGHT: f64 = 1.0;

/// A deployment group: (model, GPU, precision), as the rows name it after aliases are resolved.
pub type Group = (String, String, String);

/// A row's group, its model resolved to its bundled architecture's name.
pub fn group_of(row: &MeasuredRow) -> Group {
    let model = model::find(&row.model).map_or_else(|| row.model.clone(), |m| m.name.clone());
    (model, row.gpu.clone(), row.precision.name().to_string())
}

/// A group in one line.
pub fn group_name(g: &Group) -> String {
    format!("{} {} {}", g.0, g.1, g.2)
}

/// How every row's benchmark is set up beyond what the row itself says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// Scenario overrides for every row, such as the engine's settings as the measured servers
    /// ran (`calibrate --set`).
    pub set: Vec<Override>,
    /// The distinct prompts the clients of rows under AIConfigurator's protocol draw from
    /// (`calibrate --prompt-pool`, as `bench --prompt-pool`); `None`: every prompt its own.
    /// Rows under InferenceMAX's protocol keep their own prompts.
    pub prompt_pool: Option<usize>,
    /// The measurements file the rows were read from: an error of a row's benchmark then names
    /// the file, the row's line and the column at fault ([`row_error`]).
    pub file: Option<std::path::PathBuf>,
}

/// The bench flags a row's benchmark takes from the row's columns ([`spec_of`]), with the
/// columns.
const FLAG_COLUMNS: [(&str, &str); 9] = [
    ("--model", "model_path"),
    ("--model-file", "model_path"),
    ("--gpu", "system"),
    ("--tp", "tp_size"),
    ("--precision", "precision"),
    ("--kv-dtype", "kv_cache_dtype"),
    ("--isl", "isl"),
    ("--osl", "osl"),
    ("--concurrency", "batch_size"),
];

/// An error of `row`'s benchmark as the row's: one that `bench` would lay on a flag set from a
/// column (`--model nosuch: is not a known model`) is laid on that column of the row's line in
/// `file` instead (`m.csv:2: model_path: nosuch: is not a known model`), the user having given
/// no such flag. Other errors, and every error when `file` is not known, stay as they are.
pub fn row_error(file: Option<&std::path::Path>, row: &MeasuredRow, e: Error) -> Error {
    let (Some(file), Error::Arg { flag, message }) = (file, &e) else {
        return e;
    };
    let (name, value) = flag.split_once(' ').unwrap_or((flag.as_str(), ""));
    let Some(&(_, column)) = FLAG_COLUMNS.iter().find(|(f, _)| *f == name) else {
        return e;
    };
    let message = if value.is_empty() {
        message.clone()
    } else {
        format!("{value}: {message}")
    };
    Error::field(file, row.line, column, message)
}

/// The benchmark a measured row ran, under the protocol the row shows
/// ([`Protocol::of_row`]), set up as `setup` says.
pub fn spec_of(row: &MeasuredRow, engine: EngineKind, setup: &Setup) -> BenchSpec {
    let protocol = Protocol::of_row(&row.version, row.isl, row.osl);
    BenchSpec {
        model: row.model.clone(),
        gpu: row.gpu.clone(),
        tp: row.tp,
        precision: row.precision,
        kv_dtype: row.kv_dtype,
        engine,
        isl: row.isl,
        osl: row.osl,
        concurrency: row.concurrency,
        requests: None,
        prompt_pool: setup
            .prompt_pool
            .filter(|_| protocol != Protocol::InferenceMax),
        concurrency_ramp_s: None,
        protocol,
        profile: None,
        set: setup.set.clone(),
    }
}

/// What dynsim predicts for one measured row.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Mean TTFT, ms.
    pub ttft_ms: f64,
    /// Mean TPOT, ms.
    pub tpot_ms: f64,
    /// Requests preempted in the run.
    pub preemptions: u64,
    /// The feature clock's mean TTFT and TPOT features (for the fit).
    features: FeatureTotals,
}

impl Prediction {
    /// The mean TTFT features (from joining the queue to the first token) and mean TPOT
    /// features of the run's requests: the prediction is the coefficients dotted with them (plus
    /// the request overhead for TTFT).
    pub fn mean_features(&self) -> (Features, Features) {
        let f = &self.features;
        let mean = |sum: &Features, n: u64| {
            let mut m = *sum;
            m.iter_mut().for_each(|x| *x /= n.max(1) as f64);
            m
        };
        (
            mean(&f.ttft, f.ttft_requests),
            mean(&f.tpot, f.tpot_requests),
        )
    }
}

/// Simulates every row's benchmark with `profile` on `jobs` threads; `done` after each row.
pub fn predict(
    rows: &[MeasuredRow],
    engine: EngineKind,
    setup: &Setup,
    profile: &Profile,
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<Prediction>> {
    crate::parallel::parallel_map(
        rows,
        jobs,
        |row| {
            let mut features = FeatureTotals::default();
            let spec = spec_of(row, engine, setup);
            let report = bench::run_with_profile(&spec, profile.clone(), Some(&mut features))
                .map_err(|e| at_row(setup.file.as_deref(), row, e))?;
            Ok(Prediction {
                ttft_ms: report.report.ttft_ms.mean,
                tpot_ms: report.report.tpot_ms.mean,
                preemptions: report.report.preemptions,
                features,
            })
        },
        done,
    )
}

/// An error of a row's simulation, naming the row (and the cell at fault, [`row_error`]); an
/// interrupt stays one (the row did nothing wrong, and the CLI exits 130 for it).
fn at_row(file: Option<&std::path::Path>, row: &MeasuredRow, e: Error) -> Error {
    if matches!(e, Error::Interrupted { .. }) {
        return e;
    }
    Error::run(
        format!("measured row {} (line {})", row.id, row.line),
        row_error(file, row, e).to_string(),
    )
}

/// The mean TTFT and TPOT the linear model of `p`'s features gives for `row` under `profile`
/// (equal to the run's own means, but for rounding, when `profile` is the one it ran with).
pub fn linear_means(p: &Prediction, profile: &Profile, row: &MeasuredRow) -> (f64, f64) {
    let f = &p.features;
    let protocol = Protocol::of_row(&row.version, row.isl, row.osl);
    let profile = &profile.clone().for_protocol(Some(protocol.name()));
    let step = crate::deployment::gpu::find(&row.gpu)
        .map_or(profile.step, |g| profile.step_on(g, row.precision));
    let mean = |sum: &[f64; FEATURES], n: u64| {
        let mut m = *sum;
        m.iter_mut().for_each(|x| *x /= n.max(1) as f64);
        dot(&step, &m)
    };
    (
        profile.request_overhead_for(Some(protocol.name())) + mean(&f.ttft, f.ttft_requests),
        mean(&f.tpot, f.tpot_requests),
    )
}

/// Mean absolute percentage errors of predictions against rows.
pub fn errors<'a>(
    pairs: impl Iterator<Item = (&'a MeasuredRow, &'a Prediction)>,
) -> (usize, FitError) {
    let (mut n, mut ttft, mut tpot) = (0usize, 0.0, 0.0);
    for (row, p) in pairs {
        n += 1;
        ttft += (p.ttft_ms / row.ttft_ms - 1.0).abs();
        tpot += (p.tpot_ms / row.tpot_ms - 1.0).abs();
    }
    let pct = |x: f64| crate::round::round_py(100.0 * x / n.max(1) as f64, 1);
    (
        n,
        FitError {
            ttft_mape: pct(ttft),
            tpot_mape: pct(tpot),
        },
    )
}

/// A group's errors: the group, its rows, the errors.
pub type GroupErrors = (Group, usize, FitError);

/// Errors per group (in group order), and over all rows.
pub fn errors_by_group(
    rows: &[MeasuredRow],
    predictions: &[Prediction],
) -> (Vec<GroupErrors>, (usize, FitError)) {
    let mut groups: BTreeMap<Group, Vec<usize>> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        groups.entry(group_of(row)).or_default().push(i);
    }
    let per = groups
        .into_iter()
        .map(|(g, idx)| {
            let (n, e) = errors(idx.iter().map(|&i| (&rows[i], &predictions[i])));
            (g, n, e)
        })
        .collect();
    (per, errors(rows.iter().zip(predictions)))
}

/// A fitted profile, and the predictions of its final simulations.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The fitted coefficients.
    pub profile: Profile,
    /// Each row's prediction under them.
    pub predictions: Vec<Prediction>,
}

/// Fits a profile to `rows`, starting from `start`, whose per-request jitter the fit holds (and
/// as `options` say: [`fit()`]): [`ROUNDS`] rounds of simulating and fitting, then a last
/// simulation for the errors.
pub fn calibrate(
    rows: &[MeasuredRow],
    engine: EngineKind,
    setup: &Setup,
    start: &Profile,
    options: FitOptions<'_>,
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Result<Calibration> {
    if rows.is_empty() {
        return Err(Error::run("calibrate", "no rows to fit".to_string()));
    }
    let jitter_ms = start.request_jitter_ms;
    let mut profile = start.clone();
    for _ in 0..ROUNDS {
        let predictions = predict(rows, engine, setup, &profile, jobs, done)?;
        profile = fit(rows, &predictions, jitter_ms, options);
    }
    let predictions = predict(rows, engine, setup, &profile, jobs, done)?;
    Ok(Calibration {
        profile,
        predictions,
    })
}

/// A profile file of `profile` for `engine`, fitted on `fitted_on` with `error`.
pub fn profile_file(
    profile: &Profile,
    engine: EngineKind,
    fitted_on: String,
    error: FitError,
) -> ProfileFile {
    // Six significant digits: enough to reproduce every figure, short enough to read.
    let round = |x: f64| crate::round::significant(x, 6);
    let mut step = profile.step;
    step.iter_mut().for_each(|c| *c = round(*c));
    ProfileFile {
        engine: engine.name().to_string(),
        fitted_on,
        step: StepCoefficients::of_array(step),
        gpu: profile
            .gpu_rates
            .iter()
            .map(|(g, r)| (g.clone(), GpuCoefficients::of_array(r.map(round))))
            .collect(),
        gemm_by_precision: profile
            .gemm_by_precision
            .iter()
            .map(|(g, by)| {
                let by = by.iter().map(|(p, &c)| (p.clone(), round(c))).collect();
                (g.clone(), by)
            })
            .collect(),
        step_by_protocol: profile
            .protocol_step_us
            .iter()
            .map(|(p, &us)| (p.clone(), round(us)))
            .collect(),
        request: RequestCoefficients {
            overhead_ms: round(profile.request_overhead_ms),
            jitter_ms: round(profile.request_jitter_ms),
            by_protocol: profile
                .protocol_overhead_ms
                .iter()
                .map(|(p, &o)| (p.clone(), round(o)))
                .collect(),
        },
        fit: error,
    }
}
