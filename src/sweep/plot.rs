//! One SVG plot per metric (per metric and value of the facet axis, if the sweep names one):
//! x = the first axis, one line per value of the second axis, and at each (x, line) the mean
//! over the remaining axes (seeds, say) with a min–max error bar.
//!
//! Text is SVG `<text>` (plotters' SVG backend needs no font files); the output depends only on
//! the results, so it is byte-for-byte deterministic.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value as Json;

use super::results::SweepResults;
use crate::chart::{tidy, COLORS};

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
            Some(i) => self.labels[i].clone(),
            None => format!("{x}"),
        }
    }
}

/// A linear x coordinate whose ticks are exactly the axis values.
struct KeyedX {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
}

impl Ranged for KeyedX {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = limit.1 - limit.0;
        let at = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (span as f64 * at + 1e-3).floor() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.keys.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// The y range covering every error bar, padded; from 0 when every value is >= 0 and close.
fn y_range(stats: &[Vec<Option<Stat>>]) -> (f64, f64) {
    let all = stats.iter().flatten().flatten();
    let lo = all.clone().map(|s| s.min).fold(f64::INFINITY, f64::min);
    let hi = all.map(|s| s.max).fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else if hi != 0.0 {
        hi.abs() * 0.1
    } else {
        1.0
    };
    let bottom = if lo >= 0.0 && lo - pad < 0.0 {
        0.0
    } else {
        lo - pad
    };
    (bottom, hi + pad)
}

/// Whether values spanning `lo..=hi` are drawn on a logarithmic y axis: all positive, over more
/// than two decades (one hot-spotted policy next to balanced ones, say).
fn log_scale(stats: &[Vec<Option<Stat>>]) -> bool {
    let all = stats.iter().flatten().flatten();
    let lo = all.clone().map(|s| s.min).fold(f64::INFINITY, f64::min);
    let hi = all.map(|s| s.max).fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi.is_finite() && hi / lo > 100.0
}

/// The SVG plot of `metric` (complete results), at the facet value index `facet` if any. The
/// y axis is logarithmic when the values span more than two decades.
pub fn svg(results: &SweepResults, metric: &str, facet: Option<usize>) -> String {
    let mut stats: Vec<Vec<Option<Stat>>> = groups(results, metric, facet)
        .iter()
        .map(|line| line.iter().map(|vs| stat(vs)).collect())
        .collect();
    let log = log_scale(&stats);
    if log {
        for s in stats.iter_mut().flatten().flatten() {
            *s = Stat {
                mean: s.mean.log10(),
                min: s.min.log10(),
                max: s.max.log10(),
            };
        }
    }
    let mut text = String::new();
    {
        // A long legend goes beside the plot, one line of text per series.
        let height = 540.max(60 + 20 * stats.len() as u32);
        let width = if stats.len() > LEGEND_INSIDE {
            1160
        } else {
            900
        };
        let root = SVGBackend::with_string(&mut text, (width, height)).into_drawing_area();
        let title = match (results.facet_axis(), facet) {
            (Some((_, axis)), Some(v)) => format!("{metric} ({})", short_label(&axis.values[v])),
            _ => metric.to_string(),
        };
        let style = Style { title, log, height };
        draw(&root, results, &style, metric, &stats).expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    text
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Lines at most whose legend sits inside the plot (a longer one goes beside it).
const LEGEND_INSIDE: usize = 8;

/// How a plot is drawn.
struct Style {
    title: String,
    /// The stats are log10 of the values.
    log: bool,
    height: u32,
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

fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    results: &SweepResults,
    style: &Style,
    metric: &str,
    stats: &[Vec<Option<Stat>>],
) -> DrawResult {
    root.fill(&WHITE)?;
    let beside = stats.len() > LEGEND_INSIDE;
    let (plot_area, legend_area) = if beside {
        let (l, r) = root.split_horizontally(900);
        (l, Some(r))
    } else {
        (root.clone(), None)
    };
    let root = &plot_area;
    let x = XAxis::of(&results.axes[0].values);
    let (y_lo, y_hi) = y_range(stats);
    // Head room for a legend inside the plot (about 20 px per line of the plot area).
    let area = f64::from(style.height) - 110.0;
    let legend = if beside {
        0.0
    } else {
        ((stats.len() * 20 + 30) as f64 / area).min(0.6)
    };
    let y_hi = y_lo + (y_hi - y_lo) / (1.0 - legend);
    let dodge = x.dodge(stats.len());
    let mut keys = x.pos.clone();
    keys.sort_by(f64::total_cmp);
    keys.dedup();
    let mut chart = ChartBuilder::on(root)
        .caption(&style.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            KeyedX {
                lo: x.range.0,
                hi: x.range.1,
                keys,
            },
            y_lo..y_hi,
        )?;
    let rest: Vec<&str> = results
        .axes
        .iter()
        .skip(2)
        .filter(|a| a.values.len() > 1 && results.facet.as_ref() != Some(&a.key))
        .map(|a| a.key.as_str())
        .collect();
    let mut y_desc = if rest.is_empty() {
        metric.to_string()
    } else {
        format!("{metric} (mean; bars: min-max over {})", rest.join(", "))
    };
    if style.log {
        y_desc.push_str(", log scale");
    }
    let x_label = |v: &f64| x.label_at(*v);
    let y_label = |v: &f64| {
        if style.log {
            let value = 10f64.powf(*v);
            if value >= 100.0 {
                format!("{value:.0}")
            } else {
                format!("{value:.3}")
            }
        } else {
            tidy(*v)
        }
    };
    chart
        .configure_mesh()
        .x_desc(results.axes[0].key.as_str())
        .y_desc(y_desc)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, line) in stats.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<(f64, Stat)> = line
            .iter()
            .enumerate()
            .filter_map(|(xi, s)| s.map(|s| (x.pos[xi] + dodge[i], s)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let name = match results.axes.get(1) {
            Some(a) => format!("{} = {}", a.key, label(&a.values[i])),
            None => metric.to_string(),
        };
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|&(px, s)| (px, s.mean)),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], color));
        chart.draw_series(
            pts.iter()
                .map(|&(px, s)| Circle::new((px, s.mean), 3, color.filled())),
        )?;
        for &(px, s) in pts.iter().filter(|(_, s)| s.max > s.min) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(px, s.min), (px, s.max)],
                color,
            )))?;
            for end in [s.min, s.max] {
                chart.draw_series(std::iter::once(
                    EmptyElement::at((px, end)) + PathElement::new(vec![(-5, 0), (5, 0)], color),
                ))?;
            }
        }
    }
    match legend_area {
        None => {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()?;
        }
        Some(area) => {
            for i in 0..stats.len() {
                let color = COLORS[i % COLORS.len()];
                let y = 60 + 20 * i as i32;
                let name = results
                    .axes
                    .get(1)
                    .map_or(metric.to_string(), |a| label(&a.values[i]));
                area.draw(&PathElement::new(
                    vec![(10, y), (34, y)],
                    color.stroke_width(2),
                ))?;
                area.draw(&Text::new(name, (42, y - 7), ("sans-serif", 14)))?;
            }
            if let Some(a) = results.axes.get(1) {
                area.draw(&Text::new(a.key.clone(), (10, 30), ("sans-serif", 14)))?;
            }
        }
    }
    Ok(())
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
        for text in [
            ">\nm\n<",
            "cluster.workers",
            "router.policy = kv",
            ">\n4\n<",
        ] {
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
            svg(&r, "m", Some(1)).contains("m (2)"),
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
