//! A trace read once into a compact table: per row its arrival, lengths, session link and (for
//! Mooncake) its hash ids in one shared arena. A request's block names, the bulk of its memory,
//! are made only when the request is sent ([`TraceTable::spec`]), so a replay holds about
//! [`ROW_BYTES`] per row plus 8 bytes per hash id, not the requests' block lists.
//!
//! The parsers ([`super::mooncake`], [`super::azure`]) read the file line by line into
//! [`RawRow`]s; [`TraceTable::build`] sorts them stably by time, numbers the sessions, links
//! each later turn to the one before it (and that one to its follower), and refuses an arrival
//! past the clock's limit.

use std::collections::HashMap;
use std::path::Path;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::schedule::Schedule;
use super::trace::{TraceOptions, TraceStats};
use super::{RequestSpec, SessionLink};
use crate::engine::ms_to_ns;
use crate::error::{Error, Result};
use crate::hash::{chain_ids_from, BlockHash, ROOT_SEED};
use crate::ids::RequestId;
use crate::limits::MAX_MS;

/// Bytes the table holds per row, besides its hash ids (for memory estimates).
pub const ROW_BYTES: u64 = std::mem::size_of::<TableRow>() as u64;

/// High bits that keep the block ids made up for traces without ids (Azure) apart from small
/// trace ids.
const ID_TAG: u64 = 0xA2u64 << 56;

/// A session id as the trace spells it: `"7"` and `7` are different sessions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SessionKey {
    /// A string id.
    Str(String),
    /// An integer id.
    Int(i128),
}

/// A session id as a JSON trace spells it: a string, or an integer of either sign (read as the
/// same key whichever way the reader hands it over); any other value is refused.
impl<'de> serde::Deserialize<'de> for SessionKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Key;
        impl serde::de::Visitor<'_> for Key {
            type Value = SessionKey;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<SessionKey, E> {
                Ok(SessionKey::Str(s.to_owned()))
            }
            fn visit_i64<E: serde::de::Error>(self, i: i64) -> std::result::Result<SessionKey, E> {
                Ok(SessionKey::Int(i.into()))
            }
            fn visit_u64<E: serde::de::Error>(self, u: u64) -> std::result::Result<SessionKey, E> {
                Ok(SessionKey::Int(u.into()))
            }
        }
        d.deserialize_any(Key)
    }
}

/// One accepted row, as read, before sorting.
#[derive(Clone, Debug)]
pub struct RawRow {
    /// 1-based line in the file (for errors found after sorting).
    pub line: usize,
    /// The row's time, before `speedup`.
    pub time: RowTime,
    /// Prompt tokens.
    pub input: u32,
    /// Tokens to generate.
    pub output: u32,
    /// Where its hash ids start in the arena, and how many (none for Azure).
    pub ids: (u64, u32),
    /// Its session, if any.
    pub session: Option<SessionKey>,
    /// Think time after the session's previous turn, ms.
    pub delay_ms: f64,
}

/// A row's time as its trace writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RowTime {
    /// Milliseconds from the trace's own zero (Mooncake's `timestamp`).
    Ms(f64),
    /// Nanoseconds since an epoch; arrivals count from the earliest row (Azure's `TIMESTAMP`).
    EpochNs(i128),
}

impl RowTime {
    fn ord(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (RowTime::Ms(a), RowTime::Ms(b)) => a.total_cmp(b),
            (RowTime::EpochNs(a), RowTime::EpochNs(b)) => a.cmp(b),
            (RowTime::Ms(_), RowTime::EpochNs(_)) => std::cmp::Ordering::Less,
            (RowTime::EpochNs(_), RowTime::Ms(_)) => std::cmp::Ordering::Greater,
        }
    }

    /// The arrival in ns after `speedup` (`origin`: the earliest row's time), or `None` past
    /// the clock's limit; and the arrival in ms, for the message.
    fn arrival(&self, origin: &RowTime, speedup: f64) -> (Option<u64>, f64) {
        match (*self, *origin) {
            (RowTime::Ms(ms), _) => {
                let at_ms = ms / speedup;
                ((at_ms <= MAX_MS).then(|| ms_to_ns(at_ms)), at_ms)
            }
            (RowTime::EpochNs(t), RowTime::EpochNs(o)) => {
                let ns = (t - o) as f64 / speedup;
                ((ns <= MAX_MS * 1e6).then(|| ns.round() as u64), ns / 1e6)
            }
            (RowTime::EpochNs(_), RowTime::Ms(_)) => (None, f64::INFINITY),
        }
    }
}

