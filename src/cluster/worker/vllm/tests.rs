//! The step scheduler on hand-computed cases: the token budget, chunked prefill, prefix caching
//! capped one token short, KV growth, preemption, the admission gates, decode stretches, and
//! TTFT/TPOT from step durations.

use std::sync::Arc;

use crate::engine::{ms_to_ns, Nanos};
use crate::hash::block_hashes;
use crate::ids::RequestId;
use crate::scenario::Timing;
use crate::workload::RequestSpec;

use super::{Admission, Preemption, SchedulerConfig, StepScheduler};
use crate::cluster::worker::seq::{FirstAdmission, Seq};
use crate::cluster::worker::timing::StepWork;

pub(in crate::cluster::worker) const BLOCK: usize = 4;

pub(in crate::cluster::worker) fn config(
    budget: usize,
    capacity: Option<usize>,
) -> SchedulerConfig {
    SchedulerConfig {
        block_size: BLOCK,
        kv_capacity: capacity,
        max_num_seqs: Some(256),
        max_num_batched_tokens: Some(budget),
        chunked_prefill: true,
        preemption: Preemption::Lifo,
        admission: Admission::Chunk,
        prefill_only: false,
        attribute_misses: true,
        list_own_tails: true,
        decode_stretches: true,
        timing: crate::cluster::hardware::polynomial(&Timing::default()),
        record_features: false,
        max_model_len: None,
        sglang: None,
    }
}

/// A request of `prompt` tokens (its own content, or family `family`'s first tokens shared).
pub(in crate::cluster::worker) fn request(
    id: u64,
    family: u32,
    prompt: u32,
    output: u32,
) -> Seq<()> {
    family_request(id, family, prompt, output, false)
}

/// A request as [`request`]; with `alone`, no other request shares its family, which the
/// workload says (its blocks are its own tail).
pub(in crate::cluster::worker) fn family_request(
    id: u64,
    family: u32,
    prompt: u32,
    output: u32,
    alone: bool,
) -> Seq<()> {
    let tokens: Vec<u32> = (0..prompt).map(|t| family * 100_000 + t).collect();
    let blocks = block_hashes(&tokens, BLOCK);
    let spec = RequestSpec {
        id: RequestId(id),
        arrival_ns: 0,
        input_tokens: prompt,
        output_tokens: output,
        unshared_from: if alone { 0 } else { blocks.len() },
        blocks,
        prefix: None,
        prefix_blocks: 0,
        session: None,
        answer_blocks: Vec::new(),
    };
    Seq::prompt(Arc::new(spec), (), BLOCK, false)
}

/// (request, first token, last token, tokens) of each finished request.
pub(in crate::cluster::worker) type Done = Vec<(u64, Nanos, Nanos, u64)>;

/// Runs every queued request to completion from time 0, one step at a time; returns what
/// finished and each step's end.
pub(in crate::cluster::worker) fn run(s: &mut StepScheduler<()>) -> (Done, Vec<Nanos>) {
    run_from(s, 0)
}

/// [`run`] from `now`.
pub(in crate::cluster::worker) fn run_from(
    s: &mut StepScheduler<()>,
    mut now: Nanos,
) -> (Done, Vec<Nanos>) {
    let mut done = Vec::new();
    let mut ends = Vec::new();
    while let Some(p) = s.plan(now) {
        now = p.end;
        ends.push(now);
        for f in s.apply().finished {
            let first = f.first_token_ns().unwrap();
            let last = f.last_token_ns().unwrap();
            done.push((f.id().0, first, last, f.generated()));
        }
    }
    (done, ends)
}

/// How running request `id` was first admitted.
pub(in crate::cluster::worker) fn first_admission(
    s: &StepScheduler<()>,
    id: u64,
) -> FirstAdmission {
    s.running_seq(RequestId(id))
        .and_then(|q| q.first_admission())
        .expect("a running request, admitted")
}

