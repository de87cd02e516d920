//! Range checks on a deserialised scenario. Each failure names the dotted key, its value and the
//! problem, so the loader can point at the line that set it.

use super::{Fault, Limit, Scenario, Workload};

/// One invalid setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Dotted key path, e.g. `bus.drop_rate` or `faults[0].worker`.
    pub key: String,
    /// The value as written.
    pub value: String,
    /// What is wrong, e.g. `is outside 0..=1`.
    pub problem: String,
}

fn bad(key: &str, value: impl ToString, problem: &str) -> Invalid {
    Invalid {
        key: key.to_string(),
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

fn at_least_one(key: &str, n: usize) -> Result<(), Invalid> {
    if n == 0 {
        return Err(bad(key, n, "must be at least 1"));
    }
    Ok(())
}

fn non_negative(key: &str, x: f64) -> Result<(), Invalid> {
    if !x.is_finite() || x < 0.0 {
        return Err(bad(key, x, "must be a finite number >= 0"));
    }
    Ok(())
}

fn positive(key: &str, x: f64) -> Result<(), Invalid> {
    if !x.is_finite() || x <= 0.0 {
        return Err(bad(key, x, "must be a finite number > 0"));
    }
    Ok(())
}

fn limit(key: &str, l: Limit) -> Result<(), Invalid> {
    match l {
        Limit::Count(n) => at_least_one(key, n),
        Limit::Unbounded => Ok(()),
    }
}

/// The number of worker actors the scenario asks for (prefill + decode when disaggregated and
/// not colocated).
pub fn worker_count(s: &Scenario) -> usize {
    if !s.disagg.enabled {
        s.cluster.workers
    } else if s.disagg.colocated {
        s.disagg.prefill_workers
    } else {
        s.disagg.prefill_workers + s.disagg.decode_workers
    }
}

/// Checks every range; the first problem found is returned.
pub fn validate(s: &Scenario) -> Result<(), Invalid> {
    match &s.workload {
        Workload::PrefixRepeat(w) => {
            at_least_one("workload.prefixes", w.prefixes)?;
            at_least_one("workload.reps", w.reps)?;
            non_negative("workload.interval_ms", w.interval_ms)?;
        }
        Workload::Trace(t) => {
            if t.path.is_empty() {
                return Err(bad("workload.path", "\"\"", "must name a trace file"));
            }
            at_least_one("workload.trace_block_size", t.trace_block_size)?;
            positive("workload.speedup", t.speedup)?;
            if let Some(c) = t.concurrency {
                at_least_one("workload.concurrency", c)?;
            }
            if let Some(l) = t.limit {
                at_least_one("workload.limit", l)?;
            }
        }
        Workload::Synthetic(p) => {
            p.validate()
                .map_err(|(key, problem)| bad(&format!("workload.{key}"), "", &problem))?;
        }
    }
    let c = &s.cluster;
    at_least_one("cluster.workers", c.workers)?;
    at_least_one("cluster.block_size", c.block_size)?;
    non_negative("cluster.service_ms", c.service_ms)?;
    limit("cluster.kv_capacity_blocks", c.kv_capacity_blocks)?;

    let r = &s.router;
    non_negative("router.overlap_weight", r.overlap_weight)?;
    non_negative("router.temperature", r.temperature)?;
    non_negative("router.ttl_s", r.ttl_s)?;

    let b = &s.bus;
    if !(0.0..=1.0).contains(&b.drop_rate) {
        return Err(bad("bus.drop_rate", b.drop_rate, "is outside 0..=1"));
    }
    non_negative("bus.latency_ms", b.latency_ms)?;
    non_negative("bus.jitter_ms", b.jitter_ms)?;
    for (i, w) in b.outages.iter().enumerate() {
        non_negative(&format!("bus.outages[{i}].start_ms"), w.start_ms)?;
        if !(w.end_ms.is_finite() && w.end_ms > w.start_ms) {
            return Err(bad(
                &format!("bus.outages[{i}].end_ms"),
                w.end_ms,
                "must be a finite number after start_ms",
            ));
        }
    }

    if let Some(t) = &s.timing {
        for (name, coeffs) in [
            ("timing.prefill_coeffs", t.prefill_coeffs),
            ("timing.decode_coeffs", t.decode_coeffs),
        ] {
            if coeffs.iter().any(|x| !x.is_finite()) {
                return Err(bad(name, format!("{coeffs:?}"), "must be finite numbers"));
            }
        }
        non_negative("timing.decode_floor_ms", t.decode_floor_ms)?;
        limit("timing.max_batch", t.max_batch)?;
        non_negative("timing.request_overhead_ms", t.request_overhead_ms)?;
    }

    let d = &s.disagg;
    if d.enabled {
        at_least_one("disagg.prefill_workers", d.prefill_workers)?;
        at_least_one("disagg.decode_workers", d.decode_workers)?;
        if d.colocated && d.prefill_workers != d.decode_workers {
            return Err(bad(
                "disagg.decode_workers",
                d.decode_workers,
                "must equal prefill_workers when colocated (each GPU runs one of each)",
            ));
        }
    }
    positive("disagg.link_gbps", d.link_gbps)?;
    non_negative("disagg.transfer_overhead_ms", d.transfer_overhead_ms)?;
    for (name, v) in [
        ("disagg.model.layers", d.model.layers),
        ("disagg.model.kv_heads", d.model.kv_heads),
        ("disagg.model.head_dim", d.model.head_dim),
        ("disagg.model.dtype_bytes", d.model.dtype_bytes),
    ] {
        at_least_one(name, v as usize)?;
    }

    let workers = worker_count(s);
    for (i, f) in s.faults.iter().enumerate() {
        match f {
            Fault::Restart {
                worker,
                at_ms,
                down_ms,
            } => {
                if *worker >= workers {
                    return Err(bad(
                        &format!("faults[{i}].worker"),
                        worker,
                        &format!("is not a worker (there are {workers}: 0..{workers})"),
                    ));
                }
                non_negative(&format!("faults[{i}].at_ms"), *at_ms)?;
                positive(&format!("faults[{i}].down_ms"), *down_ms)?;
            }
        }
    }
    Ok(())
}
