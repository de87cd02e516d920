//! The planner's outputs: `plan.json`, one SVG per SLA, the table on stdout and the summary
//! of the runs' warnings on stderr.

use crate::chart::{line_svg, LineChart, Series};

use super::{Axis, Point, PolicyPlan, Sla};

/// `plan.json`: `{"search", "range", "sla", "policies": [{"policy", "workers" | "load" (null
/// when no point meets every SLA), "monotone", "points": [{"workers" | "load", "meets",
/// "metrics", "warnings"}], "nearest" (only when none meets them: the point that comes nearest,
/// {"workers" | "load", "metrics"})}]}`; worker counts are integers.
pub fn plan_json(axis: &Axis, slas: &[Sla], plans: &[PolicyPlan]) -> Vec<u8> {
    use serde_json::{json, Value as Json};
    let name = axis.name();
    let number = |v: f64| -> Json {
        match axis {
            Axis::Workers { .. } => json!(v as u64),
            Axis::Load { .. } => json!(v),
        }
    };
    let (min, max) = axis.bounds();
    let policies: Vec<Json> = plans
        .iter()
        .map(|p| {
            let points: Vec<Json> = p
                .points
                .iter()
                .map(|pt| {
                    json!({
                        name: number(pt.value),
                        "meets": pt.meets,
                        "metrics": pt.metrics,
                        "warnings": pt.warnings,
                    })
                })
                .collect();
            let mut entry = json!({
                "policy": p.policy,
                name: p.answer.map(number),
                "monotone": p.monotone,
                "points": points,
            });
            if let Some(pt) = p.nearest(slas) {
                entry["nearest"] = json!({name: number(pt.value), "metrics": pt.metrics});
            }
            entry
        })
        .collect();
    let doc = json!({
        "search": name,
        "range": [number(min), number(max)],
        "sla": slas.iter().map(Sla::text).collect::<Vec<_>>(),
        "policies": policies,
    });
    crate::output::pretty_json(&doc)
}

/// One SVG per SLA: its metric against the varied value, the points run per policy (marked,
/// joined by dotted lines), the bound dashed. Each is named after its key (`ttft_p90_ms.svg`);
/// a name already taken by an earlier SLA (`ttft_p90_ms<=500` and `ttft_p90_ms<=800`) gets the
/// first free `_2`, `_3`, ... suffix (`ttft_p90_ms_2.svg`), so that no SLA's plot replaces
/// another's.
pub fn plots(axis: &Axis, slas: &[Sla], plans: &[PolicyPlan]) -> Vec<(String, Vec<u8>)> {
    let mut taken: Vec<String> = Vec::new();
    slas.iter()
        .map(|sla| {
            let stem = sla.key.replace('.', "_");
            let name = (1..)
                .map(|n| {
                    if n == 1 {
                        format!("{stem}.svg")
                    } else {
                        format!("{stem}_{n}.svg")
                    }
                })
                .find(|name| !taken.contains(name))
                .expect("a free name");
            taken.push(name.clone());
            let series: Vec<Series> = plans
                .iter()
                .map(|p| Series {
                    label: p.policy.clone(),
                    points: p
                        .points
                        .iter()
                        .filter_map(|pt| pt.metrics.get(&sla.key).map(|&m| (pt.value, m)))
                        .collect(),
                })
                .collect();
            let metric = crate::metrics::metric(&sla.key);
            let x_desc = match axis {
                Axis::Workers { .. } => "workers",
                Axis::Load { .. } => "load (x the workload's arrival rate)",
            };
            let title = format!("{} against {}", metric.label, axis.name());
            let svg = line_svg(&LineChart {
                title: &title,
                x_desc,
                x_kind: crate::metrics::Kind::Count,
                y_desc: &metric.label,
                y_kind: metric.kind,
                legend: "policy",
                series: &series,
                threshold: Some((sla.bound, format!("SLA {}", sla.text()))),
                runs: true,
            });
            (name, svg.into_bytes())
        })
        .collect()
}