pub(in crate::cluster::worker) fn prefill_ns(tokens: u64) -> Nanos {
    crate::cluster::hardware::polynomial(&Timing::default()).step_ns(&work(tokens, None))
}

#[test]
fn the_budget_chunks_a_long_prompt_and_later_arrivals_share_the_last_chunk() {
    // Budget 100: A's 250-token prompt takes chunks of 100, 100 and 50; B (30 tokens) joins the
    // step of A's last chunk, where 50 tokens of budget are left. Unbounded KV: decode steps take
    // the polynomial at p = 0, 5.74 ms.
    let mut s = StepScheduler::new(config(100, None));
    s.enqueue(request(0, 1, 250, 3));
    let p1 = s.plan(0).unwrap();
    assert_eq!(p1.end, prefill_ns(100));
    s.apply();
    s.enqueue(request(1, 2, 30, 1));
    let p2 = s.plan(p1.end).unwrap();
    assert_eq!(
        p2.end - p1.end,
        prefill_ns(100),
        "B waits: A's chunk uses the budget"
    );
    s.apply();
    let p3 = s.plan(p2.end).unwrap();
    assert_eq!(
        p3.end - p2.end,
        prefill_ns(50 + 30),
        "one prefill polynomial on 80 tokens"
    );
    let out = s.apply();
    assert_eq!(out.finished.len(), 1, "B's only token ends it");
    assert_eq!(out.first_tokens, vec![RequestId(0), RequestId(1)]);
    let (done, _) = run_from(&mut s, p3.end);
    let decode = ms_to_ns(5.74);
    assert_eq!(done, vec![(0, p3.end, p3.end + 2 * decode, 3)]);
    assert_eq!(s.stats().steps, 5);
    assert_eq!(s.stats().batch_tokens, 100 + 100 + 80 + 2);
}

#[test]
fn load_signals_after_one_chunked_prefill_step() {
    // Budget 100, 1,000 blocks of 4 tokens. A (250-token prompt) and B (30) wait: 280 prompt
    // tokens to compute, nothing running or held.
    let mut s = StepScheduler::new(config(100, Some(1000)));
    s.enqueue(request(0, 1, 250, 3));
    s.enqueue(request(1, 2, 30, 1));
    let signals = s.signals();
    assert_eq!(
        (signals.waiting, signals.running, signals.prefill_tokens),
        (2, 0, 280)
    );
    assert_eq!((signals.decode_blocks, signals.kv_usage), (0, 0.0));
    // The step takes A's first 100-token chunk (the whole budget; B stays waiting) and its 25
    // blocks at once: 25 / 1,000 = 0.025 of the KV in use. While it runs A's chunk still counts
    // as to compute (30 + 250); once it ends, 30 + 150 = 180.
    s.plan(0).unwrap();
    let mid = s.signals();
    assert_eq!((mid.waiting, mid.running, mid.prefill_tokens), (1, 1, 280));
    assert_eq!((mid.decode_blocks, mid.kv_usage), (25, 0.025));
    s.apply();
    let after = s.signals();
    assert_eq!(
        (after.waiting, after.running, after.prefill_tokens),
        (1, 1, 180)
    );
    assert_eq!((after.decode_blocks, after.kv_usage), (25, 0.025));
}

#[test]
fn a_step_that_decodes_and_prefills_adds_both_polynomials() {
    // Capacity 1,000 blocks of 4 tokens: A (prompt 400) decodes while B's prompt (40) prefills.
    let mut s = StepScheduler::new(config(8192, Some(1000)));
    s.enqueue(request(0, 1, 400, 5));
    let p = s.plan(0).unwrap();
    s.apply();
    s.enqueue(request(1, 2, 40, 2));
    let mixed = s.plan(p.end).unwrap();
    // A's KV: its 400 prompt tokens and its first token's, 401 of 4,000.
    let t = crate::cluster::hardware::polynomial(&Timing::default());
    let expected = ms_to_ns(t.prefill_ms(40) + t.decode_ms(401.0 / 4000.0));
    assert_eq!(mixed.end - p.end, expected);
}

