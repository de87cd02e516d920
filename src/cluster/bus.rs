//! The KV event bus: carries `KvStored`/`KvRemoved`/`KvCleared` from workers to every router
//! replica, and the control traffic of recovery and replica sync (replay and snapshot requests
//! and answers, peer notes) point to point, and may lose or delay any of it.
//!
//! [`BusModel`] is the pure fault model (outage windows, independent drops, latency + jitter, FIFO
//! or reordering per destination, and with `bus.link_gbps` a link per destination whose messages
//! queue behind each other for their size); [`BusActor`] is the thin actor that applies it to
//! each delivery (one per replica for an event: each replica has its own connection). Draws are
//! made only when a setting needs them (a drop rate strictly between 0 and 1, a jitter above 0),
//! so a perfect bus consumes no randomness and leaves the other components' draws unchanged.

use crate::engine::{Actor, ActorId, Context, Envelope, Nanos};
use crate::rng::SimRng;

use super::timeline::{note, Mark, SharedTimeline};
use crate::protocol::messages::Msg;

/// What happens to one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Lost.
    Dropped,
    /// Delivered after this delay.
    Deliver(Nanos),
}

/// What the bus does to what it carries, as the builder derives it from `[bus]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BusFaults {
    /// Probability each delivery is lost, 0..=1.
    pub drop_rate: f64,
    /// Delivery latency.
    pub latency_ns: Nanos,
    /// Extra uniform random latency in `[0, jitter_ns)`.
    pub jitter_ns: Nanos,
    /// Whether deliveries may overtake each other within the jitter (else FIFO per destination).
    pub reorder: bool,
    /// Windows `[start, end)` in which every delivery is lost.
    pub outages: Vec<(Nanos, Nanos)>,
    /// GB/s of each destination's link (1 GB/s is one byte per ns), if sizes cost time.
    pub link_gbps: Option<f64>,
}

/// The bus's fault model.
#[derive(Clone, Debug)]
pub struct BusModel {
    faults: BusFaults,
    /// Per destination (by actor address): the last delivery time (FIFO) and when its link is
    /// free again.
    last_delivery: Vec<Nanos>,
    link_free: Vec<Nanos>,
}

impl BusModel {
    /// A bus that does `faults` to what it carries.
    pub fn new(faults: BusFaults) -> Self {
        BusModel {
            faults,
            last_delivery: Vec::new(),
            link_free: Vec::new(),
        }
    }

    /// Decides the fate of a message of `bytes` for `to` the bus receives at `now`.
    pub fn fate(&mut self, now: Nanos, to: ActorId, bytes: u64, rng: &mut SimRng) -> Fate {
        if self
            .faults
            .outages
            .iter()
            .any(|&(s, e)| (s..e).contains(&now))
        {
            return Fate::Dropped;
        }
        let lost = if self.faults.drop_rate >= 1.0 {
            true
        } else if self.faults.drop_rate > 0.0 {
            rng.unit() < self.faults.drop_rate
        } else {
            false
        };
        if lost {
            return Fate::Dropped;
        }
        let jitter = if self.faults.jitter_ns > 0 {
            (rng.unit() * self.faults.jitter_ns as f64) as Nanos
        } else {
            0
        };
        let d = to.0 as usize;
        if self.last_delivery.len() <= d {
            self.last_delivery.resize(d + 1, 0);
            self.link_free.resize(d + 1, 0);
        }
        let mut sent = now;
        if let Some(gbps) = self.faults.link_gbps {
            let start = now.max(self.link_free[d]);
            // Saturating, never wrapping: a link too slow for the clock makes a delivery past
            // the end of time, which fails the run ([`crate::engine::Context::send`]).
            sent = start.saturating_add((bytes as f64 / gbps).ceil() as Nanos);
            self.link_free[d] = sent;
        }
        let mut at = sent
            .saturating_add(self.faults.latency_ns)
            .saturating_add(jitter);
        if !self.faults.reorder {
            at = at.max(self.last_delivery[d]);
            self.last_delivery[d] = at;
        }
        Fate::Deliver(at - now)
    }
}

/// Counts of what the bus did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusStats {
    /// Events workers handed to the bus.
    pub published: u64,
    /// Event deliveries the bus lost (one per replica an event was for).
    pub dropped: u64,
    /// Control messages carried (replay and snapshot traffic, peer notes).
    pub control: u64,
    /// Control messages lost.
    pub control_dropped: u64,
}

