//! Azure LLM inference traces (2023, Splitwise): CSV with the header
//! `TIMESTAMP,ContextTokens,GeneratedTokens` and rows like `2023-11-16 18:15:46.6805900,374,44`.
//!
//! - **Format quirks.** CRLF or LF line ends, no newline needed after the last row, 0–9 fractional
//!   digits of a second (the published files have 7: sub-millisecond precision is kept). A `T`
//!   between date and time is accepted too. Times carry no zone and are only used as differences.
//! - **Arrivals.** Rows are sorted stably by time; `arrival_ns` is the time since the earliest
//!   row, divided by `speedup`.
//! - **Blocks.** The trace has lengths only, no prefix information: each prompt still gets
//!   `ContextTokens / block_size` blocks (they occupy KV cache), named uniquely per request so that
//!   no two requests ever share one. `prefix` is `None`. `trace_block_size` is not used.
//! - **Checks.** Context plus generated tokens may not exceed
//!   [`MAX_CONTEXT_TOKENS`], and an arrival (time since the earliest row / `speedup`) may not
//!   pass the clock's limit (1e12 ms): such rows are bad rows.
//! - **Memory.** The file is read one line at a time into a compact [`TraceTable`].

use std::io::BufRead;
use std::path::Path;

use super::table::{Naming, RawRow, RowTime, TraceTable};
use super::trace::{collect_rows, with_lines_read_ahead, Line, TraceOptions, TraceStats};
use crate::error::{Error, Result};
use crate::limits::MAX_CONTEXT_TOKENS;

/// The expected header columns, in order.
const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Reads an Azure LLM inference CSV from `reader` (the file `path`, which names errors), one line
/// at a time, into a [`TraceTable`] in arrival order. See the module doc for the conversion
/// rules.
///
/// # Errors
/// `file:line: column: what` for a bad header or the first malformed row (`line` for a wrong
/// number of columns) unless `skip_bad`; `file: ...` for bad options, a failed read or a file
/// without requests.
pub fn read_azure(
    path: &Path,
    reader: impl BufRead + Send,
    opts: &TraceOptions,
) -> Result<TraceTable> {
    opts.check(path)?;
    let (rows, stats) = with_lines_read_ahead(path, reader, |lines| read_rows(path, lines, opts))?;
    let naming = Naming::Unique {
        block_size: opts.block_size,
    };
    TraceTable::build(path, rows, Vec::new(), naming, opts, stats, COLUMNS[0])
}

