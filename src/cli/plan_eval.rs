//! The planner's evaluator at the edge: it runs a batch of (policy, value) points on all cores,
//! remembers every point it ran, and, interrupted, keeps them in the output folder as
//! `plan.partial.json`, from which `--resume` answers the same points without running them
//! again (the search is deterministic, so it asks for the same points and the final files equal
//! an uninterrupted run's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::progress::Progress;
use crate::error::{read_text, Error, Result};
use crate::output::{pretty_json, write_dir};
use crate::plan::{Point, Sla};
use crate::report::Report;
use crate::run::run_scenarios_partial;
use crate::scenario::load::Loaded;
use crate::sweep::lookup;

/// The partial file's name in the output folder.
pub const PARTIAL: &str = "plan.partial.json";

/// What `plan.partial.json` holds: the plan it belongs to and the points run.
#[derive(Serialize, Deserialize)]
struct Partial {
    plan: Json,
    points: Vec<(String, Point)>,
}

/// The field of `plan.partial.json` an error reading it is about: `line` for text that is not
/// JSON, the field a missing-field error names, else `points` (`plan` takes any JSON value).
fn partial_field(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => "line",
        Category::Data if e.to_string().starts_with("missing field `plan`") => "plan",
        Category::Data => "points",
    }
}

/// What tells the plan `was` from the plan `is`, in words: "the SLAs", "an input file's
/// contents" and so on, by the keys of `run_plan`'s plan key.
fn differences(was: &Json, is: &Json) -> String {
    let words = |key: &str| match key {
        "input" => "the input",
        "scenario" => "--scenario",
        "format" => "--format",
        "set" => "--set",
        "sla" => "the SLAs",
        "policies" => "the policies",
        "workers" | "load" => "the range",
        "contents" => "the input files' contents",
        _ => "the settings",
    };
    let mut named: Vec<&str> = Vec::new();
    let keys = [was, is]
        .into_iter()
        .filter_map(Json::as_object)
        .flat_map(|o| o.keys());
    for key in keys {
        let word = words(key);
        if was.get(key) != is.get(key) && !named.contains(&word) {
            named.push(word);
        }
    }
    if named.is_empty() {
        named.push("the settings");
    }
    named.join(", ")
}

/// Runs points and remembers them.
pub struct Evaluator<'a> {
    /// What identifies the plan (its input, SLAs, policies, range, overrides).
    pub key: Json,
    /// The output folder, where an interrupted plan keeps its runs (none: they are lost).
    pub out: Option<PathBuf>,
    /// Runs at once.
    pub jobs: usize,
    /// The SLAs each point is measured against.
    pub slas: &'a [Sla],
    /// Progress on stderr.
    pub progress: &'a Progress,
    done: BTreeMap<(String, u64), Point>,
}

impl<'a> Evaluator<'a> {
    /// An evaluator keeping its runs in `out`'s folder when interrupted; with `out`'s resume
    /// flag, it starts from the points of `out/plan.partial.json` (none when there is no such
    /// file; refused when the file belongs to another plan).
    pub fn new(
        key: Json,
        out: Option<(&Path, bool)>,
        jobs: usize,
        slas: &'a [Sla],
        progress: &'a Progress,
    ) -> Result<Self> {
        let mut done = BTreeMap::new();
        let resume_from = out
            .filter(|&(_, resume)| resume)
            .map(|(dir, _)| dir.join(PARTIAL));
        if let Some(path) = resume_from.filter(|p| p.exists()) {
            let text = read_text(&path)?;
            let partial: Partial = serde_json::from_str(&text).map_err(|e| {
                Error::field(
                    &path,
                    e.line(),
                    partial_field(&e),
                    format!("not a plan's partial result: {e}"),
                )
            })?;
            if partial.plan != key {
                return Err(Error::file(
                    &path,
                    format!(
                        "cannot resume: it belongs to another plan ({} changed)",
                        differences(&partial.plan, &key)
                    ),
                ));
            }
            for (policy, point) in partial.points {
                done.insert((policy, point.value.to_bits()), point);
            }
        }
        Ok(Evaluator {
            key,
            out: out.map(|(dir, _)| dir.to_path_buf()),
            jobs,
            slas,
            progress,
            done,
        })
    }