/// The bus actor: forwards each KV event to every router replica and each control message to
/// its destination, unless the model loses it.
pub struct BusActor {
    model: BusModel,
    routers: Vec<ActorId>,
    timeline: Option<SharedTimeline>,
    /// With `bus.link_gbps`, the deliveries queued on the links and not yet due: what a slow
    /// link makes the run hold (a router re-asking for snapshots faster than the link carries
    /// them queues gigabytes), for the memory budget. Not kept without a link, whose queue is
    /// bounded by the latency.
    queued: Option<Box<Queued>>,
    /// Each worker's newest restart epoch seen on its stream, by worker index.
    epochs: Vec<u32>,
    /// What the bus did.
    pub stats: BusStats,
}

/// Deliveries the bus scheduled that are not yet due, and their bytes.
#[derive(Default)]
struct Queued {
    due: std::collections::BinaryHeap<std::cmp::Reverse<(Nanos, u64)>>,
    bytes: u64,
}

impl Queued {
    /// Forgets the deliveries due by `now`.
    fn settle(&mut self, now: Nanos) {
        while let Some(&std::cmp::Reverse((at, bytes))) = self.due.peek() {
            if at > now {
                break;
            }
            self.due.pop();
            self.bytes -= bytes;
        }
    }

    fn push(&mut self, at: Nanos, bytes: u64) {
        self.due.push(std::cmp::Reverse((at, bytes)));
        self.bytes += bytes;
    }
}

/// Schedules `msg` to `to` after `delay`, counting its `bytes` as queued until then.
fn deliver(
    queued: &mut Option<Box<Queued>>,
    to: ActorId,
    msg: Msg,
    bytes: u64,
    delay: Nanos,
    ctx: &mut Context<'_, Msg>,
) {
    if let Some(q) = queued {
        q.push(ctx.now().saturating_add(delay), bytes);
    }
    ctx.send(to, msg, delay);
}

impl BusActor {
    /// A bus delivering events to `routers` as `model` decides, noting what it loses on
    /// `timeline` if given.
    pub fn new(model: BusModel, routers: Vec<ActorId>, timeline: Option<SharedTimeline>) -> Self {
        let queued = model.faults.link_gbps.map(|_| Box::default());
        BusActor {
            model,
            routers,
            timeline,
            queued,
            epochs: Vec::new(),
            stats: BusStats::default(),
        }
    }

    /// Whether an event of epoch `epoch` from `worker` belongs to a step its worker never
    /// finished. A worker hands a step's events over at its start, timed to reach the bus at
    /// its end, when vLLM publishes them (vllm-project/vllm `vllm/v1/core/sched/scheduler.py`
    /// at 00024d31: `update_from_output`, after the forward pass). Those of a step cut by a
    /// restart or a removal would reach the bus after the worker's `KvCleared` of its next
    /// epoch, and a router that applies whatever comes (`on_gap = "ignore"`) would index blocks
    /// of a worker that no longer holds them (a removed slot that came back started with them).
    /// The engine never published them: they are not carried, nor counted as published.
    fn cut_short(&mut self, epoch: u32, worker: usize) -> bool {
        if self.epochs.len() <= worker {
            self.epochs.resize(worker + 1, 0);
        }
        let newest = &mut self.epochs[worker];
        *newest = (*newest).max(epoch);
        epoch < *newest
    }

    /// Bytes of the deliveries queued on the links, as of the bus's last delivery (0 without
    /// `bus.link_gbps`).
    pub fn queued_bytes(&self) -> u64 {
        self.queued.as_ref().map_or(0, |q| q.bytes)
    }
}