/// How a table's rows get block names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// Every trace id is one block, chained (Mooncake at its own block size).
    Chain,
    /// Every trace id is cut into `ratio` sub-blocks, at most `input / block_size` of them.
    Rechunk {
        /// Sub-blocks per trace id.
        ratio: usize,
        /// The engine's block size.
        block_size: usize,
    },
    /// No ids in the trace: `input / block_size` blocks named uniquely per request (Azure).
    Unique {
        /// The engine's block size.
        block_size: usize,
    },
}

#[derive(Clone, Debug)]
struct TableRow {
    arrival_ns: u64,
    input: u32,
    output: u32,
    ids_at: u64,
    ids_len: u32,
    session: Option<SessionLink>,
    follower: Option<RequestId>,
    /// The position of its first id that no other row names (`u32::MAX`: none).
    first_unshared_id: u32,
}

/// A trace's requests in arrival order (ids are positions), compactly.
#[derive(Clone, Debug)]
pub struct TraceTable {
    rows: Vec<TableRow>,
    ids: Vec<u64>,
    naming: Naming,
    first_turns: usize,
    stats: TraceStats,
    /// Sessions numbered in one pass.
    sessions: u64,
    /// How the rows are played over the run, when not once at their own pace.
    replay: Option<Box<ReplayPlan>>,
}

/// A trace played over the run ([`TraceTable::replayed`]): its rows again and again, each pass
/// after the last, and times mapped through a speedup schedule.
#[derive(Clone, Debug)]
struct ReplayPlan {
    /// Requests in all passes.
    total: usize,
    /// First turns in all passes.
    first_turns: usize,
    /// One pass's length on the trace's clock: its last arrival plus the mean gap, ns.
    span_ns: u64,
    /// The speedup over the run (absent: the trace's own pace).
    schedule: Option<Schedule>,
}

impl TraceTable {
    /// Sorts `rows` stably by time, links sessions and checks every arrival against the clock.
    /// `ids` is the arena the rows point into; `stats` what the reader counted. A row whose
    /// arrival (time / `speedup`) is past [`MAX_MS`] is an error naming its line and `field`
    /// (or, with `skip_bad`, skipped and counted).
    pub fn build(
        path: &Path,
        mut rows: Vec<RawRow>,
        ids: Vec<u64>,
        naming: Naming,
        opts: &TraceOptions,
        mut stats: TraceStats,
        field: &str,
    ) -> Result<TraceTable> {
        rows.sort_by(|a, b| a.time.ord(&b.time));
        let origin = rows.first().map_or(RowTime::Ms(0.0), |r| r.time);
        let mut kept = Vec::with_capacity(rows.len());
        for row in rows {
            let (arrival, at_ms) = row.time.arrival(&origin, opts.speedup);
            let Some(arrival_ns) = arrival else {
                if opts.skip_bad {
                    stats.skipped += 1;
                    continue;
                }
                return Err(Error::field(
                    path,
                    row.line,
                    field,
                    format!(
                        "arrives {at_ms:e} ms into the run (after workload.speedup = {}), past \
                         the clock's limit of 1e12 ms (about 31.7 years)",
                        opts.speedup
                    ),
                ));
            };
            kept.push((arrival_ns, row));
        }
        stats.rows = kept.len();
        if kept.is_empty() {
            return Err(Error::file(
                path,
                format!("no requests ({} malformed rows skipped)", stats.skipped),
            ));
        }
        // Lookups only: the map's iteration order never reaches the table.
        let mut sessions: HashMap<SessionKey, (u64, RequestId)> = HashMap::new();
        let mut table = Vec::with_capacity(kept.len());
        let mut first_turns = 0;
        for (id, (arrival_ns, row)) in (0u64..).map(RequestId).zip(kept) {
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
            match session.and_then(|l| l.after) {
                Some(before) => {
                    let prev: &mut TableRow = &mut table[before.0 as usize];
                    prev.follower = Some(id);
                }
                None => first_turns += 1,
            }
            table.push(TableRow {
                arrival_ns,
                input: row.input,
                output: row.output,
                ids_at: row.ids.0,
                ids_len: row.ids.1,
                session,
                follower: None,
                first_unshared_id: u32::MAX,
            });
        }
        mark_unshared_ids(&mut table, &ids);
        Ok(TraceTable {
            rows: table,
            ids,
            naming,
            first_turns,
            stats,
            sessions: sessions.len() as u64,
            replay: None,
        })
    }

