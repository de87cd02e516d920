//! Reading a sweep file: TOML → checked [`Sweep`], every error located as `file:line: key:
//! message`.

use std::path::Path;

use toml_edit::{ImDocument, Item, Value as EditValue};

use super::{plot, Axis, Sweep};
use crate::error::{read_text, Error, Result};

/// Reads and checks the sweep file at `path` (syntax, keys, axes, that the base exists).
pub fn load_sweep(path: &Path) -> Result<Sweep> {
    let text = read_text(path)?;
    parse_sweep(path, &text)
}

/// Parses sweep text; `path` names the source in errors and resolves `base`.
pub fn parse_sweep(path: &Path, text: &str) -> Result<Sweep> {
    let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(path, text, &e))?;
    let doc = ImDocument::parse(text).map_err(|e| Error::file(path, e.message()))?;
    let at = Locator {
        path,
        text,
        doc: &doc,
    };
    let field = |keys: &[&str], message: String| at.key_error(keys, message);
    for key in table.keys() {
        if !["base", "metrics", "axes", "facet"].contains(&key.as_str()) {
            return Err(field(
                &[key],
                "unknown key (expected base, metrics, axes or facet)".into(),
            ));
        }
    }
    let base = match table.get("base") {
        None => return Err(field(&["base"], "missing: the base scenario file".into())),
        Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(field(&["base"], "must be a path (a string)".into())),
    };
    let (metrics, metric_lines) = parse_metrics(table.get("metrics"), &at)?;
    let axes = parse_axes(table.get("axes"), &at)?;
    let facet = match table.get("facet") {
        None => None,
        Some(toml::Value::String(key)) => match axes.iter().position(|a| &a.key == key) {
            Some(i) if i >= 2 => Some(key.clone()),
            Some(_) => {
                return Err(field(
                    &["facet"],
                    format!("{key:?} is the plots' x axis or lines; facet a later axis"),
                ))
            }
            None => return Err(field(&["facet"], format!("{key:?} is not one of the axes"))),
        },
        Some(_) => return Err(field(&["facet"], "must be an axis key (a string)".into())),
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    let base_path = dir.join(&base);
    if let Err(e) = std::fs::metadata(&base_path) {
        return Err(field(
            &["base"],
            format!("cannot read {}: {e}", base_path.display()),
        ));
    }
    Ok(Sweep {
        path: path.to_path_buf(),
        base,
        base_path,
        metrics,
        metric_lines,
        axes,
        facet,
        set: Vec::new(),
    })
}

fn parse_metrics(
    value: Option<&toml::Value>,
    at: &Locator<'_>,
) -> Result<(Vec<String>, Vec<usize>)> {
    let field = |keys: &[&str], message: String| at.key_error(keys, message);
    let list = match value {
        None => {
            return Err(field(
                &["metrics"],
                "missing: the report values to keep".into(),
            ))
        }
        Some(toml::Value::Array(a)) if !a.is_empty() => a,
        Some(_) => {
            return Err(field(
                &["metrics"],
                "must be a non-empty array of metric paths".into(),
            ))
        }
    };
    let (mut metrics, mut lines) = (Vec::new(), Vec::new());
    for (i, v) in list.iter().enumerate() {
        let line = at.element_line(&["metrics"], i);
        let bad = |m: String| Error::field(at.path, line, "metrics", m);
        let name = v
            .as_str()
            .ok_or_else(|| bad(format!("{v} is not a metric path (a string)")))?;
        if name.is_empty() || name.split('.').any(str::is_empty) {
            return Err(bad(format!("{name:?} is not a dotted path")));
        }
        if let Some(j) = metrics
            .iter()
            .position(|m: &String| plot::file_name(m) == plot::file_name(name))
        {
            return Err(bad(format!(
                "{name:?} repeats {:?} (their plots share a file name)",
                metrics[j]
            )));
        }
        metrics.push(name.to_string());
        lines.push(line);
    }
    Ok((metrics, lines))
}

fn parse_axes(value: Option<&toml::Value>, at: &Locator<'_>) -> Result<Vec<Axis>> {
    let field = |keys: &[&str], message: String| at.key_error(keys, message);
    let table = match value {
        None => return Err(field(&["axes"], "missing: the [axes] table".into())),
        Some(toml::Value::Table(t)) => t,
        Some(_) => return Err(field(&["axes"], "must be a table of KEY = [values]".into())),
    };
    if table.is_empty() {
        return Err(field(&["axes"], "no axis: add KEY = [values]".into()));
    }
    let mut axes = Vec::new();
    for (key, v) in table {
        let keys = ["axes", key.as_str()];
        let here = |m: String| Error::field(at.path, at.key_line(&keys), key, m);
        if key.split('.').any(str::is_empty) {
            return Err(here("is not a dotted scenario key".into()));
        }
        let values = match v {
            toml::Value::Array(a) if !a.is_empty() => a.clone(),
            _ => return Err(here("must be a non-empty array of values".into())),
        };
        let mut lines = Vec::new();
        for (i, x) in values.iter().enumerate() {
            let line = at.element_line(&keys, i);
            let bad = |m: String| Error::field(at.path, line, key, m);
            if matches!(x, toml::Value::Datetime(_)) {
                return Err(bad(format!("{x}: dates are not supported")));
            }
            if values[..i].contains(x) {
                return Err(bad(format!("{x} appears twice")));
            }
            lines.push(line);
        }
        axes.push(Axis {
            key: key.clone(),
            values,
            lines,
        });
    }
    let total = super::points_of(axes.iter().map(|a| a.values.len()));
    if total.is_none_or(|n| n > crate::limits::MAX_SWEEP_POINTS) {
        let lens: Vec<String> = axes.iter().map(|a| a.values.len().to_string()).collect();
        return Err(field(
            &["axes"],
            format!(
                "{} points ({}) are more than {}: split the sweep into several files",
                total.map_or("too many".to_string(), |n| n.to_string()),
                lens.join(" x "),
                crate::limits::MAX_SWEEP_POINTS
            ),
        ));
    }
    Ok(axes)
}