#[test]
fn a_fully_cached_prompt_recomputes_its_last_block() {
    // Vertical reuse: the same 8-token prompt twice. The second finds both blocks cached but
    // computes the last block again (the last token is always computed): 4 tokens of prefill.
    let mut s = StepScheduler::new(config(8192, None));
    s.enqueue(request(0, 1, 8, 1));
    run(&mut s);
    s.enqueue(request(1, 1, 8, 1));
    let p = s.plan(0).unwrap();
    assert_eq!(p.end, prefill_ns(4));
    let first = first_admission(&s, 1);
    assert_eq!((first.held_blocks, first.cached_tokens), (2, 4));
    assert!(
        p.log
            .iter()
            .all(|i| !matches!(i, super::LogItem::Kv(c) if !c.stored.is_empty())),
        "nothing new stored"
    );
}

#[test]
fn decode_grows_kv_one_block_per_block_size_tokens() {
    // Prompt 4 tokens (1 named block), 6 output tokens: KV for 4 + 5 = 9 tokens at the end:
    // 3 blocks. The first token needs none; tokens 2..=5 fill the second block, 6 the third.
    let mut s = StepScheduler::new(config(8192, Some(100)));
    s.enqueue(request(0, 1, 4, 6));
    let (done, ends) = run(&mut s);
    assert_eq!(done[0].3, 6);
    assert_eq!(s.pool().peak_active(), 3);
    assert_eq!(s.pool().active(), 0, "all freed at completion");
    assert_eq!(s.pool().named(), 1, "the prompt block stays cached");
    assert_eq!(s.stats().steps, 6, "1 prefill step, 5 decode steps");
    // A decode stretch covered the decode steps: fewer plans than steps.
    assert!(ends.len() < 6, "{ends:?}");
}

#[test]
fn a_request_that_cannot_grow_preempts_the_latest_admitted_which_is_recomputed() {
    // 6 blocks of 4 tokens. A and B (8-token prompts, 10 output tokens each) take 2 blocks each,
    // then grow: at 9 tokens each needs a 3rd block (6 in use), at 13 a 4th: none is left, so A
    // preempts B (the most recently admitted), which frees its 3 blocks and waits at the front.
    let mut s = StepScheduler::new(config(8192, Some(6)));
    s.enqueue(request(0, 1, 8, 10));
    s.enqueue(request(1, 2, 8, 10));
    let (done, _) = run(&mut s);
    assert_eq!(s.stats().preemptions, 1);
    let a = done.iter().find(|d| d.0 == 0).unwrap();
    let b = done.iter().find(|d| d.0 == 1).unwrap();
    assert_eq!((a.3, b.3), (10, 10), "both produce every token");
    assert!(b.2 > a.2, "B finishes after A, recomputed once A made room");
    assert_eq!(s.pool().active(), 0);
}

#[test]
fn fifo_preemption_evicts_the_earliest_admitted() {
    let mut cfg = config(8192, Some(6));
    cfg.preemption = Preemption::Fifo;
    let mut s = StepScheduler::new(cfg);
    s.enqueue(request(0, 1, 8, 10));
    s.enqueue(request(1, 2, 8, 10));
    let (done, _) = run(&mut s);
    assert_eq!(s.stats().preemptions, 1);
    let a = done.iter().find(|d| d.0 == 0).unwrap();
    let b = done.iter().find(|d| d.0 == 1).unwrap();
    assert!(a.2 > b.2, "A, preempted, finishes last");
}

