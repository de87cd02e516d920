//! Sweeps: one base scenario run over every combination of a few settings.
//!
//! A sweep file names a base scenario, the report metrics to keep and the axes to vary:
//!
//! ```toml
//! base = "../scenarios/kv.toml"      # relative to this file
//! metrics = ["hit_rate", "block_hit_rate", "ttft_ms.p50"]
//! [axes]
//! "cluster.workers" = [2, 4, 8, 16]
//! "router.policy" = ["rr", "kv", "approx"]
//! seed = [1, 2, 3]
//! ```
//!
//! `facet = "workload.path"` (an axis after the first two) draws each metric once per value of
//! that axis instead of averaging over it.
//!
//! Every combination of axis values is one *point*; the first axis varies slowest, in the file's
//! key order, and a point's index is its position in that order. A point is the base scenario
//! with one `--set` per axis ([`Override`]). Metrics are dotted paths into the run report's JSON
//! (`ttft_ms.p50`, `events.applied`, `per_worker.0.routed`), or a latency spelled as the planner's
//! SLAs spell it (`ttft_p50_ms`): [`crate::metrics`].
//!
//! - [`file`](mod@file): reading and checking the sweep file.
//! - [`run`]: running the points in parallel (any `--jobs` gives the same results).
//! - [`results`]: what `results.json` holds.
//! - [`output`]: `results.json`, `results.csv`, merging shards.
//! - [`plot`]: one SVG per metric.

pub mod file;
pub mod output;
pub mod plot;
pub mod results;
pub mod run;

use std::path::PathBuf;
use std::str::FromStr;

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::scenario::load::Loaded;
use crate::scenario::{load_scenario, Override};

pub use file::{load_sweep, parse_sweep};
pub use output::{merge, read_results, resumable};
pub use results::{AxisValues, PointResult, SweepResults};
pub use run::{header, run_sweep, SweepOutcome};

/// A sweep file, checked.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The sweep file, as the user named it.
    pub path: PathBuf,
    /// The base scenario as written in the sweep file.
    pub base: String,
    /// The base scenario resolved against the sweep file's folder.
    pub base_path: PathBuf,
    /// Metric paths, in file order.
    pub metrics: Vec<String>,
    /// 1-based line of each metric.
    pub metric_lines: Vec<usize>,
    /// The axes, in file order.
    pub axes: Vec<Axis>,
    /// The axis whose every value gets plots of its own (not the first two: they are the plot's
    /// x and lines).
    pub facet: Option<String>,
    /// `--set` overrides from the command line, applied to the base before every point's axes.
    pub set: Vec<Override>,
}

/// One varied setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The scenario key, a dotted path (`cluster.workers`).
    pub key: String,
    /// Its values, in file order.
    pub values: Vec<toml::Value>,
    /// 1-based line of each value.
    pub lines: Vec<usize>,
}

/// The points of axes of `lens` values each: their product, `None` past `usize` (a sweep file
/// or a results.json may claim any lengths; both are checked with it before use).
pub(crate) fn points_of(lens: impl IntoIterator<Item = usize>) -> Option<usize> {
    lens.into_iter().try_fold(1usize, usize::checked_mul)
}

impl Sweep {
    /// Points in the whole sweep: the product of the axes' lengths.
    pub fn points_total(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Each axis' value index at point `index`.
    pub fn combination(&self, index: usize) -> Vec<usize> {
        let lens: Vec<usize> = self.axes.iter().map(|a| a.values.len()).collect();
        combination(&lens, index)
    }

    /// The overrides of point `index`: the command line's `--set`, then one per axis.
    pub fn overrides(&self, index: usize) -> Vec<Override> {
        let axes = self
            .axes
            .iter()
            .zip(self.combination(index))
            .map(|(a, v)| Override {
                key: a.key.clone(),
                value: a.values[v].clone(),
            });
        self.set.iter().cloned().chain(axes).collect()
    }

    /// The command line's `--set` overrides as `KEY=VALUE` text (as results record them).
    pub fn set_text(&self) -> Vec<String> {
        self.set
            .iter()
            .map(|o| format!("{}={}", o.key, o.value))
            .collect()
    }

    /// The digest of the files the sweep reads: its base scenario, then every file one of
    /// `points` (every point's scenario, [`Sweep::load_points`]) names (trace, model files,
    /// profile), each once, in the order the points first name them. Neither the order nor what
    /// counts as one file depends on how the paths are spelled (relative to another working
    /// folder, absolute): shards of one sweep run from different folders or machines on the same
    /// files agree.
    pub fn contents(&self, points: &[Loaded]) -> String {
        let mut seen = std::collections::HashSet::new();
        let mut named = Vec::new();
        for (_, path) in points.iter().flat_map(Loaded::input_files) {
            if seen.insert(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())) {
                named.push(path);
            }
        }
        let paths =
            std::iter::once(self.base_path.as_path()).chain(named.iter().map(PathBuf::as_path));
        crate::scenario::load::files_digest(paths)
    }

    /// Loads every point's scenario, in index order (every shard loads them all, so every
    /// shard rejects the same bad values).
    pub fn load_points(&self) -> Result<Vec<Loaded>> {
        (0..self.points_total())
            .map(|i| self.load_point(i))
            .collect()
    }

