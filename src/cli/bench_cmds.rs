//! `bench` and `calibrate`: real deployments, predicted and fitted.

use std::path::PathBuf;

use clap::Args;

use super::parse::{at_least_one, at_least_one_u64, choice, non_negative};
use super::progress::{Progress, ProgressMode};
use super::ExitCode;
use crate::bench::{self, BenchSpec, Protocol};
use crate::deployment::{KvDtype, Precision};
use crate::error::{Error, Result};
use crate::output::write_stdout;
use crate::scenario::{EngineKind, Override};

/// The plots `calibrate --plots` writes into its folder (the output check and the writes read
/// the same names).
const TTFT_PLOT: &str = "ttft.svg";
const TPOT_PLOT: &str = "tpot.svg";

/// `dynsim bench`'s arguments.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The model: a bundled Hugging Face id or alias (meta-llama/Llama-3.1-70B-Instruct,
    /// Qwen/Qwen3-32B, ...).
    #[arg(
        long,
        required_unless_present = "model_file",
        conflicts_with = "model_file"
    )]
    model: Option<String>,
    /// A model file instead of a bundled model (the format of data/models/*.toml).
    #[arg(long, value_name = "PATH")]
    model_file: Option<PathBuf>,
    /// The GPU: a100_sxm, h100_sxm, h200_sxm, b200_sxm, gb200, b300_sxm, gb300 or l40s.
    #[arg(long)]
    gpu: String,
    /// GPUs, tensor parallel.
    #[arg(long, default_value_t = 1, value_parser = at_least_one_u64)]
    tp: u64,
    /// The weights' precision.
    #[arg(long, default_value = "bf16", value_parser = choice::<Precision>(Precision::NAMES))]
    precision: Precision,
    /// The KV cache's dtype (auto: the checkpoint's, as vLLM's auto and AIConfigurator's
    /// generated servers: fp8 with fp8 or fp4 weights, else bf16; under --protocol inferencemax,
    /// its vLLM launch commands': fp8 on Blackwell and the H200, bf16 elsewhere).
    #[arg(long, default_value = "auto", value_parser = choice::<KvDtype>(KvDtype::NAMES))]
    kv_dtype: KvDtype,
    /// The serving engine.
    #[arg(long, default_value = "vllm", value_parser = choice::<EngineKind>(EngineKind::NAMES))]
    engine: EngineKind,
    /// Prompt tokens per request (random text: nothing shared, unless drawn from a pool:
    /// --prompt-pool, --protocol aiperf).
    #[arg(long, value_parser = at_least_one)]
    isl: usize,
    /// Output tokens per request.
    #[arg(long, value_parser = at_least_one)]
    osl: usize,
    /// Clients, each sending its next request when its last completes.
    #[arg(long, value_parser = at_least_one)]
    concurrency: usize,
    /// Requests in all (default: the protocol's, 20 x concurrency for AIConfigurator's aiperf
    /// convention, 10 x for InferenceMAX's; warm-up requests are neither counted nor simulated:
    /// random prompts leave nothing for them to warm, pooled ones (--prompt-pool) would).
    #[arg(long, value_parser = at_least_one)]
    requests: Option<usize>,
    /// Draws every prompt from this many distinct ones (default: every prompt its own; under
    /// --protocol aiperf, 100 on vLLM and SGLang), so the server's prefix cache hits on repeats:
    /// aiperf's synthetic dataset, 100 entries unless --num-dataset-entries says otherwise, as
    /// AIConfigurator's generated bench_run.sh leaves it. Needs fixed prompt lengths (--protocol
    /// aiconfigurator or aiperf).
    #[arg(long, value_parser = at_least_one)]
    prompt_pool: Option<usize>,
    /// The clients join over this many seconds instead of all at once: one client at the
    /// start, one more at each even step, every client at the end (aiperf's
    /// --concurrency-ramp-duration). Default: all at once, as the measured rows were taken.
    #[arg(long, value_name = "SECONDS", value_parser = non_negative)]
    concurrency_ramp_duration: Option<f64>,
    /// The benchmark's convention: aiconfigurator (every prompt isl and answer osl tokens, the
    /// server's token budget concurrency + isl + 1,500), aiperf (the same, every prompt drawn
    /// from aiperf's default dataset of 100, which AIConfigurator's vLLM and SGLang servers
    /// cache and its TensorRT-LLM servers do not) or inferencemax (lengths uniform over 0.8 x
    /// to 1 x isl and osl, vLLM's budget 8,192 and KV dtype: fp8 on Blackwell and the H200,
    /// else bf16). Each takes the request overhead the profile fitted for it, if any
    /// ([request.by_protocol]).
    #[arg(long, default_value = "aiconfigurator", value_parser = choice::<Protocol>(&Protocol::NAMES))]
    protocol: Protocol,
    /// A profile `dynsim calibrate` wrote (default: the engine's bundled one).
    #[arg(long, value_name = "PROFILE.toml")]
    profile: Option<PathBuf>,
    /// Overrides any key of the benchmark's scenario by its dotted path (repeatable), e.g.
    /// --set engine.vllm.gpu_memory_utilization=0.8.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Prints one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

