//! One routing decision of every policy at 4, 64 and 256 workers (target 11 of docs/BENCHMARKS.md),
//! on the commonest production case: 4,096-token prompts whose first 3,000 tokens are one of 200
//! system prompts that every worker holds (events-fed policies learn them from KV events, the
//! others from routing each to every worker), the rest unique. Also the lab's events router on
//! the same prompts; and `dynamo-in-flight`, Dynamo with two requests sharing the system prompt
//! in flight on every worker (its decode-block term then meets the shared prefix on every
//! worker). Run with `cargo bench --bench policies`.
// criterion_group! and criterion_main! define public functions without docs.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dynsim::hash::{block_hashes, BlockHash};
use dynsim::ids::{RequestId, WorkerId};
use dynsim::protocol::kv_event::KvEvent;
use dynsim::protocol::signals::WorkerSignals;
use dynsim::rng::{RngKind, SimRng};
use dynsim::router::loads::{LoadBook, LoadKind};
use dynsim::router::policy::{PolicySetup, RouteRequest};
use dynsim::router::registry::{self, POLICIES};
use dynsim::router::{Decision, KvRouter};

const BLOCK: usize = 16;
const PREFIXES: u32 = 200;
const PREFIX_TOKENS: u32 = 3000;
const PROMPT_TOKENS: u32 = 4096;

fn prompt(prefix: u32, unique: u32) -> Vec<u32> {
    (0..PREFIX_TOKENS)
        .map(|t| prefix * 10_000 + t)
        .chain((0..PROMPT_TOKENS - PREFIX_TOKENS).map(|t| 1 << 30 | unique << 12 | t))
        .collect()
}

fn prefix_blocks(prefix: u32) -> Vec<BlockHash> {
    block_hashes(&prompt(prefix, 0), BLOCK)[..(PREFIX_TOKENS as usize / BLOCK)].to_vec()
}

fn loads(workers: usize) -> LoadBook {
    let mut loads = LoadBook::new(workers, LoadKind::InFlight);
    for w in 0..workers {
        for r in 0..(w % 5) as u64 {
            loads.routed_to(RequestId((w as u64) << 8 | r), WorkerId::at(w), 256);
        }
    }
    let signals: Vec<WorkerSignals> = (0..workers)
        .map(|w| WorkerSignals {
            waiting: (w % 7) as u32,
            running: (w % 5) as u32,
            prefill_tokens: (w % 3) as u64 * 4096,
            decode_blocks: (w % 11) as u64 * 200,
            kv_usage: (w % 10) as f64 / 10.0,
        })
        .collect();
    loads.refresh_signals(&signals);
    loads
}

fn decisions(c: &mut Criterion) {
    let prefixes: Vec<Vec<BlockHash>> = (0..PREFIXES).map(prefix_blocks).collect();
    let request = block_hashes(&prompt(7, 1), BLOCK);
    // The request every policy decides on.
    let decided = RouteRequest {
        id: RequestId(1),
        blocks: (&request).into(),
        input_tokens: PROMPT_TOKENS,
        session: Some(7),
        now: 1,
    };
    let mut group = c.benchmark_group("decide");
    for workers in [4usize, 64, 256] {
        let book = loads(workers);
        for entry in POLICIES {
            let mut policy = (entry.build)(&PolicySetup {
                name: entry.name,
                workers,
                block_size: BLOCK,
                kv_capacity_blocks: None,
                settings: None,
            })
            .expect("defaults build");
            // Every worker holds every system prompt: learnt from events, or from routing each
            // system prompt to every worker (the first 20 of them: a routing history keeps an
            // LRU entry per block and worker, 9.6 M of them for 200 prompts at 256 workers).
            let warm = if policy.learns_from_events() {
                prefixes.len()
            } else {
                20
            };
            for (k, blocks) in prefixes.iter().take(warm).enumerate() {
                for w in 0..workers {
                    let worker = WorkerId::at(w);
                    if policy.learns_from_events() {
                        policy.on_event(&KvEvent::Stored {
                            worker,
                            parent: None,
                            blocks: blocks.clone().into(),
                        });
                    } else {
                        let req = RouteRequest {
                            id: RequestId(1 << 40 | (k * workers + w) as u64),
                            blocks: blocks.into(),
                            input_tokens: PREFIX_TOKENS,
                            session: Some(k as u64),
                            now: 0,
                        };
                        policy.on_routed(
                            &req,
                            &Decision {
                                worker,
                                predicted_blocks: 0,
                            },
                        );
                    }
                }
            }
            let req = decided;
            let mut rng = SimRng::new(RngKind::Chacha, 1);
            group.bench_with_input(
                BenchmarkId::new(entry.name, format!("{workers}w")),
                &req,
                |b, req| b.iter(|| policy.decide(req, &book, &mut rng)),
            );
        }
        // Dynamo with the system prompt in flight: every worker has two active requests that
        // share the request's 187-block prefix (routed through on_routed, as the router does),
        // so each worker's decode-block term must find that prefix among its active blocks.
        let mut dynamo = (registry::entry("dynamo").expect("registered").build)(&PolicySetup {
            name: "dynamo",
            workers,
            block_size: BLOCK,
            kv_capacity_blocks: None,
            settings: None,
        })
        .expect("defaults build");
        for blocks in &prefixes {
            for w in 0..workers {
                dynamo.on_event(&KvEvent::Stored {
                    worker: WorkerId::at(w),
                    parent: None,
                    blocks: blocks.clone().into(),
                });
            }
        }
        let mut busy = book.clone();
        let in_flight: Vec<Vec<BlockHash>> = (0..2 * workers as u32)
            .map(|k| block_hashes(&prompt(7, 1000 + k), BLOCK))
            .collect();
        for (k, blocks) in in_flight.iter().enumerate() {
            let worker = WorkerId::at(k % workers);
            let req = RouteRequest {
                id: RequestId(1 << 41 | k as u64),
                blocks: blocks.into(),
                input_tokens: PROMPT_TOKENS,
                session: None,
                now: 0,
            };
            let d = Decision {
                worker,
                predicted_blocks: (PREFIX_TOKENS as usize) / BLOCK,
            };
            busy.routed_to(req.id, worker, blocks.len());
            dynamo.on_routed(&req, &d);
        }
        let req = decided;
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        group.bench_with_input(
            BenchmarkId::new("dynamo-in-flight", format!("{workers}w")),
            &req,
            |b, req| b.iter(|| dynamo.decide(req, &busy, &mut rng)),
        );
        // The lab's events router: hashing the prompt included.
        let mut lab = KvRouter::with_events(workers, BLOCK);
        for blocks in &prefixes {
            for w in 0..workers {
                lab.on_event(w, blocks);
            }
        }
        let tokens = prompt(7, 1);
        group.bench_with_input(
            BenchmarkId::new("lab-events-route", format!("{workers}w")),
            &tokens,
            |b, tokens| b.iter(|| lab.route(tokens)),
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = decisions
}
criterion_main!(benches);
