//! Least-loaded selection, the lab rule's second and third steps (the least load, then the lowest
//! worker number): a scan over candidates, an O(1) tracker of the least-loaded worker for
//! loads that only grow (the lab router's routed counts), and an O(log n) one for loads that
//! also shrink (a policy's requests in flight), which also tracks the most loaded. And a
//! uniform draw among equal best values (`count_equal`, `nth_equal`, `lowest_random_tie`), for
//! the policies that score every worker.

/// Among `candidates` (worker indices in increasing order, all with the same, deepest overlap),
/// the one with the least `load`, the lowest index on ties. `None` if there is no candidate.
pub fn least_loaded(
    candidates: impl IntoIterator<Item = usize>,
    load: impl Fn(usize) -> u64,
) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for worker in candidates {
        let l = load(worker);
        if best.is_none_or(|(best_load, _)| l < best_load) {
            best = Some((l, worker));
        }
    }
    best.map(|(_, worker)| worker)
}

/// How many of `values` (worker, value) equal `best`.
pub fn count_equal(values: &[(usize, f64)], best: f64) -> usize {
    values.iter().filter(|v| v.1 == best).count()
}

/// The worker of the `k`-th (from 0) of `values` (worker, value) equal to `best`, in their
/// order: a uniform choice among equals is `nth_equal(values, best, rng.below(count))`, with
/// no list of them made.
pub fn nth_equal(
    values: impl IntoIterator<Item = (usize, f64)>,
    best: f64,
    k: usize,
) -> Option<usize> {
    values
        .into_iter()
        .filter(|v| v.1 == best)
        .nth(k)
        .map(|v| v.0)
}

/// The worker of the lowest of `costs` (worker, cost), a uniformly random one (from the run's
/// generator) among equal lowest costs (no draw when one is lowest); `None` without costs. The
/// least cost and its ties are counted in one pass (NaNs are never lowest), the chosen one found
/// by [`nth_equal`] in a second.
#[inline(never)] // out of its caller's scan, whose registers it would share: its least stays in one
pub fn lowest_random_tie(
    costs: impl Iterator<Item = (usize, f64)> + Clone,
    rng: &mut crate::rng::SimRng,
) -> Option<usize> {
    let mut min = f64::INFINITY;
    let mut count = 0;
    for (_, c) in costs.clone() {
        if c < min {
            min = c;
            count = 1;
        } else if c == min {
            count += 1;
        }
    }
    let k = match count {
        0 => return None,
        1 => 0,
        n => rng.below(n),
    };
    nth_equal(costs, min, k)
}

/// The least-loaded of *all* workers (the lowest index on ties), kept up to date as loads grow
/// by one: what [`least_loaded`] over every worker returns, without a scan.
///
/// Workers are grouped in buckets of equal load, linked in increasing load order (the layout of an
/// O(1) LFU cache). The head bucket, the least load, keeps its workers in a bit set with one
/// summary bit per non-empty word, so [`LeastLoaded::min`] is two `trailing_zeros` (one more
/// word per 4,096 workers beyond the first 4,096); the others keep an unordered list.
/// [`LeastLoaded::increment`] moves a worker to the next bucket in O(1). When the head empties,
/// the next bucket becomes the head and its list turns into bits: that costs one bit per member,
/// and each member is incremented at least once before it can happen again, so it is O(1) per
/// increment amortised. Memory is O(workers).
#[derive(Clone, Debug)]
pub struct LeastLoaded {
    /// Each worker's bucket.
    bucket_of: Vec<u32>,
    /// Each worker's index in its bucket's list (meaningless in the head bucket).
    pos: Vec<u32>,
    buckets: Vec<Bucket>,
    /// Buckets to reuse (their lists keep their capacity).
    free: Vec<u32>,
    head: u32,
    /// The head bucket's workers, and which of those words are non-zero.
    head_bits: Vec<u64>,
    head_summary: Vec<u64>,
    head_count: usize,
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Bucket {
    load: u64,
    prev: u32,
    next: u32,
    members: Vec<u32>,
}

impl LeastLoaded {
    /// A tracker over `loads.len()` workers (at least one) with these loads.
    ///
    /// # Panics
    /// Panics if `loads` is empty or holds 2^32 - 1 workers or more.
    pub fn new(loads: &[u64]) -> Self {
        assert!(!loads.is_empty(), "at least one worker");
        assert!(
            u32::try_from(loads.len()).is_ok_and(|n| n < NONE),
            "fewer than 2^32 - 1 workers"
        );
        let n = loads.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&w| (loads[w as usize], w));
        let words = n.div_ceil(64);
        let mut tracker = LeastLoaded {
            bucket_of: vec![0; n],
            pos: vec![0; n],
            buckets: Vec::new(),
            free: Vec::new(),
            head: 0,
            head_bits: vec![0; words],
            head_summary: vec![0; words.div_ceil(64)],
            head_count: 0,
        };
        let mut last = NONE;
        for w in order {
            let load = loads[w as usize];
            if last == NONE || tracker.buckets[last as usize].load != load {
                let b = tracker.buckets.len() as u32;
                tracker.buckets.push(Bucket {
                    load,
                    prev: last,
                    next: NONE,
                    members: Vec::new(),
                });
                if last != NONE {
                    tracker.buckets[last as usize].next = b;
                }
                last = b;
            }
            tracker.push(last, w as usize);
        }
        tracker.make_head(0);
        tracker
    }