#[test]
fn the_chunk_gate_admits_what_the_whole_prompt_gate_holds_back() {
    // 10 blocks, budget 9 tokens. A (16-token prompt) is prefilled in 2 steps (9 + 7) and holds
    // 4 blocks; in step 3 its decode takes a 5th. B (24 tokens) then needs 6 blocks in all, but
    // its first chunk (the 8 tokens of budget A's decode leaves) only 2.
    for (admission, admitted) in [(Admission::Chunk, true), (Admission::WholePrompt, false)] {
        let mut cfg = config(9, Some(10));
        cfg.admission = admission;
        let mut s = StepScheduler::new(cfg);
        s.enqueue(request(0, 1, 16, 20));
        let mut now = 0;
        for _ in 0..2 {
            now = s.plan(now).unwrap().end;
            s.apply();
        }
        s.enqueue(request(1, 2, 24, 2));
        s.plan(now).unwrap();
        assert_eq!(s.running() == 2, admitted, "{admission:?}");
        assert_eq!(s.pool().active(), if admitted { 7 } else { 5 });
        s.apply();
    }
}

#[test]
fn a_sequence_larger_than_the_kv_is_rejected_and_without_chunking_so_is_a_long_prompt() {
    let mut s = StepScheduler::new(config(8192, Some(4)));
    s.enqueue(request(0, 1, 12, 6)); // 12 + 5 tokens of KV: 5 blocks > 4
    let p = s.plan(0).unwrap();
    assert_eq!((p.rejected.len(), s.stats().rejected), (1, 1));
    let mut cfg = config(100, None);
    cfg.chunked_prefill = false;
    let mut s = StepScheduler::new(cfg);
    s.enqueue(request(0, 1, 150, 1));
    s.enqueue(request(1, 2, 90, 1));
    let p = s.plan(0).unwrap();
    assert_eq!(p.rejected.len(), 1, "150 tokens never fit a 100-token step");
    assert_eq!(p.end, prefill_ns(90), "the 90-token prompt goes whole");
}

#[test]
fn a_decode_stretch_gives_each_step_its_own_duration_and_is_cut_by_an_arrival() {
    // One request, prompt 40 (10 blocks of 4), 20 output tokens, 100 blocks: after its prefill,
    // decode step k (k = 1..19) holds 40 + k tokens of KV, p = (40 + k) / 400.
    let t = crate::cluster::hardware::polynomial(&Timing::default());
    let mut s = StepScheduler::new(config(8192, Some(100)));
    s.enqueue(request(0, 1, 40, 20));
    let p = s.plan(0).unwrap();
    s.apply();
    let stretch = s.plan(p.end).unwrap();
    assert!(stretch.steps > 1, "decode steps planned together");
    let mut end = p.end;
    for k in 1..=u64::from(stretch.steps) {
        end += t.step_ns(&work(0, Some((40 + k) as f64 / 400.0)));
    }
    assert_eq!(stretch.end, end);
    // An arrival during the third step cuts the stretch at that step's end.
    let third_end = p.end
        + (1..=3)
            .map(|k| t.step_ns(&work(0, Some((40 + k) as f64 / 400.0))))
            .sum::<u64>();
    assert_eq!(s.truncate(third_end - 1), Some(third_end));
    // Begun by a time inside the third step: three; inside the first, one; after the cut
    // stretch's end, all three (a restart's timeline mark counts these, not all planned).
    assert_eq!(s.steps_begun(third_end - 1), 3);
    assert_eq!(s.steps_begun(p.end + 1), 1);
    assert_eq!(s.steps_begun(third_end + 1), 3);
    s.apply();
    assert_eq!(s.stats().steps, 4);
}

#[test]
fn ttft_and_tpot_of_a_lone_request_follow_the_step_durations() {
    // Prompt 1,500 tokens (block 4, unbounded KV), 11 output tokens: TTFT is one prefill step,
    // then 10 decode steps of 5.74 ms: TPOT = 10 · 5.74 / 10.
    let mut s = StepScheduler::new(config(8192, None));
    s.enqueue(request(0, 1, 1500, 11));
    let (done, _) = run(&mut s);
    let (_, first, last, n) = done[0];
    assert_eq!(first, prefill_ns(1500));
    let tpot_ms = (last - first) as f64 / 1e6 / (n - 1) as f64;
    assert!((tpot_ms - 5.74).abs() < 1e-9, "{tpot_ms}");
    assert_eq!(s.itl().count(), 10);
}

