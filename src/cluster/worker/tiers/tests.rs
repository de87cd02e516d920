//! The tiers on hand-computed cases: lanes, LRU order, cascades, write-through, loads, the
//! shared pool and the connector's recency.

use super::*;

/// Qwen3-0.6B's KV bytes per token (28 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes).
const QWEN3_0_6B: u64 = 114_688;

fn b(n: u64) -> BlockHash {
    BlockHash(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
}

fn blocks(r: std::ops::Range<u64>) -> Vec<BlockHash> {
    r.map(b).collect()
}

fn spec(tier: Tier, capacity_blocks: usize) -> TierSpec {
    TierSpec {
        tier,
        capacity_blocks,
        d2h_gbps: 25.0,
        h2d_gbps: 25.0,
        first_byte_ms: 0.05,
        write_through: false,
    }
}

fn tiers(host: usize, disk: Option<usize>) -> Tiers {
    let mut t = vec![spec(Tier::Host, host)];
    t.extend(disk.map(|d| spec(Tier::Disk, d)));
    Tiers::new(&TiersSetup {
        block_bytes: 16 * QWEN3_0_6B,
        tiers: t,
        shared_host: None,
        min_load_tokens: 0,
        selective_hits: 0,
    })
}

#[test]
fn loading_32_qwen3_blocks_over_25_gbps_takes_the_hand_computed_time() {
    // 32 blocks x 16 tokens x 114,688 bytes = 58,720,256 bytes; at 25 GB/s (25 bytes/ns)
    // that is 2,348,810.24 ns, after 0.05 ms to the first byte: 2,398,810 ns.
    let mut t = tiers(64, None);
    let mut moves = Vec::new();
    t.offload(&blocks(0..32), 0, &mut moves);
    let written = 2_398_810;
    assert_eq!(t.bytes().written[0], 58_720_256);
    let now = 10_000_000; // long after the write ended
    let (done, hits) = t.load(&blocks(0..32), now);
    assert_eq!(hits, [32, 0]);
    assert_eq!(done - now, 2_398_810);
    assert_eq!(t.bytes().read[0], 58_720_256);
    // A load queued before the blocks' own write ended waits for it.
    let mut t = tiers(64, None);
    t.offload(&blocks(0..32), 0, &mut Vec::new());
    let (done, _) = t.load(&blocks(0..32), 0);
    assert_eq!(done, written + 2_398_810);
}

#[test]
fn a_lane_serves_its_transfers_first_in_first_out() {
    let mut lane = Lane::new(25.0, 0.05);
    assert_eq!(lane.submit(0, 25_000_000), 1_050_000);
    // Queued at 0.5 ms: its first byte waits for the lane (1.05 ms), not 0.55 ms.
    assert_eq!(lane.submit(500_000, 25_000_000), 2_050_000);
    // Queued after the lane is free: the first-byte time counts again.
    assert_eq!(lane.submit(3_000_000, 0), 3_050_000);
    let mut free = Lane::new(0.0, 0.0);
    assert_eq!(free.submit(7, 1 << 40), 7, "0 GB/s: no limit");
}

#[test]
fn a_lane_too_slow_for_the_clock_saturates_rather_than_wraps() {
    // 1e-300 GB/s: the transfer time is past `Nanos::MAX`; it used to wrap to a small time.
    let mut lane = Lane::new(1e-300, 0.05);
    assert_eq!(lane.submit(1_000, 4_096), Nanos::MAX);
    // The lane stays busy to the end of time: the next transfer cannot finish sooner.
    assert_eq!(lane.submit(2_000, 1), Nanos::MAX);
    // A block ready at the end of time still saturates with the first-byte time.
    let mut fast = Lane::new(32.0, 0.05);
    assert_eq!(fast.submit(Nanos::MAX - 1, 64), Nanos::MAX);
}

#[test]
fn evictions_cascade_host_to_disk_least_recently_used_first() {
    let mut t = tiers(3, Some(2));
    let mut moves = Vec::new();
    t.offload(&blocks(0..3), 0, &mut moves);
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].stored, blocks(0..3));
    // Touch block 0: block 1 is now the least recently used.
    t.load(&[b(0)], 0);
    moves.clear();
    t.offload(&[b(0), b(3)], 0, &mut moves);
    assert_eq!(
        moves,
        vec![
            TierMove {
                tier: Tier::Host,
                stored: vec![b(3)],
                removed: vec![b(1)],
            },
            TierMove {
                tier: Tier::Disk,
                stored: vec![b(1)],
                removed: vec![],
            },
        ],
        "block 0 was held: touched, not written again"
    );
    assert_eq!(t.resident(), [3, 1]);
    // A prefix continues from host to disk and stops at the first block neither holds.
    assert_eq!(t.lookup(&[b(0), b(1), b(2), b(9), b(3)]), [2, 1]);
    let (_, hits) = t.load(&[b(0), b(1), b(2)], 100_000_000);
    assert_eq!(hits, [2, 1]);
    // Host reads: block 0 earlier, then blocks 0 and 1.
    assert_eq!(t.bytes().read, [3 * 16 * QWEN3_0_6B, 16 * QWEN3_0_6B]);
}

