//! SGLang's scheduler on hand-computed cases: `lpm`'s order with in-batch deprioritization,
//! admission against the output reserve and `schedule_conservativeness`, prefill batches that
//! leave decoding requests waiting, chunks, and the retraction victim and ratio.

use super::{
    ratio_after_retraction, reserved_output, retraction_victim, SchedulePolicy, SglangRules,
};
use crate::cluster::worker::engine::EngineSetup;
use crate::cluster::worker::vllm::tests::{
    first_admission, request, run, run_from, two_turns, BLOCK,
};
use crate::cluster::worker::vllm::StepScheduler;
use crate::scenario::Timing;

fn rules() -> SglangRules {
    SglangRules {
        schedule_policy: SchedulePolicy::Fcfs,
        max_running_requests: Some(256),
        chunked_prefill_size: Some(8192),
        max_prefill_tokens: 16384,
        schedule_conservativeness: 1.0,
        enable_mixed_chunk: false,
        charge_chunk: false,
        recheck_locked_prefix: true,
    }
}

/// An SGLang engine over `capacity` blocks of [`BLOCK`] tokens, built as a worker builds it.
fn engine(r: SglangRules, capacity: Option<usize>) -> StepScheduler<()> {
    let setup = EngineSetup {
        block_size: BLOCK,
        kv_capacity: capacity,
        prefill_only: false,
        attribute_misses: false,
        list_own_tails: false,
        timing: crate::cluster::hardware::polynomial(&Timing::default()),
        max_model_len: None,
        record_features: false,
        tiers: None,
        itl: Default::default(),
    };
    StepScheduler::new(r.scheduler_config(&setup))
}

fn waiting_ids(s: &StepScheduler<()>) -> Vec<u64> {
    s.waiting.iter().map(|q| q.id().0).collect()
}

#[test]
fn the_arithmetic() {
    // Running requests with 10 and 5,000 output tokens left, ratio 0.5: 5 + 4,096 x 0.5.
    assert_eq!(reserved_output([10, 5000].into_iter(), 0.5), 2053.0);
    // (generated, prompt): the fewest generated, then the longest prompt, then the latest.
    assert_eq!(retraction_victim(&[(3, 8), (2, 4), (5, 1)]), Some(1));
    assert_eq!(retraction_victim(&[(2, 4), (2, 8), (2, 8)]), Some(2));
    // (generated, max new): (10 + 30 + 2 x 20) / (100 + 50 + 1).
    assert_eq!(ratio_after_retraction(&[(10, 100), (30, 50)]), 80.0 / 151.0);
    assert_eq!(ratio_after_retraction(&[(90, 100)]), 1.0);
    let r = rules();
    assert_eq!(r.init_new_token_ratio(), 0.7);
    assert!((r.min_new_token_ratio() - 0.098).abs() < 1e-12);
    assert!((r.decayed(0.7) - (0.7 - 0.602 / 600.0)).abs() < 1e-12);
    let c2 = SglangRules {
        schedule_conservativeness: 2.0,
        ..r
    };
    assert_eq!(c2.init_new_token_ratio(), 1.0, "at most 1");
}

#[test]
fn lpm_takes_the_longest_cached_prefix_first_and_defers_in_batch_duplicates() {
    // A (family 1, 16 tokens) runs first and leaves its 4 blocks cached. Then the queue is
    // B (family 2, 16 tokens), D and E (family 3, 40 tokens each), C (family 1, 20 tokens).
    // Cached prefixes: C 16 tokens (A's blocks), the others 0. In-batch: D's 40 tokens go into
    // the waiting tree; E matches all 40 (>= 32) there and is deprioritized; B matches nothing.
    // lpm: C, B, D, E (stable among equals); fcfs: B, D, E, C. One running request at a time,
    // so the first admitted shows the order.
    for (policy, order) in [
        (SchedulePolicy::Lpm, vec![1, 3, 4]),
        (SchedulePolicy::Fcfs, vec![3, 4, 2]),
    ] {
        let mut s = engine(
            SglangRules {
                schedule_policy: policy,
                max_running_requests: Some(1),
                ..rules()
            },
            Some(100),
        );
        s.enqueue(request(0, 1, 16, 2));
        run(&mut s);
        assert_eq!(s.pool().named(), 4, "A's prompt stays cached");
        s.enqueue(request(1, 2, 16, 2));
        s.enqueue(request(3, 3, 40, 2));
        s.enqueue(request(4, 3, 40, 2));
        s.enqueue(request(2, 1, 20, 2));
        let p = s.plan(0).unwrap();
        let admitted = if policy == SchedulePolicy::Lpm { 2 } else { 1 };
        assert!(
            s.running_seq(crate::ids::RequestId(admitted)).is_some(),
            "{policy:?} admits {admitted} first"
        );
        assert_eq!(waiting_ids(&s), order, "{policy:?}");
        if policy == SchedulePolicy::Lpm {
            // C computes only its last 4 tokens: its cached 16 (capped one token short: 16).
            assert_eq!(p.prefill_tokens, 4);
        }
        s.apply();
    }
}

