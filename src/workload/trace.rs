//! Options and counters shared by the trace parsers ([`super::mooncake`], [`super::azure`]), and
//! the row loop they share: the file read line by line as a stream, blank lines skipped, 1-based
//! line numbers, `limit` and `skip_bad`.
//!
//! The file is read and cut into lines on a thread of its own (`with_lines_read_ahead`),
//! which hands them in batches through a bounded channel to the parser on the caller's thread:
//! reading and parsing overlap, lines arrive in file order, and a parser that stops (an error,
//! `limit`) drops the channel, which stops the reader after at most one more batch.

use std::io::{BufRead, Read};
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

/// Runs `parse` over the non-blank lines of `lines` (1-based line number and text, read as a
/// stream), applying `limit` and `skip_bad`. Fails with `file: no requests` when no row is
/// accepted.
pub(crate) fn collect_rows<T>(
    path: &Path,
    lines: impl Iterator<Item = Result<Line>>,
    opts: &TraceOptions,
    mut parse: impl FnMut(usize, &str) -> Result<T>,
) -> Result<(Vec<T>, TraceStats)> {
    let mut rows = Vec::new();
    let mut stats = TraceStats::default();
    for item in lines {
        if opts.limit.is_some_and(|n| rows.len() >= n) {
            break;
        }
        let (line_no, text) = item?;
        let parsed = match text.as_deref().map(str::trim) {
            Some("") => continue,
            Some(line) => parse(line_no, line),
            None => Err(Error::field(
                path,
                line_no,
                "line",
                "not UTF-8 text, or longer than 16 MiB",
            )),
        };
        match parsed {
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

/// The longest line a trace may have, bytes (a row of the longest context, 1,048,576 tokens,
/// takes about 45 KB in Mooncake's format).
pub const MAX_LINE_BYTES: u64 = 1 << 24;

/// One line of a trace: its 1-based number and its text (`None` if it is not UTF-8 or longer
/// than [`MAX_LINE_BYTES`]).
pub(crate) type Line = (usize, Option<String>);

/// The lines of `reader` numbered from 1, read one at a time, without a leading byte-order mark
/// or line end. A failed read is an error naming the file.
pub(crate) fn numbered_lines<'a>(
    path: &'a Path,
    mut reader: impl BufRead + 'a,
) -> impl Iterator<Item = Result<Line>> + 'a {
    let mut line_no = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut bytes = Vec::new();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut bytes);
        let too_long = bytes.len() as u64 > MAX_LINE_BYTES;
        let read = read.and_then(|n| {
            if too_long && bytes.last() != Some(&b'\n') {
                reader.skip_until(b'\n')?;
            }
            Ok(n)
        });
        match read {
            Ok(0) => {
                done = true;
                return None;
            }
            Ok(_) => {}
            Err(e) => {
                done = true;
                return Some(Err(Error::file(path, format!("cannot read: {e}"))));
            }
        }
        line_no += 1;
        if too_long {
            return Some(Ok((line_no, None)));
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return Some(Ok((line_no, None)));
        };
        let text = match (line_no, text.strip_prefix('\u{feff}')) {
            (1, Some(rest)) => rest.to_string(),
            _ => text,
        };
        Some(Ok((line_no, Some(text))))
    })
}

/// Lines the reader thread hands over at a time (fewer when they reach [`BATCH_BYTES`]).
const BATCH_LINES: usize = 512;

/// Bytes of text after which the reader thread hands a batch over early.
const BATCH_BYTES: usize = 1 << 20;

/// Batches read ahead of the parser: the bound that keeps a fast reader from holding the file
/// in memory.
const BATCHES_AHEAD: usize = 4;

/// Runs `parse` over the numbered lines of `reader` (as [`numbered_lines`] cuts them), read on a
/// scoped thread of their own and handed over in batches through a bounded channel: the same
/// lines, in the same order, with the same errors, as reading them on the caller's thread. The
/// reader thread ends once `parse` returns (it finds the channel closed) and is joined before
/// this returns.
pub(crate) fn with_lines_read_ahead<R>(
    path: &Path,
    reader: impl BufRead + Send,
    parse: impl FnOnce(&mut dyn Iterator<Item = Result<Line>>) -> R,
) -> R {
    std::thread::scope(|scope| {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<Result<Line>>>(BATCHES_AHEAD);
        scope.spawn(move || {
            let mut batch = Vec::with_capacity(BATCH_LINES);
            let mut bytes = 0;
            for item in numbered_lines(path, reader) {
                if let Ok((_, Some(text))) = &item {
                    bytes += text.len();
                }
                batch.push(item);
                if batch.len() == BATCH_LINES || bytes >= BATCH_BYTES {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH_LINES));
                    bytes = 0;
                    if tx.send(full).is_err() {
                        return; // The parser stopped.
                    }
                }
            }
            let _ = tx.send(batch);
        });
        let mut lines = rx.into_iter().flatten();
        parse(&mut lines)
    })
}

/// Opens a trace file for reading as a stream, naming it in the error.
pub fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>> {
    let file =
        std::fs::File::open(path).map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(Error::file(path, "cannot read: is a directory"));
    }
    Ok(std::io::BufReader::with_capacity(1 << 16, file))
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
        let path = Path::new("t");
        let (rows, stats) = with_lines_read_ahead(path, text.as_bytes(), |lines| {
            collect_rows(path, lines, &opts, |n, l| Ok((n, l.to_string())))
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

    #[test]
    fn lines_read_ahead_are_the_lines_read_in_place() {
        // Enough lines for several batches, blank ones and a bad byte among them.
        let mut text: Vec<u8> = Vec::new();
        for i in 0..(3 * BATCH_LINES + 17) {
            match i % 97 {
                5 => text.extend_from_slice(b"\n"),
                11 => text.extend_from_slice(b"bad \xff byte\n"),
                _ => text.extend_from_slice(format!("row {i}\r\n").as_bytes()),
            }
        }
        let path = Path::new("t");
        let in_place: Vec<Line> = numbered_lines(path, &text[..])
            .map(|l| l.unwrap())
            .collect();
        let ahead: Vec<Line> =
            with_lines_read_ahead(path, &text[..], |lines| lines.map(|l| l.unwrap()).collect());
        assert_eq!(ahead, in_place);
        // A parser that stops early stops the reader too (the call returns).
        let first = with_lines_read_ahead(path, &text[..], |lines| lines.next().unwrap().unwrap());
        assert_eq!(first, (1, Some("row 0".to_string())));
    }
}
