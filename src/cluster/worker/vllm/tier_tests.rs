//! The vLLM engine over a pool with a host tier: evicted blocks go to host, a prefix found there
//! is loaded back (its step waits for the transfer) instead of recomputed. Hand-computed.

use super::tests::{config, first_admission, prefill_ns, request, run, run_from, BLOCK};
use super::{LogItem, StepScheduler};
use crate::cluster::worker::tiers::{TierSpec, TiersSetup};
use crate::hash::BlockHash;
use crate::ids::RequestId;
use crate::protocol::kv_event::Tier;

/// Qwen3-0.6B's KV bytes per token.
const QWEN3_0_6B: u64 = 114_688;

/// Four device blocks, a host tier of eight at 25 GB/s each way with 0.05 ms to the first byte.
fn tiered() -> StepScheduler<()> {
    tiered_with(8, false)
}

/// Four device blocks, a host tier of `host` blocks (25 GB/s each way, 0.05 ms to the first
/// byte), written back on eviction or through on store.
fn tiered_with(host: usize, write_through: bool) -> StepScheduler<()> {
    over_host(8192, 4, host, write_through)
}

/// A scheduler of `budget` tokens a step and `device` device blocks over a host tier of `host`
/// blocks (25 GB/s each way, 0.05 ms to the first byte), written back or through.
fn over_host(budget: usize, device: usize, host: usize, write_through: bool) -> StepScheduler<()> {
    over_host_loading(budget, device, host, write_through, 0)
}

/// [`over_host`], loading back only lower continuations of at least `min_load_tokens` tokens.
fn over_host_loading(
    budget: usize,
    device: usize,
    host: usize,
    write_through: bool,
    min_load_tokens: u64,
) -> StepScheduler<()> {
    StepScheduler::new(config(budget, Some(device))).with_tiers(Some(&TiersSetup {
        block_bytes: BLOCK_BYTES,
        tiers: vec![TierSpec {
            tier: Tier::Host,
            capacity_blocks: host,
            d2h_gbps: 25.0,
            h2d_gbps: 25.0,
            first_byte_ms: 0.05,
            write_through,
        }],
        shared_host: None,
        min_load_tokens,
        selective_hits: 0,
    }))
}

/// Bytes of one 4-token block of Qwen3-0.6B.
const BLOCK_BYTES: u64 = BLOCK as u64 * QWEN3_0_6B;

/// A (family 1, 4 blocks) runs, then B (family 2, 4 blocks), which evicts all of A from the
/// device; then C, A's prompt again, is queued. Returns the instant C arrives (B's end).
fn a_then_b_then_a_again(s: &mut StepScheduler<()>) -> u64 {
    s.enqueue(request(0, 1, 16, 1));
    let (_, ends) = run(s);
    s.enqueue(request(1, 2, 16, 1));
    let (_, ends) = run_from(s, *ends.last().unwrap());
    s.enqueue(request(2, 1, 16, 1));
    *ends.last().unwrap()
}

#[test]
fn write_through_writes_blocks_as_they_are_stored_and_evicting_moves_nothing() {
    let mut s = tiered_with(8, true);
    // A (family 1, 4 blocks) runs: its 4 blocks reach host as the device stores them.
    s.enqueue(request(0, 1, 16, 1));
    let (_, ends) = run(&mut s);
    assert_eq!(
        s.pool().tiers().unwrap().bytes().written,
        [4 * BLOCK_BYTES, 0]
    );
    // B evicts all of A from the device: no bytes for that, only B's own 4 stored blocks.
    s.enqueue(request(1, 2, 16, 1));
    let (_, ends) = run_from(&mut s, *ends.last().unwrap());
    assert_eq!(
        s.pool().tiers().unwrap().bytes().written,
        [8 * BLOCK_BYTES, 0]
    );
    // C repeats A and loads 3 blocks back from host (capped one token short), as under
    // write-back: 105,050 ns (see above). Its stored blocks are on host already: nothing is
    // written (host written through leaves them where they are; the lookup touched them).
    let now = *ends.last().unwrap();
    s.enqueue(request(2, 1, 16, 1));
    let p = s.plan(now).unwrap();
    assert_eq!(p.end, now + 105_050 + prefill_ns(4));
    let bytes = s.pool().tiers().unwrap().bytes();
    assert_eq!(
        (bytes.written, bytes.read),
        ([8 * BLOCK_BYTES, 0], [3 * BLOCK_BYTES, 0])
    );
}