    /// The trace played over the run: its arrivals mapped through the speedup `schedule` (the
    /// run's time at which the trace has been played to a row's time; the table must have been
    /// read at speedup 1), and with `duration_s`, played again and again (each pass's blocks
    /// and sessions named apart from the others', as new users would send them) for every row
    /// arriving within that many seconds of the run. On failure: the problem (an arrival past
    /// the clock).
    pub fn replayed(
        mut self,
        schedule: Option<Schedule>,
        duration_s: Option<f64>,
    ) -> std::result::Result<TraceTable, String> {
        let n = self.rows.len();
        let (first, last) = (self.rows[0].arrival_ns, self.rows[n - 1].arrival_ns);
        // A pass lasts its last arrival plus the mean gap between its arrivals.
        let span_ns = (last + (last - first) / (n as u64 - 1).max(1)).max(1);
        let (mut total, mut first_turns) = (n, self.first_turns);
        if let Some(d) = duration_s {
            if last == 0 {
                let rows = if n == 1 {
                    "its one row arrives".to_string()
                } else {
                    format!("its {n} rows all arrive")
                };
                return Err(format!(
                    "duration_s = {d} repeats the trace, but {rows} at 0 ms, so a pass has no \
                     length; leave duration_s out"
                ));
            }
            // Operational (trace) time the run plays in `d` seconds.
            let horizon_ns = match &schedule {
                Some(s) => s.integral(d) * 1e9,
                None => d * 1e9,
            };
            // Every pass that starts within it plays its first row at least.
            let passes = (horizon_ns / span_ns as f64).ceil();
            if passes > crate::limits::MAX_REQUESTS as f64 {
                return Err(format!(
                    "duration_s = {d} plays more than {} passes of the trace, more requests \
                     than a run may have ({})",
                    crate::limits::MAX_REQUESTS,
                    crate::limits::MAX_REQUESTS
                ));
            }
            (total, first_turns) = (0, 0);
            let mut pass = 0u64;
            while (pass as f64) * (span_ns as f64) < horizon_ns {
                let left = horizon_ns - pass as f64 * span_ns as f64;
                let k = self.rows.partition_point(|r| (r.arrival_ns as f64) < left);
                total += k;
                first_turns += (0..k).filter(|&i| !self.is_row_follower(i)).count();
                pass += 1;
            }
            if total == 0 {
                return Err(format!("no row arrives within duration_s = {d}"));
            }
            if total > crate::limits::MAX_REQUESTS {
                return Err(format!(
                    "duration_s = {d} plays {total} requests, more than a run may have ({})",
                    crate::limits::MAX_REQUESTS
                ));
            }
        }
        self.replay = Some(Box::new(ReplayPlan {
            total,
            first_turns,
            span_ns,
            schedule,
        }));
        let end_ns = self.arrival_of(total - 1);
        if end_ns as f64 > MAX_MS * 1e6 {
            return Err(format!(
                "the last request arrives {:e} ms into the run, past the clock's limit of 1e12 ms",
                end_ns as f64 / 1e6
            ));
        }
        Ok(self)
    }

    /// Request `id`'s row and pass.
    fn place(&self, id: usize) -> (usize, u64) {
        let n = self.rows.len();
        match &self.replay {
            Some(_) => (id % n, (id / n) as u64),
            None => (id, 0),
        }
    }

    /// Request `id`'s arrival on the run's clock, ns.
    fn arrival_of(&self, id: usize) -> u64 {
        let (row, pass) = self.place(id);
        let at = self.rows[row].arrival_ns;
        let Some(plan) = &self.replay else {
            return at;
        };
        let trace_ns = at as f64 + pass as f64 * plan.span_ns as f64;
        match &plan.schedule {
            Some(s) => (s.time_of(trace_ns / 1e9) * 1e9).round() as u64,
            None => trace_ns.round() as u64,
        }
    }

    fn is_row_follower(&self, row: usize) -> bool {
        self.rows[row].session.is_some_and(|l| l.after.is_some())
    }

    /// Requests in the trace (in every pass, when replayed again and again).
    pub fn len(&self) -> usize {
        self.replay.as_ref().map_or(self.rows.len(), |p| p.total)
    }

    /// Whether the table has no request (never, once built).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Requests that are not a later turn of a session.
    pub fn first_turns(&self) -> usize {
        self.replay
            .as_ref()
            .map_or(self.first_turns, |p| p.first_turns)
    }

    /// Rows read and skipped.
    pub fn stats(&self) -> TraceStats {
        self.stats
    }

