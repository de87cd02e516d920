//! `run` and `diff`: the engine's commands.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::parse::choice;
use super::progress::{Progress, ProgressMode};
use super::ExitCode;
use crate::chart::timeline::{timeline_series, timeline_svg};
use crate::diff::diff_files;
use crate::error::{Error, Result};
use crate::output::{check_outputs, is_stdout, write_stdout, AtomicFile, Inputs, Output};
use crate::router::registry;
use crate::run::recorder::has_intervals;
use crate::run::{run_scenario_with, RunHooks};
use crate::scenario::load::{parse_scenario, Loaded};
use crate::scenario::{load_scenario, Override, TraceFormat};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (TOML).
    scenario: PathBuf,
    /// Overrides the scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Overrides any key by its dotted path, the value parsed as TOML (repeatable):
    /// --set router.policy="rr" --set bus.drop_rate=0.3
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Writes one JSONL line per delivered message (`-`: standard output, the report then
    /// goes to stderr).
    #[arg(long, value_name = "OUT.jsonl")]
    trace: Option<PathBuf>,
    /// Writes the run's timeline (steps, requests, losses) for ui.perfetto.dev (`-`: standard
    /// output, the report then goes to stderr).
    #[arg(long, value_name = "OUT.json")]
    perfetto: Option<PathBuf>,
    /// Draws offered load, replicas per pool, TTFT p90 (with the [sla] target) and prefix reuse per interval
    /// against time, as SVG (`-`: standard output). Only a run that reports `intervals` has
    /// them (one whose load or size changes, or with an [sla]); any other is refused.
    #[arg(long, value_name = "OUT.svg")]
    timeline_plot: Option<PathBuf>,
    /// Prints one JSON object instead of the summary table.
    #[arg(long)]
    json: bool,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    suggest_replay(&a.scenario)?;
    let mut loaded = load_scenario(&a.scenario, &a.set)?;
    // Set directly: a u64 seed above 2^63 has no TOML spelling.
    if let Some(seed) = a.seed {
        loaded.scenario.seed = seed;
    }
    let mut inputs = Inputs::new();
    inputs.add("the scenario", &a.scenario);
    add_scenario_files(&mut inputs, &loaded);
    let out = Outputs {
        trace: a.trace.as_deref(),
        perfetto: a.perfetto.as_deref(),
        timeline_plot: a.timeline_plot.as_deref(),
        json: a.json,
        progress: a.progress,
        inputs,
    };
    execute(&loaded, out)
}

/// `run` given a trace (by its extension: .jsonl, .csv, .json) is pointed to `replay`.
fn suggest_replay(input: &Path) -> Result<()> {
    let ext = input.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ["jsonl", "csv", "json"].contains(&ext) {
        return Err(Error::file(
            input,
            format!(
                "is a trace, not a scenario (TOML): replay it with `dynsim replay {}` \
                 (--scenario BASE.toml for the other settings)",
                input.display()
            ),
        ));
    }
    Ok(())
}

/// Where a run's outputs go.
struct Outputs<'a> {
    trace: Option<&'a Path>,
    perfetto: Option<&'a Path>,
    timeline_plot: Option<&'a Path>,
    json: bool,
    progress: ProgressMode,
    /// The files the command reads, which no output may replace.
    inputs: Inputs,
}

/// Adds the files `loaded` names (its trace, model files, profile) to `inputs`.
pub(super) fn add_scenario_files(inputs: &mut Inputs, loaded: &Loaded) {
    for (what, path) in loaded.input_files() {
        inputs.add(what, &path);
    }
}