#[test]
fn a_write_through_host_no_larger_than_the_device_holds_what_the_device_holds() {
    // Host of 4 blocks, as many as the device: B's blocks, written through, push A's out of
    // host as B's step pushes them off the device, so C recomputes A (write-back would have
    // kept A on host).
    let mut s = tiered_with(4, true);
    let now = a_then_b_then_a_again(&mut s);
    let p = s.plan(now).unwrap();
    assert_eq!(p.end, now + prefill_ns(16));
    let mut back = tiered_with(4, false);
    let now = a_then_b_then_a_again(&mut back);
    back.plan(now).unwrap();
    assert_eq!(
        (
            first_admission(&s, 2).host_tokens,
            first_admission(&back, 2).host_tokens
        ),
        (0, 12)
    );
}

#[test]
fn a_prefix_evicted_to_host_is_loaded_back_and_its_step_waits_for_it() {
    let mut s = tiered();
    // A (family 1, 4 blocks) runs; B (family 2, 4 blocks) evicts all of A to host.
    s.enqueue(request(0, 1, 16, 1));
    let (_, ends) = run(&mut s);
    s.enqueue(request(1, 2, 16, 1));
    let b_start = *ends.last().unwrap();
    let (_, ends) = run_from(&mut s, b_start);
    // A's 4 blocks (4 x 4 x 114,688 = 1,835,008 bytes) reach host at b_start + 0.05 ms +
    // 73,400 ns: long before C arrives.
    let now = *ends.last().unwrap();
    assert!(now > b_start + 123_400);
    // C repeats A: none of it on the device, all 4 blocks on host. The hit is capped one token
    // short (12 tokens, 3 blocks), so 3 blocks load: 1,376,256 bytes at 25 GB/s = 55,050 ns,
    // after 50,000 ns to the first byte. The step starts then and computes 4 tokens.
    s.enqueue(request(2, 1, 16, 1));
    let p = s.plan(now).unwrap();
    assert_eq!(p.end, now + 105_050 + prefill_ns(4));
    let first = first_admission(&s, 2);
    assert_eq!(
        (
            first.held_blocks,
            first.cached_tokens,
            first.host_tokens,
            first.disk_tokens
        ),
        (0, 12, 12, 0)
    );
    // The loaded blocks are stored on the device again (a device event); making room for C
    // evicts B's blocks, which go to host (a host event).
    let kv: Vec<_> = p
        .log
        .iter()
        .filter_map(|i| match i {
            LogItem::Kv(c) => Some(c),
            _ => None,
        })
        .collect();
    let stored: usize = kv.iter().flat_map(|c| &c.stored).map(|r| r.1.len()).sum();
    assert_eq!(stored, 4, "3 loaded + 1 computed");
    let to_host: usize = kv
        .iter()
        .flat_map(|c| &c.lower)
        .filter(|m| m.tier == Tier::Host)
        .map(|m| m.stored.len())
        .sum();
    assert_eq!(to_host, 4, "B's blocks offloaded");
    let bytes = s.pool().tiers().unwrap().bytes();
    assert_eq!(bytes.read, [3 * 1_835_008 / 4, 0]);
    assert_eq!(bytes.written, [2 * 1_835_008, 0]);
}

#[test]
fn a_host_continuation_shorter_than_min_load_tokens_is_recomputed() {
    // As above: C's continuation on host is 12 tokens (3 blocks of 4, capped one token short of
    // its 16). At a minimum of 12 it loads (105,050 ns, then 4 tokens computed); at 13 it is
    // recomputed whole, as without tiers: 16 tokens, nothing read, nothing cached.
    for (min, end_after, cached, read) in [
        (12, 105_050 + prefill_ns(4), 12, 3 * BLOCK_BYTES),
        (13, prefill_ns(16), 0, 0),
    ] {
        let mut s = over_host_loading(8192, 4, 8, false, min);
        let now = a_then_b_then_a_again(&mut s);
        let p = s.plan(now).unwrap();
        assert_eq!(p.end, now + end_after, "min_load_tokens {min}");
        let first = first_admission(&s, 2);
        assert_eq!((first.cached_tokens, first.host_tokens), (cached, cached));
        assert_eq!(s.pool().tiers().unwrap().bytes().read, [read, 0]);
    }
}