/// The header, then the rows.
fn read_rows(
    path: &Path,
    lines: &mut dyn Iterator<Item = Result<Line>>,
    opts: &TraceOptions,
) -> Result<(Vec<RawRow>, TraceStats)> {
    let (header_no, header) = loop {
        match lines.next() {
            None => return Err(Error::file(path, "no requests")),
            Some(line) => match line? {
                (_, Some(text)) if text.trim().is_empty() => continue,
                (n, text) => break (n, text.unwrap_or_default()),
            },
        }
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    if names.len() != COLUMNS.len()
        || names
            .iter()
            .zip(COLUMNS)
            .any(|(a, b)| !a.eq_ignore_ascii_case(b))
    {
        return Err(Error::field(
            path,
            header_no,
            "header",
            format!("expected `{}`, got `{}`", COLUMNS.join(","), header.trim()),
        ));
    }
    collect_rows(path, lines, opts, |n, line| parse_row(path, n, line))
}

fn parse_row(path: &Path, n: usize, line: &str) -> Result<RawRow> {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    if fields.len() != COLUMNS.len() {
        return Err(Error::field(
            path,
            n,
            "line",
            format!("expected {} columns, found {}", COLUMNS.len(), fields.len()),
        ));
    }
    let time = parse_time(fields[0]).map_err(|m| Error::field(path, n, COLUMNS[0], m))?;
    let tokens = |i: usize| {
        fields[i].parse::<u32>().map_err(|_| {
            Error::field(
                path,
                n,
                COLUMNS[i],
                format!("expected a token count, got `{}`", fields[i]),
            )
        })
    };
    let (input, output) = (tokens(1)?, tokens(2)?);
    if u64::from(input) + u64::from(output) > MAX_CONTEXT_TOKENS {
        return Err(Error::field(
            path,
            n,
            COLUMNS[1],
            format!(
                "{input} prompt + {output} output tokens is longer than the longest context \
                 dynsim serves ({MAX_CONTEXT_TOKENS} tokens)"
            ),
        ));
    }
    Ok(RawRow {
        line: n,
        time: RowTime::EpochNs(time),
        input,
        output,
        ids: (0, 0),
        session: None,
        delay_ms: 0.0,
    })
}

/// `YYYY-MM-DD HH:MM:SS[.fffffffff]` to nanoseconds since 1970-01-01 00:00:00 (no zone).
fn parse_time(s: &str) -> Result<i128, String> {
    let bad = || format!("expected `YYYY-MM-DD HH:MM:SS[.fraction]`, got `{s}`");
    let (date, time) = s.split_once([' ', 'T']).ok_or_else(bad)?;
    let num = |part: &str, digits: usize| -> Result<u32, String> {
        if part.len() != digits || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let mut d = date.split('-');
    let (Some(y), Some(mo), Some(day), None) = (d.next(), d.next(), d.next(), d.next()) else {
        return Err(bad());
    };
    let (y, mo, day) = (num(y, 4)?, num(mo, 2)?, num(day, 2)?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':');
    let (Some(h), Some(mi), Some(sec), None) = (t.next(), t.next(), t.next(), t.next()) else {
        return Err(bad());
    };
    let (h, mi, sec) = (num(h, 2)?, num(mi, 2)?, num(sec, 2)?);
    if !(1..=12).contains(&mo)
        || day < 1
        || day > days_in_month(y, mo)
        || h > 23
        || mi > 59
        || sec > 59
    {
        return Err(format!("no such date or time: `{s}`"));
    }
    let nanos = if frac.is_empty() && !time.contains('.') {
        0
    } else if frac.is_empty() || frac.len() > 9 {
        return Err(bad());
    } else {
        num(frac, frac.len())? * 10u32.pow(9 - frac.len() as u32)
    };
    let days = days_from_civil(i64::from(y), mo, day);
    let secs = i128::from(days) * 86_400 + i128::from(h * 3600 + mi * 60 + sec);
    Ok(secs * 1_000_000_000 + i128::from(nanos))
}

fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::TraceStats;
    use crate::workload::RequestSpec;
    use std::collections::HashSet;

    const HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens";

    fn parse(text: &str, o: &TraceOptions) -> Result<(Vec<RequestSpec>, TraceStats)> {
        let table = read_azure(Path::new("a.csv"), text.as_bytes(), o)?;
        Ok((
            (0..table.len()).map(|i| table.spec(i)).collect(),
            table.stats(),
        ))
    }

    fn opts(block_size: usize) -> TraceOptions {
        TraceOptions {
            block_size,
            ..TraceOptions::default()
        }
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2023, 11, 16), 19_677);
        assert_eq!(days_from_civil(1600, 2, 29), -135_081);
    }

    #[test]
    fn crlf_no_final_newline_and_sub_ms_precision() {
        let text = format!(
            "{HEADER}\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:46.6806012,40,3\r\n\
             2023-11-17 00:00:00,16,1"
        );
        let (reqs, stats) = parse(&text, &opts(16)).unwrap();
        assert_eq!(
            stats,
            TraceStats {
                rows: 3,
                skipped: 0
            }
        );
        let arrivals: Vec<u64> = reqs.iter().map(|r| r.arrival_ns).collect();
        let midnight = ((5 * 3600 + 44 * 60 + 13) as u64) * 1_000_000_000 + 319_410_000;
        assert_eq!(arrivals, vec![0, 11_200, midnight]);
        assert_eq!((reqs[0].input_tokens, reqs[0].output_tokens), (374, 44));
        let lens: Vec<usize> = reqs.iter().map(|r| r.blocks.len()).collect();
        assert_eq!(lens, vec![23, 2, 1]);
        assert!(reqs
            .iter()
            .all(|r| r.prefix.is_none() && r.session.is_none()));
    }

    #[test]
    fn blocks_never_match_across_requests() {
        let text = format!("{HEADER}\n2023-01-01 00:00:00.5,64,1\n2023-01-01 00:00:00.25,64,1\n");
        let (reqs, _) = parse(&text, &opts(16)).unwrap();
        assert_eq!(reqs[0].arrival_ns, 0); // sorted: the .25 row first
        assert_eq!(reqs[1].arrival_ns, 250_000_000);
        let all: HashSet<_> = reqs.iter().flat_map(|r| r.blocks.iter()).collect();
        assert_eq!(all.len(), 8);
    }

    #[test]
    fn malformed_row_names_line_and_column() {
        let cases = [
            ("2023-11-16 18:15:46.68,x,1", "ContextTokens"),
            ("2023-11-16 18:15:46.68,1,-1", "GeneratedTokens"),
            ("2023-13-16 18:15:46.68,1,1", "TIMESTAMP"),
            ("2023-02-29 18:15:46,1,1", "TIMESTAMP"),
            ("2023-11-16 18:15:46.,1,1", "TIMESTAMP"),
            ("2023-11-16,1,1", "TIMESTAMP"),
            ("2023-11-16 18:15:46,1", "line"),
            ("2023-11-16 18:15:46,2000000,1", "ContextTokens"),
            // Eight thousand years after the first row: past the clock's limit.
            ("9999-12-31 23:59:59,1,1", "TIMESTAMP"),
        ];
        for (bad, column) in cases {
            let text = format!("{HEADER}\r\n2023-11-16 18:15:46.6805900,374,44\r\n\r\n{bad}");
            let err = parse(&text, &opts(16)).unwrap_err().to_string();
            assert!(err.starts_with(&format!("a.csv:4: {column}: ")), "{err}");
        }
        let err = parse("when,in,out\n", &opts(16)).unwrap_err().to_string();
        assert!(err.starts_with("a.csv:1: header: "), "{err}");
        assert_eq!(
            parse(HEADER, &opts(16)).unwrap_err().to_string(),
            "a.csv: no requests"
        );
    }

    #[test]
    fn skip_bad_limit_and_speedup() {
        let text = format!(
            "{HEADER}\n2023-11-16 00:00:00,1,1\nbad\n2023-11-16 00:00:01,1,1\n2023-11-16 00:00:02,1,1"
        );
        let o = TraceOptions {
            skip_bad: true,
            limit: Some(2),
            speedup: 2.0,
            ..opts(16)
        };
        let (reqs, stats) = parse(&text, &o).unwrap();
        assert_eq!(
            stats,
            TraceStats {
                rows: 2,
                skipped: 1
            }
        );
        assert_eq!(reqs[1].arrival_ns, 500_000_000);
        assert!(parse(&text, &opts(16)).is_err());
    }

    #[test]
    fn real_conversation_trace() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/traces/azure_llm_inference_2023_conv.csv");
        let text = crate::error::read_text(&path).unwrap();
        // `wc -l` counts newlines; the last row has none, and the header is not a row.
        let wc_l = text.matches('\n').count();
        let rows = wc_l + usize::from(!text.ends_with('\n')) - 1;
        let (reqs, stats) = parse(&text, &opts(16)).unwrap();
        assert_eq!((rows, stats.rows, reqs.len()), (19_366, 19_366, 19_366));
        assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        // 18:15:46.6805900 to 19:14:08.4025270
        let span = (58 * 60 + 21) * 1_000_000_000 + 721_937_000;
        assert_eq!(reqs.last().unwrap().arrival_ns, span);
    }
}
