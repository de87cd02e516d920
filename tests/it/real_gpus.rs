//! Real deployments: `bench` and `calibrate` through the binary, a scenario with a
//! `[deployment]`, and the feature clock that makes calibration linear.

use dynsim::calibrate::{self, measured};
use dynsim::deployment::profile::Profile;
use dynsim::scenario::EngineKind;

use crate::common::{bad, ok, ok_with_stderr, write};

const MEASURED: &str = "data/measurements/aic_silicon_dense_agg_train.csv";

/// The bundled measurements' text.
fn measured_text() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(MEASURED))
        .unwrap()
}

/// The header of the bundled measurements and the first `n` of its rows that hold every one of
/// `marks`, as a CSV file's text.
fn measured_subset(marks: &[&str], n: usize) -> String {
    let text = measured_text();
    let mut lines = text.lines();
    let mut csv = format!("{}\n", lines.next().unwrap());
    for l in lines
        .filter(|l| marks.iter().all(|m| l.contains(m)))
        .take(n)
    {
        csv.push_str(l);
        csv.push('\n');
    }
    csv
}

/// The path of the bundled profile of `engine`.
fn bundled_profile_path(engine: &str) -> String {
    format!("{}/data/profiles/{engine}.toml", env!("CARGO_MANIFEST_DIR"))
}

/// The bundled profile of `engine`, as TOML.
fn bundled_profile(engine: &str) -> toml::Value {
    toml::from_str(&std::fs::read_to_string(bundled_profile_path(engine)).unwrap()).unwrap()
}

/// `calibrate MEASURED --jobs 2 EXTRA.. --out PROFILE`: what it prints and the profile it wrote.
fn calibrate_into(measured: &str, profile: &std::path::Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["calibrate", measured, "--jobs", "2"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", profile.to_str().unwrap()]);
    (ok(&args), std::fs::read_to_string(profile).unwrap())
}

/// The line of `calibrate`'s output with the errors over all rows.
fn all_rows(out: &str) -> &str {
    out.lines().find(|l| l.starts_with("all ")).unwrap()
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).expect("one JSON object")
}

/// A command line written as one string of words (`"bench --model M ..."`), then `extra`.
fn words<'a>(line: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    line.split_whitespace()
        .chain(extra.iter().copied())
        .collect()
}

/// `bench --json` of Llama-3.1-8B-Instruct on H100s, 4 clients of 1,024 + 64 tokens, then `extra`.
fn llama8b_bench(extra: &[&str]) -> serde_json::Value {
    llama8b_clients("4", extra)
}

/// [`llama8b_bench`] with `clients` clients.
fn llama8b_clients(clients: &str, extra: &[&str]) -> serde_json::Value {
    json(&llama8b_args(clients, extra))
}

/// The arguments of [`llama8b_clients`].
fn llama8b_args<'a>(clients: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "bench",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "h100_sxm",
        "--isl",
        "1024",
        "--osl",
        "64",
        "--concurrency",
        clients,
        "--json",
    ];
    args.extend_from_slice(extra);
    args
}

/// `bench` of Qwen3-32B on 2 x H100, 8 clients of 1,024 + 128 tokens, then `extra`.
fn qwen_bench<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    crate::common::qwen32b_bench("1024", "128", "8", extra)
}

#[test]
fn bench_reports_run_metrics_and_what_the_deployment_allows() {
    let r = llama8b_bench(&[]);
    // 20 requests per client, AIConfigurator's convention.
    assert_eq!(r["requests"], 80);
    for key in ["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"] {
        for stat in ["mean", "p50", "p90", "p99"] {
            assert!(r[key][stat].as_f64().unwrap() > 0.0, "{key}.{stat}");
        }
    }
    let d = &r["deployments"][0];
    assert_eq!(d["model"], "meta-llama/Llama-3.1-8B");
    assert_eq!(d["kv_dtype"], "bf16");
    assert_eq!(d["kv_bytes_per_token"], 131_072);
    let b = &r["bench"];
    let kv = b["kv_capacity_tokens"].as_u64().unwrap();
    assert_eq!(b["max_batch"].as_u64().unwrap(), kv / (1024 + 64));
    assert_eq!(
        b["max_num_seqs"].as_u64().unwrap(),
        4,
        "AIConfigurator's: the concurrency"
    );
    let tps = r["output_tokens_per_s"].as_f64().unwrap();
    assert_eq!(b["output_tokens_per_s_per_gpu"].as_f64().unwrap(), tps);
    // The same on two GPUs: per GPU is half the total.
    let r2 = llama8b_bench(&["--tp", "2"]);
    let tps2 = r2["output_tokens_per_s"].as_f64().unwrap();
    let per_gpu = r2["bench"]["output_tokens_per_s_per_gpu"].as_f64().unwrap();
    assert!((per_gpu - tps2 / 2.0).abs() < 1e-3, "{per_gpu} vs {tps2}");
    assert!(tps2 > tps, "two GPUs decode faster");
}

#[test]
fn bench_runs_tensorrt_llm_with_its_memory_rule_limits_and_profile() {
    let bench = |engine: &str| llama8b_bench(&["--engine", engine]);
    let (vllm, trt) = (bench("vllm"), bench("trtllm"));
    let kv = |r: &serde_json::Value| r["bench"]["kv_capacity_tokens"].as_u64().unwrap();
    // 0.9 of what the weights leave holds more than 0.9 of the GPU less the weights.
    assert!(kv(&trt) > kv(&vllm), "{} {}", kv(&trt), kv(&vllm));
    assert_eq!(trt["bench"]["max_num_seqs"].as_u64().unwrap(), 4);
    assert_eq!(trt["preemptions"].as_u64().unwrap(), 0);
    assert_eq!(trt["acks"].as_u64().unwrap(), 80);
    assert_ne!(trt["ttft_ms"], vllm["ttft_ms"], "its own fitted profile");
}