/// Four device blocks over a host of eight (25 GB/s, 0.05 ms) written through selectively:
/// a block at its second hit (SGLang HiCache's `write_through_selective`).
fn selective() -> StepScheduler<()> {
    StepScheduler::new(config(8192, Some(4))).with_tiers(Some(&TiersSetup {
        block_bytes: BLOCK_BYTES,
        tiers: vec![TierSpec {
            tier: Tier::Host,
            capacity_blocks: 8,
            d2h_gbps: 25.0,
            h2d_gbps: 25.0,
            first_byte_ms: 0.05,
            write_through: true,
        }],
        shared_host: None,
        min_load_tokens: 0,
        selective_hits: 2,
    }))
}

#[test]
fn write_through_selective_writes_a_block_at_its_second_hit() {
    let written = |s: &StepScheduler<()>| {
        let b = s.pool().tiers().unwrap().bytes().written;
        (b[0] / BLOCK_BYTES, b[1])
    };
    let mut s = selective();
    // A (family 1: 16 tokens, 4 blocks; 1 token out) finishes in its prefill step: one
    // insert, one hit on each block; nothing is written (write-through would write 4).
    s.enqueue(request(0, 1, 16, 1));
    let (_, ends) = run(&mut s);
    assert_eq!(written(&s), (0, 0));
    // B repeats A: 3 blocks cached (capped one token short), the 4th, A's, recomputed into the
    // same block; it finishes in that step: a second hit on all 4, which are written.
    s.enqueue(request(1, 1, 16, 1));
    let (_, ends) = run_from(&mut s, *ends.last().unwrap());
    assert_eq!(written(&s), (4, 0));
    // C (family 2: 12 tokens, 3 blocks; 2 tokens out): its prefill completes without
    // finishing, a first hit (nothing written; making room evicts A's blocks, on host already,
    // moving nothing); its decode step finishes it, a second hit: its 3 blocks are written.
    s.enqueue(request(2, 2, 12, 2));
    let p = s.plan(*ends.last().unwrap()).unwrap();
    s.apply();
    assert_eq!(written(&s), (4, 0));
    let p = s.plan(p.end).unwrap();
    s.apply();
    assert_eq!(written(&s), (7, 0));
    // D (family 3: 12 tokens; 5 out) decodes its last 4 tokens in one stretch of 4 steps, which
    // finishes it: the second hit comes with the stretch, and its 3 blocks are written.
    s.enqueue(request(3, 3, 12, 5));
    let p = s.plan(p.end).unwrap();
    s.apply();
    assert_eq!(written(&s), (7, 0));
    let p = s.plan(p.end).unwrap();
    assert_eq!(p.steps, 4, "a stretch to the finish");
    s.apply();
    assert_eq!(written(&s), (10, 0));
}

#[test]
fn without_tiers_the_same_requests_recompute() {
    let mut s = StepScheduler::new(config(8192, Some(4)));
    let now = a_then_b_then_a_again(&mut s);
    let p = s.plan(now).unwrap();
    assert_eq!(p.end, now + prefill_ns(16));
    let first = first_admission(&s, 2);
    assert_eq!((first.cached_tokens, first.host_tokens), (0, 0));
    assert!(s.pool().tiers().is_none());
}

/// Family `family`'s four blocks, as [`request`] names a 16-token prompt of it.
fn family_blocks(family: u32) -> Vec<BlockHash> {
    request(99, family, 16, 1).names().to_vec()
}

/// `device` device blocks over a host tier of `host` written through (25 GB/s each way).
fn written_through(device: usize, host: usize) -> StepScheduler<()> {
    over_host(8192, device, host, true)
}

#[test]
fn each_lookup_touches_the_requests_host_blocks_so_a_prefix_the_device_serves_stays_on_host() {
    // Eight device blocks over eight host blocks, written through. A (family 1) and B (family
    // 2) run: host holds A's 4 blocks, then B's 4, and is full. C repeats A and is served from
    // the device, storing nothing; its lookup touches A's host copies (vLLM's offloading
    // connector), so D (family 3), written through, drops B's blocks from host, not A's, the
    // least recently stored.
    let mut s = written_through(8, 8);
    let mut now = 0;
    for (id, family) in [(0, 1), (1, 2), (2, 1), (3, 3)] {
        s.enqueue(request(id, family, 16, 1));
        let (_, ends) = run_from(&mut s, now);
        now = *ends.last().unwrap();
    }
    let pool = s.pool();
    let host = pool.tiers().unwrap();
    assert_eq!(host.lookup(&family_blocks(1)), [4, 0]);
    assert_eq!(host.lookup(&family_blocks(2)), [0, 0]);
    assert_eq!(host.lookup(&family_blocks(3)), [4, 0]);
}

