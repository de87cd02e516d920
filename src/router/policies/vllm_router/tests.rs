//! The production stack's three policies on hand-computed decisions: the session ring,
//! prefix-aware matching and its QPS fallback, the load-aware score.

use super::*;
use crate::hash::block_hashes;
use crate::ids::RequestId;
use crate::rng::RngKind;
use crate::router::loads::LoadKind;

fn req<'a>(
    id: u64,
    blocks: &'a [crate::hash::BlockHash],
    session: Option<u64>,
) -> RouteRequest<'a> {
    RouteRequest {
        id: RequestId(id),
        blocks: blocks.into(),
        input_tokens: blocks.len() as u32 * 4,
        session,
        now: id * 1_000_000_000,
    }
}

fn setup(name: &str) -> PolicySetup<'_> {
    PolicySetup {
        name,
        workers: 3,
        block_size: 4,
        kv_capacity_blocks: None,
        settings: None,
    }
}

#[test]
fn sessions_stick_to_their_worker_and_move_only_when_it_is_down() {
    let mut p = build_session(&setup("vllm-session")).unwrap();
    let mut loads = LoadBook::new(3, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let home: Vec<usize> = (0..50)
        .map(|s| {
            p.decide(&req(0, &[], Some(s)), &loads, &mut rng).unwrap()
                .worker
                .index()
        })
        .collect();
    assert!(
        (0..3).all(|w| home.contains(&w)),
        "the ring spreads sessions"
    );
    loads.set_up(WorkerId(1), false);
    for (s, &h) in home.iter().enumerate() {
        let w = p
            .decide(&req(0, &[], Some(s as u64)), &loads, &mut rng).unwrap()
            .worker
            .index();
        if h != 1 {
            assert_eq!(w, h, "session {s} keeps its worker");
        } else {
            assert_ne!(w, 1);
        }
    }
    // Without a session: the first worker never used, then the fewest in the window.
    let mut q = build_session(&setup("vllm-session")).unwrap();
    let loads = LoadBook::new(3, LoadKind::Routed);
    let mut picks = Vec::new();
    for id in 0..4 {
        let r = req(id, &[], None);
        let d = q.decide(&r, &loads, &mut rng).unwrap();
        q.on_routed(&r, &d);
        picks.push(d.worker.index());
    }
    assert_eq!(picks, vec![0, 1, 2, 0]);
}

#[test]
fn a_session_lands_on_the_worker_computed_by_hand_from_the_ring() {
    // Two virtual nodes per worker: the points are xxh3 of "w-v". Sorted, the ring is
    //   0x3501f27618c8e7b8 (0-1) -> worker 0
    //   0x3858e9c36c51ef94 (1-0) -> worker 1
    //   0x4714d30006c5e576 (2-0) -> worker 2
    //   0x8ee6812c4a859cbb (2-1) -> worker 2
    //   0xba606171408fc5ee (1-1) -> worker 1
    //   0xe431df5f3015278b (0-0) -> worker 0
    // Session 42 hashes ("session-42") to 0xa5f911d74983374e: the first point at or after
    // it is 1-1, worker 1; with worker 1 down the next, 0-0, worker 0. Session 7 hashes to
    // 0xf17e30d1739d6774, past the last point: it wraps to the first, 0-1, worker 0.
    let points = [
        ("0-0", 0xe431df5f3015278b_u64),
        ("0-1", 0x3501f27618c8e7b8),
        ("1-0", 0x3858e9c36c51ef94),
        ("1-1", 0xba606171408fc5ee),
        ("2-0", 0x4714d30006c5e576),
        ("2-1", 0x8ee6812c4a859cbb),
        ("session-42", 0xa5f911d74983374e),
        ("session-7", 0xf17e30d1739d6774),
    ];
    for (key, h) in points {
        assert_eq!(point(key), h, "{key}");
    }
    let table: toml::Value = toml::from_str("virtual_nodes = 2").unwrap();
    let mut p = build_session(&PolicySetup {
        settings: Some(&table),
        ..setup("vllm-session")
    })
    .unwrap();
    let mut loads = LoadBook::new(3, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let mut home = |s, loads: &LoadBook| {
        p.decide(&req(0, &[], Some(s)), loads, &mut rng).unwrap()
            .worker
            .index()
    };
    assert_eq!(home(42, &loads), 1);
    assert_eq!(home(7, &loads), 0);
    loads.set_up(WorkerId(1), false);
    assert_eq!(home(42, &loads), 0);
}

#[test]
fn prefix_aware_decisions_computed_by_hand() {
    // Block size 4. Prompt A (4 blocks) was routed to worker 2, prompt B (A's first 2
    // blocks, then its own) to worker 1. C shares A's first 3 blocks: worker 2 matches 3,
    // worker 1 matches 2, worker 0 nothing: worker 2, no draw. D shares A's first 2 blocks
    // only: workers 1 and 2 tie at 2, a seeded draw between them, never worker 0.
    // With prefix_min_match_tokens = 16, C's 12 matched tokens are too few: the QPS
    // fallback takes the first worker never sent a request, worker 0, which holds nothing.
    let a = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
    let mut b_tokens: Vec<u32> = (0..8).collect();
    b_tokens.extend(500..508);
    let b = block_hashes(&b_tokens, 4);
    let mut c_tokens: Vec<u32> = (0..12).collect();
    c_tokens.extend(600..604);
    let c = block_hashes(&c_tokens, 4);
    let mut d_tokens: Vec<u32> = (0..8).collect();
    d_tokens.extend(700..708);
    let d = block_hashes(&d_tokens, 4);
    let warm = |p: &mut Box<dyn RoutingPolicy>| {
        for (id, blocks, w) in [(0, &a, 2), (1, &b, 1)] {
            let decision = Decision {
                worker: WorkerId(w),
                predicted_blocks: 0,
            };
            p.on_routed(&req(id, blocks, None), &decision);
        }
    };
    let loads = LoadBook::new(3, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 5);
    let mut p = build_prefix_aware(&setup("vllm-prefix-aware")).unwrap();
    warm(&mut p);
    let pick = p.decide(&req(2, &c, None), &loads, &mut rng).unwrap();
    assert_eq!((pick.worker, pick.predicted_blocks), (WorkerId(2), 3));
    let drawn: std::collections::BTreeSet<(usize, usize)> = (0..40)
        .map(|_| {
            let pick = p.decide(&req(3, &d, None), &loads, &mut rng).unwrap();
            (pick.worker.index(), pick.predicted_blocks)
        })
        .collect();
    assert_eq!(drawn, [(1, 2), (2, 2)].into_iter().collect());
    let table: toml::Value = toml::from_str("prefix_min_match_tokens = 16").unwrap();
    let mut strict = build_prefix_aware(&PolicySetup {
        settings: Some(&table),
        ..setup("vllm-prefix-aware")
    })
    .unwrap();
    warm(&mut strict);
    let pick = strict.decide(&req(2, &c, None), &loads, &mut rng).unwrap();
    assert_eq!((pick.worker, pick.predicted_blocks), (WorkerId(0), 0));
}

#[test]
fn prefix_aware_follows_the_longest_routed_prefix_and_draws_among_equals() {
    let mut p = build_prefix_aware(&setup("vllm-prefix-aware")).unwrap();
    let loads = LoadBook::new(3, LoadKind::Routed);
    let mut rng = SimRng::new(RngKind::Chacha, 5);
    let a = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
    let first = req(0, &a, None);
    let d = p.decide(&first, &loads, &mut rng).unwrap();
    p.on_routed(&first, &d);
    for id in 1..10 {
        let again = p.decide(&req(id, &a, None), &loads, &mut rng).unwrap();
        assert_eq!((again.worker, again.predicted_blocks), (d.worker, 4));
    }
    // Nothing in common: every worker is a candidate, drawn at random.
    let b = block_hashes(&(100..116).collect::<Vec<u32>>(), 4);
    let drawn: std::collections::BTreeSet<usize> = (0..30)
        .map(|id| {
            p.decide(&req(id, &b, None), &loads, &mut rng).unwrap()
                .worker
                .index()
        })
        .collect();
    assert_eq!(drawn.len(), 3);
}

#[test]
fn loadaware_trades_the_cached_share_against_relative_load_by_hand() {
    // A 4-block prompt (16 tokens). Worker 0 holds all of it, worker 1 half. In flight:
    // 4, 1, 1 (mean 2). Scores: w0 = 1 − (4 − 2)/2 = 0; w1 = 0.5 − (1 − 2)/2 = 1.0;
    // w2 = 0 + 0.5 = 0.5. Worker 1 wins.
    let mut p = build_loadaware(&setup("vllm-loadaware")).unwrap();
    let blocks = block_hashes(&(0..16).collect::<Vec<u32>>(), 4);
    p.on_event(&KvEvent::Stored {
        worker: WorkerId(0),
        parent: None,
        blocks: blocks.clone().into(),
    });
    p.on_event(&KvEvent::Stored {
        worker: WorkerId(1),
        parent: None,
        blocks: blocks[..2].to_vec().into(),
    });
    let mut loads = LoadBook::new(3, LoadKind::Routed);
    for (i, w) in [0, 0, 0, 0, 1, 2].into_iter().enumerate() {
        loads.routed_to(RequestId(100 + i as u64), WorkerId(w), 1);
    }
    let mut rng = SimRng::new(RngKind::Chacha, 1);
    let d = p.decide(&req(0, &blocks, None), &loads, &mut rng).unwrap();
    assert_eq!((d.worker, d.predicted_blocks), (WorkerId(1), 2));
}