/// SGLang's KV share is its own default for the GPU (server_args.py's
/// `_handle_gpu_memory_settings`), not vLLM's 0.9: Qwen3-32B in bf16 on one H100, benchmarked
/// with 16 clients (CUDA graphs for batches up to 16, AIConfigurator's rule) reserves 512 +
/// 1.5 x 8,192 + 2 x 16 + 1,024 / 8 = 12,960 MiB of the 81,080 CUDA reports: a share of 0.840,
/// and 0.840 x 79.18 GiB − 65.52 GB of weights − 0.13 GiB = 5.75 GB of KV, 1,371 blocks of 16
/// tokens of 262,144 bytes, one kept back: 21,920 tokens. At 0.9, less vLLM's sampler reserve
/// (which SGLang does not take), it was 41,024.
#[test]
fn sglang_sizes_its_kv_by_its_own_default_share_of_memory() {
    const QWEN: &str = "bench --model Qwen/Qwen3-32B --gpu h100_sxm --precision bf16 --isl 1024 \
        --osl 128 --concurrency 16 --requests 16 --json";
    let bench = |extra: &[&str]| json(&words(QWEN, extra))["deployments"][0].clone();
    let sglang = bench(&["--engine", "sglang"]);
    assert_eq!(sglang["memory_share"].as_f64().unwrap(), 0.84);
    assert_eq!(sglang["kv_capacity_tokens"].as_u64().unwrap(), 21_920);
    let set = bench(&[
        "--engine",
        "sglang",
        "--set",
        "engine.sglang.mem_fraction_static=0.9",
    ]);
    assert_eq!(set["memory_share"].as_f64().unwrap(), 0.9);
    assert_eq!(
        set["kv_capacity_tokens"].as_u64().unwrap(),
        41_376,
        "no sampler reserve"
    );
    // SGLang's own CUDA graphs on an H100 below TP 4 (256) reserve 992 MiB more: 0.834.
    let graphs = bench(&[
        "--engine",
        "sglang",
        "--set",
        "engine.sglang.cuda_graph_max_bs=auto",
    ]);
    assert_eq!(graphs["memory_share"].as_f64().unwrap(), 0.834);
    // On a B200 (178.24 GiB as CUDA reports it) SGLang's chunk is 16,384 tokens, whose
    // activations it reserves: 512 + 24,576 + 32 + 128 = 25,248 MiB of 182,517.76, 0.862; with
    // the 8,192 of smaller GPUs, 12,960 MiB and 0.929.
    let b200 = |extra: &[&str]| {
        let line = "bench --model meta-llama/Llama-3.1-70B --gpu b200_sxm --precision fp8 \
            --engine sglang --isl 1024 --osl 128 --concurrency 16 --requests 16 --json";
        json(&words(line, extra))["deployments"][0]["memory_share"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(b200(&[]), 0.862);
    assert_eq!(
        b200(&["--set", "engine.sglang.chunked_prefill_size=8192"]),
        0.929
    );
    let vllm = bench(&[]);
    assert_eq!(vllm["memory_share"].as_f64().unwrap(), 0.9);
    assert_eq!(vllm["kv_capacity_tokens"].as_u64().unwrap(), 41_024);
    for (set, problem) in [
        (
            "engine.sglang.mem_fraction_static=1.5",
            "must be in (0, 1], or \"auto\"",
        ),
        (
            "engine.sglang.mem_fraction_static=\"most\"",
            "expected f64, or \"auto\"",
        ),
        (
            "engine.sglang.cuda_graph_max_bs=100000",
            "engine.sglang.mem_fraction_static = \"auto\" is SGLang's default on h100_sxm at tp = 1: -1.626",
        ),
        (
            "engine.sglang.cuda_graph_max_bs=0",
            "must be at least 1, or \"auto\"",
        ),
    ] {
        let e = bad(&words(
            "bench --model Qwen/Qwen3-32B --gpu h100_sxm --engine sglang --isl 1024 --osl 128 \
             --concurrency 16",
            &["--set", set],
        ));
        assert!(e.contains(problem), "{set}: {e}");
    }
}

/// SGLang's own `max_running_requests` follows the deployment's KV (tp_worker.py: its request
/// table, KV tokens / context x 512 held between 2,048 and 4,096, and at most half the KV's
/// tokens), not the 256 of Dynamo's mocker: 300 clients all run at once, where 256 leave 44
/// waiting.
#[test]
fn sglang_runs_as_many_requests_as_its_kv_allows_by_default() {
    let bench = |running: &str| {
        let set = format!("engine.sglang.max_running_requests={running}");
        json(&words(
            "bench --model meta-llama/Llama-3.1-8B-Instruct --gpu h200_sxm --precision fp8 \
             --engine sglang --isl 512 --osl 1024 --concurrency 300 --requests 600 --json",
            &["--set", &set],
        ))
    };
    let (own, mocker) = (bench("\"auto\""), bench("256"));
    // The bench's context is its 1,536 tokens: thousands of rows, held at 4,096.
    assert_eq!(own["bench"]["max_num_seqs"].as_u64().unwrap(), 4096);
    assert_eq!(mocker["bench"]["max_num_seqs"].as_u64().unwrap(), 256);
    let ttft = |r: &serde_json::Value| r["ttft_ms"]["mean"].as_f64().unwrap();
    assert!(
        ttft(&own) < ttft(&mocker),
        "{} {}",
        ttft(&own),
        ttft(&mocker)
    );
}

#[test]
fn bench_runs_sglang_as_aiconfigurator_configures_it_with_its_profile() {
    let (vllm, sglang) = (llama8b_bench(&[]), llama8b_bench(&["--engine", "sglang"]));
    // max_running_requests = the concurrency (AIConfigurator's benchmark/sglang.rule).
    assert_eq!(sglang["bench"]["max_num_seqs"].as_u64().unwrap(), 4);
    assert_eq!(sglang["acks"].as_u64().unwrap(), 80);
    assert_eq!(sglang["rejected"].as_u64().unwrap(), 0);
    assert_ne!(
        sglang["ttft_ms"], vllm["ttft_ms"],
        "its own scheduler and fitted profile"
    );
    assert_ne!(sglang["tpot_ms"], vllm["tpot_ms"]);
    // Mixed chunks off (SGLang's default): the prefills leave the decodes waiting, so a
    // request's tokens come further apart.
    let apart = llama8b_bench(&[
        "--engine",
        "sglang",
        "--set",
        "engine.sglang.enable_mixed_chunk=false",
    ]);
    let tpot = |r: &serde_json::Value| r["tpot_ms"]["mean"].as_f64().unwrap();
    assert!(
        tpot(&apart) > tpot(&sglang),
        "{} {}",
        tpot(&apart),
        tpot(&sglang)
    );
}

#[test]
fn bench_refuses_what_cannot_be_served_naming_the_flag() {
    let base = ["--isl", "1024", "--osl", "128", "--concurrency", "8"];
    let run = |extra: &[&str]| {
        let mut args = vec!["bench"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&base);
        bad(&args)
    };
    let e = run(&["--model", "meta-llama/Llama-3.1-70B", "--gpu", "h100_sxm"]);
    assert!(
        e.starts_with("dynsim: --tp 1: meta-llama/Llama-3.1-70B in bf16 needs 141.1 GB of weights; tp = 1 x h100_sxm holds 80 GiB = 85.9 GB"),
        "{e}"
    );
    assert!(e.ends_with("use tp >= 2"), "{e}");
    let e = run(&[
        "--model",
        "Qwen/Qwen3-32B",
        "--gpu",
        "h100_sxm",
        "--tp",
        "2",
        "--precision",
        "fp4",
    ]);
    assert!(
        e.contains("--precision fp4: needs FP4 tensor cores, which h100_sxm lacks"),
        "{e}"
    );
    // Qwen3-8B on one H100, 1,024 + 128 tokens, `c` clients.
    let clients = |c: &str| {
        bad(&[
            "bench",
            "--model",
            "Qwen/Qwen3-8B",
            "--gpu",
            "h100_sxm",
            "--isl",
            "1024",
            "--osl",
            "128",
            "--concurrency",
            c,
        ])
    };
    // The weights fit; 100,000 running requests' sampler reserve does not: the flag that set
    // the limit is named, not --tp.
    let e = clients("100000");
    assert!(
        e.starts_with("dynsim: --concurrency 100000: running requests leave no KV on 1 x h100_sxm"),
        "{e}"
    );
    // A --set of the user's own is named as written, not as the flag bench sets it from; a
    // default request count too large is the clients' doing.
    let e = run(&[
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100_sxm",
        "--set",
        "engine.vllm.max_num_seqs=0",
    ]);
    assert!(
        e.starts_with("dynsim: --set: engine.vllm.max_num_seqs = 0"),
        "{e}"
    );
    let e = clients("1000000");
    assert!(
        e.starts_with("dynsim: --concurrency 1000000: is 20000000 requests at 20 per client"),
        "{e}"
    );
    // Past a TOML integer (2^63): the flag and its range, not a line of bench's own scenario.
    let e = run(&[
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "h100_sxm",
        "--tp",
        "9223372036854775808",
    ]);
    assert_eq!(e, "dynsim: --tp 9223372036854775808: must be 1 to 64");
    let e = run(&["--model", "Qwen/Qwen3-33B", "--gpu", "h100_sxm"]);
    assert!(
        e.contains("is not a known model (one of Qwen/Qwen3-0.6B,"),
        "{e}"
    );
    let e = run(&["--model", "Qwen/Qwen3-32B", "--gpu", "h900"]);
    assert!(
        e.contains("is not a known GPU (one of a100_sxm, h100_sxm,"),
        "{e}"
    );
    let long = |model: &str, tp: &str| {
        bad(&[
            "bench",
            "--model",
            model,
            "--gpu",
            "h100_sxm",
            "--tp",
            tp,
            "--isl",
            "100000",
            "--osl",
            "128",
            "--concurrency",
            "1",
        ])
    };
    let e = long("meta-llama/Llama-3.1-70B", "2");
    assert!(
        e.starts_with("dynsim: --isl: isl + osl = 100128 tokens"),
        "{e}"
    );
    assert!(
        e.contains("tokens of KV that meta-llama/Llama-3.1-70B in bf16 on 2 x h100_sxm leaves"),
        "{e}"
    );
    // Past the model's own context (Qwen3-32B's 40,960 tokens), as vLLM refuses it.
    let e = long("Qwen/Qwen3-32B", "1");
    assert_eq!(
        e,
        "dynsim: --isl: isl + osl = 100128 tokens is more than Qwen/Qwen3-32B's context of \
         40960 tokens (`max_context`, its config's max_position_embeddings), which vLLM refuses"
    );
}

#[test]
fn a_user_model_file_is_read_and_its_bad_line_named() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/models/qwen3-8b.toml"
    ))
    .unwrap()
    .replace("name = \"Qwen/Qwen3-8B\"", "name = \"my/model\"");
    let good = write(dir.path(), "mine.toml", &text);
    let r = json(&[
        "bench",
        "--model-file",
        &good,
        "--gpu",
        "h100_sxm",
        "--isl",
        "512",
        "--osl",
        "16",
        "--concurrency",
        "2",
        "--json",
    ]);
    assert_eq!(r["deployments"][0]["model"], "my/model");
    let broken = write(
        dir.path(),
        "broken.toml",
        &text.replace("intermediate_size = 12288", "intermediate_size = 1228"),
    );
    let e = bad(&[
        "bench",
        "--model-file",
        &broken,
        "--gpu",
        "h100_sxm",
        "--isl",
        "512",
        "--osl",
        "16",
        "--concurrency",
        "2",
    ]);
    assert!(
        e.starts_with("dynsim: --model-file "),
        "the flag given: {e}"
    );
    assert!(e.contains("broken.toml:"), "{e}");
    assert!(e.contains(": parameters: "), "{e}");
    let args = |flag: &'static str, path: &str| {
        let mut a = vec!["bench", flag, path, "--gpu", "h100_sxm", "--isl", "8"];
        a.extend(["--osl", "4", "--concurrency", "1"]);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    // A model without a name is refused at its line; a file given to --model is sent to
    // --model-file, rather than reported under a flag that was not given.
    let unnamed = write(
        dir.path(),
        "unnamed.toml",
        &text.replace("name = \"my/model\"", "name = \"\""),
    );
    let a = args("--model-file", &unnamed);
    let e = bad(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        e.contains("unnamed.toml:") && e.contains(": name: must name the model"),
        "{e}"
    );
    let a = args("--model", &good);
    let e = bad(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        e.starts_with(&format!(
            "dynsim: --model {good}: names a model file: give it with --model-file"
        )),
        "{e}"
    );
}

