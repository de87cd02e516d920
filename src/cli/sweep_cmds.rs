//! `sweep` and `merge`: a scenario over a grid of settings, and sharded sweeps put back together.

use std::path::{Path, PathBuf};

use clap::Args;

use super::progress::progress_bar;
use super::ExitCode;
use crate::error::Result;
use crate::output::{check_out_dir, write_dir};
use crate::scenario::Override;
use crate::sweep::output::{remove_stale_plots, render};
use crate::sweep::{load_sweep, merge as merge_shards, read_results, run_sweep, Shard};

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
}

/// Runs a sweep (or one shard of it) and writes its output folder.
pub fn sweep(a: SweepArgs) -> Result<ExitCode> {
    let mut sweep = load_sweep(&a.sweep)?;
    sweep.set = a.set;
    check_out_dir(&a.out)?;
    let shard = a.shard.unwrap_or(Shard::ALL);
    let jobs = a.jobs.unwrap_or_else(super::cpus);
    let selected = (0..sweep.points_total())
        .filter(|&i| shard.selects(i))
        .count();
    let bar = progress_bar(selected as u64, "points");
    let tick = || bar.inc(1);
    let results = run_sweep(&sweep, shard, jobs, &tick)?;
    bar.finish_and_clear();
    for line in results.warning_lines() {
        tracing::warn!("{line}");
    }
    let files = render(&results)?;
    write_dir(&a.out, &files)?;
    if results.points.len() < results.points_total {
        remove_stale_plots(&a.out, &results)?;
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
