//! `dynsim._native`: the Python package's native module. It reads scenarios as the CLI does,
//! runs them with the library's own [`dynsim::run`] code and hands reports back as the CLI's
//! `--json` text, so `dynsim.run` returns exactly what `dynsim run --json` prints. Every
//! error is a `dynsim.ScenarioError` carrying the CLI's one-line message. The Python layer
//! (`python/dynsim/__init__.py`) turns that text into dicts.

use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use dynsim::bench::BenchSpec;
use dynsim::cli::{plan_quietly, PlanRequest};
use dynsim::deployment::{KvDtype, Precision};
use dynsim::engine::ms_to_ns;
use dynsim::error::Error;
use dynsim::interrupt;
use dynsim::output::{check_out_dir, write_dir};
use dynsim::plan::Sla;
use dynsim::run::{build_workload, run_built, RunHooks, Session};
use dynsim::scenario::load::{parse_scenario, Loaded};
use dynsim::scenario::{load_scenario, EngineKind, Override, Pool, TraceFormat};
use dynsim::sweep::output::render;
use dynsim::sweep::{merge, run_sweep, Shard, Sweep, SweepResults};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;

create_exception!(
    _native,
    ScenarioError,
    PyValueError,
    "Bad input or a run that cannot go on: the message is the CLI's one line."
);

/// The library's error as a Python exception: an interrupt raised by a poll becomes the
/// exception Python's signal handler raised (KeyboardInterrupt for Ctrl-C).
fn py_err(e: Error) -> PyErr {
    if let Error::Interrupted { .. } = e {
        if let Some(raised) = RAISED.with(|r| r.borrow_mut().take()) {
            return raised;
        }
        return PyKeyboardInterrupt::new_err("interrupted");
    }
    ScenarioError::new_err(e.to_string())
}

thread_local! {
    /// What Python's signal handlers raised during a poll, until it is re-raised.
    static RAISED: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// The poll lent to a stepped run's interrupt checks (every few thousand deliveries): runs
/// Python's signal handlers (the GIL is held) and keeps what they raise.
fn python_signal_came() -> bool {
    Python::with_gil(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            RAISED.with(|r| *r.borrow_mut() = Some(e));
            true
        }
    })
}

/// Runs `work` on its own thread with the GIL released while this (the calling) thread runs
/// Python's signal handlers every 50 ms: Ctrl-C stops the work (through the library's
/// interrupt flag, cleared after) and raises KeyboardInterrupt once it has stopped.
fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = scope.spawn(move || {
            let _ = tx.send(work());
        });
        let wait = Duration::from_millis(50);
        let mut rx = Some(rx);
        loop {
            // The receiver is moved in and out: it may cross to a thread, not be shared.
            let (back, got) = py.allow_threads(|| {
                let rx = rx.take().expect("given back every time");
                let got = rx.recv_timeout(wait);
                (rx, got)
            });
            rx = Some(back);
            match got {
                Ok(result) => {
                    let _ = worker.join();
                    return result.map_err(py_err);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // The work panicked: its panic goes on here.
                    match worker.join() {
                        Err(panic) => std::panic::resume_unwind(panic),
                        Ok(()) => unreachable!("the work sends before it ends"),
                    }
                }
            }
            if let Err(raised) = py.check_signals() {
                interrupt::request();
                let rx = rx.take().expect("given back above");
                let _ = py.allow_threads(move || rx.recv());
                let _ = worker.join();
                interrupt::clear();
                return Err(raised);
            }
        }
    })
}

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
            format!("has a value TOML cannot hold (None, say): {e}"),
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
#[pyo3(signature = (model, gpu, isl, osl, concurrency, tp, precision, kv_dtype, engine, requests, profile, sets, json_sets, model_file))]
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
            _ => {
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
            profile,
            set,
        })
    })()
    .map_err(py_err)?;
    interruptible(py, || dynsim::bench::run(&spec))
        .map(|r| serde_json::to_string(&r).expect("in-memory JSON"))
}

