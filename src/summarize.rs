//! A robust summary of measured aggregated-vs-disaggregated TTFT.
//!
//! Input: JSONL, one measurement per line,
//! `{"mode":"agg"|"disagg","input":N,"conc":C,"rep":R,"ttft_p50_ms":F}`; blank lines are skipped.
//! Output: for each cell `"NxC"` (cells in increasing input, then concurrency), the median
//! TTFT of each mode (mean of the two middle values for an even count) in ms to one decimal, and
//! `ratio` = unrounded disagg median / unrounded agg median to two decimals. The median, not the
//! mean, so that one slow repetition (nine times slower, say) barely moves the result.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::error::{read_text, Error, Result};
use crate::round::round_py;

/// One cell's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellSummary {
    /// Median aggregated TTFT, ms, one decimal.
    pub agg_ms: f64,
    /// Median disaggregated TTFT, ms, one decimal.
    pub disagg_ms: f64,
    /// disagg / agg of the unrounded medians, two decimals.
    pub ratio: f64,
}

/// Every cell's result, keyed `"{input}x{conc}"`, in increasing (input, conc) order.
pub type Summary = serde_json::Map<String, Value>;

#[derive(Default)]
struct Cell {
    agg: Vec<f64>,
    disagg: Vec<f64>,
    first_line: usize,
}

/// Summarises the measurement file at `path`.
pub fn summarize_file(path: &Path) -> Result<Summary> {
    summarize_text(path, &read_text(path)?)
}

/// Summarises measurement lines; `path` only names the source in errors.
pub fn summarize_text(path: &Path, text: &str) -> Result<Summary> {
    let mut cells: BTreeMap<(u64, u64), Cell> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let row: Value = serde_json::from_str(line)
            .map_err(|e| Error::field(path, line_no, "line", format!("not JSON: {e}")))?;
        if let Some(key) = repeated_key(line) {
            return Err(Error::field(
                path,
                line_no,
                key,
                "given twice in the line (which one counts?)",
            ));
        }
        let field = |name: &str| {
            row.get(name)
                .ok_or_else(|| Error::field(path, line_no, name, "missing"))
        };
        let mode = field("mode")?;
        let count = |name: &str| {
            field(name)?
                .as_u64()
                .ok_or_else(|| Error::field(path, line_no, name, "must be a non-negative integer"))
        };
        let input = count("input")?;
        let conc = count("conc")?;
        let ttft = field("ttft_p50_ms")?
            .as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| {
                Error::field(path, line_no, "ttft_p50_ms", "must be a positive number")
            })?;
        let cell = cells.entry((input, conc)).or_insert_with(|| Cell {
            first_line: line_no,
            ..Cell::default()
        });
        match mode.as_str() {
            Some("agg") => cell.agg.push(ttft),
            Some("disagg") => cell.disagg.push(ttft),
            _ => {
                return Err(Error::field(
                    path,
                    line_no,
                    "mode",
                    format!("{mode} is not \"agg\" or \"disagg\""),
                ))
            }
        }
    }
    if cells.is_empty() {
        return Err(Error::file(path, "no measurements (empty file)"));
    }
    let mut summary = Summary::new();
    for ((input, conc), cell) in cells {
        let missing = |mode: &str, other: &str| {
            Error::field(
                path,
                cell.first_line,
                "mode",
                format!("cell {input}x{conc} has {other} rows but no {mode} rows"),
            )
        };
        let agg = median(&cell.agg).ok_or_else(|| missing("agg", "disagg"))?;
        let disagg = median(&cell.disagg).ok_or_else(|| missing("disagg", "agg"))?;
        if !(agg.is_finite() && disagg.is_finite() && (disagg / agg).is_finite()) {
            // Positive finite values whose median or ratio overflows (1e308 and 1e-300 ms):
            // JSON has no infinity, and a null would pass for a result.
            return Err(Error::field(
                path,
                cell.first_line,
                "ttft_p50_ms",
                format!(
                    "cell {input}x{conc}: out of range (its medians or their ratio are not \
                     finite numbers)"
                ),
            ));
        }
        let result = CellSummary {
            agg_ms: round_py(agg, 1),
            disagg_ms: round_py(disagg, 1),
            ratio: round_py(disagg / agg, 2),
        };
        summary.insert(
            format!("{input}x{conc}"),
            serde_json::to_value(result).expect("plain struct"),
        );
    }
    Ok(summary)
}

