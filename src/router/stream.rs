//! Each worker's KV event stream as a router sees it: sequence numbers, gaps, and recovery.
//!
//! A worker stamps every event it publishes with its restart epoch and a sequence number that
//! starts at 0 in each epoch and grows by one per event, and keeps its last `bus.replay_buffer`
//! events. This is vLLM's publisher (`vllm/distributed/kv_events.py`, `ZmqEventPublisher`, vLLM
//! main of late 2026): a monotonic sequence number per published batch, a replay buffer of the
//! last `buffer_steps` (10,000) batches, and a replay socket that answers a starting sequence
//! number with every buffered batch from there on, then an end marker. dynsim publishes one
//! event per message, so its sequence numbers count events; a replay answer also says the
//! worker's next sequence number (vLLM's end marker does not), so that a router can tell an
//! answer that starts too late (the buffer no longer has the range) from a complete one. A
//! restart starts a new epoch, as a restarted vLLM process starts its sequence again at 0.
//!
//! [`StreamTracker`] is the router's side, one stream per worker, a pure state machine: it says
//! for each event whether to apply it, and what to ask a worker for. A gap is a sequence number
//! above the next expected one, or silence: no event for `router.gap_silence_ms` after the
//! router sent the worker a request (a serving worker stores blocks as it computes; a worker
//! that stored nothing answers the recovery request with nothing missing). Recovery per
//! `router.on_gap`:
//!
//! - `ignore`: apply every event as it comes (a router without recovery; Dynamo's own replays
//!   a gap, as `replay` does); gaps are only counted, both kinds: a skipped sequence number,
//!   and a silence past the threshold, counted when the worker's next event or the router's
//!   next request to it finds it (no timer runs, so a silence still open at the end of the run
//!   is not counted).
//! - `replay`: ask the worker for its events from the first missing one, drop live events until
//!   the answer comes (they will be in it), then apply the answer; an answer that starts past
//!   the missing range (the buffer overflowed) turns into a `resync`.
//! - `resync`: ask for a snapshot of every block the worker holds; the router then forgets the
//!   worker's blocks and believes the snapshot.
//! - `fallback`: forget the worker's blocks at once, predict them from the router's own
//!   decisions (each believed for `router.fallback_ttl_ms`) and ask for a snapshot; the snapshot
//!   replaces the predictions.
//!
//! Requests and answers travel on the same lossy bus; one not answered within
//! `router.recovery_timeout_ms` is sent again.

use serde::{Deserialize, Serialize};

use crate::engine::Nanos;
use crate::protocol::kv_event::Stamp;

/// The shortest `router.gap_silence_ms` and `router.recovery_timeout_ms`, ms. The router's
/// stream check ticks at half the shorter of the two while it has requests open (see
/// [`crate::router::recovery::Recovery::start_check`]): at a millisecond the conversation trace's
/// 1,774 s run takes 3.5 million ticks (about 2 s of wall time), where 1e-9 ms never ended.
pub const MIN_STREAM_TIMER_MS: f64 = 1.0;

/// `router.on_gap`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum OnGap {
    /// Apply events as they come; count gaps.
    #[default]
    Ignore,
    /// Ask for the missing events, falling back to a snapshot.
    Replay,
    /// Ask for a snapshot.
    Resync,
    /// Predict the worker's cache from routing decisions until a snapshot comes.
    Fallback,
}

impl OnGap {
    /// Its name in a scenario file (`router.on_gap`).
    pub fn name(self) -> &'static str {
        match self {
            OnGap::Ignore => "ignore",
            OnGap::Replay => "replay",
            OnGap::Resync => "resync",
            OnGap::Fallback => "fallback",
        }
    }
}

/// What a router asks a worker for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Every buffered event from sequence number `from` on.
    Replay {
        /// The first missing sequence number.
        from: u64,
    },
    /// Every block the worker holds.
    Snapshot,
}

/// What to do with a live event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it.
    Apply,
    /// Drop it: a duplicate, a leftover of an earlier epoch, or covered by a pending answer.
    Discard,
    /// It revealed a gap: drop it and send this request.
    Gap(Ask),
}

/// What to do with a replay answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayVerdict {
    /// Apply its events from this position in the answer on; the stream is whole again.
    Apply(usize),
    /// It starts past the missing range: ask for a snapshot.
    Escalate,
    /// Nothing asked for it (a duplicate or late answer): ignore it.
    Ignore,
}

