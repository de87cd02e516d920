//! `compare`: scenarios side by side.

use std::path::PathBuf;

use clap::Args;

use super::progress::{Progress, ProgressMode};
use super::ExitCode;
use crate::compare::{labels, render, table, Compared};
use crate::error::{Error, Result};
use crate::output::{check_outputs, write_dir, write_stdout, Inputs, Output};
use crate::run::run_scenarios;
use crate::scenario::{load_scenario, Override};

/// `dynsim compare`'s arguments.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The scenario files (TOML), two or more.
    #[arg(required = true, num_args = 2.., value_name = "SCENARIO")]
    scenarios: Vec<PathBuf>,
    /// The output folder (created if missing): compare.json, ttft_cdf.svg, tpot_cdf.svg,
    /// per_worker_load.svg.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Overrides any key of every scenario by its dotted path (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Scenarios run at once (default: the number of CPUs).
    #[arg(long, value_parser = super::parse::at_least_one)]
    jobs: Option<usize>,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

/// A `--set` error of one of several scenarios, naming which: the same `--set` goes to each,
/// and may fit one and not another (`--set: timing.service_ms ...` became
/// `--set (on b.toml): timing.service_ms ...`). Errors that name a file already are kept.
fn on_scenario(e: Error, file: &std::path::Path) -> Error {
    let on = |at: String| {
        if at.starts_with("--set") {
            format!("{at} (on {})", file.display())
        } else {
            at
        }
    };
    match e {
        Error::Setting {
            at,
            key,
            value,
            problem,
        } => Error::Setting {
            at: on(at),
            key,
            value,
            problem,
        },
        Error::Arg { flag, message } => Error::Arg {
            flag: on(flag),
            message,
        },
        other => other,
    }
}

/// Runs the scenarios, prints the table and writes the folder.
pub fn compare(a: CompareArgs) -> Result<ExitCode> {
    let loaded = a
        .scenarios
        .iter()
        .map(|p| load_scenario(p, &a.set).map_err(|e| on_scenario(e, p)))
        .collect::<Result<Vec<_>>>()?;
    let mut inputs = Inputs::new();
    for (path, l) in a.scenarios.iter().zip(&loaded) {
        inputs.add("a scenario", path);
        super::run_cmds::add_scenario_files(&mut inputs, l);
    }
    let writes = |name: &str| name == "compare.json" || name.ends_with(".svg");
    check_outputs(&[Output::Folder("--out", &a.out, &writes)], &inputs)?;
    let jobs = a.jobs.unwrap_or_else(super::cpus);
    let progress = Progress::new(a.progress, "compare", loaded.len() as u64, "scenarios");
    let reports = run_scenarios(&loaded, jobs, &|| progress.inc(1))?;
    progress.finish();
    let files: Vec<String> = a
        .scenarios
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let runs: Vec<Compared> = labels(&files)
        .into_iter()
        .zip(files)
        .zip(reports)
        .map(|((label, file), report)| Compared {
            label,
            file,
            report,
        })
        .collect();
    let warnings = crate::warnings::summarize(
        runs.iter()
            .map(|r| (r.label.as_str(), r.report.warnings.as_slice())),
        ("scenario", "scenarios"),
    );
    for line in warnings {
        tracing::warn!("{line}");
    }
    write_dir(&a.out, &render(&runs))?;
    write_stdout(table(&runs).as_bytes())?;
    Ok(0)
}
