//! The command-line interface: argument parsing (clap) and dispatch. Each subcommand lives in its
//! own module and turns library errors into one-line messages; `main` maps them to exit code 2.

mod bench_cmds;
mod compare_cmds;
mod lab_cmds;
mod parse;
mod plan_cmds;
mod plan_eval;
mod progress;
mod run_cmds;
mod schema_cmds;
mod sweep_cmds;

use clap::{Parser, Subcommand};

pub use plan_cmds::{plan_quietly, PlanRequest, Planned};

use crate::error::Result;

/// dynsim: a deterministic discrete-event simulator of an LLM serving cluster.
#[derive(Parser, Debug)]
#[command(name = "dynsim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// Parses the process's arguments. A value that reads as a negative number is taken as a
    /// value in every subcommand, so `--isl -1` is refused naming `--isl` (as `--isl=-1` was)
    /// rather than as an unexpected argument `-1`.
    pub fn try_parse_args() -> Result<Self, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let command = Cli::command().mut_subcommands(|s| s.allow_negative_numbers(true));
        Cli::from_arg_matches(&command.try_get_matches()?)
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The lab's routing experiment: one JSON line with the hit count of a routing mode.
    Sim(lab_cmds::SimArgs),
    /// KV size and transfer time of a prompt over a link.
    Kvcost(lab_cmds::KvcostArgs),
    /// Per-cell median TTFT of measured agg vs disagg runs (JSONL in, JSON out).
    Summarize(lab_cmds::SummarizeArgs),
    /// Runs a scenario through the cluster simulator.
    Run(run_cmds::RunArgs),
    /// Replays a Mooncake or Azure trace through the cluster (a shortcut for a trace scenario).
    Replay(run_cmds::ReplayArgs),
    /// Compares two traces: first diverging line and per-metric deltas (exit 1 when different).
    Diff(run_cmds::DiffArgs),
    /// Writes every lab artefact (modes.json, events.json, kvcost.json, measured.json) to a folder.
    Lab(lab_cmds::LabArgs),
    /// Runs a scenario over every combination of a sweep file's axes: results.json, .csv, plots.
    Sweep(sweep_cmds::SweepArgs),
    /// Merges the output folders of `sweep --shard` runs into the unsharded sweep's outputs.
    Merge(sweep_cmds::MergeArgs),
    /// Runs scenarios side by side: a table, compare.json, TTFT/TPOT CDFs, per-worker load.
    Compare(compare_cmds::CompareArgs),
    /// The fewest workers (or the highest load) meeting SLAs, per policy: table, plan.json, plots.
    Plan(plan_cmds::PlanArgs),
    /// A closed-loop benchmark of one real deployment (model, GPU, tensor parallelism,
    /// precision), predicted: TTFT, TPOT, ITL, throughput, KV capacity.
    Bench(bench_cmds::BenchArgs),
    /// Fits the roofline's corrections to measured benchmark rows (or checks a profile against
    /// them): errors per (model, GPU, precision) group, and a profile file.
    Calibrate(bench_cmds::CalibrateArgs),
    /// Every scenario key with its type, default and meaning (or JSON Schemas for editors).
    Schema(schema_cmds::SchemaArgs),
    /// A shell completion script: `dynsim completions bash > /etc/bash_completion.d/dynsim`.
    Completions(CompletionsArgs),
}

/// `dynsim completions`' arguments.
#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the completion script of `a.shell`.
fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "dynsim", &mut script);
    crate::output::write_stdout(&script)?;
    Ok(0)
}

/// What a finished command asks `main` to exit with.
pub type ExitCode = i32;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode> {
    crate::budget::set_budget(memory_budget(std::env::var("DYNSIM_MEMORY_GIB").ok())?);
    match cli.command {
        Command::Sim(args) => lab_cmds::sim(args),
        Command::Kvcost(args) => lab_cmds::kvcost(args),
        Command::Summarize(args) => lab_cmds::summarize(args),
        Command::Lab(args) => lab_cmds::lab(args),
        Command::Run(args) => run_cmds::run(args),
        Command::Diff(args) => run_cmds::diff(args),
        Command::Replay(args) => run_cmds::replay(args),
        Command::Sweep(args) => sweep_cmds::sweep(args),
        Command::Merge(args) => sweep_cmds::merge(args),
        Command::Compare(args) => compare_cmds::compare(args),
        Command::Plan(args) => plan_cmds::plan(args),
        Command::Bench(args) => bench_cmds::bench(args),
        Command::Calibrate(args) => bench_cmds::calibrate(args),
        Command::Schema(args) => schema_cmds::schema(args),
        Command::Completions(args) => completions(args),
    }
}

/// The number of CPUs (the default of `--jobs`).
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The memory budget of one run, bytes: `DYNSIM_MEMORY_GIB` (a positive number of GiB) or the
/// default.
fn memory_budget(var: Option<String>) -> Result<u64> {
    let Some(text) = var else {
        return Ok(crate::budget::DEFAULT_BUDGET_BYTES);
    };
    match text.trim().parse::<f64>() {
        Ok(gib) if gib.is_finite() && gib > 0.0 && gib <= 1e6 => {
            Ok((gib * f64::from(1u32 << 30)) as u64)
        }
        _ => Err(crate::error::Error::arg(
            "DYNSIM_MEMORY_GIB",
            format!("expected a number of GiB in (0, 1e6], got {text:?}"),
        )),
    }
}