#[test]
fn engines_sharing_a_histogram_add_what_each_would_alone() {
    // The lone request above on two engines sharing one histogram: it holds both engines' 10
    // gaps, the same weights as the two engines' own histograms merged.
    let alone: Vec<crate::sketch::LogHistogram> = (0..2)
        .map(|_| {
            let mut s = StepScheduler::new(config(8192, None));
            s.enqueue(request(0, 1, 1500, 11));
            run(&mut s);
            let h = s.itl().clone();
            h
        })
        .collect();
    let shared = crate::sketch::SharedHistogram::default();
    for _ in 0..2 {
        let mut s = StepScheduler::new(config(8192, None)).with_itl(shared.clone());
        s.enqueue(request(0, 1, 1500, 11));
        run(&mut s);
    }
    let mut merged = alone[0].clone();
    merged += &alone[1];
    assert_eq!(shared.borrow().count(), 20);
    assert!(*shared.borrow() == merged);
}

#[test]
fn a_preempted_request_is_recomputed_and_every_step_time_follows_its_batch() {
    // 6 blocks of 4 tokens (24 tokens of KV). A and B (distinct 8-token prompts, 10 output
    // tokens each) prefill together, then decode side by side; at 12 tokens each they hold 6
    // blocks, so in step 6 A's 13th token needs a block that is not there: B (the most recently
    // admitted) is preempted after 5 tokens, freeing its 3 blocks. A then decodes alone and
    // finishes in step 10, where its 5th block evicts B's released second block (the tail goes
    // first). In step 11 B is admitted again: its first block is still cached, so it recomputes
    // the other 4 prompt tokens and the KV of its 5 tokens (9 in all), which brings it to its
    // 6th token; 4 decode steps later it is done. The same when the requests' blocks are their
    // own tails, kept out of the name table: preempting B lists its blocks, so it finds them.
    let t = crate::cluster::hardware::polynomial(&Timing::default());
    let decode = |kv: u64| t.step_ns(&work(0, Some(kv as f64 / 24.0)));
    let mut steps = vec![t.step_ns(&work(16, None))]; // 1: both prompts, 16 uncached tokens
    steps.extend([18, 20, 22, 24].map(decode)); // 2-5: both decode (9 + 9 ... 12 + 12 tokens)
    steps.extend([13, 14, 15, 16, 17].map(decode)); // 6-10: A alone
    steps.push(t.step_ns(&work(4, Some(13.0 / 24.0)))); // 11: B's recompute ends at 13 tokens
    steps.extend([14, 15, 16, 17].map(decode)); // 12-15: B alone
    let end: Vec<Nanos> = steps
        .iter()
        .scan(0, |at, d| {
            *at += d;
            Some(*at)
        })
        .collect();
    for (stretches, own_tails) in [(true, false), (false, false), (true, true)] {
        let mut cfg = config(8192, Some(6));
        cfg.decode_stretches = stretches;
        cfg.attribute_misses = !own_tails;
        cfg.list_own_tails = !own_tails;
        let mut s = StepScheduler::new(cfg);
        s.enqueue(family_request(0, 1, 8, 10, own_tails));
        s.enqueue(family_request(1, 2, 8, 10, own_tails));
        let (mut done, _) = run(&mut s);
        done.sort_unstable();
        assert_eq!(
            done,
            vec![(0, end[0], end[9], 10), (1, end[0], end[14], 10)],
            "stretches {stretches}, own tails {own_tails}"
        );
        assert_eq!(s.stats().preemptions, 1);
        assert_eq!(s.stats().steps, 15);
        assert_eq!(s.stats().busy_ns, end[14]);
    }
}

