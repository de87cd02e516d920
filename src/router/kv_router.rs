//! The lab's KV-aware router.
//!
//! It chooses by the lab rule ([`LabRule`]): (1) the worker with the most overlapping blocks,
//! (2) then the fewest requests routed to it so far, (3) then the lowest index; the chosen
//! worker's count goes up right after the choice. The self-tracking router ([`KvRouter::new`])
//! then records every block of the request for that worker. The events router
//! ([`KvRouter::with_events`]) never records its own decisions: it learns only from
//! [`KvRouter::on_event`]. Recording decisions in events mode would hide the failure where
//! workers publish nothing (the lab's third classic mistake): the router would look healthy
//! while real workers' caches are unknown to it.

use crate::hash::{extend_block_hashes, BlockHash};
use crate::ids::WorkerId;
use crate::index::KvIndex;
use crate::router::lab_rule::{LabRule, LoadView};
use crate::router::select::LeastLoaded;
use crate::router::Decision;

/// Blocks the events router names at a time: a tight run of lookups for the walk, and at most
/// this many names hashed in vain past the first block no worker holds.
pub const NAME_CHUNK: usize = 32;

/// A prompt's block names, hashed [`NAME_CHUNK`] at a time into a reused buffer as the walk
/// takes them (the buffer starts empty, `at` 0).
struct ChunkedNames<'a> {
    tokens: &'a [u32],
    block: usize,
    /// The current chunk's names (the last one is the next chunk's parent).
    names: &'a mut Vec<BlockHash>,
    at: usize,
}

impl Iterator for ChunkedNames<'_> {
    type Item = BlockHash;

    #[inline]
    fn next(&mut self) -> Option<BlockHash> {
        if self.at == self.names.len() {
            let take = (self.tokens.len() / self.block).min(NAME_CHUNK) * self.block;
            if take == 0 {
                return None;
            }
            let parent = self.names.last().copied();
            self.names.clear();
            extend_block_hashes(&self.tokens[..take], self.block, parent, self.names);
            self.tokens = &self.tokens[take..];
            self.at = 0;
        }
        let name = self.names[self.at];
        self.at += 1;
        Some(name)
    }
}

/// A KV-aware router over `n_workers` workers.
#[derive(Clone)]
pub struct KvRouter {
    block: usize,
    rule: LabRule,
    routed: Routed,
    events_only: bool,
    /// Whether every worker's blocks in the index are prefix-closed (each worker holds every
    /// block before any it holds): true for the self-tracking router until an event from
    /// outside ([`KvRouter::on_event`], [`KvRouter::on_removed`]) changes the index, which could
    /// leave gaps. Matching is then a binary search.
    prefix_closed: bool,
    /// The block names of the request being routed (kept for its allocation).
    hashes: Vec<BlockHash>,
}

/// Requests routed to each worker: the lab's load. Every worker is always up.
#[derive(Clone)]
struct Routed {
    counts: Vec<u64>,
    /// The least-routed worker overall, for requests every worker is a candidate for.
    least: LeastLoaded,
}

impl LoadView for Routed {
    fn load(&self, worker: usize) -> u64 {
        self.counts[worker]
    }
    fn is_up(&self, _worker: usize) -> bool {
        true
    }
    fn all_up(&self) -> bool {
        true
    }
    fn least_of_all(&self) -> Option<usize> {
        Some(self.least.min())
    }
}

impl KvRouter {
    /// A self-tracking router: it records the blocks of every request it routes.
    ///
    /// # Panics
    /// Panics if `n_workers` or `block` is 0.
    pub fn new(n_workers: usize, block: usize) -> Self {
        Self::build(n_workers, block, false)
    }

    /// An events router: it learns which worker holds which block only from KV events.
    ///
    /// # Panics
    /// Panics if `n_workers` or `block` is 0.
    pub fn with_events(n_workers: usize, block: usize) -> Self {
        Self::build(n_workers, block, true)
    }

    fn build(n_workers: usize, block: usize, events_only: bool) -> Self {
        assert!(n_workers > 0, "a router needs at least one worker");
        assert!(block > 0, "block size must be at least 1 token");
        KvRouter {
            block,
            rule: LabRule::new(n_workers),
            routed: Routed {
                counts: vec![0; n_workers],
                least: LeastLoaded::new(&vec![0; n_workers]),
            },
            events_only,
            prefix_closed: !events_only,
            hashes: Vec::new(),
        }
    }

