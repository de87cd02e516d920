//! Gap recovery for a router that learns from KV events, per `router.on_gap`: the pure half of
//! what the router actor does with its event streams (see [`super::stream`] for the protocol).
//!
//! [`Recovery`] owns each worker's [`StreamTracker`], the replay and snapshot requests to send,
//! and in `fallback` the predictions (a decision for a worker whose stream broke counts as that
//! worker holding the prompt for `router.fallback_ttl_ms`). It never sends or reads a clock: the
//! router actor hands it each event, answer, decision and timer tick with the time, sends what
//! [`Recovery::take_asks`] returns over the bus, runs the check timer when
//! [`Recovery::start_check`] says so, and applies what it is told to believe (through a
//! `believe` callback, in order) to its policy and audit.

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::ids::WorkerId;
use crate::protocol::kv_event::KvEvent;

use super::stream::{Ask, OnGap, ReplayVerdict, StreamTracker, Verdict};
use super::ttl::TtlIndex;
use crate::protocol::kv_event::Stamp;
use crate::protocol::messages::SnapshotAnswer;

/// Gap recovery state: the stream tracker, the asks, and in fallback the predictions.
pub struct Recovery {
    streams: StreamTracker,
    check_every: Nanos,
    checking: bool,
    /// Workers routed from predictions until their snapshot comes.
    fallback: Vec<bool>,
    guesses: TtlIndex,
    guess_ttl_ns: Nanos,
    /// Requests to send once the message at hand is handled.
    asks: Vec<(usize, Ask)>,
}

impl Recovery {
    /// Recovery over `workers` streams: `on_gap` says how, a stream silent `silence_ns` after a
    /// request is a gap, a request unanswered `timeout_ns` goes again, and a prediction in
    /// fallback is believed `guess_ttl_ns`. The check timer ticks at half the shorter of the two.
    pub fn new(
        workers: usize,
        on_gap: OnGap,
        silence_ns: Nanos,
        timeout_ns: Nanos,
        guess_ttl_ns: Nanos,
    ) -> Self {
        Recovery {
            streams: StreamTracker::new(workers, on_gap, silence_ns, timeout_ns),
            check_every: (silence_ns.min(timeout_ns) / 2).max(1),
            checking: false,
            fallback: vec![false; workers],
            guesses: TtlIndex::default(),
            guess_ttl_ns,
            asks: Vec::new(),
        }
    }

    /// The stream tracker (its counters go into the report).
    pub fn streams(&self) -> &StreamTracker {
        &self.streams
    }

    /// A request went to `worker` (this router's or, with replica sync, a peer's).
    pub fn sent_request(&mut self, worker: usize, now: Nanos) {
        self.streams.sent_request(worker, now);
    }

    /// A live event from the bus: believed if it is the next of its stream (returns `true`);
    /// a gap asks for recovery.
    pub fn live(
        &mut self,
        stamp: Stamp,
        event: KvEvent,
        now: Nanos,
        mut believe: impl FnMut(&KvEvent),
    ) -> bool {
        let w = event.worker().index();
        match self.streams.on_event(w, stamp, now) {
            Verdict::Apply => {
                believe(&event);
                true
            }
            Verdict::Discard => false,
            Verdict::Gap(ask) => {
                self.gap(w, ask, &mut believe);
                false
            }
        }
    }

    /// A gap on `w`'s stream: the ask goes out with the next [`Recovery::take_asks`], and in
    /// fallback the worker's blocks are forgotten for predictions.
    fn gap(&mut self, w: usize, ask: Ask, believe: &mut impl FnMut(&KvEvent)) {
        self.asks.push((w, ask));
        if self.streams.on_gap() == OnGap::Fallback && !self.fallback[w] {
            self.fallback[w] = true;
            believe(&KvEvent::Cleared {
                worker: WorkerId::at(w),
            });
        }
    }

    /// A worker's replay answer (`events` numbered from their first; `next`, its next sequence
    /// number): the missing events are believed in order; returns how many. An answer that
    /// starts too late asks for a snapshot instead.
    pub fn replay(
        &mut self,
        worker: WorkerId,
        epoch: u32,
        events: Vec<(u64, KvEvent)>,
        next: u64,
        now: Nanos,
        mut believe: impl FnMut(&KvEvent),
    ) -> u64 {
        let w = worker.index();
        let first = events.first().map(|(seq, _)| *seq);
        match self.streams.on_replay(w, epoch, first, next, now) {
            ReplayVerdict::Apply(from) => {
                let mut applied = 0;
                for (_, event) in events.into_iter().skip(from) {
                    applied += 1;
                    believe(&event);
                }
                applied
            }
            ReplayVerdict::Escalate => {
                self.asks.push((w, Ask::Snapshot));
                0
            }
            ReplayVerdict::Ignore => 0,
        }
    }