/// Counters of a router's streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Gaps found: missing sequence numbers, or silence while serving.
    pub gaps_detected: u64,
    /// Replay requests sent (retries included).
    pub replays: u64,
    /// Snapshot requests sent (retries included).
    pub resyncs: u64,
}

impl std::ops::AddAssign for StreamStats {
    /// Adds another router's counters to these.
    fn add_assign(&mut self, other: StreamStats) {
        self.gaps_detected += other.gaps_detected;
        self.replays += other.replays;
        self.resyncs += other.resyncs;
    }
}

#[derive(Clone, Copy, Debug)]
struct Recovery {
    ask: Ask,
    asked_at: Nanos,
    since: Nanos,
}

#[derive(Clone, Copy, Debug, Default)]
struct Stream {
    epoch: u32,
    next: u64,
    recovering: Option<Recovery>,
    /// When the router first sent the worker a request since its last event.
    waiting_since: Option<Nanos>,
}

/// A router's view of every worker's stream.
#[derive(Clone, Debug)]
pub struct StreamTracker {
    on_gap: OnGap,
    silence_ns: Nanos,
    timeout_ns: Nanos,
    streams: Vec<Stream>,
    /// What the tracker did.
    pub stats: StreamStats,
    /// How long each finished recovery took, from the gap to the stream being whole, ns.
    pub recoveries_ns: Vec<u64>,
}

impl StreamTracker {
    /// Streams of `workers` workers, recovering per `on_gap`.
    pub fn new(workers: usize, on_gap: OnGap, silence_ns: Nanos, timeout_ns: Nanos) -> Self {
        StreamTracker {
            on_gap,
            silence_ns,
            timeout_ns,
            streams: vec![Stream::default(); workers],
            stats: StreamStats::default(),
            recoveries_ns: Vec::new(),
        }
    }

    /// The strategy.
    pub fn on_gap(&self) -> OnGap {
        self.on_gap
    }

    /// Whether `worker`'s stream has no gap pending.
    pub fn whole(&self, worker: usize) -> bool {
        self.streams[worker].recovering.is_none()
    }

    /// The router sent `worker` a request at `now`: silence counts from the first such moment
    /// since the worker's last event.
    pub fn sent_request(&mut self, worker: usize, now: Nanos) {
        if self.silence_ended(worker, now) {
            // Under `ignore` (no timer): the silence is over as a gap; a new one starts now.
            self.streams[worker].waiting_since = None;
        }
        let s = &mut self.streams[worker];
        s.waiting_since.get_or_insert(now);
    }

    /// Under `ignore`, which has no timer to find silences: whether `worker` has been silent
    /// past the threshold at `now` since a request; if so, it is counted as a gap.
    fn silence_ended(&mut self, worker: usize, now: Nanos) -> bool {
        let silent = self.on_gap == OnGap::Ignore
            && self.streams[worker]
                .waiting_since
                .is_some_and(|t| now >= t + self.silence_ns);
        if silent {
            self.stats.gaps_detected += 1;
        }
        silent
    }

    /// A live event from `worker` with `stamp` arrived at `now`.
    pub fn on_event(&mut self, worker: usize, stamp: Stamp, now: Nanos) -> Verdict {
        self.silence_ended(worker, now);
        let on_gap = self.on_gap;
        let s = &mut self.streams[worker];
        s.waiting_since = None;
        if stamp.epoch > s.epoch {
            // The worker restarted: a new stream from 0; a recovery of the old one is moot.
            s.epoch = stamp.epoch;
            s.next = 0;
            s.recovering = None;
        }
        if on_gap == OnGap::Ignore {
            if stamp.epoch == s.epoch {
                if stamp.seq > s.next {
                    self.stats.gaps_detected += 1;
                }
                s.next = s.next.max(stamp.seq + 1);
            }
            return Verdict::Apply;
        }
        if stamp.epoch < s.epoch || s.recovering.is_some() || stamp.seq < s.next {
            return Verdict::Discard;
        }
        if stamp.seq == s.next {
            s.next += 1;
            return Verdict::Apply;
        }
        Verdict::Gap(self.gap(worker, now))
    }