    /// Routes a prompt and returns the chosen worker.
    ///
    /// The same choice as [`KvRouter::route_hashes`] on [`crate::block_hashes`] of the prompt.
    /// The self-tracking router names every block first (it stores them all) into a buffer it
    /// keeps, then walks the index over them; the events router names them [`NAME_CHUNK`] at a
    /// time and hashes no chunk past the one with the first block no worker holds (it stores
    /// nothing, so it needs no further name).
    ///
    /// Naming first matters on a warm index: the walk's lookups then run in a tight loop whose
    /// cache misses the processor overlaps, where a lookup after each block's hash (a chain of
    /// dependent multiplies) waited for memory once per block. A router that routes one prompt
    /// over and over (`route/*-hit` in `benches/routing.rs`) keeps its lookups in cache and does
    /// not see the difference; a router routing many prompts (`users/*`) does: docs/BENCHMARKS.md.
    pub fn route(&mut self, tokens: &[u32]) -> WorkerId {
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let worker = if self.events_only {
            let names = ChunkedNames {
                tokens,
                block: self.block,
                names: &mut hashes,
                at: 0,
            };
            let depth = self.rule.matches_iter(names);
            self.choose(depth)
        } else {
            extend_block_hashes(tokens, self.block, None, &mut hashes);
            self.route_hashes(&hashes).worker
        };
        self.hashes = hashes;
        worker
    }

    /// Routes a prompt already cut into block names (hashing it once is the caller's job).
    pub fn route_hashes(&mut self, hashes: &[BlockHash]) -> Decision {
        let depth = if self.prefix_closed {
            self.rule.matches_prefix_closed(hashes)
        } else {
            self.rule.matches(hashes)
        };
        let d = Decision {
            worker: self.choose(depth),
            predicted_blocks: depth,
        };
        if !self.events_only {
            self.rule.record_decision(&d, hashes);
        }
        d
    }

    /// Rules 2 and 3 after the last match, then counts the request for the chosen worker.
    fn choose(&mut self, depth: usize) -> WorkerId {
        let worker = self
            .rule
            .choose(depth, &self.routed)
            .expect("every worker is up, so one is a candidate")
            .worker;
        self.routed.counts[worker.index()] += 1;
        self.routed.least.increment(worker.index());
        worker
    }

    /// A KV-stored event: `worker` now holds `hashes`.
    pub fn on_event(&mut self, worker: usize, hashes: &[BlockHash]) {
        self.prefix_closed = false;
        self.rule.index_mut().store(worker, hashes);
    }

    /// A KV-removed event: `worker` no longer holds `hashes`.
    pub fn on_removed(&mut self, worker: usize, hashes: &[BlockHash]) {
        self.prefix_closed = false;
        self.rule.index_mut().remove(worker, hashes);
    }

    /// Requests routed to each worker so far.
    pub fn routed(&self) -> &[u64] {
        &self.routed.counts
    }