#[test]
fn no_request_is_admitted_in_a_step_that_preempted() {
    // Budget 5 tokens, 6 blocks of 4. A and B (12 output tokens) have the same 8-token prompt (B finds A's blocks
    // and shares them), so each holds only its generated tokens' blocks privately; B runs one
    // step behind A. In step 11 A's 17th token needs a 5th block and none is free: B is
    // preempted, freeing its 2 private blocks; A takes one. B could come back at once (its
    // prompt blocks are A's, pinned; 4 tokens of budget are left, whose KV needs one block, and
    // one is free), but a step that preempted admits nobody: B waits for step 12.
    let mut cfg = config(5, Some(6));
    cfg.decode_stretches = false;
    let mut s = StepScheduler::new(cfg);
    s.enqueue(request(0, 1, 8, 12));
    s.enqueue(request(1, 1, 8, 12));
    let mut now = 0;
    for step in 1..=10 {
        now = s.plan(now).unwrap().end;
        s.apply();
        assert_eq!(s.stats().preemptions, 0, "step {step}");
    }
    assert_eq!((s.running(), s.pool().active()), (2, 6));
    now = s.plan(now).unwrap().end;
    assert_eq!(s.stats().preemptions, 1);
    assert_eq!(
        (s.running(), s.waiting()),
        (1, 1),
        "B waits, though it fits"
    );
    assert_eq!(s.pool().available(), 1);
    s.apply();
    let p = s.plan(now).unwrap();
    assert_eq!(
        (s.running(), s.waiting()),
        (2, 0),
        "B is back in the next step"
    );
    assert_eq!((p.batch, p.prefill_tokens + p.decode_tokens), (2, 5));
    assert_eq!(s.pool().available(), 0);
}

#[test]
fn a_stretch_cut_short_keeps_the_blocks_it_took_ahead() {
    // 4 blocks of 4 tokens. F (4 tokens, 1 output token) leaves its block cached. A (prompt 9:
    // 2 named blocks and a partial one, 8 output tokens) then holds 3 blocks, leaving F's as
    // the only one available. A's decode stretch (4 steps: tokens 10 to 13) needs a 4th block
    // in its 4th step: planned as a stretch, it takes the block (evicting F's) when it is
    // planned. An arrival during the first step cuts the stretch after that step: A keeps the
    // block and F's block is gone, where planning step by step would still hold F's block
    // (evicted in the 4th step) and have one block available. This is what docs/FIDELITY.md
    // says a stretch changes.
    let f_block = request(0, 7, 4, 1).spec.blocks[0];
    for stretches in [true, false] {
        let mut cfg = config(8192, Some(4));
        cfg.decode_stretches = stretches;
        let mut s = StepScheduler::new(cfg);
        s.enqueue(request(0, 7, 4, 1));
        let (_, ends) = run(&mut s);
        s.enqueue(request(1, 1, 9, 8));
        let prefill = s.plan(*ends.last().unwrap()).unwrap();
        s.apply();
        let p = s.plan(prefill.end).unwrap();
        let first_end = prefill.end
            + crate::cluster::hardware::polynomial(&Timing::default())
                .step_ns(&work(0, Some(10.0 / 16.0)));
        assert_eq!(p.first_end, first_end);
        assert_eq!(p.steps, if stretches { 4 } else { 1 });
        assert_eq!(s.truncate(first_end - 1), stretches.then_some(first_end));
        s.apply();
        assert_eq!(
            s.pool().contains(f_block),
            !stretches,
            "stretches {stretches}"
        );
        assert_eq!(s.pool().available(), usize::from(!stretches));
        if !stretches {
            // Stepping on, the 4th step takes the block and evicts F's.
            let mut now = first_end;
            for _ in 0..3 {
                now = s.plan(now).unwrap().end;
                s.apply();
            }
            assert!(!s.pool().contains(f_block));
        }
    }
}

