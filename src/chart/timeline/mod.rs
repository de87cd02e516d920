//! A run over time (`run --timeline-plot`): four stacked panels against one time axis, the
//! offered load per interval, each pool's replicas (serving, and paid: serving + starting +
//! draining), the TTFT p90 per interval with the `[sla]` target, and the prefix reuse per
//! interval (prompt tokens taken from caches over prompt tokens: it dips when workers join
//! with empty caches).
//!
//! [`timeline_series`] turns the report's `intervals` and `replicas` into step lines (a pure
//! function, tested by hand); [`timeline_svg`] draws them.

use plotters::prelude::*;

use super::{color, draw_legend, frame, Area, Drawn, Entry, Scale, PLOT_WIDTH, WIDTH};
use crate::cluster::membership::ReplicaPoint;
use crate::metrics::Kind;
use crate::report::IntervalReport;
use crate::scenario::Pool;

/// A step line: points joined in order, horizontal then vertical.
pub type Steps = Vec<(f64, f64)>;

/// One pool's replica lines.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSteps {
    /// The pool's name (`workers`, `prefill`, `decode`).
    pub pool: &'static str,
    /// Workers serving.
    pub serving: Steps,
    /// Workers paid for: serving, starting and draining.
    pub paid: Steps,
}

/// What the timeline plot draws, times in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineSeries {
    /// The end of the time axis: the last interval's end or the run's end, whichever is later.
    pub end_s: f64,
    /// Requests arriving per second, held over each interval.
    pub load_rps: Steps,
    /// Each pool's replicas, held from each change to the next (and to `end_s`).
    pub replicas: Vec<PoolSteps>,
    /// TTFT p90 (ms), held over each interval; an interval where nothing completed breaks the
    /// line, so one line per run of intervals with completions.
    pub ttft_p90_ms: Vec<Steps>,
    /// The `[sla]` TTFT target, ms.
    pub ttft_target_ms: Option<f64>,
    /// Prefix reuse (0..1), held over each interval, broken like `ttft_p90_ms`.
    pub prefix_reuse: Vec<Steps>,
}

/// The plot's lines from a report's `intervals` (consecutive buckets of one width, starting at
/// 0) and `replicas` (each pool's size at every change, in time order), `duration_s` the run's
/// length and `ttft_target_ms` the `[sla]` TTFT target. An interval's width is the gap between
/// the first two; a lone interval spans the run.
pub fn timeline_series(
    intervals: &[IntervalReport],
    replicas: &[ReplicaPoint],
    duration_s: f64,
    ttft_target_ms: Option<f64>,
) -> TimelineSeries {
    let width = match intervals {
        [a, b, ..] => b.t_s - a.t_s,
        _ => duration_s.max(f64::MIN_POSITIVE),
    };
    let last_end = intervals.last().map_or(0.0, |i| i.t_s + width);
    let end_s = last_end.max(duration_s);
    let load_rps = intervals
        .iter()
        .flat_map(|i| [(i.t_s, i.load_rps), (i.t_s + width, i.load_rps)])
        .collect();
    let mut pools: Vec<Pool> = Vec::new();
    for r in replicas {
        if !pools.contains(&r.pool) {
            pools.push(r.pool);
        }
    }
    let replicas = pools
        .into_iter()
        .map(|pool| {
            let points: Vec<&ReplicaPoint> = replicas.iter().filter(|r| r.pool == pool).collect();
            PoolSteps {
                pool: pool.name(),
                serving: steps(&points, end_s, |r| r.workers),
                paid: steps(&points, end_s, |r| r.workers + r.starting + r.draining),
            }
        })
        .collect();
    TimelineSeries {
        end_s,
        load_rps,
        replicas,
        ttft_p90_ms: broken(intervals, width, |i| i.ttft_p90_ms),
        ttft_target_ms,
        prefix_reuse: broken(intervals, width, |i| i.prefix_reuse),
    }
}

/// `value` held over each interval, one line per run of intervals that have one.
fn broken(
    intervals: &[IntervalReport],
    width: f64,
    value: impl Fn(&IntervalReport) -> Option<f64>,
) -> Vec<Steps> {
    let mut lines: Vec<Steps> = Vec::new();
    let mut open = false;
    for i in intervals {
        match value(i) {
            Some(v) => {
                if !open {
                    lines.push(Vec::new());
                    open = true;
                }
                let line = lines.last_mut().expect("pushed above");
                line.extend([(i.t_s, v), (i.t_s + width, v)]);
            }
            None => open = false,
        }
    }
    lines
}

/// `value` of each point held until the next point's time, the last held to `end_s`.
fn steps(points: &[&ReplicaPoint], end_s: f64, value: impl Fn(&ReplicaPoint) -> usize) -> Steps {
    let mut out: Steps = Vec::new();
    for (k, r) in points.iter().enumerate() {
        let until = points.get(k + 1).map_or(end_s.max(r.t_s), |n| n.t_s);
        let v = value(r) as f64;
        out.extend([(r.t_s, v), (until, v)]);
    }
    out
}

/// The time axis' unit for a run of `end_s` seconds: seconds up to 5 minutes, minutes up to 5
/// hours, hours beyond.
fn time_unit(end_s: f64) -> (&'static str, f64) {
    if end_s > 5.0 * 3600.0 {
        ("time (h)", 3600.0)
    } else if end_s > 300.0 {
        ("time (min)", 60.0)
    } else {
        ("time (s)", 1.0)
    }
}

