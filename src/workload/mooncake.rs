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

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::trace::{collect_rows, numbered_lines, TraceOptions, TraceStats};
use super::{RequestSpec, SessionLink};
use crate::engine::ms_to_ns;
use crate::error::{Error, Result};
use crate::hash::{chain_ids, BlockHash, ROOT_SEED};
use crate::ids::RequestId;

/// A session id as the trace spells it: `"7"` and `7` are different sessions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SessionKey {
    Str(String),
    Int(i128),
}

/// One accepted row, before sorting.
struct Row {
    timestamp_ms: f64,
    input: u32,
    output: u32,
    hash_ids: Vec<u64>,
    session: Option<SessionKey>,
    delay_ms: f64,
}

/// Parses a Mooncake trace's `text` (read from `path`, which only names errors) into requests in
/// arrival order. See the module doc for the conversion rules.
///
/// # Errors
/// `file:line: field: what` for the first malformed row (`line` for invalid JSON) unless
/// `skip_bad`; `file: ...` for bad options, a `block_size` that does not divide
/// `trace_block_size`, or a file without requests.
pub fn parse_mooncake(
    path: &Path,
    text: &str,
    opts: &TraceOptions,
) -> Result<(Vec<RequestSpec>, TraceStats)> {
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
    let (mut rows, stats) = collect_rows(path, numbered_lines(text), opts, |n, line| {
        parse_row(path, n, line)
    })?;
    rows.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));

    // Lookups only: the map's iteration order never reaches the output.
    let mut sessions: HashMap<SessionKey, (u64, RequestId)> = HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for (id, row) in (0u64..).map(RequestId).zip(rows) {
        let full = row.input as usize / opts.block_size;
        let blocks = if ratio == 1 {
            chain_ids(&row.hash_ids)
        } else {
            rechunk_ids(&row.hash_ids, ratio, full)
        };
        let session = row.session.map(|key| {
            let next = sessions.len() as u64;
            match sessions.get_mut(&key) {
                Some((session, last)) => {
                    let after = std::mem::replace(last, id);
                    SessionLink {
                        session: *session,
                        after: Some(after),
                        delay_ns: ms_to_ns(row.delay_ms),
                    }
                }
                None => {
                    sessions.insert(key, (next, id));
                    SessionLink {
                        session: next,
                        after: None,
                        delay_ns: 0,
                    }
                }
            }
        });
        out.push(RequestSpec {
            id,
            arrival_ns: ms_to_ns(row.timestamp_ms / opts.speedup),
            input_tokens: row.input,
            output_tokens: row.output,
            prefix: blocks.first().map(|b| b.0),
            prefix_blocks: usize::from(!blocks.is_empty()),
            blocks,
            session,
        });
    }
    Ok((out, stats))
}

/// Names for trace ids re-chunked into `ratio` sub-blocks each, chained over `(id, sub-index)`
/// pairs from [`ROOT_SEED`], at most `max_blocks` of them. Equal id prefixes give equal names.
fn rechunk_ids(ids: &[u64], ratio: usize, max_blocks: usize) -> Vec<BlockHash> {
    let mut names = Vec::with_capacity(max_blocks.min(ids.len().saturating_mul(ratio)));
    let mut seed = ROOT_SEED;
    for &id in ids {
        for sub in 0..ratio as u64 {
            if names.len() >= max_blocks {
                return names;
            }
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&id.to_le_bytes());
            bytes[8..].copy_from_slice(&sub.to_le_bytes());
            seed = xxh3_64_with_seed(&bytes, seed);
            names.push(BlockHash(seed));
        }
    }
    names
}

fn parse_row(path: &Path, n: usize, line: &str) -> Result<Row> {
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
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| bad(key, format!("expected non-negative milliseconds, got {v}")))
    };
    let timestamp_ms = millis(
        "timestamp",
        get("timestamp").ok_or_else(|| bad("timestamp", "missing".into()))?,
    )?;
    let input = tokens("input_length")?;
    let output = tokens("output_length")?;
    let ids = get("hash_ids").ok_or_else(|| bad("hash_ids", "missing".into()))?;
    let Value::Array(ids) = ids else {
        return Err(bad("hash_ids", format!("expected an array, got {ids}")));
    };
    let hash_ids = ids
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_u64().ok_or_else(|| {
                bad(
                    "hash_ids",
                    format!("element {i}: expected a non-negative integer, got {v}"),
                )
            })
        })
        .collect::<Result<Vec<u64>>>()?;
    let session = match get("session_id") {
        None => None,
        Some(Value::String(s)) => Some(SessionKey::Str(s.clone())),
        Some(v) => match (v.as_i64(), v.as_u64()) {
            (Some(i), _) => Some(SessionKey::Int(i.into())),
            (_, Some(u)) => Some(SessionKey::Int(u.into())),
            _ => {
                return Err(bad(
                    "session_id",
                    format!("expected a string or an integer, got {v}"),
                ))
            }
        },
    };
    let delay_ms = match get("delay_ms") {
        None => 0.0,
        Some(v) => millis("delay_ms", v)?,
    };
    Ok(Row {
        timestamp_ms,
        input,
        output,
        hash_ids,
        session,
        delay_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn opts() -> TraceOptions {
        TraceOptions::default()
    }

    fn parse(text: &str, o: &TraceOptions) -> Result<(Vec<RequestSpec>, TraceStats)> {
        parse_mooncake(Path::new("t.jsonl"), text, o)
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
                r#"{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [], "session_id": [1]}"#,
                "session_id",
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
            row(1, 2048, &[4, 5, 9]),
            row(2, 5000, &[4, 6]),
        ]
        .join("\n");
        let (reqs, _) = parse(&text, &o).unwrap();
        let lens: Vec<usize> = reqs.iter().map(|r| r.blocks.len()).collect();
        assert_eq!(lens, vec![1500 / 128, 12, 8]); // the last is capped by 2 ids x 4
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
}