    /// Whether request `id` is a later turn of a session.
    pub fn is_follower(&self, id: usize) -> bool {
        self.is_row_follower(self.place(id).0)
    }

    /// The request that follows request `id` in its session, if any.
    pub fn follower(&self, id: usize) -> Option<RequestId> {
        let (row, pass) = self.place(id);
        let f = self.rows[row].follower?;
        let global = f.0 + pass * self.rows.len() as u64;
        ((global as usize) < self.len()).then_some(RequestId(global))
    }

    /// Prompt blocks of all its requests together (an upper bound on the distinct ones).
    pub fn blocks(&self) -> u64 {
        let passes = self.len().div_ceil(self.rows.len()) as u64;
        passes
            * self
                .rows
                .iter()
                .map(|r| match self.naming {
                    Naming::Chain => u64::from(r.ids_len),
                    Naming::Rechunk { ratio, block_size } => (u64::from(r.input)
                        / block_size as u64)
                        .min(u64::from(r.ids_len) * ratio as u64),
                    Naming::Unique { block_size } => u64::from(r.input) / block_size as u64,
                })
                .sum::<u64>()
    }

    /// Prompt blocks of all its requests together before their own tails (an upper bound on
    /// the distinct blocks some request names before its own tail,
    /// [`RequestSpec::unshared_from`]).
    pub fn listed_blocks(&self) -> u64 {
        let passes = self.len().div_ceil(self.rows.len()) as u64;
        passes
            * self
                .rows
                .iter()
                .map(|r| {
                    let ids = u64::from(r.ids_len);
                    match (self.naming, r.first_unshared_id) {
                        (Naming::Unique { .. }, _) => 0,
                        (Naming::Chain, u32::MAX) => ids,
                        (Naming::Chain, k) => u64::from(k).min(ids),
                        (Naming::Rechunk { ratio, block_size }, k) => {
                            let blocks =
                                (u64::from(r.input) / block_size as u64).min(ids * ratio as u64);
                            (u64::from(k.min(r.ids_len)) * ratio as u64).min(blocks)
                        }
                    }
                })
                .sum::<u64>()
    }

    /// Bytes the table holds.
    pub fn bytes(&self) -> u64 {
        self.rows.capacity() as u64 * ROW_BYTES + self.ids.capacity() as u64 * 8
    }

    /// Request `id` with its block names.
    pub fn spec(&self, id: usize) -> RequestSpec {
        let (r, pass) = self.place(id);
        let row = &self.rows[r];
        let ids = &self.ids[row.ids_at as usize..][..row.ids_len as usize];
        // Each pass names its blocks from its own root, as other users' prompts.
        let root = match pass {
            0 => ROOT_SEED,
            p => xxh3_64_with_seed(&p.to_le_bytes(), ROOT_SEED ^ 0x7061_7373),
        };
        let blocks = match self.naming {
            Naming::Chain => chain_ids_from(ids, root),
            Naming::Rechunk { ratio, block_size } => {
                rechunk_ids(ids, ratio, row.input as usize / block_size, root)
            }
            Naming::Unique { block_size } => {
                let full = u64::from(row.input) / block_size as u64;
                let tagged: Vec<u64> = (0..full)
                    .map(|k| ID_TAG ^ ((id as u64) << 32) ^ k)
                    .collect();
                chain_ids_from(&tagged, ROOT_SEED)
            }
        };
        // A block's name chains over every id up to its own, so from the first id no other row
        // names, no other request can name a block.
        let unshared_from = match (self.naming, row.first_unshared_id) {
            (Naming::Unique { .. }, _) => 0,
            (_, u32::MAX) => blocks.len(),
            (Naming::Chain, k) => k as usize,
            (Naming::Rechunk { ratio, .. }, k) => k as usize * ratio,
        }
        .min(blocks.len());
        RequestSpec {
            id: RequestId(id as u64),
            unshared_from,
            arrival_ns: self.arrival_of(id),
            input_tokens: row.input,
            output_tokens: row.output,
            prefix: match self.naming {
                Naming::Unique { .. } => None,
                _ => blocks.first().map(|b| b.0),
            },
            prefix_blocks: match self.naming {
                Naming::Unique { .. } => 0,
                _ => usize::from(!blocks.is_empty()),
            },
            blocks,
            session: row.session.map(|l| SessionLink {
                session: l.session + pass * self.sessions,
                after: l
                    .after
                    .map(|a| RequestId(a.0 + pass * self.rows.len() as u64)),
                delay_ns: l.delay_ns,
            }),
            // A trace names no answer: its rows give no output's blocks.
            answer_blocks: Vec::new(),
        }
    }
}