#[test]
fn a_scenario_deployment_derives_kv_and_refuses_hand_set_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = "name = \"real\"\n\
        [deployment]\nmodel = \"Qwen/Qwen3-8B\"\ngpu = \"h200_sxm\"\ntp = 1\nprecision = \"fp8\"\n\
        [workload]\nkind = \"synthetic\"\nrequests = 40\nrate_per_s = 20.0\n\
        [cluster]\nworkers = 2\n";
    let path = write(dir.path(), "real.toml", scenario);
    let r = json(&["run", &path, "--json"]);
    let d = &r["deployments"][0];
    assert_eq!(
        (d["pool"].as_str(), d["kv_dtype"].as_str()),
        (Some("workers"), Some("fp8"))
    );
    // Qwen3-8B's KV in fp8: 36 layers x 8 heads x 128 x 2 x 1 byte.
    assert_eq!(d["kv_bytes_per_token"], 73_728);
    assert_eq!(
        d["kv_capacity_blocks"].as_u64().unwrap(),
        d["kv_capacity_tokens"].as_u64().unwrap() / 16
    );
    assert!(r["ttft_ms"]["mean"].as_f64().unwrap() > 0.0);
    // KV capacity is derived: setting it too is refused where it is set.
    let both = write(
        dir.path(),
        "both.toml",
        &format!("{scenario}kv_capacity_blocks = 100\n"),
    );
    let e = bad(&["run", &both]);
    assert!(
        e.contains(
            "both.toml:13: cluster.kv_capacity_blocks = 100 is derived from the [deployment]"
        ),
        "{e}"
    );
    // The roofline needs a deployment.
    let none = write(dir.path(), "none.toml", "[timing]\nmodel = \"roofline\"\n");
    let e = bad(&["run", &none]);
    assert!(
        e.contains("none.toml:2: timing.model = \"roofline\" needs a [deployment]"),
        "{e}"
    );
}