impl BenchArgs {
    fn spec(&self) -> Result<BenchSpec> {
        let model = match (&self.model, &self.model_file) {
            (_, Some(path)) => {
                if !crate::deployment::model::names_a_file(&path.to_string_lossy()) {
                    return Err(Error::arg("--model-file", "must name a .toml model file"));
                }
                std::path::absolute(path)
                    .map_err(|e| Error::file(path, format!("cannot resolve: {e}")))?
                    .display()
                    .to_string()
            }
            (Some(m), None) if crate::deployment::model::names_a_file(m) => {
                // A path given as a name: said so, rather than errors that blame --model-file.
                return Err(Error::arg(
                    format!("--model {m}"),
                    "names a model file: give it with --model-file",
                ));
            }
            (Some(m), None) => m.clone(),
            (None, None) => unreachable!("clap requires one"),
        };
        let tokens = |flag: &str, n: usize| {
            u32::try_from(n)
                .ok()
                .filter(|&t| u64::from(t) <= crate::limits::MAX_CONTEXT_TOKENS)
                .ok_or_else(|| {
                    Error::arg(
                        flag,
                        format!("must be at most {}", crate::limits::MAX_CONTEXT_TOKENS),
                    )
                })
        };
        Ok(BenchSpec {
            model,
            gpu: self.gpu.clone(),
            tp: self.tp,
            precision: self.precision,
            kv_dtype: self.kv_dtype,
            engine: self.engine,
            isl: tokens("--isl", self.isl)?,
            osl: tokens("--osl", self.osl)?,
            concurrency: self.concurrency,
            requests: self.requests,
            prompt_pool: self.prompt_pool,
            concurrency_ramp_s: self.concurrency_ramp_duration,
            protocol: self.protocol,
            profile: self.profile.clone(),
            set: self.set.clone(),
        })
    }
}

/// Runs the benchmark and prints its report.
pub fn bench(a: BenchArgs) -> Result<ExitCode> {
    let spec = a.spec()?;
    let report = bench::run(&spec)?;
    for w in &report.report.warnings {
        tracing::warn!("{w}");
    }
    let text = if a.json {
        serde_json::to_string(&report).expect("in-memory JSON") + "\n"
    } else {
        report.table()
    };
    write_stdout(text.as_bytes())?;
    Ok(0)
}

