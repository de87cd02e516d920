//! A sweep's output folder: `results.json`, `results.csv` and, once the results
//! are complete, one plot per metric. Merging shards goes through the same writer, so merged
//! shards equal the unsharded sweep byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::plot;
use super::results::{canonical, SweepResults};
use crate::error::{read_text, Error, Result};
use crate::output::pretty_json;

/// The files of the output folder, by name: `results.json`, `results.csv` and, when `results`
/// is complete, `<metric>.svg` for each metric (dots replaced by underscores).
pub fn render(results: &SweepResults) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = vec![
        ("results.json".to_string(), pretty_json(results)),
        ("results.csv".to_string(), csv_bytes(results)?),
    ];
    if results.is_complete() {
        for (metric, name, facet) in plot::plot_files(results) {
            files.push((name, plot::svg(results, &metric, facet).into_bytes()));
        }
    }
    Ok(files)
}

/// Whether a sweep (or a merge) writes, or removes, a file of this name in its output folder:
/// `results.json`, `results.csv` and the plots.
pub fn writes(name: &str) -> bool {
    name == "results.json" || name == "results.csv" || name.ends_with(".svg")
}

/// Removes the plots of `metrics` left in `dir` by an earlier, complete sweep, so that a shard
/// written there does not sit beside plots of other results. Missing files are fine.
pub fn remove_stale_plots(dir: &Path, results: &SweepResults) -> Result<()> {
    for (_, name, _) in plot::plot_files(results) {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::file(&path, format!("cannot remove stale plot: {e}"))),
        }
    }
    Ok(())
}

/// `results.csv`: axis keys then metric names; one row per point; values as JSON text, strings
/// unquoted.
pub fn csv_bytes(results: &SweepResults) -> Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let fail = |e: csv::Error| Error::file("results.csv", e.to_string());
    let header = results
        .axes
        .iter()
        .map(|a| a.key.as_str())
        .chain(results.metrics.iter().map(String::as_str));
    w.write_record(header).map_err(fail)?;
    for p in &results.points {
        let axes = results.axes.iter().map(|a| p.axes.get(&a.key));
        let metrics = results.metrics.iter().map(|m| p.metrics.get(m));
        let row: Vec<String> = axes.chain(metrics).map(cell).collect();
        w.write_record(&row).map_err(fail)?;
    }
    w.into_inner()
        .map_err(|e| Error::file("results.csv", e.to_string()))
}

