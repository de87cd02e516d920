//! Predicted against measured: one point per measured row, a colour per group, the diagonal
//! (a perfect prediction) and the band within a given error drawn, both axes on one scale.

use plotters::prelude::*;

use super::{color, draw_legend, frame, svg_document, Area, Drawn, Entry, Scale, Series};
use crate::metrics::Kind;

/// A scatter of predictions against measurements.
#[derive(Clone, Debug)]
pub struct ScatterChart<'a> {
    /// The title.
    pub title: &'a str,
    /// What is plotted, with its unit (`mean TTFT (ms)`): the axes read "measured …" and
    /// "predicted …".
    pub quantity: &'a str,
    /// The legend's title.
    pub legend: &'a str,
    /// One series per group: (measured, predicted) points.
    pub series: &'a [Series],
    /// The band drawn around the diagonal: predictions within this relative error (0.25: ±25 %).
    pub band: f64,
}

/// `chart` as an SVG document: log axes when the values span more than a decade.
pub fn scatter_svg(chart: &ScatterChart<'_>) -> String {
    let values: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().flat_map(|&(m, p)| [m, p]))
        .collect();
    let scale = Scale::fit(&values, Kind::Latency, true);
    let height = 620.max(90 + 21 * (chart.series.len() as u32 + 2));
    svg_document(height, |plot, legend| draw(plot, legend, chart, &scale))
}

fn draw(plot: &Area<'_>, legend: &Area<'_>, chart: &ScatterChart<'_>, s: &Scale) -> Drawn {
    let note = if s.log { ", log scale" } else { "" };
    let x_desc = format!("measured {}{note}", chart.quantity);
    let y_desc = format!("predicted {}{note}", chart.quantity);
    let x_label = |v: &f64| s.label(*v);
    let mut c = frame(plot, chart.title, (s, &x_desc), (s, &y_desc), &x_label)?;
    // The diagonal and the band, drawn as lines over the data's range.
    let line = |factor: f64| -> Vec<(f64, f64)> {
        (0..=40)
            .map(|i| {
                let t = s.lo + (s.hi - s.lo) * f64::from(i) / 40.0;
                let v = if s.log { 10f64.powf(t) } else { t };
                (t, s.to_plot(v * factor))
            })
            .filter(|&(_, y)| y >= s.lo && y <= s.hi)
            .collect()
    };
    c.draw_series(LineSeries::new(line(1.0), BLACK.stroke_width(1)))?;
    for f in [1.0 + chart.band, 1.0 - chart.band] {
        c.draw_series(DashedLineSeries::new(
            line(f),
            6,
            4,
            RGBColor(140, 140, 140).stroke_width(1),
        ))?;
    }
    let mut entries = Vec::new();
    for (i, series) in chart.series.iter().enumerate() {
        let col = color(i);
        c.draw_series(
            series
                .points
                .iter()
                .map(|&(m, p)| Circle::new((s.to_plot(m), s.to_plot(p)), 3, col.filled())),
        )?;
        entries.push(Entry {
            label: format!("{} ({})", series.label, series.points.len()),
            color: col,
            dashed: false,
            marker: true,
        });
    }
    entries.push(Entry {
        label: "predicted = measured".into(),
        color: BLACK,
        dashed: false,
        marker: true,
    });
    entries.push(Entry {
        label: format!("within ±{:.0} %", 100.0 * chart.band),
        color: RGBColor(140, 140, 140),
        dashed: true,
        marker: false,
    });
    draw_legend(legend, chart.legend, &entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_of_every_group_and_the_diagonal_are_drawn() {
        let series = vec![
            Series {
                label: "a".into(),
                points: vec![(10.0, 12.0), (100.0, 90.0)],
            },
            Series {
                label: "b".into(),
                points: vec![(1000.0, 1500.0)],
            },
        ];
        let svg = scatter_svg(&ScatterChart {
            title: "t",
            quantity: "mean TTFT (ms)",
            legend: "group",
            series: &series,
            band: 0.25,
        });
        // Three points, and a marker per legend line that is not dashed (two groups, the diagonal).
        assert_eq!(svg.matches("<circle").count(), 3 + 3);
        assert!(svg.contains("measured mean TTFT (ms), log scale"));
        assert!(svg.contains("within ±25 %"));
        assert!(svg.contains("a (2)") && svg.contains("b (1)"));
    }
}