    /// The points of `probes` ((policy, value), each loaded by `load`), run where not already
    /// known; interrupted, the known points are written to the partial file first.
    pub fn eval(
        &mut self,
        probes: &[(String, f64)],
        load: impl Fn(&str, f64) -> Result<Loaded>,
    ) -> Result<Vec<Point>> {
        let todo: Vec<&(String, f64)> = probes
            .iter()
            .filter(|(p, v)| !self.done.contains_key(&(p.clone(), v.to_bits())))
            .collect();
        let loaded = todo
            .iter()
            .map(|(p, v)| load(p, *v))
            .collect::<Result<Vec<_>>>()?;
        self.progress.grow(todo.len() as u64);
        let outcomes = run_scenarios_partial(&loaded, self.jobs, &|| self.progress.inc(1));
        let mut interrupted = false;
        for ((policy, value), outcome) in todo.into_iter().zip(outcomes) {
            match outcome {
                Some(Ok(report)) => {
                    let point = self.point(policy, *value, report)?;
                    self.done.insert((policy.clone(), value.to_bits()), point);
                }
                Some(Err(Error::Interrupted { .. })) | None => interrupted = true,
                Some(Err(e)) => return Err(e),
            }
        }
        if let (true, Some(out)) = (interrupted, &self.out) {
            let points: Vec<(String, Point)> = self
                .done
                .iter()
                .map(|((p, _), pt)| (p.clone(), pt.clone()))
                .collect();
            let n = points.len();
            let partial = Partial {
                plan: self.key.clone(),
                points,
            };
            write_dir(out, &[(PARTIAL.to_string(), pretty_json(&partial))])?;
            return Err(Error::Interrupted {
                kept: format!(
                    "{n} runs kept in {}; run the same command with --resume to finish",
                    out.join(PARTIAL).display()
                ),
            });
        }
        if interrupted {
            return Err(Error::Interrupted {
                kept: String::new(),
            });
        }
        Ok(probes
            .iter()
            .map(|(p, v)| self.done[&(p.clone(), v.to_bits())].clone())
            .collect())
    }

    /// A run's point: each SLA's metric, whether all are met, its warnings. Numbers are settled
    /// on what their JSON text reads back as, so a resumed point equals a fresh one.
    fn point(&self, policy: &str, value: f64, report: Report) -> Result<Point> {
        let json = serde_json::to_value(&report).expect("a report serialises");
        let mut metrics = BTreeMap::new();
        let mut meets = true;
        for s in self.slas {
            let v = lookup(&json, &s.path)
                .and_then(Json::as_f64)
                .ok_or_else(|| {
                    Error::arg(
                        "--sla",
                        format!(
                            "{}: the run of policy {policy} has no {:?}",
                            s.text(),
                            s.path
                        ),
                    )
                })?;
            let v = crate::sweep::results::settle_f64(v);
            meets &= s.met_by(v);
            metrics.insert(s.key.clone(), v);
        }
        Ok(Point {
            value,
            meets,
            metrics,
            warnings: report.warnings,
        })
    }

    /// Removes the partial file from `out`, which a finished plan no longer needs.
    pub fn remove_partial(out: &Path) -> Result<()> {
        let path = out.join(PARTIAL);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::file(&path, format!("cannot remove: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_partial_file_s_errors_name_the_field_at_fault() {
        let field = |text: &str| {
            super::partial_field(
                &serde_json::from_str::<super::Partial>(text)
                    .err()
                    .expect("refused"),
            )
        };
        assert_eq!(field("{\"plan\": 1, \"points\": ["), "line");
        assert_eq!(field("not json"), "line");
        assert_eq!(field("{\"points\": []}"), "plan");
        assert_eq!(field("{\"plan\": 1}"), "points");
        assert_eq!(field("{\"plan\": 1, \"points\": [[\"kv\", 3]]}"), "points");
    }
}