#[test]
fn admission_reserves_running_output_by_the_ratio_and_conservativeness() {
    // 10 blocks of 4: 40 tokens. A: prompt 8, output 20; B: prompt 8, output 8.
    // Pass 1: rem_total = 40; A needs 8 + 20 = 28 < 40 and is admitted (rem_total 12); B needs
    // 16 >= 12: only A is prefilled.
    // Pass 2: A decodes with 19 tokens left; A holds 2 blocks, 8 are free: 32 tokens.
    // - conservativeness 1: ratio 0.7, rem_total = 32 - 19 x 0.7 = 18.7 > 16: B is admitted,
    //   and the pass is a prefill of B alone (A waits it out: no decode token);
    // - conservativeness 2: ratio 1, rem_total = 32 - 19 = 13 <= 16: B waits, and the pass
    //   decodes A, decaying the ratio by (1 - 0.14) / 600.
    for (conservativeness, admitted) in [(1.0, true), (2.0, false)] {
        let mut s = engine(
            SglangRules {
                schedule_conservativeness: conservativeness,
                ..rules()
            },
            Some(10),
        );
        s.enqueue(request(0, 1, 8, 20));
        s.enqueue(request(1, 2, 8, 8));
        let p1 = s.plan(0).unwrap();
        assert_eq!((p1.prefill_tokens, s.running(), s.waiting()), (8, 1, 1));
        s.apply();
        let p2 = s.plan(p1.end).unwrap();
        if admitted {
            assert_eq!((p2.prefill_tokens, p2.decode_tokens), (8, 0));
            assert_eq!((s.running(), s.waiting()), (2, 0));
            assert_eq!(s.new_token_ratio(), 0.7, "a prefill pass leaves the ratio");
        } else {
            assert_eq!((p2.prefill_tokens, p2.decode_tokens), (0, 1));
            assert_eq!((s.running(), s.waiting()), (1, 1));
            assert!((s.new_token_ratio() - (1.0 - 0.86 / 600.0)).abs() < 1e-12);
        }
        s.apply();
    }
}

#[test]
fn a_long_prompt_is_prefilled_in_pages_of_the_chunk_size_and_others_join_its_last_chunk() {
    // chunked_prefill_size 8: A's 20 tokens go in chunks of 8, 8 and 4. B (4 tokens) waits
    // while A's chunks spend the budget, then joins A's last chunk (8 - 4 = 4 tokens left).
    let mut s = engine(
        SglangRules {
            chunked_prefill_size: Some(8),
            ..rules()
        },
        Some(100),
    );
    s.enqueue(request(0, 1, 20, 2));
    s.enqueue(request(1, 2, 4, 2));
    let mut now = 0;
    let mut chunks = Vec::new();
    for _ in 0..3 {
        let p = s.plan(now).unwrap();
        chunks.push((p.prefill_tokens, p.batch));
        now = p.end;
        s.apply();
    }
    assert_eq!(chunks, vec![(8, 1), (8, 1), (8, 2)]);
}

