//! `dynsim.Simulation`: a run stepped from Python, the planner being the caller's code.

use dynsim::engine::ms_to_ns;
use dynsim::error::Error;
use dynsim::interrupt;
use dynsim::run::{build_workload, Session, SessionHooks};
use dynsim::scenario::Pool;
use pyo3::prelude::*;

use crate::signals::{py_err, python_signal_came};
use crate::{load, report_json, ScenarioError};

/// A run stepped from Python (see `dynsim.Simulation`).
#[pyclass(unsendable)]
pub(crate) struct NativeSimulation {
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
        let session =
            Session::new(&loaded.scenario, built, SessionHooks::default()).map_err(py_err)?;
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