impl Actor for BusActor {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        let bytes = env.msg.wire_bytes();
        if let Some(q) = &mut self.queued {
            q.settle(ctx.now());
        }
        match env.msg {
            Msg::Via { to, msg } => {
                self.stats.control += 1;
                match self.model.fate(ctx.now(), to, bytes, ctx.rng()) {
                    Fate::Dropped => self.stats.control_dropped += 1,
                    Fate::Deliver(delay) => deliver(&mut self.queued, to, *msg, bytes, delay, ctx),
                }
            }
            Msg::Kv { stamp, event } if self.cut_short(stamp.epoch, event.worker().index()) => {}
            msg @ Msg::Kv { .. } => {
                self.stats.published += 1;
                let last = self.routers.len() - 1;
                let mut msg = Some(msg);
                for (i, &to) in self.routers.iter().enumerate() {
                    match self.model.fate(ctx.now(), to, bytes, ctx.rng()) {
                        Fate::Dropped => {
                            self.stats.dropped += 1;
                            if let Some(Msg::Kv { event, .. }) = &msg {
                                let (worker, kind, at) = (event.worker(), event.kind(), ctx.now());
                                note(&self.timeline, || Mark::Dropped { worker, at, kind });
                            }
                        }
                        Fate::Deliver(delay) => {
                            let m = if i == last {
                                msg.take().expect("the last replica takes the event")
                            } else {
                                msg.clone().expect("kept for the last replica")
                            };
                            deliver(&mut self.queued, to, m, bytes, delay, ctx);
                        }
                    }
                }
            }
            other => debug_assert!(false, "the bus carries no {}", other.kind()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKind;

    fn model(f: impl FnOnce(&mut BusFaults)) -> BusModel {
        let mut faults = BusFaults::default();
        f(&mut faults);
        BusModel::new(faults)
    }

    #[test]
    fn perfect_bus_delivers_at_once_without_drawing() {
        let mut rng = SimRng::new(RngKind::Python, 1);
        let mut m = model(|_| {});
        assert_eq!(m.fate(5, ActorId(1), 8, &mut rng), Fate::Deliver(0));
        // The generator was not touched: its first draw is still random.Random(1)'s.
        assert_eq!(rng.below(7), SimRng::new(RngKind::Python, 1).below(7));
    }

    #[test]
    fn outages_and_full_drop_lose_everything() {
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut m = model(|b| b.outages = vec![(1_000_000, 2_000_000)]);
        assert_eq!(m.fate(1_500_000, ActorId(1), 8, &mut rng), Fate::Dropped);
        assert_eq!(m.fate(2_000_000, ActorId(1), 8, &mut rng), Fate::Deliver(0));
        let mut all = model(|b| b.drop_rate = 1.0);
        assert_eq!(all.fate(0, ActorId(1), 8, &mut rng), Fate::Dropped);
    }

    #[test]
    fn drop_rate_is_respected_on_average() {
        let mut rng = SimRng::new(RngKind::Chacha, 3);
        let mut m = model(|b| b.drop_rate = 0.3);
        let dropped = (0..20_000)
            .filter(|_| m.fate(0, ActorId(1), 8, &mut rng) == Fate::Dropped)
            .count();
        assert!((5_400..6_600).contains(&dropped), "{dropped}");
    }

    #[test]
    fn fifo_unless_reorder() {
        let mut rng = SimRng::new(RngKind::Chacha, 9);
        let mut fifo = model(|b| b.jitter_ns = 5_000_000);
        let mut last = 0;
        for t in 0..200 {
            let Fate::Deliver(d) = fifo.fate(t * 1000, ActorId(1), 8, &mut rng) else {
                panic!()
            };
            assert!(t * 1000 + d >= last);
            last = t * 1000 + d;
        }
        let mut loose = model(|b| {
            b.jitter_ns = 5_000_000;
            b.reorder = true;
        });
        let arrivals: Vec<u64> = (0..200)
            .map(|t| match loose.fate(t * 1000, ActorId(1), 8, &mut rng) {
                Fate::Deliver(d) => t * 1000 + d,
                Fate::Dropped => unreachable!(),
            })
            .collect();
        assert!(
            arrivals.windows(2).any(|w| w[1] < w[0]),
            "some event overtakes another"
        );
    }

    #[test]
    fn a_slow_link_queues_messages_for_their_size_per_destination() {
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        // 0.001 GB/s: one byte per microsecond; 1 ms latency.
        let mut m = model(|b| {
            b.link_gbps = Some(0.001);
            b.latency_ns = 1_000_000;
        });
        // 2,000 bytes take 2 ms on the wire, then 1 ms of latency.
        assert_eq!(
            m.fate(0, ActorId(3), 2_000, &mut rng),
            Fate::Deliver(3_000_000)
        );
        // The next waits for the link: sent at 2 ms + 1 ms on the wire, + 1 ms latency.
        assert_eq!(
            m.fate(0, ActorId(3), 1_000, &mut rng),
            Fate::Deliver(4_000_000)
        );
        // Another destination has a link of its own.
        assert_eq!(
            m.fate(0, ActorId(4), 1_000, &mut rng),
            Fate::Deliver(2_000_000)
        );
    }

    #[test]
    fn a_link_too_slow_for_the_clock_saturates_rather_than_wraps() {
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        // 1e-300 GB/s: the wire time is past `Nanos::MAX`; with latency added it used to wrap
        // to a delivery sooner than a fast link's.
        let mut m = model(|b| {
            b.link_gbps = Some(1e-300);
            b.latency_ns = 1_000_000;
        });
        assert_eq!(
            m.fate(5, ActorId(3), 2_000, &mut rng),
            Fate::Deliver(Nanos::MAX - 5)
        );
        assert_eq!(
            m.fate(10, ActorId(3), 8, &mut rng),
            Fate::Deliver(Nanos::MAX - 10),
            "the link stays busy to the end of time"
        );
    }
}
