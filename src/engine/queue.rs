//! Pending deliveries, ordered by `(time, seq)`: a heap of small keys beside a stream of
//! deliveries known in advance.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::envelope::{ActorId, Envelope};
use super::time::Nanos;

/// Pending deliveries, earliest `(time, seq)` first.
///
/// The heap holds only small keys `(time, seq, slot)`; the messages wait in a slab of slots that
/// are reused, so sifting the heap never moves a message.
pub struct EventQueue<M> {
    heap: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    slots: Vec<Option<Parked<M>>>,
    free: Vec<u32>,
    next_seq: u64,
    /// Deliveries known in advance, in `(time, seq)` order, merged with the heap on pop so that
    /// a long workload does not sit in (and slow down) the heap.
    stream: VecDeque<(Nanos, u64, Parked<M>)>,
}

struct Parked<M> {
    from: ActorId,
    to: ActorId,
    msg: M,
}

impl<M> EventQueue<M> {
    pub(super) fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            stream: VecDeque::new(),
        }
    }

    /// Appends deliveries known in advance; they get the next `seq`s in order, exactly as if each
    /// had been pushed. Times must not decrease along the stream nor go below earlier stream items.
    pub(super) fn extend_stream(
        &mut self,
        items: impl IntoIterator<Item = (Nanos, ActorId, ActorId, M)>,
    ) {
        for (time, from, to, msg) in items {
            debug_assert!(
                self.stream.back().is_none_or(|last| last.0 <= time),
                "a stream is in time order"
            );
            let seq = self.next_seq;
            self.next_seq += 1;
            self.stream.push_back((time, seq, Parked { from, to, msg }));
        }
    }

    /// Schedules a delivery; `seq` is assigned now, in send order.
    pub(super) fn push(&mut self, time: Nanos, from: ActorId, to: ActorId, msg: M) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let parked = Some(Parked { from, to, msg });
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = parked;
                slot
            }
            None => {
                self.slots.push(parked);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 pending messages")
            }
        };
        self.heap.push(Reverse((time, seq, slot)));
    }

    pub(super) fn pop(&mut self) -> Option<Envelope<M>> {
        let stream_first = match (self.stream.front(), self.heap.peek()) {
            (Some(&(t, q, _)), Some(&Reverse((ht, hq, _)))) => (t, q) < (ht, hq),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if stream_first {
            let (time, seq, Parked { from, to, msg }) =
                self.stream.pop_front().expect("checked non-empty");
            return Some(Envelope {
                time,
                seq,
                from,
                to,
                msg,
            });
        }
        let Reverse((time, seq, slot)) = self.heap.pop()?;
        let Parked { from, to, msg } = self.slots[slot as usize]
            .take()
            .expect("a queued key has a parked message");
        self.free.push(slot);
        Some(Envelope {
            time,
            seq,
            from,
            to,
            msg,
        })
    }
}
