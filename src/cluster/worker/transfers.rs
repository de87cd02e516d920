//! The KV transfers of a disaggregated run: one ledger every worker shares.
//!
//! A prefill worker's link carries one transfer at a time, in hand-off order, at its full rate:
//! the ledger schedules it ([`Transfers::send`], from `Worker::hand_off` in `actor.rs`) and
//! keeps each transfer from its hand-off until its message reaches the decode worker. A worker that loses its memory (a restart, or a removal
//! without a drain) loses the transfers from it (still on its link) and to it (being read into
//! its memory, or waiting to be): their requests go back to their routers, and their hand-offs
//! are dropped when they arrive.
//!
//! A transfer lost by its decode worker frees the prefill worker's link at once: in Dynamo the
//! decode side reads the KV from the prefill GPU (NIXL), so a decode worker that is gone reads
//! no more, and the transfers queued behind on the same link start earlier. The prefill worker
//! re-times them ([`Transfers::retime`]) and sends their hand-offs again for the earlier
//! instant; the first messages, now stale, are dropped when they arrive.

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::rc::Rc;

use crate::engine::{ActorId, Nanos};
use crate::ids::{RequestId, WorkerId};
use crate::protocol::messages::Routed;

/// The KV transfers of a run, one ledger every worker shares.
pub type SharedTransfers = Rc<RefCell<Transfers>>;

/// A hand-off's key: its request and attempt (`Routed::retries` when sent).
type Key = (RequestId, u32);

/// A hand-off as its prefill worker asks for it: from and to where, and how long it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandOff {
    /// The prefill worker whose link carries it, and its address.
    pub from: (WorkerId, ActorId),
    /// The decode worker it goes to, and its address.
    pub to: (WorkerId, ActorId),
    /// How long it holds the link.
    pub moving: Nanos,
    /// From taking the link to its message reaching the decode worker (the link's time and the
    /// fixed overhead, which does not hold the link).
    pub landing: Nanos,
}

/// One hand-off on its way.
#[derive(Clone, Debug)]
struct OnTheWay {
    h: HandOff,
    /// When it takes the link (after those before it).
    start: Nanos,
    /// When its message reaches the decode worker.
    lands: Nanos,
    routed: Routed,
}

impl OnTheWay {
    fn key(&self) -> Key {
        (self.routed.spec.id, self.routed.retries)
    }
}

/// What a worker losing its memory lost of the transfers.
#[derive(Debug, Default)]
pub struct Lost {
    /// The requests whose KV was lost, in hand-off order.
    pub requests: Vec<Routed>,
    /// The other prefill workers whose links a lost transfer freed (a decode worker's loss),
    /// by address, in the order of their first lost transfer.
    pub links_freed: Vec<ActorId>,
}

/// The hand-offs on their way (on a link or queued for it, each kept until its message reaches
/// its decode worker), in the order they were handed to their links, those lost before they
/// landed (their request having gone back to its router), and the stale messages of those
/// re-timed.
#[derive(Debug, Default)]
pub struct Transfers {
    on_the_way: VecDeque<OnTheWay>,
    lost: BTreeSet<Key>,
    /// Hand-offs sent again for an earlier instant, by key and the instant the first message
    /// arrives: that message is dropped.
    superseded: BTreeSet<(Key, Nanos)>,
    /// When each prefill worker's link is free, by worker number: after the transfers on it.
    link_free: Vec<Nanos>,
}

impl Transfers {
    /// Hands `routed` to `h.from`'s link at `now`: it takes the link when the transfers before
    /// it leave it. Returns when its message reaches the decode worker.
    pub fn send(&mut self, h: HandOff, routed: Routed, now: Nanos) -> Nanos {
        debug_assert!(h.moving <= h.landing);
        let free = self.link_free_mut(h.from.0);
        let start = (*free).max(now);
        *free = start.saturating_add(h.moving);
        let lands = start.saturating_add(h.landing);
        self.on_the_way.push_back(OnTheWay {
            h,
            start,
            lands,
            routed,
        });
        lands
    }

    fn link_free_mut(&mut self, worker: WorkerId) -> &mut Nanos {
        let k = worker.index();
        if k >= self.link_free.len() {
            self.link_free.resize(k + 1, 0);
        }
        &mut self.link_free[k]
    }

    /// Whether a transfer to `worker` has yet to reach it: one that lands at this very instant
    /// counts until its hand-off is delivered (a lost one's hand-off, dropped on arrival, still
    /// reaches the worker then).
    pub fn inbound(&self, worker: WorkerId) -> bool {
        (self.on_the_way.iter()).any(|t| t.h.to.0 == worker)
    }

    /// A hand-off of `routed` reached its decode worker at `now`: whether it is to be dropped
    /// (its KV was lost, or the message is stale, the hand-off having been sent again for an
    /// earlier instant). A hand-off arrives once: it is forgotten.
    pub fn arrived(&mut self, routed: &Routed, now: Nanos) -> bool {
        let key = (routed.spec.id, routed.retries);
        if self.superseded.remove(&(key, now)) {
            return true;
        }
        let at = (self.on_the_way.iter()).position(|t| t.key() == key);
        if let Some(at) = at {
            self.on_the_way.remove(at);
        }
        self.lost.remove(&key)
    }