    /// Records a gap on `worker`'s stream found at `now` and returns the request to send.
    fn gap(&mut self, worker: usize, now: Nanos) -> Ask {
        self.stats.gaps_detected += 1;
        let s = &mut self.streams[worker];
        let ask = match self.on_gap {
            OnGap::Replay => Ask::Replay { from: s.next },
            OnGap::Ignore | OnGap::Resync | OnGap::Fallback => Ask::Snapshot,
        };
        s.recovering = Some(Recovery {
            ask,
            asked_at: now,
            since: now,
        });
        self.count(ask);
        ask
    }

    fn count(&mut self, ask: Ask) {
        match ask {
            Ask::Replay { .. } => self.stats.replays += 1,
            Ask::Snapshot => self.stats.resyncs += 1,
        }
    }

    /// A replay answer from `worker` for `epoch`: events numbered `first..` (`first` is `None`
    /// when it has none), and the worker's next sequence number `next`.
    pub fn on_replay(
        &mut self,
        worker: usize,
        epoch: u32,
        first: Option<u64>,
        next: u64,
        now: Nanos,
    ) -> ReplayVerdict {
        let s = &mut self.streams[worker];
        let Some(Recovery {
            ask: Ask::Replay { from },
            since,
            ..
        }) = s.recovering
        else {
            return ReplayVerdict::Ignore;
        };
        if epoch != s.epoch {
            return ReplayVerdict::Ignore;
        }
        s.waiting_since = None;
        let complete = match first {
            Some(first) => first <= from,
            None => next <= from,
        };
        if !complete {
            s.recovering = Some(Recovery {
                ask: Ask::Snapshot,
                asked_at: now,
                since,
            });
            self.count(Ask::Snapshot);
            return ReplayVerdict::Escalate;
        }
        s.next = next.max(from);
        s.recovering = None;
        self.recoveries_ns.push(now - since);
        ReplayVerdict::Apply(first.map_or(0, |f| (from - f) as usize))
    }

    /// A snapshot from `worker` in `epoch` whose next sequence number is `next`: whether to
    /// believe it (something asked for it).
    pub fn on_snapshot(&mut self, worker: usize, epoch: u32, next: u64, now: Nanos) -> bool {
        let s = &mut self.streams[worker];
        let Some(Recovery {
            ask: Ask::Snapshot,
            since,
            ..
        }) = s.recovering
        else {
            return false;
        };
        if epoch < s.epoch {
            return false;
        }
        s.epoch = epoch;
        s.next = next;
        s.recovering = None;
        s.waiting_since = None;
        self.recoveries_ns.push(now - since);
        true
    }

