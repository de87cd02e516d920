//! `dynsim._native`: the Python package's native module. It reads scenarios as the CLI does,
//! runs them with the library's own [`dynsim::run`] code and hands reports back as the CLI's
//! `--json` text, so `dynsim.run` returns exactly what `dynsim run --json` prints. Every
//! error is a `dynsim.ScenarioError` carrying the CLI's one-line message. The Python layer
//! (`python/dynsim/__init__.py`) turns that text into dicts. `signals.rs` turns errors into
//! exceptions and lets Ctrl-C stop long calls; `fleet.rs` holds plan, sweep and merge;
//! `simulation.rs` the stepped run.

use std::path::{Path, PathBuf};

use dynsim::bench::{BenchSpec, Protocol};
use dynsim::deployment::{KvDtype, Precision};
use dynsim::error::Error;
use dynsim::run::{build_workload, run_built, RunHooks};
use dynsim::scenario::load::{parse_scenario, Loaded};
use dynsim::scenario::{load_scenario, EngineKind, Override};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod fleet;
mod signals;
mod simulation;

use fleet::{check_out, merge_files, plan_json, sweep_files, sweep_points, write_files};
use signals::{interruptible, py_err};
use simulation::NativeSimulation;

create_exception!(
    _native,
    ScenarioError,
    PyValueError,
    "Bad input or a run that cannot go on: the message is the CLI's one line."
);

/// Reads a scenario: `kind` is `path` (a file, relative paths from its folder), `toml` (the
/// text, relative paths from the current folder) or `json` (a dict, as JSON text). `sets` are
/// `KEY=VALUE` overrides as `--set` takes them; `json_sets` are `(key, value as JSON)`.
fn load(
    kind: &str,
    text: &str,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
) -> Result<Loaded, Error> {
    let overrides = overrides(sets, json_sets)?;
    match kind {
        "path" => load_scenario(Path::new(text), &overrides),
        "toml" => Ok(Loaded {
            scenario: parse_scenario(Path::new("<string>"), text, &overrides)?,
            base_dir: PathBuf::from("."),
        }),
        "json" => {
            let toml_text = match json_to_toml("<dict>", text)? {
                toml::Value::Table(t) => toml::to_string(&t)
                    .map_err(|e| Error::file("<dict>", format!("is not a scenario: {e}")))?,
                _ => return Err(Error::file("<dict>", "is not a table")),
            };
            Ok(Loaded {
                scenario: parse_scenario(Path::new("<dict>"), &toml_text, &overrides)?,
                base_dir: PathBuf::from("."),
            })
        }
        other => Err(Error::arg(
            "scenario",
            format!("unknown scenario kind {other:?}"),
        )),
    }
}

/// `--set` overrides: `KEY=VALUE` strings and `(key, value as JSON)` pairs.
fn overrides(sets: Vec<String>, json_sets: Vec<(String, String)>) -> Result<Vec<Override>, Error> {
    let mut all = Vec::new();
    for s in sets {
        all.push(s.parse::<Override>().map_err(|m| Error::arg("--set", m))?);
    }
    for (key, json) in json_sets {
        let value = json_to_toml(&format!("set {key}"), &json)?;
        all.push(Override { key, value });
    }
    Ok(all)
}

/// A JSON value as TOML (no nulls in TOML: a `None` is refused with its place).
fn json_to_toml(place: &str, json: &str) -> Result<toml::Value, Error> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::file(place, format!("is not JSON: {e}")))?;
    toml::Value::try_from(value).map_err(|e| {
        Error::file(
            place,
            format!("has a value TOML cannot hold (None, or an integer past 2^63 - 1): {e}"),
        )
    })
}

/// The report as `dynsim run --json` prints it (without the newline).
fn report_json(r: &dynsim::report::Report) -> String {
    serde_json::to_string(r).expect("in-memory JSON")
}

/// Runs a scenario to its end (its `[[scale]]` steps and planner acting) and returns the
/// report's JSON text.
#[pyfunction]
fn run_json(
    py: Python<'_>,
    kind: &str,
    text: &str,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
) -> PyResult<String> {
    let loaded = load(kind, text, sets, json_sets).map_err(py_err)?;
    interruptible(py, || {
        let built = build_workload(&loaded.scenario, &loaded.base_dir)?;
        run_built(&loaded.scenario, built, RunHooks::default()).map(|r| report_json(&r))
    })
}