/// The readable table: one row per policy, with the answer's neighbours (the nearest points
/// run below and above it) and whether they met the SLAs, so that both sides show; a policy
/// that meets nothing shows the point that came nearest and its values. Numbers are printed
/// whole, as `plan.json` holds them (a metric of 1981.694 ms is not shown as 1981.69).
pub fn table(axis: &Axis, slas: &[Sla], plans: &[PolicyPlan]) -> String {
    let sla_text: Vec<String> = slas.iter().map(Sla::text).collect();
    let mut out = format!(
        "{} meeting {}\n{:<18} {:>10}  {:<11} {:<11} {:>6}  at the answer\n",
        match axis {
            Axis::Workers { .. } => "fewest workers",
            Axis::Load { .. } => "highest load",
        },
        sla_text.join(", "),
        "policy",
        axis.name(),
        "below",
        "above",
        "points"
    );
    for p in plans {
        let answer = p.answer.map_or("none".to_string(), |a| a.to_string());
        let side = |pick: fn(&Point, f64) -> bool, nearer: fn(f64, f64) -> bool| {
            let Some(a) = p.answer else {
                return "-".to_string();
            };
            p.points
                .iter()
                .filter(|pt| pick(pt, a))
                .reduce(|best, pt| {
                    if nearer(pt.value, best.value) {
                        pt
                    } else {
                        best
                    }
                })
                .map_or("-".to_string(), |pt| {
                    let verdict = if pt.meets { "pass" } else { "fail" };
                    format!("{} {verdict}", pt.value)
                })
        };
        let below = side(|pt, a| pt.value < a, |v, best| v > best);
        let above = side(|pt, a| pt.value > a, |v, best| v < best);
        let metrics = |pt: &Point| {
            pt.metrics
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join("  ")
        };
        let at = match (p.answer, p.nearest(slas)) {
            (Some(a), _) => p
                .points
                .iter()
                .find(|pt| pt.value == a)
                .map(metrics)
                .unwrap_or_default(),
            (None, Some(pt)) => format!("nearest at {} {}: {}", axis.name(), pt.value, metrics(pt)),
            (None, None) => String::new(),
        };
        let flag = if p.monotone {
            ""
        } else {
            "  (not monotone: see plan.json)"
        };
        out.push_str(&format!(
            "{:<18} {:>10}  {below:<11} {above:<11} {:>6}  {at}{flag}\n",
            p.policy,
            answer,
            p.points.len()
        ));
    }
    out
}

/// One line per kind of warning the runs gave, in the order first met: the first such warning,
/// where it came from, and how many other runs gave it ([`crate::warnings::summarize`]).
pub fn warning_summary(axis: &Axis, plans: &[PolicyPlan]) -> Vec<String> {
    let mut labels = Vec::new();
    let mut lists = Vec::new();
    for p in plans {
        for pt in &p.points {
            let at = match axis {
                Axis::Workers { .. } if pt.value == 1.0 => "1 worker".to_string(),
                Axis::Workers { .. } => format!("{} workers", pt.value),
                Axis::Load { .. } => format!("load {}", crate::chart::tidy(pt.value)),
            };
            labels.push(format!("{} at {at}", p.policy));
            lists.push(pt.warnings.as_slice());
        }
    }
    crate::warnings::summarize(
        labels.iter().map(String::as_str).zip(lists),
        ("run", "runs"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::point;
    use super::super::{search, PROBES};
    use super::*;

    #[test]
    fn the_table_shows_both_sides_and_warnings_are_summed_by_kind() {
        let sla: Sla = "ttft_p90_ms<=130".parse().unwrap();
        let axis = Axis::Workers { min: 1, max: 64 };
        let mut plans = search(&axis, &["rr".into()], PROBES, |probes| {
            Ok(probes
                .iter()
                .map(|&(_, v)| {
                    let mut pt = point(v, 1000.0 / v, &sla);
                    pt.warnings = vec![format!("hot spot: worker{} got {v} requests", v % 3.0)];
                    pt
                })
                .collect())
        })
        .unwrap();
        let text = table(&axis, std::slice::from_ref(&sla), &plans);
        let row = text.lines().nth(2).unwrap();
        assert!(
            row.contains(" 7 fail ") && row.contains(" 9 pass "),
            "{row}"
        );
        let runs = plans[0].points.len();
        let summary = warning_summary(&axis, &plans);
        assert_eq!(summary.len(), 1, "{summary:?}");
        assert!(
            summary[0].starts_with("rr at ")
                && summary[0].contains(": hot spot: worker")
                && summary[0].ends_with(&format!("(also at {} more runs)", runs - 1)),
            "{summary:?}"
        );
        plans[0].answer = None;
        let row = table(&axis, &[sla], &plans)
            .lines()
            .nth(2)
            .unwrap()
            .to_string();
        assert!(row.contains("none  -           -"), "{row}");
        // The nearest point is shown with its value (here the fewest workers meeting the SLA:
        // the answer was taken away, not the points).
        assert!(
            row.contains("nearest at workers 8: ttft_p90_ms 125"),
            "{row}"
        );
    }
}
