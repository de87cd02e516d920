//! The pool on hand-computed cases and against a plain reference: pins, eviction in release
//! order, own tails kept out of the table, capacity, and the memory of losses.

use super::*;
use crate::hash::block_hashes;

fn prompt(prefix: u32, n: usize) -> Vec<BlockHash> {
    block_hashes(
        &(0..n as u32 * 2)
            .map(|t| prefix * 100 + t)
            .collect::<Vec<_>>(),
        2,
    )
}

/// Acquires and keeps the slots by the first block's name, for `release` below.
fn acquire(pool: &mut KvPool, blocks: &[BlockHash], private: usize) -> Changes {
    let mut c = Changes::default();
    let mut held = Vec::new();
    pool.acquire(None, blocks, private, &mut c, &mut held, usize::MAX);
    pool.scratch_held.push((blocks.to_vec(), held));
    c
}

/// Releases the blocks of the last acquire of `blocks`.
fn release(pool: &mut KvPool, blocks: &[BlockHash], private: usize) {
    let at = pool
        .scratch_held
        .iter()
        .rposition(|(b, _)| b == blocks)
        .expect("acquired");
    let (_, held) = pool.scratch_held.remove(at);
    pool.release(&held, private);
}

/// The pool's rules written plainly: held blocks with their pins, and the evictable ones in
/// release order in a list.
struct Reference {
    cap: usize,
    held: std::collections::HashMap<BlockHash, u32>,
    order: Vec<BlockHash>,
    private: usize,
}

impl Reference {
    fn new(cap: usize) -> Self {
        Reference {
            cap,
            held: Default::default(),
            order: Vec::new(),
            private: 0,
        }
    }

    fn acquire(&mut self, blocks: &[BlockHash], private: usize) -> Changes {
        let mut c = Changes::default();
        let mut run: Option<(Option<BlockHash>, Vec<BlockHash>)> = None;
        let mut prev = None;
        for &b in blocks {
            match self.held.get_mut(&b) {
                Some(pins) => {
                    if *pins == 0 {
                        self.order.retain(|&x| x != b);
                    }
                    *pins += 1;
                    c.stored.extend(run.take());
                }
                None => {
                    self.held.insert(b, 1);
                    match &mut run {
                        Some((_, r)) => r.push(b),
                        None => run = Some((prev, vec![b])),
                    }
                }
            }
            prev = Some(b);
        }
        c.stored.extend(run);
        self.private += private;
        while self.held.len() + self.private > self.cap {
            let b = self.order.remove(0);
            self.held.remove(&b);
            c.evicted.push(b);
        }
        c
    }

    fn release(&mut self, blocks: &[BlockHash], private: usize) {
        self.private -= private;
        for b in blocks.iter().rev() {
            let pins = self.held.get_mut(b).expect("held");
            *pins -= 1;
            if *pins == 0 {
                self.order.push(*b);
            }
        }
    }
}

/// `n` prompts of 1 to `max_blocks` 2-token blocks: blocks 0-1 shared by one of 5 families
/// (so blocks are pinned again, shared by running requests, and evicted tail first), the
/// rest of prompt `k` from tokens `own(k) + t`.
fn family_prompts(n: u32, max_blocks: u32, own: impl Fn(u32) -> u32) -> Vec<Vec<BlockHash>> {
    (0..n)
        .map(|k| {
            let tokens: Vec<u32> = (0..2 * (1 + k % max_blocks))
                .map(|t| if t < 4 { k % 5 * 1000 + t } else { own(k) + t })
                .collect();
            block_hashes(&tokens, 2)
        })
        .collect()
}

/// Acquires `prompt` in both the pool and the reference if the pool has room, checking
/// that they report the same changes; returns the pool's slots.
fn acquire_both(
    pool: &mut KvPool,
    reference: &mut Reference,
    prompt: &[BlockHash],
    private: usize,
    unlisted_from: usize,
) -> Option<Vec<u32>> {
    if pool.unpinned_among(prompt, unlisted_from) + private > pool.available() {
        return None;
    }
    let mut c = Changes::default();
    let mut held = Vec::new();
    pool.acquire(None, prompt, private, &mut c, &mut held, unlisted_from);
    // The reference lists everything; the pool reports the own tail it stored unlisted.
    let mut want = reference.acquire(prompt, private);
    want.own_tail = prompt.len().saturating_sub(unlisted_from);
    assert_eq!(c, want);
    Some(held)
}

