//! `dynsim plan`: from a workload and SLAs to a deployment answer. For each routing policy,
//! either the fewest workers in a range that meet every SLA at one load, or the highest load
//! (arrival speedup) in a range that a worker count sustains.
//!
//! The search ([`search`]) is pure: it asks an evaluator for batches of points (so that a
//! batch runs on all cores) and narrows each policy's bracket with every batch, [`PROBES`]
//! points per policy at a time: a 4-ary bisection. The points probed depend only on the range,
//! the SLAs and the results, never on the number of cores, so `plan.json` does not either.
//! Monotonicity (more workers never hurt, more load never helps) is what makes a bisection
//! right, and it is not taken on faith: the points on both sides of each answer are always run,
//! and a policy whose evaluated points contradict it is reported as not monotone.
//!
//! What the search found is written out by `plan/output.rs`: `plan.json`, the plots, the table and
//! the summary of the runs' warnings.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Result;

mod output;

pub use output::{plan_json, plots, table, warning_summary};

/// How a metric compares with its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<=`.
    AtMost,
    /// `>=`.
    AtLeast,
}

/// One service-level objective, `KEY<=VALUE` or `KEY>=VALUE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sla {
    /// The key as written (`ttft_p90_ms`).
    pub key: String,
    /// The report path it reads (`ttft_ms.p90`).
    pub path: String,
    /// The comparison.
    pub op: Op,
    /// The bound.
    pub bound: f64,
}

impl Sla {
    /// Whether `value` meets it.
    pub fn met_by(&self, value: f64) -> bool {
        match self.op {
            Op::AtMost => value <= self.bound,
            Op::AtLeast => value >= self.bound,
        }
    }

    /// `KEY<=VALUE` as written.
    pub fn text(&self) -> String {
        let op = match self.op {
            Op::AtMost => "<=",
            Op::AtLeast => ">=",
        };
        format!("{}{op}{}", self.key, self.bound)
    }
}

impl FromStr for Sla {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (key, op, bound) = if let Some((k, v)) = s.split_once("<=") {
            (k, Op::AtMost, v)
        } else if let Some((k, v)) = s.split_once(">=") {
            (k, Op::AtLeast, v)
        } else {
            return Err(format!(
                "{s:?} is not KEY<=VALUE or KEY>=VALUE (for example ttft_p90_ms<=500)"
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("{s:?} names no metric"));
        }
        let bound: f64 = bound
            .trim()
            .parse()
            .ok()
            .filter(|b: &f64| b.is_finite())
            .ok_or_else(|| format!("{s:?}: the bound must be a finite number"))?;
        let metric = crate::metrics::metric(key);
        crate::metrics::check_bound(&metric, bound).map_err(|m| format!("{s:?}: {m}"))?;
        Ok(Sla {
            key: key.to_string(),
            path: metric.path,
            op,
            bound,
        })
    }
}

/// What the search varies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Axis {
    /// Workers, `min..=max`: the answer is the fewest that meet every SLA.
    Workers {
        /// Fewest.
        min: usize,
        /// Most.
        max: usize,
    },
    /// Load (a multiple of the workload's arrival rate), `min..=max`: the answer is the highest
    /// that every SLA survives, within `tolerance` (relative).
    Load {
        /// Lowest.
        min: f64,
        /// Highest.
        max: f64,
        /// The relative width at which the search stops (0.01: 1 %).
        tolerance: f64,
    },
}

impl Axis {
    /// `workers` or `load`.
    pub fn name(&self) -> &'static str {
        match self {
            Axis::Workers { .. } => "workers",
            Axis::Load { .. } => "load",
        }
    }

    fn bounds(&self) -> (f64, f64) {
        match *self {
            Axis::Workers { min, max } => (min as f64, max as f64),
            Axis::Load { min, max, .. } => (min, max),
        }
    }

    /// Whether larger values are the good side (more workers help; more load hurts).
    fn good_high(&self) -> bool {
        matches!(self, Axis::Workers { .. })
    }
}

/// One evaluated point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The varied value (a worker count or a load).
    pub value: f64,
    /// Whether every SLA held.
    pub meets: bool,
    /// Each SLA key's value.
    pub metrics: BTreeMap<String, f64>,
    /// The run's warnings (each once).
    pub warnings: Vec<String>,
}