#[test]
fn a_disk_written_through_takes_what_host_stores_once_host_has_written_it() {
    let mut t = Tiers::new(&TiersSetup {
        block_bytes: 16 * QWEN3_0_6B,
        tiers: vec![
            spec(Tier::Host, 2),
            TierSpec {
                write_through: true,
                ..spec(Tier::Disk, 4)
            },
        ],
        shared_host: None,
        min_load_tokens: 0,
        selective_hits: 0,
    });
    let mut moves = Vec::new();
    t.offload(&blocks(0..3), 0, &mut moves);
    // Host keeps blocks 1 and 2 (block 0 dropped for room, not cascaded); disk gets all
    // three host stored.
    assert_eq!(
        moves,
        vec![
            TierMove {
                tier: Tier::Host,
                stored: blocks(0..3),
                removed: vec![b(0)],
            },
            TierMove {
                tier: Tier::Disk,
                stored: blocks(0..3),
                removed: vec![],
            },
        ]
    );
    // 3 blocks x 16 tokens x 114,688 bytes = 5,505,024 bytes each way.
    assert_eq!(t.bytes().written, [5_505_024, 5_505_024]);
    assert_eq!(t.resident(), [2, 3]);
    // Host's write: 0.05 ms to the first byte + 5,505,024 / 25 = 220,201 ns: ends at
    // 270,201. Disk's is queued then: 270,201 + 50,000 + 220,201 = 540,402.
    // Block 0 is on disk only; read back at 0, it waits for that write, then 0.05 ms and
    // 1,835,008 / 25 = 73,400 ns: 540,402 + 50,000 + 73,400 = 663,802.
    assert_eq!(t.lookup(&blocks(0..3)), [2, 1]);
    assert_eq!(t.load(&[b(0)], 0), (663_802, [0, 1]));
    // Host drops block 1 for block 3: disk already holds 1, and takes only 3.
    moves.clear();
    t.offload(&[b(3)], 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(1)]);
    assert_eq!(moves[1].stored, vec![b(3)]);
    assert_eq!(t.resident(), [2, 4]);
    // Written back (the default), the same first offload gives disk only what host dropped.
    let mut back = tiers(2, Some(4));
    back.offload(&blocks(0..3), 0, &mut Vec::new());
    assert_eq!(back.bytes().written, [5_505_024, 16 * QWEN3_0_6B]);
}

#[test]
fn a_tier_of_no_capacity_holds_nothing_and_passes_nothing_on() {
    let mut t = tiers(0, Some(4));
    let mut moves = Vec::new();
    t.offload(&blocks(0..3), 0, &mut moves);
    assert!(moves.is_empty());
    assert_eq!(t.resident(), [0, 0]);
    assert_eq!(t.lookup(&blocks(0..3)), [0, 0]);
    assert_eq!(t.bytes(), TierBytes::default());
}

#[test]
fn an_offload_larger_than_the_tier_keeps_its_last_blocks() {
    let mut t = tiers(2, None);
    let mut moves = Vec::new();
    t.offload(&blocks(0..4), 0, &mut moves);
    assert_eq!(moves[0].stored, blocks(0..4));
    assert_eq!(moves[0].removed, blocks(0..2));
    assert_eq!(t.lookup(&blocks(2..4)), [2, 0]);
    t.clear();
    assert_eq!(t.resident(), [0, 0]);
}