/// Checks the pool's counts (and, if `names`, its named blocks) against the reference.
fn assert_agrees(pool: &KvPool, reference: &Reference, names: bool) {
    assert_eq!(pool.named(), reference.held.len());
    assert_eq!(
        pool.active(),
        reference.held.values().filter(|&&p| p > 0).count() + reference.private
    );
    if names {
        let mut want: Vec<BlockHash> = reference.held.keys().copied().collect();
        want.sort_unstable();
        assert_eq!(pool.named_blocks(), want);
    }
}

#[test]
fn agrees_with_a_plain_reference_through_random_acquires_and_releases() {
    use rand::{Rng, SeedableRng};
    for seed in 0..4u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cap = 10 + 10 * seed as usize;
        let mut pool = KvPool::new(Some(cap), false);
        let mut reference = Reference::new(cap);
        let prompts = family_prompts(40, 6, |k| k * 1000);
        let mut running: Vec<(usize, usize, Vec<u32>)> = Vec::new();
        for _ in 0..20_000 {
            if running.is_empty() || rng.gen_bool(0.5) {
                let k = rng.gen_range(0..prompts.len());
                let private = rng.gen_range(0..3);
                let prompt = &prompts[k];
                if let Some(held) =
                    acquire_both(&mut pool, &mut reference, prompt, private, usize::MAX)
                {
                    running.push((k, private, held));
                }
            } else {
                let (k, private, held) = running.swap_remove(rng.gen_range(0..running.len()));
                pool.release(&held, private);
                reference.release(&prompts[k], private);
            }
            assert_agrees(&pool, &reference, false);
        }
        assert_agrees(&pool, &reference, true);
    }
}

#[test]
fn own_tails_kept_out_of_the_table_change_nothing_the_reference_sees() {
    use rand::{Rng, SeedableRng};
    // Each prompt is one request's: blocks 0-1 shared by its family, the rest its own tail.
    // The scheduler's protocol: the first run stores the tail unlisted; a run that finishes
    // retires the request; one that is preempted lists its tail first and runs listed from
    // then on. The plain reference lists everything.
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Fresh,
        Unlisted,
        Listed,
        Retired,
    }
    for seed in 0..6u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let cap = 12 + 6 * seed as usize;
        let mut pool = KvPool::new(Some(cap), false);
        let mut reference = Reference::new(cap);
        let prompts = family_prompts(300, 7, |k| (k + 1) * 10_000);
        let mut state = vec![State::Fresh; prompts.len()];
        let mut running: Vec<(usize, usize, Vec<u32>)> = Vec::new();
        let mut unlisted_runs = 0;
        for step in 0..20_000 {
            if running.is_empty() || rng.gen_bool(0.5) {
                let k = rng.gen_range(0..prompts.len());
                let unlisted_from = match state[k] {
                    State::Fresh => 2,
                    State::Listed => usize::MAX,
                    State::Unlisted | State::Retired => continue,
                };
                let private = rng.gen_range(0..3);
                let prompt = &prompts[k];
                let Some(held) =
                    acquire_both(&mut pool, &mut reference, prompt, private, unlisted_from)
                else {
                    continue;
                };
                unlisted_runs += usize::from(unlisted_from < prompt.len());
                if state[k] == State::Fresh {
                    state[k] = State::Unlisted;
                }
                running.push((k, private, held));
            } else {
                let (k, private, held) = running.swap_remove(rng.gen_range(0..running.len()));
                if state[k] == State::Unlisted {
                    if rng.gen_bool(0.5) {
                        state[k] = State::Retired;
                    } else {
                        pool.list(&held);
                        state[k] = State::Listed;
                    }
                }
                pool.release(&held, private);
                reference.release(&prompts[k], private);
            }
            assert_agrees(&pool, &reference, step % 97 == 0);
        }
        assert!(
            unlisted_runs > 50,
            "seed {seed}: {unlisted_runs} runs with an own tail"
        );
    }
}