/// Runs a loaded scenario (with progress on stderr), writes the trace, timeline and plot (see
/// [`crate::output`]) and prints the report: on stdout, or on stderr when a file goes to
/// stdout.
fn execute(loaded: &Loaded, out: Outputs<'_>) -> Result<ExitCode> {
    let to_stdout = [out.trace, out.perfetto, out.timeline_plot]
        .into_iter()
        .flatten()
        .filter(|p| is_stdout(p))
        .count();
    if to_stdout > 1 {
        return Err(Error::arg(
            "--perfetto",
            "only one output can go to standard output (-); give the other a file",
        ));
    }
    check_outputs(
        &[
            Output::File("--trace", out.trace),
            Output::File("--perfetto", out.perfetto),
            Output::File("--timeline-plot", out.timeline_plot),
        ],
        &out.inputs,
    )?;
    if out.timeline_plot.is_some() && !has_intervals(&loaded.scenario) {
        return Err(Error::arg(
            "--timeline-plot",
            "this run reports no intervals (its load and size never change and it has no [sla]): \
             add [[scale]], a [planner], a rate or speedup schedule, or an [sla] \
             (e.g. --set sla.ttft_p90_ms=500)",
        ));
    }
    let progress = Progress::new(out.progress, "run", 0, "requests");
    let mut tick = |done: u64, total: u64| progress.set(done, total);
    let mut file = out.trace.map(AtomicFile::create).transpose()?;
    let mut timeline = out.perfetto.map(AtomicFile::create).transpose()?;
    let mut plot = out.timeline_plot.map(AtomicFile::create).transpose()?;
    let hooks = RunHooks {
        trace: file.as_mut().map(|f| f as &mut (dyn Write + Send)),
        progress: Some(&mut tick),
        perfetto: timeline.as_mut().map(|f| f as &mut (dyn Write + Send)),
        ..RunHooks::default()
    };
    let report = run_scenario_with(&loaded.scenario, &loaded.base_dir, hooks)?;
    if let (Some(f), Some(path)) = (plot.as_mut(), out.timeline_plot) {
        let svg = timeline_plot(&report, &loaded.scenario);
        f.write_all(svg.as_bytes())
            .map_err(|e| Error::file(path, format!("cannot write: {e}")))?;
    }
    for f in [file, timeline, plot].into_iter().flatten() {
        f.commit()?;
    }
    progress.finish();
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    let text = if out.json {
        serde_json::to_string(&report).expect("in-memory JSON") + "\n"
    } else {
        report.table()
    };
    if to_stdout > 0 {
        eprint!("{text}");
        return Ok(0);
    }
    write_stdout(text.as_bytes())?;
    Ok(0)
}

