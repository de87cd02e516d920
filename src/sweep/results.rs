//! A sweep's results: what `results.json` holds, shared by the runner, the writer, the merger and
//! the plots.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// The contents of `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepResults {
    /// The base scenario as written in the sweep file.
    pub base: String,
    /// Metric paths, in file order.
    pub metrics: Vec<String>,
    /// The axes, in file order.
    pub axes: Vec<AxisValues>,
    /// Points in the whole sweep (not only this shard's).
    pub points_total: usize,
    /// The points run, in index order.
    pub points: Vec<PointResult>,
    /// The axis whose every value gets plots of its own (`facet` in the sweep file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facet: Option<String>,
    /// The command line's `--set` overrides, applied to the base before the axes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
    /// The digest of the base scenario's and every point's input files (`Sweep::contents`):
    /// a resume or a merge refuses points run on other contents. Absent from older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

/// One axis: its scenario key and values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisValues {
    /// The dotted scenario key.
    pub key: String,
    /// Its values, in file order.
    pub values: Vec<Json>,
}

/// One point's settings and metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointResult {
    /// Position in the product of the axes (the first axis varies slowest).
    pub index: usize,
    /// Axis key → value.
    pub axes: Map<String, Json>,
    /// Metric → value.
    pub metrics: Map<String, Json>,
    /// The run's warnings (a hot spot, a blind router, ...), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl SweepResults {
    /// The facet axis's position and values, if the sweep has one.
    pub fn facet_axis(&self) -> Option<(usize, &AxisValues)> {
        let key = self.facet.as_ref()?;
        self.axes.iter().enumerate().find(|(_, a)| &a.key == key)
    }

    /// The points' warnings summarised: each kind once, naming its first point by its axes,
    /// with a count of the other points that gave it ([`crate::warnings::summarize`]).
    pub fn warning_lines(&self) -> Vec<String> {
        let labels: Vec<String> = self
            .points
            .iter()
            .map(|p| {
                let axes: Vec<String> = p.axes.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("point {} ({})", p.index, axes.join(", "))
            })
            .collect();
        crate::warnings::summarize(
            labels
                .iter()
                .zip(&self.points)
                .map(|(l, p)| (l.as_str(), p.warnings.as_slice())),
            ("point", "points"),
        )
    }

    /// Whether every point of the sweep is here.
    pub fn is_complete(&self) -> bool {
        self.points.len() == self.points_total
    }

    /// Each axis' value index at point `index`.
    pub fn combination(&self, index: usize) -> Vec<usize> {
        let lens: Vec<usize> = self.axes.iter().map(|a| a.values.len()).collect();
        super::combination(&lens, index)
    }
}

/// Replaces every float by the value serde_json reads back from its own text, so that results
/// read from a shard's `results.json` equal the results that wrote it (serde_json's default float
/// parser can be one unit off on 17-digit values).
pub fn canonical(results: &mut SweepResults) {
    for a in &mut results.axes {
        a.values.iter_mut().for_each(settle);
    }
    for p in &mut results.points {
        p.axes.values_mut().for_each(settle);
        p.metrics.values_mut().for_each(settle);
    }
}

/// `x` as its own JSON text reads back (see [`canonical`]).
pub fn settle_f64(x: f64) -> f64 {
    let mut v = Json::from(x);
    settle(&mut v);
    v.as_f64().unwrap_or(x)
}

fn settle(v: &mut Json) {
    match v {
        Json::Number(n) if n.is_f64() => {
            for _ in 0..8 {
                let text = serde_json::to_string(n).expect("a number serialises");
                let back: serde_json::Number = serde_json::from_str(&text).expect("reads back");
                if back == *n {
                    break;
                }
                *n = back;
            }
        }
        Json::Array(a) => a.iter_mut().for_each(settle),
        Json::Object(m) => m.values_mut().for_each(settle),
        _ => {}
    }
}