    /// A worker's snapshot (every block it holds, as of its next sequence number: on its
    /// device, and on each lower tier): if it is the one awaited, the worker's blocks are
    /// forgotten on every tier (predictions too) and the snapshot believed, device then each
    /// lower tier, so the router knows what a lossless stream would have told it. Returns
    /// whether it was believed.
    pub fn snapshot(
        &mut self,
        answer: SnapshotAnswer,
        now: Nanos,
        mut believe: impl FnMut(&KvEvent),
    ) -> bool {
        let SnapshotAnswer {
            worker,
            epoch,
            next,
            blocks,
            lower,
        } = answer;
        let w = worker.index();
        if !self.streams.on_snapshot(w, epoch, next, now) {
            return false;
        }
        self.fallback[w] = false;
        self.guesses.drop_worker(w);
        believe(&KvEvent::Cleared { worker });
        believe(&KvEvent::Stored {
            worker,
            parent: None,
            blocks: blocks.into(),
        });
        for (tier, blocks) in lower.into_iter().filter(|(_, b)| !b.is_empty()) {
            believe(&KvEvent::TierStored {
                worker,
                tier,
                blocks,
            });
        }
        true
    }

    /// In fallback, a decision sending `blocks` to `w` counts as `w` holding them for the TTL.
    pub fn guess(
        &mut self,
        blocks: &[BlockHash],
        w: usize,
        now: Nanos,
        mut believe: impl FnMut(&KvEvent),
    ) {
        if !self.fallback[w] {
            return;
        }
        self.guesses.record(w, blocks, now + self.guess_ttl_ns);
        believe(&KvEvent::Stored {
            worker: WorkerId::at(w),
            parent: None,
            blocks: blocks.to_vec().into(),
        });
    }

    /// Forgets predictions whose TTL is up.
    pub fn expire_guesses(&mut self, now: Nanos, mut believe: impl FnMut(&KvEvent)) {
        let mut expired = Vec::new();
        self.guesses
            .expire_with(now, |w, blocks| expired.push((w, blocks.to_vec())));
        for (w, blocks) in expired {
            believe(&KvEvent::Removed {
                worker: WorkerId::at(w),
                blocks,
            });
        }
    }

    /// The replay and snapshot requests gathered since the last call, to send.
    pub fn take_asks(&mut self) -> Vec<(usize, Ask)> {
        std::mem::take(&mut self.asks)
    }

    /// Whether to start the check timer now, and its delay: when it is idle, gaps are
    /// recovered, and the router has requests open (`busy`; a router with none lets its checks
    /// rest, so that a run ends, and the next request wakes them).
    pub fn start_check(&mut self, busy: bool) -> Option<Nanos> {
        if self.streams.on_gap() == OnGap::Ignore || self.checking || !busy {
            return None;
        }
        self.checking = true;
        Some(self.check_every)
    }