/// A step as the mocker's polynomials see it.
pub(in crate::cluster::worker) fn work(prefill: u64, decode: Option<f64>) -> StepWork {
    StepWork::polynomial(prefill, decode)
}

/// Turn 1 of a session (6 prompt tokens, 7 answer tokens) and turn 2, whose 16-token prompt
/// repeats turn 1's prompt and answer: turn 1 names the answer's blocks as turn 2 does.
pub(in crate::cluster::worker) fn two_turns() -> (RequestSpec, RequestSpec) {
    let tokens: Vec<u32> = (0..16).collect();
    let second = block_hashes(&tokens, BLOCK);
    let first = block_hashes(&tokens[..6], BLOCK);
    assert_eq!(first[..], second[..1], "turn 2 repeats turn 1");
    let spec = |id: u64, input: u32, output: u32, blocks: Vec<_>, answer: Vec<_>| RequestSpec {
        id: RequestId(id),
        arrival_ns: 0,
        input_tokens: input,
        output_tokens: output,
        unshared_from: blocks.len(),
        blocks,
        prefix: None,
        prefix_blocks: 0,
        session: None,
        answer_blocks: answer,
    };
    // KV for 6 + 7 − 1 = 12 tokens when turn 1 ends: blocks 0..3, the prompt's one and the
    // answer's two (the prompt's partial block 1, completed by the answer, and block 2).
    let answer = second[1..3].to_vec();
    (
        spec(0, 6, 7, first, answer),
        spec(1, 16, 1, second, Vec::new()),
    )
}

#[test]
fn a_finished_requests_answer_stays_cached_for_the_next_turn() {
    let (one, two) = two_turns();
    let (prompt, answer) = (one.blocks.clone(), one.answer_blocks.clone());
    let mut s = StepScheduler::new(config(8192, Some(100)));
    s.enqueue(Seq::prompt(Arc::new(one), (), BLOCK, false));
    let mut now = 0;
    let mut stored = Vec::new();
    while let Some(p) = s.plan(now) {
        now = p.end;
        stored.extend(s.apply().kv.into_iter().flat_map(|c| c.stored));
    }
    assert_eq!(
        stored,
        vec![(Some(prompt[0]), answer.clone())],
        "stored when it finishes, after the prompt's block"
    );
    {
        let pool = s.pool();
        assert!(answer
            .iter()
            .all(|&b| pool.contains(b) && !pool.is_pinned(b)));
        assert_eq!(pool.private(), 0, "its private blocks became the answer's");
    }
    s.enqueue(Seq::prompt(Arc::new(two), (), BLOCK, false));
    s.plan(now).unwrap();
    let first = first_admission(&s, 1);
    // Without the answer kept, only the prompt's block (4 tokens) would be found.
    assert_eq!((first.held_blocks, first.cached_tokens), (3, 12));
}

#[test]
fn a_kept_answer_is_evicted_before_its_prompt_last_block_first() {
    // Three blocks of capacity, all cached once turn 1 ends; an unrelated one-block request
    // evicts the block released longest ago: the answer's last.
    let (one, _) = two_turns();
    let (prompt, answer) = (one.blocks.clone(), one.answer_blocks.clone());
    let mut s = StepScheduler::new(config(8192, Some(3)));
    s.enqueue(Seq::prompt(Arc::new(one), (), BLOCK, false));
    run(&mut s);
    s.enqueue(request(1, 9, 4, 1));
    let p = s.plan(0).unwrap();
    let evicted: Vec<_> = p
        .log
        .iter()
        .flat_map(|i| match i {
            super::LogItem::Kv(c) => c.evicted.clone(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(evicted, vec![answer[1]]);
    let pool = s.pool();
    assert!(pool.contains(answer[0]) && pool.contains(prompt[0]));
}
