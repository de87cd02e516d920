//! A synthetic workload: Zipf-popular shared-prefix groups, Poisson or fixed arrivals, length
//! distributions, and optional multi-turn sessions.
//!
//! - **Sessions.** `requests` is the total number of requests; they come in sessions of `turns`
//!   turns (the last session may be shorter). A session draws one group, with popularity
//!   ∝ 1/(rank)^`zipf_s` (group 0 is rank 1). Sessions start at `rate_per_s` per second, the first
//!   at 0: Poisson (exponential gaps) or fixed spacing. Every turn of a session has the session's
//!   start as its `arrival_ns` (a lower bound); later turns link to the turn before and wait
//!   `think_ms` after it completes.
//! - **Tokens.** Group `g`'s shared prefix is tokens `g*1_000_003 + j` (wrapping `u32`) for
//!   `j < shared_prefix_tokens`. The first turn's prompt is that prefix plus `input` fresh tokens;
//!   turn `t`'s prompt is turn `t-1`'s prompt plus its `output` tokens plus new `input` tokens, so
//!   later turns share every block of the earlier ones; each turn but the last names the blocks
//!   of the next turn's prompt that its answer completes (`RequestSpec::answer_blocks`), which
//!   the worker keeps cached when it finishes. Fresh tokens come from a counter starting
//!   at 2^31, so no two requests share them. `prefix = Some(g)`,
//!   `prefix_blocks = shared_prefix_tokens / block_size`. With one turn per session the blocks
//!   from `prefix_blocks` on are the request's own tail (`unshared_from`: no other request can
//!   name them), so workers and routers may keep them out of their tables; see
//!   `own_tails_unshared` for the condition. A group's prefix is hashed once, at its first
//!   request: the names of its full blocks are kept (up to `PREFIX_NAMES_KEPT` names in all)
//!   and every later request chains its own blocks from them.
//! - **Draws.** In session order: the group (one `unit`), the gap to the next session (one `unit`,
//!   Poisson only), then per turn the input length and the output length (`below` for uniform, two
//!   `unit`s Box–Muller for lognormal, none for fixed).

use serde::{Deserialize, Serialize};

use super::schedule::Schedule;
use super::{RequestSpec, SessionLink};
use crate::engine::ms_to_ns;
use crate::hash::{block_hashes, extend_block_hashes, BlockHash};
use crate::ids::RequestId;
use crate::limits::{MAX_CONTEXT_TOKENS, MAX_MS};
use crate::rng::SimRng;

/// Longest length a lognormal draw may give, in tokens.
pub const MAX_DRAW_TOKENS: u32 = 1 << 20;

/// How sessions arrive.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exponential gaps with mean `1 / rate_per_s`.
    #[default]
    Poisson,
    /// Exactly `1 / rate_per_s` apart.
    Fixed,
}

/// A distribution of token counts, tagged by `dist`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum LengthDist {
    /// Always `tokens`.
    Fixed {
        /// The count.
        #[schemars(range(min = 1))]
        tokens: u32,
    },
    /// Uniform over `min..=max`.
    Uniform {
        /// Smallest count.
        #[schemars(range(min = 1))]
        min: u32,
        /// Largest count (at least `min`).
        #[schemars(range(min = 1))]
        max: u32,
    },
    /// `median * exp(sigma * z)`, z standard normal, rounded and clamped to
    /// `1..=`[`MAX_DRAW_TOKENS`].
    Lognormal {
        /// The median count.
        median: f64,
        /// Standard deviation of the log.
        sigma: f64,
    },
}

impl LengthDist {
    /// One draw.
    fn sample(&self, rng: &mut SimRng) -> u32 {
        match *self {
            LengthDist::Fixed { tokens } => tokens,
            LengthDist::Uniform { min, max } => {
                min.saturating_add(rng.below(max.saturating_sub(min) as usize + 1) as u32)
            }
            LengthDist::Lognormal { median, sigma } => {
                let x = (median * (sigma * standard_normal(rng)).exp()).round();
                x.max(1.0).min(f64::from(MAX_DRAW_TOKENS)) as u32 // NaN gives 1
            }
        }
    }

    /// The largest count a draw can give.
    pub(crate) fn max(&self) -> u64 {
        match *self {
            LengthDist::Fixed { tokens } => tokens.into(),
            LengthDist::Uniform { max, .. } => max.into(),
            LengthDist::Lognormal { .. } => MAX_DRAW_TOKENS.into(),
        }
    }

