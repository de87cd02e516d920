//! `bench --protocol` and calibration's per-row protocols and per-GPU coefficients.

use dynsim::calibrate::{self, measured};
use dynsim::scenario::EngineKind;

use crate::common::{bad, ok, qwen32b_bench};

fn bench(protocol: &str) -> serde_json::Value {
    let text = ok(&qwen32b_bench(
        "1000",
        "50",
        "4",
        &["--protocol", protocol, "--json"],
    ));
    serde_json::from_str(&text).expect("one JSON object")
}

/// InferenceMAX's clients send 10 requests each, of prompts drawn from 800..=1000 tokens (so
/// fewer 16-token blocks than 1,000-token prompts fill) and answers from 40..=50 tokens;
/// AIConfigurator's send 20 each of exactly 1,000 + 50.
#[test]
fn inferencemax_sends_ten_requests_per_client_of_varied_lengths() {
    let aic = bench("aiconfigurator");
    assert_eq!(aic["requests"], 80);
    // Full 16-token blocks: 62 of a 1,000-token prompt, 50 of an 800-token one.
    assert_eq!(aic["prompt_blocks"], 80 * 62);
    let im = bench("inferencemax");
    assert_eq!(im["requests"], 40);
    let blocks = im["prompt_blocks"].as_u64().unwrap();
    assert!(blocks > 40 * 50 && blocks < 40 * 62, "{blocks}");
    let output =
        im["output_tokens_per_s"].as_f64().unwrap() * im["duration_ms"].as_f64().unwrap() / 1e3;
    assert!(
        output > 40.0 * 40.0 && output < 40.0 * 50.0 - 1.0,
        "{output}"
    );
}

/// Llama-3.1-70B fp8 on 2 x `gpu`, 64 clients of 1,024 + 8,192 tokens under `protocol`.
fn seventy_b(gpu: &str, protocol: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "bench",
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--gpu",
        gpu,
        "--tp",
        "2",
        "--precision",
        "fp8",
        "--isl",
        "1024",
        "--osl",
        "8192",
        "--concurrency",
        "64",
        "--requests",
        "128",
        "--protocol",
        protocol,
        "--json",
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&args)).expect("one JSON object")
}

/// InferenceMAX's vLLM servers ran a bf16 KV cache on the H100 (its launch command set no
/// `--kv-cache-dtype` when the rows were measured) and an fp8 one on the H200 and Blackwell;
/// AIConfigurator's protocol keeps `auto` (fp8 with fp8 weights). On 2 x H100 the bf16 cache holds half the tokens, too few for 64 clients of
/// up to 9,216 tokens: they queue (measured: 30.8 s of mean TTFT), where the fp8 one seats them
/// all (0.3 s). If the protocol's KV dtype were lost, the queueing would vanish.
#[test]
fn inferencemax_runs_the_kv_dtype_of_its_launch_commands_and_queues_where_kv_runs_short() {
    let kv = |r: &serde_json::Value| {
        (
            r["bench"]["kv_dtype"].as_str().unwrap().to_string(),
            r["bench"]["kv_capacity_tokens"].as_u64().unwrap(),
        )
    };
    let hopper = seventy_b("h100_sxm", "inferencemax", &[]);
    let aic = seventy_b("h100_sxm", "aiconfigurator", &[]);
    let (dtype, tokens) = kv(&hopper);
    assert_eq!(dtype, "bf16");
    assert_eq!(kv(&aic).0, "fp8");
    let ratio = kv(&aic).1 as f64 / tokens as f64;
    assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    assert_eq!(kv(&seventy_b("b200_sxm", "inferencemax", &[])).0, "fp8");
    assert_eq!(kv(&seventy_b("h200_sxm", "inferencemax", &[])).0, "fp8");
    // An explicit dtype wins over the protocol's.
    let asked = seventy_b("h100_sxm", "inferencemax", &["--kv-dtype", "fp8"]);
    assert_eq!(kv(&asked), kv(&aic));
    // 64 clients of up to 9,216 tokens do not fit the bf16 cache: the later requests wait for
    // KV, seconds (11.3 s), where the fp8 cache seats them all (1.1 s: the prefills alone).
    let ttft = |r: &serde_json::Value| r["ttft_ms"]["mean"].as_f64().unwrap();
    assert!(tokens < 64 * 9216, "{tokens}");
    assert!(ttft(&hopper) > 5_000.0, "{}", ttft(&hopper));
    assert!(ttft(&asked) < 2_000.0, "{}", ttft(&asked));
}

#[test]
fn an_unknown_protocol_is_refused() {
    let err = bad(&[
        "bench",
        "--model",
        "Qwen/Qwen3-32B",
        "--gpu",
        "h100_sxm",
        "--isl",
        "10",
        "--osl",
        "10",
        "--concurrency",
        "1",
        "--protocol",
        "aic",
    ]);
    assert!(err.contains("--protocol"), "{err}");
}

/// Calibration replays each row under the protocol it was measured with: an unversioned row on
/// InferenceMAX's grid runs 10 requests per client with lengths in the top fifth, a versioned
/// one 20 of fixed lengths.
#[test]
fn calibration_replays_each_row_under_its_protocol() {
    let text = "id,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,tp_size,pp_size,silicon_ttft_ms,silicon_tpot_ms\n\
        im,vllm,,meta-llama/Llama-3.1-70B,h100_sxm,fp8,agg,1024,1024,4,4,1,80.5,11.78\n\
        aic,vllm,0.12.0,meta-llama/Llama-3.1-70B,h100_sxm,fp8,agg,1024,1024,4,4,1,80.5,11.78\n";
    let rows = measured::parse(std::path::Path::new("m.csv"), text)
        .unwrap()
        .rows;
    let specs: Vec<_> = rows
        .iter()
        .map(|r| calibrate::spec_of(r, EngineKind::Vllm, &calibrate::Setup::default()))
        .collect();
    assert_eq!(specs[0].protocol, dynsim::bench::Protocol::InferenceMax);
    assert_eq!(specs[1].protocol, dynsim::bench::Protocol::Aiconfigurator);
    let requests: Vec<u64> = specs
        .iter()
        .map(|s| dynsim::bench::run(s).unwrap().report.requests as u64)
        .collect();
    assert_eq!(requests, [40, 80]);
}

