//! Errors and Ctrl-C: the library's errors as Python exceptions, and long calls that run
//! Python's signal handlers while they work.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use dynsim::error::Error;
use dynsim::interrupt;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::ScenarioError;

/// The library's error as a Python exception: an interrupt raised by a poll becomes the
/// exception Python's signal handler raised (KeyboardInterrupt for Ctrl-C).
pub(crate) fn py_err(e: Error) -> PyErr {
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
pub(crate) fn python_signal_came() -> bool {
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
pub(crate) fn interruptible<T: Send>(
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