#[test]
fn a_store_that_writes_to_host_touches_the_requests_prefix_last_first() {
    // As above, host holds A's 4 blocks then B's 4. C extends A by 2 blocks (24 tokens of
    // family 1): served A from the device, it computes A4 and A5, which host stores, dropping
    // B0 and B1; the store then touches C's blocks A0..A5 last first (vLLM's connector after
    // `prepare_store`), so recency, least first, is B2 B3 A5 A4 A3 A2 A1 A0. D (family 3)
    // drops 4 of them: B2 B3 A5 A4, and A's first 4 blocks stay (stored in order without the
    // touch, A4 and A5 would be the most recent and A2 A3 would go).
    let mut s = written_through(8, 8);
    let mut now = 0;
    for (id, family, prompt) in [(0, 1, 16), (1, 2, 16), (2, 1, 24), (3, 3, 16)] {
        s.enqueue(request(id, family, prompt, 1));
        let (_, ends) = run_from(&mut s, now);
        now = *ends.last().unwrap();
    }
    let a = request(99, 1, 24, 1).names().to_vec();
    let pool = s.pool();
    let host = pool.tiers().unwrap();
    assert_eq!(host.lookup(&a), [4, 0]);
    assert_eq!(host.lookup(&a[4..]), [0, 0]);
    assert_eq!(host.lookup(&family_blocks(2)), [0, 0]);
}

#[test]
fn a_waiting_request_blocked_for_room_still_touches_its_host_blocks() {
    // Four device blocks over twelve host blocks, written through. A (family 1) and B (family 2)
    // leave host holding A's blocks, then B's. R (12 tokens, 4 output) runs and holds the device;
    // C repeats A and cannot be admitted beside it, yet its lookup touched A's host blocks,
    // last first (vLLM's connector looks a waiting request up, and touches, before it knows
    // whether the request fits).
    let mut s = written_through(4, 12);
    let mut now = 0;
    for (id, family) in [(0, 1), (1, 2)] {
        s.enqueue(request(id, family, 16, 1));
        let (_, ends) = run_from(&mut s, now);
        now = *ends.last().unwrap();
    }
    s.enqueue(request(2, 3, 12, 4));
    now = s.plan(now).unwrap().end;
    s.apply();
    s.enqueue(request(3, 1, 16, 1));
    s.plan(now).unwrap();
    assert!(s.running_mut(RequestId(3)).is_none(), "C waits");
    let a = family_blocks(1);
    let pool = s.pool();
    let recency = pool.tiers().unwrap().host_recency();
    assert_eq!(recency[recency.len() - 4..], [a[3], a[2], a[1], a[0]]);
    // B's blocks are now the oldest, its last first (B's store touched them last first).
    let b = family_blocks(2);
    assert_eq!(recency[..4], [b[3], b[2], b[1], b[0]]);
}

#[test]
fn a_step_writes_through_after_it_looks_its_waiting_requests_up() {
    // Six device blocks over twelve host blocks, written through, 16 tokens a step. A (family
    // 1) and B (family 2) leave host A3 A2 A1 A0 B3 B2 B1 B0 (least recent first). R (family
    // 3, 20 tokens) and C (A's prompt) arrive: R's first 16 tokens store R0..R3 (host full);
    // in the next step R's last block R4 is stored while C, blocked for room, is looked up.
    // vLLM looks C up (touching A's blocks) before it submits R's store, so R4 drops B3;
    // storing first would have dropped A3.
    let mut s = over_host(16, 6, 12, true);
    let mut now = 0;
    for (id, family) in [(0, 1), (1, 2)] {
        s.enqueue(request(id, family, 16, 1));
        let (_, ends) = run_from(&mut s, now);
        now = *ends.last().unwrap();
    }
    s.enqueue(request(2, 3, 20, 4));
    s.enqueue(request(3, 1, 16, 1));
    now = s.plan(now).unwrap().end;
    s.apply();
    s.plan(now).unwrap();
    assert!(s.running_mut(RequestId(3)).is_none(), "C waits");
    let pool = s.pool();
    let host = pool.tiers().unwrap();
    assert_eq!(host.lookup(&family_blocks(1)), [4, 0], "A stays on host");
    let b = family_blocks(2);
    assert_eq!(host.lookup(&b[3..]), [0, 0], "B3 went");
    assert_eq!(host.lookup(&b[..3]), [3, 0]);
}