    /// The check timer fired: retries and silences become asks (and, in fallback, forgotten
    /// workers). The caller then asks [`Recovery::start_check`] for the next tick.
    pub fn check(&mut self, now: Nanos, mut believe: impl FnMut(&KvEvent)) {
        self.checking = false;
        for (w, ask) in self.streams.poll(now) {
            self.gap(w, ask, &mut believe);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kv_event::Tier;

    fn stored(w: usize, blocks: &[u64]) -> KvEvent {
        KvEvent::Stored {
            worker: WorkerId::at(w),
            parent: None,
            blocks: blocks
                .iter()
                .map(|&b| BlockHash(b))
                .collect::<Vec<_>>()
                .into(),
        }
    }

    fn at(seq: u64) -> Stamp {
        Stamp { epoch: 0, seq }
    }

    #[test]
    fn replay_believes_the_missing_events_in_order_then_the_stream_goes_on() {
        let mut r = Recovery::new(2, OnGap::Replay, 1_000, 1_000, 0);
        let mut seen = Vec::new();
        assert!(r.live(at(0), stored(1, &[1]), 0, |e| seen.push(e.clone())));
        // Sequence 3 after 0: a gap, asked from 1; the event itself is dropped.
        assert!(!r.live(at(3), stored(1, &[4]), 5, |e| seen.push(e.clone())));
        assert_eq!(r.take_asks(), vec![(1, Ask::Replay { from: 1 })]);
        assert!(r.take_asks().is_empty());
        let answer = vec![
            (1, stored(1, &[2])),
            (2, stored(1, &[3])),
            (3, stored(1, &[4])),
        ];
        let applied = r.replay(WorkerId::at(1), 0, answer, 4, 9, |e| seen.push(e.clone()));
        assert_eq!(applied, 3);
        assert!(r.live(at(4), stored(1, &[5]), 10, |e| seen.push(e.clone())));
        let expected: Vec<KvEvent> = (1..=5).map(|b| stored(1, &[b])).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn fallback_forgets_then_predicts_until_the_snapshot_replaces_the_predictions() {
        let mut r = Recovery::new(2, OnGap::Fallback, 1_000, 1_000, 100);
        let mut seen = Vec::new();
        // No gap yet: decisions predict nothing.
        r.guess(&[BlockHash(7)], 0, 0, |e| seen.push(e.clone()));
        assert!(seen.is_empty());
        assert!(!r.live(at(2), stored(0, &[1]), 10, |e| seen.push(e.clone())));
        assert_eq!(r.take_asks(), vec![(0, Ask::Snapshot)]);
        let cleared = KvEvent::Cleared {
            worker: WorkerId::at(0),
        };
        assert_eq!(seen, vec![cleared.clone()]);
        // A decision for worker 0 is believed for 100 ns, then forgotten.
        r.guess(&[BlockHash(7)], 0, 20, |e| seen.push(e.clone()));
        assert_eq!(seen.last(), Some(&stored(0, &[7])));
        r.expire_guesses(119, |e| seen.push(e.clone()));
        assert_eq!(seen.len(), 2);
        r.expire_guesses(120, |e| seen.push(e.clone()));
        let removed = KvEvent::Removed {
            worker: WorkerId::at(0),
            blocks: vec![BlockHash(7)],
        };
        assert_eq!(seen.last(), Some(&removed));
        // The snapshot: forget, believe it, and predict no more.
        seen.clear();
        r.guess(&[BlockHash(8)], 0, 130, |_| {});
        let answer = SnapshotAnswer {
            worker: WorkerId::at(0),
            epoch: 0,
            next: 3,
            blocks: vec![BlockHash(9)],
            lower: Vec::new(),
        };
        assert!(r.snapshot(answer.clone(), 140, |e| seen.push(e.clone())));
        assert_eq!(seen, vec![cleared, stored(0, &[9])]);
        // The same answer again is awaited no more: not believed.
        assert!(!r.snapshot(answer, 145, |e| seen.push(e.clone())));
        assert_eq!(seen.len(), 2);
        r.guess(&[BlockHash(10)], 0, 150, |e| seen.push(e.clone()));
        r.expire_guesses(1_000, |e| seen.push(e.clone()));
        assert_eq!(
            seen.len(),
            2,
            "no prediction after the snapshot, none left to expire"
        );
    }

    #[test]
    fn a_snapshot_restores_the_lower_tiers_after_forgetting_them() {
        let mut r = Recovery::new(1, OnGap::Resync, 1_000, 1_000, 0);
        assert!(!r.live(at(2), stored(0, &[1]), 10, |_| {}));
        assert_eq!(r.take_asks(), vec![(0, Ask::Snapshot)]);
        let mut seen = Vec::new();
        let worker = WorkerId::at(0);
        let answer = SnapshotAnswer {
            worker,
            epoch: 0,
            next: 3,
            blocks: vec![BlockHash(9)],
            lower: vec![
                (Tier::Host, vec![BlockHash(3), BlockHash(4)]),
                (Tier::Disk, Vec::new()),
            ],
        };
        assert!(r.snapshot(answer, 20, |e| seen.push(e.clone())));
        // The `Cleared` forgets every tier (`LowerTiers::apply`); the host blocks come back
        // after the device's, and an empty tier says nothing.
        assert_eq!(
            seen,
            vec![
                KvEvent::Cleared { worker },
                stored(0, &[9]),
                KvEvent::TierStored {
                    worker,
                    tier: Tier::Host,
                    blocks: vec![BlockHash(3), BlockHash(4)],
                },
            ]
        );
    }

    #[test]
    fn the_check_timer_runs_once_at_a_time_while_busy_and_never_when_gaps_are_ignored() {
        let mut ignore = Recovery::new(1, OnGap::Ignore, 1_000, 400, 0);
        assert_eq!(ignore.start_check(true), None);
        let mut r = Recovery::new(1, OnGap::Resync, 1_000, 400, 0);
        assert_eq!(r.start_check(false), None);
        assert_eq!(r.start_check(true), Some(200));
        assert_eq!(r.start_check(true), None, "already ticking");
        r.check(200, |_| {});
        assert_eq!(r.start_check(true), Some(200));
    }
}
