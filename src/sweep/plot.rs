//! One SVG plot per metric (per metric and value of the facet axis, if the sweep names one):
//! x = the first axis, one line per value of the second axis, and at each (x, line) the mean
//! over the remaining axes (seeds, say) with a min–max error bar.
//!
//! Text is SVG `<text>` (plotters' SVG backend needs no font files); the output depends only on
//! the results, so it is byte-for-byte deterministic.

use plotters::prelude::*;
use serde_json::Value as Json;

use super::results::SweepResults;
use crate::chart::axis::readable;
use crate::chart::{color, draw_legend, frame, svg_document, Area, Drawn, Entry, Scale};
use crate::metrics::{metric as metric_info, setting_label, Kind};

/// The plot's file name for `metric`: dots replaced by underscores, `.svg`.
pub fn file_name(metric: &str) -> String {
    format!("{}.svg", metric.replace('.', "_"))
}

/// The plot's file name for `metric` at facet value `value`: `<metric>.<value>.svg`, the value
/// reduced to a file name (a path to its file stem; characters other than letters, digits, `-`
/// and `_` replaced by `_`).
pub fn facet_file_name(metric: &str, value: &Json) -> String {
    let text = label(value);
    let stem = std::path::Path::new(&text)
        .file_stem()
        .map_or(text.clone(), |s| s.to_string_lossy().into_owned());
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.{clean}.svg", metric.replace('.', "_"))
}

/// Every plot a complete sweep writes, as (file name, facet value index).
pub fn plot_files(results: &SweepResults) -> Vec<(String, String, Option<usize>)> {
    let mut out = Vec::new();
    for m in &results.metrics {
        match results.facet_axis() {
            None => out.push((m.clone(), file_name(m), None)),
            Some((_, axis)) => {
                for (i, v) in axis.values.iter().enumerate() {
                    out.push((m.clone(), facet_file_name(m, v), Some(i)));
                }
            }
        }
    }
    out
}

/// Mean, minimum and maximum of a group of values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    /// Arithmetic mean (summed in point order).
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// The mean, min and max of `values`; `None` when empty.
pub fn stat(values: &[f64]) -> Option<Stat> {
    let (&first, _) = values.split_first()?;
    let (mut min, mut max, mut sum) = (first, first, 0.0);
    for &v in values {
        min = min.min(v);
        max = max.max(v);
        sum += v;
    }
    Some(Stat {
        mean: sum / values.len() as f64,
        min,
        max,
    })
}

/// `metric`'s values grouped by line (second axis value) and x (first axis value):
/// `groups[line][x]`, over every other axis, in point order; with `facet`, only the points at
/// that value index of the facet axis. Non-numeric values are left out.
pub fn groups(results: &SweepResults, metric: &str, facet: Option<usize>) -> Vec<Vec<Vec<f64>>> {
    let xs = results.axes[0].values.len();
    let lines = results.axes.get(1).map_or(1, |a| a.values.len());
    let mut out = vec![vec![Vec::new(); xs]; lines];
    let facet_at = results.facet_axis().map(|(i, _)| i);
    for p in &results.points {
        let combo = results.combination(p.index);
        if let (Some(at), Some(v)) = (facet_at, facet) {
            if combo[at] != v {
                continue;
            }
        }
        let line = combo.get(1).copied().unwrap_or(0);
        if let Some(v) = p.metrics.get(metric).and_then(Json::as_f64) {
            out[line][combo[0]].push(v);
        }
    }
    out
}