/// One policy's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyPlan {
    /// The policy.
    pub policy: String,
    /// The fewest workers or highest load meeting every SLA; `None` when no point in the range
    /// does.
    pub answer: Option<f64>,
    /// Whether every evaluated point agrees with the answer (passes on its good side, fails on
    /// the other).
    pub monotone: bool,
    /// Every point evaluated, by value.
    pub points: Vec<Point>,
}

/// Points probed per policy and round: each round cuts a policy's bracket into `PROBES + 1`
/// parts. A constant, so that what is run does not depend on how many runs go at once.
pub const PROBES: usize = 3;

/// Searches `axis` for each of `policies`, `per_round` points per policy and round (the
/// planner uses [`PROBES`]); `eval` runs a batch of (policy index, value) points and returns
/// them in order.
pub fn search(
    axis: &Axis,
    policies: &[String],
    per_round: usize,
    mut eval: impl FnMut(&[(usize, f64)]) -> Result<Vec<Point>>,
) -> Result<Vec<PolicyPlan>> {
    let (min, max) = axis.bounds();
    let good_high = axis.good_high();
    let mut seen: Vec<BTreeMap<u64, Point>> = vec![BTreeMap::new(); policies.len()];
    let mut run = |probes: Vec<(usize, f64)>, seen: &mut Vec<BTreeMap<u64, Point>>| {
        let fresh: Vec<(usize, f64)> = probes
            .into_iter()
            .filter(|(p, v)| !seen[*p].contains_key(&v.to_bits()))
            .collect();
        let mut unique: Vec<(usize, f64)> = Vec::new();
        for probe in fresh {
            if !unique.iter().any(|u| u.0 == probe.0 && u.1 == probe.1) {
                unique.push(probe);
            }
        }
        if unique.is_empty() {
            return Ok(());
        }
        for ((p, _), point) in unique.iter().zip(eval(&unique)?) {
            seen[*p].insert(point.value.to_bits(), point);
        }
        Ok::<(), crate::error::Error>(())
    };
    let meets = |seen: &BTreeMap<u64, Point>, v: f64| seen[&v.to_bits()].meets;
    // Both ends first.
    run(
        (0..policies.len())
            .flat_map(|p| [(p, min), (p, max)])
            .collect(),
        &mut seen,
    )?;
    let (good_end, bad_end) = if good_high { (max, min) } else { (min, max) };
    // Per policy: the bracket (bad, good) still open, or the answer.
    let mut brackets: Vec<Option<(f64, f64)>> = Vec::new();
    let mut answers: Vec<Option<f64>> = Vec::new();
    for s in &seen {
        if !meets(s, good_end) {
            brackets.push(None);
            answers.push(None);
        } else if meets(s, bad_end) {
            brackets.push(None);
            answers.push(Some(bad_end));
        } else {
            brackets.push(Some((bad_end, good_end)));
            answers.push(None);
        }
    }
    let narrow = |bad: f64, good: f64| match *axis {
        Axis::Workers { .. } => (good - bad).abs() <= 1.0,
        Axis::Load { tolerance, .. } => good.max(bad) / good.min(bad) <= 1.0 + tolerance,
    };
    for _round in 0..64 {
        let active: Vec<usize> = (0..policies.len())
            .filter(|&p| brackets[p].is_some_and(|(b, g)| !narrow(b, g)))
            .collect();
        if active.is_empty() {
            break;
        }
        let k = per_round.max(1);
        let mut probes = Vec::new();
        for &p in &active {
            let (bad, good) = brackets[p].expect("active");
            for j in 1..=k {
                let f = j as f64 / (k + 1) as f64;
                let v = match axis {
                    Axis::Workers { .. } => (bad + (good - bad) * f).round(),
                    Axis::Load { .. } => {
                        round_sig(bad.min(good) * (bad.max(good) / bad.min(good)).powf(f), 4)
                    }
                };
                if (v - bad) * (good - v) > 0.0 {
                    probes.push((p, v));
                }
            }
        }
        run(probes, &mut seen)?;
        for &p in &active {
            let (bad, good) = brackets[p].expect("active");
            let inside = |v: f64| (v - bad) * (good - v) > 0.0;
            // The good end moves to the passing point nearest the bad end; the bad end to the
            // failing point nearest that, on the bad side of it.
            let new_good = seen[p]
                .values()
                .filter(|pt| pt.meets && inside(pt.value))
                .map(|pt| pt.value)
                .fold(good, |acc, v| {
                    if (v - acc) * (bad - acc) > 0.0 {
                        v
                    } else {
                        acc
                    }
                });
            let new_bad = seen[p]
                .values()
                .filter(|pt| !pt.meets && (pt.value - bad) * (new_good - pt.value) > 0.0)
                .map(|pt| pt.value)
                .fold(bad, |acc, v| {
                    if (v - acc) * (new_good - acc) > 0.0 {
                        v
                    } else {
                        acc
                    }
                });
            brackets[p] = Some((new_bad, new_good));
        }
    }
    for (answer, bracket) in answers.iter_mut().zip(&brackets) {
        if let Some((_, good)) = bracket {
            *answer = Some(*good);
        }
    }
    // The points on both sides of each answer.
    let mut sides = Vec::new();
    for (p, answer) in answers.iter().enumerate() {
        if let (Some(a), Axis::Workers { .. }) = (answer, axis) {
            for v in [a - 1.0, a + 1.0] {
                if (min..=max).contains(&v) {
                    sides.push((p, v));
                }
            }
        }
    }
    run(sides, &mut seen)?;
    Ok(policies
        .iter()
        .zip(answers)
        .zip(seen)
        .map(|((policy, answer), seen)| {
            let points: Vec<Point> = {
                let mut pts: Vec<Point> = seen.into_values().collect();
                pts.sort_by(|a, b| a.value.total_cmp(&b.value));
                pts
            };
            let monotone = points.iter().all(|pt| match answer {
                None => !pt.meets,
                Some(a) => {
                    let good_side = if good_high {
                        pt.value >= a
                    } else {
                        pt.value <= a
                    };
                    pt.meets == good_side
                }
            });
            PolicyPlan {
                policy: policy.clone(),
                answer,
                monotone,
                points,
            }
        })
        .collect())
}

