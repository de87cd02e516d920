//! Pending deliveries, ordered by `(time, seq)`: a heap of small keys beside a stream of
//! deliveries known in advance.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    /// a long workload neither sits in (and slows down) the heap nor in memory: items are
    /// pulled from their iterator one at a time, as the clock reaches them.
    stream: Option<Stream<M>>,
    /// Whether a delivery was asked for past the end of time (`u64::MAX` ns).
    overflowed: bool,
}

/// A stream of deliveries known in advance, made on demand.
struct Stream<M> {
    items: Box<dyn Iterator<Item = (Nanos, ActorId, ActorId, M)>>,
    /// The next item, pulled from `items` when the queue needs to compare it.
    head: Option<(Nanos, u64, Parked<M>)>,
    /// The seq the next pulled item gets, and the end of the range reserved for the stream.
    next_seq: u64,
    end_seq: u64,
    last_time: Nanos,
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
            stream: None,
            overflowed: false,
        }
    }

    /// Sets the stream of deliveries known in advance: `count` items, in time order, pulled from
    /// `items` only when needed. They get the next `count` seqs in order, exactly as if each had
    /// been pushed now. One stream per queue.
    pub(super) fn set_stream(
        &mut self,
        count: u64,
        items: Box<dyn Iterator<Item = (Nanos, ActorId, ActorId, M)>>,
    ) {
        assert!(self.stream.is_none(), "one stream per queue");
        let next_seq = self.next_seq;
        self.next_seq += count;
        self.stream = Some(Stream {
            items,
            head: None,
            next_seq,
            end_seq: next_seq + count,
            last_time: 0,
        });
    }

    /// Notes that a delivery was asked for past the end of time.
    pub(super) fn overflow(&mut self) {
        self.overflowed = true;
    }

    /// Whether a delivery was asked for past the end of time.
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The stream's next `(time, seq)`, pulling it from the iterator if needed.
    fn stream_head(&mut self) -> Option<(Nanos, u64)> {
        let s = self.stream.as_mut()?;
        if s.head.is_none() {
            if let Some((time, from, to, msg)) = s.items.next() {
                assert!(s.next_seq < s.end_seq, "a stream yields what it reserved");
                assert!(time >= s.last_time, "a stream is in time order");
                s.last_time = time;
                s.head = Some((time, s.next_seq, Parked { from, to, msg }));
                s.next_seq += 1;
            }
        }
        s.head.as_ref().map(|&(t, q, _)| (t, q))
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

    /// The time of the next delivery, if any (pulling the stream's head if needed).
    pub(super) fn next_time(&mut self) -> Option<Nanos> {
        let stream = self.stream_head().map(|(t, _)| t);
        let heap = self.heap.peek().map(|&Reverse((t, _, _))| t);
        match (stream, heap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(super) fn pop(&mut self) -> Option<Envelope<M>> {
        let stream_first = match (self.stream_head(), self.heap.peek()) {
            (Some(s), Some(&Reverse((ht, hq, _)))) => s < (ht, hq),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if stream_first {
            let (time, seq, Parked { from, to, msg }) = self
                .stream
                .as_mut()
                .and_then(|s| s.head.take())
                .expect("checked non-empty");
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