    /// The worker with the least load, the lowest index on ties.
    #[inline]
    pub fn min(&self) -> usize {
        for (i, &summary) in self.head_summary.iter().enumerate() {
            if summary != 0 {
                let word = i * 64 + summary.trailing_zeros() as usize;
                return word * 64 + self.head_bits[word].trailing_zeros() as usize;
            }
        }
        unreachable!("the head bucket is never empty")
    }

    /// The load of `worker`.
    pub fn load(&self, worker: usize) -> u64 {
        self.buckets[self.bucket_of[worker] as usize].load
    }

    /// Records that `worker`'s load grew by one.
    ///
    /// # Panics
    /// Panics if `worker` is out of range.
    pub fn increment(&mut self, worker: usize) {
        let b = self.bucket_of[worker];
        let load = self.buckets[b as usize].load;
        // Leave the bucket.
        if b == self.head {
            let word = &mut self.head_bits[worker / 64];
            *word &= !(1u64 << (worker % 64));
            if *word == 0 {
                self.head_summary[worker / 4096] &= !(1u64 << (worker / 64 % 64));
            }
            self.head_count -= 1;
        } else {
            let members = &mut self.buckets[b as usize].members;
            let at = self.pos[worker] as usize;
            members.swap_remove(at);
            if let Some(&moved) = members.get(at) {
                self.pos[moved as usize] = at as u32;
            }
        }
        // Join the bucket of the next load, made if missing.
        let next = self.buckets[b as usize].next;
        let target = if next != NONE && self.buckets[next as usize].load == load + 1 {
            next
        } else {
            let t = self.new_bucket(load + 1, b, next);
            self.buckets[b as usize].next = t;
            if next != NONE {
                self.buckets[next as usize].prev = t;
            }
            t
        };
        self.push(target, worker);
        // Drop the old bucket if it emptied; an emptied head hands over to the next bucket.
        if b == self.head {
            if self.head_count == 0 {
                self.unlink(b);
                self.make_head(target);
            }
        } else if self.buckets[b as usize].members.is_empty() {
            self.unlink(b);
        }
    }

    fn push(&mut self, bucket: u32, worker: usize) {
        let members = &mut self.buckets[bucket as usize].members;
        self.pos[worker] = members.len() as u32;
        members.push(worker as u32);
        self.bucket_of[worker] = bucket;
    }

    fn new_bucket(&mut self, load: u64, prev: u32, next: u32) -> u32 {
        let bucket = Bucket {
            load,
            prev,
            next,
            members: Vec::new(),
        };
        match self.free.pop() {
            Some(b) => {
                let members = std::mem::take(&mut self.buckets[b as usize].members);
                self.buckets[b as usize] = Bucket { members, ..bucket };
                b
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u32
            }
        }
    }

