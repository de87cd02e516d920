//! `run` and `diff`: the engine's commands.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::ExitCode;
use crate::diff::diff_files;
use crate::error::Result;
use crate::output::AtomicFile;
use crate::run::run_scenario;
use crate::scenario::{load_scenario, Override};

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
    /// Writes one JSONL line per delivered message.
    #[arg(long, value_name = "OUT.jsonl")]
    trace: Option<PathBuf>,
    /// Prints one JSON object instead of the summary table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let mut overrides = a.set;
    if let Some(seed) = a.seed {
        overrides.push(Override {
            key: "seed".into(),
            value: toml::Value::Integer(seed as i64),
        });
    }
    let loaded = load_scenario(&a.scenario, &overrides)?;
    let report = match &a.trace {
        Some(path) => {
            let mut file = AtomicFile::create(path)?;
            let report = run_scenario(&loaded.scenario, &loaded.base_dir, Some(&mut file))?;
            file.commit()?;
            report
        }
        None => run_scenario(&loaded.scenario, &loaded.base_dir, None)?,
    };
    let mut out = std::io::stdout().lock();
    let text = if a.json {
        serde_json::to_string(&report).expect("in-memory JSON") + "\n"
    } else {
        report.table()
    };
    let _ = out.write_all(text.as_bytes());
    Ok(0)
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
    print!("{}", d.render());
    Ok(if d.first.is_none() { 0 } else { 1 })
}
