//! The KV event bus: carries `KvStored`/`KvRemoved`/`KvCleared` from workers to the router, and
//! may lose or delay them.
//!
//! [`BusModel`] is the pure fault model (outage windows, independent drops, latency + jitter, FIFO
//! or reordering); [`BusActor`] is the thin actor that applies it to each event. Draws are made
//! only when a setting needs them (a drop rate strictly between 0 and 1, a jitter above 0), so a
//! perfect bus consumes no randomness and leaves the other components' draws unchanged.

use crate::engine::{ms_to_ns, Actor, ActorId, Context, Envelope, Nanos};
use crate::rng::SimRng;
use crate::scenario::Bus as BusConfig;

use super::messages::Msg;

/// What happens to one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Lost.
    Dropped,
    /// Delivered after this delay.
    Deliver(Nanos),
}

/// The bus's fault model.
#[derive(Clone, Debug)]
pub struct BusModel {
    drop_rate: f64,
    latency_ns: Nanos,
    jitter_ns: Nanos,
    reorder: bool,
    outages: Vec<(Nanos, Nanos)>,
    last_delivery: Nanos,
}

impl BusModel {
    /// The model described by a scenario's `[bus]` table.
    pub fn new(cfg: &BusConfig) -> Self {
        BusModel {
            drop_rate: cfg.drop_rate,
            latency_ns: ms_to_ns(cfg.latency_ms),
            jitter_ns: ms_to_ns(cfg.jitter_ms),
            reorder: cfg.reorder,
            outages: cfg
                .outages
                .iter()
                .map(|w| (ms_to_ns(w.start_ms), ms_to_ns(w.end_ms)))
                .collect(),
            last_delivery: 0,
        }
    }

    /// Decides the fate of an event the bus receives at `now`.
    pub fn fate(&mut self, now: Nanos, rng: &mut SimRng) -> Fate {
        if self.outages.iter().any(|&(s, e)| (s..e).contains(&now)) {
            return Fate::Dropped;
        }
        let lost = if self.drop_rate >= 1.0 {
            true
        } else if self.drop_rate > 0.0 {
            rng.unit() < self.drop_rate
        } else {
            false
        };
        if lost {
            return Fate::Dropped;
        }
        let jitter = if self.jitter_ns > 0 {
            (rng.unit() * self.jitter_ns as f64) as Nanos
        } else {
            0
        };
        let mut at = now + self.latency_ns + jitter;
        if !self.reorder {
            at = at.max(self.last_delivery);
            self.last_delivery = at;
        }
        Fate::Deliver(at - now)
    }
}

/// Counts of what the bus did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusStats {
    /// Events workers handed to the bus.
    pub published: u64,
    /// Events the bus lost.
    pub dropped: u64,
}

/// The bus actor: forwards each KV event to the router unless the model loses it.
pub struct BusActor {
    model: BusModel,
    router: ActorId,
    /// What the bus did.
    pub stats: BusStats,
}

impl BusActor {
    /// A bus delivering to `router`.
    pub fn new(cfg: &BusConfig, router: ActorId) -> Self {
        BusActor {
            model: BusModel::new(cfg),
            router,
            stats: BusStats::default(),
        }
    }
}

impl Actor for BusActor {
    type Msg = Msg;

    fn handle(&mut self, env: Envelope<Msg>, ctx: &mut Context<'_, Msg>) {
        debug_assert!(env.msg.is_kv_event(), "only KV events travel over the bus");
        self.stats.published += 1;
        match self.model.fate(ctx.now(), ctx.rng()) {
            Fate::Dropped => self.stats.dropped += 1,
            Fate::Deliver(delay) => ctx.send(self.router, env.msg, delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngKind;
    use crate::scenario::Window;

    fn model(f: impl FnOnce(&mut BusConfig)) -> BusModel {
        let mut cfg = BusConfig::default();
        f(&mut cfg);
        BusModel::new(&cfg)
    }

    #[test]
    fn perfect_bus_delivers_at_once_without_drawing() {
        let mut rng = SimRng::new(RngKind::Python, 1);
        let mut m = model(|_| {});
        assert_eq!(m.fate(5, &mut rng), Fate::Deliver(0));
        // The generator was not touched: its first draw is still random.Random(1)'s.
        assert_eq!(rng.below(7), SimRng::new(RngKind::Python, 1).below(7));
    }

    #[test]
    fn outages_and_full_drop_lose_everything() {
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        let mut m = model(|b| {
            b.outages = vec![Window {
                start_ms: 1.0,
                end_ms: 2.0,
            }]
        });
        assert_eq!(m.fate(1_500_000, &mut rng), Fate::Dropped);
        assert_eq!(m.fate(2_000_000, &mut rng), Fate::Deliver(0));
        let mut all = model(|b| b.drop_rate = 1.0);
        assert_eq!(all.fate(0, &mut rng), Fate::Dropped);
    }

    #[test]
    fn drop_rate_is_respected_on_average() {
        let mut rng = SimRng::new(RngKind::Chacha, 3);
        let mut m = model(|b| b.drop_rate = 0.3);
        let dropped = (0..20_000)
            .filter(|_| m.fate(0, &mut rng) == Fate::Dropped)
            .count();
        assert!((5_400..6_600).contains(&dropped), "{dropped}");
    }

    #[test]
    fn fifo_unless_reorder() {
        let mut rng = SimRng::new(RngKind::Chacha, 9);
        let mut fifo = model(|b| b.jitter_ms = 5.0);
        let mut last = 0;
        for t in 0..200 {
            let Fate::Deliver(d) = fifo.fate(t * 1000, &mut rng) else {
                panic!()
            };
            assert!(t * 1000 + d >= last);
            last = t * 1000 + d;
        }
        let mut loose = model(|b| {
            b.jitter_ms = 5.0;
            b.reorder = true;
        });
        let arrivals: Vec<u64> = (0..200)
            .map(|t| match loose.fate(t * 1000, &mut rng) {
                Fate::Deliver(d) => t * 1000 + d,
                Fate::Dropped => unreachable!(),
            })
            .collect();
        assert!(
            arrivals.windows(2).any(|w| w[1] < w[0]),
            "some event overtakes another"
        );
    }
}