/// A TOML syntax or type error, as `file:line: key: message`.
fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    let message = e.message().trim().to_string();
    let Some(span) = e.span() else {
        return Error::file(path, message);
    };
    let line = line_of(text, span.start);
    let key = text
        .lines()
        .nth(line - 1)
        .and_then(|l| l.split('=').next())
        .map(|k| k.trim().trim_matches(['[', ']', '"']).trim())
        .filter(|k| !k.is_empty())
        .unwrap_or("line");
    Error::field(path, line, key, message)
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Finds the lines of keys and array elements in a parsed sweep file.
struct Locator<'a> {
    path: &'a Path,
    text: &'a str,
    doc: &'a ImDocument<&'a str>,
}

impl Locator<'_> {
    /// The item at `keys` (tables or inline tables on the way) and the offset of the deepest key
    /// found.
    fn find(&self, keys: &[&str]) -> (Option<&Item>, Option<usize>) {
        let mut item = self.doc.as_item();
        let mut offset = None;
        for key in keys {
            let found = match item {
                Item::Table(t) => t.get_key_value(key),
                Item::Value(EditValue::InlineTable(t)) => t.get_key_value(key),
                _ => None,
            };
            let Some((k, v)) = found else {
                return (None, offset);
            };
            offset = k
                .span()
                .map(|s| s.start)
                .or(v.span().map(|s| s.start))
                .or(offset);
            item = v;
        }
        (Some(item), offset)
    }

    /// `file:line: key: message` at the key at `keys`.
    fn key_error(&self, keys: &[&str], message: String) -> Error {
        Error::field(self.path, self.key_line(keys), keys.join("."), message)
    }

    /// The line of the key at `keys` (its deepest written part; 1 if absent).
    fn key_line(&self, keys: &[&str]) -> usize {
        self.find(keys).1.map_or(1, |o| line_of(self.text, o))
    }

    /// The line of element `i` of the array at `keys` (the key's line if unknown).
    fn element_line(&self, keys: &[&str], i: usize) -> usize {
        match self.find(keys) {
            (Some(Item::Value(EditValue::Array(a))), _) => a
                .get(i)
                .and_then(|v| v.span())
                .map_or_else(|| self.key_line(keys), |s| line_of(self.text, s.start)),
            _ => self.key_line(keys),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_files_are_checked_with_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("base.toml"), "").unwrap();
        let path = dir.path().join("s.toml");
        let parse = |text: &str| parse_sweep(&path, text).map_err(|e| e.to_string());
        let ok = parse(
            "base = \"base.toml\"\nmetrics = [\"hit_rate\"]\n[axes]\n\"cluster.workers\" = [\n  2,\n  4,\n]\nseed = [1]\n",
        )
        .unwrap();
        assert_eq!(ok.axes[0].key, "cluster.workers");
        assert_eq!(ok.axes[0].lines, [5, 6]);
        assert_eq!(ok.points_total(), 2);
        let p = path.display();
        let err = parse("base = \"base.toml\"\nmetrics = [\"a\"]\nfoo = 1\n[axes]\nseed = [1]\n");
        assert_eq!(
            err.unwrap_err(),
            format!("{p}:3: foo: unknown key (expected base, metrics, axes or facet)")
        );
        let err = parse("base = \"base.toml\"\nmetrics = [\"a\"]\n[axes]\n");
        assert!(err
            .unwrap_err()
            .starts_with(&format!("{p}:3: axes: no axis")));
        let err = parse("base = \"base.toml\"\nmetrics = [\"a\"]\n[axes]\nseed = []\n");
        assert!(err
            .unwrap_err()
            .starts_with(&format!("{p}:4: seed: must be a non-empty")));
        // Too many points to load, or to count: refused at the axes, each axis' length named.
        let err = parse(&format!(
            "base = \"base.toml\"\nmetrics = [\"a\"]\n[axes]\nseed = [{}]\n\"cluster.workers\" = [{}]\n",
            (1..=1001).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
            (1..=1000).map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
        ));
        assert_eq!(
            err.unwrap_err(),
            format!("{p}:3: axes: 1001000 points (1001 x 1000) are more than 1000000: split the sweep into several files")
        );
        let wide: String = (0..64).map(|i| format!("k{i} = [1, 2]\n")).collect();
        let err = parse(&format!(
            "base = \"base.toml\"\nmetrics = [\"a\"]\n[axes]\n{wide}"
        ));
        let err = err.unwrap_err();
        assert!(err.contains("axes: too many points (2 x 2 x"), "{err}");
        let err = parse("base = \"nope.toml\"\nmetrics = [\"a\"]\n[axes]\nseed = [1]\n");
        assert!(err
            .unwrap_err()
            .starts_with(&format!("{p}:1: base: cannot read")));
        let err = parse("metrics = [\"a\"]\n[axes]\nseed = [1]\n");
        assert!(err
            .unwrap_err()
            .starts_with(&format!("{p}:1: base: missing")));
    }
}