    /// Loads point `index`'s scenario; errors an axis value causes point at its line in the
    /// sweep file.
    pub fn load_point(&self, index: usize) -> Result<Loaded> {
        let combo = self.combination(index);
        load_scenario(&self.base_path, &self.overrides(index)).map_err(|e| {
            let axis_of = |key: &str| {
                self.axes.iter().zip(&combo).find(|(a, _)| {
                    key == a.key
                        || key.starts_with(&format!("{}.", a.key))
                        || key.starts_with(&format!("{}[", a.key))
                })
            };
            let at = |(a, &v): (&Axis, &usize)| format!("{}:{}", self.path.display(), a.lines[v]);
            match e {
                Error::Arg { flag, message } => match flag.strip_prefix("--set ") {
                    Some(key) => match axis_of(key) {
                        Some((a, &v)) => Error::field(
                            &self.path,
                            a.lines[v],
                            key,
                            format!("{}: {message}", a.values[v]),
                        ),
                        None => Error::Arg { flag, message },
                    },
                    None => Error::Arg { flag, message },
                },
                Error::Setting {
                    at: set,
                    key,
                    value,
                    problem,
                } if set == "--set" => Error::Setting {
                    at: axis_of(&key).map_or(set, at),
                    key,
                    value,
                    problem,
                },
                other => other,
            }
        })
    }

    /// The 1-based line of the `metrics` entry `metric` (1 if absent).
    pub fn metric_line(&self, metric: &str) -> usize {
        self.metrics
            .iter()
            .position(|m| m == metric)
            .map_or(1, |i| self.metric_lines[i])
    }
}

/// Value indices of point `index` over axes of lengths `lens`: the first axis varies slowest.
pub fn combination(lens: &[usize], mut index: usize) -> Vec<usize> {
    let mut out = vec![0; lens.len()];
    for (slot, &len) in out.iter_mut().zip(lens).rev() {
        *slot = index % len;
        index /= len;
    }
    out
}

/// `--shard I/N`: the points whose index % N == I.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 0-based.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

impl Shard {
    /// The whole sweep.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Whether point `point` is this shard's.
    pub fn selects(self, point: usize) -> bool {
        point % self.count == self.index
    }

    /// Whether this is the whole sweep.
    pub fn is_all(self) -> bool {
        self.count == 1
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not I/N"))?;
        let parse = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("{s:?} is not I/N with whole numbers"))
        };
        let (index, count) = (parse(i)?, parse(n)?);
        if index >= count {
            return Err(format!("{s:?}: I must be in 0..N"));
        }
        Ok(Shard { index, count })
    }
}

/// The value at a dotted `path` in a report's JSON; a numeric part indexes an array.
pub fn lookup<'a>(value: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(value, |v, part| match v {
        Json::Object(m) => m.get(part),
        Json::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// Checks every metric against `shape`, a report's JSON: each must name a number. Array indices
/// are checked against the array's first element, since the number of workers varies.
pub fn check_metrics(sweep: &Sweep, shape: &Json) -> Result<()> {
    for (metric, &line) in sweep.metrics.iter().zip(&sweep.metric_lines) {
        let bad = |m: String| Error::field(&sweep.path, line, "metrics", m);
        let mut v = shape;
        let mut seen = Vec::new();
        for part in crate::metrics::path(metric).split('.') {
            let next = match v {
                Json::Object(m) => m.get(part),
                Json::Array(a) => part.parse::<usize>().ok().and(a.first()),
                _ => None,
            };
            let Some(next) = next else {
                let within = if seen.is_empty() {
                    "the report".to_string()
                } else {
                    seen.join(".")
                };
                return Err(bad(format!(
                    "unknown metric {metric:?}: {within} has {}",
                    children(v)
                )));
            };
            seen.push(part);
            v = next;
        }
        if !v.is_number() {
            return Err(bad(format!(
                "metric {metric:?} is not a number; it has {}",
                children(v)
            )));
        }
    }
    Ok(())
}

fn children(v: &Json) -> String {
    match v {
        Json::Object(m) => m.keys().cloned().collect::<Vec<_>>().join(", "),
        Json::Array(_) => "indices 0, 1, ...".into(),
        other => format!("no fields (it is {other})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_axis_varies_slowest() {
        let all: Vec<Vec<usize>> = (0..6).map(|i| combination(&[2, 3], i)).collect();
        assert_eq!(
            all,
            [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]].map(Vec::from)
        );
        assert_eq!(combination(&[4, 3, 2], 23), [3, 2, 1]);
        assert_eq!(combination(&[1], 0), [0]);
    }

    #[test]
    fn shards_split_points_by_index_modulo() {
        let s: Shard = "1/3".parse().unwrap();
        let mine: Vec<usize> = (0..8).filter(|&p| s.selects(p)).collect();
        assert_eq!(mine, [1, 4, 7]);
        assert!(Shard::ALL.selects(5) && Shard::ALL.is_all());
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn metric_paths_walk_objects_and_arrays() {
        let v: Json = serde_json::json!({
            "hit_rate": 0.5,
            "ttft_ms": {"p50": 1.5},
            "per_worker": [{"routed": 3}, {"routed": 4}],
        });
        assert_eq!(lookup(&v, "hit_rate"), Some(&Json::from(0.5)));
        assert_eq!(lookup(&v, "ttft_ms.p50"), Some(&Json::from(1.5)));
        assert_eq!(lookup(&v, "per_worker.1.routed"), Some(&Json::from(4)));
        assert_eq!(lookup(&v, "ttft_ms.p55"), None);
        assert_eq!(lookup(&v, "hit_rate.x"), None);
        assert_eq!(lookup(&v, "per_worker.x"), None);
    }
}
