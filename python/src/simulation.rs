//! `dynsim.Simulation`: a run stepped from Python, the planner being the caller's code.
//!
//! The run lives on a thread of its own for its whole life (the library's session is not
//! `Send`: its actors share state through `Rc`), and each method sends it a job and waits for
//! the answer with the GIL released ([`wait_for`]). So a simulation can be stepped from any
//! Python thread, other Python threads run while it advances, and Ctrl-C stops a long call
//! (its construction too) where it is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use dynsim::engine::{ms_to_ns, Nanos};
use dynsim::error::Error;
use dynsim::interrupt;
use dynsim::run::{build_workload, Session, SessionHooks};
use dynsim::scenario::Pool;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::signals::wait_for;
use crate::{load, report_json, ScenarioError};

/// What the run's thread holds.
enum State {
    /// Not built yet (the first job builds it).
    Unbuilt,
    /// Running.
    Running(Box<Session<'static>>),
    /// Reported: the report's JSON text, which later calls return again, and the time the
    /// run ended at (what `now` says from then on).
    Reported(String, Nanos),
    /// Ended by an error that leaves nothing to go on with: its message.
    Failed(String),
}

impl State {
    /// The running session, or why there is none.
    fn session(&mut self) -> Result<&mut Session<'static>, Error> {
        match self {
            State::Running(s) => Ok(s),
            State::Reported(..) => Err(Error::arg(
                "Simulation",
                "has ended: report() was called (it returns the same report again)",
            )),
            State::Failed(why) => Err(Error::arg(
                "Simulation",
                format!("has ended: its run failed ({why})"),
            )),
            State::Unbuilt => unreachable!("the first job builds the run"),
        }
    }
}

/// A job for the run's thread.
type Job = Box<dyn FnOnce(&mut State) + Send>;

/// A run stepped from Python (see `dynsim.Simulation`).
#[pyclass]
pub(crate) struct NativeSimulation {
    /// Jobs for the run's thread.
    jobs: Sender<Job>,
    /// The run's thread, until it is found to have panicked.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The process the run's thread is in (a forked child has no such thread).
    pid: u32,
}

impl NativeSimulation {
    /// Runs `job` on the run's thread and waits for its answer (see [`wait_for`]).
    fn call<T: Send + 'static>(
        &self,
        py: Python<'_>,
        job: impl FnOnce(&mut State) -> Result<T, Error> + Send + 'static,
    ) -> PyResult<T> {
        if std::process::id() != self.pid {
            return Err(PyRuntimeError::new_err(
                "a Simulation does not cross a fork (its run's thread stayed in the parent \
                 process): build one in the child",
            ));
        }
        let (tx, rx) = channel();
        // This call's own stop: Ctrl-C here stops this job, not another thread's dynsim work.
        let stop = Arc::new(AtomicBool::new(false));
        let stop_job = Arc::clone(&stop);
        let sent = self.jobs.send(Box::new(move |state: &mut State| {
            let _ = tx.send(interrupt::with_stop(stop_job, || job(state)));
        }));
        if sent.is_err() {
            return Err(PyRuntimeError::new_err(
                "the simulation's thread has stopped (it panicked in an earlier call)",
            ));
        }
        let ask = || stop.store(true, Ordering::Relaxed);
        wait_for(py, rx, ask, || {
            let thread = self.thread.lock().map(|mut t| t.take()).ok().flatten();
            match thread.map(JoinHandle::join) {
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                _ => PyRuntimeError::new_err("the simulation's thread has stopped"),
            }
        })
    }

    /// Runs `work` on the running session.
    fn on_session<T: Send + 'static>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut Session<'static>) -> Result<T, Error> + Send + 'static,
    ) -> PyResult<T> {
        self.call(py, |state| work(state.session()?))
    }
}