/// The measured rows of the bundled file this test uses: small enough to simulate in a test.
fn small_rows() -> Vec<measured::MeasuredRow> {
    let text = measured_text();
    let all = measured::parse(std::path::Path::new(MEASURED), &text).unwrap();
    all.rows
        .into_iter()
        .filter(|r| {
            r.backend == "vllm" && r.concurrency <= 16 && u64::from(r.osl) <= 128 && r.isl <= 1024
        })
        .collect()
}

/// A roofline step lasts coefficients · features, so the feature clock's sums give each row's
/// mean TTFT and TPOT as the run itself measured them (to the report's rounding): the linearity
/// calibration rests on.
#[test]
fn the_feature_clock_reproduces_the_runs_own_means() {
    let rows = small_rows();
    assert!(rows.len() >= 4, "{} rows", rows.len());
    let profile = Profile::start();
    let predictions = calibrate::predict(
        &rows,
        EngineKind::Vllm,
        &calibrate::Setup::default(),
        &profile,
        2,
        &|| (),
    )
    .unwrap();
    for (row, p) in rows.iter().zip(&predictions) {
        let (ttft, tpot) = calibrate::linear_means(p, &profile, row);
        assert!(
            (ttft - p.ttft_ms).abs() < 2e-3,
            "{}: {ttft} vs {}",
            row.id,
            p.ttft_ms
        );
        assert!(
            (tpot - p.tpot_ms).abs() < 2e-3,
            "{}: {tpot} vs {}",
            row.id,
            p.tpot_ms
        );
    }
}

/// Calibration on a few rows from a deliberately bad start (every step coefficient three
/// times the start's) finds coefficients that predict those rows better than the start did.
#[test]
fn calibration_on_a_subset_beats_its_start() {
    let rows = small_rows();
    let mut start = Profile::start();
    start.step.iter_mut().for_each(|c| *c *= 3.0);
    let before = calibrate::predict(
        &rows,
        EngineKind::Vllm,
        &calibrate::Setup::default(),
        &start,
        2,
        &|| (),
    )
    .unwrap();
    let (_, before) = calibrate::errors(rows.iter().zip(&before));
    let fitted = calibrate::calibrate(
        &rows,
        EngineKind::Vllm,
        &calibrate::Setup::default(),
        &start,
        calibrate::FitOptions::default(),
        2,
        &|| (),
    )
    .unwrap();
    let (_, after) = calibrate::errors(rows.iter().zip(&fitted.predictions));
    assert!(
        after.ttft_mape + after.tpot_mape < 0.5 * (before.ttft_mape + before.tpot_mape),
        "before {before:?}, after {after:?}"
    );
    // Rates never beat the datasheet, on any GPU.
    for k in 0..dynsim::deployment::features::RATE_FEATURES {
        assert!(fitted.profile.step[k] >= 1.0, "{:?}", fitted.profile.step);
    }
    for own in fitted.profile.gpu_rates.values() {
        assert!(own.iter().all(|&c| c >= 1.0), "{own:?}");
    }
}

