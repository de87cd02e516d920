//! TensorRT-LLM's `GUARANTEED_NO_EVICT` gate on hand-computed cases: what it admits against
//! vLLM's, the cached-prefix credit, refusal by the to-completion footprint, and no preemption.

use super::{to_completion_blocks, unreserved};
use crate::cluster::worker::vllm::tests::{config, prefill_ns, request, run, BLOCK};
use crate::cluster::worker::vllm::{Admission, SchedulerConfig, StepScheduler};

/// [`config`] under the to-completion gate.
fn no_evict(budget: usize, capacity: Option<usize>) -> SchedulerConfig {
    SchedulerConfig {
        admission: Admission::ToCompletion,
        ..config(budget, capacity)
    }
}

#[test]
fn the_reservation_arithmetic() {
    // 16 tokens in blocks of 4: 4 blocks; 17 tokens: 5.
    assert_eq!(to_completion_blocks(16, 4), 4);
    assert_eq!(to_completion_blocks(17, 4), 5);
    // 8 blocks available, running requests (to completion, held) = (4, 2) and (5, 2): 2 + 3
    // reserved, 3 left.
    assert_eq!(unreserved(8, [(4, 2), (5, 2)].into_iter()), 3);
    assert_eq!(unreserved(2, [(4, 0)].into_iter()), 0);
}

#[test]
fn a_request_waits_until_its_completion_fits_beside_the_running_ones() {
    // 10 blocks of 4 tokens. A: prompt 8, output 8: ceil(16 / 4) = 4 blocks to completion.
    // B: prompt 8, output 12: 5 blocks. C: prompt 4, output 4: 2 blocks. In the first step A is
    // admitted (4 <= 10) and takes its prompt's 2 blocks; B then finds 10 - 2 = 8 blocks
    // available, 4 - 2 = 2 of them reserved for A: 6 >= 5, admitted, 2 blocks taken. C finds
    // 10 - 4 = 6 available, 2 + 3 reserved: 1 < 2, so C waits, where vLLM's gate (its first
    // chunk's single block) admits it. The step prefills A's and B's 16 tokens.
    for (admission, running) in [(Admission::ToCompletion, 2), (Admission::Chunk, 3)] {
        let mut s = StepScheduler::new(SchedulerConfig {
            admission,
            ..config(8192, Some(10))
        });
        s.enqueue(request(0, 1, 8, 8));
        s.enqueue(request(1, 2, 8, 12));
        s.enqueue(request(2, 3, 4, 4));
        let p = s.plan(0).unwrap();
        assert_eq!((s.running(), s.waiting()), (running, 3 - running));
        if admission == Admission::ToCompletion {
            assert_eq!(p.end, prefill_ns(16));
            assert_eq!(s.pool().active(), 4);
        }
        s.apply();
    }
    // Run to the end: C starts once A has finished and released its blocks (B then holds 4
    // blocks with 1 more reserved: 10 - 4 - 1 = 5 left, C's 2 fit), and nothing is preempted.
    let mut s = StepScheduler::new(no_evict(8192, Some(10)));
    s.enqueue(request(0, 1, 8, 8));
    s.enqueue(request(1, 2, 8, 12));
    s.enqueue(request(2, 3, 4, 4));
    let (done, _) = run(&mut s);
    let at = |id: u64| *done.iter().find(|d| d.0 == id).unwrap();
    assert!(
        at(2).1 > at(0).2,
        "C's first token after A's last: {done:?}"
    );
    assert_eq!(s.stats().preemptions, 0);
    assert_eq!(s.pool().active(), 0);
}

#[test]
fn where_vllm_preempts_the_reservation_never_evicts() {
    // 6 blocks of 4 tokens; A and B: 8-token prompts, 10 output tokens. vLLM admits both and
    // preempts B when A's 13th token finds no block (vllm/tests.rs works it through). Here each
    // needs ceil(18 / 4) = 5 blocks to completion: B waits for A, and is never preempted.
    let mut vllm = StepScheduler::new(config(8192, Some(6)));
    let mut trt = StepScheduler::new(no_evict(8192, Some(6)));
    for s in [&mut vllm, &mut trt] {
        s.enqueue(request(0, 1, 8, 10));
        s.enqueue(request(1, 2, 8, 10));
    }
    let _ = run(&mut vllm);
    assert_eq!(vllm.stats().preemptions, 1);
    let (done, _) = run(&mut trt);
    assert_eq!(trt.stats().preemptions, 0);
    let (a, b) = (done[0], done[1]);
    assert_eq!((a.0, b.0), (0, 1));
    assert!(b.1 > a.2, "B's first token after A's last");
    assert_eq!((a.3, b.3), (10, 10));
}

#[test]
fn only_cached_blocks_a_running_request_holds_are_credited() {
    // 7 blocks of 4 tokens. A (family 1: prompt 8, output 8: 4 blocks to completion) is
    // prefilled; in the next step its first decode takes a third block, 1 more reserved:
    // 7 - 3 - 1 = 3 left. B with A's prompt finds its first block cached and held by A (the
    // cache is capped one token short: the second block is recomputed): 4 - 1 = 3 needed,
    // admitted. A request of another family needs all 4: it waits.
    for (family, admitted) in [(1, true), (2, false)] {
        let mut s = StepScheduler::new(no_evict(8192, Some(7)));
        s.enqueue(request(0, 1, 8, 8));
        let p = s.plan(0).unwrap();
        s.apply();
        s.enqueue(request(1, family, 8, 8));
        s.plan(p.end).unwrap();
        assert_eq!(s.running() == 2, admitted, "family {family}");
        s.apply();
    }
}

#[test]
fn a_request_whose_completion_exceeds_the_kv_is_refused() {
    // 4 blocks of 4 tokens; prompt 12, output 5. vLLM holds at most 12 + 4 tokens (the last
    // token's KV is never computed): 4 blocks, it runs. TensorRT-LLM reserves 12 + 5: 5 blocks.
    let mut vllm = StepScheduler::new(config(8192, Some(4)));
    let mut trt = StepScheduler::new(no_evict(8192, Some(4)));
    for s in [&mut vllm, &mut trt] {
        s.enqueue(request(0, 1, 12, 5));
    }
    assert!(vllm.plan(0).unwrap().rejected.is_empty());
    assert_eq!(trt.plan(0).unwrap().rejected.len(), 1);
    assert_eq!(trt.stats().rejected, 1);
    assert_eq!(BLOCK, 4);
}