/// A name `flag` takes, among `names`.
fn named<T: std::str::FromStr>(flag: &str, value: &str, names: &[&str]) -> Result<T, Error> {
    value.parse::<T>().map_err(|_| {
        Error::arg(
            flag,
            format!("{value:?} is not one of {}", names.join(", ")),
        )
    })
}

/// `dynsim bench`: one deployment under a closed-loop benchmark; returns `bench --json`'s
/// text. `model_file` replaces `model` as `--model-file` does.
#[pyfunction]
#[pyo3(signature = (model, gpu, isl, osl, concurrency, tp, precision, kv_dtype, engine, requests, profile, sets, json_sets, model_file, protocol, prompt_pool, concurrency_ramp_duration))]
#[allow(clippy::too_many_arguments)]
fn bench_json(
    py: Python<'_>,
    model: Option<String>,
    gpu: String,
    isl: usize,
    osl: usize,
    concurrency: usize,
    tp: u64,
    precision: &str,
    kv_dtype: &str,
    engine: &str,
    requests: Option<usize>,
    profile: Option<PathBuf>,
    sets: Vec<String>,
    json_sets: Vec<(String, String)>,
    model_file: Option<PathBuf>,
    protocol: &str,
    prompt_pool: Option<usize>,
    concurrency_ramp_duration: Option<f64>,
) -> PyResult<String> {
    let spec = (|| {
        let model = match (model, model_file) {
            (None, Some(path)) => {
                if path.extension().is_none_or(|e| e != "toml") {
                    return Err(Error::arg("--model-file", "must name a .toml model file"));
                }
                std::path::absolute(&path)
                    .map_err(|e| Error::file(&path, format!("cannot resolve: {e}")))?
                    .display()
                    .to_string()
            }
            (Some(m), None) => m,
            (None, None) => {
                return Err(Error::arg(
                    "--model",
                    "give a model (a Hugging Face id or alias) or a model_file",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(Error::arg(
                    "--model",
                    "give a model or a model_file, not both",
                ))
            }
        };
        let positive = |flag: &str, n: usize| {
            if n == 0 {
                return Err(Error::arg(flag, "must be at least 1"));
            }
            Ok(n)
        };
        let tokens = |flag: &str, n: usize| {
            u32::try_from(positive(flag, n)?)
                .ok()
                .filter(|&t| u64::from(t) <= dynsim::limits::MAX_CONTEXT_TOKENS)
                .ok_or_else(|| {
                    Error::arg(
                        flag,
                        format!("must be at most {}", dynsim::limits::MAX_CONTEXT_TOKENS),
                    )
                })
        };
        if tp == 0 {
            return Err(Error::arg("--tp", "must be at least 1"));
        }
        let set = overrides(sets, json_sets)?;
        Ok(BenchSpec {
            model,
            gpu,
            tp,
            precision: named("--precision", precision, Precision::NAMES)?,
            kv_dtype: named("--kv-dtype", kv_dtype, KvDtype::NAMES)?,
            engine: named("--engine", engine, EngineKind::NAMES)?,
            isl: tokens("--isl", isl)?,
            osl: tokens("--osl", osl)?,
            concurrency: positive("--concurrency", concurrency)?,
            requests: requests.map(|n| positive("--requests", n)).transpose()?,
            prompt_pool: prompt_pool
                .map(|n| positive("--prompt-pool", n))
                .transpose()?,
            concurrency_ramp_s: concurrency_ramp_duration,
            protocol: named("--protocol", protocol, &Protocol::NAMES)?,
            profile,
            set,
        })
    })()
    .map_err(py_err)?;
    interruptible(py, || dynsim::bench::run(&spec))
        .map(|r| serde_json::to_string(&r).expect("in-memory JSON"))
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(bench_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_points, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_files, m)?)?;
    m.add_function(wrap_pyfunction!(merge_files, m)?)?;
    m.add_function(wrap_pyfunction!(check_out, m)?)?;
    m.add_function(wrap_pyfunction!(write_files, m)?)?;
    m.add_class::<NativeSimulation>()?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    Ok(())
}
