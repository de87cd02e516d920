//! Routing hot-path benchmarks: block names, overlap, `KvRouter::route`, index updates.
//!
//! Every target of docs/BENCHMARKS.md is a *ratio* of two benchmarks of one run (the machines
//! are shared and noisy, absolute times are not comparable between runs):
//!
//! - `block_hashes/names/4096` vs `block_hashes/xxh3_floor/4096` (target 1);
//! - `route/{kv,events}-hit/64w/4096` vs `route/hash-only/4096` (target 2);
//! - `route/*/256w/*` vs `route/*/4w/*` (target 3);
//! - `users/{kv,events}-{seen,new}/{4,64,256}w` vs `users/hash-only` (targets 2 and 3 as users
//!   route: a different prompt every call, see [`bench_users`]);
//! - `index/*` in blocks/s, and the bytes per (block, worker) entry that every warm index prints
//!   (`memory: ...` on stderr) when it is built (target 4).
//!
//! Quick run: `cargo bench --bench routing -- --quick` (a filter such as `route/` narrows it).
//! Inputs are seeded (ChaCha8, fixed seeds) and identical on every run.
// criterion_group! and criterion_main! define public functions without docs.
#![allow(missing_docs)]

use std::cell::{OnceCell, RefCell};
use std::collections::HashSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dynsim::hashers::BlockHashBuilder;
use dynsim::index::KvIndex;
use dynsim::{block_hashes, overlap, BlockHash, KvRouter};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Tokens per block everywhere (the lab's and Dynamo's default).
const BLOCK: usize = 16;
/// Prompt lengths, in tokens.
const PROMPTS: [usize; 3] = [128, 4096, 32_768];
/// Worker counts of the route group.
const WORKERS: [usize; 4] = [4, 16, 64, 256];
/// Distinct shared prefixes ("system prompts") among the warm prompts.
const FAMILIES: usize = 50;

/// `n` seeded random tokens (a vocabulary of 150k, like a real tokenizer's).
fn tokens(seed: u64, n: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(0..150_000)).collect()
}

/// How many prompts warm the index for prompts of `len` tokens: 2,000 (330k distinct blocks at
/// 4,096 tokens), 250 for the longest prompts so the index stays about that size (435k blocks).
/// Debug builds (`cargo test --benches`) use a tenth, to keep that check fast.
fn warm_count(len: usize) -> usize {
    let n = if len > 4096 { 250 } else { 2000 };
    if cfg!(debug_assertions) {
        n / 10
    } else {
        n
    }
}

/// Warm prompt `i` of `len` tokens: it belongs to family `i % FAMILIES`, shares the first 0, 1/4,
/// 1/2 or 3/4 of the family's text (by `i / FAMILIES % 4`) and ends with its own random tail.
fn warm_prompt(len: usize, i: usize) -> Vec<u32> {
    let shared = (len / 4) * (i / FAMILIES % 4);
    let mut t = tokens((i % FAMILIES) as u64, len);
    t.truncate(shared);
    t.extend(tokens(1_000_000 + i as u64, len - shared));
    t
}

/// The warm prompts of one length, as block names: warming is not what is measured.
struct Warm {
    hashes: Vec<Vec<BlockHash>>,
}

impl Warm {
    fn new(len: usize) -> Warm {
        let hashes = (0..warm_count(len))
            .map(|i| block_hashes(&warm_prompt(len, i), BLOCK))
            .collect();
        Warm { hashes }
    }

    /// A router over `workers` workers that has routed every warm prompt; the events router
    /// learns each one from the chosen worker's KV-stored event.
    fn router(&self, workers: usize, events: bool) -> KvRouter {
        let mut r = if events {
            KvRouter::with_events(workers, BLOCK)
        } else {
            KvRouter::new(workers, BLOCK)
        };
        for h in &self.hashes {
            let worker = r.route_hashes(h).worker;
            if events {
                r.on_event(worker.index(), h);
            }
        }
        r
    }
}

