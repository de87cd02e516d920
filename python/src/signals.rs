//! Errors and Ctrl-C: the library's errors as Python exceptions, and long calls that run on
//! another thread while the calling one, the GIL released, runs Python's signal handlers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use dynsim::error::Error;
use dynsim::interrupt;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::ScenarioError;

/// The library's error as a Python exception (an interrupt as KeyboardInterrupt).
pub(crate) fn py_err(e: Error) -> PyErr {
    if let Error::Interrupted { .. } = e {
        return PyKeyboardInterrupt::new_err("interrupted");
    }
    ScenarioError::new_err(e.to_string())
}

/// Waits for the answer of work running on another thread, the GIL released (other Python
/// threads go on), running Python's signal handlers every 50 ms. When a handler raises
/// (Ctrl-C: KeyboardInterrupt), `stop` asks the work to stop, and what the handler raised is
/// raised once the work has answered, or at once if a handler raises again meanwhile (a second
/// Ctrl-C gives up on work that does not check). `lost` is called when the work went away
/// without answering (it panicked): it goes on with that panic.
pub(crate) fn wait_for<T: Send>(
    py: Python<'_>,
    mut answer: Receiver<Result<T, Error>>,
    stop: impl FnOnce(),
    lost: impl FnOnce() -> PyErr,
) -> PyResult<T> {
    let wait = Duration::from_millis(50);
    // A receiver may cross to another thread (the closure takes it by `&mut`), not be shared.
    let mut next = |py: Python<'_>| {
        let rx = &mut answer;
        py.allow_threads(move || rx.recv_timeout(wait))
    };
    let raised = loop {
        match next(py) {
            Ok(result) => return result.map_err(py_err),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Err(lost()),
        }
        if let Err(raised) = py.check_signals() {
            break raised;
        }
    };
    stop();
    loop {
        match next(py) {
            Ok(_) | Err(RecvTimeoutError::Disconnected) => return Err(raised),
            Err(RecvTimeoutError::Timeout) => {}
        }
        // A second signal: what its handler raised, at once.
        py.check_signals()?;
    }
}

/// Runs `work` on its own thread (see [`wait_for`]): Ctrl-C stops it through a stop token of
/// its own ([`interrupt::with_stop`], lent to a sweep's or a plan's pool too), so another
/// thread's dynsim work goes on (the process-wide flag stopped it too), and raises
/// KeyboardInterrupt (after a second Ctrl-C too, the call returns only once the work has ended:
/// it borrows the caller's data).
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let token = Arc::clone(&stop);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = scope.spawn(move || {
            let _ = tx.send(interrupt::with_stop(token, work));
        });
        wait_for(
            py,
            rx,
            || stop.store(true, Ordering::Relaxed),
            || match worker.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("the work sends before it ends"),
            },
        )
        // The scope waits for the work to end before it returns.
    })
}
