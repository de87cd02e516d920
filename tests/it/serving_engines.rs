//! The serving engines behind the one worker interface (`engine.kind`): the same workload under
//! vLLM, TensorRT-LLM and SGLang, end to end.

use std::path::Path;

use dynsim::report::Report;
use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;

/// 120 requests of 300 to 700 prompt tokens (4 groups sharing 256) and 50 to 300 output tokens
/// on 2 workers of 200 blocks of 16 tokens: far more than the KV holds at once.
const PRESSED: &str = r#"
seed = 3
[workload]
kind = "synthetic"
requests = 120
groups = 4
shared_prefix_tokens = 256
rate_per_s = 200.0
input = { dist = "uniform", min = 300, max = 700 }
output = { dist = "uniform", min = 50, max = 300 }
[cluster]
workers = 2
block_size = 16
kv_capacity_blocks = 200
[router]
policy = "kv"
"#;

fn run(text: &str, engine: &str) -> Report {
    let set = [format!("engine.kind={engine}").parse().unwrap()];
    let s = parse_scenario(Path::new("pressed.toml"), text, &set).expect("valid");
    run_scenario(&s, Path::new("."), None).expect("runs")
}

#[test]
fn under_kv_pressure_vllm_preempts_and_tensorrt_llm_never_does() {
    let vllm = run(PRESSED, "vllm");
    let trt = run(PRESSED, "trtllm");
    assert!(
        vllm.preemptions > 0,
        "the KV is too small for vLLM's optimism"
    );
    assert_eq!(
        trt.preemptions, 0,
        "every admitted request is reserved to completion"
    );
    for r in [&vllm, &trt] {
        assert_eq!((r.acks, r.rejected), (120, 0));
    }
    // Reserving whole completions runs fewer requests at once: later first tokens.
    assert!(
        trt.ttft_ms.p50 > vllm.ttft_ms.p50,
        "{:?} {:?}",
        trt.ttft_ms,
        vllm.ttft_ms
    );
    assert_eq!(run(PRESSED, "trtllm"), trt, "deterministic");
}

#[test]
fn tensorrt_llm_serves_disaggregated_prefill_and_decode() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/disagg-one-gpu.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let r = run(&text, "trtllm");
    assert_eq!((r.acks, r.rejected, r.preemptions), (200, 0, 0));
}

#[test]
fn prompts_longer_than_a_step_are_refused_when_scheduled_only_whole_and_the_warning_says_why() {
    // TensorRT-LLM's default: no chunked prefill. With 700 tokens per step, the prompts
    // longer than 700 tokens cannot run; chunked prefill runs them all.
    let text = format!("{PRESSED}[engine.trtllm]\nmax_num_tokens = 700\n");
    let whole = run(&text, "trtllm");
    assert!(
        whole.rejected > 0 && whole.rejected < 120,
        "{}",
        whole.rejected
    );
    let warning = whole
        .warnings
        .iter()
        .find(|w| w.contains("requests were rejected"))
        .expect("a warning");
    assert!(
        warning.contains(
            "or their prompt is longer than a step's 700 tokens \
             (engine.trtllm.enable_chunked_prefill = false: a prompt is scheduled only whole)"
        ),
        "{warning}"
    );
    let chunked = run(&format!("{text}enable_chunked_prefill = true\n"), "trtllm");
    assert_eq!((chunked.rejected, chunked.acks), (0, 120));
}

#[test]
fn sglang_serves_the_pressed_workload_retracting_less_than_vllm_preempts() {
    // SGLang admits a request only when its prompt and whole output fit beside a share
    // (new_token_ratio) of the running requests' remaining output; as the ratio decays it
    // admits more and, once decode runs out of KV, retracts. vLLM admits on the first chunk
    // alone and preempts far more. Both serve every request; SGLang the same way twice.
    let sglang = run(PRESSED, "sglang");
    let vllm = run(PRESSED, "vllm");
    for r in [&sglang, &vllm] {
        assert_eq!((r.acks, r.rejected), (120, 0));
    }
    assert!(
        sglang.preemptions > 0 && sglang.preemptions < vllm.preemptions,
        "{} retractions, {} preemptions",
        sglang.preemptions,
        vllm.preemptions
    );
    assert_ne!(sglang.ttft_ms, vllm.ttft_ms, "its own scheduler");
    assert_eq!(run(PRESSED, "sglang"), sglang, "deterministic");
}

#[test]
fn sglang_longest_prefix_first_reuses_at_least_as_much_as_arrival_order() {
    // One worker, 4 groups sharing 256 tokens, requests arriving faster than they are served:
    // lpm serves the waiting requests whose prefix is cached first.
    let one = PRESSED.replace("workers = 2", "workers = 1");
    let fcfs = run(&one, "sglang");
    let lpm = run(
        &format!("{one}[engine.sglang]\nschedule_policy = \"lpm\"\n"),
        "sglang",
    );
    assert_eq!((lpm.acks, fcfs.acks), (120, 120));
    assert!(
        lpm.prefix_reuse >= fcfs.prefix_reuse,
        "{} {}",
        lpm.prefix_reuse,
        fcfs.prefix_reuse
    );
    assert_ne!(lpm.ttft_ms, fcfs.ttft_ms, "a different order");
}

#[test]
fn the_bundled_sglang_scenario_runs_in_the_crate_defaults() {
    // The first 400 requests of the conversation trace on scenarios/dynamo-mocker-sglang.toml.
    let out = crate::common::ok(&[
        "run",
        "scenarios/dynamo-mocker-sglang.toml",
        "--set",
        "workload.limit=400",
        "--json",
    ]);
    let r: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(r["acks"].as_u64(), Some(400));
    assert_eq!(r["rejected"].as_u64(), Some(0));
    assert!(
        r["prefix_reuse"].as_f64().unwrap() > 0.1,
        "{}",
        r["prefix_reuse"]
    );
    // The same scenario under vLLM's engine differs: the engine is SGLang's.
    let vllm = crate::common::ok(&[
        "run",
        "scenarios/dynamo-mocker-sglang.toml",
        "--set",
        "workload.limit=400",
        "--set",
        "engine.kind=vllm",
        // The crate's max_prefill_tokens check and single budget check are SGLang settings:
        // back to their defaults,
        "--set",
        "engine.sglang.max_prefill_tokens_charge=\"prompt\"",
        "--set",
        "engine.sglang.recheck_locked_prefix=true",
        // And the scenario's explicit chunk and running requests (the 8,192 and 256 "auto"
        // gives without a deployment).
        "--set",
        "engine.sglang.chunked_prefill_size=\"auto\"",
        "--set",
        "engine.sglang.max_running_requests=\"auto\"",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&vllm).expect("json");
    assert_eq!(v["acks"].as_u64(), Some(400));
    assert_ne!(r["ttft_ms"], v["ttft_ms"]);
}
