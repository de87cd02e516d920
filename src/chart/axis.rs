//! Axes, ticks and colours shared by every chart: a [`Scale`] fitted to the data (a share on
//! [0, 1], a latency on a log axis when it spans more than a decade), ticks at round values
//! (1-2-5 steps; on a log axis 1-2-5 or decades) labelled in readable form (`1k`, `20k`, `1M`;
//! bytes in MiB or GiB), and a palette whose 16 colours stay distinct.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

use crate::metrics::Kind;

/// Sixteen distinct colours (Tableau 10, then six darker hues), picked in order.
pub const PALETTE: [RGBColor; 16] = [
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
    RGBColor(0, 0, 0),
    RGBColor(57, 59, 121),
    RGBColor(99, 121, 57),
    RGBColor(231, 186, 82),
    RGBColor(132, 60, 57),
    RGBColor(123, 65, 115),
];

/// Series `i`'s colour.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// An axis over plotted values (log10 of the data on a log axis), with its tick positions.
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    /// Whether plotted values are log10 of the data.
    pub log: bool,
    /// The plotted range.
    pub lo: f64,
    /// The plotted range's top.
    pub hi: f64,
    /// Ticks, plotted values.
    pub ticks: Vec<f64>,
    /// What the data is (labels and bounds follow it).
    pub kind: Kind,
}

impl Scale {
    /// The axis for `values` of `kind`: a share on [0, 1] (from 0 to a little above the largest
    /// when no share passes 0.5); a log axis when `log_ok` and every
    /// value is positive and they span more than a decade; else linear, from 0 when the values
    /// are not far from it.
    pub fn fit(values: &[f64], kind: Kind, log_ok: bool) -> Scale {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if finite.is_empty() {
            return Scale::linear(0.0, 1.0, kind);
        }
        if kind == Kind::Share && lo >= 0.0 && hi <= 0.5 {
            // Small shares on [0, 1] would sit in the axis' bottom half, their labels on each
            // other: from 0 to a little above the largest.
            return Scale::linear(0.0, (hi * 1.1).max(0.01), kind);
        }
        if kind == Kind::Share && lo >= 0.0 && hi <= 1.0 {
            // A little room above 1, so that points at 1 stay clear of the frame.
            return Scale {
                log: false,
                lo: 0.0,
                hi: 1.04,
                ticks: (0..=5).map(|i| f64::from(i) * 0.2).collect(),
                kind,
            };
        }
        if log_ok && lo > 0.0 && hi / lo > 10.0 {
            let (a, b) = (lo.log10(), hi.log10());
            let pad = (b - a) * 0.06;
            let (lo, hi) = (a - pad, b + pad);
            return Scale {
                log: true,
                lo,
                hi,
                ticks: log_ticks(lo, hi),
                kind,
            };
        }
        let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
        let mut bottom = lo - span * 0.06;
        if lo >= 0.0 && (bottom < 0.0 || lo < 0.35 * hi) {
            bottom = 0.0;
        }
        Scale::linear(bottom, hi + span * 0.06, kind)
    }

    fn linear(lo: f64, hi: f64, kind: Kind) -> Scale {
        Scale {
            log: false,
            lo,
            hi,
            ticks: linear_ticks(lo, hi, kind),
            kind,
        }
    }

    /// A data value's plotted position.
    pub fn to_plot(&self, v: f64) -> f64 {
        if self.log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        }
    }

    /// The label of the plotted position `t`.
    pub fn label(&self, t: f64) -> String {
        let v = if self.log { 10f64.powf(t) } else { t };
        if self.kind == Kind::Bytes {
            return bytes(v);
        }
        readable(v)
    }

    /// The axis as a plotters coordinate with these ticks.
    pub fn coord(&self) -> Keyed {
        Keyed {
            lo: self.lo,
            hi: self.hi,
            keys: self.ticks.clone(),
        }
    }
}