fn bench_block_hashes(c: &mut Criterion) {
    let mut g = c.benchmark_group("block_hashes");
    for len in PROMPTS {
        let t = tokens(42, len);
        let bytes: Vec<u8> = t.iter().flat_map(|x| x.to_le_bytes()).collect();
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_with_input(BenchmarkId::new("names", len), &t, |b, t| {
            b.iter(|| block_hashes(black_box(t), BLOCK))
        });
        // The same names through the library's seeded xxh3, one call per block.
        g.bench_with_input(BenchmarkId::new("xxh3_per_block", len), &t, |b, t| {
            b.iter(|| {
                let mut seed = dynsim::hash::ROOT_SEED;
                black_box(t)
                    .chunks_exact(BLOCK)
                    .map(|chunk| {
                        let bytes: &[u8] = bytemuck::cast_slice(chunk);
                        seed = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, seed);
                        BlockHash(seed)
                    })
                    .collect::<Vec<_>>()
            })
        });
        // The floor: one xxh3-64 over the same bytes as a single buffer.
        g.bench_with_input(BenchmarkId::new("xxh3_floor", len), &bytes, |b, bytes| {
            b.iter(|| xxhash_rust::xxh3::xxh3_64(black_box(bytes)))
        });
    }
    g.finish();
}

fn bench_overlap(c: &mut Criterion) {
    let mut g = c.benchmark_group("overlap");
    for len in PROMPTS {
        let hashes = block_hashes(&tokens(43, len), BLOCK);
        // The first three quarters cached: the walk stops at the first miss.
        let held = &hashes[..hashes.len() * 3 / 4];
        let std_set: HashSet<BlockHash> = held.iter().copied().collect();
        let id_set: HashSet<BlockHash, BlockHashBuilder> = held.iter().copied().collect();
        g.throughput(Throughput::Elements(held.len() as u64 + 1));
        g.bench_with_input(BenchmarkId::new("siphash_set", len), &hashes, |b, h| {
            b.iter(|| overlap(black_box(h), &std_set))
        });
        g.bench_with_input(BenchmarkId::new("identity_set", len), &hashes, |b, h| {
            b.iter(|| overlap(black_box(h), &id_set))
        });
    }
    g.finish();
}

fn bench_route(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    for len in PROMPTS {
        // Set-up is lazy (run by the first call of a benchmark the filter selects), so that a
        // filtered run does not build every warm index.
        let warm = OnceCell::new();
        let warm = || warm.get_or_init(|| Warm::new(len));
        // A warm prompt with a shared prefix (family 7, half shared), fully cached by one worker;
        // a partial hit; a miss.
        let hit = warm_prompt(len, (7 + 2 * FAMILIES) % warm_count(len));
        let partial = {
            let mut t = tokens(3, len)[..len / 2].to_vec();
            t.extend(tokens(7_000_000, len - len / 2));
            t
        };
        let miss = tokens(9_000_000, len);
        // The reference of target 2: what route() would spend hashing the prompt first.
        g.bench_with_input(BenchmarkId::new("hash-only", len), &hit, |b, t| {
            b.iter(|| block_hashes(black_box(t), BLOCK))
        });
        for workers in WORKERS {
            let id = |case: &str| BenchmarkId::new(case, format!("{workers}w/{len}"));
            // Self-tracking: the prompt is fully cached for the chosen worker, so route()
            // stores nothing and the index stays the same size across iterations.
            let mut kv = None;
            g.bench_function(id("kv-hit"), |b| {
                let kv = kv.get_or_insert_with(|| {
                    let mut kv = warm().router(workers, false);
                    report_memory(&format!("route kv {workers}w/{len}"), kv.index());
                    let first = kv.route_hashes(&block_hashes(&hit, BLOCK));
                    assert_eq!(
                        first.predicted_blocks,
                        len / BLOCK,
                        "the hit prompt is warm"
                    );
                    kv
                });
                b.iter(|| kv.route(black_box(&hit)))
            });
            drop(kv);
            // Events: route() never changes the index, so any prompt is a steady state.
            let ev = OnceCell::new();
            let ev = || {
                ev.get_or_init(|| {
                    let ev = warm().router(workers, true);
                    report_memory(&format!("route events {workers}w/{len}"), ev.index());
                    RefCell::new(ev)
                })
            };
            for (case, prompt) in [
                ("events-hit", &hit),
                ("events-partial", &partial),
                ("events-miss", &miss),
            ] {
                g.bench_function(id(case), |b| {
                    let mut ev = ev().borrow_mut();
                    b.iter(|| ev.route(black_box(prompt)))
                });
            }
        }
    }
    g.finish();
}