#[test]
fn calibrate_writes_a_profile_bench_reads_and_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    // The header and four vLLM rows of the bundled file.
    let csv = measured_subset(&[",vllm,", ",1024,128,8,"], 4);
    let measured = write(dir.path(), "m.csv", &csv);
    let profile = dir.path().join("p.toml");
    let (out, text) = calibrate_into(&measured, &profile, &[]);
    assert!(out.contains("4 vllm rows"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("all ")), "{out}");
    assert!(text.starts_with("# Fitted by `dynsim calibrate"), "{text}");
    let checked = ok(&[
        "calibrate",
        &measured,
        "--check",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    // Checking the fitted profile gives the errors the fit printed.
    assert_eq!(all_rows(&checked), all_rows(&out));
    let r = json(&qwen_bench(&[
        "--profile",
        profile.to_str().unwrap(),
        "--json",
    ]));
    assert!(r["ttft_ms"]["mean"].as_f64().unwrap() > 0.0);
    // A bad profile line is named.
    let broken = write(
        dir.path(),
        "bad.toml",
        &text.replace("kv_read = ", "kv_read = -"),
    );
    let e = bad(&qwen_bench(&["--profile", &broken]));
    assert!(e.contains("bad.toml:") && e.contains("step.kv_read"), "{e}");
    // Another engine's profile (or no engine's) checks nothing about these rows.
    let sglang = write(
        dir.path(),
        "sglang.toml",
        &text.replace("engine = \"vllm\"", "engine = \"sglang\""),
    );
    assert_ne!(text, std::fs::read_to_string(&sglang).unwrap());
    let e = bad(&["calibrate", &measured, "--check", "--profile", &sglang]);
    assert!(
        e.contains("sglang.toml:") && e.contains(": engine: \"sglang\": this profile was fitted for another engine than --engine vllm"),
        "{e}"
    );
    let nonsense = write(
        dir.path(),
        "nonsense.toml",
        &text.replace("engine = \"vllm\"", "engine = \"nonsense\""),
    );
    let e = bad(&["calibrate", &measured, "--check", "--profile", &nonsense]);
    assert!(
        e.contains(": engine: \"nonsense\": this profile was fitted for another engine"),
        "{e}"
    );
}

/// `calibrate --check` predicts a measured row with the benchmark `bench` runs for it: the same
/// deployment, protocol and server, so the same means. Until Dec 5 2026 a vLLM 0.12.0 row of
/// FP8 weights was checked with a bf16 KV cache, where `bench --protocol aiperf`, like the
/// server AIConfigurator's generator launched, ran an fp8 one.
#[test]
fn calibrate_predicts_a_row_as_bench_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(
        &[",vllm,0.12.0,nvidia/Llama-3.1-8B-Instruct-FP8,h200_sxm,fp8,agg,8000,100,16,1,"],
        1,
    );
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let measured = write(dir.path(), "m.csv", &csv);
    let predictions = dir.path().join("p.csv");
    ok(&[
        "calibrate",
        &measured,
        "--check",
        "--predictions",
        predictions.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&predictions).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cell = |name: &str| row[header.iter().position(|&h| h == name).unwrap()].to_string();
    let r = json(&words(
        "bench --model nvidia/Llama-3.1-8B-Instruct-FP8 --gpu h200_sxm --tp 1 --precision fp8 \
         --isl 8000 --osl 100 --concurrency 16 --protocol aiperf --json",
        &[],
    ));
    assert_eq!(r["deployments"][0]["kv_dtype"], "fp8");
    let mean = |metric: &str| format!("{}", r[metric]["mean"].as_f64().unwrap());
    assert_eq!(
        (cell("predicted_ttft_ms"), cell("predicted_tpot_ms")),
        (mean("ttft_ms"), mean("tpot_ms"))
    );
}

#[test]
fn a_prefill_worker_checks_only_the_prompt_and_first_token_it_serves() {
    // Dynamo asks the prefill worker for one token (`max_tokens` 1): a prefill pool whose
    // max_model_len holds the prompt and that token serves a request whose whole length only
    // the decode pool accepts. Every engine rejected all four on the prefill side before.
    let dir = tempfile::tempdir().unwrap();
    let text = "[workload]\nkind = \"synthetic\"\nrequests = 4\ngroups = 4\n\
        rate_per_s = 1.0\narrival = \"fixed\"\n\
        input = { dist = \"fixed\", tokens = 1500 }\noutput = { dist = \"fixed\", tokens = 1000 }\n\
        [disagg]\nenabled = true\n\
        [disagg.prefill_deployment]\nmodel = \"Qwen/Qwen3-8B\"\ngpu = \"h100_sxm\"\n\
        max_model_len = 2048\n\
        [disagg.decode_deployment]\nmodel = \"Qwen/Qwen3-8B\"\ngpu = \"h100_sxm\"\n";
    let path = write(dir.path(), "pd.toml", text);
    for engine in ["vllm", "trtllm", "sglang"] {
        let kind = format!("engine.kind={engine}");
        let r = json(&["run", &path, "--set", &kind, "--json"]);
        assert_eq!(r["rejected"], 0, "{engine}");
        assert_eq!(r["per_worker"][1]["completed"], 4, "{engine}");
    }
    // A request longer than the decode pool accepts is still refused (on the decode side).
    let r = json(&[
        "run",
        &path,
        "--set",
        "disagg.decode_deployment.max_model_len=2048",
        "--json",
    ]);
    assert_eq!(r["rejected"], 4);
}

#[test]
fn disaggregated_pools_take_a_deployment_each_and_share_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let base = "[deployment]\nmodel = \"meta-llama/Llama-3.1-8B\"\ngpu = \"h100_sxm\"\n\
        max_model_len = 8192\n\
        [workload]\nkind = \"synthetic\"\nrequests = 20\nrate_per_s = 10.0\n\
        [disagg]\nenabled = true\nlink_gbps = 50.0\n\
        [disagg.decode_deployment]\nmodel = \"meta-llama/Llama-3.1-8B-Instruct\"\n\
        gpu = \"h200_sxm\"\ntp = 2\nmax_model_len = 8192\n";
    let path = write(dir.path(), "disagg.toml", base);
    let r = json(&["run", &path, "--json"]);
    let pools: Vec<(&str, &str, u64)> = r["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["pool"].as_str().unwrap(),
                d["gpu"].as_str().unwrap(),
                d["tp"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pools,
        [("prefill", "h100_sxm", 1), ("decode", "h200_sxm", 2)]
    );
    assert_eq!(r["acks"], 20);
    // Another model on the decode side cannot take the prefill side's KV.
    let other = write(
        dir.path(),
        "other.toml",
        &base.replace(
            "model = \"meta-llama/Llama-3.1-8B-Instruct\"",
            "model = \"Qwen/Qwen3-8B\"",
        ),
    );
    let e = bad(&["run", &other]);
    assert!(
        e.contains(
            "disagg.decode_deployment.model = \"Qwen/Qwen3-8B\" must be the prefill workers' model"
        ),
        "{e}"
    );
}

/// SGLang's chunk on a B200 is 16,384 tokens (its server_args.py tiers), and the scheduler takes
/// it: a 12,000-token prompt is prefilled in one pass, where 8,192-token chunks take two.
#[test]
fn sglang_chunks_prompts_by_its_own_default_for_the_gpu() {
    let steps = |extra: &[&str]| {
        let line = "bench --model meta-llama/Llama-3.1-8B --gpu b200_sxm --precision fp8 --engine \
            sglang --isl 12000 --osl 8 --concurrency 1 --requests 2 --json";
        json(&words(line, extra))["per_worker"][0]["steps"]
            .as_u64()
            .unwrap()
    };
    let own = steps(&[]);
    assert_eq!(
        own,
        steps(&["--set", "engine.sglang.chunked_prefill_size=16384"])
    );
    assert_eq!(
        own + 2,
        steps(&["--set", "engine.sglang.chunked_prefill_size=8192"]),
        "one more pass per prompt"
    );
}

/// Under SGLang each pool takes SGLang's defaults for its own GPU: prefill workers on one H100
/// chunk by 8,192 and reserve 512 + 12,288 + 2 x 256 + 128 = 13,440 MiB (share 0.834); decode
/// workers on two B200s chunk by 16,384 and capture graphs up to 512: 512 + 24,576 + 2 x 512 +
/// 256 = 26,368 MiB of 183,480.32 (0.856), not the 0.923 the prefill side's chunk would leave.
#[test]
fn disaggregated_sglang_pools_each_take_the_defaults_of_their_own_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[engine]\nkind = \"sglang\"\n\
        [deployment]\nmodel = \"meta-llama/Llama-3.1-8B\"\ngpu = \"h100_sxm\"\n\
        max_model_len = 8192\n\
        [workload]\nkind = \"synthetic\"\nrequests = 20\nrate_per_s = 10.0\n\
        [disagg]\nenabled = true\nlink_gbps = 50.0\n\
        [disagg.decode_deployment]\nmodel = \"meta-llama/Llama-3.1-8B\"\n\
        gpu = \"b200_sxm\"\ntp = 2\nmax_model_len = 8192\n";
    let r = json(&["run", &write(dir.path(), "sglang.toml", text), "--json"]);
    let shares: Vec<(&str, f64)> = r["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["pool"].as_str().unwrap(),
                d["memory_share"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(shares, [("prefill", 0.834), ("decode", 0.856)]);
    assert_eq!(r["acks"], 20);
}

/// `calibrate --check` predicts the rows it can and names each row whose deployment it refuses,
/// instead of printing nothing because of one such row (a row of Llama-3.1-70B bf16 on one H100
/// once made the whole check exit 2).
#[test]
fn calibrate_check_leaves_out_a_refused_row_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(&[",vllm,", ",1024,128,8,"], 2);
    let header = csv.lines().next().unwrap();
    let refused =
        "too_big,vllm,0.12.0,meta-llama/Llama-3.1-70B,h100_sxm,,agg,1024,128,4,1,1,100,10\n";
    let measured = write(dir.path(), "m.csv", &format!("{csv}{refused}"));
    let (stdout, stderr) = ok_with_stderr(&["calibrate", &measured, "--check", "--jobs", "1"]);
    assert!(
        stdout.starts_with("2 vllm rows")
            && stdout.contains(
                "(0 of other engines, 0 not aggregated serving, 1 refused, not predicted)"
            ),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("all ")), "{stdout}");
    assert!(
        stderr.contains("measured row too_big (line 4) is not predicted")
            && stderr.contains("use tp >= 2"),
        "{stderr}"
    );
    // Every row refused: an error, in one line.
    let only = write(dir.path(), "only.csv", &format!("{header}\n{refused}"));
    let e = bad(&["calibrate", &only, "--check"]);
    assert!(
        e.contains("too_big") && e.contains("no vllm row can be predicted"),
        "{e}"
    );
}

