//! `dynamo` on hand-computed decisions: the cost formula, credit decay, the request weight,
//! softmax sampling, seeded ties and approximate mode.

use std::collections::HashSet;

use super::*;
use crate::hash::block_hashes;
use crate::protocol::kv_event::Blocks;
use crate::rng::RngKind;
use crate::router::loads::LoadKind;

fn policy(settings: Option<&toml::Value>) -> Box<dyn RoutingPolicy> {
    build(&PolicySetup {
        name: "dynamo",
        workers: 2,
        block_size: 4,
        kv_capacity_blocks: None,
        settings,
    })
    .unwrap()
}

#[test]
fn a_decision_computed_by_hand_from_the_published_rule() {
    // Block size 4. Worker 0 holds the first 3 blocks of a 6-block (24-token) prompt and has
    // one request (8 tokens, 2 blocks, none cached) routed and still in prefill; worker 1 is
    // idle and holds nothing.
    let mut p = policy(None);
    let tokens: Vec<u32> = (0..24).collect();
    let blocks = block_hashes(&tokens, 4);
    p.on_event(&KvEvent::Stored {
        worker: WorkerId(0),
        parent: None,
        blocks: blocks[..3].to_vec().into(),
    });
    let other = block_hashes(&(100..108).collect::<Vec<u32>>(), 4);
    let mut loads = LoadBook::new(2, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let busy = RouteRequest {
        id: RequestId(1),
        blocks: (&other).into(),
        input_tokens: 8,
        session: None,
        now: 0,
    };
    let d0 = Decision {
        worker: WorkerId(0),
        predicted_blocks: 0,
    };
    p.decide(&busy, &loads, &mut rng).unwrap();
    loads.routed_to(RequestId(1), WorkerId(0), 2);
    p.on_routed(&busy, &d0);
    let req = RouteRequest {
        id: RequestId(2),
        blocks: (&blocks).into(),
        input_tokens: 24,
        session: None,
        now: 0,
    };
    // Worker 0: prefill (8 + 24) / 4 − 3 credit = 5; decode 2 active + 6 new = 8: cost 13.
    // Worker 1: prefill 24 / 4 = 6; decode 6 new: cost 12. Worker 1 wins.
    let d = p.decide(&req, &loads, &mut rng).unwrap();
    assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 0));
    // Once worker 0's request produced its first token its prefill load is gone:
    // worker 0 costs (24 / 4 − 3) + 8 = 11 < 12.
    p.on_prefill_done(WorkerId(0), RequestId(1));
    let d = p.decide(&req, &loads, &mut rng).unwrap();
    assert_eq!((d.worker, d.predicted_blocks), (WorkerId(0), 3));
    // And once it finished, worker 0 costs 3 + 6 = 9.
    p.on_finished(WorkerId(0), RequestId(1));
    assert_eq!(p.decide(&req, &loads, &mut rng).unwrap().worker, WorkerId(0));
}

/// A two-worker policy (block size 4) with these `[router.dynamo]` settings.
fn dynamo(settings: &str) -> Dynamo {
    dynamo_on(2, settings)
}

/// The policy on `workers` workers with `settings`, 4-token blocks.
fn dynamo_on(workers: usize, settings: &str) -> Dynamo {
    let table: toml::Value = toml::from_str(settings).unwrap();
    Dynamo::new(&PolicySetup {
        name: "dynamo",
        workers,
        block_size: 4,
        kv_capacity_blocks: None,
        settings: Some(&table),
    })
    .unwrap()
}

/// A request of `tokens` (one block per 4).
fn request(id: u64, tokens: std::ops::Range<u32>) -> (RequestId, Vec<BlockHash>, u32) {
    let t: Vec<u32> = tokens.collect();
    (RequestId(id), block_hashes(&t, 4), t.len() as u32)
}

/// The routing request for `r` (id, blocks, prompt tokens) at time 0.
fn route_req(r: &(RequestId, Vec<BlockHash>, u32)) -> RouteRequest<'_> {
    RouteRequest {
        id: r.0,
        blocks: (&r.1).into(),
        input_tokens: r.2,
        session: None,
        now: 0,
    }
}

