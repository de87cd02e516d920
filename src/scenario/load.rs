//! Reading a scenario: TOML text → `--set` overrides → [`Scenario`] → range checks, with every
//! error located (`file:line`, or `--set KEY`).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;
use toml_edit::{ImDocument, Item, Value};

use super::validate::{validate, Invalid};
use super::Scenario;
use crate::error::{read_text, Error, Result};

/// A `--set KEY=VALUE` override: a dotted key path and a TOML value (a bare word that is not
/// valid TOML is taken as a string, so `--set router.policy=rr` works like `="rr"`).
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// Dotted key path, e.g. `bus.drop_rate`.
    pub key: String,
    /// The value.
    pub value: toml::Value,
}

impl FromStr for Override {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (key, raw) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
        let key = key.trim();
        let bare = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !key.split('.').all(bare) {
            return Err(format!(
                "{key:?} is not a dotted key (letters, digits, _ and - between dots)"
            ));
        }
        let raw = raw.trim();
        let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(raw.to_string()));
        Ok(Override {
            key: key.to_string(),
            value,
        })
    }
}

/// A scenario read from a file, with the folder relative paths in it are resolved against.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The validated scenario.
    pub scenario: Scenario,
    /// The scenario file's folder.
    pub base_dir: PathBuf,
}

/// Reads, overrides and validates the scenario at `path`; without a `name`, the scenario takes
/// the file's stem.
pub fn load_scenario(path: &Path, overrides: &[Override]) -> Result<Loaded> {
    let text = read_text(path)?;
    let mut scenario = parse_scenario(path, &text, overrides)?;
    // A file that names no scenario (an empty one, say) is named after itself.
    if scenario.name.is_empty() {
        if let Some(stem) = path.file_stem() {
            scenario.name = stem.to_string_lossy().into_owned();
        }
    }
    let base_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    Ok(Loaded { scenario, base_dir })
}

/// Parses scenario text; `path` only names the source in errors.
pub fn parse_scenario(path: &Path, text: &str, overrides: &[Override]) -> Result<Scenario> {
    let mut scenario: Scenario = toml::from_str(text).map_err(|e| toml_error(path, text, &e))?;
    if !overrides.is_empty() {
        let mut table = toml::Table::try_from(&scenario).expect("a scenario serialises to TOML");
        for o in overrides {
            set_path(&mut table, &o.key, o.value.clone()).map_err(|m| set_error(o, &m))?;
            scenario = Scenario::deserialize(toml::Value::Table(table.clone()))
                .map_err(|e| set_error(o, e.message()))?;
        }
    }
    validate(&scenario).map_err(|inv| locate(path, text, overrides, inv))?;
    Ok(scenario)
}

fn set_error(o: &Override, message: &str) -> Error {
    Error::arg(format!("--set {}", o.key), readable(message.trim()))
}

/// serde's type errors in words a scenario's author uses: `invalid type: string "abc", expected
/// usize` becomes `expected a whole number >= 0, got "abc"`. Other messages pass unchanged.
fn readable(message: &str) -> String {
    let Some((unexpected, expected)) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return message.to_string();
    };
    let got = match unexpected {
        "sequence" => "a list".to_string(),
        "map" => "a table".to_string(),
        other => {
            let value = ["string ", "integer ", "floating point ", "boolean "]
                .iter()
                .find_map(|kind| other.strip_prefix(kind))
                .unwrap_or(other);
            value.trim_matches('`').to_string()
        }
    };
    let want = match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number >= 0",
        "i64" | "i32" | "i16" | "i8" | "isize" => "a whole number",
        "f64" | "f32" => "a number",
        "a boolean" => "true or false",
        "a sequence" => "a list",
        other => other,
    };
    format!("expected {want}, got {got}")
}

/// Sets `value` at the dotted `key` in `table`, creating tables on the way.
fn set_path(table: &mut toml::Table, key: &str, value: toml::Value) -> Result<(), String> {
    let mut parts = key.split('.').peekable();
    let mut current = table;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            current.insert(part.to_string(), value);
            return Ok(());
        }
        let entry = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = entry
            .as_table_mut()
            .ok_or_else(|| format!("{part} is not a table"))?;
    }
    Ok(())
}

/// A TOML syntax or type error, as `file:line: key: message`, the key dotted with its table
/// (`bus.drop_rate`). An unknown field that toml reports at its table's header is moved to the
/// line that spells it.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    let message = e.message().trim().to_string();
    let Some(span) = e.span() else {
        return Error::file(path, message);
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut line = line_of(text, span.start);
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        let spelled = (line..=lines.len())
            .take_while(|&n| n == line || !lines[n - 1].trim_start().starts_with('['))
            .find(|&n| key_of(lines[n - 1]) == Some(field));
        line = spelled.unwrap_or(line);
    }
    let here = lines.get(line - 1).copied().unwrap_or("");
    let key = match (key_of(here), table_above(&lines, line)) {
        (Some(k), Some(t)) => format!("{t}.{k}"),
        (Some(k), None) => k.to_string(),
        (None, Some(t)) => t,
        (None, None) => "line".to_string(),
    };
    let message = match moved_key(&key) {
        Some(hint) if message.starts_with("unknown field") => hint.to_string(),
        _ => readable(&message),
    };
    Error::field(path, line, key, message)
}

