//! `sweep` and `merge`: a scenario over a grid of settings, and sharded sweeps put back together.

use std::path::{Path, PathBuf};

use clap::Args;

use super::progress::{Progress, ProgressMode};
use super::ExitCode;
use crate::error::{Error, Result};
use crate::output::{check_outputs, write_dir, Inputs, Output};
use crate::scenario::Override;
use crate::sweep::output::{remove_stale_plots, render, writes};
use crate::sweep::{
    header, load_sweep, merge as merge_shards, read_results, resumable, run_sweep, Shard,
};

/// `dynsim sweep`'s arguments.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep file (TOML): base, metrics and [axes].
    sweep: PathBuf,
    /// The output folder (created if missing): results.json, results.csv, one SVG per metric.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Points run at once (default: the number of CPUs).
    #[arg(long, value_parser = super::parse::at_least_one)]
    jobs: Option<usize>,
    /// Runs only the points whose index % N == I, for `dynsim merge` (writes no plots).
    #[arg(long, value_name = "I/N")]
    shard: Option<Shard>,
    /// Overrides any key of the base scenario by its dotted path, before every point's axes
    /// (repeatable): --set cluster.workers=16
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<Override>,
    /// Continues an interrupted sweep: the points already in DIR/results.json are kept, the
    /// others run (the final files equal an uninterrupted run's).
    #[arg(long)]
    resume: bool,
    /// Progress on stderr.
    #[arg(long, value_enum, default_value_t)]
    progress: ProgressMode,
}

/// Runs a sweep (or one shard of it) and writes its output folder. Interrupted (SIGINT,
/// SIGTERM), it writes the points that finished, a resumable partial result.
pub fn sweep(a: SweepArgs) -> Result<ExitCode> {
    let mut sweep = load_sweep(&a.sweep)?;
    sweep.set = a.set;
    // Every point's files: an axis may name a trace, a model or a profile of its own.
    let mut inputs = Inputs::new();
    inputs.add("the sweep file", &a.sweep);
    inputs.add("the base scenario", &sweep.base_path);
    let points = sweep.load_points()?;
    for point in &points {
        super::run_cmds::add_scenario_files(&mut inputs, point);
    }
    check_outputs(&[Output::Folder("--out", &a.out, &writes)], &inputs)?;
    let shard = a.shard.unwrap_or(Shard::ALL);
    let jobs = a.jobs.unwrap_or_else(super::cpus);
    let prior = if a.resume {
        resumable(&a.out, &header(&sweep, &points), |i| shard.selects(i))?
    } else {
        Vec::new()
    };
    let selected = (0..sweep.points_total())
        .filter(|&i| shard.selects(i))
        .count();
    let progress = Progress::new(a.progress, "sweep", selected as u64, "points");
    progress.inc(prior.len() as u64);
    let tick = || progress.inc(1);
    let outcome = run_sweep(&sweep, points, shard, jobs, &tick, prior)?;
    progress.finish();
    let results = outcome.results;
    for line in results.warning_lines() {
        tracing::warn!("{line}");
    }
    let files = render(&results)?;
    write_dir(&a.out, &files)?;
    if results.points.len() < results.points_total {
        remove_stale_plots(&a.out, &results)?;
    }
    if outcome.interrupted {
        return Err(Error::Interrupted {
            kept: format!(
                "{} of {} points kept in {}; run the same command with --resume to finish",
                results.points.len(),
                selected,
                a.out.join("results.json").display()
            ),
        });
    }
    report(&a.out, results.points.len(), results.points_total, &files)?;
    Ok(0)
}

/// `dynsim merge`'s arguments.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Output folders of `dynsim sweep --shard` runs of one sweep.
    #[arg(required = true, value_name = "SHARD_DIR")]
    shards: Vec<PathBuf>,
    /// The output folder (created if missing), as an unsharded sweep would write it.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Merges shard folders into the unsharded sweep's output folder.
pub fn merge(a: MergeArgs) -> Result<ExitCode> {
    let mut inputs = Inputs::new();
    for dir in &a.shards {
        inputs.add("a shard's results", &dir.join("results.json"));
    }
    check_outputs(&[Output::Folder("--out", &a.out, &writes)], &inputs)?;
    let shards = a
        .shards
        .iter()
        .map(|dir| Ok((dir.clone(), read_results(dir)?)))
        .collect::<Result<Vec<_>>>()?;
    let results = merge_shards(shards)?;
    let files = render(&results)?;
    write_dir(&a.out, &files)?;
    report(&a.out, results.points.len(), results.points_total, &files)?;
    Ok(0)
}

/// One line on stdout: what was written where.
fn report(out: &Path, points: usize, total: usize, files: &[(String, Vec<u8>)]) -> Result<()> {
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let line = format!(
        "{points} of {total} points -> {}: {}\n",
        out.display(),
        names.join(", ")
    );
    crate::output::write_stdout(line.as_bytes())
}
