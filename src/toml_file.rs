//! Locating what is wrong in a TOML file: the line and dotted key of a syntax, type or range
//! error, and serde's messages in words a file's author uses. Scenarios, model files and
//! profiles share it.

use std::path::Path;

use toml_edit::{ImDocument, Item, Value};

use crate::error::Error;

/// serde's type errors in words a scenario's author uses: `invalid type: string "abc", expected
/// usize` becomes `expected a whole number >= 0, got "abc"`. Other messages pass unchanged.
pub fn readable(message: &str) -> String {
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

/// A TOML syntax or type error, as `file:line: key: message`, the key dotted with its table
/// (`bus.drop_rate`). An unknown field that toml reports at its table's header is moved to the
/// line that spells it; `moved` gives a hint for a key that moved elsewhere.
pub fn toml_error(
    path: &Path,
    text: &str,
    e: &toml::de::Error,
    moved: fn(&str) -> Option<&'static str>,
) -> Error {
    let message = e.message().trim().to_string();
    let Some(span) = e.span() else {
        return Error::file(path, message);
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut line = line_of(text, span.start);
    // The name between backticks after `prefix` in the message.
    let named = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('`').next())
    };
    let missing = named("missing field `");
    if let Some(field) = named("unknown field `") {
        line = in_table(&lines, line, |l| key_of(l) == Some(field));
    }
    // A tagged enum's error points at its table, not at the value: the line in that table that
    // spells the unknown variant as a string is the one at fault.
    if let Some(variant) = named("unknown variant `") {
        let quoted = [format!("\"{variant}\""), format!("'{variant}'")];
        line = in_table(&lines, line, |l| {
            key_of(l).is_some() && quoted.iter().any(|q| l.contains(q))
        });
    }
    // A missing field is named, not the line that lacks it. The tags of the inline tables a
    // tagged table may hold (a length's `dist`, a schedule's `shape`) are missing from the
    // inline table that lacks them (`input = { tokens = 5 }`): that line and key. Any other
    // field (`kind`, a trace's `path`) is the table's own.
    if let Some(m) = missing.filter(|&m| INLINE_TAGS.contains(&m)) {
        let names = |l: &str| {
            l.split(['{', ',']).any(|part| {
                part.split_once('=')
                    .is_some_and(|(k, _)| k.trim().trim_matches('"') == m)
            })
        };
        line = in_table(&lines, line, |l| {
            key_of(l).is_some()
                && l.contains('{')
                && !names(l.split_once('=').map_or("", |(_, v)| v))
        });
    }
    let here = lines.get(line - 1).copied().unwrap_or("");
    let key = match (key_of(here), table_above(&lines, line), missing) {
        (Some(k), Some(t), _) => format!("{t}.{k}"),
        (Some(k), None, _) => k.to_string(),
        (None, Some(t), Some(m)) => format!("{t}.{m}"),
        (None, Some(t), None) => t,
        (None, None, Some(m)) => m.to_string(),
        (None, None, None) => "line".to_string(),
    };
    let message = match moved(&key) {
        Some(hint) if message.starts_with("unknown field") => hint.to_string(),
        _ => readable(&message),
    };
    Error::field(path, line, key, message)
}

/// The tags of the tagged inline tables a scenario holds: `LengthDist`'s `dist`
/// (`workload/synthetic.rs`) and `RateSchedule`'s `shape` (`workload/schedule.rs`).
const INLINE_TAGS: [&str; 2] = ["dist", "shape"];

/// The first 1-based line from `line` to the next table header (`line` itself may be one) for
/// which `fits` holds, else `line`.
fn in_table(lines: &[&str], line: usize, fits: impl Fn(&str) -> bool) -> usize {
    (line..=lines.len())
        .take_while(|&n| n == line || !lines[n - 1].trim_start().starts_with('['))
        .find(|&n| fits(lines[n - 1]))
        .unwrap_or(line)
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

/// The 1-based line that sets the dotted `key` in `text`, if the text spells it.
pub fn line_of_key(text: &str, key: &str) -> Option<usize> {
    key_offset(text, key).map(|offset| line_of(text, offset))
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Byte offset of the key at a path like `bus.drop_rate` or `faults[1].worker` in `text`: the
/// deepest part of the path that the file spells out.
pub fn key_offset(text: &str, key: &str) -> Option<usize> {
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
}