/// Where a key of an older scenario format went.
fn moved_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "cluster.service_ms" => {
            "moved: the fixed step time is [timing] service_ms, with model = \"fixed\""
        }
        "timing.max_batch" => {
            "replaced by the step scheduler's limit, [scheduler] max_num_seqs (requests running \
             at once; they now share each step)"
        }
        _ => return None,
    })
}

/// The key a `key = value` line sets.
fn key_of(line: &str) -> Option<&str> {
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then_some(key)
}

/// The table whose header is on or above 1-based `line` (`[bus]` → `bus`, `[[faults]]` →
/// `faults`).
fn table_above(lines: &[&str], line: usize) -> Option<String> {
    lines[..line.min(lines.len())].iter().rev().find_map(|l| {
        let l = l.trim();
        l.starts_with('[')
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_string())
    })
}

/// Points an out-of-range setting at its `--set`, its line, or (a default) the file.
fn locate(path: &Path, text: &str, overrides: &[Override], inv: Invalid) -> Error {
    // A problem that names another key (a product of two settings) is the override's too.
    let set_here = overrides.iter().any(|o| {
        inv.key == o.key
            || inv.key.starts_with(&format!("{}.", o.key))
            || inv.key.starts_with(&format!("{}[", o.key))
            || inv.problem.contains(&o.key)
    });
    let at = if set_here {
        "--set".to_string()
    } else {
        match key_offset(text, &inv.key) {
            Some(offset) => format!("{}:{}", path.display(), line_of(text, offset)),
            None => path.display().to_string(),
        }
    };
    Error::setting(at, inv.key, inv.value, readable(&inv.problem))
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Byte offset of the key at a path like `bus.drop_rate` or `faults[1].worker` in `text`: the
/// deepest part of the path that the file spells out.
fn key_offset(text: &str, key: &str) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    let mut node = Node::Item(doc.as_item());
    let mut offset = None;
    for part in key.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some((span, child)) = node.get(name) else {
            return offset;
        };
        offset = span.or(offset);
        node = child;
        if let Some(i) = index {
            let Some(element) = node.index(i) else {
                return offset;
            };
            node = element;
            offset = node.span().or(offset);
        }
    }
    offset
}

/// A place in a parsed TOML document, whichever way it was written (table, inline table, array).
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Table(&'a toml_edit::Table),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    /// The child at `name`, with the offset of its key.
    fn get(self, name: &str) -> Option<(Option<usize>, Node<'a>)> {
        let start = |k: &toml_edit::Key| k.span().map(|s| s.start);
        match self {
            Node::Item(Item::Table(t)) | Node::Table(t) => t
                .get_key_value(name)
                .map(|(k, v)| (start(k), Node::Item(v))),
            Node::Item(Item::Value(Value::InlineTable(t))) | Node::Value(Value::InlineTable(t)) => {
                t.get_key_value(name)
                    .map(|(k, v)| (start(k), Node::Item(v)))
            }
            _ => None,
        }
    }

    /// The element at `i` of an array or array of tables.
    fn index(self, i: usize) -> Option<Node<'a>> {
        match self {
            Node::Item(Item::ArrayOfTables(a)) => a.get(i).map(Node::Table),
            Node::Item(Item::Value(Value::Array(a))) | Node::Value(Value::Array(a)) => {
                a.get(i).map(Node::Value)
            }
            _ => None,
        }
    }

    fn span(self) -> Option<usize> {
        match self {
            Node::Item(i) => i.span(),
            Node::Table(t) => t.span(),
            Node::Value(v) => v.span(),
        }
        .map(|s| s.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_errors_read_as_what_was_expected_and_what_came() {
        let cases = [
            (
                "invalid type: string \"abc\", expected usize",
                "expected a whole number >= 0, got \"abc\"",
            ),
            (
                "invalid value: integer `-2`, expected u64",
                "expected a whole number >= 0, got -2",
            ),
            (
                "invalid type: floating point `1.5`, expected usize",
                "expected a whole number >= 0, got 1.5",
            ),
            (
                "invalid type: string \"x\", expected f64",
                "expected a number, got \"x\"",
            ),
            (
                "invalid type: integer `3`, expected a boolean",
                "expected true or false, got 3",
            ),
            (
                "invalid type: integer `3`, expected a sequence",
                "expected a list, got 3",
            ),
            (
                "unknown variant `x`, expected `lifo` or `fifo`",
                "unknown variant `x`, expected `lifo` or `fifo`",
            ),
        ];
        for (serde, want) in cases {
            assert_eq!(readable(serde), want);
        }
    }

    /// Every leaf key of every bundled scenario, set to the value it already has, gives the same
    /// scenario: a `--set` of a key to its value (its default included) changes no result.
    #[test]
    fn setting_a_key_to_its_own_value_changes_nothing() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        paths.push(PathBuf::from("<defaults>"));
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let base = parse_scenario(&path, &text, &[]).unwrap();
            let table = toml::Table::try_from(&base).unwrap();
            let mut leaves = Vec::new();
            flatten("", &toml::Value::Table(table), &mut leaves);
            assert!(leaves.len() > 20, "{}", path.display());
            for (key, value) in leaves {
                let o = Override {
                    key: key.clone(),
                    value,
                };
                let again = parse_scenario(&path, &text, &[o]).unwrap();
                assert_eq!(again, base, "{}: --set {key}", path.display());
            }
        }
    }

    /// The dotted leaf keys of `value` with their values (tables are walked, anything else is a
    /// leaf).
    fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<(String, toml::Value)>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, v, out);
                }
            }
            leaf => out.push((prefix.to_string(), leaf.clone())),
        }
    }
}