#[test]
fn unbounded_pool_keeps_everything_and_reports_new_blocks_once() {
    let mut p = KvPool::new(None, true);
    let a = prompt(1, 4);
    assert_eq!(acquire(&mut p, &a, 1).stored, vec![(None, a.clone())]);
    release(&mut p, &a, 1);
    assert_eq!(p.cached_prefix(&a), 4);
    assert!(
        acquire(&mut p, &a, 0).stored.is_empty(),
        "held: pinned, not stored"
    );
    assert_eq!((p.pinned(), p.private()), (4, 0));
}

#[test]
fn evicts_the_block_released_longest_ago_leaves_first() {
    let mut p = KvPool::new(Some(4), true);
    let (a, b) = (prompt(1, 2), prompt(2, 2));
    acquire(&mut p, &a, 0);
    acquire(&mut p, &b, 0);
    release(&mut p, &b, 0); // b is released first, though admitted second
    release(&mut p, &a, 0);
    let c = acquire(&mut p, &prompt(3, 2), 0);
    assert_eq!(c.evicted, vec![b[1], b[0]], "b's tail, then its head");
    assert!(p.contains(a[0]) && p.contains(a[1]));
}

#[test]
fn never_evicts_a_block_whose_descendant_stays() {
    let mut p = KvPool::new(Some(3), true);
    let a = prompt(1, 3);
    acquire(&mut p, &a, 0);
    release(&mut p, &a, 0);
    let c = acquire(&mut p, &prompt(2, 1), 0);
    assert_eq!(c.evicted, vec![a[2]]);
    assert_eq!(p.cached_prefix(&a), 2);
}

#[test]
fn free_capacity_is_used_before_anything_is_evicted() {
    let mut p = KvPool::new(Some(5), true);
    let a = prompt(1, 2);
    acquire(&mut p, &a, 0);
    release(&mut p, &a, 0);
    let c = acquire(&mut p, &prompt(2, 1), 2);
    assert!(c.evicted.is_empty(), "3 free blocks cover 3 needed");
    assert_eq!((p.named(), p.private(), p.available()), (3, 2, 2));
    let c = acquire(&mut p, &[], 1);
    assert_eq!(c.evicted, vec![a[1]], "the tail released first goes first");
    assert!(
        p.remembers(a[1]) && !p.contains(a[1]),
        "evicted, remembered"
    );
}

#[test]
fn private_and_pinned_blocks_count_against_capacity() {
    let mut p = KvPool::new(Some(4), true);
    let a = prompt(1, 3);
    acquire(&mut p, &a, 1);
    assert_eq!(p.available(), 0);
    assert_eq!(p.unpinned_among(&a, usize::MAX), 0);
    release(&mut p, &a, 1);
    assert_eq!(p.available(), 4);
    assert_eq!(
        p.unpinned_among(&a, usize::MAX),
        3,
        "cached but evictable: pinning takes them"
    );
    assert_eq!(p.peak_active(), 4);
}

#[test]
fn blocks_held_in_the_middle_split_the_stored_runs() {
    let mut p = KvPool::new(None, true);
    let a = prompt(1, 4);
    acquire(&mut p, &a[1..2], 0); // as if computed by another request under another parent
    let mut c = Changes::default();
    p.acquire(None, &a, 0, &mut c, &mut Vec::new(), usize::MAX);
    assert_eq!(
        c.stored,
        vec![(None, vec![a[0]]), (Some(a[1]), vec![a[2], a[3]])]
    );
}

#[test]
fn evicted_blocks_are_remembered_and_held_again_when_stored() {
    let mut p = KvPool::new(Some(2), true);
    let a = prompt(1, 2);
    acquire(&mut p, &a, 0);
    release(&mut p, &a, 0);
    let b = prompt(2, 2);
    assert_eq!(acquire(&mut p, &b, 0).evicted, vec![a[1], a[0]]);
    release(&mut p, &b, 0);
    assert_eq!((p.remembered_prefix(&a), p.cached_prefix(&a)), (2, 0));
    let c = acquire(&mut p, &a, 0);
    assert_eq!(c.stored, vec![(None, a.clone())]);
    assert_eq!(p.cached_prefix(&a), 2);
}

#[test]
fn clear_forgets_everything() {
    let mut p = KvPool::new(Some(8), true);
    acquire(&mut p, &prompt(1, 3), 2);
    assert_eq!(p.clear(), 3);
    assert_eq!((p.named(), p.active()), (0, 0));
}