#[pymethods]
impl NativeSimulation {
    #[new]
    fn new(
        py: Python<'_>,
        kind: &str,
        text: &str,
        sets: Vec<String>,
        json_sets: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let (kind, text) = (kind.to_string(), text.to_string());
        let (jobs, queue) = channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("dynsim-simulation".into())
            .spawn(move || {
                let mut state = State::Unbuilt;
                for job in queue {
                    job(&mut state);
                }
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
        let sim = NativeSimulation {
            jobs,
            thread: Mutex::new(Some(thread)),
            pid: std::process::id(),
        };
        // Reading the scenario makes every draw of a synthetic workload to check it (about a
        // second for 10^7 requests), as building it does: both on the run's thread.
        sim.call(py, move |state| {
            let loaded = load(&kind, &text, sets, json_sets)?;
            let built = build_workload(&loaded.scenario, &loaded.base_dir)?;
            let session = Session::new(&loaded.scenario, built, SessionHooks::default())?;
            *state = State::Running(Box::new(session));
            Ok(())
        })?;
        Ok(sim)
    }

    /// Delivers everything up to `t_s` seconds of virtual time (not before now: checked on the
    /// run's thread, so no other thread's call comes between); interrupted, the run stays
    /// where it stopped.
    fn advance_to(&self, py: Python<'_>, t_s: f64) -> PyResult<()> {
        if !(t_s.is_finite() && t_s >= 0.0) {
            return Err(ScenarioError::new_err(format!(
                "advance_to: {t_s} is not a time (seconds, finite, at least 0)"
            )));
        }
        self.on_session(py, move |s| {
            let now_s = s.now() as f64 / 1e9;
            if t_s < now_s {
                // Going back was a silent no-op.
                return Err(Error::arg(
                    "advance_to",
                    format!("{t_s:?} s is before now ({now_s:?} s): a run only goes forward"),
                ));
            }
            s.advance_to(ms_to_ns(t_s * 1e3))
        })
    }

    /// The run's virtual time, s (once reported, where the run ended).
    fn now_s(&self, py: Python<'_>) -> PyResult<f64> {
        self.call(py, |state| match state {
            State::Reported(_, ended_at) => Ok(*ended_at as f64 / 1e9),
            _ => Ok(state.session()?.now() as f64 / 1e9),
        })
    }

    /// What a planner sees now, as JSON text.
    fn observe_json(&self, py: Python<'_>) -> PyResult<String> {
        self.on_session(py, |s| {
            Ok(serde_json::to_string(&s.observe()).expect("in-memory JSON"))
        })
    }

    /// Sets `pool`'s target to `workers` now (leaving workers drain).
    fn scale(&self, py: Python<'_>, pool: &str, workers: usize) -> PyResult<()> {
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
        self.on_session(py, move |s| s.scale(pool, workers))
    }

    /// Whether every request is completed and nothing is pending (true once reported; a run
    /// that failed raises its error).
    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        self.call(py, |state| match state {
            State::Reported(..) => Ok(true),
            _ => Ok(state.session()?.done()),
        })
    }

    /// Delivers what is left (no more scaling), ends the run and returns the report's JSON
    /// text; later calls return the same text. Interrupted or failed while delivering, the run
    /// stays where it stopped; stranded (requests wait for a pool scaled to 0), it stays too,
    /// to be scaled back. Only a failed report ends it.
    fn report_json(&self, py: Python<'_>) -> PyResult<String> {
        self.call(py, |state| {
            if let State::Reported(text, _) = state {
                return Ok(text.clone());
            }
            // An error of the delivering (an interrupt, the memory budget) leaves the run where
            // it stopped, as in advance_to.
            let session = state.session()?;
            session.advance_to(Nanos::MAX)?;
            // Everything is delivered: the only error left is requests no worker will serve.
            match session.run_out() {
                Ok(()) => {}
                Err(Error::Run { scenario, message }) => {
                    return Err(Error::Run {
                        scenario,
                        message: format!(
                            "{message}; the simulation stays: scale that pool back up and \
                             call report() again"
                        ),
                    })
                }
                Err(e) => return Err(e),
            }
            let State::Running(session) = std::mem::replace(state, State::Unbuilt) else {
                unreachable!("checked above");
            };
            let ended_at = session.now();
            match session.finish() {
                Ok(report) => {
                    let text = report_json(&report);
                    *state = State::Reported(text.clone(), ended_at);
                    Ok(text)
                }
                Err(e) => {
                    *state = State::Failed(e.to_string());
                    Err(e)
                }
            }
        })
    }
}
