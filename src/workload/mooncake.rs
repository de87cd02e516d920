//! Mooncake JSONL traces (FAST '25 release): one request per line,
//! `{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]}`, with
//! optional `session_id` (string or integer) and `delay_ms` (think time after the session's
//! previous turn). Unknown keys are ignored.
//!
//! - **Blocks.** One hash id per block of `trace_block_size` tokens; an equal id at an equal
//!   position is the same prefix block. When the engine's `block_size` equals `trace_block_size`
//!   every id is routed as it is, chained ([`crate::hash::chain_ids`]), the last one included even
//!   when it covers a partial block: it still occupies a KV block, and counting every id is how
//!   the trace's published reuse (36.64 % for the conversation trace) is measured. When
//!   `block_size` divides `trace_block_size`, every id expands to `trace_block_size / block_size`
//!   sub-blocks whose names chain over `(id, sub-index)` pairs, so equal id prefixes give equal
//!   names, and only the full blocks of `input_length` are kept: at most
//!   `input_length / block_size` names.
//! - **Prefix.** `prefix` is the first block's name and `prefix_blocks` is 1: a repeat is a request
//!   whose first block was seen before. A request without blocks has no prefix.
//! - **Order.** Rows are sorted stably by timestamp (the published traces already are), so
//!   arrivals never go backwards; ids follow that order. `limit` counts rows in file order.
//! - **Sessions.** Rows sharing a `session_id` are turns of one session: each links to the previous
//!   turn in arrival order, waiting `delay_ms` (default 0) after it completes. Sessions are numbered
//!   by first appearance. The first turn carries a link with no predecessor and no delay.
//! - **Checks.** A row's `hash_ids` must cover its prompt: exactly
//!   `ceil(input_length / trace_block_size)` ids, as in every published Mooncake trace. Prompt
//!   plus output may not exceed [`MAX_CONTEXT_TOKENS`]; `timestamp / speedup` and `delay_ms` may
//!   not pass the clock's limit ([`MAX_MS`]). Any other row is a bad row: an error naming its
//!   line and field, or skipped and counted with `skip_bad`.
//! - **Memory.** The file is read one line at a time into a compact
//!   [`TraceTable`]; block names are made when a request is sent.

use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::table::{Naming, RawRow, RowTime, SessionKey, TraceTable};
use super::trace::{collect_rows, with_lines_read_ahead, TraceOptions};
use crate::error::{Error, Result};
use crate::limits::{MAX_CONTEXT_TOKENS, MAX_MS};

/// Reads a Mooncake trace from `reader` (the file `path`, which names errors), one line at a
/// time (read ahead on a thread of its own: `with_lines_read_ahead`), into a [`TraceTable`] in
/// arrival order. See the module doc for the conversion rules.
///
/// # Errors
/// `file:line: field: what` for the first malformed row (`line` for invalid JSON) unless
/// `skip_bad`; `file: ...` for bad options, a `block_size` that does not divide
/// `trace_block_size`, a failed read, or a file without requests.
pub fn read_mooncake(
    path: &Path,
    reader: impl BufRead + Send,
    opts: &TraceOptions,
) -> Result<TraceTable> {
    opts.check(path)?;
    if opts.trace_block_size == 0 || opts.trace_block_size % opts.block_size != 0 {
        return Err(Error::file(
            path,
            format!(
                "block_size {} does not divide the trace's block size {}",
                opts.block_size, opts.trace_block_size
            ),
        ));
    }
    let ratio = opts.trace_block_size / opts.block_size;
    let mut ids = Vec::new();
    let (rows, stats) = with_lines_read_ahead(path, reader, |lines| {
        collect_rows(path, lines, opts, |n, line| {
            parse_row(path, n, line, opts.trace_block_size, &mut ids)
        })
    })?;
    let naming = if ratio == 1 {
        Naming::Chain
    } else {
        Naming::Rechunk {
            ratio,
            block_size: opts.block_size,
        }
    };
    TraceTable::build(path, rows, ids, naming, opts, stats, "timestamp")
}