/// A value's label: its JSON text, strings unquoted.
fn label(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The x axis: numeric when every first-axis value is a number, categorical otherwise.
struct XAxis {
    /// Position of each first-axis value.
    pos: Vec<f64>,
    /// Label of each first-axis value.
    labels: Vec<String>,
    range: (f64, f64),
}

impl XAxis {
    fn of(values: &[Json]) -> Self {
        let labels: Vec<String> = values.iter().map(label).collect();
        let numeric: Option<Vec<f64>> = values.iter().map(Json::as_f64).collect();
        match numeric {
            Some(pos) => {
                let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = pos.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let pad = if hi > lo { (hi - lo) * 0.08 } else { 0.5 };
                XAxis {
                    pos,
                    labels,
                    range: (lo - pad, hi + pad),
                }
            }
            None => XAxis {
                pos: (0..values.len()).map(|i| i as f64).collect(),
                labels,
                range: (-0.5, values.len() as f64 - 0.5),
            },
        }
    }

    /// Small x offsets of `lines` lines, so that their error bars do not hide each other.
    fn dodge(&self, lines: usize) -> Vec<f64> {
        let mut sorted = self.pos.clone();
        sorted.sort_by(f64::total_cmp);
        let gap = sorted
            .windows(2)
            .map(|w| w[1] - w[0])
            .filter(|&g| g > 0.0)
            .fold(1.0f64.min(self.range.1 - self.range.0), f64::min);
        let step = if lines > 1 {
            gap * 0.12 / (lines - 1) as f64
        } else {
            0.0
        };
        (0..lines)
            .map(|i| (i as f64 - (lines - 1) as f64 / 2.0) * step)
            .collect()
    }

    fn label_at(&self, x: f64) -> String {
        match self.pos.iter().position(|&p| p == x) {
            Some(i) => short_label(&Json::String(self.labels[i].clone())),
            None => format!("{x}"),
        }
    }
}

/// The SVG plot of `metric` (complete results), at the facet value index `facet` if any: the
/// metric's name and unit from [`crate::metrics`], its axis fitted to its values (a share on
/// [0, 1], or from 0 when all are small; a log axis over more than a decade), the legend beside
/// the plot, and each point's value written by it when there are few.
pub fn svg(results: &SweepResults, metric: &str, facet: Option<usize>) -> String {
    let stats: Vec<Vec<Option<Stat>>> = groups(results, metric, facet)
        .iter()
        .map(|line| line.iter().map(|vs| stat(vs)).collect())
        .collect();
    let values: Vec<f64> = stats
        .iter()
        .flatten()
        .flatten()
        .flat_map(|s| [s.min, s.max])
        .collect();
    let info = metric_info(metric);
    let y = Scale::fit(&values, info.kind, true);
    let height = 540.max(90 + 21 * stats.len() as u32);
    svg_document(height, |plot, legend| {
        draw(plot, legend, results, (metric, facet), &y, &stats)
    })
}

fn draw(
    plot: &Area<'_>,
    legend: &Area<'_>,
    results: &SweepResults,
    (metric, facet): (&str, Option<usize>),
    y: &Scale,
    stats: &[Vec<Option<Stat>>],
) -> Drawn {
    let info = metric_info(metric);
    let x = XAxis::of(&results.axes[0].values);
    let mut keys = x.pos.clone();
    keys.sort_by(f64::total_cmp);
    keys.dedup();
    let x_scale = Scale {
        log: false,
        lo: x.range.0,
        hi: x.range.1,
        ticks: keys,
        kind: Kind::Other,
    };
    let x_name = setting_label(&results.axes[0].key);
    let mut title = format!("{} against {x_name}", info.label);
    if let (Some((_, axis)), Some(v)) = (results.facet_axis(), facet) {
        let name = setting_label(&axis.key);
        title.push_str(&format!(", {name} = {}", short_label(&axis.values[v])));
    }
    let rest: Vec<String> = results
        .axes
        .iter()
        .skip(2)
        .filter(|a| a.values.len() > 1 && results.facet.as_ref() != Some(&a.key))
        .map(|a| setting_label(&a.key))
        .collect();
    let mut y_desc = if rest.is_empty() {
        info.label.clone()
    } else {
        format!(
            "{} (mean; bars: min-max over {})",
            info.label,
            rest.join(", ")
        )
    };
    if y.log {
        y_desc.push_str(", log scale");
    }
    let x_label = |v: &f64| x.label_at(*v);
    let mut c = frame(plot, &title, (&x_scale, &x_name), (y, &y_desc), &x_label)?;
    let dodge = x.dodge(stats.len());
    let few = stats.iter().flatten().flatten().count() <= 12;
    let mut entries = Vec::new();
    // Few points: each one's value is written beside it (placed after the lines, apart).
    let mut values: Vec<(i32, i32, String, RGBColor)> = Vec::new();
    for (i, line) in stats.iter().enumerate() {
        let color = color(i);
        let mut pts: Vec<(f64, Stat)> = line
            .iter()
            .enumerate()
            .filter_map(|(xi, s)| s.map(|s| (x.pos[xi] + dodge[i], s)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let at = |v: f64| y.to_plot(v);
        c.draw_series(LineSeries::new(
            pts.iter().map(|&(px, s)| (px, at(s.mean))),
            color.stroke_width(2),
        ))?;
        c.draw_series(
            pts.iter()
                .map(|&(px, s)| Circle::new((px, at(s.mean)), 3, color.filled())),
        )?;
        if few {
            for &(px, s) in &pts {
                let (bx, by) = c.backend_coord(&(px, at(s.mean)));
                values.push((bx, by, readable(s.mean), color));
            }
        }
        for &(px, s) in pts.iter().filter(|(_, s)| s.max > s.min) {
            c.draw_series(std::iter::once(PathElement::new(
                vec![(px, at(s.min)), (px, at(s.max))],
                color,
            )))?;
            for end in [s.min, s.max] {
                c.draw_series(std::iter::once(
                    EmptyElement::at((px, at(end)))
                        + PathElement::new(vec![(-5, 0), (5, 0)], color),
                ))?;
            }
        }
        let label = match results.axes.get(1) {
            Some(a) => label(&a.values[i]),
            None => info.label.clone(),
        };
        entries.push(Entry {
            label,
            color,
            dashed: false,
            marker: true,
        });
    }
    draw_values(plot, values)?;
    let legend_title = results
        .axes
        .get(1)
        .map_or(String::new(), |a| setting_label(&a.key));
    draw_legend(legend, &legend_title, &entries)
}

/// Writes each value to the right of its point, moving labels of nearby points apart (at
/// least 14 px between labels at one x), so that close values stay readable.
fn draw_values(plot: &Area<'_>, mut values: Vec<(i32, i32, String, RGBColor)>) -> Drawn {
    values.sort_by_key(|v| (v.0 / 40, v.1));
    let mut placed: Vec<(i32, i32)> = Vec::new();
    for (x, y, text, color) in values {
        let mut ty = y - 7;
        while let Some(&(_, py)) = placed
            .iter()
            .find(|(px, py)| (px - x).abs() < 40 && (py - ty).abs() < 14)
        {
            ty = py + 14;
        }
        placed.push((x, ty));
        plot.draw(&Text::new(
            text,
            (x + 8, ty),
            ("sans-serif", 12).into_font().color(&color),
        ))?;
    }
    Ok(())
}

/// A value's label, a path shortened to its file stem.
fn short_label(v: &Json) -> String {
    let text = label(v);
    if text.contains('/') {
        if let Some(stem) = std::path::Path::new(&text).file_stem() {
            return stem.to_string_lossy().into_owned();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::results::{AxisValues, PointResult};
    use serde_json::json;

    #[test]
    fn stat_is_mean_min_max() {
        assert_eq!(
            stat(&[2.0, 4.0, 9.0]),
            Some(Stat {
                mean: 5.0,
                min: 2.0,
                max: 9.0
            })
        );
        assert_eq!(stat(&[]), None);
    }

    fn two_by_two_by_two() -> SweepResults {
        let axis = |k: &str, v: Vec<Json>| AxisValues {
            key: k.into(),
            values: v,
        };
        let axes = vec![
            axis("cluster.workers", vec![json!(2), json!(4)]),
            axis("router.policy", vec![json!("rr"), json!("kv")]),
            axis("seed", vec![json!(1), json!(2)]),
        ];
        let points = (0..8)
            .map(|i| PointResult {
                index: i,
                axes: Default::default(),
                metrics: [("m".to_string(), json!(i as f64))].into_iter().collect(),
                warnings: Vec::new(),
            })
            .collect();
        SweepResults {
            facet: None,
            set: Vec::new(),
            base: "b".into(),
            metrics: vec!["m".into()],
            axes,
            points_total: 8,
            points,
            contents: None,
        }
    }

    #[test]
    fn groups_are_by_second_then_first_axis_over_the_rest() {
        // Index = workers * 4 + policy * 2 + seed.
        let g = groups(&two_by_two_by_two(), "m", None);
        assert_eq!(
            g,
            vec![
                vec![vec![0.0, 1.0], vec![4.0, 5.0]],
                vec![vec![2.0, 3.0], vec![6.0, 7.0]]
            ]
        );
    }

    #[test]
    fn the_svg_has_title_labels_and_legend() {
        let svg = svg(&two_by_two_by_two(), "m", None);
        assert!(svg.starts_with("<svg"));
        for text in ["m against workers", "routing policy", ">\nkv\n<", ">\n4\n<"] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert_eq!(svg, super::svg(&two_by_two_by_two(), "m", None));
        assert_eq!(file_name("ttft_ms.p50"), "ttft_ms_p50.svg");
        let path = serde_json::json!("../data/traces/mooncake synthetic.jsonl");
        assert_eq!(
            facet_file_name("ttft_ms.p90", &path),
            "ttft_ms_p90.mooncake_synthetic.svg"
        );
    }

    #[test]
    fn a_facet_keeps_only_its_value_s_points() {
        let mut r = two_by_two_by_two();
        r.facet = Some(r.axes[2].key.clone());
        let all = groups(&r, "m", None);
        let first = groups(&r, "m", Some(0));
        let second = groups(&r, "m", Some(1));
        for line in 0..2 {
            for x in 0..2 {
                assert_eq!(first[line][x].len(), 1);
                assert_eq!(
                    first[line][x].len() + second[line][x].len(),
                    all[line][x].len()
                );
            }
        }
        let names: Vec<String> = plot_files(&r).into_iter().map(|f| f.1).collect();
        assert_eq!(names, vec!["m.1.svg", "m.2.svg"]);
        assert!(
            svg(&r, "m", Some(1)).contains("m against workers, seed = 2"),
            "the facet value is in the title"
        );
    }

    #[test]
    fn facet_file_names_are_file_stems_made_safe() {
        let path = serde_json::json!("../data/traces/mooncake synthetic.jsonl");
        assert_eq!(
            facet_file_name("ttft_ms.p90", &path),
            "ttft_ms_p90.mooncake_synthetic.svg"
        );
    }
}
