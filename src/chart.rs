//! Charts as SVG, shared by the commands that draw them: line charts (one line per series over
//! numeric x and y, an optional horizontal threshold (an SLA), a legend) and grouped bar charts
//! (a group of bars per category, y from 0). The sweep plots (grid, error bars) take their
//! colours and tick labels from here too.
//!
//! Text is SVG `<text>` (plotters' SVG backend needs no font files); the output depends only on
//! the data, so it is byte-for-byte deterministic.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// The drawing area of a chart's SVG document.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
/// What drawing into an SVG string returns.
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;
/// A chart's plot, over numeric x and y.
type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// An SVG document of 900 x 540 on a white background, drawn by `draw`.
fn svg_document(draw: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (900, 540)).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    text
}

/// A chart's frame on `root`: its title, margins and label areas, over `x` and `y`.
fn frame<'a, 'b>(
    root: &'a Area<'b>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Plot<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
}

/// The legend of the series drawn on `c`, boxed in the plot's upper left.
fn draw_legend<'b: 'a, 'a>(c: &mut Plot<'a, 'b>) -> Drawn {
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}

/// Line colours (Tableau 20: ten colours, then their light tints), picked in order.
pub const COLORS: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(255, 152, 150),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(199, 199, 199),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
];

/// A tick value without float noise (0.8999999999999999 shows as 0.9): six significant digits,
/// then the shortest text that reads back as that number.
pub fn tidy(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let scale = 10f64.powi(5 - v.abs().log10().floor() as i32);
    format!("{}", (v * scale).round() / scale)
}

/// One line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    /// Its (x, y) points, drawn in x order.
    pub points: Vec<(f64, f64)>,
}

/// A chart to draw.
#[derive(Clone, Debug)]
pub struct LineChart<'a> {
    /// The title.
    pub title: &'a str,
    /// The x axis' description.
    pub x_desc: &'a str,
    /// The y axis' description.
    pub y_desc: &'a str,
    /// The lines.
    pub series: &'a [Series],
    /// A dashed horizontal line at this y, with its legend entry.
    pub threshold: Option<(f64, String)>,
}

/// `chart` as an SVG document (900 x 540). The y axis is logarithmic when every value is
/// positive and they span more than two decades.
pub fn line_svg(chart: &LineChart<'_>) -> String {
    let ys = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.threshold.as_ref().map(|t| t.0))
    };
    let lo = ys().fold(f64::INFINITY, f64::min);
    let hi = ys().fold(f64::NEG_INFINITY, f64::max);
    let log = lo > 0.0 && hi.is_finite() && hi / lo > 100.0;
    svg_document(|root| {
        if log {
            let series: Vec<Series> = chart
                .series
                .iter()
                .map(|s| Series {
                    label: s.label.clone(),
                    points: s.points.iter().map(|&(x, y)| (x, y.log10())).collect(),
                })
                .collect();
            let y_desc = format!("{}, log scale", chart.y_desc);
            let logged = LineChart {
                series: &series,
                y_desc: &y_desc,
                threshold: chart.threshold.clone().map(|(y, l)| (y.log10(), l)),
                ..chart.clone()
            };
            draw(root, &logged, true)
        } else {
            draw(root, chart, false)
        }
    })
}

fn range(values: impl Iterator<Item = f64> + Clone, pad: f64) -> (f64, f64) {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    (lo - span * pad, hi + span * pad)
}

/// Draws `chart`; with `log`, its y values are log10 of the data and ticks show 10^y.
fn draw(root: &Area<'_>, chart: &LineChart<'_>, log: bool) -> Drawn {
    let points = chart.series.iter().flat_map(|s| s.points.iter().copied());
    let (x_lo, x_hi) = range(points.clone().map(|p| p.0), 0.03);
    let ys = points
        .map(|p| p.1)
        .chain(chart.threshold.as_ref().map(|t| t.0));
    let (y_lo, y_hi) = range(ys, 0.08);
    // Head room for the legend inside the plot.
    let lines = chart.series.len() + usize::from(chart.threshold.is_some());
    let y_hi = y_hi + (y_hi - y_lo) * (lines as f64 * 0.05).min(0.5);
    let mut c = frame(root, chart.title, x_lo..x_hi, y_lo..y_hi)?;
    c.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .x_label_formatter(&|v| tidy(*v))
        .y_label_formatter(&|v| {
            if log {
                tidy(crate::round::round_py(10f64.powf(*v), 3))
            } else {
                tidy(*v)
            }
        })
        .light_line_style(TRANSPARENT)
        .draw()?;
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], color));
        if pts.len() <= 40 {
            c.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
    }
    if let Some((y, label)) = &chart.threshold {
        let (y, n) = (*y, 40);
        let step = (x_hi - x_lo) / n as f64;
        // Dashes: every other segment of the line.
        for k in (0..n).step_by(2) {
            let a = x_lo + step * k as f64;
            c.draw_series(std::iter::once(PathElement::new(
                vec![(a, y), (a + step, y)],
                BLACK.stroke_width(1),
            )))?;
        }
        c.draw_series(std::iter::once(PathElement::new(vec![(x_lo, y)], BLACK)))?
            .label(label.clone())
            .legend(|(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 8, ly)], BLACK));
    }
    draw_legend(&mut c)
}