    /// Checks the parameters; `key` names the field for the error.
    fn validate(&self, key: &str) -> Result<(), (String, String)> {
        let err = |k: &str, m: &str| Err((format!("{key}.{k}"), m.to_string()));
        match *self {
            LengthDist::Fixed { tokens: 0 } => err("tokens", "must be at least 1"),
            LengthDist::Uniform { min: 0, .. } => err("min", "must be at least 1"),
            LengthDist::Uniform { min, max } if min > max => err("max", "must be >= min"),
            LengthDist::Lognormal { median, .. } if !(median.is_finite() && median > 0.0) => {
                err("median", "must be positive and finite")
            }
            LengthDist::Lognormal { sigma, .. } if !(sigma.is_finite() && sigma >= 0.0) => {
                err("sigma", "must be >= 0 and finite")
            }
            _ => Ok(()),
        }
    }
}

/// The synthetic workload's parameters (a scenario's `[workload]` table); every key has a default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SyntheticParams {
    /// Total requests (default 1000).
    #[schemars(range(min = 1, max = "crate::limits::MAX_REQUESTS"))]
    pub requests: usize,
    /// Shared-prefix groups (default 16).
    #[schemars(range(min = 1, max = "crate::limits::MAX_REQUESTS"))]
    pub groups: usize,
    /// Zipf exponent of group popularity, ∝ 1/rank^s (default 1.0; 0 is uniform).
    pub zipf_s: f64,
    /// Tokens of each group's shared prefix (default 512; 0: no shared prefix, so no request counts as a repeat).
    pub shared_prefix_tokens: u32,
    /// Sessions started per second (default 10.0; requests per second when `turns` is 1).
    pub rate_per_s: f64,
    /// Arrival process of sessions (default Poisson).
    pub arrival: Arrival,
    /// New prompt tokens per turn, after the shared prefix (default fixed 256).
    pub input: LengthDist,
    /// Tokens generated per turn (default fixed 128).
    pub output: LengthDist,
    /// Turns per session (default 1).
    #[schemars(range(min = 1))]
    pub turns: u32,
    /// Think time between a turn's completion and the next turn, ms (default 0).
    pub think_ms: f64,
    /// Closed loop: this many clients, each sending its next request when its last completes,
    /// in id order, arrival times and sessions ignored (absent: open loop, the default). A
    /// benchmark's `--max-concurrency`.
    #[schemars(range(min = 1))]
    pub concurrency: Option<usize>,
    /// With `concurrency`: the clients join over this many seconds, one at a time at even
    /// steps, as aiperf's `--concurrency-ramp-duration` (absent: all at once).
    pub concurrency_ramp_s: Option<f64>,
    /// Sessions started per second over the run, as a schedule (a daily sine, or piecewise;
    /// see [`crate::workload::schedule`]) instead of the constant `rate_per_s`, which must
    /// then keep its default (absent: constant).
    pub rate_schedule: Option<Schedule>,
}

impl Default for SyntheticParams {
    fn default() -> Self {
        SyntheticParams {
            requests: 1000,
            groups: 16,
            zipf_s: 1.0,
            shared_prefix_tokens: 512,
            rate_per_s: 10.0,
            arrival: Arrival::Poisson,
            input: LengthDist::Fixed { tokens: 256 },
            output: LengthDist::Fixed { tokens: 128 },
            turns: 1,
            think_ms: 0.0,
            concurrency: None,
            concurrency_ramp_s: None,
            rate_schedule: None,
        }
    }
}

/// Checks a closed loop's ramp (`workload.concurrency_ramp_s`): a time of at most 1e9 s, and
/// only with `concurrency`. Returns what is wrong.
pub fn check_ramp(concurrency: Option<usize>, ramp_s: Option<f64>) -> Result<(), String> {
    let Some(ramp) = ramp_s else {
        return Ok(());
    };
    if !(ramp.is_finite() && (0.0..=1e9).contains(&ramp)) {
        return Err("must be in 0..=1e9 seconds".into());
    }
    if concurrency.is_none() {
        return Err("ramps a closed loop's clients: it needs workload.concurrency".into());
    }
    Ok(())
}