/// Parses one row, appending its hash ids to `arena` (only once the whole row is valid).
fn parse_row(
    path: &Path,
    n: usize,
    line: &str,
    trace_block_size: usize,
    arena: &mut Vec<u64>,
) -> Result<RawRow> {
    match typed_row(n, line, trace_block_size, arena) {
        Some(row) => Ok(row),
        None => parse_row_as_tree(path, n, line, trace_block_size, arena),
    }
}

/// A row with the fields the published traces write, each of the type they write it in,
/// deserialized straight from the text: no JSON tree is built. Other keys are refused, not
/// skipped: serde_json skips a value without the checks it makes when building one (numbers
/// out of range, lone surrogates, nesting past 128), so a skipped value could pass a row the
/// tree refuses.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypedRow {
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
    session_id: Option<SessionKey>,
    delay_ms: Option<f64>,
}

/// The row `line` read as a [`TypedRow`], if it reads as one and passes every check; `None`
/// sends the row to [`parse_row_as_tree`], which takes it the same way or names its problem
/// (a key it does not know, a field of another type, a null where a value is needed, a key
/// written twice, a failed check). Reading the conversation trace's 12,031 rows through the
/// tree took 216 M instructions, this way 103 M.
fn typed_row(
    n: usize,
    line: &str,
    trace_block_size: usize,
    arena: &mut Vec<u64>,
) -> Option<RawRow> {
    let row: TypedRow = serde_json::from_str(line).ok()?;
    let delay_ms = row.delay_ms.unwrap_or(0.0);
    let fits = is_ms(row.timestamp)
        && !too_long(row.input_length, row.output_length)
        && row.hash_ids.len() as u64 == ids_expected(row.input_length, trace_block_size)
        && is_ms(delay_ms)
        && within_clock(delay_ms);
    if !fits {
        return None;
    }
    let at = arena.len();
    arena.extend_from_slice(&row.hash_ids);
    Some(RawRow {
        line: n,
        time: RowTime::Ms(row.timestamp),
        input: row.input_length,
        output: row.output_length,
        ids: (at as u64, row.hash_ids.len() as u32),
        session: row.session_id,
        delay_ms,
    })
}