    /// Takes an empty bucket out of the list and keeps it for reuse.
    fn unlink(&mut self, b: u32) {
        let Bucket { prev, next, .. } = self.buckets[b as usize];
        if prev != NONE {
            self.buckets[prev as usize].next = next;
        }
        if next != NONE {
            self.buckets[next as usize].prev = prev;
        }
        self.free.push(b);
    }

    /// Makes `b` (the least load, its predecessor gone) the head: its list becomes the bits,
    /// which are all clear when this is called.
    fn make_head(&mut self, b: u32) {
        self.head = b;
        self.buckets[b as usize].prev = NONE;
        let members = std::mem::take(&mut self.buckets[b as usize].members);
        for &w in &members {
            let w = w as usize;
            self.head_bits[w / 64] |= 1u64 << (w % 64);
            self.head_summary[w / 4096] |= 1u64 << (w / 64 % 64);
        }
        self.head_count = members.len();
        // Keep the allocation for when this bucket is reused.
        let mut members = members;
        members.clear();
        self.buckets[b as usize].members = members;
    }
}

/// The least-loaded (or the most loaded) of *all* workers, the lowest index on ties, for loads
/// that go up and down: a tournament tree whose every node keeps the winner of its two children,
/// so [`LoadTree::winner`] is the root and [`LoadTree::set`] replays the matches on one
/// leaf-to-root path, O(log n).
#[derive(Clone, Debug)]
pub struct LoadTree {
    loads: Vec<u64>,
    /// Node `i`'s winner; leaves start at `leaves` (a power of two), padding leaves hold `NONE`.
    winner: Vec<u32>,
    leaves: usize,
    /// Whether the greater load wins (else the lesser).
    greatest: bool,
}

impl LoadTree {
    /// A tree over `n_workers` workers (at least one), all with load 0, whose winner is the
    /// least loaded.
    ///
    /// # Panics
    /// Panics if `n_workers` is 0 or not below 2^32 - 1.
    pub fn new(n_workers: usize) -> Self {
        Self::build(n_workers, false)
    }

    /// Like [`LoadTree::new`], but the winner is the most loaded.
    ///
    /// # Panics
    /// Panics if `n_workers` is 0 or not below 2^32 - 1.
    pub fn greatest(n_workers: usize) -> Self {
        Self::build(n_workers, true)
    }

    fn build(n_workers: usize, greatest: bool) -> Self {
        assert!(n_workers > 0, "at least one worker");
        assert!(
            u32::try_from(n_workers).is_ok_and(|n| n < NONE),
            "fewer than 2^32 - 1 workers"
        );
        let leaves = n_workers.next_power_of_two();
        let mut winner = vec![NONE; 2 * leaves];
        for w in 0..n_workers {
            winner[leaves + w] = w as u32;
        }
        let mut tree = LoadTree {
            loads: vec![0; n_workers],
            winner,
            leaves,
            greatest,
        };
        for node in (1..leaves).rev() {
            tree.replay(node);
        }
        tree
    }

    /// The worker with the least load (the greatest for [`LoadTree::greatest`]), the lowest
    /// index on ties.
    #[inline]
    pub fn winner(&self) -> usize {
        self.winner[1] as usize
    }

    /// The load of `worker`.
    pub fn load(&self, worker: usize) -> u64 {
        self.loads[worker]
    }

    /// Sets `worker`'s load.
    ///
    /// # Panics
    /// Panics if `worker` is out of range.
    pub fn set(&mut self, worker: usize, load: u64) {
        self.loads[worker] = load;
        let mut node = (self.leaves + worker) / 2;
        while node > 0 {
            let before = self.winner[node];
            self.replay(node);
            // A match that another worker won before and wins again hands its parent the same
            // winner at the same load: nothing above changes.
            if self.winner[node] == before && before != worker as u32 {
                break;
            }
            node /= 2;
        }
    }

