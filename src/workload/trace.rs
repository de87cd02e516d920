//! Options and counters shared by the trace parsers ([`super::mooncake`], [`super::azure`]), and
//! the row loop they share: blank lines skipped, 1-based line numbers, `limit` and `skip_bad`.

use std::path::Path;

use crate::error::{Error, Result};

/// How a trace file is turned into requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceOptions {
    /// Tokens per block in the trace's own block ids (Mooncake: 512). Unused by traces without
    /// block ids (Azure).
    pub trace_block_size: usize,
    /// The engine's block size: tokens per block of [`super::RequestSpec::blocks`]. For Mooncake it
    /// must divide `trace_block_size`.
    pub block_size: usize,
    /// Time compression: arrivals are the trace's times divided by this (2.0 replays twice as fast).
    pub speedup: f64,
    /// Keep only the first `limit` accepted rows of the file (in file order, before sorting).
    pub limit: Option<usize>,
    /// Skip malformed rows (counted in [`TraceStats::skipped`]) instead of stopping at the first.
    pub skip_bad: bool,
}

impl Default for TraceOptions {
    /// Mooncake's 512-token blocks routed as they are, real time, all rows, strict.
    fn default() -> Self {
        TraceOptions {
            trace_block_size: 512,
            block_size: 512,
            speedup: 1.0,
            limit: None,
            skip_bad: false,
        }
    }
}

impl TraceOptions {
    /// Checks the options that every parser needs: `block_size >= 1`, `speedup > 0` and finite.
    pub fn check(&self, path: &Path) -> Result<()> {
        if self.block_size == 0 {
            return Err(Error::file(path, "block_size must be at least 1 token"));
        }
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(Error::file(
                path,
                format!("speedup must be positive and finite, got {}", self.speedup),
            ));
        }
        Ok(())
    }
}

/// What a parser did with a file's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Rows accepted (the number of requests produced).
    pub rows: usize,
    /// Malformed rows skipped (only with [`TraceOptions::skip_bad`]).
    pub skipped: usize,
}

/// Runs `parse` over the non-blank lines of `lines` (pairs of 1-based line number and text, the
/// text already trimmed of its line end), applying `limit` and `skip_bad`. Fails with
/// `file: no requests` when no row is accepted.
pub(crate) fn collect_rows<'a, T>(
    path: &Path,
    lines: impl Iterator<Item = (usize, &'a str)>,
    opts: &TraceOptions,
    mut parse: impl FnMut(usize, &'a str) -> Result<T>,
) -> Result<(Vec<T>, TraceStats)> {
    let mut rows = Vec::new();
    let mut stats = TraceStats::default();
    for (line_no, line) in lines {
        if opts.limit.is_some_and(|n| rows.len() >= n) {
            break;
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match parse(line_no, line) {
            Ok(row) => rows.push(row),
            Err(_) if opts.skip_bad => stats.skipped += 1,
            Err(e) => return Err(e),
        }
    }
    stats.rows = rows.len();
    if rows.is_empty() {
        let message = match stats.skipped {
            0 => "no requests".to_string(),
            n => format!("no requests ({n} malformed rows skipped)"),
        };
        return Err(Error::file(path, message));
    }
    Ok((rows, stats))
}

/// The lines of `text` numbered from 1, without a leading byte-order mark.
pub(crate) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines().enumerate().map(|(i, l)| (i + 1, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let p = Path::new("t");
        assert!(TraceOptions::default().check(p).is_ok());
        let zero = TraceOptions {
            block_size: 0,
            ..TraceOptions::default()
        };
        assert!(zero.check(p).is_err());
        for speedup in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let bad = TraceOptions {
                speedup,
                ..TraceOptions::default()
            };
            assert!(bad.check(p).is_err(), "{speedup}");
        }
    }

    #[test]
    fn rows_skip_blanks_and_stop_at_the_limit() {
        let opts = TraceOptions {
            limit: Some(2),
            ..TraceOptions::default()
        };
        let text = "\u{feff}1\n\n  \r\n2\r\n3";
        let (rows, stats) = collect_rows(Path::new("t"), numbered_lines(text), &opts, |n, l| {
            Ok((n, l.to_string()))
        })
        .unwrap();
        assert_eq!(rows, vec![(1, "1".to_string()), (4, "2".to_string())]);
        assert_eq!(
            stats,
            TraceStats {
                rows: 2,
                skipped: 0
            }
        );
    }
}