    /// At `now`: requests to send again (unanswered for the timeout) and gaps by silence (a
    /// worker sent a request that published nothing for the silence threshold since). Nothing
    /// under `ignore` (its silences are counted as events and requests come).
    pub fn poll(&mut self, now: Nanos) -> Vec<(usize, Ask)> {
        let mut asks = Vec::new();
        if self.on_gap == OnGap::Ignore {
            return asks;
        }
        for w in 0..self.streams.len() {
            let s = &mut self.streams[w];
            match &mut s.recovering {
                Some(r) if now >= r.asked_at + self.timeout_ns => {
                    r.asked_at = now;
                    let ask = r.ask;
                    self.count(ask);
                    asks.push((w, ask));
                }
                Some(_) => {}
                None if s.waiting_since.is_some_and(|t| now >= t + self.silence_ns) => {
                    s.waiting_since = None;
                    asks.push((w, self.gap(w, now)));
                }
                None => {}
            }
        }
        asks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(epoch: u32, seq: u64) -> Stamp {
        Stamp { epoch, seq }
    }

    #[test]
    fn ignore_applies_everything_and_counts_gaps() {
        let mut t = StreamTracker::new(1, OnGap::Ignore, 10, 5);
        assert_eq!(t.on_event(0, at(0, 0), 1), Verdict::Apply);
        assert_eq!(t.on_event(0, at(0, 3), 2), Verdict::Apply);
        assert_eq!(t.on_event(0, at(0, 1), 3), Verdict::Apply, "late, applied");
        assert_eq!(t.stats.gaps_detected, 1);
        assert!(t.poll(100).is_empty(), "no silence checks");
        // A silence past the threshold (10) after a request counts too, once, when the next
        // event or request shows it; a shorter one does not.
        t.sent_request(0, 20);
        t.on_event(0, at(0, 4), 25);
        assert_eq!(t.stats.gaps_detected, 1, "5 < 10: no gap");
        t.sent_request(0, 30);
        t.sent_request(0, 35);
        t.sent_request(0, 41);
        assert_eq!(t.stats.gaps_detected, 2, "silent from 30 to 41");
        t.on_event(0, at(0, 5), 52);
        assert_eq!(t.stats.gaps_detected, 3, "and again from 41 to 52");
        t.on_event(0, at(0, 6), 100);
        assert_eq!(t.stats.gaps_detected, 3, "no request, no silence");
    }

    #[test]
    fn on_gap_names_are_the_scenario_files() {
        for g in [OnGap::Ignore, OnGap::Replay, OnGap::Resync, OnGap::Fallback] {
            assert_eq!(
                serde_json::to_string(&g).unwrap(),
                format!("\"{}\"", g.name())
            );
        }
    }

    #[test]
    fn replay_drops_live_events_until_the_answer_then_applies_from_the_gap() {
        let mut t = StreamTracker::new(1, OnGap::Replay, 1_000, 50);
        assert_eq!(t.on_event(0, at(0, 0), 0), Verdict::Apply);
        assert_eq!(
            t.on_event(0, at(0, 2), 10),
            Verdict::Gap(Ask::Replay { from: 1 })
        );
        assert_eq!(t.on_event(0, at(0, 3), 11), Verdict::Discard);
        assert!(!t.whole(0));
        // Lost answer: asked again after the timeout.
        assert!(t.poll(59).is_empty());
        assert_eq!(t.poll(60), vec![(0, Ask::Replay { from: 1 })]);
        // The answer holds 0..=3 (the buffer starts at 0): apply from position 1.
        assert_eq!(t.on_replay(0, 0, Some(0), 4, 70), ReplayVerdict::Apply(1));
        assert!(t.whole(0));
        assert_eq!(t.recoveries_ns, vec![60]);
        assert_eq!(t.on_event(0, at(0, 3), 71), Verdict::Discard, "duplicate");
        assert_eq!(t.on_event(0, at(0, 4), 72), Verdict::Apply);
        assert_eq!(t.on_replay(0, 0, Some(0), 4, 80), ReplayVerdict::Ignore);
        assert_eq!((t.stats.gaps_detected, t.stats.replays), (1, 2));
    }

    #[test]
    fn a_replay_that_starts_too_late_becomes_a_snapshot() {
        let mut t = StreamTracker::new(1, OnGap::Replay, 1_000, 50);
        t.on_event(0, at(0, 0), 0);
        t.on_event(0, at(0, 9), 1);
        assert_eq!(t.on_replay(0, 0, Some(5), 10, 2), ReplayVerdict::Escalate);
        assert_eq!(t.on_replay(0, 0, None, 10, 3), ReplayVerdict::Ignore);
        assert!(t.on_snapshot(0, 0, 10, 4));
        assert!(t.whole(0));
        assert_eq!(t.on_event(0, at(0, 10), 5), Verdict::Apply);
        assert_eq!((t.stats.replays, t.stats.resyncs), (1, 1));
        // An empty answer while events are missing also escalates.
        t.on_event(0, at(0, 12), 6);
        assert_eq!(t.on_replay(0, 0, None, 13, 7), ReplayVerdict::Escalate);
    }

    #[test]
    fn silence_after_a_request_is_a_gap_and_a_restart_starts_a_new_stream() {
        let mut t = StreamTracker::new(2, OnGap::Resync, 100, 50);
        t.sent_request(0, 0);
        t.sent_request(0, 30);
        assert!(t.poll(99).is_empty());
        assert_eq!(t.poll(100), vec![(0, Ask::Snapshot)]);
        assert!(t.whole(1), "worker 1 serves nothing");
        // The worker restarts before answering: its first event of epoch 1 resets the stream.
        assert_eq!(t.on_event(0, at(1, 0), 120), Verdict::Apply);
        assert!(t.whole(0));
        assert_eq!(t.on_event(0, at(0, 7), 121), Verdict::Discard, "old epoch");
        assert!(!t.on_snapshot(0, 0, 8, 122), "nothing asked");
    }
}