impl SyntheticParams {
    /// Checks ranges; on failure returns the offending key (dotted for `input.*`/`output.*`) and
    /// what is wrong.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |k: &str, m: &str| Err((k.to_string(), m.to_string()));
        let most = crate::limits::MAX_REQUESTS;
        if !(1..=most).contains(&self.requests) {
            return err("requests", &format!("must be in 1..={most}"));
        }
        if !(1..=most).contains(&self.groups) {
            return err("groups", &format!("must be in 1..={most}"));
        }
        if !(self.zipf_s.is_finite() && self.zipf_s >= 0.0) {
            return err("zipf_s", "must be >= 0 and finite");
        }
        if !(self.rate_per_s.is_finite() && (1e-6..=1e9).contains(&self.rate_per_s)) {
            return err("rate_per_s", "must be in 1e-6..=1e9 per second");
        }
        if self.turns == 0 {
            return err("turns", "must be at least 1");
        }
        if !(self.think_ms.is_finite() && (0.0..=1e12).contains(&self.think_ms)) {
            return err("think_ms", "must be in 0..=1e12 ms");
        }
        if self.concurrency == Some(0) {
            return err("concurrency", "must be at least 1");
        }
        if let Err(problem) = check_ramp(self.concurrency, self.concurrency_ramp_s) {
            return err("concurrency_ramp_s", &problem);
        }
        if let Some(schedule) = &self.rate_schedule {
            if self.rate_per_s != SyntheticParams::default().rate_per_s {
                return err(
                    "rate_per_s",
                    "is replaced by rate_schedule: remove one of them",
                );
            }
            schedule
                .validate()
                .map_err(|(k, m)| (format!("rate_schedule.{k}"), m))?;
        }
        self.input.validate("input")?;
        self.output.validate("output")?;
        let longest = u64::from(self.shared_prefix_tokens)
            + u64::from(self.turns) * (self.input.max() + self.output.max());
        if longest > u64::from(u32::MAX) {
            // Name what makes it long: the turns when there are several, else the lengths.
            let key = if self.turns > 1 {
                "turns"
            } else if self.input.max() >= self.output.max() {
                "input"
            } else {
                "output"
            };
            return err(key, "the last turn's prompt could exceed 2^32 tokens");
        }
        Ok(())
    }
}