#[test]
fn decode_retracts_the_fewest_generated_then_the_longest_prompt() {
    // 17 blocks of 4 (68 tokens), conservativeness 0.1 (ratio 0.07). A: prompt 4, output 60
    // (4 + 60 = 64 < 68: admitted alone); B: prompt 8, output 40, admitted in pass 2 (68 - 4
    // held = 64 free, less 59 x 0.07 = 4.13 reserved for A: 48 < 59.87) while A waits. Both
    // have one token then, and decode together: before decode pass j they hold
    // ceil((3 + j) / 4) + ceil((7 + j) / 4) blocks and both cross into a new block when
    // j = 1 mod 4. At j = 29 they hold 8 + 9 = 17: no block is free for the 2 they need.
    // Both have generated 29 tokens: the tie goes to the longer prompt, B, which goes back to
    // the waiting queue. The ratio becomes (29 + 20) / (60 + 1) over A alone.
    let mut s = engine(
        SglangRules {
            schedule_conservativeness: 0.1,
            ..rules()
        },
        Some(17),
    );
    s.enqueue(request(0, 1, 4, 60));
    s.enqueue(request(1, 2, 8, 40));
    let mut now = 0;
    while s.stats().preemptions == 0 {
        let p = s.plan(now).expect("work left");
        now = p.end;
        if s.stats().preemptions == 1 {
            assert_eq!(waiting_ids(&s), vec![1]);
            assert_eq!(
                s.running_seq(crate::ids::RequestId(0)).unwrap().generated(),
                29
            );
            assert_eq!(s.new_token_ratio(), 49.0 / 61.0);
            assert_eq!((p.decode_tokens, p.prefill_tokens), (1, 0));
        }
        s.apply();
    }
    // B is recomputed later and both finish.
    let (done, _) = run_from(&mut s, now);
    assert_eq!(done.len(), 2);
    assert_eq!(s.pool().active(), 0);
}

#[test]
fn mixed_chunks_decode_running_requests_in_the_prefill_pass() {
    // As in the conservativeness case at 1.0: pass 2 prefills B (8 tokens). Mixed, A decodes
    // its token in the same forward; the chunk budget (8192) leaves it one token.
    let mut s = engine(
        SglangRules {
            enable_mixed_chunk: true,
            ..rules()
        },
        Some(10),
    );
    s.enqueue(request(0, 1, 8, 20));
    s.enqueue(request(1, 2, 8, 8));
    let p1 = s.plan(0).unwrap();
    s.apply();
    let p2 = s.plan(p1.end).unwrap();
    assert_eq!((p2.prefill_tokens, p2.decode_tokens, p2.batch), (8, 1, 2));
    assert_eq!(s.new_token_ratio(), 0.7, "no decay in a mixed pass");
    let out = s.apply();
    assert_eq!(out.first_tokens, vec![crate::ids::RequestId(1)]);
    assert_eq!(
        s.running_seq(crate::ids::RequestId(0)).unwrap().generated(),
        2
    );
}

#[test]
fn a_prefix_two_requests_of_one_prefill_batch_share_is_computed_by_each() {
    // A and B (family 1, 16 tokens each: 4 blocks of 4) arrive together and form one prefill
    // batch. SGLang matches both against the tree as it stood before the batch (empty) and
    // inserts A's pages only after the forward pass: B computes its 16 tokens too, 32 in all
    // (vLLM v1 would let B reuse A's blocks: 16 + 4). C, the same prompt in the next pass,
    // finds the 4 blocks cached and computes its last 4 tokens (capped one token short).
    let mut s = engine(rules(), Some(100));
    s.enqueue(request(0, 1, 16, 2));
    s.enqueue(request(1, 1, 16, 2));
    let p = s.plan(0).unwrap();
    assert_eq!((p.prefill_tokens, s.running()), (32, 2));
    let b = first_admission(&s, 1);
    assert_eq!(
        b.cached_tokens, 0,
        "B reuses nothing A brings in the same batch"
    );
    assert_eq!(s.pool().named(), 4, "the blocks are held once");
    s.apply();
    s.enqueue(request(2, 1, 16, 2));
    let p = s.plan(p.end).unwrap();
    assert_eq!(p.prefill_tokens, 4, "the next pass reuses them");
}