    /// Calls `visit(state, worker, load)` for every worker whose load `keep(state, load)`
    /// accepts, in increasing worker order, skipping every subtree whose winner's load `keep`
    /// refuses. So `keep` must accept every load that beats (or ties) one it accepts; `visit`
    /// may change `state` so that `keep` accepts less from then on.
    pub fn visit_while<S>(
        &self,
        state: &mut S,
        keep: impl Fn(&S, u64) -> bool,
        mut visit: impl FnMut(&mut S, usize, u64),
    ) {
        // Depth-first, left child first. The stack holds at most one waiting right child per
        // level plus the node in hand: at most 34 (fewer than 2^32 workers, 33 levels).
        let mut stack = [0usize; 34];
        stack[0] = 1;
        let mut top = 1;
        while top > 0 {
            top -= 1;
            let node = stack[top];
            let w = self.winner[node];
            if w == NONE {
                continue;
            }
            let load = self.loads[w as usize];
            if !keep(state, load) {
                continue;
            }
            if node >= self.leaves {
                visit(state, w as usize, load);
            } else {
                stack[top] = 2 * node + 1;
                stack[top + 1] = 2 * node;
                top += 2;
            }
        }
    }

    fn replay(&mut self, node: usize) {
        let (a, b) = (self.winner[2 * node], self.winner[2 * node + 1]);
        self.winner[node] = match (a, b) {
            (NONE, _) => b,
            (_, NONE) => a,
            // `a` has the lower index: it wins ties.
            _ if self.beats(b, a) => b,
            _ => a,
        };
    }