/// A standard normal draw from two `unit`s (Box–Muller, cosine branch).
fn standard_normal(rng: &mut SimRng) -> f64 {
    let u1 = rng.unit();
    let u2 = rng.unit();
    (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Whether a single-turn request's blocks past its shared prefix are its own tail
/// ([`RequestSpec::unshared_from`]): with one turn per session no later turn repeats a prompt,
/// and every block from `shared_prefix_tokens / block_size` on holds a fresh token at the same
/// place in every prompt (all prefixes are equally long), which no other request has as long as
/// the fresh counter cannot come round again: at most 2^32 fresh tokens in all (each request
/// takes at most its input's longest draw). Otherwise (sessions of several turns, or a
/// workload that could wrap the counter) no block is marked. A lognormal input's longest draw is
/// its cap, [`MAX_DRAW_TOKENS`] (2^20), so with lognormal inputs this holds up to 4,096 requests: past that
/// the tails go back into the tables (same results, more memory and time).
fn own_tails_unshared(p: &SyntheticParams) -> bool {
    p.turns <= 1 && (p.requests as u128) * u128::from(p.input.max()) <= 1 << 32
}

/// The synthetic workload made one session at a time, on demand (ids `0..requests` in arrival
/// order, every draw from its own generator, in the order the module doc gives), so a run holds
/// only the sessions in flight. Call [`SyntheticParams::validate`] first, then
/// [`SyntheticStream::check`]: out-of-range values are clamped, not reported, here. A
/// `block_size` of 0 gives requests without blocks.
#[derive(Clone, Debug)]
pub struct SyntheticStream {
    p: SyntheticParams,
    block_size: usize,
    rng: SimRng,
    cumulative: std::sync::Arc<[f64]>,
    fresh: u32,
    made: usize,
    session: u64,
    start_ns: f64,
    /// The names of each group's shared prefix's full blocks, group after group, made at the
    /// group's first request (allocated at the first request; empty when they would not fit
    /// [`PREFIX_NAMES_KEPT`]): every request of a group repeats them.
    prefix_names: Vec<BlockHash>,
    /// Per group, whether its names in `prefix_names` are made.
    prefix_named: Vec<bool>,
    /// The most prefix names kept ([`PREFIX_NAMES_KEPT`]; tests lower it).
    prefix_names_kept: usize,
}

/// The most prefix names a stream keeps (8 MiB, besides a flag per group): past that, each
/// request hashes its prefix again (the same names, more time).
const PREFIX_NAMES_KEPT: usize = 1 << 20;

/// Token `j` of group `g`'s shared prefix.
fn prefix_token(g: usize, j: u32) -> u32 {
    (g as u32).wrapping_mul(1_000_003).wrapping_add(j)
}

/// What [`SyntheticStream::check`] found: the generator as the workload leaves it, and the
/// number of sessions.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The generator after every draw of the workload.
    pub rng: SimRng,
    /// Sessions (each has one first turn).
    pub sessions: usize,
    /// An upper bound on the distinct prompt blocks the workload creates at the block size
    /// given to [`SyntheticStream::check`]: every group's shared prefix, and each session's
    /// longest prompt beyond it (later turns repeat the earlier ones).
    pub distinct_blocks: u64,
    /// An upper bound on those blocks that some request names before its own tail
    /// ([`RequestSpec::unshared_from`]): every group's shared prefix when requests have own
    /// tails, else all of them.
    pub listed_blocks: u64,
}

impl SyntheticStream {
    /// A stream of `p`'s requests at `block_size`, drawing from `rng`.
    pub fn new(p: &SyntheticParams, block_size: usize, rng: SimRng) -> Self {
        let groups = p.groups.max(1);
        let cumulative: std::sync::Arc<[f64]> = (1..=groups)
            .scan(0.0, |acc, rank| {
                *acc += (rank as f64).powf(-p.zipf_s.max(0.0));
                Some(*acc)
            })
            .collect();
        SyntheticStream {
            p: p.clone(),
            block_size,
            rng,
            cumulative,
            fresh: 1 << 31,
            made: 0,
            session: 0,
            start_ns: 0.0,
            prefix_names: Vec::new(),
            prefix_named: Vec::new(),
            prefix_names_kept: PREFIX_NAMES_KEPT,
        }
    }

    /// The full blocks of a group's shared prefix whose names the stream keeps: all of them,
    /// or none when every group's would not fit [`PREFIX_NAMES_KEPT`].
    fn kept_prefix_blocks(&self) -> usize {
        let full = (self.p.shared_prefix_tokens as usize)
            .checked_div(self.block_size)
            .unwrap_or(0);
        if full.saturating_mul(self.p.groups.max(1)) <= self.prefix_names_kept {
            full
        } else {
            0
        }
    }

    /// Makes every draw of the workload without building it, checking that each arrival fits
    /// the clock and each request the longest context. Returns the generator as the workload
    /// leaves it (the run continues from there), the number of sessions and a bound on the
    /// distinct blocks at `block_size`; on failure the offending key and what is wrong.
    pub fn check(
        p: &SyntheticParams,
        block_size: usize,
        rng: SimRng,
    ) -> Result<Checked, (String, String)> {
        let mut stream = SyntheticStream::new(p, 0, rng);
        let mut sessions = 0;
        let bs = block_size.max(1) as u64;
        let shared = u64::from(p.shared_prefix_tokens) / bs;
        let mut distinct_blocks = p.groups as u64 * shared;
        while let Some(session) = stream.session(false) {
            sessions += 1;
            let session = session?;
            if let Some(last) = session.last() {
                distinct_blocks += (u64::from(last.input_tokens) / bs).saturating_sub(shared);
            }
            for r in session {
                let context = u64::from(r.input_tokens) + u64::from(r.output_tokens);
                if context > MAX_CONTEXT_TOKENS {
                    let key = if p.turns > 1 { "turns" } else { "input" };
                    return Err((
                        key.to_string(),
                        format!(
                            "makes request {} hold {context} tokens (prompt + output), more \
                             than the longest context ({MAX_CONTEXT_TOKENS}): lower turns, \
                             input or output",
                            r.id.0
                        ),
                    ));
                }
            }
        }
        Ok(Checked {
            rng: stream.rng,
            sessions,
            distinct_blocks,
            listed_blocks: if own_tails_unshared(p) {
                (p.groups as u64 * shared).min(distinct_blocks)
            } else {
                distinct_blocks
            },
        })
    }

    /// The next session's turns (consecutive ids), `None` once every request is made. With
    /// `build` false only the draws are made (requests carry lengths and links, no blocks).
    /// An arrival past the clock's limit is an error (key and problem).
    pub fn session(&mut self, build: bool) -> Option<Result<Vec<RequestSpec>, (String, String)>> {
        let p = self.p.clone();
        if self.made >= p.requests {
            return None;
        }
        let groups = self.cumulative.len();
        let total_weight = self.cumulative[groups - 1];
        let turns = p.turns.max(1) as usize;
        // With a schedule, sessions start at rate 1 on an operational clock that the schedule
        // maps onto the run's (time rescaling: see `schedule`).
        let gap_ns = match &p.rate_schedule {
            Some(_) => 1e9,
            None => 1e9 / p.rate_per_s,
        };
        let block_size = self.block_size;
        let kept_blocks = if build { self.kept_prefix_blocks() } else { 0 };
        let own_tails = own_tails_unshared(&p);
        let rng = &mut self.rng;
        let session = self.session;
        let u = rng.unit() * total_weight;
        let g = self.cumulative.partition_point(|&c| c <= u).min(groups - 1);
        let start_ns = match &p.rate_schedule {
            Some(schedule) => schedule.time_of(self.start_ns / 1e9) * 1e9,
            None => self.start_ns,
        };
        if start_ns.is_nan() || start_ns > MAX_MS * 1e6 {
            // The rate that placed it: the schedule's where there is one.
            let key = if p.rate_schedule.is_some() {
                "rate_schedule"
            } else {
                "rate_per_s"
            };
            return Some(Err((
                key.to_string(),
                format!(
                    "puts session {session} at {:e} ms, past the clock's limit of 1e12 ms (about \
                     31.7 years): raise {key} or lower requests",
                    start_ns / 1e6
                ),
            )));
        }
        let arrival_ns = start_ns.round() as u64;
        self.start_ns = match p.arrival {
            Arrival::Poisson => self.start_ns - (1.0 - rng.unit()).ln() * gap_ns,
            Arrival::Fixed => (session + 1) as f64 * gap_ns,
        };
        self.session += 1;
        // The prompt's tokens past the prefix blocks whose names are kept (`skip` of them), filled
        // at the first turn, once its length is drawn: one allocation for a single turn.
        let skip = kept_blocks * block_size;
        let mut prompt: Vec<u32> = Vec::new();
        let mut blocks: Vec<BlockHash> = Vec::new();
        if kept_blocks > 0 {
            if self.prefix_named.is_empty() {
                self.prefix_names = vec![BlockHash(0); groups * kept_blocks];
                self.prefix_named = vec![false; groups];
            }
            let names = &mut self.prefix_names[g * kept_blocks..][..kept_blocks];
            if !self.prefix_named[g] {
                let tokens: Vec<u32> = (0..skip as u32).map(|j| prefix_token(g, j)).collect();
                names.copy_from_slice(&block_hashes(&tokens, block_size));
                self.prefix_named[g] = true;
            }
            blocks.extend_from_slice(names);
        }
        let mut prompt_len = u64::from(p.shared_prefix_tokens);
        let fresh = &mut self.fresh;
        let mut fresh_tokens = |n: u32, out: &mut Vec<u32>| {
            if build {
                out.extend((0..n).map(|i| fresh.wrapping_add(i)));
            }
            *fresh = fresh.wrapping_add(n);
        };
        let prefix_blocks = p.shared_prefix_tokens as usize / block_size.max(1);
        let mut last_output = 0;
        let mut out: Vec<RequestSpec> = Vec::new();
        for turn in 0..turns.min(p.requests - self.made) {
            let input = p.input.sample(rng);
            if build && turn == 0 {
                prompt.reserve_exact(p.shared_prefix_tokens as usize - skip + input as usize);
                prompt.extend((skip as u32..p.shared_prefix_tokens).map(|j| prefix_token(g, j)));
            }
            fresh_tokens(last_output, &mut prompt);
            fresh_tokens(input, &mut prompt);
            prompt_len += u64::from(last_output) + u64::from(input);
            last_output = p.output.sample(rng);
            if build && block_size > 0 {
                let done = blocks.len() * block_size - skip;
                let parent = blocks.last().copied();
                extend_block_hashes(&prompt[done..], block_size, parent, &mut blocks);
                // This prompt repeats the turn before and its answer: name that answer's blocks.
                if let Some(before) = out.last_mut() {
                    before.answer_blocks = answer_blocks(before, &blocks, block_size);
                }
            }
            let id = self.made as u64;
            self.made += 1;
            let session_link = (turns > 1).then(|| SessionLink {
                session,
                after: (turn > 0).then(|| RequestId(id - 1)),
                delay_ns: if turn > 0 { ms_to_ns(p.think_ms) } else { 0 },
            });
            out.push(RequestSpec {
                id: RequestId(id),
                arrival_ns,
                input_tokens: u32::try_from(prompt_len).unwrap_or(u32::MAX),
                output_tokens: last_output,
                unshared_from: if own_tails {
                    prefix_blocks.min(blocks.len())
                } else {
                    blocks.len()
                },
                blocks: blocks.clone(),
                prefix: (p.shared_prefix_tokens > 0).then_some(g as u64),
                prefix_blocks: if block_size > 0 { prefix_blocks } else { 0 },
                session: session_link,
                answer_blocks: Vec::new(),
            });
        }
        Some(Ok(out))
    }
}

/// The blocks of `next_blocks` (the next turn's, whose prompt starts with `turn`'s prompt and
/// answer) that `turn`'s answer completes: from the prompt's last partial block up to the last
/// block whose tokens all have KV when `turn` finishes (prompt + output − 1 tokens).
fn answer_blocks(
    turn: &RequestSpec,
    next_blocks: &[BlockHash],
    block_size: usize,
) -> Vec<BlockHash> {
    let prompt = u64::from(turn.input_tokens);
    let with_kv = prompt + u64::from(turn.output_tokens.max(1)) - 1;
    let from = (prompt / block_size as u64) as usize;
    let to = ((with_kv / block_size as u64) as usize).min(next_blocks.len());
    next_blocks
        .get(from..to)
        .map_or_else(Vec::new, <[BlockHash]>::to_vec)
}

/// Generates the whole workload at once (for tests and small tools; a run streams it with
/// [`SyntheticStream`]).
pub fn generate(p: &SyntheticParams, block_size: usize, rng: &mut SimRng) -> Vec<RequestSpec> {
    let mut stream = SyntheticStream::new(p, block_size, rng.clone());
    let mut out = Vec::new();
    while let Some(session) = stream.session(true) {
        out.extend(session.expect("a checked workload"));
    }
    *rng = stream.rng;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKind;

    fn run(p: &SyntheticParams, seed: u64) -> Vec<RequestSpec> {
        generate(p, 16, &mut SimRng::new(RngKind::Chacha, seed))
    }

    #[test]
    fn kept_prefix_names_are_the_names_hashing_every_prompt_gives() {
        // The same workloads made with each group's prefix names kept and with none kept:
        // the same requests, names included, whether or not the prefix ends on a block
        // boundary, over sessions of one and of three turns.
        for (block_size, prefix, turns) in [(16, 64, 1), (16, 30, 3), (48, 2048, 1), (64, 2048, 3)]
        {
            let p = SyntheticParams {
                requests: 300,
                groups: 5,
                turns,
                shared_prefix_tokens: prefix,
                input: LengthDist::Uniform { min: 1, max: 200 },
                ..SyntheticParams::default()
            };
            let made = |kept: usize| {
                let rng = SimRng::new(RngKind::Chacha, 7);
                let mut stream = SyntheticStream::new(&p, block_size, rng);
                stream.prefix_names_kept = kept;
                let mut out = Vec::new();
                while let Some(session) = stream.session(true) {
                    out.extend(session.unwrap());
                }
                (out, stream.prefix_named.iter().filter(|&&n| n).count())
            };
            let (kept, groups_named) = made(PREFIX_NAMES_KEPT);
            let (hashed, none_named) = made(0);
            assert_eq!((groups_named, none_named), (5, 0), "block {block_size}");
            assert_eq!(kept.len(), hashed.len());
            for (a, b) in kept.iter().zip(&hashed) {
                assert_eq!(a.blocks, b.blocks, "block {block_size}, request {}", a.id.0);
                assert_eq!(a.answer_blocks, b.answer_blocks);
                assert_eq!(a.input_tokens, b.input_tokens);
            }
        }
    }

    #[test]
    fn same_seed_same_output_different_seed_different() {
        let p = SyntheticParams {
            requests: 200,
            input: LengthDist::Lognormal {
                median: 100.0,
                sigma: 0.5,
            },
            output: LengthDist::Uniform { min: 1, max: 50 },
            ..SyntheticParams::default()
        };
        assert_eq!(run(&p, 7), run(&p, 7));
        assert_ne!(run(&p, 7), run(&p, 8));
        let py = generate(&p, 16, &mut SimRng::new(RngKind::Python, 7));
        assert_eq!(py, generate(&p, 16, &mut SimRng::new(RngKind::Python, 7)));
    }

    #[test]
    fn requests_have_ids_in_arrival_order_and_group_prefixes() {
        let reqs = run(&SyntheticParams::default(), 1);
        assert_eq!(reqs.len(), 1000);
        assert!(reqs
            .iter()
            .enumerate()
            .all(|(i, r)| r.id == RequestId(i as u64)));
        assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        let r = &reqs[0];
        assert_eq!(
            (r.input_tokens, r.output_tokens, r.blocks.len()),
            (768, 128, 48)
        );
        assert_eq!(r.prefix_blocks, 32);
        let same = reqs
            .iter()
            .find(|o| o.id > RequestId(0) && o.prefix == r.prefix)
            .unwrap();
        assert_eq!(same.blocks[..32], r.blocks[..32]);
        assert_ne!(same.blocks[32], r.blocks[32]);
        let other = reqs.iter().find(|o| o.prefix != r.prefix).unwrap();
        assert_ne!(other.blocks[0], r.blocks[0]);
    }

    #[test]
    fn zipf_makes_group_0_most_popular() {
        let p = SyntheticParams {
            requests: 5000,
            ..SyntheticParams::default()
        };
        let mut counts = vec![0usize; p.groups];
        for r in run(&p, 3) {
            counts[r.prefix.unwrap() as usize] += 1;
        }
        assert!(counts[1..].iter().all(|&c| c < counts[0]), "{counts:?}");
        assert!(
            counts[0] > 2 * counts[3] && counts[0] < 6 * counts[3],
            "{counts:?}"
        );
    }

    #[test]
    fn poisson_mean_gap_is_one_over_rate() {
        let p = SyntheticParams {
            requests: 20_000,
            rate_per_s: 4.0,
            ..SyntheticParams::default()
        };
        let reqs = run(&p, 5);
        let mean_s = reqs.last().unwrap().arrival_ns as f64 / 1e9 / (reqs.len() - 1) as f64;
        assert!((mean_s / 0.25 - 1.0).abs() < 0.05, "{mean_s}");
    }

    #[test]
    fn fixed_arrivals_are_exactly_spaced() {
        let p = SyntheticParams {
            requests: 50,
            arrival: Arrival::Fixed,
            ..SyntheticParams::default()
        };
        let reqs = run(&p, 1);
        assert!(reqs.iter().all(|r| r.arrival_ns == r.id.0 * 100_000_000));
    }

    #[test]
    fn turns_extend_prompts_and_link_sessions() {
        let p = SyntheticParams {
            requests: 10,
            turns: 4,
            think_ms: 2.5,
            input: LengthDist::Uniform { min: 10, max: 40 },
            ..SyntheticParams::default()
        };
        let reqs = run(&p, 9);
        assert_eq!(reqs.len(), 10); // sessions of 4, 4, 2
        for w in reqs.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let (la, lb) = (a.session.unwrap(), b.session.unwrap());
            if la.session == lb.session {
                assert_eq!(
                    lb,
                    SessionLink {
                        session: la.session,
                        after: Some(a.id),
                        delay_ns: 2_500_000
                    }
                );
                assert_eq!(b.blocks[..a.blocks.len()], a.blocks[..]);
                assert!(b.input_tokens >= a.input_tokens + a.output_tokens + 10);
                assert_eq!((a.prefix, a.arrival_ns), (b.prefix, b.arrival_ns));
            } else {
                assert_eq!(
                    (lb.session, lb.after, lb.delay_ns),
                    (la.session + 1, None, 0)
                );
            }
        }
        assert_eq!(reqs[9].session.unwrap().session, 2);
    }

    /// Each turn names the blocks of the next turn's prompt that its answer completes: from
    /// its prompt's last partial block to the last block whose tokens all have KV when it ends
    /// (prompt + output − 1 tokens), checked against the next turn's own tokens; a session's
    /// last turn, and a single turn, name none.
    #[test]
    fn a_turn_names_the_blocks_its_answer_completes_as_the_next_turn_does() {
        let p = SyntheticParams {
            requests: 9,
            turns: 3,
            shared_prefix_tokens: 20,
            input: LengthDist::Uniform { min: 1, max: 40 },
            output: LengthDist::Uniform { min: 1, max: 40 },
            ..SyntheticParams::default()
        };
        let reqs = run(&p, 3);
        let mut named = 0;
        for (k, r) in reqs.iter().enumerate() {
            if k % 3 == 2 {
                assert!(
                    r.answer_blocks.is_empty(),
                    "a last turn's answer is never named"
                );
                continue;
            }
            let next = &reqs[k + 1];
            let (prompt, with_kv) = (
                r.input_tokens as usize,
                (r.input_tokens + r.output_tokens - 1) as usize,
            );
            assert_eq!(r.answer_blocks[..], next.blocks[prompt / 16..with_kv / 16]);
            // The answer's blocks chain on from the prompt's: the next turn's blocks start with
            // this turn's, then the answer's.
            assert_eq!(next.blocks[..r.blocks.len()], r.blocks[..]);
            assert_eq!(r.blocks.len(), prompt / 16);
            named += r.answer_blocks.len();
        }
        assert!(named > 0);
        let single = SyntheticParams { turns: 1, ..p };
        assert!(run(&single, 3).iter().all(|r| r.answer_blocks.is_empty()));
    }

    #[test]
    fn toml_defaults_tags_and_validation() {
        let p: SyntheticParams = toml::from_str(
            "requests = 5\ninput = { dist = \"lognormal\", median = 300.0, sigma = 1.0 }\narrival = \"fixed\"",
        )
        .unwrap();
        assert_eq!(p.requests, 5);
        assert_eq!(p.arrival, Arrival::Fixed);
        assert_eq!(
            p.input,
            LengthDist::Lognormal {
                median: 300.0,
                sigma: 1.0
            }
        );
        assert_eq!(p.output, SyntheticParams::default().output);
        assert!(p.validate().is_ok());
        assert!(toml::from_str::<SyntheticParams>("reqests = 5").is_err());
        assert!(toml::from_str::<SyntheticParams>(
            "input = { dist = \"fixed\", tokens = 1, x = 2 }"
        )
        .is_err());
        let bad = |p: SyntheticParams| p.validate().unwrap_err().0;
        let d = SyntheticParams::default;
        // A prompt length that could pass 2^32 names the lengths, not `turns` (never set).
        let huge = LengthDist::Uniform {
            min: 1,
            max: u32::MAX,
        };
        assert_eq!(bad(SyntheticParams { input: huge, ..d() }), "input");
        assert_eq!(
            bad(SyntheticParams {
                turns: 3,
                input: huge,
                ..d()
            }),
            "turns"
        );
        assert_eq!(
            bad(SyntheticParams {
                rate_per_s: 0.0,
                ..d()
            }),
            "rate_per_s"
        );
        assert_eq!(
            bad(SyntheticParams {
                rate_per_s: f64::INFINITY,
                ..d()
            }),
            "rate_per_s"
        );
        assert_eq!(
            bad(SyntheticParams {
                zipf_s: -1.0,
                ..d()
            }),
            "zipf_s"
        );
        assert_eq!(bad(SyntheticParams { groups: 0, ..d() }), "groups");
        let uniform = LengthDist::Uniform { min: 5, max: 4 };
        assert_eq!(
            bad(SyntheticParams {
                output: uniform,
                ..d()
            }),
            "output.max"
        );
        let huge = LengthDist::Fixed { tokens: u32::MAX };
        assert_eq!(
            bad(SyntheticParams {
                input: huge,
                turns: 2,
                ..d()
            }),
            "turns"
        );
    }

    #[test]
    fn a_rate_schedule_shapes_poisson_arrivals() {
        use crate::workload::schedule::{Interpolate, Schedule};
        // 2 per second for 1,000 s, then 20 per second: about 2,000 then 20,000 arrivals.
        let p = SyntheticParams {
            requests: 12_000,
            rate_schedule: Some(Schedule::Piecewise {
                points: vec![[0.0, 2.0], [1000.0, 20.0]],
                interpolate: Interpolate::Step,
            }),
            ..SyntheticParams::default()
        };
        assert!(p.validate().is_ok());
        let reqs = run(&p, 4);
        let early = reqs
            .iter()
            .filter(|r| r.arrival_ns < 1_000_000_000_000)
            .count();
        assert!((early as f64 / 2000.0 - 1.0).abs() < 0.06, "{early}");
        let last_s = reqs.last().unwrap().arrival_ns as f64 / 1e9;
        // The other 10,000 or so at 20 per second: about 500 s more.
        assert!(
            (last_s - 1000.0 - (12_000 - early) as f64 / 20.0).abs() < 30.0,
            "{last_s}"
        );
        let both = SyntheticParams {
            rate_per_s: 3.0,
            ..p
        };
        assert_eq!(both.validate().unwrap_err().0, "rate_per_s");
    }

    #[test]
    fn single_turn_requests_own_the_blocks_past_their_prefix_and_only_those() {
        // 1,000 single-turn requests on 16 groups, a 30-token prefix at 16-token blocks (block 1
        // straddles prefix and fresh tokens) and lognormal inputs: the blocks the workers and
        // routers must keep in their tables (those before `unshared_from`) are the groups'
        // prefix blocks only, at most 16 of them, not one per request as before; and no other
        // request names a block of an own tail.
        let p = SyntheticParams {
            shared_prefix_tokens: 30,
            input: LengthDist::Lognormal {
                median: 100.0,
                sigma: 0.5,
            },
            ..SyntheticParams::default()
        };
        let reqs = run(&p, 3);
        let mut listed = std::collections::HashSet::new();
        let mut owners = std::collections::HashMap::new();
        for r in &reqs {
            assert_eq!(r.unshared_from, 1, "request {}", r.id.0);
            listed.extend(r.blocks[..r.unshared_from].iter().copied());
            for b in &r.blocks[r.unshared_from..] {
                assert_eq!(owners.insert(*b, r.id), None, "an own tail named twice");
            }
        }
        assert!(listed.len() <= 16, "{} listed blocks", listed.len());
        assert!(listed.iter().all(|b| !owners.contains_key(b)));
        // The memory estimate's bound on them: every group's prefix block, 16.
        let checked = SyntheticStream::check(&p, 16, SimRng::new(RngKind::Chacha, 3)).unwrap();
        assert_eq!(checked.listed_blocks, 16);
        assert!(checked.distinct_blocks >= (listed.len() + owners.len()) as u64);
        assert!(
            owners.len() > 5_000,
            "own tails were marked: {}",
            owners.len()
        );
    }

    #[test]
    fn later_turns_and_a_counter_that_could_come_round_mark_no_own_tail() {
        // Sessions of 3 turns repeat each other's blocks; 2^23 requests of up to 2^10 fresh
        // tokens could wrap the fresh counter (2^33 > 2^32), 2^22 of them could not.
        let turns = SyntheticParams {
            turns: 3,
            ..SyntheticParams::default()
        };
        assert!(run(&turns, 1)
            .iter()
            .all(|r| r.unshared_from == r.blocks.len()));
        let wide = |requests| SyntheticParams {
            requests,
            input: LengthDist::Uniform { min: 1, max: 1024 },
            ..SyntheticParams::default()
        };
        assert!(!own_tails_unshared(&wide(1 << 23)));
        assert!(own_tails_unshared(&wide(1 << 22)));
        assert!(!own_tails_unshared(&turns));
    }
}
