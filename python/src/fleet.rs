//! `dynsim plan`, `sweep` and `merge` from Python: the CLI's own search and renderer, so the
//! results equal its files byte for byte.

use std::path::{Path, PathBuf};

use dynsim::cli::{plan_quietly, PlanRequest};
use dynsim::error::Error;
use dynsim::output::{check_out_dir, write_dir};
use dynsim::plan::Sla;
use dynsim::scenario::TraceFormat;
use dynsim::sweep::output::render;
use dynsim::sweep::{merge, run_sweep, Shard, Sweep, SweepResults};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

use crate::signals::{interruptible, py_err};
use crate::{named, overrides};

/// `dynsim plan`: the fewest workers (or the highest load) that meets every SLA, per policy;
/// returns the text of the `plan.json` the CLI writes. `workers` and `load` are `MIN..MAX` or
/// one value, as the CLI's options take them.
#[pyfunction]
#[pyo3(signature = (input, sla, policy, workers, load, sets, json_sets, scenario, format, jobs, allow_fixed_timing))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_json(
    py: Python<'_>,
    input: PathBuf,
    sla: Vec<String>,
    policy: Vec<String>,
    workers: Option<String>,
    load: Option<String>,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
    scenario: Option<PathBuf>,
    format: Option<String>,
    jobs: Option<usize>,
    allow_fixed_timing: bool,
) -> PyResult<String> {
    let request = (|| {
        Ok(PlanRequest {
            input,
            scenario,
            format: format
                .map(|f| named("--format", &f, TraceFormat::NAMES))
                .transpose()?,
            sla: sla
                .iter()
                .map(|s| s.parse::<Sla>().map_err(|m| Error::arg("--sla", m)))
                .collect::<Result<_, Error>>()?,
            policy,
            workers,
            load,
            set: overrides(sets, json_sets)?,
            jobs: jobs
                .map(|j| {
                    if j == 0 {
                        Err(Error::arg("--jobs", "must be at least 1"))
                    } else {
                        Ok(j)
                    }
                })
                .transpose()?,
            allow_fixed_timing,
        })
    })()
    .map_err(py_err)?;
    interruptible(py, || plan_quietly(&request))
        .map(|p| String::from_utf8(p.json()).expect("JSON is UTF-8"))
}

/// Rendered files as Python `(name, bytes)` pairs.
fn py_files(py: Python<'_>, files: Vec<(String, Vec<u8>)>) -> Vec<(String, Py<PyBytes>)> {
    files
        .into_iter()
        .map(|(name, bytes)| (name, PyBytes::new(py, &bytes).unbind()))
        .collect()
}

/// A sweep file with `--set` overrides for its base.
fn load_sweep(
    path: &Path,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
) -> Result<Sweep, Error> {
    let mut sweep = dynsim::sweep::load_sweep(path)?;
    sweep.set = overrides(sets, json_sets)?;
    Ok(sweep)
}

/// The number of points of a sweep (the product of its axes' lengths).
#[pyfunction]
pub(crate) fn sweep_points(
    path: PathBuf,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
) -> PyResult<usize> {
    Ok(load_sweep(&path, sets, json_sets)
        .map_err(py_err)?
        .points_total())
}

/// `dynsim sweep [--shard I/N]`: runs the points `shard` (`I/N`) selects on `jobs` threads and
/// returns the files the CLI writes into `--out`, by name, in its order.
#[pyfunction]
pub(crate) fn sweep_files(
    py: Python<'_>,
    path: PathBuf,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
    shard: String,
    jobs: usize,
) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    let sweep = load_sweep(&path, sets, json_sets).map_err(py_err)?;
    let shard = shard
        .parse::<Shard>()
        .map_err(|m| py_err(Error::arg("--shard", m)))?;
    if jobs == 0 {
        return Err(py_err(Error::arg("--jobs", "must be at least 1")));
    }
    interruptible(py, || {
        let points = sweep.load_points()?;
        let outcome = run_sweep(&sweep, points, shard, jobs, &|| (), Vec::new())?;
        if outcome.interrupted {
            return Err(Error::Interrupted {
                kept: String::new(),
            });
        }
        render(&outcome.results)
    })
    .map(|files| py_files(py, files))
}

/// `dynsim merge`: the files of the unsharded sweep from its shards' `results.json` texts
/// (`names` label each shard in errors, as the CLI's folders do).
#[pyfunction]
pub(crate) fn merge_files(
    py: Python<'_>,
    shards: Vec<(String, String)>,
) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    (|| {
        let shards = shards
            .into_iter()
            .map(|(name, text)| {
                let results: SweepResults = serde_json::from_str(&text).map_err(|e| {
                    Error::field(
                        &name,
                        e.line(),
                        "results",
                        format!("not a sweep's results: {e}"),
                    )
                })?;
                Ok((PathBuf::from(name), results))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        render(&merge(shards)?)
    })()
    .map(|files| py_files(py, files))
    .map_err(py_err)
}

/// Checks, before any work, that `out` can be an output folder, as the CLI checks `--out`
/// (neither it nor a folder above it a file); creates nothing.
#[pyfunction]
pub(crate) fn check_out(out: PathBuf) -> PyResult<()> {
    check_out_dir("out", &out).map_err(py_err)
}

/// Writes files into the output folder `out` as the CLI does (each atomically; the folder
/// created if missing).
#[pyfunction]
pub(crate) fn write_files(out: PathBuf, files: Vec<(String, PyBackedBytes)>) -> PyResult<()> {
    let files: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(name, bytes)| (name, bytes.to_vec()))
        .collect();
    check_out_dir("out", &out)
        .and_then(|()| write_dir(&out, &files))
        .map_err(py_err)
}