/// Sends `r` to `worker` as the router would, believing none of it cached; with `decoding`
/// its first token has come.
fn busy(p: &mut Dynamo, r: &(RequestId, Vec<BlockHash>, u32), worker: u32, decoding: bool) {
    let req = route_req(r);
    let d = Decision {
        worker: WorkerId(worker),
        predicted_blocks: 0,
    };
    p.on_routed(&req, &d);
    if decoding {
        p.on_prefill_done(WorkerId(worker), r.0);
    }
}

/// The decision on `r` and every worker's cost.
fn costs(p: &mut Dynamo, r: &(RequestId, Vec<BlockHash>, u32)) -> (u32, Vec<(usize, f64)>) {
    let loads = LoadBook::new(2, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let req = route_req(r);
    let d = p.decide(&req, &loads, &mut rng).unwrap();
    let terms = p.terms(&req, &loads);
    p.scan(&req, &loads, &terms);
    (d.worker.0, p.costs.iter().copied().enumerate().collect())
}

#[test]
fn credit_decay_of_one_halves_the_credit_at_one_request_of_excess() {
    // An 8-block prompt (32 tokens) that worker 0 holds whole. Worker 0 is prefilling an
    // unrelated 32-token request (8 blocks); worker 1 decodes a 40-token one (10 blocks).
    // Without decay: worker 0 = (32 + 32) / 4 − 8 credit + (8 + 8) decode = 24; worker 1 =
    // 32 / 4 + (10 + 8) = 26. With decay 1 worker 0's excess prefill is 32 / 4 = 8 blocks
    // above worker 1's none, one request's worth (8 blocks): decay = 1 / (1 + 1 x 8 / 8) =
    // 1/2, credit 4, worker 0 = 28 and worker 1 wins.
    let prompt = request(1, 0..32);
    for (settings, expected) in [
        (
            "overlap_score_credit_decay = 0.0",
            (0, vec![(0, 24.0), (1, 26.0)]),
        ),
        (
            "overlap_score_credit_decay = 1.0",
            (1, vec![(0, 28.0), (1, 26.0)]),
        ),
    ] {
        let mut p = dynamo(settings);
        p.on_event(&KvEvent::Stored {
            worker: WorkerId(0),
            parent: None,
            blocks: prompt.1.clone().into(),
        });
        busy(&mut p, &request(10, 1000..1032), 0, false);
        busy(&mut p, &request(11, 2000..2040), 1, true);
        assert_eq!(costs(&mut p, &prompt), expected, "{settings}");
    }
}

#[test]
fn active_requests_weigh_decode_active_request_weight_each() {
    // An 8-block prompt nobody holds. Worker 0 decodes two 1-block requests, worker 1 one
    // 3-block request. Weight 0: worker 0 = 32 / 4 + (2 + 8) = 18, worker 1 = 8 + (3 + 8)
    // = 19. Weight 2: worker 0 = 18 + 2 x 2 = 22, worker 1 = 19 + 2 x 1 = 21.
    let prompt = request(1, 0..32);
    for (settings, expected) in [
        (
            "decode_active_request_weight = 0.0",
            (0, vec![(0, 18.0), (1, 19.0)]),
        ),
        (
            "decode_active_request_weight = 2.0",
            (1, vec![(0, 22.0), (1, 21.0)]),
        ),
    ] {
        let mut p = dynamo(settings);
        busy(&mut p, &request(10, 1000..1004), 0, true);
        busy(&mut p, &request(11, 1100..1104), 0, true);
        busy(&mut p, &request(12, 2000..2012), 1, true);
        assert_eq!(costs(&mut p, &prompt), expected, "{settings}");
    }
}

#[test]
fn a_temperature_samples_the_softmax_of_the_normalised_costs() {
    // Costs 10, 12, 14 (span 4) at T = 1: weights e^0, e^−0.5, e^−1, probabilities 0.5065,
    // 0.3072, 0.1863; at T = 0.5: e^0, e^−1, e^−2, probabilities 0.6652, 0.2447, 0.0900.
    let costs = [(0, 10.0), (1, 12.0), (2, 14.0)];
    for (t, expected) in [
        (1.0, [0.5065, 0.3072, 0.1863]),
        (0.5, [0.6652, 0.2447, 0.0900]),
    ] {
        let weight = softmax_weight(&costs, t);
        let w: Vec<f64> = costs.iter().map(|c| weight(c.1)).collect();
        let total: f64 = w.iter().sum();
        for (got, want) in w.iter().zip(expected) {
            assert!((got / total - want).abs() < 5e-5, "T {t}: {w:?}");
        }
    }
    // Through decide: the weight-0 case above costs 18 and 19 (span 1); at T = 1 worker 0
    // is drawn with probability 1 / (1 + e^−1) = 0.731 (4,000 seeded draws: ±0.03 is over
    // four standard deviations), where T = 0 would always pick it.
    let mut p = dynamo("router_temperature = 1.0");
    busy(&mut p, &request(10, 1000..1004), 0, true);
    busy(&mut p, &request(11, 1100..1104), 0, true);
    busy(&mut p, &request(12, 2000..2012), 1, true);
    let r = request(1, 0..32);
    let req = route_req(&r);
    let loads = LoadBook::new(2, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 9);
    let zeros = (0..4000)
        .filter(|_| p.decide(&req, &loads, &mut rng).unwrap().worker == WorkerId(0))
        .count();
    let share = zeros as f64 / 4000.0;
    assert!((share - 0.731).abs() < 0.03, "worker 0 drawn {share}");
}

#[test]
fn the_held_prefix_search_agrees_with_a_walk() {
    for n in 0..40usize {
        let blocks = block_hashes(&(0..4 * n as u32).collect::<Vec<u32>>(), 4);
        for depth in 0..=n {
            let held: std::collections::HashSet<BlockHash> =
                blocks[..depth].iter().copied().collect();
            let probes = std::cell::Cell::new(0);
            let found = held_prefix(&blocks, |b| {
                probes.set(probes.get() + 1);
                held.contains(b)
            });
            assert_eq!(found, depth, "{n} blocks");
            // O(log prefix): at most about twice log2 of the depth, plus two.
            let bound = 2 * (usize::BITS - depth.leading_zeros()) as usize + 2;
            assert!(
                probes.get() <= bound,
                "{n} blocks, depth {depth}: {probes:?}"
            );
        }
    }
}

#[test]
fn equal_costs_are_broken_by_the_seeded_generator() {
    let loads = LoadBook::new(2, LoadKind::Routed);
    let blocks = block_hashes(&(0..8).collect::<Vec<u32>>(), 4);
    let req = RouteRequest {
        id: RequestId(0),
        blocks: (&blocks).into(),
        input_tokens: 8,
        session: None,
        now: 0,
    };
    let picks = |seed| {
        let mut rng = SimRng::new(RngKind::Chacha, seed);
        let mut p = policy(None);
        (0..32)
            .map(|_| p.decide(&req, &loads, &mut rng).unwrap().worker.index())
            .collect::<Vec<_>>()
    };
    assert_eq!(picks(7), picks(7), "same seed, same ties");
    assert!(
        picks(7).contains(&0) && picks(7).contains(&1),
        "both tied workers chosen"
    );
}

#[test]
fn approximate_mode_learns_from_its_own_decisions() {
    let table: toml::Value = toml::from_str("use_kv_events = false").unwrap();
    let mut p = policy(Some(&table));
    let loads = LoadBook::new(2, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
    let req = |id| RouteRequest {
        id: RequestId(id),
        blocks: (&blocks).into(),
        input_tokens: 16,
        session: None,
        now: 0,
    };
    let first = p.decide(&req(0), &loads, &mut rng).unwrap();
    p.on_routed(&req(0), &first);
    p.on_finished(first.worker, RequestId(0));
    let again = p.decide(&req(1), &loads, &mut rng).unwrap();
    assert_eq!((again.worker, again.predicted_blocks), (first.worker, 4));
}

#[test]
fn older_releases_settings_are_refused_with_their_release() {
    for old in [
        "router_max_tree_size = 1048576",
        "router_prune_target_ratio = 0.8",
    ] {
        let table: toml::Value = toml::from_str(old).unwrap();
        let err = Dynamo::new(&PolicySetup {
            name: "dynamo",
            workers: 2,
            block_size: 4,
            kv_capacity_blocks: None,
            settings: Some(&table),
        })
        .err()
        .expect("refused");
        assert!(err.problem.contains("1.0.0") && err.problem.contains("1.6.1"), "{err:?}");
    }
    let lru_with_events: toml::Value =
        toml::from_str("router_approximate_cache_policy = \"lru\"").unwrap();
    let err = Dynamo::new(&PolicySetup {
        name: "dynamo",
        workers: 2,
        block_size: 4,
        kv_capacity_blocks: Some(8),
        settings: Some(&lru_with_events),
    })
    .err()
    .expect("lru needs use_kv_events = false");
    assert_eq!(err.key, "router.dynamo.router_approximate_cache_policy");
}

#[test]
fn lru_forgets_what_a_worker_s_capacity_pushed_out_and_ttl_does_not() {
    // Worker capacity 4 blocks. Request a (4 blocks) is routed to worker 0 and finishes; then
    // b (4 other blocks) goes to worker 0 too: under lru a's blocks are pushed out of the
    // modelled cache, under ttl (120 s) they are still believed.
    let decide_a_again = |policy: &str| {
        let text = format!("use_kv_events = false\nrouter_approximate_cache_policy = \"{policy}\"");
        let table: toml::Value = toml::from_str(&text).unwrap();
        let mut p = Dynamo::new(&PolicySetup {
            name: "dynamo",
            workers: 2,
            block_size: 4,
            kv_capacity_blocks: Some(4),
            settings: Some(&table),
        })
        .unwrap();
        let a = request(1, 0..16);
        let b = request(2, 100..116);
        busy(&mut p, &a, 0, true);
        p.on_finished(WorkerId(0), a.0);
        busy(&mut p, &b, 0, true);
        p.on_finished(WorkerId(0), b.0);
        let loads = LoadBook::new(2, LoadKind::Routed);
        let mut rng = SimRng::new(RngKind::Chacha, 1);
        p.decide(&route_req(&request(3, 0..16)), &loads, &mut rng).unwrap()
            .predicted_blocks
    };
    assert_eq!(decide_a_again("ttl"), 4);
    assert_eq!(decide_a_again("lru"), 0);
}

#[test]
fn lower_tier_blocks_earn_dynamo_s_host_and_disk_weights() {
    // A 6-block (24-token) prompt. Worker 0 holds its first 2 blocks on the device; worker 1
    // holds block 0 on the device, blocks 1-2 on host and 3-4 on disk. Both idle.
    //   worker 0: prefill 24 / 4 − 2 = 4, decode 6: cost 10.
    //   worker 1: credit 1 + 0.75 x 2 + 0.25 x 2 = 3: prefill 24 / 4 − 3 = 3, decode 6: 9.
    // With both weights 0 worker 1's credit is 1: cost 11, and worker 0 wins.
    let blocks = block_hashes(&(0..24).collect::<Vec<u32>>(), 4);
    let events = [
        KvEvent::Stored {
            worker: WorkerId(0),
            parent: None,
            blocks: blocks[..2].to_vec().into(),
        },
        KvEvent::Stored {
            worker: WorkerId(1),
            parent: None,
            blocks: blocks[..1].to_vec().into(),
        },
        KvEvent::TierStored {
            worker: WorkerId(1),
            tier: crate::protocol::kv_event::Tier::Host,
            blocks: blocks[1..3].to_vec(),
        },
        KvEvent::TierStored {
            worker: WorkerId(1),
            tier: crate::protocol::kv_event::Tier::Disk,
            blocks: blocks[3..5].to_vec(),
        },
    ];
    let req = RouteRequest {
        id: RequestId(1),
        blocks: (&blocks).into(),
        input_tokens: 24,
        session: None,
        now: 0,
    };
    let loads = LoadBook::new(2, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    for (settings, winner) in [
        ("", WorkerId(1)),
        (
            "host_cache_hit_weight = 0.0\ndisk_cache_hit_weight = 0.0",
            WorkerId(0),
        ),
    ] {
        let mut p = dynamo(settings);
        for e in &events {
            p.on_event(e);
        }
        let d = p.decide(&req, &loads, &mut rng).unwrap();
        assert_eq!(d.worker, winner, "{settings:?}: {:?}", p.costs);
    }
}

#[test]
fn the_index_of_active_blocks_gives_each_worker_s_prefix_among_its_open_requests() {
    // 130 workers (past one word of the index's sets): requests of 5 prefixes of 8 blocks with
    // tails of 0 to 3 blocks come and go on random workers; before each, every worker's active
    // prefix from the index equals a walk of the blocks its open requests name.
    use rand::{Rng, SeedableRng};
    let n = 130;
    let mut p = dynamo_on(n, "");
    let loads = LoadBook::new(n, LoadKind::Routed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut sim_rng = SimRng::new(RngKind::Chacha, 1);
    let mut open: Vec<(RequestId, u32, Vec<BlockHash>)> = Vec::new();
    for id in 0..3_000u64 {
        let prefix = rng.gen_range(0..5u32) * 1_000;
        let tail = rng.gen_range(0..4u32) * 4;
        let tokens = (prefix..prefix + 32).chain(100_000 + id as u32 * 16..100_000 + id as u32 * 16 + tail);
        let t: Vec<u32> = tokens.collect();
        let r = (RequestId(id), block_hashes(&t, 4), t.len() as u32);
        // A request cut short of its prefix shares its first blocks only.
        let r = (r.0, r.1[..rng.gen_range(1..=r.1.len())].to_vec(), r.2);
        p.decide(&route_req(&r), &loads, &mut sim_rng).unwrap();
        // The index's walk (a release run's decision past 64 workers reads its holders only,
        // so the depths are walked here rather than read from the last decision).
        let mut depths = Vec::new();
        p.active_index
            .overlaps(&r.1, &mut MatchScratch::default(), &mut depths);
        assert_eq!(depths.len(), n);
        for (w, &depth) in depths.iter().enumerate() {
            // The blocks the worker's open requests name, from the requests themselves.
            let active: HashSet<BlockHash> = (open.iter().filter(|o| o.1 as usize == w))
                .flat_map(|o| o.2.iter().copied())
                .collect();
            let walk = r.1.iter().take_while(|b| active.contains(*b)).count();
            assert_eq!(depth, walk, "worker {w}, request {id}");
        }
        let worker = rng.gen_range(0..n as u32);
        busy(&mut p, &r, worker, false);
        open.push((r.0, worker, r.1.clone()));
        if rng.gen_bool(0.45) && !open.is_empty() {
            let (done, w, _) = open.swap_remove(rng.gen_range(0..open.len()));
            p.on_finished(WorkerId(w), done);
        }
    }
    assert!(open.len() > 100, "workers held many requests at once");
}

#[test]
fn each_worker_s_counters_follow_its_active_requests() {
    // Requests sharing prefixes, with own tails of 0 to 3 blocks, come and go on 5 workers, some
    // past their first token: each worker's counters (the arrays the scan reads) always equal
    // what its open requests make them, and drop to zero once all have finished.
    use rand::{Rng, SeedableRng};
    let n = 5;
    let mut p = dynamo_on(n, "");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    // (id, worker, own tail blocks, prefill tokens still counted, named blocks)
    let mut open: Vec<(RequestId, usize, usize, u64, Vec<BlockHash>)> = Vec::new();
    for id in 0..2_000u64 {
        let prefix = rng.gen_range(0..4u32) * 1_000;
        let tail = rng.gen_range(0..4u32);
        let t: Vec<u32> = (prefix..prefix + 16)
            .chain(100_000 + id as u32 * 16..100_000 + id as u32 * 16 + tail * 4)
            .collect();
        let blocks = block_hashes(&t, 4);
        let predicted = rng.gen_range(0..=4usize);
        let w = rng.gen_range(0..n);
        let req = RouteRequest {
            id: RequestId(id),
            blocks: Blocks::with_own_tail(&blocks[..], tail as usize),
            input_tokens: t.len() as u32,
            session: None,
            now: 0,
        };
        let d = Decision {
            worker: WorkerId::at(w),
            predicted_blocks: predicted,
        };
        p.on_routed(&req, &d);
        let named = blocks[..blocks.len() - tail as usize].to_vec();
        open.push((
            RequestId(id),
            w,
            tail as usize,
            t.len() as u64 - predicted as u64 * 4,
            named,
        ));
        if rng.gen_bool(0.3) {
            let i = rng.gen_range(0..open.len());
            p.on_prefill_done(WorkerId::at(open[i].1), open[i].0);
            open[i].3 = 0;
        }
        if rng.gen_bool(0.45) {
            let (done, w, _, _, _) = open.swap_remove(rng.gen_range(0..open.len()));
            p.on_finished(WorkerId::at(w), done);
        }
        for w in 0..n {
            let mine = open.iter().filter(|o| o.1 == w);
            let tails: usize = mine.clone().map(|o| o.2).sum();
            let prefill: u64 = mine.clone().map(|o| o.3).sum();
            let c = p.loads.counters[w];
            let named: HashSet<BlockHash> = mine.clone().flat_map(|o| o.4.iter().copied()).collect();
            assert_eq!(c.held, named.len() + tails, "worker {w}, request {id}");
            assert!(named.iter().all(|b| p.active_index.holds(w, *b)));
            assert_eq!(c.prefill_tokens, prefill, "worker {w}, request {id}");
            assert_eq!(c.requests, mine.count() as u64, "worker {w}, request {id}");
        }
    }
    assert!(open.len() > 50, "workers held many requests at once");
    for (done, w, _, _, _) in std::mem::take(&mut open) {
        p.on_finished(WorkerId::at(w), done);
    }
    assert!(p.loads.counters.iter().all(|&c| c == Counters::default()));
    assert!(p.loads.shared.iter().all(HashMap::is_empty));
    assert_eq!(p.active_index.entries(), 0);
}

#[test]
fn counts_convert_to_the_same_float_as_the_unsigned_conversion() {
    let edges = [
        0,
        1,
        63,
        1 << 53,
        (1 << 53) + 1,
        (1 << 63) - 1,
        1 << 63,
        u64::MAX,
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let draws = (0..10_000).map(|_| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        x >> (x % 64)
    });
    for v in edges.into_iter().chain(draws) {
        assert_eq!(count_f64(v).to_bits(), (v as f64).to_bits(), "{v}");
    }
}

#[test]
fn the_choice_by_load_is_the_full_scan_s_choice() {
    // 130 workers (three words of the index's sets), some down, requests sharing prefixes come
    // and go in approximate mode (the decisions fill the index), under several settings: every
    // decision's least cost, its ties, the chosen worker, its overlap and the generator's state
    // after the draw are those of costing every worker. Ties are frequent (integer costs, idle
    // workers), and the decay and the request weight make the costs fractional.
    use rand::{Rng, SeedableRng};
    let n = 130;
    for settings in [
        "use_kv_events = false",
        "use_kv_events = false\nprefill_load_scale = 0.3\ndecode_active_request_weight = 0.7",
        "use_kv_events = false\noverlap_score_credit_decay = 1.5\noverlap_score_credit = 2.0",
    ] {
        let mut p = dynamo_on(n, settings);
        assert!(p.by_load.is_some());
        let mut book = LoadBook::new(n, LoadKind::Routed);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut draws = SimRng::new(RngKind::Chacha, 3);
        let mut open: Vec<(RequestId, usize)> = Vec::new();
        let mut ties_seen = 0;
        for id in 0..3_000u64 {
            if rng.gen_bool(0.02) {
                let w = rng.gen_range(0..n);
                book.set_up(WorkerId::at(w), !book.up(w) || book.up_count() == 1);
            }
            let prefix = rng.gen_range(0..6u32) * 1_000;
            let shared = rng.gen_range(0..5u32) * 4;
            let t: Vec<u32> = (prefix..prefix + shared)
                .chain(100_000 + id as u32 * 16..100_000 + id as u32 * 16 + 8)
                .collect();
            let blocks = block_hashes(&t, 4);
            let req = RouteRequest {
                id: RequestId(id),
                blocks: (&blocks).into(),
                input_tokens: t.len() as u32 + rng.gen_range(0..3),
                session: None,
                now: 0,
            };
            let terms = p.terms(&req, &book);
            let mut by_scan = draws.clone();
            p.scan(&req, &book, &terms);
            let scanned =
                lowest_random_tie(book.up_workers().map(|w| (w, p.costs[w])), &mut by_scan);
            let (worker, overlap) = p.least_by_load(&req, &book, &terms, &mut draws).unwrap();
            assert_eq!(Some(worker), scanned, "{settings}: request {id}");
            assert_eq!(overlap, p.overlaps[worker], "{settings}: request {id}");
            assert_eq!(draws.below(1 << 30), by_scan.below(1 << 30), "the same draws");
            ties_seen += usize::from(p.least.workers.len() > 1);
            let d = Decision {
                worker: WorkerId::at(worker),
                predicted_blocks: overlap,
            };
            p.on_routed(&req, &d);
            open.push((req.id, worker));
            if rng.gen_bool(0.4) {
                let i = rng.gen_range(0..open.len());
                p.on_prefill_done(WorkerId::at(open[i].1), open[i].0);
            }
            if rng.gen_bool(0.45) {
                let (done, w) = open.swap_remove(rng.gen_range(0..open.len()));
                p.on_finished(WorkerId::at(w), done);
            }
        }
        assert!(ties_seen > 100, "{settings}: {ties_seen} decisions among ties");
    }
}

#[test]
fn a_worker_without_the_prefix_is_not_costed_once_its_load_cannot_win() {
    // Four idle workers and one busy one; worker 2 holds the prompt's 3 blocks. The idle
    // workers without it cost 6 + 6 = 12 (prefill 24 / 4, decode 6 new) against worker 2's
    // 3 + 6 = 9: no load of 0 or more can bring them to 9, so the decision costs worker 2
    // alone.
    let mut p = dynamo_on(5, "use_kv_events = false");
    assert!(p.by_load.is_none(), "5 workers are scanned");
    p.by_load = Some(load_order(5, &p.settings, 4));
    let r = request(1, 0..24);
    let req = route_req(&r);
    p.index.store(2, &r.1[..3]);
    let book = LoadBook::new(5, LoadKind::Routed);
    let terms = p.terms(&req, &book);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let (worker, overlap) = p.least_by_load(&req, &book, &terms, &mut rng).unwrap();
    assert_eq!((worker, overlap), (2, 3));
    assert_eq!(p.least.cost, 9.0);
    assert_eq!(p.least.workers, vec![2]);
    assert_eq!(p.least.offers, 1, "only the holder is costed");
    // With worker 0 holding 2 of the blocks (cost 4 + 6 = 10) and worker 4 busy (its load puts
    // it at 12 + 5), the idle workers still cannot reach 9: two are costed.
    p.index.store(0, &r.1[..2]);
    busy(&mut p, &request(2, 100..120), 4, false);
    let (worker, _) = p.least_by_load(&req, &book, &terms, &mut rng).unwrap();
    assert_eq!((worker, p.least.offers), (2, 2));
    // Once worker 2 is busy too (prefill 20 tokens: 5 more, decode 5 more: 19), worker 0 wins
    // at 10; the idle workers (12) are still out of reach: the two holders are costed.
    busy(&mut p, &request(3, 200..220), 2, false);
    let (worker, _) = p.least_by_load(&req, &book, &terms, &mut rng).unwrap();
    assert_eq!(p.least.cost, 10.0);
    assert_eq!((worker, p.least.offers), (0, 2));
    // Worker 0 busy as well: now the idle workers 1 and 3 tie at 12 with nobody below them,
    // and the walk by load costs them and stops at the first busy worker (load 10: 22).
    busy(&mut p, &request(4, 300..320), 0, false);
    let (worker, _) = p.least_by_load(&req, &book, &terms, &mut rng).unwrap();
    assert_eq!(p.least.cost, 12.0);
    assert_eq!(p.least.workers, vec![1, 3]);
    assert!([1, 3].contains(&worker));
    assert_eq!(p.least.offers, 4, "the holders 0 and 2, then 1 and 3");
}