/// A file of other tools' deployments (AIConfigurator's whole `silicon_sample.csv` has int4
/// checkpoints and 72-GPU NVLink domains beside the rows dynsim predicts): `--check` predicts
/// the rows it models and names each of the engine's others; another engine's do not count
/// against it; a fit stops at the engine's first, in one line naming file, line and column.
#[test]
fn calibrate_check_names_rows_dynsim_does_not_model_and_predicts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(&[",vllm,", ",1024,128,8,"], 2);
    let int4 = "kimi,vllm,,moonshotai/Kimi-K2.5,b200_sxm,int4,agg,1024,1024,4,8,1,100,10\n";
    let nvl72 = "dsr1,sglang,,deepseek-ai/DeepSeek-R1,gb200,fp8,agg,1024,1024,5632,72,1,100,10\n";
    let measured = write(dir.path(), "m.csv", &format!("{csv}{int4}{nvl72}"));
    let (stdout, stderr) = ok_with_stderr(&["calibrate", &measured, "--check", "--jobs", "1"]);
    assert!(
        stdout.starts_with("2 vllm rows")
            && stdout.contains(
                "(1 of other engines, 0 not aggregated serving, 1 refused, not predicted)"
            ),
        "{stdout}"
    );
    assert!(
        stderr.contains("measured row kimi (line 4) is not predicted")
            && stderr.contains("m.csv:4: precision: \"int4\" is not a precision")
            && !stderr.contains("dsr1"),
        "{stderr}"
    );
    // A fit uses every row of its engine: it stops at the first it cannot model.
    let e = bad(&["calibrate", &measured]);
    assert!(
        e.contains("kimi") && e.contains("m.csv:4: precision") && !e.contains('\n'),
        "{e}"
    );
    // The other engine's row is named when that engine is checked; with no row left, an error.
    let e = bad(&["calibrate", &measured, "--engine", "sglang", "--check"]);
    assert!(
        e.contains("m.csv:5: tp_size: 72 GPUs") && e.contains("no sglang row can be predicted"),
        "{e}"
    );
}