/// Tiers of one worker over `pool`: host at `d2h` / `h2d` GB/s with 0.05 ms to the first
/// byte.
fn sharing(pool: &SharedHost, d2h: f64, h2d: f64) -> Tiers {
    Tiers::new(&TiersSetup {
        block_bytes: 16 * QWEN3_0_6B,
        tiers: vec![TierSpec {
            d2h_gbps: d2h,
            h2d_gbps: h2d,
            ..spec(Tier::Host, 0)
        }],
        shared_host: Some(pool.clone()),
        min_load_tokens: 0,
        selective_hits: 0,
    })
}

#[test]
fn a_block_worker_a_offloads_to_the_shared_pool_worker_b_loads_over_its_own_link() {
    let pool = SharedHost::new(4);
    for w in [0, 1] {
        assert!(pool.borrow_mut().subscribe(w).is_empty());
    }
    // A writes at 25 GB/s, B reads at 10 GB/s: each its own link.
    let (mut wa, mut wb) = (sharing(&pool, 25.0, 25.0), sharing(&pool, 25.0, 10.0));
    let mut moves = Vec::new();
    wa.offload(&blocks(0..4), 0, &mut moves);
    // 4 blocks x 16 tokens x 114,688 bytes = 7,340,032 bytes; over A's 25 GB/s after
    // 0.05 ms: 50,000 + 293,601 = 343,601 ns until they are on host.
    let written = 343_601;
    assert_eq!(wa.bytes().written, [7_340_032, 0]);
    // B finds them in the pool and loads them over its 10 GB/s: 7,340,032 / 10 = 734,003 ns
    // after 0.05 ms.
    assert_eq!(wb.lookup(&blocks(0..4)), [4, 0]);
    let now = 1_000_000;
    let (done, hits) = wb.load(&blocks(0..4), now);
    assert_eq!((done - now, hits), (50_000 + 734_003, [4, 0]));
    assert_eq!(
        (wb.bytes().read, wb.bytes().written),
        ([7_340_032, 0], [0, 0])
    );
    assert_eq!(
        wa.bytes().read,
        [0, 0],
        "bytes count on the worker that moved them"
    );
    // Read before A's write has ended, B waits for it.
    let mut c = sharing(&pool, 25.0, 10.0);
    assert_eq!(c.load(&blocks(0..4), 0).0, written + 50_000 + 734_003);
    // Both workers report A's store: A as it publishes, B woken to (A is not).
    let stored = vec![TierMove {
        tier: Tier::Host,
        stored: blocks(0..4),
        removed: vec![],
    }];
    assert_eq!(pool.borrow_mut().drain(0), stored);
    assert_eq!(pool.borrow_mut().to_wake(0), vec![1]);
    assert_eq!(
        pool.borrow_mut().to_wake(0),
        Vec::<usize>::new(),
        "woken once"
    );
    assert_eq!(pool.borrow_mut().drain(1), stored);
    assert_eq!(pool.borrow().log.len(), 0, "drained by all: trimmed");
    // A restarts: its device is gone, the cluster's pool is not.
    wa.clear();
    assert_eq!(wb.resident(), [4, 0]);
}

#[test]
fn the_shared_pool_has_one_capacity_and_one_lru_for_every_worker() {
    let pool = SharedHost::new(4);
    assert!(pool.borrow_mut().subscribe(1).is_empty());
    let (mut wa, mut wb) = (sharing(&pool, 25.0, 25.0), sharing(&pool, 25.0, 25.0));
    wa.offload(&blocks(0..3), 0, &mut Vec::new());
    // B touches block 0 by loading it: block 1 is now the pool's least recently used.
    wb.load(&[b(0)], 0);
    let mut moves = Vec::new();
    wb.offload(&blocks(3..5), 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(1)]);
    assert_eq!(wa.lookup(&[b(0)]), [1, 0]);
    assert_eq!(wa.lookup(&[b(1)]), [0, 0]);
    // A worker subscribing later starts from every block held, least recently used first.
    assert_eq!(pool.borrow_mut().subscribe(0), vec![b(2), b(0), b(3), b(4)]);
    // Worker 1 reports both workers' changes in the pool's order; worker 0 none before it
    // subscribed.
    let log = pool.borrow_mut().drain(1);
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].removed, vec![b(1)]);
    assert!(pool.borrow_mut().drain(0).is_empty());
    pool.borrow_mut().unsubscribe(1);
    wb.offload(&blocks(5..6), 0, &mut Vec::new());
    assert_eq!(pool.borrow_mut().drain(0).len(), 1);
    assert!(
        pool.borrow_mut().drain(1).is_empty(),
        "down: reports nothing"
    );
}