/// Leaving one group out of rows of a single group would fit on nothing: refused with the
/// reason (exit 2) before any fit, never a panic.
#[test]
fn leave_one_out_on_a_single_group_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = crate::common::write(
        dir.path(),
        "one.csv",
        "backend,model_path,system,precision,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n\
         sglang,meta-llama/Llama-3.1-8B-Instruct,h200_sxm,fp8,1000,100,8,1,50.0,8.0\n\
         sglang,meta-llama/Llama-3.1-8B-Instruct,h200_sxm,fp8,2000,100,8,1,80.0,8.5\n",
    );
    let err = bad(&["calibrate", &csv, "--engine", "sglang", "--leave-one-out"]);
    assert!(
        err.contains("--leave-one-out") && err.contains("two (model, GPU, precision) groups"),
        "{err}"
    );
}

/// `--prompt-pool 1`: one client sends the same 100-token prompt three times. The prompt fills
/// six 16-token blocks (96 tokens; the seventh holds 4 tokens and is never cached); the first
/// request computes all of it, each repeat finds the six blocks cached: 2 x 96 = 192 of 300
/// prompt tokens reused. Without a pool nothing is.
#[test]
fn a_prompt_pool_of_one_hits_every_full_block_of_each_repeat() {
    // One client of 100 + 5 tokens, then `extra`.
    let args = |extra: &[&'static str]| qwen32b_bench("100", "5", "1", extra);
    let run = |extra: &[&'static str]| -> serde_json::Value {
        let mut a = args(&["--requests", "3", "--json"]);
        a.extend_from_slice(extra);
        serde_json::from_str(&ok(&a)).expect("one JSON object")
    };
    let pooled = run(&["--prompt-pool", "1"]);
    assert_eq!(pooled["prompt_blocks"], 18);
    assert_eq!(pooled["cached_blocks"], 12);
    assert_eq!(pooled["prefix_reuse"], 0.64);
    let own = run(&[]);
    assert_eq!(own["cached_blocks"], 0);
    assert_eq!(own["prefix_reuse"], 0.0);
    // The repeats skip their prefill: a lower mean TTFT than three fresh prompts.
    assert!(pooled["ttft_ms"]["mean"].as_f64() < own["ttft_ms"]["mean"].as_f64());
    let e = bad(&args(&[
        "--protocol",
        "inferencemax",
        "--prompt-pool",
        "100",
    ]));
    assert!(
        e.contains("--prompt-pool") && e.contains("inferencemax"),
        "{e}"
    );
}

/// `--concurrency-ramp-duration`: two clients of one request each, the second joining 30 s
/// after the first (aiperf's ramp: the last client joins at the ramp's end, not a step before
/// it), run one after the other, so each sees an idle server and the run lasts past 30 s; all
/// at once they share their steps and finish well before.
#[test]
fn a_concurrency_ramp_starts_the_last_client_at_its_end() {
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--requests", "2", "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&qwen32b_bench("1000", "50", "2", &args))).expect("JSON")
    };
    let at_once = run(&[]);
    let ramped = run(&["--concurrency-ramp-duration", "30"]);
    assert!(at_once["bench"].get("concurrency_ramp_s").is_none());
    assert_eq!(ramped["bench"]["concurrency_ramp_s"], 30.0);
    let duration = |r: &serde_json::Value| r["duration_ms"].as_f64().unwrap();
    assert!(duration(&at_once) < 30_000.0, "{}", duration(&at_once));
    assert!(duration(&ramped) > 30_000.0, "{}", duration(&ramped));
    assert!(
        duration(&ramped) < 30_000.0 + duration(&at_once),
        "{}",
        duration(&ramped)
    );
    // Alone on the server, both requests wait for nothing: the same TTFT.
    let ttft = &ramped["ttft_ms"];
    assert_eq!(ttft["p50"], ttft["p99"]);
    assert!(at_once["ttft_ms"]["mean"].as_f64() > ttft["mean"].as_f64());
    let line = bad(&qwen32b_bench(
        "1000",
        "50",
        "2",
        &["--concurrency-ramp-duration", "x"],
    ));
    assert!(line.contains("--concurrency-ramp-duration"), "{line}");
}

/// A model or GPU name with a control character is refused naming its flag, not as a syntax
/// error of the scenario text bench writes for itself (`bench:3: deployment.model: invalid
/// unicode 4-digit hex code`).
#[test]
fn a_control_character_in_a_name_is_refused_by_its_flag() {
    for (flag, model, gpu) in [
        ("--model", "Qwen\u{1b}", "h100_sxm"),
        ("--gpu", "Qwen/Qwen3-32B", "h100\u{1}"),
    ] {
        let err = bad(&[
            "bench",
            "--model",
            model,
            "--gpu",
            gpu,
            "--isl",
            "10",
            "--osl",
            "10",
            "--concurrency",
            "1",
        ]);
        assert!(
            err.starts_with(&format!("dynsim: {flag} ")) && !err.contains("bench:"),
            "{err}"
        );
    }
}