    /// Whether worker `b`'s load is strictly better than `a`'s.
    #[inline]
    fn beats(&self, b: u32, a: u32) -> bool {
        let (lb, la) = (self.loads[b as usize], self.loads[a as usize]);
        if self.greatest {
            lb > la
        } else {
            lb < la
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_load_wins_then_lowest_index() {
        let loads = [3, 1, 1, 0];
        assert_eq!(least_loaded([0, 1, 2], |w| loads[w]), Some(1));
        assert_eq!(least_loaded([0, 1, 2, 3], |w| loads[w]), Some(3));
        assert_eq!(least_loaded([], |w| loads[w]), None);
    }

    #[test]
    fn tracker_agrees_with_a_scan_as_loads_grow() {
        // Seeded pseudo-random increments, including to workers that are not the minimum, from
        // uneven starting loads; worker counts around word and summary boundaries.
        let mut x: u64 = 7;
        for n in [1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 100, 256, 4097] {
            let mut loads: Vec<u64> = (0..n).map(|w| (w as u64 * 7) % 3).collect();
            let mut tracker = LeastLoaded::new(&loads);
            let steps = if n > 1000 { 20_000 } else { 3_000 };
            for step in 0..steps {
                let scan = least_loaded(0..n, |w| loads[w]).unwrap();
                assert_eq!(tracker.min(), scan, "n {n} step {step}");
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                // Mostly the minimum (the router's zero-overlap choice), else anyone, and now and
                // then one worker many times (a hot prefix).
                let w = match step % 5 {
                    0..=2 => scan,
                    3 => (x >> 33) as usize % n,
                    _ => n / 2,
                };
                loads[w] += 1;
                tracker.increment(w);
                assert_eq!(tracker.load(w), loads[w]);
            }
            assert!(tracker.buckets.len() <= n + 1, "buckets are reused");
        }
    }

    #[test]
    fn load_tree_agrees_with_a_scan_as_loads_go_up_and_down() {
        let mut x: u64 = 11;
        for n in [1, 2, 3, 5, 8, 9, 64, 100, 257] {
            let mut loads = vec![0u64; n];
            let mut tree = LoadTree::new(n);
            let mut most = LoadTree::greatest(n);
            for step in 0..2_000 {
                assert_eq!(
                    tree.winner(),
                    least_loaded(0..n, |w| loads[w]).unwrap(),
                    "n {n} step {step}"
                );
                // The most loaded, the lowest index on ties: the least of the complements.
                assert_eq!(
                    most.winner(),
                    least_loaded(0..n, |w| u64::MAX - loads[w]).unwrap(),
                    "most: n {n} step {step}"
                );
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let w = (x >> 33) as usize % n;
                loads[w] = if (x >> 20) % 3 == 0 {
                    loads[w].saturating_sub(1)
                } else {
                    loads[w] + 1
                };
                tree.set(w, loads[w]);
                most.set(w, loads[w]);
                assert_eq!((tree.load(w), most.load(w)), (loads[w], loads[w]));
                // Stopping early leaves every match as replaying them all would.
                assert_eq!(tree.winner, replayed(&tree), "n {n} step {step}");
                assert_eq!(most.winner, replayed(&most), "most: n {n} step {step}");
            }
        }
    }

    /// `tree`'s winners with every match replayed from the leaves.
    fn replayed(tree: &LoadTree) -> Vec<u32> {
        let mut fresh = tree.clone();
        for node in (1..fresh.leaves).rev() {
            fresh.replay(node);
        }
        fresh.winner
    }

    #[test]
    fn a_visit_sees_every_accepted_load_in_worker_order_as_the_bound_falls() {
        let mut x: u64 = 3;
        for n in [1, 2, 3, 5, 8, 64, 65, 130, 512] {
            let mut tree = LoadTree::new(n);
            let mut loads = vec![0u64; n];
            for (w, load) in loads.iter_mut().enumerate() {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                *load = (x >> 33) % 50;
                tree.set(w, *load);
            }
            for bound in [0, 10, 25, 49, 50] {
                let mut seen = Vec::new();
                tree.visit_while(
                    &mut seen,
                    |_, load| load <= bound,
                    |seen, w, load| {
                        assert_eq!(load, loads[w]);
                        seen.push(w);
                    },
                );
                let want: Vec<usize> = (0..n).filter(|&w| loads[w] <= bound).collect();
                assert_eq!(seen, want, "n {n} bound {bound}");
            }
            // A bound that falls to each visited load: the visit finds the least load and every
            // worker that has it (and perhaps others visited before the bound fell).
            let mut least = (u64::MAX, Vec::new());
            tree.visit_while(
                &mut least,
                |least, load| load <= least.0,
                |least, w, load| {
                    if load < least.0 {
                        *least = (load, vec![w]);
                    } else if load == least.0 {
                        least.1.push(w);
                    }
                },
            );
            let min = *loads.iter().min().unwrap();
            let ties: Vec<usize> = (0..n).filter(|&w| loads[w] == min).collect();
            assert_eq!(least, (min, ties), "n {n}");
        }
    }

    #[test]
    fn the_one_pass_choice_is_the_two_pass_rule() {
        // Costs with many ties, infinities, NaNs and both zeros: the one-pass choice picks the worker
        // the rule as first written picks (the least cost by `f64::min`, its equals counted, the
        // k-th of them drawn) and draws the same numbers.
        use crate::rng::{RngKind, SimRng};
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let values = [0.0, -0.0, 1.0, 2.5, f64::INFINITY, f64::NAN];
        for case in 0..2_000 {
            let n = rng.gen_range(0..40);
            let costs: Vec<f64> = (0..n)
                .map(|_| match rng.gen_range(0..3u8) {
                    0 => values[rng.gen_range(0..values.len())],
                    k => f64::from(k),
                })
                .collect();
            let pairs: Vec<(usize, f64)> = costs.iter().copied().enumerate().collect();
            let mut a = SimRng::new(RngKind::Chacha, case);
            let mut b = SimRng::new(RngKind::Chacha, case);
            let two_pass = {
                let min = pairs.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
                match count_equal(&pairs, min) {
                    0 => None,
                    1 => nth_equal(pairs.iter().copied(), min, 0),
                    n => nth_equal(pairs.iter().copied(), min, b.below(n)),
                }
            };
            assert_eq!(
                lowest_random_tie(costs.iter().copied().enumerate(), &mut a),
                two_pass,
                "{costs:?}"
            );
            assert_eq!(
                a.below(1 << 20),
                b.below(1 << 20),
                "the same draws: {costs:?}"
            );
        }
    }
}
