//! `plan`: the fewest workers, or the highest load, that meets every SLA, per policy.

use std::path::{Path, PathBuf};

use clap::Args;

use super::parse::choice;
use super::plan_eval::Evaluator;
use super::progress::{Progress, ProgressMode};
use super::run_cmds::ScenarioSource;
use super::ExitCode;
use crate::error::{Error, Result};
use crate::output::{check_outputs, write_dir, write_stdout, Inputs, Output};
use crate::plan::{
    plan_json, plots, search, table, warning_summary, Axis, Op, PolicyPlan, Sla, PROBES,
};
use crate::router::registry;
use crate::scenario::validate::MAX_WORKERS;
use crate::scenario::{Override, TimingKind, TraceFormat, Workload};
use crate::sweep::lookup;

/// `dynsim plan`'s arguments.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// A scenario (.toml) or a trace (Mooncake JSONL, Azure CSV).
    #[arg(value_name = "SCENARIO.toml|TRACE")]
    input: PathBuf,
    /// With a trace: the scenario to take every other setting from (default: the defaults).
    #[arg(long, value_name = "BASE.toml")]
    scenario: Option<PathBuf>,
    /// With a trace: its format (default: by extension, .csv is azure, anything else mooncake).
    #[arg(long, value_parser = choice::<TraceFormat>(TraceFormat::NAMES))]
    format: Option<TraceFormat>,
    /// An objective, KEY<=VALUE or KEY>=VALUE, KEY named after the --json metrics
    /// (ttft_p90_ms, tpot_p50_ms, e2e_p99_ms, throughput_rps, ...) (repeatable).
    #[arg(long, required = true, value_name = "KEY<=VALUE")]
    sla: Vec<Sla>,
    /// A routing policy to plan for (repeatable; default: the scenario's).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(registry::names()))]
    policy: Vec<String>,
    /// Workers: MIN..MAX to find the fewest that meet the SLAs, or N (default: the scenario's).
    #[arg(long, value_name = "MIN..MAX")]
    workers: Option<String>,
    /// Load, a multiple of the workload's arrival rate: MIN..MAX to find the highest the SLAs
    /// survive (within 1 %), or X (default: 1).
    #[arg(long, value_name = "MIN..MAX")]
    load: Option<String>,
    /// Overrides any key of the scenario by its dotted path (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// The output folder (created if missing): plan.json and one SVG per SLA.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Runs at once (default: the number of CPUs).
    #[arg(long, value_parser = super::parse::at_least_one)]
    jobs: Option<usize>,
    /// Plans a trace under `timing.model = "fixed"` anyway (every step takes the same time
    /// whatever its batch, so latencies do not answer to load: refused without this flag).
    #[arg(long)]
    allow_fixed_timing: bool,
    /// Continues an interrupted plan from DIR/plan.partial.json (the final files equal an
    /// uninterrupted run's).
    #[arg(long)]
    resume: bool,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

/// The digest of every input file (the plan's input, the base scenario, the files the scenario
/// names): a plan resumed after any of them was edited would mix runs of two inputs.
fn contents(a: &PlanRequest, loaded: &crate::scenario::load::Loaded) -> String {
    let mut paths = vec![a.input.clone()];
    paths.extend(a.scenario.clone());
    paths.extend(loaded.input_files().into_iter().map(|(_, p)| p));
    crate::scenario::load::files_digest(paths.iter().map(PathBuf::as_path))
}