/// A grouped bar chart: for each category, one bar per series, side by side.
#[derive(Clone, Debug)]
pub struct BarChart<'a> {
    /// The title.
    pub title: &'a str,
    /// The x axis' description.
    pub x_desc: &'a str,
    /// The y axis' description.
    pub y_desc: &'a str,
    /// The categories, left to right (the x tick labels).
    pub categories: &'a [String],
    /// Each series' legend entry and its value per category (missing ones draw no bar).
    pub series: &'a [(String, Vec<f64>)],
}

/// `chart` as an SVG document (900 x 540). The y axis starts at 0, so bar heights compare as
/// ratios.
pub fn bar_svg(chart: &BarChart<'_>) -> String {
    svg_document(|root| draw_bars(root, chart))
}

fn draw_bars(root: &Area<'_>, chart: &BarChart<'_>) -> Drawn {
    let n = chart.categories.len().max(1);
    let top = chart
        .series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top } else { 1.0 };
    // Head room for the legend inside the plot.
    let y_hi = top * (1.08 + (chart.series.len() as f64 * 0.05).min(0.5));
    let mut c = frame(root, chart.title, -0.5..n as f64 - 0.5, 0.0..y_hi)?;
    let label = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 {
            chart
                .categories
                .get(i as usize)
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    c.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .x_labels(n.min(16))
        .x_label_formatter(&label)
        .y_label_formatter(&|v| tidy(*v))
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .draw()?;
    let width = 0.8 / chart.series.len().max(1) as f64;
    for (k, (name, values)) in chart.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let left = |i: usize| i as f64 - 0.4 + width * k as f64;
        c.draw_series(values.iter().enumerate().map(|(i, &v)| {
            Rectangle::new([(left(i), 0.0), (left(i) + width * 0.9, v)], color.filled())
        }))?
        .label(name.clone())
        .legend(move |(lx, ly)| Rectangle::new([(lx, ly - 5), (lx + 12, ly + 5)], color.filled()));
    }
    draw_legend(&mut c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_carry_no_float_noise() {
        assert_eq!(tidy(0.8999999999999999), "0.9");
        assert_eq!(tidy(1.2000000000000002), "1.2");
        assert_eq!(tidy(576_756_696.0), "576757000");
        assert_eq!(tidy(-0.30000000000000004), "-0.3");
        assert_eq!(tidy(0.0), "0");
    }

    #[test]
    fn a_chart_names_its_lines_and_threshold_and_is_deterministic() {
        let series = [
            Series {
                label: "rr".into(),
                points: vec![(1.0, 900.0), (2.0, 400.0)],
            },
            Series {
                label: "kv".into(),
                points: vec![(2.0, 300.0), (1.0, 700.0)],
            },
        ];
        let chart = LineChart {
            title: "ttft_p90_ms",
            x_desc: "workers",
            y_desc: "ms",
            series: &series,
            threshold: Some((500.0, "SLA <= 500".into())),
        };
        let svg = line_svg(&chart);
        for text in ["rr", "kv", "SLA &lt;= 500", "workers"] {
            assert!(svg.contains(text), "{text}");
        }
        assert_eq!(svg, line_svg(&chart));
    }

    #[test]
    fn bars_start_at_zero_and_name_their_categories() {
        let categories = ["worker0".to_string(), "worker1".to_string()];
        let series = [
            ("alpha".to_string(), vec![1400.0, 1500.0]),
            ("beta".to_string(), vec![1450.0]),
        ];
        let chart = BarChart {
            title: "requests per worker",
            x_desc: "worker",
            y_desc: "requests",
            categories: &categories,
            series: &series,
        };
        let svg = bar_svg(&chart);
        for text in ["worker0", "worker1", "alpha", "beta", ">\n0\n<"] {
            assert!(svg.contains(text), "{text}");
        }
        assert_eq!(svg, bar_svg(&chart));
    }

    #[test]
    fn values_spanning_decades_get_a_log_axis() {
        let series = [Series {
            label: "a".into(),
            points: vec![(1.0, 700_000.0), (2.0, 900.0), (3.0, 500.0)],
        }];
        let chart = LineChart {
            title: "t",
            x_desc: "x",
            y_desc: "ms",
            series: &series,
            threshold: None,
        };
        assert!(line_svg(&chart).contains("ms, log scale"));
    }
}
