//! The pool's side of its lower tiers ([`tiers`](super::super::tiers)): looking a prompt up on
//! them, loading blocks back, and, for a host written through, keeping a step's stores until the
//! step's lookups are done (vLLM's offloading connector's order).

use crate::engine::Nanos;
use crate::hash::BlockHash;
use crate::protocol::kv_event::Tier;

use super::super::tiers::{TierHits, TierMove, Tiers, TiersSetup};
use super::{Changes, KvPool};

/// One request's device stores of a step, kept for a host written through.
#[derive(Clone, Debug)]
pub(super) struct Through {
    /// The request was first admitted in this step.
    admitted: bool,
    /// Its newly stored blocks, in runs.
    runs: Vec<Vec<BlockHash>>,
    /// Its blocks up to its last one stored, touched after the store.
    prefix: Vec<BlockHash>,
}

impl KvPool {
    /// The pool with lower tiers as `setup` describes them (`None`: none).
    pub fn with_tiers(mut self, setup: Option<&TiersSetup>) -> Self {
        self.tiers = setup.map(|s| Box::new(Tiers::new(s)));
        self
    }

    /// The lower tiers, if any.
    pub fn tiers(&self) -> Option<&Tiers> {
        self.tiers.as_deref()
    }

    /// Steps planned from now on start at `now` (their evictions are offloaded then).
    pub fn set_now(&mut self, now: Nanos) {
        self.now = now;
    }

    /// Every block each lower tier holds, tier by tier, in increasing order of name
    /// ([`Tiers::snapshot`]); empty without tiers.
    pub fn lower_snapshot(&self) -> Vec<(Tier, Vec<BlockHash>)> {
        self.tiers.as_ref().map_or_else(Vec::new, |t| t.snapshot())
    }

    /// From the front of `blocks` (the blocks after a prefix held here), the blocks each lower
    /// tier would give back ([`Tiers::lookup`]); none without tiers.
    pub fn lower_prefix(&self, blocks: &[BlockHash]) -> TierHits {
        self.tiers.as_ref().map_or([0; 2], |t| t.lookup(blocks))
    }

    /// Fewest tokens of a lower continuation that are loaded back (`[kv.host]
    /// min_load_tokens`; 0, any, without tiers).
    pub fn min_load_tokens(&self) -> u64 {
        self.tiers.as_ref().map_or(0, |t| t.min_load_tokens())
    }

    /// Loads `blocks` (a [`KvPool::lower_prefix`] prefix) back from the lower tiers, queued at
    /// `now`: when the last arrives, and the blocks read from each tier ([`Tiers::load`]). The
    /// caller then acquires them like any block it stores.
    pub fn load(&mut self, blocks: &[BlockHash], now: Nanos) -> (Nanos, TierHits) {
        match &mut self.tiers {
            Some(t) if !blocks.is_empty() => t.load(blocks, now),
            _ => (now, [0; 2]),
        }
    }

    /// Touches the blocks of `blocks` a host tier written through holds, last first
    /// ([`Tiers::touch_host`]); nothing without one.
    pub fn touch_host(&mut self, blocks: &[BlockHash]) {
        if let Some(t) = &mut self.tiers {
            t.touch_host(blocks);
        }
    }

    /// Under a host written through, keeps the blocks `changes` newly stored on the device for
    /// host, with `prefix` (the storing request's blocks up to its last one stored, in parts
    /// joined only if kept) to touch after them: [`KvPool::flush_through`] writes them once the step's waiting requests have
    /// been looked up, as vLLM submits a step's stores after scheduling it
    /// (`build_connector_meta` → `_get_reqs_to_store`). `admitted`: the request was first
    /// admitted in this step (vLLM stores those first). Nothing without such a host.
    pub fn write_through_later(
        &mut self,
        changes: &Changes,
        prefix: &[&[BlockHash]],
        admitted: bool,
    ) {
        let through = self
            .tiers
            .as_ref()
            .is_some_and(|t| t.write_through() && !t.selective());
        if changes.stored.is_empty() || !through {
            return;
        }
        self.through.push(Through {
            admitted,
            runs: changes.stored.iter().map(|(_, r)| r.clone()).collect(),
            prefix: prefix.concat(),
        });
    }

    /// Writes the step's stores kept by [`KvPool::write_through_later`] to host, the first
    /// admitted requests' first, then the others', each in the order it was kept (vLLM's
    /// `yield_req_data`: new requests, then cached ones); after a store that wrote something,
    /// touches its request's prefix, last block first (`_get_reqs_to_store`). Returns what the
    /// lower tiers changed, for the step's KV events.
    pub fn flush_through(&mut self) -> Vec<TierMove> {
        let mut lower = Vec::new();
        let (Some(t), false) = (self.tiers.as_mut(), self.through.is_empty()) else {
            return lower;
        };
        let kept = std::mem::take(&mut self.through);
        let order = kept.iter().filter(|k| k.admitted);
        for k in order.chain(kept.iter().filter(|k| !k.admitted)) {
            let from = lower.len();
            for r in &k.runs {
                t.offload(r, self.now, &mut lower);
            }
            let wrote = lower[from..]
                .iter()
                .any(|m| m.tier == Tier::Host && !m.stored.is_empty());
            if wrote {
                t.touch_host(&k.prefix);
            }
        }
        lower
    }

    /// Whether host is written through selectively (`write_through_selective`).
    pub fn selective(&self) -> bool {
        self.tiers.as_ref().is_some_and(|t| t.selective())
    }

    /// Under `write_through_selective`, a hit on each of `blocks` (held here), writing those
    /// whose hits reach the threshold to host at the step's start ([`Tiers::hit`]). Returns what
    /// the lower tiers changed, for the step's KV events.
    pub fn hit(&mut self, blocks: &[BlockHash]) -> Vec<TierMove> {
        let mut lower = Vec::new();
        if let Some(t) = &mut self.tiers {
            t.hit(blocks, self.now, &mut lower);
        }
        lower
    }

    /// When the step being planned starts (tiered pools only; see [`KvPool::set_now`]).
    pub fn now(&self) -> Nanos {
        self.now
    }
}
