//! Running independent deterministic jobs on all cores: each job is a whole simulation run inside
//! one thread (the engine is `Rc`-based and never crosses threads). The jobs (a sweep's or a
//! plan's points) are handed out over a crossbeam channel holding their indices in order: each
//! thread takes the next one when it is free. Outcomes come back over a second channel and are
//! put in job order, so they do not depend on the number of threads or on which finished first.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// `f` over `items` on `jobs` scoped threads; results in item order. On errors, the error of the
/// lowest failing item (no new item starts once one has failed); an interrupt
/// ([`crate::interrupt`]) is an error only when no item failed otherwise.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<R>> {
    let all = parallel_partial(items, jobs, f, done);
    let mut out = Vec::with_capacity(all.len());
    let mut interrupted = false;
    for r in all {
        match r {
            Some(Ok(r)) => out.push(r),
            Some(Err(Error::Interrupted { .. })) | None => interrupted = true,
            Some(Err(e)) => return Err(e),
        }
    }
    if interrupted {
        return Err(Error::Interrupted {
            kept: String::new(),
        });
    }
    Ok(out)
}

/// Like [`parallel_map`], but every item's outcome in item order: `None` for an item that
/// never started (an earlier one failed, or an interrupt came first), so that what finished
/// can be kept.
pub fn parallel_partial<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> Result<R> + Sync,
    done: &(dyn Fn() + Sync),
) -> Vec<Option<Result<R>>> {
    let failed = AtomicBool::new(false);
    let jobs = jobs.clamp(1, items.len().max(1));
    // Every index queued up front, in order, and the sender dropped: a thread's receive ends
    // when the points run out.
    let (to_do, points) = crossbeam_channel::unbounded();
    for i in 0..items.len() {
        to_do.send(i).expect("the receiver is alive");
    }
    drop(to_do);
    let (outcome, outcomes) = crossbeam_channel::unbounded::<(usize, Result<R>)>();
    // The caller's stop token, if it has one: each thread's checks ask it too, so stopping the
    // caller's work stops its pool's and no other work in the process.
    let stop = crate::interrupt::current_stop();
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..jobs)
            .map(|_| {
                let (points, outcome) = (points.clone(), outcome.clone());
                let (f, failed, stop) = (&f, &failed, stop.clone());
                scope.spawn(move || {
                    let work = || {
                        while !failed.load(Ordering::Relaxed) && !crate::interrupt::requested() {
                            let Ok(i) = points.recv() else { break };
                            let r = f(&items[i]);
                            match &r {
                                Err(Error::Interrupted { .. }) => {}
                                Err(_) => failed.store(true, Ordering::Relaxed),
                                Ok(_) => done(),
                            }
                            // The receiver outlives the scope.
                            let _ = outcome.send((i, r));
                        }
                    };
                    match stop {
                        Some(stop) => crate::interrupt::with_stop(stop, work),
                        None => work(),
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
    });
    drop(outcome);
    let mut out: Vec<Option<Result<R>>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in outcomes {
        out[i] = Some(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn results_keep_item_order_whatever_the_threads() {
        let items: Vec<u64> = (0..50).collect();
        let square = |x: &u64| Ok(x * x);
        let one = parallel_map(&items, 1, square, &|| ()).unwrap();
        let four = parallel_map(&items, 4, square, &|| ()).unwrap();
        assert_eq!(one, four);
        assert_eq!(four[7], 49);
        assert!(parallel_map(&[] as &[u64], 3, square, &|| ())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn every_point_is_handed_out_once() {
        use std::sync::atomic::AtomicU32;
        let items: Vec<usize> = (0..97).collect();
        let calls: Vec<AtomicU32> = items.iter().map(|_| AtomicU32::new(0)).collect();
        let out = parallel_partial(
            &items,
            5,
            |&i| Ok(calls[i].fetch_add(1, Ordering::Relaxed)),
            &|| (),
        );
        assert!(out.iter().all(|r| matches!(r, Some(Ok(0)))));
        assert!(calls.iter().all(|c| c.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn the_lowest_failing_item_is_reported() {
        let items: Vec<u64> = (0..40).collect();
        for jobs in [1, 3] {
            let err = parallel_map(
                &items,
                jobs,
                |&x| {
                    if x % 10 == 5 {
                        Err(Error::arg("x", x.to_string()))
                    } else {
                        Ok(x)
                    }
                },
                &|| (),
            )
            .unwrap_err();
            assert_eq!(err.to_string(), "x: 5");
        }
    }

    #[test]
    fn the_callers_stop_token_stops_its_pool() {
        // The pool's threads asked only the process-wide flag: a caller stopped by its own
        // token (the Python package's calls) left its pool running every item.
        use std::sync::Arc;
        let items: Vec<u64> = (0..40).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let out = crate::interrupt::with_stop(Arc::clone(&stop), || {
            parallel_partial(
                &items,
                2,
                |&x| {
                    if x == 3 {
                        stop.store(true, Ordering::Relaxed);
                    }
                    crate::interrupt::check().map(|()| x)
                },
                &|| (),
            )
        });
        let ran = out.iter().filter(|r| matches!(r, Some(Ok(_)))).count();
        assert!(ran < 10, "{ran} items ran after the stop");
        assert!(
            !crate::interrupt::requested(),
            "the process-wide flag is untouched"
        );
    }
}