/// `dynsim calibrate`'s arguments.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Measured benchmark rows, in the columns of data/measurements/ (a user's own benchmark in
    /// the same columns works too).
    #[arg(value_name = "MEASURED.csv")]
    measured: PathBuf,
    /// The engine whose rows are fitted (the `backend` column).
    #[arg(long, default_value = "vllm", value_parser = choice::<EngineKind>(EngineKind::NAMES))]
    engine: EngineKind,
    /// Writes the fitted profile here (bench --profile and a scenario's timing.profile read it).
    #[arg(long, value_name = "PROFILE.toml")]
    out: Option<PathBuf>,
    /// The profile to start the fit from (default: fixed plausible efficiencies, so that the fit
    /// depends on the measurements alone), or with --check to predict with (default: the
    /// engine's bundled one).
    #[arg(long, value_name = "PROFILE.toml")]
    profile: Option<PathBuf>,
    /// Holds the rate coefficients (GEMMs, weight and KV reads, attention, all-reduces) at this
    /// profile's, per GPU, and fits only the fixed costs and the request overhead: for rows too
    /// few or too odd to pin a GPU's rates (one deployment of an engine), timed at rates another
    /// engine's rows measured; the written profile keeps those rates for every GPU they name.
    #[arg(long, value_name = "PROFILE.toml", conflicts_with = "check")]
    rates_from: Option<PathBuf>,
    /// Fits the request overhead once per benchmark protocol of the rows (aiconfigurator,
    /// aiperf, inferencemax: each measured through its own client and serving stack) instead of
    /// once for all; `bench --protocol` and a scenario's `timing.protocol` take their own.
    #[arg(long, conflicts_with = "check")]
    overhead_by_protocol: bool,
    /// Fits the GEMMs' coefficient once per weight precision on a GPU whose rows have several
    /// (its FP8 GEMMs reach a different share of their peak than its BF16 ones), instead of once
    /// per GPU; written as `[gemm_by_precision.GPU]`, and a precision a GPU has no rows of takes
    /// its `gemm_compute` (the row-weighted mean).
    #[arg(long, conflicts_with = "check")]
    gemm_by_precision: bool,
    /// For a weight precision a GPU's rows lack, gives the GPU a GEMM coefficient at it from
    /// this profile's `[gemm_by_precision.GPU]`: the GPU's own coefficient at a precision it has
    /// rows of, times this profile's ratio of the two (say, FP4 for an engine whose rows are
    /// all FP8, from another engine's rows of both on that GPU).
    #[arg(long, value_name = "PROFILE.toml", conflicts_with = "check")]
    gemm_ratios_from: Option<PathBuf>,
    /// Fits the per-step cost (step_us) once per benchmark protocol of the rows
    /// (`[step_by_protocol]`: a serving stack that handles each step's tokens on the way out
    /// adds to every step); `bench --protocol` and a scenario's `timing.protocol` take their
    /// own. With --rates-from, a protocol the rows lack takes that profile's per-step cost and,
    /// with --overhead-by-protocol, its request overhead.
    #[arg(long, conflicts_with = "check")]
    step_by_protocol: bool,
    /// Holds a step coefficient at a value instead of fitting it (repeatable; on every GPU),
    /// e.g. --hold attention_compute=1: for one the rows cannot pin apart from the others, or
    /// one measured elsewhere. A rate (gemm_compute, weight_read, attention_compute, kv_read,
    /// allreduce) is held at 1 or more; with --rates-from those are held already.
    #[arg(long = "hold", value_name = "NAME=VALUE", conflicts_with = "check",
          value_parser = super::parse::held_coefficient)]
    hold: Vec<(usize, f64)>,
    /// Predicts every row with the profile and prints the errors, without fitting (a row whose
    /// benchmark cannot be set up, such as a deployment bench refuses or a precision dynsim
    /// does not model, is named and left out).
    #[arg(long, conflicts_with_all = ["out", "leave_one_out"])]
    check: bool,
    /// Also fits once per (model, GPU, precision) group without it, and predicts the group
    /// left out: how well the fit carries to deployments it has not seen.
    #[arg(long)]
    leave_one_out: bool,
    /// The per-request jitter the fit holds, ms (default: the starting profile's).
    #[arg(long, value_parser = super::parse::jitter_ms)]
    jitter_ms: Option<f64>,
    /// Writes each row's prediction and error as CSV.
    #[arg(long, value_name = "OUT.csv")]
    predictions: Option<PathBuf>,
    /// Writes predicted-against-measured plots here (ttft.svg, tpot.svg: a point per row, a
    /// colour per group, the diagonal).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
    /// Overrides a key of every row's benchmark scenario (repeatable): the engine's settings as
    /// the measured servers ran, e.g. --set engine.vllm.max_num_batched_tokens=2048.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Replays every row of AIConfigurator's and aiperf's protocols with its prompts drawn from
    /// this many distinct ones (bench --prompt-pool; default: the protocol's, every prompt its
    /// own under AIConfigurator's, 100 under aiperf's).
    #[arg(long, value_parser = at_least_one)]
    prompt_pool: Option<usize>,
    /// Rows simulated at once (default: the number of CPUs).
    #[arg(long, value_parser = at_least_one)]
    jobs: Option<usize>,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

