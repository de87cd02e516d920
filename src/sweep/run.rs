//! Running a sweep's points on worker threads.
//!
//! Each point is a whole simulation run inside one thread (the engine is `Rc`-based and never
//! crosses threads); threads take the next point from an atomic counter and results are stored
//! by point index, so the results do not depend on the number of threads.

use std::path::Path;

use serde_json::Value as Json;

use super::results::{canonical, AxisValues, PointResult, SweepResults};
use super::{check_metrics, lookup, Shard, Sweep};
use crate::error::{Error, Result};
use crate::run::run_scenario;
use crate::run::run_scenarios;
use crate::scenario::Scenario;

/// Runs the points of `sweep` that `shard` selects on `jobs` threads, calling `done` after each
/// point. Every point's scenario (the shard's or not) is loaded and every metric checked before
/// anything runs.
pub fn run_sweep(
    sweep: &Sweep,
    shard: Shard,
    jobs: usize,
    done: &(dyn Fn() + Sync),
) -> Result<SweepResults> {
    let indices: Vec<usize> = (0..sweep.points_total())
        .filter(|&i| shard.selects(i))
        .collect();
    // Every point is loaded (so every shard rejects the same bad values), the shard's are kept.
    let mut loaded = Vec::with_capacity(indices.len());
    for i in 0..sweep.points_total() {
        let point = sweep.load_point(i)?;
        if shard.selects(i) {
            loaded.push(point);
        }
    }
    check_metrics(sweep, &report_shape()?)?;
    let reports = run_scenarios(&loaded, jobs, done)?;
    let mut points = Vec::with_capacity(indices.len());
    for (&index, run) in indices.iter().zip(reports) {
        let report = serde_json::to_value(&run).expect("a report serialises to JSON");
        let warnings = run.warnings;
        let mut metrics = serde_json::Map::new();
        for m in &sweep.metrics {
            let v = lookup(&report, m).ok_or_else(|| {
                Error::field(
                    &sweep.path,
                    sweep.metric_line(m),
                    "metrics",
                    format!("{m:?} is not in the report of point {index}"),
                )
            })?;
            metrics.insert(m.clone(), v.clone());
        }
        points.push(PointResult {
            index,
            axes: axes_of(sweep, index),
            metrics,
            warnings,
        });
    }
    let mut results = SweepResults {
        facet: sweep.facet.clone(),
        set: sweep.set_text(),
        base: sweep.base.clone(),
        metrics: sweep.metrics.clone(),
        axes: sweep
            .axes
            .iter()
            .map(|a| AxisValues {
                key: a.key.clone(),
                values: a.values.iter().map(to_json).collect(),
            })
            .collect(),
        points_total: sweep.points_total(),
        points,
    };
    canonical(&mut results);
    Ok(results)
}

/// Point `index`'s axis values by key.
fn axes_of(sweep: &Sweep, index: usize) -> serde_json::Map<String, Json> {
    sweep
        .axes
        .iter()
        .zip(sweep.combination(index))
        .map(|(a, v)| (a.key.clone(), to_json(&a.values[v])))
        .collect()
}

fn to_json(v: &toml::Value) -> Json {
    serde_json::to_value(v).expect("a TOML value converts to JSON")
}

/// The JSON shape of a report, from a run of the default (lab-sized) scenario, with the
/// trace-only fields present.
pub fn report_shape() -> Result<Json> {
    let report = run_scenario(&Scenario::default(), Path::new("."), None)?;
    let mut shape = serde_json::to_value(&report).expect("a report serialises to JSON");
    if let Json::Object(m) = &mut shape {
        // Fields only some runs have: trace rows (trace workloads), index quality (policies
        // that learn from events).
        m.entry("trace").or_insert_with(|| {
            serde_json::to_value(crate::report::TraceRows::default()).expect("serialises")
        });
        m.entry("index").or_insert_with(|| {
            serde_json::to_value(crate::cluster::audit::IndexQuality::default())
                .expect("serialises")
        });
    }
    Ok(shape)
}