impl Sla {
    /// How far `value` misses the bound, relative to it (0 when met).
    pub fn shortfall(&self, value: f64) -> f64 {
        let gap = match self.op {
            Op::AtMost => value - self.bound,
            Op::AtLeast => self.bound - value,
        };
        gap.max(0.0) / self.bound.abs().max(f64::MIN_POSITIVE)
    }
}

impl PolicyPlan {
    /// When no point meets every SLA: the point that comes nearest (the smallest worst relative
    /// shortfall over the SLAs; the first by value on ties).
    pub fn nearest(&self, slas: &[Sla]) -> Option<&Point> {
        if self.answer.is_some() {
            return None;
        }
        let worst = |pt: &Point| {
            slas.iter()
                .map(|s| {
                    pt.metrics
                        .get(&s.key)
                        .map_or(f64::INFINITY, |&v| s.shortfall(v))
                })
                .fold(0.0, f64::max)
        };
        self.points
            .iter()
            .reduce(|best, pt| if worst(pt) < worst(best) { pt } else { best })
    }
}

/// `v` rounded to `digits` significant digits.
fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point of `value` whose SLA metric is `metric`.
    pub(super) fn point(value: f64, metric: f64, sla: &Sla) -> Point {
        Point {
            value,
            meets: sla.met_by(metric),
            metrics: [(sla.key.clone(), metric)].into_iter().collect(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn sla_keys_map_to_report_paths() {
        let s: Sla = "ttft_p90_ms<=500".parse().unwrap();
        assert_eq!(
            (s.path.as_str(), s.op, s.bound),
            ("ttft_ms.p90", Op::AtMost, 500.0)
        );
        let t: Sla = "throughput_rps >= 12.5".parse().unwrap();
        assert_eq!((t.path.as_str(), t.op), ("throughput_rps", Op::AtLeast));
        assert!("ttft_p90_ms=5".parse::<Sla>().is_err());
        assert!("ttft_p90_ms<=inf".parse::<Sla>().is_err());
        assert!("<=3".parse::<Sla>().is_err());
        let negative = "ttft_p90_ms<=-5".parse::<Sla>().unwrap_err();
        assert!(negative.contains("must be positive"), "{negative}");
        let dotted: Sla = "ttft_ms.p90<=500".parse().unwrap();
        assert_eq!(dotted.path, s.path, "one metric, either spelling");
    }

    #[test]
    fn fewest_workers_by_bisection_with_both_sides_run() {
        // TTFT p90 = 1000 / workers: <= 130 first holds at 8 workers.
        let sla: Sla = "ttft_p90_ms<=130".parse().unwrap();
        let mut batches = 0;
        let plans = search(
            &Axis::Workers { min: 1, max: 64 },
            &["rr".into()],
            3,
            |probes| {
                batches += 1;
                Ok(probes
                    .iter()
                    .map(|&(_, v)| point(v, 1000.0 / v, &sla))
                    .collect())
            },
        )
        .unwrap();
        let p = &plans[0];
        assert_eq!(p.answer, Some(8.0));
        assert!(p.monotone);
        let values: Vec<f64> = p.points.iter().map(|pt| pt.value).collect();
        assert!(values.contains(&7.0) && values.contains(&9.0), "{values:?}");
        assert!(batches <= 6, "{batches} batches");
        assert!(p.points.len() < 20, "far fewer runs than the 64 points");
    }

    #[test]
    fn no_answer_when_the_range_cannot_meet_it_and_non_monotone_is_flagged() {
        let sla: Sla = "ttft_p90_ms<=1".parse().unwrap();
        let plans = search(
            &Axis::Workers { min: 2, max: 9 },
            &["a".into()],
            2,
            |probes| Ok(probes.iter().map(|&(_, v)| point(v, 10.0, &sla)).collect()),
        )
        .unwrap();
        assert_eq!(plans[0].answer, None);
        // Nothing meets it: the nearest point is the one whose TTFT misses by the least.
        let falling = search(
            &Axis::Workers { min: 2, max: 9 },
            &["a".into()],
            2,
            |probes| {
                Ok(probes
                    .iter()
                    .map(|&(_, v)| point(v, 100.0 / v, &sla))
                    .collect())
            },
        )
        .unwrap();
        let nearest = falling[0].nearest(std::slice::from_ref(&sla)).unwrap();
        assert_eq!(nearest.value, 9.0);
        // A bump right above the answer: 4 workers fail although 3 pass. The point above the
        // answer is always run, so the contradiction shows.
        let bumpy = search(
            &Axis::Workers { min: 1, max: 8 },
            &["b".into()],
            1,
            |probes| {
                Ok(probes
                    .iter()
                    .map(|&(_, v)| point(v, if v >= 3.0 && v != 4.0 { 0.0 } else { 9.0 }, &sla))
                    .collect())
            },
        )
        .unwrap();
        assert_eq!(bumpy[0].answer, Some(3.0));
        assert!(!bumpy[0].monotone);
        assert!(bumpy[0]
            .points
            .iter()
            .any(|pt| pt.value == 4.0 && !pt.meets));
    }

    #[test]
    fn highest_load_within_tolerance() {
        // Sustained while load <= 3.3.
        let sla: Sla = "ttft_p90_ms<=100".parse().unwrap();
        let plans = search(
            &Axis::Load {
                min: 1.0,
                max: 8.0,
                tolerance: 0.01,
            },
            &["x".into(), "y".into()],
            4,
            |probes| {
                Ok(probes
                    .iter()
                    .map(|&(p, v)| {
                        let limit = if p == 0 { 3.3 } else { 100.0 };
                        point(v, if v <= limit { 50.0 } else { 500.0 }, &sla)
                    })
                    .collect())
            },
        )
        .unwrap();
        let a = plans[0].answer.unwrap();
        assert!((3.3 / 1.011..=3.3).contains(&a), "{a}");
        assert!(plans[0]
            .points
            .iter()
            .any(|pt| !pt.meets && pt.value <= a * 1.011));
        assert_eq!(plans[1].answer, Some(8.0), "the whole range holds");
    }
}
