//! Charts as SVG, shared by the commands that draw them: line charts (one line per series over
//! numeric x and y, an optional horizontal threshold (an SLA), a legend beside the plot) and
//! grouped bar charts (a group of bars per category, y from 0). The sweep plots (grid, error
//! bars) take their frame, axes, colours and legend from here too ([`axis`]), as does a run's
//! plot over time ([`timeline`]).
//!
//! Text is SVG `<text>` (plotters' SVG backend needs no font files); the output depends only on
//! the data, so it is byte-for-byte deterministic.

pub mod axis;
pub mod scatter;
pub mod timeline;

use plotters::prelude::*;

pub use axis::{color, Keyed, Scale, PALETTE};

use crate::metrics::Kind;

/// The drawing area of a chart's SVG document.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
/// What drawing into an SVG string returns.
pub type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;
/// A chart's plot, over two keyed axes.
pub type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Keyed, Keyed>>;

/// Width of a chart's SVG document; the plot takes [`PLOT_WIDTH`] of it, the legend the rest.
pub const WIDTH: u32 = 980;
/// Width of the plot area, left of the legend.
pub const PLOT_WIDTH: u32 = 720;

/// An SVG document of `WIDTH` x `height` on a white background: `draw` gets the plot area
/// and the legend area beside it.
pub fn svg_document(height: u32, draw: impl FnOnce(&Area<'_>, &Area<'_>) -> Drawn) -> String {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, height)).into_drawing_area();
        let (plot, legend) = root.split_horizontally(PLOT_WIDTH);
        root.fill(&WHITE)
            .and_then(|()| draw(&plot, &legend))
            .expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    text
}

/// A chart's frame on `area`: its title, label areas and mesh over `x` and `y`, ticks labelled
/// by the scales.
pub fn frame<'a, 'b>(
    area: &'a Area<'b>,
    title: &str,
    (x, x_desc): (&Scale, &str),
    (y, y_desc): (&Scale, &str),
    x_label: &dyn Fn(&f64) -> String,
) -> Result<Plot<'a, 'b>, DrawingAreaErrorKind<std::io::Error>> {
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", caption_size(title)))
        .margin(14)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(x.coord(), y.coord())?;
    let y_label = |v: &f64| y.label(*v);
    c.configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(x_label)
        .y_label_formatter(&y_label)
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 13))
        .light_line_style(TRANSPARENT)
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;
    Ok(c)
}

/// The longest title, in characters, that fits the plot's width at the caption's 20 px.
const CAPTION_CHARS: usize = 90;

/// The caption's font size for `title`: 20 px, or smaller in proportion for a title longer
/// than [`CAPTION_CHARS`], whose ends a centred caption would otherwise push off the image (a
/// sweep's "block reuse (share of prompt blocks cached) against load ..., trace = ..." lost its
/// first words).
fn caption_size(title: &str) -> f64 {
    let chars = title.chars().count();
    if chars <= CAPTION_CHARS {
        20.0
    } else {
        20.0 * CAPTION_CHARS as f64 / chars as f64
    }
}

/// One legend entry.
pub struct Entry {
    /// Its text.
    pub label: String,
    /// Its colour.
    pub color: RGBColor,
    /// Drawn as a dashed line (a threshold), not a solid one.
    pub dashed: bool,
    /// A solid line drawn with a marker on it (its series' points are marked).
    pub marker: bool,
}

/// The legend, outside the data: a title and one row per entry in the legend area.
pub fn draw_legend(area: &Area<'_>, title: &str, entries: &[Entry]) -> Drawn {
    let font = ("sans-serif", 14);
    area.draw(&Text::new(title.to_string(), (8, 40), font))?;
    for (i, e) in entries.iter().enumerate() {
        let y = 66 + 21 * i as i32;
        if e.dashed {
            for k in 0..3 {
                let x = 8 + 9 * k;
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 5, y)],
                    e.color.stroke_width(2),
                ))?;
            }
        } else {
            area.draw(&PathElement::new(
                vec![(8, y), (32, y)],
                e.color.stroke_width(2),
            ))?;
            if e.marker {
                area.draw(&Circle::new((20, y), 3, e.color.filled()))?;
            }
        }
        let mut label = e.label.clone();
        if label.chars().count() > 30 {
            label = label.chars().take(29).collect::<String>() + "…";
        }
        area.draw(&Text::new(label, (40, y - 7), font))?;
    }
    Ok(())
}

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
    /// The x axis' description, with its unit.
    pub x_desc: &'a str,
    /// What x is (a latency spanning decades gets a log axis).
    pub x_kind: Kind,
    /// The y axis' description, with its unit.
    pub y_desc: &'a str,
    /// What y is (a share is drawn on [0, 1]).
    pub y_kind: Kind,
    /// The legend's title.
    pub legend: &'a str,
    /// The lines.
    pub series: &'a [Series],
    /// A dashed horizontal line at this y, with its legend entry.
    pub threshold: Option<(f64, String)>,
    /// The points are runs at chosen values (a planner's): each is marked, and they are joined
    /// by a thin dotted line, not a solid one, since nothing between them was run.
    pub runs: bool,
}

/// `chart` as an SVG document, the legend beside the plot. Either axis is logarithmic when its
/// values are positive and span more than a decade (a share never is).
pub fn line_svg(chart: &LineChart<'_>) -> String {
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let mut ys: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .collect();
    ys.extend(chart.threshold.as_ref().map(|t| t.0));
    let x = Scale::fit(&xs, chart.x_kind, chart.x_kind == Kind::Latency);
    let y = Scale::fit(&ys, chart.y_kind, true);
    let height = 540.max(90 + 21 * chart.series.len() as u32);
    svg_document(height, |plot, legend| {
        draw_lines(plot, legend, chart, &x, &y)
    })
}