/// Sets each row's first id that no other row names (an id repeated within one row still counts
/// once), counting over the rows kept. Ids that are dense (published traces number them from 0)
/// are counted in an array indexed by id; others by sorting a copy. Either way the extra memory is
/// about one word per id, what the table's own arena takes.
fn mark_unshared_ids(rows: &mut [TableRow], ids: &[u64]) {
    let ids_of = |r: &TableRow| &ids[r.ids_at as usize..][..r.ids_len as usize];
    let total: usize = rows.iter().map(|r| r.ids_len as usize).sum();
    let max = rows.iter().flat_map(ids_of).max().copied().unwrap_or(0);
    let named_by_one: Box<dyn Fn(u64) -> bool> = if max < 2 * total as u64 + 1024 {
        // The one row naming each id, or `SHARED` once a second row names it.
        const UNSEEN: u32 = u32::MAX;
        const SHARED: u32 = u32::MAX - 1;
        let mut owner = vec![UNSEEN; max as usize + 1];
        for (k, r) in rows.iter().enumerate() {
            let k = k as u32;
            for &id in ids_of(r) {
                let o = &mut owner[id as usize];
                if *o == UNSEEN {
                    *o = k;
                } else if *o != k {
                    *o = SHARED;
                }
            }
        }
        Box::new(move |id| owner[id as usize] != SHARED)
    } else {
        // Every row's distinct ids, sorted together: an id named by two rows appears twice.
        let mut all: Vec<u64> = Vec::with_capacity(total);
        for r in rows.iter() {
            let start = all.len();
            all.extend_from_slice(ids_of(r));
            all[start..].sort_unstable();
            let mut kept = start;
            for i in start..all.len() {
                if kept == start || all[i] != all[kept - 1] {
                    all[kept] = all[i];
                    kept += 1;
                }
            }
            all.truncate(kept);
        }
        all.sort_unstable();
        let mut shared: Vec<u64> = all
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        drop(all);
        shared.dedup();
        Box::new(move |id| shared.binary_search(&id).is_err())
    };
    for r in rows.iter_mut() {
        r.first_unshared_id = ids_of(r)
            .iter()
            .position(|&id| named_by_one(id))
            .map_or(u32::MAX, |k| k as u32);
    }
}

/// Names for trace ids re-chunked into `ratio` sub-blocks each, chained over `(id, sub-index)`
/// pairs from `root` ([`ROOT_SEED`] for a trace's first pass), at most `max_blocks` of them. Equal id prefixes give equal names.
fn rechunk_ids(ids: &[u64], ratio: usize, max_blocks: usize, root: u64) -> Vec<BlockHash> {
    let mut names = Vec::with_capacity(max_blocks.min(ids.len().saturating_mul(ratio)));
    let mut seed = root;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ids_at: u64, ids_len: u32) -> TableRow {
        TableRow {
            arrival_ns: 0,
            input: 0,
            output: 1,
            ids_at,
            ids_len,
            session: None,
            follower: None,
            first_unshared_id: 0,
        }
    }

    /// The first unshared id of each row, for rows of `lens` ids taken in turn from `ids`.
    fn first_unshared(ids: &[u64], lens: &[u32]) -> Vec<u32> {
        let mut at = 0;
        let mut rows: Vec<TableRow> = lens
            .iter()
            .map(|&n| {
                at += u64::from(n);
                row(at - u64::from(n), n)
            })
            .collect();
        mark_unshared_ids(&mut rows, ids);
        rows.iter().map(|r| r.first_unshared_id).collect()
    }

    #[test]
    fn dense_and_sparse_ids_are_counted_alike() {
        // Rows: [1 2 7] [1 2 8] [1 9] [1 9] [5 5] [3]; 7, 8, 5 and 3 are named by one row each.
        let ids = [1, 2, 7, 1, 2, 8, 1, 9, 1, 9, 5, 5, 3];
        let lens = [3, 3, 2, 2, 2, 1];
        let want = vec![2, 2, u32::MAX, u32::MAX, 0, 0];
        assert_eq!(first_unshared(&ids, &lens), want, "dense ids");
        // The same ids spread over 64 bits (an injective map): counted by sorting.
        let sparse: Vec<u64> = ids
            .iter()
            .map(|&i| (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        assert_eq!(first_unshared(&sparse, &lens), want, "sparse ids");
    }
}
