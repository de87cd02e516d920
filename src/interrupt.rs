//! Interrupts: SIGINT and SIGTERM set a process-wide flag that long loops check (a run every
//! few thousand deliveries, the thread pool before each job), so that work stops cleanly:
//! temporary files are removed as their writers drop, finished points are kept. A second signal
//! quits at once, removing the temporary files still registered here first (a write blocked on
//! a pipe or a FIFO never returns to check the flag).
//!
//! The flag is the only process-wide state; [`install`] is called once by the binary. A program
//! that embeds the library (the Python package) has its own signal handling: it runs the work on
//! another thread and [`request`]s a stop from its own, [`clear`]ing the flag once the work has
//! stopped, or lends that thread's checks a stop token of its own ([`with_stop`]), which stops
//! that work and no other.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
static TEMPS: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// The exit code of an interrupted command (128 + SIGINT, as shells report it).
pub const EXIT_CODE: i32 = 130;

thread_local! {
    /// The stop token this thread's checks ask besides the flag (see [`with_stop`]).
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Whether an interrupt was asked for (the flag, or this thread's stop token).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
        || STOP.with(|s| {
            s.borrow()
                .as_ref()
                .is_some_and(|t| t.load(Ordering::Relaxed))
        })
}

/// Runs `work` with `stop` asked by every check on this thread, besides the flag: setting it
/// stops this work and leaves the rest of the process alone (the Python package gives each
/// call on a `Simulation`'s thread its own).
pub fn with_stop<R>(stop: Arc<AtomicBool>, work: impl FnOnce() -> R) -> R {
    /// Puts the previous token back, even if `work` panics.
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            STOP.with(|s| *s.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(STOP.with(|s| s.borrow_mut().replace(stop)));
    work()
}

/// This thread's stop token (see [`with_stop`]), for the threads it hands its work to
/// ([`crate::parallel`]'s pool lends it to each of its own).
pub fn current_stop() -> Option<Arc<AtomicBool>> {
    STOP.with(|s| s.borrow().clone())
}

/// Forgets an interrupt once its work has stopped (for an embedding that goes on).
pub fn clear() {
    REQUESTED.store(false, Ordering::Relaxed);
}

/// Asks every loop to stop (what the signal handler does first).
pub fn request() {
    REQUESTED.store(true, Ordering::Relaxed);
}

/// `Err(Error::Interrupted)` once an interrupt was asked for.
pub fn check() -> Result<()> {
    if requested() {
        Err(Error::Interrupted {
            kept: String::new(),
        })
    } else {
        Ok(())
    }
}

/// Installs the SIGINT/SIGTERM handler: the first signal asks to stop, the second removes the
/// registered temporary files and exits with [`EXIT_CODE`].
pub fn install() -> Result<()> {
    ctrlc::set_handler(|| {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            request();
            eprintln!("dynsim: interrupted: stopping (again to quit at once)");
        } else {
            remove_temps();
            std::process::exit(EXIT_CODE);
        }
    })
    .map_err(|e| Error::arg("signals", format!("cannot install the handler: {e}")))
}

/// Registers a temporary file to remove if the process is made to quit at once.
pub fn track_temp(path: &Path) {
    temps().insert(path.to_path_buf());
}

/// Unregisters a temporary file (renamed into place, or removed).
pub fn untrack_temp(path: &Path) {
    temps().remove(path);
}

fn temps() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    TEMPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn remove_temps() {
    for path in temps().iter() {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_token_interrupts_only_its_own_thread_and_only_while_lent() {
        let stop = Arc::new(AtomicBool::new(false));
        let inside = with_stop(Arc::clone(&stop), || {
            let before = check();
            stop.store(true, Ordering::Relaxed);
            let other = std::thread::spawn(check).join().unwrap();
            (before, check(), other)
        });
        assert!(inside.0.is_ok(), "an unset token asks nothing");
        assert!(matches!(inside.1, Err(Error::Interrupted { .. })));
        assert!(
            inside.2.is_ok(),
            "another thread's checks do not ask this token"
        );
        assert!(check().is_ok(), "the token is given back");
    }
}