/// The `--timeline-plot` SVG of a run that reported intervals.
fn timeline_plot(report: &crate::report::Report, s: &crate::scenario::Scenario) -> String {
    let series = timeline_series(
        report.intervals.as_deref().unwrap_or_default(),
        &report.replicas,
        report.duration_ms / 1e3,
        s.sla.ttft_p90_ms,
    );
    timeline_svg(
        &series,
        &format!("{}: load, replicas, TTFT and reuse over time", s.name),
    )
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace: Mooncake JSONL or Azure CSV.
    #[arg(value_name = "TRACE")]
    input: PathBuf,
    /// The trace format (default: by extension, .csv is azure, anything else mooncake).
    #[arg(long, value_parser = choice::<TraceFormat>(TraceFormat::NAMES))]
    format: Option<TraceFormat>,
    /// Workers (default: the base scenario's).
    #[arg(long, value_parser = super::parse::workers)]
    workers: Option<usize>,
    /// Routing policy (default: the base scenario's).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(registry::names()))]
    policy: Option<String>,
    /// A scenario to take every other setting from (default: the built-in defaults).
    #[arg(long, value_name = "BASE.toml")]
    scenario: Option<PathBuf>,
    /// Skip malformed rows and count them instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Overrides any key by its dotted path, after the flags above (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Writes one JSONL line per delivered message (also accepted as --trace-out; `-`:
    /// standard output, the report then goes to stderr).
    #[arg(long = "trace", alias = "trace-out", value_name = "OUT.jsonl")]
    trace_out: Option<PathBuf>,
    /// Writes the run's timeline (steps, requests, losses) for ui.perfetto.dev (`-`: standard
    /// output, the report then goes to stderr).
    #[arg(long, value_name = "OUT.json")]
    perfetto: Option<PathBuf>,
    /// Draws offered load, replicas per pool, TTFT p90 (with the [sla] target) and prefix reuse per interval
    /// against time, as SVG (`-`: standard output). Only a run that reports `intervals` has
    /// them (one whose load or size changes, or with an [sla]); any other is refused.
    #[arg(long, value_name = "OUT.svg")]
    timeline_plot: Option<PathBuf>,
    /// Prints one JSON object instead of the summary table.
    #[arg(long)]
    json: bool,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

pub fn replay(a: ReplayArgs) -> Result<ExitCode> {
    let mut source =
        ScenarioSource::of_trace(&a.input, a.format, a.scenario.as_deref(), a.skip_bad)?;
    if let Some(w) = a.workers {
        source.overrides.push(Override {
            key: "cluster.workers".into(),
            value: toml::Value::Integer(w as i64),
        });
    }
    if let Some(p) = a.policy {
        source.overrides.push(Override {
            key: "router.policy".into(),
            value: toml::Value::String(p),
        });
    }
    source.overrides.extend(a.set);
    let loaded = source.load(&[])?;
    if a.workers.is_some() && loaded.scenario.disagg.enabled {
        // cluster.workers does not size a disaggregated cluster: refused rather than ignored.
        return Err(Error::arg(
            "--workers",
            "the scenario is disaggregated: size it with --set disagg.prefill_workers=N \
             --set disagg.decode_workers=M",
        ));
    }
    let mut inputs = Inputs::new();
    inputs.add("the trace", &a.input);
    if let Some(base) = &a.scenario {
        inputs.add("the base scenario", base);
    }
    add_scenario_files(&mut inputs, &loaded);
    let out = Outputs {
        trace: a.trace_out.as_deref(),
        perfetto: a.perfetto.as_deref(),
        timeline_plot: a.timeline_plot.as_deref(),
        json: a.json,
        progress: a.progress,
        inputs,
    };
    execute(&loaded, out)
}

/// Where a command's scenario comes from: a base file (or the built-in defaults) and the
/// overrides to apply to it.
#[derive(Clone, Debug)]
pub struct ScenarioSource {
    /// The base scenario file, or `None` for the defaults.
    pub base: Option<PathBuf>,
    /// Overrides, in order.
    pub overrides: Vec<Override>,
}

impl ScenarioSource {
    /// A trace replayed with `scenario`'s other settings (or the defaults): the trace's format
    /// by `format` or its extension (.csv is azure, anything else mooncake). A base that itself
    /// replays a trace keeps its trace settings (rechunk, speedup, trace_block_size, ...): only
    /// the file and its format change.
    pub fn of_trace(
        trace: &Path,
        format: Option<TraceFormat>,
        scenario: Option<&Path>,
        skip_bad: bool,
    ) -> Result<Self> {
        let format = format.unwrap_or(match trace.extension().and_then(|e| e.to_str()) {
            Some("csv") => TraceFormat::Azure,
            _ => TraceFormat::Mooncake,
        });
        // Relative to the current folder: as typed without a base scenario (whose folder would
        // otherwise be the reference), absolute with one.
        let path = match scenario {
            None => trace.to_path_buf(),
            Some(_) => std::path::absolute(trace)
                .map_err(|e| Error::file(trace, format!("cannot resolve: {e}")))?,
        };
        let base_is_trace = scenario.is_some_and(|p| {
            crate::error::read_text(p)
                .ok()
                .and_then(|t| t.parse::<toml::Table>().ok())
                .and_then(|t| {
                    t.get("workload")?
                        .get("kind")?
                        .as_str()
                        .map(|k| k == "trace")
                })
                .unwrap_or(false)
        });
        let mut fields = toml::Table::new();
        fields.insert("path".into(), path.display().to_string().into());
        fields.insert("format".into(), format.name().into());
        if skip_bad {
            fields.insert("skip_bad".into(), true.into());
        }
        let overrides: Vec<Override> = if base_is_trace {
            fields
                .into_iter()
                .map(|(k, v)| Override {
                    key: format!("workload.{k}"),
                    value: v,
                })
                .collect()
        } else {
            fields.insert("kind".into(), "trace".into());
            vec![Override {
                key: "workload".into(),
                value: toml::Value::Table(fields),
            }]
        };
        Ok(ScenarioSource {
            base: scenario.map(Path::to_path_buf),
            overrides,
        })
    }

    /// The scenario with its overrides, then `extra`.
    pub fn load(&self, extra: &[Override]) -> Result<Loaded> {
        let all: Vec<Override> = self.overrides.iter().chain(extra).cloned().collect();
        match &self.base {
            Some(base) => load_scenario(base, &all),
            None => Ok(Loaded {
                scenario: parse_scenario(Path::new("<defaults>"), "", &all)?,
                base_dir: PathBuf::new(),
            }),
        }
    }
}

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// First trace.
    a: PathBuf,
    /// Second trace.
    b: PathBuf,
}

pub fn diff(a: DiffArgs) -> Result<ExitCode> {
    let d = diff_files(&a.a, &a.b)?;
    write_stdout(d.render().as_bytes())?;
    Ok(if d.first.is_none() { 0 } else { 1 })
}