fn cell(v: Option<&Json>) -> String {
    match v {
        None => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Reads `dir/results.json`.
pub fn read_results(dir: &Path) -> Result<SweepResults> {
    let path = dir.join("results.json");
    let text = read_text(&path)?;
    serde_json::from_str(&text).map_err(|e| {
        Error::field(
            &path,
            e.line(),
            "results",
            format!("not a sweep's results: {e}"),
        )
    })
}

/// Unions the points of shards (folder, results) of one sweep into complete results: they must
/// describe the same sweep and hold every point exactly once.
pub fn merge(shards: Vec<(PathBuf, SweepResults)>) -> Result<SweepResults> {
    let mut shards = shards.into_iter();
    let (first_dir, mut merged) = shards
        .next()
        .ok_or_else(|| Error::arg("merge", "no shard folders given"))?;
    let mut from: BTreeMap<usize, Vec<PathBuf>> = BTreeMap::new();
    check_points(&first_dir, &merged)?;
    for p in &merged.points {
        from.entry(p.index).or_default().push(first_dir.clone());
    }
    // The shard whose digest of the input files the others are held to: the first that has one
    // (a shard written before digests has none, and must not let two others' differ).
    let mut digest_dir = merged.contents.is_some().then(|| first_dir.clone());
    for (dir, r) in shards {
        if let Some(what) = differs(&r, &merged) {
            let than = match &digest_dir {
                Some(d) if what == CONTENTS => d,
                _ => &first_dir,
            };
            return Err(Error::file(
                &dir,
                format!("not the same sweep as {}: {what} differs", than.display()),
            ));
        }
        if merged.contents.is_none() && r.contents.is_some() {
            merged.contents.clone_from(&r.contents);
            digest_dir = Some(dir.clone());
        }
        check_points(&dir, &r)?;
        for p in r.points {
            from.entry(p.index).or_default().push(dir.clone());
            merged.points.push(p);
        }
    }
    let duplicate: Vec<String> = from
        .iter()
        .filter(|(_, dirs)| dirs.len() > 1)
        .map(|(i, dirs)| {
            let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            format!("{i} (in {})", dirs.join(", "))
        })
        .collect();
    if !duplicate.is_empty() {
        return Err(Error::arg(
            "merge",
            format!("points given more than once: {}", duplicate.join("; ")),
        ));
    }
    // Every index is below points_total (check_points) and given once: the missing ones are
    // counted, and only the first few listed, without a list of every one (a results.json can
    // claim billions of points in a few lines).
    let missing = merged.points_total - from.len();
    if missing > 0 {
        let first: Vec<usize> = (0..merged.points_total)
            .filter(|i| !from.contains_key(i))
            .take(21)
            .collect();
        return Err(Error::arg(
            "merge",
            format!(
                "{missing} of {} points missing (is a shard missing?): {}",
                merged.points_total,
                list(&first)
            ),
        ));
    }
    merged.points.sort_by_key(|p| p.index);
    canonical(&mut merged);
    Ok(merged)
}

/// What [`differs`] calls the digest of the input files.
const CONTENTS: &str = "the digest of its input files (contents)";

/// What makes two results not the same sweep's (`base`, `metrics`, ...), if anything. Results
/// without a contents digest (written before there was one) are taken at their word.
pub fn differs(a: &SweepResults, b: &SweepResults) -> Option<&'static str> {
    let contents = match (&a.contents, &b.contents) {
        (Some(x), Some(y)) => x != y,
        _ => false,
    };
    let differs = [
        ("base", a.base != b.base),
        (CONTENTS, contents),
        ("metrics", a.metrics != b.metrics),
        ("axes", a.axes != b.axes),
        ("points_total", a.points_total != b.points_total),
        ("facet", a.facet != b.facet),
        ("set", a.set != b.set),
    ];
    differs.iter().find(|(_, d)| *d).map(|(what, _)| *what)
}

/// The points of an interrupted run of the same sweep in `dir` (its `results.json`), for
/// `--resume`: none when there is no such file; refused when it describes another sweep or
/// holds points of another shard.
pub fn resumable(
    dir: &Path,
    expected: &SweepResults,
    selects: impl Fn(usize) -> bool,
) -> Result<Vec<super::PointResult>> {
    if !dir.join("results.json").exists() {
        return Ok(Vec::new());
    }
    let prior = read_results(dir)?;
    let path = dir.join("results.json");
    if let Some(what) = differs(&prior, expected) {
        return Err(Error::file(
            &path,
            format!("cannot resume: not the same sweep ({what} differs)"),
        ));
    }
    check_points(dir, &prior)?;
    if let Some(p) = prior.points.iter().find(|p| !selects(p.index)) {
        return Err(Error::file(
            &path,
            format!("cannot resume: point {} is not this shard's", p.index),
        ));
    }
    Ok(prior.points)
}

/// Checks that a shard's points belong to its sweep: index in range, axes as the index says,
/// every metric present.
fn check_points(dir: &Path, r: &SweepResults) -> Result<()> {
    // As a sweep file's: every axis has values, and the points are counted without wrapping.
    if let Some(a) = r.axes.iter().find(|a| a.values.is_empty()) {
        return Err(Error::file(dir, format!("axis {:?} has no values", a.key)));
    }
    // A metric names a plot file in the output folder: a path (`/tmp/x`, `a/b`) would write
    // outside it.
    if let Some(m) = r.metrics.iter().find(|m| {
        let name = plot::file_name(m);
        m.split('.').any(str::is_empty)
            || m.contains(['/', '\\'])
            || Path::new(&name).file_name() != Some(name.as_ref())
    }) {
        return Err(Error::file(
            dir,
            format!("metric {m:?} is not a dotted metric path"),
        ));
    }
    let lens = super::points_of(r.axes.iter().map(|a| a.values.len()));
    if r.axes.is_empty() || lens != Some(r.points_total) {
        return Err(Error::file(
            dir,
            format!(
                "points_total {} is not the product of the axes' lengths",
                r.points_total
            ),
        ));
    }
    for p in &r.points {
        let bad = |m: &str| Error::file(dir, format!("point {}: {m}", p.index));
        if p.index >= r.points_total {
            return Err(bad("index out of range"));
        }
        let expected: Map<String, Json> = r
            .axes
            .iter()
            .zip(r.combination(p.index))
            .map(|(a, v)| (a.key.clone(), a.values[v].clone()))
            .collect();
        if p.axes != expected {
            return Err(bad("axis values do not match its index"));
        }
        if !r.metrics.iter().all(|m| p.metrics.contains_key(m))
            || p.metrics.len() != r.metrics.len()
        {
            return Err(bad("metrics do not match the sweep's"));
        }
        // A sweep's metrics are numbers (`check_metrics`); a plot of a string has no point.
        if let Some((m, v)) = p
            .metrics
            .iter()
            .find(|(_, v)| !(v.is_number() || v.is_null()))
        {
            return Err(bad(&format!("metric {m:?} is {v}, not a number")));
        }
    }
    Ok(())
}

/// `1, 2, 5` — at most 20 numbers, then `...`.
fn list(indices: &[usize]) -> String {
    let mut parts: Vec<String> = indices.iter().take(20).map(usize::to_string).collect();
    if indices.len() > 20 {
        parts.push("...".into());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::results::{AxisValues, PointResult};
    use serde_json::json;

    fn results(indices: &[usize]) -> SweepResults {
        let mut r = SweepResults {
            facet: None,
            set: Vec::new(),
            base: "b.toml".into(),
            metrics: vec!["m".into()],
            axes: vec![AxisValues {
                key: "seed".into(),
                values: vec![json!(1), json!(2), json!(3)],
            }],
            points_total: 3,
            points: vec![],
            contents: Some("0123456789abcdef".into()),
        };
        for &i in indices {
            r.points.push(PointResult {
                index: i,
                axes: [("seed".to_string(), json!(i + 1))].into_iter().collect(),
                metrics: [("m".to_string(), json!(0.1 * i as f64))]
                    .into_iter()
                    .collect(),
                warnings: Vec::new(),
            });
        }
        r
    }

    #[test]
    fn merging_shards_gives_the_whole_sweep() {
        let whole = {
            let mut r = results(&[0, 1, 2]);
            canonical(&mut r);
            r
        };
        let shards = vec![("a".into(), results(&[1])), ("b".into(), results(&[0, 2]))];
        assert_eq!(merge(shards).unwrap(), whole);
        let err = merge(vec![("a".into(), results(&[1]))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "merge: 2 of 3 points missing (is a shard missing?): 0, 2"
        );
        let err = merge(vec![
            ("a".into(), results(&[0, 1])),
            ("b".into(), results(&[1, 2])),
        ]);
        assert!(err.unwrap_err().to_string().contains("1 (in a, b)"));
        let mut other = results(&[2]);
        other.base = "c.toml".into();
        let err = merge(vec![("a".into(), results(&[0, 1])), ("b".into(), other)]);
        assert_eq!(
            err.unwrap_err().to_string(),
            "b: not the same sweep as a: base differs"
        );
        // Shards run on edited inputs are not merged; one written before digests is taken at
        // its word.
        let mut edited = results(&[2]);
        edited.contents = Some("fedcba9876543210".into());
        let err = merge(vec![("a".into(), results(&[0, 1])), ("b".into(), edited)]);
        assert_eq!(
            err.unwrap_err().to_string(),
            "b: not the same sweep as a: the digest of its input files (contents) differs"
        );
        let mut older = results(&[2]);
        older.contents = None;
        assert!(merge(vec![("a".into(), results(&[0, 1])), ("b".into(), older)]).is_ok());
        // A first shard without a digest does not let two later ones differ: the first digest
        // holds the rest, and the merged results keep it.
        let mut older = results(&[0]);
        older.contents = None;
        let mut edited = results(&[2]);
        edited.contents = Some("fedcba9876543210".into());
        let shards = |last: SweepResults| {
            vec![
                ("a".into(), older.clone()),
                ("b".into(), results(&[1])),
                ("c".into(), last),
            ]
        };
        let err = merge(shards(edited)).unwrap_err().to_string();
        assert_eq!(
            err,
            "c: not the same sweep as b: the digest of its input files (contents) differs"
        );
        let merged = merge(shards(results(&[2]))).unwrap();
        assert_eq!(merged.contents, results(&[]).contents);
    }

    /// A shard claiming a trillion points (three axes of 10,000 values, a few hundred KB of
    /// JSON) is told which are missing without a list of every missing index in memory.
    #[test]
    fn a_huge_sweep_with_points_missing_is_refused_without_listing_them_all() {
        let mut r = results(&[0]);
        for key in ["a", "b"] {
            r.axes.push(AxisValues {
                key: key.into(),
                values: (0..10_000).map(|i| json!(i)).collect(),
            });
        }
        r.axes[0].values = (1..=10_000).map(|i| json!(i)).collect();
        r.points_total = 1_000_000_000_000;
        r.points[0].axes.insert("a".into(), json!(0));
        r.points[0].axes.insert("b".into(), json!(0));
        let err = merge(vec![("a".into(), r)]).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "merge: 999999999999 of 1000000000000 points missing (is a shard missing?): \
                 1, 2, 3,"
            ) && err.ends_with("20, ..."),
            "{err}"
        );
    }

    /// A results.json a sweep cannot have written is refused: an axis without values, axes whose
    /// points overflow a count (64 axes of two), a metric whose plot would be written outside
    /// the output folder.
    #[test]
    fn results_no_sweep_writes_are_refused() {
        let mut empty = results(&[]);
        empty.axes[0].values.clear();
        empty.points_total = 0;
        let err = merge(vec![("a".into(), empty)]).unwrap_err().to_string();
        assert_eq!(err, "a: axis \"seed\" has no values");
        let mut wide = results(&[]);
        wide.axes = (0..64)
            .map(|i| AxisValues {
                key: format!("k{i}"),
                values: vec![json!(1), json!(2)],
            })
            .collect();
        wide.points_total = 0;
        let err = merge(vec![("a".into(), wide)]).unwrap_err().to_string();
        assert!(
            err.contains("is not the product of the axes' lengths"),
            "{err}"
        );
        for metric in ["/tmp/x", "a/b", "a..b"] {
            let mut r = results(&[0, 1, 2]);
            r.metrics = vec![metric.into()];
            for p in &mut r.points {
                p.metrics = [(metric.to_string(), json!(1))].into_iter().collect();
            }
            let err = merge(vec![("a".into(), r)]).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("a: metric {metric:?} is not a dotted metric path"),
            );
        }
        // A string or a list where a number goes: no sweep writes one, no plot can draw it.
        for (value, shown) in [(json!("fast"), "\"fast\""), (json!([1]), "[1]")] {
            let mut odd = results(&[0, 1, 2]);
            odd.points[1].metrics.insert("m".into(), value);
            let err = merge(vec![("a".into(), odd)]).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("a: point 1: metric \"m\" is {shown}, not a number")
            );
        }
        let mut empty = results(&[0, 1, 2]);
        empty.points[1].metrics.insert("m".into(), json!(null));
        assert!(merge(vec![("a".into(), empty)]).is_ok(), "null: no value");
    }

    #[test]
    fn canonical_floats_read_back_equal() {
        let mut r = results(&[0, 1, 2]);
        r.points[1].metrics.insert("m".into(), json!(0.1 + 0.2));
        canonical(&mut r);
        let back: SweepResults = serde_json::from_slice(&pretty_json(&r)).unwrap();
        assert_eq!(back, r);
        assert_eq!(pretty_json(&back), pretty_json(&r));
    }

    #[test]
    fn csv_has_axes_then_metrics_and_unquoted_strings() {
        let mut r = results(&[0]);
        r.axes.push(AxisValues {
            key: "router.policy".into(),
            values: vec![json!("rr")],
        });
        r.points[0].axes.insert("router.policy".into(), json!("rr"));
        let text = String::from_utf8(csv_bytes(&r).unwrap()).unwrap();
        assert_eq!(text, "seed,router.policy,m\n1,rr,0.0\n");
    }
}