/// A file's path as the same file is named from any folder (its spelling when it has none): a
/// plan resumed from another folder, or given the path another way, is the same plan.
fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// `A..B` or `A`, each parsed by `one`.
fn range<T: Copy + PartialOrd>(
    flag: &str,
    text: &str,
    one: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<(T, T)> {
    let bad = |m: String| Error::arg(flag, format!("{text:?}: {m}"));
    let (lo, hi) = match text.split_once("..") {
        Some((a, b)) => (one(a.trim()).map_err(bad)?, one(b.trim()).map_err(bad)?),
        None => {
            let v = one(text.trim()).map_err(bad)?;
            (v, v)
        }
    };
    if hi < lo {
        return Err(bad("MIN must not exceed MAX".into()));
    }
    Ok((lo, hi))
}

/// How a point's load is set: the workload key and its value at load 1.
fn load_key(w: &Workload) -> Result<(&'static str, f64, bool)> {
    match w {
        Workload::Trace(t) if t.concurrency.is_none() => Ok(("workload.speedup", t.speedup, true)),
        Workload::Synthetic(p) if p.concurrency.is_none() => {
            Ok(("workload.rate_per_s", p.rate_per_s, true))
        }
        Workload::PrefixRepeat(p) => Ok(("workload.interval_ms", p.interval_ms, false)),
        // Scaling the rate changed nothing there, and the plan answered its highest load.
        Workload::Trace(_) | Workload::Synthetic(_) => Err(Error::arg(
            "--load",
            "a closed-loop workload (workload.concurrency) has no arrival rate to scale: \
             plan --workers, or vary workload.concurrency with a sweep",
        )),
    }
}

/// A plan as the library runs it: `dynsim plan`'s options without the output folder (the CLI
/// and the Python package's `dynsim.plan` both build one).
#[derive(Clone, Debug, Default)]
pub struct PlanRequest {
    /// A scenario (.toml) or a trace.
    pub input: PathBuf,
    /// With a trace: the scenario to take every other setting from.
    pub scenario: Option<PathBuf>,
    /// With a trace: its format.
    pub format: Option<TraceFormat>,
    /// The objectives (at least one).
    pub sla: Vec<Sla>,
    /// The routing policies (default: the scenario's).
    pub policy: Vec<String>,
    /// Workers, `MIN..MAX` or `N`.
    pub workers: Option<String>,
    /// Load, `MIN..MAX` or `X`.
    pub load: Option<String>,
    /// Overrides of the scenario's keys.
    pub set: Vec<Override>,
    /// Runs at once (default: the number of CPUs).
    pub jobs: Option<usize>,
    /// Plans a trace under fixed timing anyway.
    pub allow_fixed_timing: bool,
}

/// A finished plan: its axis, objectives and each policy's points.
pub struct Planned {
    /// What was varied.
    pub axis: Axis,
    /// The objectives.
    pub slas: Vec<Sla>,
    /// Each policy's search.
    pub plans: Vec<PolicyPlan>,
}

impl Planned {
    /// `plan.json`'s bytes, as `dynsim plan` writes them.
    pub fn json(&self) -> Vec<u8> {
        plan_json(&self.axis, &self.slas, &self.plans)
    }
}

/// Runs the planner and writes its folder.
pub fn plan(a: PlanArgs) -> Result<ExitCode> {
    let request = PlanRequest {
        input: a.input,
        scenario: a.scenario,
        format: a.format,
        sla: a.sla,
        policy: a.policy,
        workers: a.workers,
        load: a.load,
        set: a.set,
        jobs: a.jobs,
        allow_fixed_timing: a.allow_fixed_timing,
    };
    let progress = Progress::new(a.progress, "plan", 0, "runs");
    let out = a.out;
    let done = run_plan(&request, Some((&out, a.resume)), &progress)?;
    progress.finish();
    let (axis, slas, plans) = (&done.axis, &done.slas, &done.plans);
    let mut files = vec![("plan.json".to_string(), done.json())];
    files.extend(plots(axis, slas, plans));
    write_dir(&out, &files)?;
    Evaluator::remove_partial(&out)?;
    // The runs' warnings, one line per kind (each point's are in plan.json).
    for line in warning_summary(axis, plans) {
        tracing::warn!("{line}");
    }
    for sla in slas.iter().filter(|s| s.op == Op::AtLeast) {
        tracing::warn!(
            "{}: the search assumes every SLA holds from some worker count up, or up to some \
             load, as latency bounds do; a lower bound may not (a hit rate falls with \
             workers, a throughput rises with load): check the answer with a sweep",
            sla.text()
        );
    }
    write_stdout(table(axis, slas, plans).as_bytes())?;
    Ok(0)
}

/// Runs a plan's searches with no output folder and no progress display (the Python
/// package's `dynsim.plan`).
pub fn plan_quietly(a: &PlanRequest) -> Result<Planned> {
    run_plan(
        a,
        None,
        &Progress::new(ProgressMode::Never, "plan", 0, "runs"),
    )
}

/// Runs a plan's searches. With `out` (the output folder, and whether to resume), the folder
/// is checked first and an interrupted plan keeps its runs there; without, nothing is
/// written and an interrupt loses them.
pub fn run_plan(
    a: &PlanRequest,
    out: Option<(&Path, bool)>,
    progress: &Progress,
) -> Result<Planned> {
    if a.sla.is_empty() {
        return Err(Error::arg(
            "--sla",
            "give at least one objective, KEY<=VALUE or KEY>=VALUE (ttft_p90_ms<=500)",
        ));
    }
    for p in &a.policy {
        if !registry::names().contains(&p.as_str()) {
            return Err(Error::arg(
                "--policy",
                format!("{p:?} is not one of {}", registry::names().join(", ")),
            ));
        }
    }
    let is_scenario = a.input.extension().is_some_and(|e| e == "toml");
    if is_scenario {
        // Both only describe a trace input: refused rather than ignored.
        let with_trace_only = [
            ("--scenario", a.scenario.is_some()),
            ("--format", a.format.is_some()),
        ];
        if let Some((flag, _)) = with_trace_only.into_iter().find(|f| f.1) {
            return Err(Error::arg(
                flag,
                format!(
                    "only with a trace input; {} is a scenario (use --set to change its keys)",
                    a.input.display()
                ),
            ));
        }
    }
    let mut source = if is_scenario {
        ScenarioSource {
            base: Some(a.input.clone()),
            overrides: Vec::new(),
        }
    } else {
        ScenarioSource::of_trace(&a.input, a.format, a.scenario.as_deref(), false)?
    };
    source.overrides.extend(a.set.clone());
    let loaded_base = source.load(&[])?;
    if let Some((dir, _)) = out {
        // Before the checks below that read traces: a bad folder fails at once.
        let mut inputs = Inputs::new();
        inputs.add(
            if is_scenario {
                "the scenario"
            } else {
                "the trace"
            },
            &a.input,
        );
        if let Some(base) = &a.scenario {
            inputs.add("the base scenario", base);
        }
        super::run_cmds::add_scenario_files(&mut inputs, &loaded_base);
        let writes = |name: &str| {
            name == "plan.json" || name == super::plan_eval::PARTIAL || name.ends_with(".svg")
        };
        check_outputs(&[Output::Folder("--out", dir, &writes)], &inputs)?;
    }
    // Only a plan that keeps its runs (in `out`) needs to know its inputs again.
    let contents = out.map(|_| contents(a, &loaded_base));
    let base = loaded_base.scenario;
    if matches!(base.workload, Workload::Trace(_))
        && base.timing_kind() == TimingKind::Fixed
        && !a.allow_fixed_timing
    {
        return Err(Error::arg(
            if a.scenario.is_some() {
                "--scenario"
            } else {
                "--allow-fixed-timing"
            },
            format!(
                "timing.model = \"fixed\" gives every step {} ms whatever its batch, so a \
                 trace's latencies do not answer to load and the plan would mean nothing: use \
                 a base with model = \"steps\" (scenarios/dynamo-mocker.toml), or pass \
                 --allow-fixed-timing",
                base.timing.service_ms
            ),
        ));
    }
    let workers = match &a.workers {
        Some(t) => range("--workers", t, super::parse::workers)?,
        None => (base.cluster.workers, base.cluster.workers),
    };
    let load = match &a.load {
        Some(t) => range("--load", t, super::parse::positive)?,
        None => (1.0, 1.0),
    };
    let axis = match (workers.0 < workers.1, load.0 < load.1) {
        (true, false) => Axis::Workers {
            min: workers.0,
            max: workers.1.min(MAX_WORKERS),
        },
        (false, true) => Axis::Load {
            min: load.0,
            max: load.1,
            tolerance: 0.01,
        },
        (true, true) => {
            return Err(Error::arg(
                "--workers",
                "vary workers or load, not both (give the other one value: --load 2)",
            ))
        }
        (false, false) => {
            return Err(Error::arg(
                "--workers",
                "give one range: --workers MIN..MAX (the fewest workers) or --load MIN..MAX \
                 (the highest load)",
            ))
        }
    };
    if a.workers.is_some() && base.disagg.enabled {
        // cluster.workers does not size a disaggregated cluster: refused rather than ignored.
        return Err(Error::arg(
            "--workers",
            "the planner sets cluster.workers; a disaggregated scenario sizes prefill and \
             decode workers apart (set them with --set, vary them with a sweep)",
        ));
    }
    let (load_at, load_base, scale_up) = load_key(&base.workload)?;
    let shape = crate::sweep::run::report_shape()?;
    for s in &a.sla {
        if lookup(&shape, &s.path).and_then(|v| v.as_f64()).is_none() {
            return Err(Error::arg(
                "--sla",
                format!(
                    "{}: {:?} is not a number in the report (try ttft_p90_ms, tpot_p50_ms, \
                     e2e_p99_ms, queue_p90_ms, throughput_rps, block_hit_rate)",
                    s.text(),
                    s.path
                ),
            ));
        }
    }
    let policies = if a.policy.is_empty() {
        vec![base.router.policy.clone()]
    } else {
        a.policy.clone()
    };
    let jobs = a.jobs.unwrap_or_else(super::cpus);
    let point_overrides = |policy: &str, value: f64| {
        let (w, l) = match axis {
            Axis::Workers { .. } => (value as usize, load.0),
            Axis::Load { .. } => (workers.0, value),
        };
        let scaled = if scale_up {
            load_base * l
        } else {
            load_base / l
        };
        vec![
            Override {
                key: "router.policy".into(),
                value: toml::Value::String(policy.to_string()),
            },
            Override {
                key: "cluster.workers".into(),
                value: toml::Value::Integer(w as i64),
            },
            Override {
                key: load_at.into(),
                value: toml::Value::Float(scaled),
            },
        ]
    };
    // Every policy at the largest point must fit the memory budget, or the plan stops there.
    let largest = match axis {
        Axis::Workers { max, .. } => max as f64,
        Axis::Load { max, .. } => max,
    };
    let axis_flag = if matches!(axis, Axis::Workers { .. }) {
        "--workers"
    } else {
        "--load"
    };
    // A point's workers and load are plan's own overrides: a value out of range is its flag's,
    // and so is a setting the base allows that a point does not (a fault naming worker 3 at 2
    // workers).
    let as_axis_error = |point: f64, e: Error| match e {
        Error::Setting {
            at,
            key,
            value,
            problem,
        } if key != load_at && key != "cluster.workers" => {
            let point = match axis {
                Axis::Workers { .. } if point == 1.0 => "1 worker".to_string(),
                Axis::Workers { .. } => format!("{point} workers"),
                Axis::Load { .. } => format!("load {point}"),
            };
            let value = if value.is_empty() {
                String::new()
            } else {
                format!(" = {value}")
            };
            Error::arg(
                axis_flag,
                format!("at {point} of the range, {key}{value} ({at}) {problem}"),
            )
        }
        Error::Setting {
            key,
            value,
            problem,
            ..
        } => Error::arg(
            if key == load_at {
                "--load"
            } else {
                "--workers"
            },
            if value.is_empty() {
                format!("takes {key} out of range: it {problem}")
            } else {
                format!("puts {key} at {value}, which {problem}")
            },
        ),
        other => other,
    };
    let smallest = match axis {
        Axis::Workers { min, .. } => min as f64,
        Axis::Load { min, .. } => min,
    };
    for p in &policies {
        // Both ends hold the scenario's settings, before any run.
        source
            .load(&point_overrides(p, smallest))
            .map_err(|e| as_axis_error(smallest, e))?;
        let loaded = source
            .load(&point_overrides(p, largest))
            .map_err(|e| as_axis_error(largest, e))?;
        crate::run::check_fits(&loaded.scenario, &loaded.base_dir).map_err(|e| match e {
            // Too large to run: the range's doing. A bad trace row or file is its own.
            Error::Run { .. } => Error::arg(
                axis_flag,
                format!("the largest point of the range cannot run ({p}): {e}"),
            ),
            other => other,
        })?;
    }
    let key = serde_json::json!({
        "input": canonical(&a.input),
        "scenario": a.scenario.as_deref().map(canonical),
        "format": a.format.map(TraceFormat::name),
        "set": a.set.iter().map(|o| format!("{}={}", o.key, o.value)).collect::<Vec<_>>(),
        "sla": a.sla.iter().map(Sla::text).collect::<Vec<_>>(),
        "policies": policies,
        "workers": a.workers,
        "load": a.load,
        "contents": contents,
    });
    let slas = &a.sla;
    let mut eval = Evaluator::new(key, out, jobs, slas, progress)?;
    let plans = search(&axis, &policies, PROBES, |probes| {
        let named: Vec<(String, f64)> = probes
            .iter()
            .map(|&(p, v)| (policies[p].clone(), v))
            .collect();
        eval.eval(&named, |p, v| {
            source
                .load(&point_overrides(p, v))
                .map_err(|e| as_axis_error(v, e))
        })
    })?;
    Ok(Planned {
        axis,
        slas: a.sla.clone(),
        plans,
    })
}