/// Height of one panel, px.
const PANEL_HEIGHT: u32 = 300;

/// The plot as an SVG document: the four panels stacked, each with its legend beside it.
pub fn timeline_svg(series: &TimelineSeries, title: &str) -> String {
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (WIDTH, 4 * PANEL_HEIGHT + 40)).into_drawing_area();
        root.fill(&WHITE)
            .expect("drawing into a string cannot fail");
        let (head, body) = root.split_vertically(40);
        let (plots, legends) = body.split_horizontally(PLOT_WIDTH);
        head.titled(title, ("sans-serif", 22))
            .map(|_| ())
            .and_then(|()| {
                draw(
                    series,
                    &plots.split_evenly((4, 1)),
                    &legends.split_evenly((4, 1)),
                )
            })
            .expect("drawing into a string cannot fail");
        root.present().expect("drawing into a string cannot fail");
    }
    text
}

fn draw(s: &TimelineSeries, plots: &[Area<'_>], legends: &[Area<'_>]) -> Drawn {
    let (x_desc, per) = time_unit(s.end_s);
    let x = Scale::fit(&[0.0, s.end_s / per], Kind::Other, false);
    let x_label = |v: &f64| x.label(*v);
    let scaled = |pts: &Steps| -> Steps { pts.iter().map(|&(t, v)| (t / per, v)).collect() };

    // Offered load.
    let ys: Vec<f64> = s.load_rps.iter().map(|p| p.1).collect();
    let y = Scale::fit(&[&ys[..], &[0.0]].concat(), Kind::Rate, false);
    let mut c = frame(
        &plots[0],
        "Offered load per interval",
        (&x, x_desc),
        (&y, "arrivals (requests/s)"),
        &x_label,
    )?;
    c.draw_series(LineSeries::new(
        scaled(&s.load_rps),
        color(0).stroke_width(2),
    ))?;
    // The lines are steps without markers, and so are their legend entries.
    let entry = |label: &str, i: usize, dashed: bool| Entry {
        label: label.to_string(),
        color: color(i),
        dashed,
        marker: false,
    };
    draw_legend(&legends[0], "load", &[entry("requests/s", 0, false)])?;

    // Replicas.
    let ys: Vec<f64> = s
        .replicas
        .iter()
        .flat_map(|p| p.paid.iter().map(|q| q.1))
        .collect();
    let y = Scale::fit(&[&ys[..], &[0.0]].concat(), Kind::Count, false);
    let mut c = frame(
        &plots[1],
        "Replicas per pool",
        (&x, x_desc),
        (&y, "workers"),
        &x_label,
    )?;
    let mut entries = Vec::new();
    for (i, p) in s.replicas.iter().enumerate() {
        let col = color(i + 1);
        c.draw_series(LineSeries::new(scaled(&p.serving), col.stroke_width(2)))?;
        c.draw_series(DashedLineSeries::new(
            scaled(&p.paid),
            6,
            4,
            col.stroke_width(1),
        ))?;
        entries.push(entry(&format!("{} serving", p.pool), i + 1, false));
        entries.push(entry(
            &format!("{} paid (+start, drain)", p.pool),
            i + 1,
            true,
        ));
    }
    draw_legend(&legends[1], "pool", &entries)?;

    // TTFT p90 with the target.
    let mut ys: Vec<f64> = s.ttft_p90_ms.iter().flatten().map(|p| p.1).collect();
    ys.extend(s.ttft_target_ms);
    let y = Scale::fit(&ys, Kind::Latency, true);
    let y_desc = if y.log {
        "TTFT p90 (ms), log scale"
    } else {
        "TTFT p90 (ms)"
    };
    let mut c = frame(
        &plots[2],
        "TTFT p90 per interval",
        (&x, x_desc),
        (&y, y_desc),
        &x_label,
    )?;
    let col = color(3);
    for line in &s.ttft_p90_ms {
        let pts: Steps = line.iter().map(|&(t, v)| (t / per, y.to_plot(v))).collect();
        c.draw_series(LineSeries::new(pts, col.stroke_width(2)))?;
    }
    let mut entries = vec![entry("TTFT p90", 3, false)];
    if let Some(target) = s.ttft_target_ms {
        let t = y.to_plot(target);
        c.draw_series(DashedLineSeries::new(
            [(x.lo, t), (x.hi, t)],
            8,
            5,
            BLACK.stroke_width(2),
        ))?;
        entries.push(Entry {
            label: format!("[sla] target {} ms", super::tidy(target)),
            color: BLACK,
            dashed: true,
            marker: false,
        });
    }
    draw_legend(&legends[2], "latency", &entries)?;

    // Prefix reuse.
    let mut ys: Vec<f64> = s.prefix_reuse.iter().flatten().map(|p| p.1).collect();
    ys.push(0.0);
    let y = Scale::fit(&ys, Kind::Other, false);
    let mut c = frame(
        &plots[3],
        "Prefix reuse per interval",
        (&x, x_desc),
        (&y, "prompt tokens from caches (share)"),
        &x_label,
    )?;
    for line in &s.prefix_reuse {
        c.draw_series(LineSeries::new(scaled(line), color(4).stroke_width(2)))?;
    }
    draw_legend(&legends[3], "reuse", &[entry("prefix reuse", 4, false)])
}

#[cfg(test)]
mod tests;