/// `dynsim plan`: the fewest workers (or the highest load) that meets every SLA, per policy;
/// returns the text of the `plan.json` the CLI writes. `workers` and `load` are `MIN..MAX` or
/// one value, as the CLI's options take them.
#[pyfunction]
#[pyo3(signature = (input, sla, policy, workers, load, sets, json_sets, scenario, format, jobs, allow_fixed_timing))]
#[allow(clippy::too_many_arguments)]
fn plan_json(
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
fn sweep_points(
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
fn sweep_files(
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
        let outcome = run_sweep(&sweep, shard, jobs, &|| (), Vec::new())?;
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
fn merge_files(
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

/// Writes files into the output folder `out` as the CLI does (each atomically; the folder
/// created if missing).
#[pyfunction]
fn write_files(out: PathBuf, files: Vec<(String, PyBackedBytes)>) -> PyResult<()> {
    let files: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .map(|(name, bytes)| (name, bytes.to_vec()))
        .collect();
    check_out_dir(&out)
        .and_then(|()| write_dir(&out, &files))
        .map_err(py_err)
}

/// A run stepped from Python (see `dynsim.Simulation`).
#[pyclass(unsendable)]
struct NativeSimulation {
    /// The run, until it is reported.
    session: Option<Session<'static>>,
    /// The report's JSON text, once reported.
    report: Option<String>,
}

impl NativeSimulation {
    fn session(&mut self) -> PyResult<&mut Session<'static>> {
        self.session
            .as_mut()
            .ok_or_else(|| ScenarioError::new_err("the simulation has ended (report() was called)"))
    }
}

#[pymethods]
impl NativeSimulation {
    #[new]
    fn new(
        kind: &str,
        text: &str,
        sets: Vec<String>,
        json_sets: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let loaded = load(kind, text, sets, json_sets).map_err(py_err)?;
        let built = build_workload(&loaded.scenario, &loaded.base_dir).map_err(py_err)?;
        let session = Session::new(&loaded.scenario, built, RunHooks::default()).map_err(py_err)?;
        Ok(NativeSimulation {
            session: Some(session),
            report: None,
        })
    }

    /// Delivers everything up to `t_s` seconds of virtual time.
    fn advance_to(&mut self, t_s: f64) -> PyResult<()> {
        if !(t_s.is_finite() && t_s >= 0.0) {
            return Err(ScenarioError::new_err(format!(
                "advance_to: {t_s} is not a time (seconds, finite, at least 0)"
            )));
        }
        let session = self.session()?;
        interrupt::with_poll(python_signal_came, || {
            session.advance_to(ms_to_ns(t_s * 1e3))
        })
        .map_err(py_err)
    }

    /// The run's virtual time, s.
    fn now_s(&mut self) -> PyResult<f64> {
        Ok(self.session()?.now() as f64 / 1e9)
    }

    /// What a planner sees now, as JSON text.
    fn observe_json(&mut self) -> PyResult<String> {
        let obs = self.session()?.observe();
        Ok(serde_json::to_string(&obs).expect("in-memory JSON"))
    }

    /// Sets `pool`'s target to `workers` now (leaving workers drain).
    fn scale(&mut self, pool: &str, workers: usize) -> PyResult<()> {
        let pool = match pool {
            "workers" => Pool::Workers,
            "prefill" => Pool::Prefill,
            "decode" => Pool::Decode,
            other => {
                return Err(ScenarioError::new_err(format!(
                    "scale: {other:?} is not a pool (workers, prefill or decode)"
                )))
            }
        };
        self.session()?.scale(pool, workers).map_err(py_err)
    }

    /// Whether every request is completed and nothing is pending.
    fn done(&mut self) -> PyResult<bool> {
        match self.session.as_mut() {
            Some(s) => Ok(s.done()),
            None => Ok(true),
        }
    }

    /// Delivers what is left (no more scaling), ends the run and returns the report's JSON
    /// text; later calls return the same text.
    fn report_json(&mut self) -> PyResult<String> {
        if let Some(r) = &self.report {
            return Ok(r.clone());
        }
        let session = self
            .session
            .as_mut()
            .ok_or_else(|| ScenarioError::new_err("the simulation has ended: its run failed"))?;
        match interrupt::with_poll(python_signal_came, || session.run_out()) {
            Ok(()) => {}
            // Interrupted, the simulation stays where it stopped.
            Err(e @ Error::Interrupted { .. }) => return Err(py_err(e)),
            Err(e) => {
                self.session = None;
                return Err(py_err(e));
            }
        }
        let session = self.session.take().expect("checked above");
        let text = session.finish().map(|r| report_json(&r)).map_err(py_err)?;
        self.report = Some(text.clone());
        Ok(text)
    }
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
    m.add_function(wrap_pyfunction!(write_files, m)?)?;
    m.add_class::<NativeSimulation>()?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    Ok(())
}