/// `rows` split into those whose benchmark sets up (their deployment resolves, their model and
/// GPU are known) and those that do not, each with its error.
fn check_rows(
    rows: Vec<crate::calibrate::measured::MeasuredRow>,
    engine: EngineKind,
    setup: &crate::calibrate::Setup,
) -> (
    Vec<crate::calibrate::measured::MeasuredRow>,
    Vec<(crate::calibrate::measured::MeasuredRow, Error)>,
) {
    let mut refused = Vec::new();
    let kept = rows
        .into_iter()
        .filter_map(
            |row| match bench::scenario(&crate::calibrate::spec_of(&row, engine, setup)) {
                Ok(_) => Some(row),
                Err(e) => {
                    let e = crate::calibrate::row_error(setup.file.as_deref(), &row, e);
                    refused.push((row, e));
                    None
                }
            },
        )
        .collect();
    (kept, refused)
}

/// Fits (or checks) a profile on measured rows and prints the errors per group.
pub fn calibrate(a: CalibrateArgs) -> Result<ExitCode> {
    use crate::calibrate::{self as cal, measured};
    use crate::deployment::profile::{self, Profile};
    use crate::output::AtomicFile;
    // The outputs are opened before any work, so that a bad path fails at once, not after the
    // fit; each appears only when written whole.
    let mut inputs = crate::output::Inputs::new();
    inputs.add("the measurements", &a.measured);
    for (what, path) in [
        ("the --profile", &a.profile),
        ("the --rates-from profile", &a.rates_from),
        ("the --gemm-ratios-from profile", &a.gemm_ratios_from),
    ] {
        if let Some(path) = path {
            inputs.add(what, path);
        }
    }
    let plot_files = |name: &str| name == TTFT_PLOT || name == TPOT_PLOT;
    let mut outputs = vec![
        crate::output::Output::File("--out", a.out.as_deref()),
        crate::output::Output::File("--predictions", a.predictions.as_deref()),
    ];
    if let Some(dir) = &a.plots {
        outputs.push(crate::output::Output::Folder("--plots", dir, &plot_files));
    }
    crate::output::check_outputs(&outputs, &inputs)?;
    let open = |flag: &str, path: &Option<PathBuf>| {
        path.as_deref()
            .map(|p| AtomicFile::create(p).map_err(|e| e.for_flag(flag)))
            .transpose()
    };
    let out_file = open("--out", &a.out)?;
    let predictions_file = open("--predictions", &a.predictions)?;
    let text = crate::error::read_text(&a.measured)?;
    let all = measured::parse(&a.measured, &text)?;
    let engine = a.engine.name();
    let rows: Vec<measured::MeasuredRow> = all
        .rows
        .iter()
        .filter(|r| r.backend == engine)
        .cloned()
        .collect();
    // The engine's rows left out, each as (id, line, why): those dynsim does not model (an
    // int4 checkpoint, 72 GPUs of one NVLink domain; other engines' are theirs to model) and,
    // with --check, those whose benchmark cannot be set up (a model or GPU dynsim does not
    // know, a deployment it refuses). --check names each and predicts the others; a fit stops
    // at the first.
    let mut left_out: Vec<(String, usize, String)> = all
        .unmodelled
        .iter()
        .filter(|u| u.backend == engine)
        .map(|u| (u.id.clone(), u.line, u.why.clone()))
        .collect();
    if let (Some((id, line, why)), false) = (left_out.first(), a.check) {
        return Err(Error::run(
            format!("measured row {id} (line {line})"),
            format!("{why} (a fit uses every row of its engine: leave it out of the file)"),
        ));
    }
    if rows.is_empty() && left_out.is_empty() {
        return Err(Error::file(
            &a.measured,
            format!("no aggregated rows of backend {engine:?}"),
        ));
    }
    let setup = cal::Setup {
        set: a.set.clone(),
        prompt_pool: a.prompt_pool,
        file: Some(a.measured.clone()),
    };
    let rows = if a.check {
        let (kept, refused) = check_rows(rows, a.engine, &setup);
        left_out.extend(
            refused
                .into_iter()
                .map(|(row, e)| (row.id, row.line, e.to_string())),
        );
        kept
    } else {
        rows
    };
    if rows.is_empty() {
        let (id, line, why) = &left_out[0];
        return Err(Error::run(
            format!("measured row {id} (line {line})"),
            format!("{why} (no {engine} row can be predicted)"),
        ));
    }
    for (id, line, why) in &left_out {
        tracing::warn!("measured row {id} (line {line}) is not predicted: {why}");
    }
    let groups = rows
        .iter()
        .map(cal::group_of)
        .collect::<std::collections::BTreeSet<_>>();
    if a.leave_one_out && groups.len() < 2 {
        return Err(Error::arg(
            "--leave-one-out",
            format!(
                "needs {engine} rows of two (model, GPU, precision) groups or more; {} has one",
                a.measured.display()
            ),
        ));
    }
    // A profile file that cannot be read names its flag; one whose contents are wrong names its
    // own line and field.
    let read_file = |flag: &str, path: &PathBuf| {
        let text = crate::error::read_text(path).map_err(|e| e.for_flag(flag))?;
        Ok::<_, Error>((profile::parse(path, &text)?, text))
    };
    let read_profile =
        |flag: &str, path: &PathBuf| Ok::<_, Error>(Profile::of_file(&read_file(flag, path)?.0));
    let start =
        match &a.profile {
            // A check predicts the rows of --engine: with another engine's profile it would
            // measure nothing (a fit may start anywhere).
            Some(path) if a.check => {
                let (f, text) = read_file("--profile", path)?;
                if f.engine != engine {
                    return Err(Error::field(
                        path,
                        crate::toml_file::line_of_key(&text, "engine").unwrap_or(1),
                        "engine",
                        format!(
                            "{:?}: this profile was fitted for another engine than --engine \
                             {engine}, whose rows --check predicts",
                            f.engine
                        ),
                    ));
                }
                Profile::of_file(&f)
            }
            Some(path) => read_profile("--profile", path)?,
            None if a.check => Profile::of_file(profile::bundled(engine).ok_or_else(|| {
                Error::arg("--engine", format!("{engine} has no bundled profile"))
            })?),
            None => Profile::start(),
        };
    // The jitter the fit holds (or the check predicts with).
    let start = Profile {
        request_jitter_ms: a.jitter_ms.unwrap_or(start.request_jitter_ms),
        ..start
    };
    let rates_from = a
        .rates_from
        .as_ref()
        .map(|p| read_profile("--rates-from", p))
        .transpose()?;
    let gemm_ratios_from = a
        .gemm_ratios_from
        .as_ref()
        .map(|p| read_profile("--gemm-ratios-from", p))
        .transpose()?;
    if let Some(&(k, _)) = a
        .hold
        .iter()
        .find(|(k, _)| rates_from.is_some() && *k < crate::deployment::features::RATE_FEATURES)
    {
        return Err(Error::arg(
            "--hold",
            format!(
                "{} is a rate, which --rates-from holds already",
                crate::deployment::features::FEATURE_NAMES[k]
            ),
        ));
    }
    if a.step_by_protocol && a.hold.iter().any(|&(k, _)| k == profile::STEP_US) {
        return Err(Error::arg(
            "--hold",
            "step_us is fitted per protocol with --step-by-protocol: hold one or the other",
        ));
    }
    let jobs = a.jobs.unwrap_or_else(super::cpus);
    let rounds = if a.check { 1 } else { cal::ROUNDS + 1 };
    let bar = Progress::new(
        a.progress,
        "calibrate",
        (rounds * rows.len()) as u64,
        "row runs",
    );
    let tick = || bar.inc(1);
    let fit = |rows: &[measured::MeasuredRow], done: &(dyn Fn() + Sync)| {
        cal::calibrate(
            rows,
            a.engine,
            &setup,
            &start,
            cal::FitOptions {
                rates_from: rates_from.as_ref(),
                overhead_by_protocol: a.overhead_by_protocol,
                gemm_by_precision: a.gemm_by_precision,
                gemm_ratios_from: gemm_ratios_from.as_ref(),
                step_by_protocol: a.step_by_protocol,
                held: &a.hold,
            },
            jobs,
            done,
        )
    };
    let (profile, predictions) = if a.check {
        let predictions = cal::predict(&rows, a.engine, &setup, &start, jobs, &tick)?;
        (start.clone(), predictions)
    } else {
        let c = fit(&rows, &tick)?;
        (c.profile, c.predictions)
    };
    bar.finish();
    let (groups, overall) = cal::errors_by_group(&rows, &predictions);
    let mut out = format!(
        "{} {} rows of {} ({} of other engines, {} not aggregated serving{}): {}\n",
        rows.len(),
        engine,
        a.measured.display(),
        all.rows.len() + all.unmodelled.len() - rows.len() - left_out.len(),
        all.skipped,
        if left_out.is_empty() {
            String::new()
        } else {
            format!(", {} refused, not predicted", left_out.len())
        },
        if a.check {
            "predicted with the profile"
        } else {
            "fitted"
        }
    );
    out.push_str(&error_table(&groups, overall));
    if a.leave_one_out {
        out.push_str("\nleave one group out: fitted on the others, predicting it\n");
        let mut held = Vec::new();
        for (g, _, _) in &groups {
            let (train, test): (Vec<_>, Vec<_>) =
                rows.iter().cloned().partition(|r| &cal::group_of(r) != g);
            let fitted = fit(&train, &|| ())?;
            let predicted = cal::predict(&test, a.engine, &setup, &fitted.profile, jobs, &|| ())?;
            let (n, e) = cal::errors(test.iter().zip(&predicted));
            held.push((g.clone(), n, e));
        }
        let (n, e) = (
            held.iter().map(|h| h.1).sum(),
            crate::deployment::profile::FitError {
                ttft_mape: crate::round::round_py(
                    held.iter().map(|h| h.2.ttft_mape * h.1 as f64).sum::<f64>()
                        / rows.len() as f64,
                    1,
                ),
                tpot_mape: crate::round::round_py(
                    held.iter().map(|h| h.2.tpot_mape * h.1 as f64).sum::<f64>()
                        / rows.len() as f64,
                    1,
                ),
            },
        );
        out.push_str(&error_table(&held, (n, e)));
    }
    if let Some(dir) = &a.plots {
        crate::output::write_dir(dir, &plots(&rows, &predictions, &groups))?;
    }
    if let Some(f) = predictions_file {
        f.write_whole(predictions_csv(&rows, &predictions).as_bytes())?;
    }
    if let (Some(f), Some(path)) = (out_file, &a.out) {
        let fitted_on = format!(
            "{} ({} {} rows)",
            a.measured
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            rows.len(),
            engine
        );
        let file = cal::profile_file(&profile, a.engine, fitted_on, overall.1);
        let header = format!(
            "Fitted by `dynsim calibrate {} --engine {engine}{} --out {}`\n\
             (dynsim {}): the roofline's corrections for the {engine} engine. See\n\
             src/deployment/roofline.rs for what each coefficient multiplies.",
            a.measured.display(),
            [
                a.profile
                    .as_ref()
                    .map(|p| format!(" --profile {}", p.display())),
                a.rates_from
                    .as_ref()
                    .map(|p| format!(" --rates-from {}", p.display())),
                a.overhead_by_protocol
                    .then(|| " --overhead-by-protocol".to_string()),
                a.gemm_by_precision
                    .then(|| " --gemm-by-precision".to_string()),
                a.gemm_ratios_from
                    .as_ref()
                    .map(|p| format!(" --gemm-ratios-from {}", p.display())),
                a.step_by_protocol
                    .then(|| " --step-by-protocol".to_string()),
                (!a.hold.is_empty()).then(|| {
                    a.hold
                        .iter()
                        .map(|&(k, v)| {
                            format!(
                                " --hold {}={v}",
                                crate::deployment::features::FEATURE_NAMES[k]
                            )
                        })
                        .collect::<String>()
                }),
                a.jitter_ms.map(|j| format!(" --jitter-ms {j}")),
                a.prompt_pool.map(|n| format!(" --prompt-pool {n}")),
            ]
            .into_iter()
            .flatten()
            .chain(
                a.set
                    .iter()
                    .map(|o| format!(" --set {}={}", o.key, o.value))
            )
            .collect::<String>(),
            path.display(),
            env!("CARGO_PKG_VERSION")
        );
        f.write_whole(profile::render(&file, &header).as_bytes())?;
    }
    write_stdout(out.as_bytes())?;
    Ok(0)
}