#[test]
fn a_prefix_loaded_back_in_a_batch_is_shared_by_the_batch_not_loaded_twice() {
    // 12 device blocks of 4 tokens over a host of 8, written back. A (family 1, 16 tokens: 4
    // blocks) runs; C (family 2, 40 tokens: 10 blocks) takes 8 free blocks and evicts A's last
    // 2 to host. D and E (family 1 again) then form one batch: D finds 2 blocks on the device,
    // loads its 3rd back (its prefix capped one token short) and computes 4 tokens; SGLang loads
    // a host prefix back as it admits D, so E matches D's device copy (3 blocks) and computes its
    // last 4 tokens too. Host is read for 1 block, not 2 (E loading it again), and the batch
    // computes 8 tokens.
    use crate::cluster::worker::tiers::{TierSpec, TiersSetup};
    use crate::protocol::kv_event::Tier;
    let block_bytes = BLOCK as u64 * 114_688;
    let mut s = engine(rules(), Some(12)).with_tiers(Some(&TiersSetup {
        block_bytes,
        tiers: vec![TierSpec {
            tier: Tier::Host,
            capacity_blocks: 8,
            d2h_gbps: 25.0,
            h2d_gbps: 25.0,
            first_byte_ms: 0.0,
            write_through: false,
        }],
        shared_host: None,
        min_load_tokens: 0,
        selective_hits: 0,
    }));
    s.enqueue(request(0, 1, 16, 1));
    let (_, ends) = run(&mut s);
    s.enqueue(request(1, 2, 40, 1));
    let (_, ends) = run_from(&mut s, *ends.last().unwrap());
    assert_eq!(
        s.pool().tiers().unwrap().bytes().written,
        [2 * block_bytes, 0]
    );
    s.enqueue(request(2, 1, 16, 2));
    s.enqueue(request(3, 1, 16, 2));
    let p = s.plan(*ends.last().unwrap()).unwrap();
    assert_eq!((p.prefill_tokens, s.running()), (8, 2));
    assert_eq!(s.pool().tiers().unwrap().bytes().read, [block_bytes, 0]);
}

#[test]
fn max_prefill_tokens_charges_the_whole_prompt_or_the_chunk() {
    // Chunks of 16 tokens, max_prefill_tokens 24, blocks of 4. A (8 tokens) opens the pass:
    // 16 tokens of chunk and 16 of max_prefill_tokens are left. B (40 tokens) is next:
    // - SGLang's check (`add_one_req`): its whole prompt, 40 >= 16, closes the pass: 8 tokens;
    // - Dynamo's simulator's: the chunk it would take, 8 tokens (the chunk's 16 - 8, in pages),
    //   is within 16: B's first chunk joins, 16 tokens.
    for (charge_chunk, tokens) in [(false, 8), (true, 16)] {
        let mut s = engine(
            SglangRules {
                chunked_prefill_size: Some(16),
                max_prefill_tokens: 24,
                charge_chunk,
                ..rules()
            },
            Some(100),
        );
        s.enqueue(request(0, 1, 8, 2));
        s.enqueue(request(1, 2, 40, 2));
        let p = s.plan(0).unwrap();
        assert_eq!(p.prefill_tokens, tokens, "charge_chunk {charge_chunk}");
    }
}

/// Runs `first` (turn 1 of [`two_turns`]) to its end beside `others`, then admits turn 2 and
/// returns the blocks turn 1 left cached of its answer and what turn 2 found cached (blocks,
/// tokens).
fn answer_kept(
    r: SglangRules,
    others: Vec<crate::cluster::worker::seq::Seq<()>>,
) -> (Vec<bool>, (usize, u64)) {
    use crate::cluster::worker::seq::Seq;
    use std::sync::Arc;
    let (one, two) = two_turns();
    let answer = one.answer_blocks.clone();
    let mut s = engine(r, Some(100));
    s.enqueue(Seq::prompt(Arc::new(one), (), BLOCK, false));
    others.into_iter().for_each(|o| s.enqueue(o));
    let (_, ends) = run(&mut s);
    let kept = answer.iter().map(|&b| s.pool().contains(b)).collect();
    s.enqueue(Seq::prompt(Arc::new(two), (), BLOCK, false));
    s.plan(*ends.last().unwrap()).unwrap();
    let first = first_admission(&s, 1);
    (kept, (first.held_blocks, first.cached_tokens))
}

#[test]
fn a_finished_turn_keeps_its_answer_only_as_far_as_its_fill_ids_reached() {
    // Turn 1: 6 prompt tokens, 7 answer tokens, 4-token pages; its answer blocks are pages 1
    // and 2. Alone, its `fill_ids` stay its prompt (6 tokens: no whole page past page 0), so
    // SGLang caches none of its answer and turn 2 finds page 0 alone (vLLM keeps both pages:
    // 3 blocks, 12 tokens, in the vLLM engine's test).
    assert_eq!(
        answer_kept(rules(), Vec::new()),
        (vec![false, false], (1, 4))
    );
    // Mixed chunks: a 16-token prompt arriving with it is held out of pass 1 by an 8-token
    // `max_prefill_tokens` and prefilled a page a pass in passes 2 to 5, each a mixed pass that
    // sets turn 1's `fill_ids` to its prompt and output so far: 4 tokens in pass 5, so 10 tokens
    // fill pages 0 and 1 and the answer's first page is kept; pass 6 and 7 only decode.
    let mixed = SglangRules {
        enable_mixed_chunk: true,
        max_prefill_tokens: 8,
        chunked_prefill_size: Some(4),
        ..rules()
    };
    assert_eq!(
        answer_kept(mixed, vec![request(5, 9, 16, 8)]),
        (vec![true, false], (2, 8))
    );
}