    /// The transfers from or to `worker` not yet landed at `now`, now lost, and the other
    /// links they freed (its own link is free from now).
    pub fn lose(&mut self, worker: WorkerId, now: Nanos) -> Lost {
        let mut lost = Lost::default();
        let mut kept = VecDeque::with_capacity(self.on_the_way.len());
        for t in std::mem::take(&mut self.on_the_way) {
            let (from, to) = (t.h.from, t.h.to);
            if t.lands > now && (from.0 == worker || to.0 == worker) {
                self.lost.insert(t.key());
                if from.0 != worker && !lost.links_freed.contains(&from.1) {
                    lost.links_freed.push(from.1);
                }
                lost.requests.push(t.routed);
            } else {
                kept.push_back(t);
            }
        }
        self.on_the_way = kept;
        *self.link_free_mut(worker) = now;
        lost
    }

    /// Re-times the transfers on prefill worker `from`'s link at `now`, after some were lost:
    /// each that has not taken the link yet takes it when the one before it leaves it (or now),
    /// and the link is free after the last. Returns the hand-offs to send again: the request,
    /// its decode worker's address and the delay from `now` (their first messages will be
    /// dropped).
    pub fn retime(&mut self, from: WorkerId, now: Nanos) -> Vec<(Routed, ActorId, Nanos)> {
        let mut again = Vec::new();
        let mut free = now;
        for t in self.on_the_way.iter_mut().filter(|t| t.h.from.0 == from) {
            if t.start > now && free < t.start {
                self.superseded.insert((t.key(), t.lands));
                t.start = free;
                t.lands = free + t.h.landing;
                again.push((t.routed.clone(), t.h.to.1, t.lands - now));
            }
            free = free.max(t.start.saturating_add(t.h.moving));
        }
        *self.link_free_mut(from) = free;
        again
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::workload::RequestSpec;

    fn routed(id: u64) -> Routed {
        let spec = RequestSpec {
            id: RequestId(id),
            arrival_ns: 0,
            input_tokens: 1000,
            output_tokens: 4,
            blocks: Vec::new(),
            prefix: None,
            prefix_blocks: 0,
            session: None,
            unshared_from: 0,
            answer_blocks: Vec::new(),
        };
        Routed::arriving(Arc::new(spec), ActorId(0), 0)
    }

    /// A hand-off from prefill worker 0 (address 10) to decode worker `to` (address 10 + `to`).
    fn hand_off(to: u32, moving: Nanos, overhead: Nanos) -> HandOff {
        HandOff {
            from: (WorkerId::at(0), ActorId(10)),
            to: (WorkerId::at(to as usize), ActorId(10 + to)),
            moving,
            landing: moving + overhead,
        }
    }

    /// When prefill worker 0's link is free.
    fn free(t: &Transfers) -> Nanos {
        t.link_free[0]
    }

    #[test]
    fn a_decode_worker_lost_frees_the_link_for_the_transfers_behind() {
        // Four transfers of 100 ns and 5 ns of overhead on one link, to decode workers 1, 2,
        // 1, 2: on the link 0-100, 100-200, 200-300, 300-400. Decode worker 1 goes down at 150:
        // the third transfer (queued) is lost; the second, on the link, goes on; the fourth
        // takes the link when the second leaves it, at 200 instead of 300, and lands at 305.
        let mut t = Transfers::default();
        for (k, to) in [1, 2, 1, 2].into_iter().enumerate() {
            let lands = t.send(hand_off(to, 100, 5), routed(k as u64), 0);
            assert_eq!(lands, 100 * k as Nanos + 105, "one after another");
        }
        // The first landed at 105.
        assert!(!t.arrived(&routed(0), 105));
        let lost = t.lose(WorkerId::at(1), 150);
        let ids: Vec<u64> = lost.requests.iter().map(|r| r.spec.id.0).collect();
        assert_eq!(ids, [2]);
        assert_eq!(lost.links_freed, [ActorId(10)]);
        let again = t.retime(WorkerId::at(0), 150);
        let again: Vec<(u64, ActorId, Nanos)> = again
            .iter()
            .map(|(r, a, d)| (r.spec.id.0, *a, *d))
            .collect();
        assert_eq!(again, [(3, ActorId(12), 305 - 150)]);
        assert_eq!(free(&t), 300, "the link is busy until the fourth leaves it");
        // The re-timed message lands first and is taken; the stale one is dropped, and so is
        // the lost transfer's.
        assert!(!t.arrived(&routed(1), 205));
        assert!(!t.arrived(&routed(3), 305));
        assert!(t.arrived(&routed(2), 305), "lost");
        assert!(t.arrived(&routed(3), 405), "stale");
        assert!(!t.inbound(WorkerId::at(2)));
        assert!(t.superseded.is_empty() && t.lost.is_empty());
    }

    #[test]
    fn a_prefill_worker_lost_frees_no_other_link() {
        let mut t = Transfers::default();
        t.send(hand_off(1, 100, 0), routed(0), 0);
        t.send(hand_off(2, 100, 0), routed(1), 0);
        let lost = t.lose(WorkerId::at(0), 50);
        assert_eq!(lost.requests.len(), 2);
        assert!(lost.links_freed.is_empty(), "its own link: it knows");
        assert_eq!(free(&t), 50, "its link is free from the loss");
    }

    #[test]
    fn a_transfer_on_the_link_or_landing_now_keeps_its_time() {
        // Transfers at 0-100 (to 1) and 100-200 (to 2): worker 1 goes down at 100, as the
        // first lands (overhead 0): it is not lost, and nothing behind it moves.
        let mut t = Transfers::default();
        t.send(hand_off(1, 100, 0), routed(0), 0);
        t.send(hand_off(2, 100, 0), routed(1), 0);
        let lost = t.lose(WorkerId::at(1), 100);
        assert!(lost.requests.is_empty() && lost.links_freed.is_empty());
        assert!(t.retime(WorkerId::at(0), 100).is_empty());
        assert_eq!(free(&t), 200);
    }
}
