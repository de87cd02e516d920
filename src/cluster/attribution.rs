//! Loss attribution: why each missed prompt block was missed.
//!
//! A block the serving worker did not hold when it admitted the request is attributed to exactly
//! one cause, so the causes sum to the missed blocks. Facts about the routing decision (what the
//! router believed, what other workers held, how much had ever been computed) travel with the
//! request; what the worker itself remembered having held comes from its KV pool at admission.

use crate::hash::BlockHash;

use crate::protocol::messages::Misses;

/// Attributes each missed block (positions `cached..`) to one cause, in this order: the router
/// believed the worker held it (stale index); the worker had held it and lost it (capacity: it
/// still remembered the first `own_remembered` blocks); another worker held it at decision
/// time (routing); it had been computed before the decision and was evicted everywhere
/// (capacity); else nobody had computed it when the router decided (cold). Decision-time facts
/// come with the request (`predicted`, `others_held`, `ever_computed`).
pub fn classify(
    blocks: &[BlockHash],
    cached: usize,
    predicted: usize,
    others_held: usize,
    ever_computed: usize,
    own_remembered: usize,
) -> Misses {
    let mut m = Misses::default();
    for j in cached..blocks.len() {
        if j < predicted {
            m.stale_index += 1;
        } else if j < own_remembered {
            m.capacity += 1;
        } else if j < others_held {
            m.routing += 1;
        } else if j < ever_computed {
            m.capacity += 1;
        } else {
            m.cold += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;

    #[test]
    fn each_missed_block_gets_one_cause_in_priority_order() {
        let blocks = block_hashes(&(0..96).collect::<Vec<u32>>(), 16); // 6 blocks
                                                                       // The worker holds 2 blocks and remembers having held 4; the router believed 3; another
                                                                       // worker held 4 at decision time; 5 had been computed somewhere by then.
        let m = classify(&blocks, 2, 3, 4, 5, 4);
        assert_eq!(
            (m.stale_index, m.capacity, m.routing, m.cold),
            (1, 1 + 1, 0, 1),
            "block 2 stale (believed), 3 capacity (own eviction), 4 capacity (computed \
             before, gone everywhere), 5 cold"
        );
        assert_eq!(m.total(), 4);
        let m = classify(&blocks, 0, 0, 6, 6, 0);
        assert_eq!(
            (m.routing, m.total()),
            (6, 6),
            "another worker held all of them"
        );
    }
}
