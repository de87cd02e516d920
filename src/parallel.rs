//! Running independent deterministic jobs on all cores: each job is a whole simulation run inside
//! one thread (the engine is `Rc`-based and never crosses threads); threads take the next job
//! from an atomic counter and results come back in job order, so they do not depend on the
//! number of threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let jobs = jobs.clamp(1, items.len().max(1));
    let ran: Vec<(usize, Result<R>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    while !failed.load(Ordering::Relaxed) && !crate::interrupt::requested() {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let r = f(item);
                        match &r {
                            Err(Error::Interrupted { .. }) => {}
                            Err(_) => failed.store(true, Ordering::Relaxed),
                            Ok(_) => done(),
                        }
                        mine.push((i, r));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut out: Vec<Option<Result<R>>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in ran {
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
}
