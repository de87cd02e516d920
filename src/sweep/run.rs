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
use crate::run::run_scenarios_partial;
use crate::scenario::load::Loaded;
use crate::scenario::Scenario;

/// What a sweep's run gave: its results (every point run, those of `prior` included) and
/// whether an interrupt stopped it before every selected point had run.
#[derive(Clone, Debug)]
pub struct SweepOutcome {
    /// The points that finished, in index order.
    pub results: SweepResults,
    /// Whether an interrupt left some of the shard's points unrun.
    pub interrupted: bool,
}

/// Runs the points of `sweep` that `shard` selects and `prior` (an interrupted run's points,
/// for `--resume`) does not hold, on `jobs` threads, calling `done` after each point. `points`
/// are every point's scenario ([`Sweep::load_points`]: the shard's or not), and every metric is
/// checked before anything
/// runs. On an interrupt the points that finished are returned with `interrupted` set.
pub fn run_sweep(
    sweep: &Sweep,
    points: Vec<Loaded>,
    shard: Shard,
    jobs: usize,
    done: &(dyn Fn() + Sync),
    prior: Vec<PointResult>,
) -> Result<SweepOutcome> {
    let have: std::collections::BTreeSet<usize> = prior.iter().map(|p| p.index).collect();
    let indices: Vec<usize> = (0..sweep.points_total())
        .filter(|&i| shard.selects(i) && !have.contains(&i))
        .collect();
    assert_eq!(points.len(), sweep.points_total(), "every point loaded");
    // The inputs' digest as the points start, not as the last one ends (a file edited meanwhile
    // would be recorded as what the points ran on).
    let header = header(sweep, &points);
    let loaded: Vec<Loaded> = points
        .into_iter()
        .enumerate()
        .filter(|(i, _)| indices.binary_search(i).is_ok())
        .map(|(_, point)| point)
        .collect();
    check_metrics(sweep, &report_shape()?)?;
    let mut interrupted = false;
    let mut finished = Vec::with_capacity(indices.len());
    for (&index, outcome) in indices
        .iter()
        .zip(run_scenarios_partial(&loaded, jobs, done))
    {
        match outcome {
            Some(Ok(report)) => finished.push((index, report)),
            Some(Err(Error::Interrupted { .. })) | None => interrupted = true,
            Some(Err(e)) => {
                // Which point failed, by its axes' values: the run's own error says why.
                let axes: Vec<String> = axes_of(sweep, index)
                    .into_iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect();
                return Err(Error::file(
                    &sweep.path,
                    format!("point {index} ({}): {e}", axes.join(", ")),
                ));
            }
        }
    }
    let mut points = prior;
    for (index, run) in finished {
        let report = serde_json::to_value(&run).expect("a report serialises to JSON");
        let warnings = run.warnings;
        let mut metrics = serde_json::Map::new();
        for m in &sweep.metrics {
            let v = lookup(&report, &crate::metrics::path(m)).ok_or_else(|| {
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
    let mut results = SweepResults { points, ..header };
    results.points.sort_by_key(|p| p.index);
    canonical(&mut results);
    Ok(SweepOutcome {
        results,
        interrupted,
    })
}

/// The sweep's results without points: what identifies it (base, metrics, axes, the digest
/// of the input files of `points`, every point's scenario, ...).
pub fn header(sweep: &Sweep, points: &[Loaded]) -> SweepResults {
    SweepResults {
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
        points: Vec::new(),
        contents: Some(sweep.contents(points)),
    }
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
        // that learn from events), KV tiers.
        m.entry("trace").or_insert_with(|| {
            serde_json::to_value(crate::report::TraceRows::default()).expect("serialises")
        });
        m.entry("index").or_insert_with(|| {
            serde_json::to_value(crate::cluster::audit::IndexQuality::default())
                .expect("serialises")
        });
        // And KV tiers (runs with `[kv.host]`).
        let tiers = crate::report::ByTier {
            device: Some(0.0),
            host: 0.0,
            disk: 0.0,
        };
        let bytes = crate::report::ByTier::<u64>::default();
        for (key, value) in [
            ("reuse_by_tier", serde_json::to_value(tiers)),
            ("kv_offload_bytes", serde_json::to_value(bytes)),
            ("kv_onload_bytes", serde_json::to_value(bytes)),
        ] {
            m.entry(key).or_insert_with(|| value.expect("serialises"));
        }
    }
    Ok(shape)
}