#[test]
fn calibrate_rates_from_holds_another_profiles_rates_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // The header and three SGLang rows of the bundled file (one deployment, H200).
    let csv = measured_subset(&[",sglang,", ",1000,"], 3);
    let measured = write(dir.path(), "m.csv", &csv);
    let vllm = bundled_profile_path("vllm");
    let profile = dir.path().join("p.toml");
    let (out, written) = calibrate_into(
        &measured,
        &profile,
        &["--engine", "sglang", "--rates-from", &vllm],
    );
    assert!(out.contains("3 sglang rows"), "{out}");
    assert!(
        written.contains("--rates-from "),
        "the header gives the command: {written}"
    );
    // Every GPU section of the vLLM profile is carried, rates unchanged (h200_sxm included).
    let held = bundled_profile("vllm");
    let got: toml::Value = toml::from_str(&written).unwrap();
    for (gpu, rates) in held["gpu"].as_table().unwrap() {
        assert_eq!(&got["gpu"][gpu.as_str()], rates, "{gpu}");
    }
    for k in [
        "gemm_compute",
        "weight_read",
        "attention_compute",
        "kv_read",
        "allreduce",
    ] {
        assert_eq!(got["step"][k], held["step"][k], "{k}");
    }
}

/// `bench` runs under its protocol's request overhead where the profile has one per protocol (the
/// bundled vLLM profile does): one request alone, whose TTFT is its prefill plus that overhead,
/// differs by exactly the difference of the two protocols' overheads, and a protocol that is
/// not one is refused by its key.
#[test]
fn bench_takes_its_protocols_request_overhead() {
    let profile = bundled_profile("vllm");
    let overhead = |p: &str| profile["request"]["by_protocol"][p].as_float().unwrap();
    let ttft = |protocol: &str| {
        let set = format!("timing.protocol={protocol}");
        llama8b_clients("1", &["--requests", "1", "--set", &set])["ttft_ms"]["mean"]
            .as_f64()
            .unwrap()
    };
    let gap = ttft("aiperf") - ttft("aiconfigurator");
    let want = overhead("aiperf") - overhead("aiconfigurator");
    assert!(want > 1.0, "the profile's overheads differ: {want}");
    assert!((gap - want).abs() < 2e-3, "{gap} vs {want}");
    let e = bad(&llama8b_args("1", &["--set", "timing.protocol=vllm_bench"]));
    assert!(e.contains("timing.protocol") && e.contains("aiperf"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

/// `calibrate --gemm-by-precision` on rows of one GPU at two weight precisions (TensorRT-LLM on
/// H100: Qwen3-32B in FP8, Llama-3.1-8B in BF16) writes each precision's GEMM coefficient for
/// that GPU and says so in the header, its `gemm_compute` between them; the profile read back
/// predicts each row at its own precision's (its check's errors are the fit's).
#[test]
fn calibrate_fits_a_gemm_coefficient_per_weight_precision_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let fp8 = measured_subset(&[",trtllm,", "Qwen3-32B,h100_sxm,fp8,agg,1024,128,"], 3);
    let bf16 = measured_subset(
        &[",trtllm,", "Llama-3.1-8B-Instruct,h100_sxm,,agg,1024,"],
        3,
    );
    let csv = format!("{fp8}{}", bf16.split_once('\n').unwrap().1);
    let measured = write(dir.path(), "m.csv", &csv);
    let profile = dir.path().join("p.toml");
    let (out, written) = calibrate_into(
        &measured,
        &profile,
        &["--engine", "trtllm", "--gemm-by-precision"],
    );
    assert!(out.contains("6 trtllm rows"), "{out}");
    assert!(written.contains(" --gemm-by-precision"), "{written}");
    let got: toml::Value = toml::from_str(&written).unwrap();
    let by = got["gemm_by_precision"]["h100_sxm"].as_table().unwrap();
    assert_eq!(by.keys().collect::<Vec<_>>(), ["bf16", "fp8"]);
    let (b, f) = (
        by["bf16"].as_float().unwrap(),
        by["fp8"].as_float().unwrap(),
    );
    let gemm = got["gpu"]["h100_sxm"]["gemm_compute"].as_float().unwrap();
    assert!(
        b != f && gemm >= b.min(f) && gemm <= b.max(f),
        "{b} {f} {gemm}"
    );
    let checked = ok(&[
        "calibrate",
        &measured,
        "--engine",
        "trtllm",
        "--check",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(all_rows(&checked), all_rows(&out));
}

/// `calibrate --gemm-ratios-from` gives a GPU's GEMMs a coefficient at a precision its rows
/// lack from another profile's ratio on that GPU: vLLM's FP8 rows on B200 and the bundled
/// TensorRT-LLM profile's FP4 / FP8 there. The written profile says so in its header, keeps the
/// fitted FP8 coefficient, and `bench` of an FP4 deployment on B200 runs with it.
#[test]
fn calibrate_borrows_a_missing_precisions_gemm_ratio_from_another_profile() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(&[",vllm,", "b200_sxm,fp8,agg,1024,1024,"], 3);
    let measured = write(dir.path(), "m.csv", &csv);
    let profile = dir.path().join("p.toml");
    let trtllm = bundled_profile_path("trtllm");
    let (out, written) = calibrate_into(&measured, &profile, &["--gemm-ratios-from", &trtllm]);
    assert!(out.contains("3 vllm rows"), "{out}");
    assert!(written.contains(" --gemm-ratios-from "), "{written}");
    let got: toml::Value = toml::from_str(&written).unwrap();
    let from = bundled_profile("trtllm");
    let f = |v: &toml::Value, p: &str| v["gemm_by_precision"]["b200_sxm"][p].as_float().unwrap();
    let fitted = got["gpu"]["b200_sxm"]["gemm_compute"].as_float().unwrap();
    assert_eq!(f(&got, "fp8"), fitted);
    let want = fitted * f(&from, "fp4") / f(&from, "fp8");
    assert!((f(&got, "fp4") - want).abs() < 1e-4 * want, "{written}");
    let r = json(&[
        "bench",
        "--model",
        "meta-llama/Llama-3.1-70B",
        "--gpu",
        "b200_sxm",
        "--tp",
        "2",
        "--precision",
        "fp4",
        "--isl",
        "1024",
        "--osl",
        "64",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--profile",
        profile.to_str().unwrap(),
        "--json",
    ]);
    assert!(r["ttft_ms"]["mean"].as_f64().unwrap() > 0.0);
}

/// The bundled SGLang profile charges its rows' per-step floor and request overhead to the
/// protocol they were measured under (aiperf through Dynamo's stack, `[step_by_protocol]` and
/// `[request.by_protocol]`), and times another protocol at vLLM's: one request alone, each of
/// its decode steps differs by exactly the two protocols' per-step costs, and its first token by
/// the two overheads plus that of its one prefill step.
#[test]
fn sglang_charges_its_stacks_step_floor_to_that_protocol_only() {
    let profile = bundled_profile("sglang");
    let step = |p: &str| {
        profile["step_by_protocol"]
            .get(p)
            .unwrap_or(&profile["step"]["step_us"])
            .as_float()
            .unwrap()
            / 1e3
    };
    let overhead = |p: &str| profile["request"]["by_protocol"][p].as_float().unwrap();
    let run = |protocol: &str| {
        let extra = [
            "--engine",
            "sglang",
            "--requests",
            "1",
            "--protocol",
            protocol,
            "--json",
        ];
        let r = json(&crate::common::qwen32b_bench("1024", "64", "1", &extra));
        let mean = |k: &str| r[k]["mean"].as_f64().unwrap();
        (mean("ttft_ms"), mean("tpot_ms"))
    };
    let (aiperf, aic) = (run("aiperf"), run("aiconfigurator"));
    let per_step = step("aiperf") - step("aiconfigurator");
    assert!(per_step > 10.0, "the stack's floor: {per_step} ms a step");
    assert!(
        (aiperf.1 - aic.1 - per_step).abs() < 2e-3,
        "{aiperf:?} {aic:?}"
    );
    let first = overhead("aiperf") - overhead("aiconfigurator") + per_step;
    assert!(
        (aiperf.0 - aic.0 - first).abs() < 2e-3,
        "{aiperf:?} {aic:?}"
    );
}

/// `calibrate --step-by-protocol` refuses a held `step_us`, which it fits per protocol.
#[test]
fn calibrate_refuses_holding_the_step_cost_it_fits_per_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(&[",vllm,", ",1024,128,8,"], 2);
    let measured = write(dir.path(), "m.csv", &csv);
    let e = bad(&[
        "calibrate",
        &measured,
        "--step-by-protocol",
        "--hold",
        "step_us=100",
        "--out",
        dir.path().join("p.toml").to_str().unwrap(),
    ]);
    assert!(e.contains("--hold") && e.contains("step_us"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(!dir.path().join("p.toml").exists());
}

/// `calibrate`'s outputs are checked before any row runs, each by its own flag: a folder that
/// does not exist, two flags naming one file, a plots folder that is a file, a profile that
/// cannot be read, a jitter past a profile's range.
#[test]
fn calibrate_refuses_bad_outputs_and_inputs_before_fitting_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let csv = measured_subset(&[",vllm,", ",1024,128,8,"], 2);
    let measured = write(dir.path(), "m.csv", &csv);
    let nowhere = dir.path().join("no/such/p.toml");
    let nowhere = nowhere.to_str().unwrap();
    let e = bad(&["calibrate", &measured, "--out", nowhere]);
    assert_eq!(
        e,
        format!(
            "dynsim: --out {nowhere}: cannot write: its folder {} does not exist",
            dir.path().join("no/such").display()
        )
    );
    let p = dir.path().join("p.toml");
    let p = p.to_str().unwrap();
    let e = bad(&["calibrate", &measured, "--out", p, "--predictions", p]);
    assert!(
        e.starts_with("dynsim: --predictions: names the same file as --out"),
        "{e}"
    );
    let file = write(dir.path(), "afile", "x");
    let e = bad(&["calibrate", &measured, "--check", "--plots", &file]);
    assert!(
        e.ends_with("is a file, not a folder (--plots takes a folder)"),
        "{e}"
    );
    for flag in ["--profile", "--rates-from", "--gemm-ratios-from"] {
        let e = bad(&["calibrate", &measured, flag, "/no/such.toml", "--out", p]);
        assert!(
            e.starts_with(&format!("dynsim: {flag} /no/such.toml: cannot read")),
            "{e}"
        );
    }
    let e = bad(&["calibrate", &measured, "--jitter-ms", "1e30", "--out", p]);
    assert!(
        e.contains("--jitter-ms") && e.contains("at most 1e9"),
        "{e}"
    );
    assert!(!std::path::Path::new(p).exists(), "nothing written");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary file left: only m.csv and afile"
    );
}

/// A row whose benchmark cannot be set up from one of its cells is named by the file, the row's
/// line and the column, not by the bench flag the user never gave (`--model nosuch`), both in a
/// fit and in a check.
#[test]
fn calibrate_names_a_refused_rows_column_not_a_bench_flag() {
    let dir = tempfile::tempdir().unwrap();
    let header = "id,backend,model_path,system,precision,mode,isl,osl,batch_size,tp_size,pp_size,\
                  silicon_ttft_ms,silicon_tpot_ms";
    let m = write(
        dir.path(),
        "m.csv",
        &format!("{header}\nx,vllm,nosuch,h100_sxm,,agg,1024,128,8,2,1,100,10\n"),
    );
    for check in [false, true] {
        let mut args = vec!["calibrate", m.as_str()];
        if check {
            args.push("--check");
        }
        let e = bad(&args);
        assert!(
            e.contains("m.csv:2: model_path: nosuch: is not a known model")
                && !e.contains("--model"),
            "{e}"
        );
    }
    let c = write(
        dir.path(),
        "c.csv",
        &format!("{header}\nx,vllm,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,1048576,2,1,100,10\n"),
    );
    let e = bad(&["calibrate", &c, "--check"]);
    assert!(
        e.contains("c.csv:2: batch_size: 1048576: is 20971520 requests")
            && !e.contains("--concurrency"),
        "{e}"
    );
}