/// Warm blocks in the index of the `index` group.
const INDEX_WARM_BLOCKS: usize = 200_000;
/// Blocks per KV event (a 1,024-token request at block 16).
const EVENT_BLOCKS: usize = 64;

/// Block names of `n` seeded random 64-block "requests".
fn event_batches(seed: u64, n: usize) -> Vec<Vec<BlockHash>> {
    (0..n)
        .map(|i| block_hashes(&tokens(seed + i as u64, EVENT_BLOCKS * BLOCK), BLOCK))
        .collect()
}

/// An index over `workers` workers holding `INDEX_WARM_BLOCKS` blocks, each on one worker.
fn warm_index(workers: usize) -> KvIndex {
    let mut index = KvIndex::new(workers);
    for (i, batch) in event_batches(5_000, INDEX_WARM_BLOCKS / EVENT_BLOCKS)
        .iter()
        .enumerate()
    {
        index.store(i % workers, batch);
    }
    report_memory(&format!("index {workers}w"), &index);
    index
}

/// Prints an index's bytes per (block, worker) entry (target 4): a measurement, not a timing.
fn report_memory(what: &str, index: &KvIndex) {
    eprintln!(
        "memory: {what}: {} blocks, {} entries, {} heap bytes = {:.1} bytes/entry",
        index.blocks(),
        index.entries(),
        index.heap_bytes(),
        index.heap_bytes() as f64 / index.entries() as f64
    );
}

fn bench_index(c: &mut Criterion) {
    let mut g = c.benchmark_group("index");
    let fresh = event_batches(1, 16);
    let held = event_batches(5_000, 16);
    // Each iteration stores 16 events of 64 blocks and removes them again.
    g.throughput(Throughput::Elements(
        2 * (fresh.len() * EVENT_BLOCKS) as u64,
    ));
    for workers in [4, 64, 256] {
        let index = OnceCell::new();
        let index = || index.get_or_init(|| RefCell::new(warm_index(workers)));
        // New blocks: store inserts a table entry per block, remove deletes it.
        g.bench_function(BenchmarkId::new("store+remove/new", workers), |b| {
            let mut index = index().borrow_mut();
            b.iter(|| {
                for (i, batch) in fresh.iter().enumerate() {
                    index.store(i % workers, black_box(batch));
                }
                for (i, batch) in fresh.iter().enumerate() {
                    index.remove(i % workers, black_box(batch));
                }
            })
        });
        // Blocks another worker already holds: store and remove only add and drop a holder.
        g.bench_function(BenchmarkId::new("store+remove/shared", workers), |b| {
            let mut index = index().borrow_mut();
            b.iter(|| {
                for (i, batch) in held.iter().enumerate() {
                    index.store((i + 1) % workers, black_box(batch));
                }
                for (i, batch) in held.iter().enumerate() {
                    index.remove((i + 1) % workers, black_box(batch));
                }
            })
        });
    }
    g.finish();
}

/// Shared prefixes ("system prompts") of the users' workload.
const USER_PREFIXES: usize = 200;
/// Tokens of each shared prefix (not a whole number of blocks: the block that straddles the
/// prefix's end is the prompt's own, as with real prompts).
const USER_PREFIX_TOKENS: usize = 3000;
/// Tokens of each user prompt: a shared prefix and its own tail.
const USER_PROMPT_TOKENS: usize = 4096;

/// Prompt `i` of the users' workload: prefix `i % USER_PREFIXES`, then a random tail of its own.
fn user_prompt(prefixes: &[Vec<u32>], i: usize) -> Vec<u32> {
    let mut t = prefixes[i % USER_PREFIXES].clone();
    t.extend(tokens(
        20_000_000 + i as u64,
        USER_PROMPT_TOKENS - USER_PREFIX_TOKENS,
    ));
    t
}