/// Ticks on a 1-2-5 step between `lo` and `hi` (about six); whole bytes in powers of two.
fn linear_ticks(lo: f64, hi: f64, kind: Kind) -> Vec<f64> {
    let span = hi - lo;
    if span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let step = if kind == Kind::Bytes && span >= 1024.0 {
        let raw = span / 6.0;
        2f64.powi(raw.log2().ceil() as i32)
    } else {
        let raw = span / 6.0;
        let mag = 10f64.powi(raw.log10().floor() as i32);
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag)
    };
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Ticks of a log axis over log10 values `lo..hi`: 1, 2 and 5 of each decade over up to three
/// decades, decades beyond (every other decade past eight).
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let decades = hi - lo;
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    let mults: &[f64] = if decades <= 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let every = if decades > 8.0 { 2 } else { 1 };
    let mut out = Vec::new();
    for d in first..=last {
        if (d - first) % every != 0 {
            continue;
        }
        for m in mults {
            let t = (m * 10f64.powi(d)).log10();
            if t >= lo && t <= hi {
                out.push(t);
            }
        }
    }
    out
}

/// A number as people read it on an axis: `0.25`, `40`, `1.5k`, `20k`, `3.16M`.
pub fn readable(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    format!("{}{suffix}", super::tidy(round_sig(scaled, 3)))
}

/// Bytes in B, KiB, MiB or GiB.
pub fn bytes(v: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    let (unit, size) = UNITS
        .iter()
        .find(|(_, s)| v.abs() >= *s)
        .copied()
        .unwrap_or(("B", 1.0));
    format!("{} {unit}", super::tidy(round_sig(v / size, 3)))
}

fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// A linear coordinate whose ticks are exactly `keys` (plotters draws its mesh and labels
/// there).
#[derive(Clone, Debug)]
pub struct Keyed {
    /// The range's bottom.
    pub lo: f64,
    /// The range's top.
    pub hi: f64,
    /// The ticks.
    pub keys: Vec<f64>,
}

impl Ranged for Keyed {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = f64::from(limit.1 - limit.0);
        let at = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (span * at + 1e-3).floor() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.keys.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_read_as_round_numbers() {
        let s = Scale::fit(&[300.0, 3_300_000.0], Kind::Latency, true);
        assert!(s.log);
        let labels: Vec<String> = s.ticks.iter().map(|&t| s.label(t)).collect();
        assert_eq!(labels, ["1k", "10k", "100k", "1M"]);
        let narrow = Scale::fit(&[500.0, 2300.0], Kind::Latency, false);
        let labels: Vec<String> = narrow.ticks.iter().map(|&t| narrow.label(t)).collect();
        assert_eq!(labels, ["0", "500", "1k", "1.5k", "2k"]);
        let two_decades = Scale::fit(&[500.0, 46_000.0], Kind::Latency, true);
        let labels: Vec<String> = two_decades
            .ticks
            .iter()
            .map(|&t| two_decades.label(t))
            .collect();
        assert_eq!(labels, ["500", "1k", "2k", "5k", "10k", "20k", "50k"]);
    }

    #[test]
    fn small_shares_fill_the_axis_from_zero() {
        let s = Scale::fit(&[0.0715, 0.17], Kind::Share, true);
        assert_eq!(s.lo, 0.0);
        assert!((s.hi - 0.187).abs() < 1e-9, "{}", s.hi);
        assert!(s.ticks.iter().all(|&t| (0.0..=0.187).contains(&t)));
    }

    #[test]
    fn shares_stay_in_zero_one_and_bytes_read_in_mib() {
        let s = Scale::fit(&[0.34, 0.99], Kind::Share, true);
        assert_eq!((s.lo, s.hi, s.log), (0.0, 1.04, false));
        assert_eq!(s.ticks.last(), Some(&1.0));
        assert_eq!(bytes(550.0 * 1048576.0), "550 MiB");
        assert_eq!(bytes(6.2 * 1073741824.0), "6.2 GiB");
        assert_eq!(readable(3_162_278.0), "3.16M");
        assert_eq!(readable(0.25), "0.25");
    }
}