/// A host tier of `host` blocks written through from the device.
fn written_through(host: usize) -> Tiers {
    Tiers::new(&TiersSetup {
        block_bytes: 16 * QWEN3_0_6B,
        tiers: vec![TierSpec {
            write_through: true,
            ..spec(Tier::Host, host)
        }],
        shared_host: None,
        min_load_tokens: 0,
        selective_hits: 0,
    })
}

#[test]
fn touching_a_prefix_walks_it_last_first_so_its_first_block_ends_most_recent() {
    // Host holds 0, 1, 2 (stored in that order). Touching [0, 1, 2, 9] (9 not held) walks
    // 9, 2, 1, 0: recency, least first, is 2, 1, 0. Storing 3 then 4 drops 2, then 1.
    let mut t = written_through(3);
    t.offload(&blocks(0..3), 0, &mut Vec::new());
    t.touch_host(&[b(0), b(1), b(2), b(9)]);
    let mut moves = Vec::new();
    t.offload(&blocks(3..5), 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(2), b(1)]);
    assert_eq!(t.lookup(&[b(0)]), [1, 0]);
    // Written back, the touch is not the connector's: nothing moves.
    let mut back = tiers(3, None);
    back.offload(&blocks(0..3), 0, &mut Vec::new());
    back.touch_host(&[b(0), b(1), b(2)]);
    let mut moves = Vec::new();
    back.offload(&blocks(3..4), 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(0)]);
}

#[test]
fn host_written_through_stores_only_what_it_lacks_and_leaves_the_rest_where_it_is() {
    // Host holds 0, 1, 2. Writing [0, 3] through stores 3 alone, dropping the least
    // recently used, 0, although 0 was just written again (vLLM's prepare_store filters
    // held blocks without touching them); written back, 0 would be touched and 1 dropped.
    let mut t = written_through(3);
    t.offload(&blocks(0..3), 0, &mut Vec::new());
    let mut moves = Vec::new();
    t.offload(&[b(0), b(3)], 0, &mut moves);
    assert_eq!(
        (moves[0].stored.clone(), moves[0].removed.clone()),
        (vec![b(3)], vec![b(0)])
    );
    let mut back = tiers(3, None);
    back.offload(&blocks(0..3), 0, &mut Vec::new());
    let mut moves = Vec::new();
    back.offload(&[b(0), b(3)], 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(1)]);
}

#[test]
fn a_worker_touching_the_shared_pool_touches_it_for_every_worker() {
    // One pool of 3 blocks, written through by both workers. A writes 0, 1, 2; B's lookup
    // touches 0, so A's next write drops 1, the least recently used for both.
    let pool = SharedHost::new(3);
    let through = || {
        Tiers::new(&TiersSetup {
            block_bytes: 16 * QWEN3_0_6B,
            tiers: vec![TierSpec {
                write_through: true,
                ..spec(Tier::Host, 0)
            }],
            shared_host: Some(pool.clone()),
            min_load_tokens: 0,
            selective_hits: 0,
        })
    };
    let (mut wa, mut wb) = (through(), through());
    wa.offload(&blocks(0..3), 0, &mut Vec::new());
    wb.touch_host(&[b(0)]);
    assert_eq!(wa.host_recency(), vec![b(1), b(2), b(0)]);
    let mut moves = Vec::new();
    wa.offload(&blocks(3..4), 0, &mut moves);
    assert_eq!(moves[0].removed, vec![b(1)]);
}