fn draw_lines(
    plot: &Area<'_>,
    legend: &Area<'_>,
    chart: &LineChart<'_>,
    x: &Scale,
    y: &Scale,
) -> Drawn {
    let x_desc = log_note(chart.x_desc, x);
    let y_desc = log_note(chart.y_desc, y);
    let x_label = |v: &f64| x.label(*v);
    let mut c = frame(plot, chart.title, (x, &x_desc), (y, &y_desc), &x_label)?;
    let mut entries = Vec::new();
    for (i, s) in chart.series.iter().enumerate() {
        let color = color(i);
        let mut pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(px, py)| (x.to_plot(px), y.to_plot(py)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if chart.runs {
            c.draw_series(DashedLineSeries::new(
                pts.iter().copied(),
                2,
                4,
                color.stroke_width(1),
            ))?;
        } else {
            c.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
        }
        if chart.runs || pts.len() <= 40 {
            let r = if chart.runs { 4 } else { 3 };
            c.draw_series(pts.iter().map(|&p| Circle::new(p, r, color.filled())))?;
        }
        entries.push(Entry {
            label: s.label.clone(),
            color,
            dashed: false,
            marker: true,
        });
    }
    if let Some((bound, label)) = &chart.threshold {
        let t = y.to_plot(*bound);
        c.draw_series(DashedLineSeries::new(
            [(x.lo, t), (x.hi, t)],
            8,
            5,
            BLACK.stroke_width(2),
        ))?;
        entries.push(Entry {
            label: label.clone(),
            color: BLACK,
            dashed: true,
            marker: false,
        });
    }
    if chart.runs {
        plot.draw(&Text::new(
            "dots: the points run; dotted lines join them".to_string(),
            (80, plot.dim_in_pixel().1 as i32 - 16),
            ("sans-serif", 12).into_font().color(&BLACK.mix(0.6)),
        ))?;
    }
    draw_legend(legend, chart.legend, &entries)
}

/// `desc`, marked as log scale when the axis is.
fn log_note(desc: &str, s: &Scale) -> String {
    if s.log {
        format!("{desc}, log scale")
    } else {
        desc.to_string()
    }
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
    /// The legend's title.
    pub legend: &'a str,
    /// The categories, left to right (the x tick labels).
    pub categories: &'a [String],
    /// Each series' legend entry and its value per category (`None`, or past the end: no bar).
    pub series: &'a [(String, Vec<Option<f64>>)],
}

/// `chart` as an SVG document, the legend beside it. The y axis starts at 0, so bar heights
/// compare as ratios.
pub fn bar_svg(chart: &BarChart<'_>) -> String {
    svg_document(540, |plot, legend| draw_bars(plot, legend, chart))
}

fn draw_bars(plot: &Area<'_>, legend: &Area<'_>, chart: &BarChart<'_>) -> Drawn {
    let n = chart.categories.len().max(1);
    let top = chart
        .series
        .iter()
        .flat_map(|s| s.1.iter().flatten().copied())
        .fold(0.0, f64::max);
    let y = Scale::fit(
        &[0.0, if top > 0.0 { top } else { 1.0 }],
        Kind::Count,
        false,
    );
    let every = n.div_ceil(16);
    let x = Scale {
        log: false,
        lo: -0.5,
        hi: n as f64 - 0.5,
        ticks: (0..n).step_by(every).map(|i| i as f64).collect(),
        kind: Kind::Other,
    };
    let label = |v: &f64| {
        chart
            .categories
            .get(v.round().max(0.0) as usize)
            .cloned()
            .unwrap_or_default()
    };
    let mut c = frame(
        plot,
        chart.title,
        (&x, chart.x_desc),
        (&y, chart.y_desc),
        &label,
    )?;
    let width = 0.8 / chart.series.len().max(1) as f64;
    let mut entries = Vec::new();
    for (k, (name, values)) in chart.series.iter().enumerate() {
        let color = color(k);
        let left = |i: usize| i as f64 - 0.4 + width * k as f64;
        c.draw_series(values.iter().enumerate().filter_map(|(i, &v)| {
            let v = v?;
            Some(Rectangle::new(
                [(left(i), 0.0), (left(i) + width * 0.9, v)],
                color.filled(),
            ))
        }))?;
        entries.push(Entry {
            label: name.clone(),
            color,
            dashed: false,
            marker: true,
        });
    }
    draw_legend(legend, chart.legend, &entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_titles_shrink_to_the_plot_width_and_short_ones_keep_20_px() {
        assert_eq!(caption_size(&"x".repeat(CAPTION_CHARS)), 20.0);
        assert_eq!(caption_size(&"x".repeat(2 * CAPTION_CHARS)), 10.0);
    }

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
            x_kind: Kind::Count,
            y_desc: "ms",
            y_kind: Kind::Latency,
            legend: "policy",
            series: &series,
            threshold: Some((500.0, "SLA <= 500".into())),
            runs: true,
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
            ("alpha".to_string(), vec![Some(1400.0), Some(1500.0)]),
            ("beta".to_string(), vec![Some(1450.0)]),
        ];
        let chart = BarChart {
            title: "requests per worker",
            x_desc: "worker",
            y_desc: "requests",
            legend: "scenario",
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
            x_kind: Kind::Count,
            y_desc: "ms",
            y_kind: Kind::Latency,
            legend: "",
            series: &series,
            threshold: None,
            runs: false,
        };
        assert!(line_svg(&chart).contains("ms, log scale"));
    }
}