#[test]
fn a_request_running_alone_that_can_never_move_is_rejected_not_waited_on() {
    // 8 blocks of 4. A (prompt 4, output 20: 6 blocks at most) is prefilled and decodes. Then
    // something outside the engine takes every free block, so A, running alone, cannot take
    // the block its next token needs, and SGLang keeps the last running request rather than
    // retracting it. The step loop's net rejects A instead of waiting forever.
    let mut s = engine(rules(), Some(8));
    s.enqueue(request(0, 1, 4, 20));
    let mut now = 0;
    // Until A holds 4 + 8 tokens, three full blocks: its next token needs a fourth.
    while s
        .running_seq(crate::ids::RequestId(0))
        .is_none_or(|a| a.generated() < 8)
    {
        now = s.plan(now).expect("A runs").end;
        s.apply();
    }
    let free = s.pool().available();
    assert_eq!((s.pool().active(), free), (3, 5));
    let mut held = Vec::new();
    s.pool.borrow_mut().acquire(
        None,
        &[],
        free,
        &mut crate::cluster::worker::kv::Changes::default(),
        &mut held,
        0,
    );
    assert_eq!(s.pool().available(), 0);
    let p = s.plan(now).expect("the rejection is reported");
    assert_eq!(p.rejected.len(), 1);
    assert_eq!(p.rejected[0].id(), crate::ids::RequestId(0));
    assert_eq!(s.stats().rejected, 1);
    assert!(s.running_seq(crate::ids::RequestId(0)).is_none());
    assert!(s.waiting.is_empty());
    assert_eq!(
        s.pool().active(),
        free,
        "A's blocks went back; only the taken ones are held"
    );
}

#[test]
fn the_budget_is_checked_again_once_the_matched_prefix_is_locked() {
    // 8 blocks of 4, conservativeness 0.1 (ratio 0.07). C (family 2, 4 tokens, 8 output) and
    // A (family 1, 16 tokens, 1 output) are prefilled together; A finishes with its first
    // token, its 4 blocks cached and evictable; C holds its 4 tokens in 1 block (its first
    // output's KV is written with the next). Then B (family 1, 20 tokens, 8 output) waits: its
    // first 16 tokens are A's blocks, 4 are left to compute. The budget is 7 blocks x 4 less
    // C's reserve, 7 x 0.07: 27.51 tokens, and B's 4 + 8 fit; locking A's 4 evictable blocks
    // takes 16 of them (11.51 left): SGLang's second check refuses B, which waits, the
    // crate's single check admits it.
    for (recheck, admitted) in [(true, false), (false, true)] {
        let mut s = engine(
            SglangRules {
                schedule_conservativeness: 0.1,
                recheck_locked_prefix: recheck,
                ..rules()
            },
            Some(8),
        );
        s.enqueue(request(1, 2, 4, 8));
        s.enqueue(request(0, 1, 16, 1));
        let mut now = 0;
        let mut a_done = false;
        while !a_done {
            now = s.plan(now).expect("A and C run").end;
            a_done = s.apply().finished.iter().any(|f| f.id().0 == 0);
        }
        let (c_blocks, free) = (s.pool().active(), s.pool().available());
        assert_eq!(c_blocks, 1, "C holds its 4 tokens");
        assert_eq!(free, 7, "A's 4 blocks, evictable, and three free");
        s.enqueue(request(2, 1, 20, 8));
        s.plan(now).expect("C decodes");
        assert_eq!(
            s.running_seq(crate::ids::RequestId(2)).is_some(),
            admitted,
            "recheck {recheck}"
        );
        assert_eq!(waiting_ids(&s).is_empty(), admitted, "recheck {recheck}");
    }
}
