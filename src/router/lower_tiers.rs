//! What a router knows of the workers' lower KV tiers (host memory, disk): one index per tier,
//! fed by the workers' `TierStored`/`TierRemoved` events, for the policies whose upstream reads
//! them (`dynamo`: weighted continuation blocks; `llm-d`: weighted by medium along the prefix). A policy
//! keeps `Option<Box<LowerTiers>>`, made on the first tier event, so runs without tiers pay
//! nothing.

use crate::hash::BlockHash;
use crate::index::KvIndex;
use crate::protocol::kv_event::{KvEvent, Tier};

/// The workers' host and disk tiers as their events tell.
#[derive(Clone)]
pub struct LowerTiers {
    /// Host, then disk.
    tiers: [KvIndex; 2],
}

impl LowerTiers {
    /// Applies `event` if it is about a lower tier, to `lower` (made on the first such event,
    /// for `workers` workers), and a `Cleared` to both tiers; returns whether the event was
    /// only about a lower tier (the device index then has nothing to learn from it).
    pub fn apply(lower: &mut Option<Box<LowerTiers>>, workers: usize, event: &KvEvent) -> bool {
        let (worker, tier, blocks, stored) = match event {
            KvEvent::TierStored {
                worker,
                tier,
                blocks,
            } => (worker, tier, blocks, true),
            KvEvent::TierRemoved {
                worker,
                tier,
                blocks,
            } => (worker, tier, blocks, false),
            KvEvent::Cleared { worker } => {
                if let Some(l) = lower {
                    l.tiers
                        .iter_mut()
                        .for_each(|t| t.clear_worker(worker.index()));
                }
                return false;
            }
            _ => return false,
        };
        let l = lower.get_or_insert_with(|| {
            Box::new(LowerTiers {
                tiers: [KvIndex::new(workers), KvIndex::new(workers)],
            })
        });
        let index = &mut l.tiers[usize::from(*tier == Tier::Disk)];
        if stored {
            index.store(worker.index(), blocks);
        } else {
            index.remove(worker.index(), blocks);
        }
        true
    }

    /// Whether worker `w` holds `block` on either lower tier.
    pub fn holds(&self, w: usize, block: BlockHash) -> bool {
        self.tiers.iter().any(|t| t.holds(w, block))
    }

    /// Whether worker `w` holds `block` on its host tier and on its disk tier.
    pub fn held_on(&self, w: usize, block: BlockHash) -> [bool; 2] {
        [self.tiers[0].holds(w, block), self.tiers[1].holds(w, block)]
    }

    /// Of `rest` (a prompt's blocks after worker `w`'s device match), the blocks that continue
    /// the match on `w`'s host tier, then those that continue that on its disk tier
    /// (dynamo-kv-router 1.6.1's walk, `indexer/lower_tier.rs`: each tier from where the one
    /// above stopped).
    pub fn continuation(&self, w: usize, rest: &[BlockHash]) -> [usize; 2] {
        let host = rest
            .iter()
            .take_while(|b| self.tiers[0].holds(w, **b))
            .count();
        let disk = rest[host..]
            .iter()
            .take_while(|b| self.tiers[1].holds(w, **b))
            .count();
        [host, disk]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::ids::WorkerId;

    #[test]
    fn continues_the_device_match_on_host_then_disk_and_forgets_on_clear() {
        let b = block_hashes(&(0..24).collect::<Vec<u32>>(), 4);
        let mut lower = None;
        let w = WorkerId::at(1);
        let ev = |tier, blocks: &[BlockHash]| KvEvent::TierStored {
            worker: w,
            tier,
            blocks: blocks.to_vec(),
        };
        assert!(!LowerTiers::apply(
            &mut lower,
            2,
            &KvEvent::Cleared { worker: w }
        ));
        assert!(lower.is_none(), "made on the first tier event only");
        assert!(LowerTiers::apply(&mut lower, 2, &ev(Tier::Host, &b[1..3])));
        assert!(LowerTiers::apply(&mut lower, 2, &ev(Tier::Disk, &b[3..5])));
        let l = lower.as_ref().expect("made");
        // The device matched block 0: host continues with 1-2, disk with 3-4.
        assert_eq!(l.continuation(1, &b[1..]), [2, 2]);
        assert_eq!(l.continuation(0, &b[1..]), [0, 0], "another worker's tiers");
        // Disk alone from the device's end does not count past a missing host block... it
        // continues from wherever host stopped, here at once.
        assert_eq!(l.continuation(1, &b[3..]), [0, 2]);
        LowerTiers::apply(
            &mut lower,
            2,
            &KvEvent::TierRemoved {
                worker: w,
                tier: Tier::Host,
                blocks: vec![b[2]],
            },
        );
        assert_eq!(lower.as_ref().unwrap().continuation(1, &b[1..]), [1, 0]);
        LowerTiers::apply(&mut lower, 2, &KvEvent::Cleared { worker: w });
        assert!(!lower.as_ref().unwrap().holds(1, b[1]));
    }
}