    /// The router's index (its belief of who holds what).
    pub fn index(&self) -> &KvIndex {
        self.rule.index()
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::block_hashes;
    use crate::index::MatchScratch;
    use crate::router::select::least_loaded;

    fn prompt(prefix: u32, tail: u32) -> Vec<u32> {
        let mut t: Vec<u32> = (0..8).map(|j| prefix * 1000 + j).collect();
        t.extend((0..4).map(|j| 1_000_000 + tail * 100 + j));
        t
    }

    #[test]
    fn rule_1_most_overlap_wins_over_load() {
        let mut r = KvRouter::new(2, 4);
        assert_eq!(r.route(&prompt(1, 0)).index(), 0);
        assert_eq!(r.route(&prompt(2, 1)).index(), 1);
        assert_eq!(r.route(&prompt(1, 2)).index(), 0); // worker 0 has prefix 1, though loads are equal
        assert_eq!(r.route(&prompt(1, 3)).index(), 0); // and again, though worker 0 is now busier
        assert_eq!(r.routed(), &[3, 1]);
    }

    #[test]
    fn rule_2_fewest_routed_then_rule_3_lowest_index() {
        let mut r = KvRouter::new(3, 4);
        assert_eq!(r.route(&prompt(1, 0)).index(), 0); // all tie: lowest index
        assert_eq!(r.route(&prompt(2, 1)).index(), 1); // no overlap: fewest routed
        assert_eq!(r.route(&prompt(3, 2)).index(), 2);
        assert_eq!(r.route(&prompt(4, 3)).index(), 0);
    }

    #[test]
    fn short_request_goes_to_least_loaded() {
        let mut r = KvRouter::new(2, 16);
        r.route(&prompt(1, 0));
        assert_eq!(r.route(&[1, 2, 3]).index(), 1);
        assert_eq!(r.route(&[]).index(), 0);
    }

    #[test]
    fn events_router_never_records_its_own_decisions() {
        // The classic mistake: an events router that records its decisions looks like kv mode.
        let mut r = KvRouter::with_events(2, 4);
        assert_eq!(r.route(&prompt(1, 0)).index(), 0);
        assert_eq!(r.index().entries(), 0);
        assert_eq!(r.route(&prompt(1, 1)).index(), 1); // no belief: falls back to load, like rr
        let hashes = block_hashes(&prompt(1, 2), 4);
        r.on_event(1, &hashes);
        assert_eq!(r.route(&prompt(1, 3)).index(), 1);
    }

    #[test]
    fn removed_events_forget() {
        let mut r = KvRouter::with_events(2, 4);
        let hashes = block_hashes(&prompt(1, 0), 4);
        r.on_event(1, &hashes);
        r.on_removed(1, &hashes);
        assert_eq!(r.route(&prompt(1, 1)).index(), 0);
    }

    #[test]
    fn chunked_names_are_the_prompts_names() {
        for block in [3, 16] {
            for blocks in [0, 1, 31, 32, 33, 64, 65, 100] {
                let tokens: Vec<u32> = (0..(blocks * block + block / 2) as u32)
                    .map(|t| t * 7919)
                    .collect();
                let mut buffer = Vec::new();
                let names: Vec<BlockHash> = ChunkedNames {
                    tokens: &tokens,
                    block,
                    names: &mut buffer,
                    at: 0,
                }
                .collect();
                assert_eq!(names, block_hashes(&tokens, block), "{block} x {blocks}");
            }
        }
    }

    /// A slow copy of the original router: block names first, a scan of every candidate.
    struct Reference {
        index: KvIndex,
        routed: Vec<u64>,
        events_only: bool,
    }

    impl Reference {
        fn route(&mut self, tokens: &[u32], block: usize) -> usize {
            let hashes = block_hashes(tokens, block);
            let mut scratch = MatchScratch::default();
            let depth = self.index.find_matches(&hashes, &mut scratch);
            let worker = least_loaded(scratch.best(), |w| self.routed[w]).unwrap();
            self.routed[worker] += 1;
            if !self.events_only {
                self.index.store(worker, &hashes[depth..]);
            }
            worker
        }
    }

    #[test]
    fn fused_route_chooses_like_hashing_first() {
        // Prompts from a few shared prefixes, routed by route() and by the reference, with events
        // and removals in between; 1 to 300 workers (one word, several words, spilled sets).
        // Without removals the self-tracking router's index stays prefix-closed and it matches by
        // binary search; a removal (or any event) makes it walk.
        for (workers, removals) in [1, 2, 5, 64, 65, 130, 300]
            .into_iter()
            .flat_map(|w| [(w, false), (w, true)])
        {
            for events_only in [false, true] {
                let block = if workers % 2 == 0 { 16 } else { 3 };
                let mut fast = if events_only {
                    KvRouter::with_events(workers, block)
                } else {
                    KvRouter::new(workers, block)
                };
                let mut slow = Reference {
                    index: KvIndex::new(workers),
                    routed: vec![0; workers],
                    events_only,
                };
                let mut x: u64 = workers as u64;
                for i in 0..600u32 {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let family = (x >> 40) as u32 % 7;
                    // Up to 65 blocks shared: the events router's names cross chunks.
                    let shared = ((x >> 20) as usize % 6) * 13 * block;
                    let len = shared + (x >> 50) as usize % (4 * block);
                    let tokens: Vec<u32> = (0..len as u32)
                        .map(|t| {
                            if (t as usize) < shared {
                                family * 1000 + t
                            } else {
                                i * 7 + t
                            }
                        })
                        .collect();
                    let (a, b) = (fast.route(&tokens).index(), slow.route(&tokens, block));
                    assert_eq!(a, b, "workers {workers} events {events_only} request {i}");
                    let hashes = block_hashes(&tokens, block);
                    if events_only && i % 3 != 0 {
                        // Workers publish, and now and then another worker does too.
                        for w in [a, (a + i as usize) % workers] {
                            fast.on_event(w, &hashes);
                            slow.index.store(w, &hashes);
                        }
                    }
                    if removals && i % 11 == 5 {
                        let w = (x >> 8) as usize % workers;
                        fast.on_removed(w, &hashes[hashes.len() / 2..]);
                        slow.index.remove(w, &hashes[hashes.len() / 2..]);
                    }
                }
                assert_eq!(fast.routed(), &slow.routed[..]);
                assert_eq!(fast.prefix_closed, !events_only && !removals);
                assert_eq!(fast.index().entries(), slow.index.entries());
            }
        }
    }
}