/// What users do with the lab's router (the workload of issue 22): 200 shared 3,000-token
/// prefixes, 4,096-token prompts with tails of their own, 2,000 prompts routed first, then one
/// `route(&tokens)` per prompt, a different prompt every call. `route/*-hit` routes one prompt
/// over and over, so its 256 table probes stay in the processor's caches; here each call probes
/// the table where the previous prompts did not, as in a real run.
///
/// - `users/hash-only`: `block_hashes` over the same sequence of seen prompts (the reference);
/// - `users/{kv,events}-seen/{W}w`: the 2,000 warm prompts again, in turn (the self-tracking
///   router holds each on one worker and stores nothing, so the index stays as it is);
/// - `users/{kv,events}-new/{W}w`: prompts never routed before (a known prefix, a new tail); the
///   self-tracking router stores each tail, so every 2,000 calls it starts again from a copy of
///   the warm router, made outside the timing;
/// - `users/events-everyone/{W}w`: the new prompts on an events router whose every worker holds
///   all 200 prefixes (a system prompt shared cluster-wide), so each walk crosses 187 blocks
///   held by everyone before the first it cannot match (target 3).
fn bench_users(c: &mut Criterion) {
    let mut g = c.benchmark_group("users");
    let warm_count = if cfg!(debug_assertions) { 200 } else { 2000 };
    let built = OnceCell::new();
    let built = || {
        built.get_or_init(|| {
            let prefixes: Vec<Vec<u32>> = (0..USER_PREFIXES)
                .map(|p| tokens(30_000_000 + p as u64, USER_PREFIX_TOKENS))
                .collect();
            let seen: Vec<Vec<u32>> = (0..warm_count).map(|i| user_prompt(&prefixes, i)).collect();
            let new: Vec<Vec<u32>> = (warm_count..2 * warm_count)
                .map(|i| user_prompt(&prefixes, i))
                .collect();
            (seen, new)
        })
    };
    let warm = |workers: usize, events: bool| {
        let mut r = if events {
            KvRouter::with_events(workers, BLOCK)
        } else {
            KvRouter::new(workers, BLOCK)
        };
        for t in &built().0 {
            let worker = r.route(t);
            if events {
                r.on_event(worker.index(), &block_hashes(t, BLOCK));
            }
        }
        r
    };
    g.bench_function("hash-only", |b| {
        let seen = &built().0;
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % seen.len();
            block_hashes(black_box(&seen[i]), BLOCK)
        })
    });
    for workers in WORKERS {
        let everyone = OnceCell::new();
        g.bench_function(
            BenchmarkId::new("events-everyone", format!("{workers}w")),
            |b| {
                let new = &built().1;
                let mut r = everyone
                    .get_or_init(|| {
                        let mut r = KvRouter::with_events(workers, BLOCK);
                        for p in 0..USER_PREFIXES {
                            let prefix = block_hashes(&built().0[p][..USER_PREFIX_TOKENS], BLOCK);
                            for w in 0..workers {
                                r.on_event(w, &prefix);
                            }
                        }
                        r
                    })
                    .clone();
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % new.len();
                    r.route(black_box(&new[i]))
                })
            },
        );
        for events in [false, true] {
            let kind = if events { "events" } else { "kv" };
            let router = OnceCell::new();
            let router = || router.get_or_init(|| warm(workers, events));
            g.bench_function(
                BenchmarkId::new(format!("{kind}-seen"), format!("{workers}w")),
                |b| {
                    let seen = &built().0;
                    let mut r = router().clone();
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) % seen.len();
                        r.route(black_box(&seen[i]))
                    })
                },
            );
            g.bench_function(
                BenchmarkId::new(format!("{kind}-new"), format!("{workers}w")),
                |b| {
                    let new = &built().1;
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        let mut left = iters as usize;
                        while left > 0 {
                            let n = left.min(new.len());
                            let mut r = router().clone();
                            let start = std::time::Instant::now();
                            for t in &new[..n] {
                                black_box(r.route(black_box(t)));
                            }
                            total += start.elapsed();
                            left -= n;
                        }
                        total
                    })
                },
            );
        }
    }
    g.finish();
}

fn bench_all(c: &mut Criterion) {
    bench_block_hashes(c);
    bench_overlap(c);
    bench_route(c);
    bench_users(c);
    bench_index(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench_all
}
criterion_main!(benches);