/// The first key a JSON object line names twice, if any: serde_json keeps the last of them in
/// silence (`{"mode":"agg","mode":"disagg"}` read as disagg).
fn repeated_key(line: &str) -> Option<String> {
    struct Repeated(Option<String>);
    impl<'de> serde::Deserialize<'de> for Repeated {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
            struct Keys;
            impl<'de> serde::de::Visitor<'de> for Keys {
                type Value = Repeated;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> std::result::Result<Repeated, A::Error> {
                    let mut seen = std::collections::HashSet::new();
                    let mut repeated = None;
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        if !seen.insert(key.clone()) && repeated.is_none() {
                            repeated = Some(key);
                        }
                    }
                    Ok(Repeated(repeated))
                }
            }
            d.deserialize_map(Keys)
        }
    }
    serde_json::from_str::<Repeated>(line).ok()?.0
}

/// The median of `values`: the middle one, or the mean of the two middle ones for an even count.
/// `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Result<Summary> {
        summarize_text(Path::new("m.jsonl"), text)
    }

    fn row(mode: &str, input: u64, conc: u64, rep: u64, ttft: f64) -> String {
        format!(
            r#"{{"mode":"{mode}","input":{input},"conc":{conc},"rep":{rep},"ttft_p50_ms":{ttft}}}"#
        )
    }

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn one_rep_nine_times_slower_barely_moves_the_result() {
        let mut lines = Vec::new();
        for (rep, agg) in [100.0, 102.0, 900.0].iter().enumerate() {
            lines.push(row("agg", 1500, 1, rep as u64, *agg));
        }
        lines.push(String::new()); // blank lines are skipped
        for (rep, dis) in [500.0, 510.0, 520.0, 530.0].iter().enumerate() {
            lines.push(row("disagg", 1500, 1, rep as u64, *dis));
        }
        let s = run(&lines.join("\n")).unwrap();
        let cell = &s["1500x1"];
        assert_eq!(cell["agg_ms"], 102.0); // odd count: the middle value, not the mean (367.3)
        assert_eq!(cell["disagg_ms"], 515.0); // even count: mean of 510 and 520
        assert_eq!(cell["ratio"], 5.05); // 515 / 102 = 5.049 -> 5.05
    }

    #[test]
    fn cells_come_out_in_numeric_order() {
        let text = [
            row("agg", 1500, 4, 0, 10.0),
            row("disagg", 1500, 4, 0, 20.0),
            row("agg", 200, 1, 0, 10.0),
            row("disagg", 200, 1, 0, 30.0),
        ]
        .join("\n");
        let keys: Vec<_> = run(&text).unwrap().keys().cloned().collect();
        assert_eq!(keys, ["200x1", "1500x4"]);
    }

    #[test]
    fn bad_rows_name_line_and_field() {
        let ok = row("agg", 1, 1, 0, 1.0);
        let cases = [
            (format!("{ok}\nnot json"), "m.jsonl:2: line: not JSON"),
            (
                format!("{ok}\n{{\"mode\":\"agg\",\"input\":1,\"conc\":1}}"),
                "m.jsonl:2: ttft_p50_ms: missing",
            ),
            (
                row("both", 1, 1, 0, 1.0),
                "m.jsonl:1: mode: \"both\" is not",
            ),
            (
                ok.clone(),
                "m.jsonl:1: mode: cell 1x1 has agg rows but no disagg rows",
            ),
            (
                row("agg", 1, 1, 0, -1.0),
                "m.jsonl:1: ttft_p50_ms: must be a positive",
            ),
            ("\n\n".to_string(), "m.jsonl: no measurements"),
            // A key given twice is refused, not read as its last value.
            (
                format!(
                    "{ok}\n{}",
                    row("disagg", 1, 1, 0, 2.0).replacen('{', "{\"mode\":\"agg\",", 1)
                ),
                "m.jsonl:2: mode: given twice in the line",
            ),
            // Each value valid, the ratio (1e600) or the median of two (2e308) not a number
            // JSON can hold: refused, not written as null.
            (
                format!(
                    "{}\n{}",
                    row("agg", 1, 1, 0, 1e-300),
                    row("disagg", 1, 1, 0, 1e300)
                ),
                "m.jsonl:1: ttft_p50_ms: cell 1x1: out of range",
            ),
            (
                format!(
                    "{}\n{}\n{}",
                    row("agg", 1, 1, 0, 1e308),
                    row("agg", 1, 1, 1, 1e308),
                    row("disagg", 1, 1, 0, 1.0)
                ),
                "m.jsonl:1: ttft_p50_ms: cell 1x1: out of range",
            ),
        ];
        for (text, expected) in cases {
            let err = run(&text).unwrap_err().to_string();
            assert!(
                err.starts_with(expected),
                "{err:?} should start with {expected:?}"
            );
        }
    }
}