/// The errors' table: one line per group, then every row together.
fn error_table(
    groups: &[(
        crate::calibrate::Group,
        usize,
        crate::deployment::profile::FitError,
    )],
    overall: (usize, crate::deployment::profile::FitError),
) -> String {
    let mut out = format!(
        "{:<46} {:>5} {:>10} {:>10}\n",
        "group", "rows", "ttft mape", "tpot mape"
    );
    for (g, n, e) in groups {
        out.push_str(&format!(
            "{:<46} {:>5} {:>9.1}% {:>9.1}%\n",
            crate::calibrate::group_name(g),
            n,
            e.ttft_mape,
            e.tpot_mape
        ));
    }
    out.push_str(&format!(
        "{:<46} {:>5} {:>9.1}% {:>9.1}%\n",
        "all", overall.0, overall.1.ttft_mape, overall.1.tpot_mape
    ));
    out
}

/// The predicted-against-measured plots of mean TTFT and mean TPOT, a series per group.
fn plots(
    rows: &[crate::calibrate::measured::MeasuredRow],
    p: &[crate::calibrate::Prediction],
    groups: &[crate::calibrate::GroupErrors],
) -> Vec<(String, Vec<u8>)> {
    use crate::chart::scatter::{scatter_svg, ScatterChart};
    use crate::chart::Series;
    let series = |pick: &dyn Fn(
        &crate::calibrate::measured::MeasuredRow,
        &crate::calibrate::Prediction,
    ) -> (f64, f64)| {
        groups
            .iter()
            .map(|(g, _, _)| Series {
                // Short enough for the legend: the model without its organisation.
                label: format!(
                    "{} {} {}",
                    g.0.rsplit('/').next().unwrap_or(&g.0),
                    g.1.trim_end_matches("_sxm"),
                    g.2
                ),
                points: rows
                    .iter()
                    .zip(p)
                    .filter(|(r, _)| &crate::calibrate::group_of(r) == g)
                    .map(|(r, q)| pick(r, q))
                    .collect(),
            })
            .collect::<Vec<_>>()
    };
    let ttft = series(&|r, q| (r.ttft_ms, q.ttft_ms));
    let tpot = series(&|r, q| (r.tpot_ms, q.tpot_ms));
    [
        (
            TTFT_PLOT,
            "Mean TTFT: dynsim against measured servers",
            "mean TTFT (ms)",
            &ttft,
            0.25,
        ),
        (
            TPOT_PLOT,
            "Mean TPOT: dynsim against measured servers",
            "mean TPOT (ms)",
            &tpot,
            0.12,
        ),
    ]
    .into_iter()
    .map(|(file, title, quantity, series, band)| {
        let svg = scatter_svg(&ScatterChart {
            title,
            quantity,
            legend: "deployment (rows)",
            series,
            band,
        });
        (file.to_string(), svg.into_bytes())
    })
    .collect()
}

/// Each row's measurement and prediction, as CSV.
fn predictions_csv(
    rows: &[crate::calibrate::measured::MeasuredRow],
    p: &[crate::calibrate::Prediction],
) -> String {
    use crate::deployment::features::FEATURE_NAMES;
    let mut out = String::from(
        "id,line,model,gpu,precision,tp,isl,osl,concurrency,measured_ttft_ms,predicted_ttft_ms,measured_tpot_ms,predicted_tpot_ms,preemptions",
    );
    for kind in ["ttft", "tpot"] {
        for name in FEATURE_NAMES {
            out.push_str(&format!(",{kind}_{name}"));
        }
    }

    out.push('\n');
    for (r, p) in rows.iter().zip(p) {
        let (ttft, tpot) = p.mean_features();
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.id,
            r.line,
            r.model,
            r.gpu,
            r.precision.name(),
            r.tp,
            r.isl,
            r.osl,
            r.concurrency,
            r.ttft_ms,
            p.ttft_ms,
            r.tpot_ms,
            p.tpot_ms,
            p.preemptions
        ));
        for x in ttft.iter().chain(&tpot) {
            out.push_str(&format!(",{x}"));
        }
        out.push('\n');
    }
    out
}