/// Whether `x` is a time in milliseconds a row may give: finite and not negative.
fn is_ms(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

/// Whether a time in milliseconds is within the clock's limit ([`MAX_MS`]).
fn within_clock(ms: f64) -> bool {
    ms <= MAX_MS
}

/// Whether a prompt and output are longer than the longest context served.
fn too_long(input: u32, output: u32) -> bool {
    u64::from(input) + u64::from(output) > MAX_CONTEXT_TOKENS
}

/// The hash ids a prompt of `input` tokens has: one per block of the trace, the partial last
/// one included.
fn ids_expected(input: u32, trace_block_size: usize) -> u64 {
    u64::from(input).div_ceil(trace_block_size as u64)
}

/// [`parse_row`] through a JSON tree: slower, and able to name any problem with the value that
/// has it.
fn parse_row_as_tree(
    path: &Path,
    n: usize,
    line: &str,
    trace_block_size: usize,
    arena: &mut Vec<u64>,
) -> Result<RawRow> {
    let bad = |field: &str, what: String| Error::field(path, n, field, what);
    let value: Value =
        serde_json::from_str(line).map_err(|e| bad("line", format!("invalid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(bad("line", "expected a JSON object".into()));
    };
    let get = |key: &str| obj.get(key).filter(|v| !v.is_null());
    let tokens = |key: &str| -> Result<u32> {
        let v = get(key).ok_or_else(|| bad(key, "missing".into()))?;
        v.as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| {
                bad(
                    key,
                    format!("expected a token count (0..=4294967295), got {v}"),
                )
            })
    };
    let millis = |key: &str, v: &Value| -> Result<f64> {
        v.as_f64()
            .filter(|x| is_ms(*x))
            .ok_or_else(|| bad(key, format!("expected non-negative milliseconds, got {v}")))
    };
    let timestamp_ms = millis(
        "timestamp",
        get("timestamp").ok_or_else(|| bad("timestamp", "missing".into()))?,
    )?;
    let input = tokens("input_length")?;
    let output = tokens("output_length")?;
    if too_long(input, output) {
        // The field that took it past: the output when the prompt alone would fit.
        let field = if u64::from(input) > MAX_CONTEXT_TOKENS {
            "input_length"
        } else {
            "output_length"
        };
        return Err(bad(
            field,
            format!(
                "{input} prompt + {output} output tokens is longer than the longest context \
                 dynsim serves ({MAX_CONTEXT_TOKENS} tokens)"
            ),
        ));
    }
    let ids = get("hash_ids").ok_or_else(|| bad("hash_ids", "missing".into()))?;
    let Value::Array(ids) = ids else {
        return Err(bad("hash_ids", format!("expected an array, got {ids}")));
    };
    let expected = ids_expected(input, trace_block_size);
    if ids.len() as u64 != expected {
        return Err(bad(
            "hash_ids",
            format!(
                "{} ids for input_length {input}: expected {expected}, one per \
                 {trace_block_size}-token block (workload.trace_block_size)",
                ids.len()
            ),
        ));
    }
    let at = arena.len();
    for (i, v) in ids.iter().enumerate() {
        match v.as_u64() {
            Some(id) => arena.push(id),
            None => {
                arena.truncate(at);
                return Err(bad(
                    "hash_ids",
                    format!("element {i}: expected a non-negative integer, got {v}"),
                ));
            }
        }
    }
    let row = (|| {
        let session = match get("session_id") {
            None => None,
            Some(v) => Some(SessionKey::deserialize(v).map_err(|_| {
                bad(
                    "session_id",
                    format!("expected a string or an integer, got {v}"),
                )
            })?),
        };
        let delay_ms = match get("delay_ms") {
            None => 0.0,
            Some(v) => millis("delay_ms", v)?,
        };
        if !within_clock(delay_ms) {
            return Err(bad(
                "delay_ms",
                format!("{delay_ms} ms is past the clock's limit of 1e12 ms (about 31.7 years)"),
            ));
        }
        Ok(RawRow {
            line: n,
            time: RowTime::Ms(timestamp_ms),
            input,
            output,
            ids: (at as u64, ids.len() as u32),
            session,
            delay_ms,
        })
    })();
    if row.is_err() {
        arena.truncate(at);
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{chain_ids, BlockHash};
    use crate::ids::RequestId;
    use crate::workload::trace::TraceStats;
    use crate::workload::{RequestSpec, SessionLink};
    use std::collections::HashSet;

    fn opts() -> TraceOptions {
        TraceOptions::default()
    }

    fn parse(text: &str, o: &TraceOptions) -> Result<(Vec<RequestSpec>, TraceStats)> {
        let table = read_mooncake(Path::new("t.jsonl"), text.as_bytes(), o)?;
        Ok((
            (0..table.len()).map(|i| table.spec(i)).collect(),
            table.stats(),
        ))
    }

    fn row(ts: u64, input: u32, ids: &[u64]) -> String {
        format!(
            r#"{{"timestamp": {ts}, "input_length": {input}, "output_length": 5, "hash_ids": {ids:?}}}"#
        )
    }

    fn trace_text() -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/traces/mooncake_conversation_trace.jsonl");
        crate::error::read_text(&path).unwrap()
    }

    /// Blocks already seen in an earlier request / all blocks, over requests in order.
    fn reuse(requests: impl Iterator<Item = Vec<BlockHash>>) -> (usize, usize) {
        let (mut seen, mut reused, mut total) = (HashSet::new(), 0, 0);
        for blocks in requests {
            total += blocks.len();
            reused += blocks.iter().filter(|b| seen.contains(*b)).count();
            seen.extend(blocks);
        }
        (reused, total)
    }

    #[test]
    fn conversation_trace_reuses_36_64_percent_of_its_hash_ids() {
        let text = trace_text();
        let (reqs, stats) = parse(&text, &opts()).unwrap();
        assert_eq!((stats.rows, stats.skipped, reqs.len()), (12_031, 0, 12_031));
        assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        // The published 36.64 % counts every hash id, the partial last block included.
        let all_ids = text.lines().map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let ids: Vec<u64> = serde_json::from_value(v["hash_ids"].clone()).unwrap();
            chain_ids(&ids)
        });
        let (reused, total) = reuse(all_ids);
        assert_eq!((reused, total), (105_710, 288_500));
        assert_eq!(
            crate::round::round_py(reused as f64 / total as f64, 4),
            0.3664
        );
        // Routed on its ids, the parser keeps every one of them: the same 36.64 %.
        let (reused, total) = reuse(reqs.into_iter().map(|r| r.blocks));
        assert_eq!((reused, total), (105_710, 288_500));
        // Keeping full blocks only would give 105,592 / 276,491 = 0.3819 instead.
    }

    #[test]
    fn blocks_keep_every_id_and_prefix_is_the_first_block() {
        let text = [row(0, 1100, &[7, 8, 9]), row(1, 100, &[7]), row(2, 0, &[])].join("\n");
        let (reqs, _) = parse(&text, &opts()).unwrap();
        assert_eq!(reqs[0].blocks, chain_ids(&[7, 8, 9]));
        assert_eq!(reqs[0].prefix, Some(chain_ids(&[7])[0].0));
        assert_eq!(reqs[0].prefix_blocks, 1);
        assert_eq!(reqs[1].blocks, chain_ids(&[7]));
        assert_eq!(reqs[1].prefix, reqs[0].prefix);
        assert_eq!((reqs[2].blocks.len(), reqs[2].prefix), (0, None));
        assert_eq!((reqs[2].id, reqs[2].prefix_blocks), (RequestId(2), 0));
    }

    #[test]
    fn malformed_line_names_its_line_and_field() {
        let hundred_ids = format!(
            r#"{{"timestamp": 1, "input_length": 1000, "output_length": 1, "hash_ids": {:?}}}"#,
            (0..100).collect::<Vec<u64>>()
        );
        let too_long = format!(
            r#"{{"timestamp": 1, "input_length": 2000000, "output_length": 1, "hash_ids": {:?}}}"#,
            vec![1u64; 3907]
        );
        let cases = [
            ("{not json", "line"),
            ("[1, 2]", "line"),
            (
                r#"{"timestamp": 1, "input_length": -3, "output_length": 1, "hash_ids": []}"#,
                "input_length",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 1}"#,
                "hash_ids",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [1, "x"]}"#,
                "hash_ids",
            ),
            (
                r#"{"timestamp": "a", "input_length": 3, "output_length": 1, "hash_ids": []}"#,
                "timestamp",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [2], "session_id": [1]}"#,
                "session_id",
            ),
            // Ids that do not cover the prompt: one id for 100,000 tokens, 100 for 1,000.
            (
                r#"{"timestamp": 1, "input_length": 100000, "output_length": 1, "hash_ids": [1]}"#,
                "hash_ids",
            ),
            (hundred_ids.as_str(), "hash_ids"),
            // Longer than the longest context: by its prompt, or by its answer.
            (too_long.as_str(), "input_length"),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 4294967295, "hash_ids": [1]}"#,
                "output_length",
            ),
            // Past the clock's limit.
            (
                r#"{"timestamp": 1e300, "input_length": 3, "output_length": 1, "hash_ids": [1]}"#,
                "timestamp",
            ),
            (
                r#"{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [1], "session_id": 1, "delay_ms": 1e13}"#,
                "delay_ms",
            ),
        ];
        for (bad, field) in cases {
            let text = format!("{}\n\n{bad}\n", row(0, 512, &[1]));
            let err = parse(&text, &opts()).unwrap_err().to_string();
            assert!(err.starts_with(&format!("t.jsonl:3: {field}: ")), "{err}");
        }
    }

    #[test]
    fn skip_bad_counts_and_empty_is_an_error() {
        let text = format!("{}\nnope\n{}\n", row(0, 512, &[1]), row(1, 512, &[2]));
        let skip = TraceOptions {
            skip_bad: true,
            ..opts()
        };
        let (reqs, stats) = parse(&text, &skip).unwrap();
        assert_eq!(
            (reqs.len(), stats),
            (
                2,
                TraceStats {
                    rows: 2,
                    skipped: 1
                }
            )
        );
        assert_eq!(
            parse("\n \n", &opts()).unwrap_err().to_string(),
            "t.jsonl: no requests"
        );
        assert!(parse("nope\n", &skip).is_err());
    }

    #[test]
    fn limit_and_speedup() {
        let text = [row(0, 512, &[1]), row(1000, 512, &[2]), row(3, 512, &[3])].join("\n");
        let o = TraceOptions {
            limit: Some(2),
            speedup: 4.0,
            ..opts()
        };
        let (reqs, stats) = parse(&text, &o).unwrap();
        assert_eq!(stats.rows, 2);
        let arrivals: Vec<u64> = reqs.iter().map(|r| r.arrival_ns).collect();
        assert_eq!(arrivals, vec![0, 250_000_000]);
    }

    #[test]
    fn rows_are_sorted_stably_by_timestamp() {
        let text = [row(5, 512, &[1]), row(2, 512, &[2]), row(5, 512, &[3])].join("\n");
        let (reqs, _) = parse(&text, &opts()).unwrap();
        let firsts: Vec<_> = reqs.iter().map(|r| r.blocks[0]).collect();
        let want: Vec<_> = [2, 1, 3].iter().map(|&i| chain_ids(&[i])[0]).collect();
        assert_eq!(firsts, want);
        assert_eq!(
            reqs.iter().map(|r| r.id.0).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn sessions_link_turns() {
        let text = [
            r#"{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": "b"}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": 7}"#,
            r#"{"timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": "b", "delay_ms": 1.5}"#,
            r#"{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [1]}"#,
            r#"{"timestamp": 4, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": "b"}"#,
            r#"{"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [1], "session_id": "7"}"#,
        ]
        .join("\n");
        let (reqs, _) = parse(&text, &opts()).unwrap();
        let link = |s, after, delay_ns| {
            Some(SessionLink {
                session: s,
                after,
                delay_ns,
            })
        };
        assert_eq!(reqs[0].session, link(0, None, 0));
        assert_eq!(reqs[1].session, link(1, None, 0));
        assert_eq!(reqs[2].session, link(0, Some(RequestId(0)), 1_500_000));
        assert_eq!(reqs[3].session, None);
        assert_eq!(reqs[4].session, link(0, Some(RequestId(2)), 0));
        assert_eq!(reqs[5].session, link(2, None, 0)); // "7" is not 7
    }

    #[test]
    fn rechunked_names_are_prefix_consistent() {
        let o = TraceOptions {
            block_size: 128,
            ..opts()
        };
        let text = [
            row(0, 1500, &[4, 5, 6]),
            row(1, 1536, &[4, 5, 9]),
            row(2, 1024, &[4, 6]),
        ]
        .join("\n");
        let (reqs, _) = parse(&text, &o).unwrap();
        let lens: Vec<usize> = reqs.iter().map(|r| r.blocks.len()).collect();
        assert_eq!(lens, vec![1500 / 128, 1536 / 128, 1024 / 128]);
        assert_eq!(reqs[0].blocks[..8], reqs[1].blocks[..8]); // ids 4, 5 shared
        assert_ne!(reqs[0].blocks[8], reqs[1].blocks[8]);
        assert_eq!(reqs[0].blocks[..4], reqs[2].blocks[..4]); // id 4 shared
        assert_ne!(reqs[0].blocks[4], reqs[2].blocks[4]);
        let names: HashSet<_> = reqs[0].blocks.iter().collect();
        assert_eq!(names.len(), reqs[0].blocks.len());
        let bad = TraceOptions {
            block_size: 300,
            ..opts()
        };
        assert!(parse(&text, &bad)
            .unwrap_err()
            .to_string()
            .contains("does not divide"));
    }

    #[test]
    fn rows_read_without_a_tree_read_as_with_one() {
        // Each row is read both ways: where the typed reading takes a row, the tree reads the
        // same row with the same ids; the rows the published traces write are taken.
        let taken = [
            r#"{"timestamp": 0, "input_length": 1025, "output_length": 5, "hash_ids": [1, 2, 3]}"#,
            r#"{"timestamp": 27.5, "input_length": 512, "output_length": 0, "hash_ids": [9]}"#,
            r#"{"hash_ids": [], "output_length": 1, "input_length": 0, "timestamp": 1e3}"#,
            r#"{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": "a", "delay_ms": 2.5}"#,
            r#"{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": -4}"#,
            r#"{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": 18446744073709551615}"#,
            r#"{"timestamp": 3, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": null, "delay_ms": null}"#,
        ];
        let refused_or_by_tree = [
            r#"{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [7]}"#,
            r#"{"timestamp": null, "input_length": 1, "output_length": 1, "hash_ids": [7]}"#,
            r#"{"timestamp": 1, "input_length": 1.0, "output_length": 1, "hash_ids": [7]}"#,
            r#"{"timestamp": 1, "input_length": 4294967296, "output_length": 1, "hash_ids": [7]}"#,
            r#"{"timestamp": 1, "input_length": 4000000000, "output_length": 1000000000, "hash_ids": []}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7, 8]}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [-7]}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "session_id": 1.5}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "delay_ms": -2}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "delay_ms": 1e13}"#,
            r#"{"timestamp": 1, "timestamp": 2, "input_length": 1, "output_length": 1, "hash_ids": [7]}"#,
            r#"{"input_length": 1, "output_length": 1, "hash_ids": [7]}"#,
            r#"[1, 2]"#,
            // Other keys are the tree's: their values must be ones it can build.
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "x": [1]}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "x": 1e400}"#,
            r#"{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "x": "\ud800"}"#,
            r#"{"timestamp": 1, "#,
        ];
        let deep = format!(
            r#"{{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [7], "x": {}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let path = Path::new("t.jsonl");
        let read = |line: &str, typed: bool| {
            let mut arena = vec![42];
            let row = if typed {
                typed_row(3, line, 512, &mut arena).ok_or(())
            } else {
                parse_row_as_tree(path, 3, line, 512, &mut arena).map_err(|_| ())
            };
            (format!("{row:?}"), arena)
        };
        for line in taken {
            assert!(typed_row(3, line, 512, &mut Vec::new()).is_some(), "{line}");
            assert_eq!(read(line, true), read(line, false), "{line}");
        }
        for line in refused_or_by_tree.iter().copied().chain([deep.as_str()]) {
            let by_tree = read(line, false);
            let typed = read(line, true);
            assert!(typed.0 == "Err(())" || typed == by_tree, "{line}");
            assert_eq!(
                typed.0 == "Err(())",
                typed.1 == [42],
                "{line}: ids kept only with a row"
            );
        }
        // A key written twice is the tree's to read (its last value counts).
        let twice = refused_or_by_tree[10];
        assert!(read(twice, false).0.contains("Ms(2.0)"), "{twice}");
        // Every row of the bundled trace is taken without a tree.
        let text = trace_text();
        let mut arena = Vec::new();
        for (i, line) in text.lines().enumerate() {
            assert!(
                typed_row(i + 1, line, 512, &mut arena).is_some(),
                "line {}",
                i + 1
            );
        }
    }
}
