//! Locating what is wrong in a TOML file: the line and dotted key of a syntax, type or range
//! error, and serde's messages in words a file's author uses. Scenarios, model files and
//! profiles share it.

use std::path::Path;

use toml_edit::{ImDocument, Item, Value};

use crate::error::Error;

/// serde's type errors in words a scenario's author uses: `invalid type: string "abc", expected
/// usize` becomes `expected a whole number >= 0, got "abc"`. Other messages pass unchanged.
pub fn readable(message: &str) -> String {
    let Some((unexpected, expected)) = type_error(message) else {
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
        other if other.starts_with("internally tagged enum ") => "a table",
        other => other,
    };
    format!("expected {want}, got {got}")
}

/// A TOML syntax or type error, as `file:line: key: message`, the key dotted with its table
/// (`bus.drop_rate`). An unknown field that toml reports at its table's header is moved to the
/// line that spells it; `moved` gives a hint for a key that moved elsewhere.
///
/// `T` is the type the text was read as: when two keys hold the value a type error refused, the
/// text is read again as `T` with values changed, to tell which key serde refused.
pub fn toml_error<T: serde::de::DeserializeOwned>(
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
    // A type error inside a tagged table (`[workload]` with its `kind`) or an inline table is
    // reported at the table: the key in it whose value is the one refused is the one at fault.
    let refused_in = |t: &str| {
        toml::from_str::<T>(t)
            .err()
            .and_then(|e| refused_value(e.message().trim()))
    };
    if let Some(found) =
        refused_value(&message).and_then(|v| holding(text, &lines, line, &v, &refused_in))
    {
        let message = readable(&message);
        return Error::field(path, found.0, found.1, message);
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

/// What a type error (`invalid type: …, expected …` or `invalid value: …`) got and expected. It
/// is split at the last `, expected `: a string it got may spell one (`"a, expected b"`), what
/// the code expects does not.
fn type_error(message: &str) -> Option<(&str, &str)> {
    message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))?
        .rsplit_once(", expected ")
}

/// A value serde refused, as its type error spells it (`invalid value: integer `-3`, expected
/// usize` → the integer -3).
#[derive(Debug, PartialEq)]
enum Refused {
    Integer(i64),
    Float(f64),
    Text(String),
    Boolean(bool),
    List,
    Table,
}

impl Refused {
    /// Whether `value` is the one refused, as the type error spells it.
    fn is(&self, value: &Value) -> bool {
        match (self, value) {
            (Refused::Integer(want), Value::Integer(v)) => v.value() == want,
            (Refused::Float(want), Value::Float(v)) => v.value() == want,
            (Refused::Text(want), Value::String(v)) => &format!("{:?}", v.value()) == want,
            (Refused::Boolean(want), Value::Boolean(v)) => v.value() == want,
            (Refused::List, Value::Array(_)) => true,
            (Refused::Table, Value::InlineTable(_)) => true,
            _ => false,
        }
    }
}

/// The value a type error (`invalid type: …, expected …`) refused, if it names one.
fn refused_value(message: &str) -> Option<Refused> {
    let (unexpected, _) = type_error(message)?;
    let literal = |kind: &str| {
        unexpected
            .strip_prefix(kind)
            .map(|v| v.trim_matches('`').to_string())
    };
    if let Some(v) = literal("integer ") {
        v.parse().ok().map(Refused::Integer)
    } else if let Some(v) = literal("floating point ") {
        v.parse().ok().map(Refused::Float)
    } else if let Some(v) = literal("boolean ") {
        v.parse().ok().map(Refused::Boolean)
    } else if unexpected == "sequence" {
        Some(Refused::List)
    } else if unexpected == "map" {
        Some(Refused::Table)
    } else {
        unexpected
            .strip_prefix("string ")
            .map(|v| Refused::Text(v.to_string()))
    }
}

/// The key, from 1-based `line` to the next table header (or through the value of the
/// `key = value` line `line`, which may span lines), whose value is `refused`: its line and
/// dotted path (`workload.requests`, `workload.input.tokens`, `faults[1].at_ms`).
///
/// serde does not say which of two equal values it refused, and naming the wrong key is worse
/// than naming the table (None). So each key holding the value is tried with `refused_in` (the
/// value a reading of a text refuses): a key is the one refused when, with its value alone
/// changed to a neighbour ([`neighbour`]), the reading refuses the neighbour, and with every
/// other key's value changed instead, it still refuses the value. No other key can pass both
/// (one that took the value and refused its neighbour fails the second, as long as a field that
/// refuses a value refuses its neighbour too: true of a bound, a sign or a kind, the refusals
/// of the types read here, not of a field refusing 0 alone, a `NonZeroUsize`), so a key is
/// named only when exactly one passes; else (or past [`MOST_KEYS_TRIED`] keys) None. A lone
/// key is tried too: the one refused may lie outside the region (`[workload.input]` written
/// above `[workload]`), and only a lone key without a neighbour (a list) is named untried.
fn holding(
    text: &str,
    lines: &[&str],
    line: usize,
    refused: &Refused,
    refused_in: &dyn Fn(&str) -> Option<Refused>,
) -> Option<(usize, String)> {
    let doc = ImDocument::parse(text).ok()?;
    let mut found = Vec::new();
    leaves(doc.as_item(), "", &mut found);
    // Every leaf is placed on its line: by a search of the newlines' offsets, as counting them
    // afresh for each ([`line_of`]) took most of a minute for a file of 100,000 keys.
    let newlines: Vec<usize> = text.match_indices('\n').map(|(at, _)| at).collect();
    let line_at = |offset: usize| newlines.partition_point(|&n| n < offset) + 1;
    let header = lines
        .get(line - 1)
        .is_some_and(|l| l.trim_start().starts_with('['));
    // A table's region runs on through its sub-tables and its array's later elements.
    let last = match header.then(|| table_above(lines, line)).flatten() {
        Some(table) => {
            let within = |l: &str| {
                table_above(&[l], 1).is_some_and(|t| {
                    t == table
                        || t.starts_with(&format!("{table}."))
                        || t.starts_with(&format!("{table}["))
                })
            };
            (line + 1..=lines.len())
                .find(|&n| lines[n - 1].trim_start().starts_with('[') && !within(lines[n - 1]))
                .map_or(lines.len(), |n| n - 1)
        }
        // A list or an inline table may run on over the lines after its key's.
        None => found
            .iter()
            .filter(|(_, offset, _)| line_at(*offset) == line)
            .filter_map(|(_, _, value)| value.span())
            .map(|span| line_at(span.end))
            .fold(line, usize::max),
    };
    let matches: Vec<_> = found
        .into_iter()
        .map(|(key, offset, value)| (line_at(offset), key, value))
        .filter(|(at, _, value)| (line..=last).contains(at) && refused.is(value))
        .collect();
    if matches.len() > MOST_KEYS_TRIED {
        return None;
    }
    // Each match's span and its neighbour, all or none.
    let changes: Option<Vec<(std::ops::Range<usize>, String, Refused)>> = matches
        .iter()
        .map(|(_, _, value)| {
            let (literal, named) = neighbour(value)?;
            Some((value.span()?, literal, named))
        })
        .collect();
    let Some(changes) = changes else {
        return match &matches[..] {
            [(at, key, _)] => Some((*at, key.clone())),
            _ => None,
        };
    };
    // The spans in text order (a table's keys need not come in it); scalars' spans are apart.
    let mut in_text: Vec<usize> = (0..changes.len()).collect();
    in_text.sort_by_key(|&i| changes[i].0.start);
    debug_assert!(in_text
        .windows(2)
        .all(|w| changes[w[0]].0.end <= changes[w[1]].0.start));
    let changed_text = |changed: &dyn Fn(usize) -> bool| {
        let mut out = String::with_capacity(text.len() + 16);
        let mut from = 0;
        for &i in &in_text {
            let (span, literal, _) = &changes[i];
            if changed(i) {
                out.push_str(&text[from..span.start]);
                out.push_str(literal);
                from = span.end;
            }
        }
        out.push_str(&text[from..]);
        out
    };
    let mut refused_keys = (0..matches.len()).filter(|&i| {
        refused_in(&changed_text(&|j| j == i)).as_ref() == Some(&changes[i].2)
            && refused_in(&changed_text(&|j| j != i)).as_ref() == Some(refused)
    });
    let i = refused_keys.next()?;
    if refused_keys.next().is_some() {
        return None;
    }
    Some((matches[i].0, matches[i].1.clone()))
}

/// The most keys holding one refused value that [`holding`] tries, two readings each: a file
/// repeating a bad value thousands of times is named by its table, not read thousands of
/// times over.
const MOST_KEYS_TRIED: usize = 16;

/// Another value of `value`'s kind that a field takes or refuses as it does `value` (one further
/// from zero, the other truth value, the text with one more character), as TOML spells it and
/// as a type error would name it. None for lists and tables, and at the ends of the numbers.
fn neighbour(value: &Value) -> Option<(String, Refused)> {
    match value {
        Value::Integer(v) => {
            let x = *v.value();
            let y = if x < 0 {
                x.checked_sub(1)?
            } else {
                x.checked_add(1)?
            };
            Some((y.to_string(), Refused::Integer(y)))
        }
        Value::Float(v) => {
            let x = *v.value();
            let y = if x == 0.0 { 1.0 } else { x * 2.0 };
            y.is_finite().then(|| (format!("{y:?}"), Refused::Float(y)))
        }
        Value::String(v) => {
            let y = format!("{}_", v.value());
            let literal = Value::from(y.as_str()).to_string();
            Some((literal.trim().to_string(), Refused::Text(format!("{y:?}"))))
        }
        Value::Boolean(v) => {
            let y = !*v.value();
            Some((y.to_string(), Refused::Boolean(y)))
        }
        _ => None,
    }
}

/// Every value in `item` (an inline table or a list, then what it holds) with its dotted path
/// and the offset of its key (of the list that holds it, for a list's element).
fn leaves<'a>(item: &'a Item, path: &str, out: &mut Vec<(String, usize, &'a Value)>) {
    match item {
        Item::Table(t) => table_leaves(t, path, out),
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                table_leaves(t, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// [`leaves`] of a table's keys, each under `path`, with its key's offset.
fn table_leaves<'a>(
    table: &'a toml_edit::Table,
    path: &str,
    out: &mut Vec<(String, usize, &'a Value)>,
) {
    for (k, v) in table.iter() {
        let key = if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        };
        match (v, table.key(k).and_then(|k| k.span())) {
            (Item::Value(value), Some(at)) => value_leaves(value, &key, at.start, out),
            _ => leaves(v, &key, out),
        }
    }
}

/// `value` at `path` (its key at offset `at`), then what it holds when it is an inline table or a
/// list.
fn value_leaves<'a>(
    value: &'a Value,
    path: &str,
    at: usize,
    out: &mut Vec<(String, usize, &'a Value)>,
) {
    match value {
        Value::InlineTable(t) => {
            out.push((path.to_string(), at, value));
            for (k, v) in t.iter() {
                let at = t.key(k).and_then(|k| k.span()).map_or(at, |s| s.start);
                value_leaves(v, &format!("{path}.{k}"), at, out);
            }
        }
        Value::Array(a) => {
            out.push((path.to_string(), at, value));
            for (i, v) in a.iter().enumerate() {
                let at = v.span().map_or(at, |s| s.start);
                value_leaves(v, &format!("{path}[{i}]"), at, out);
            }
        }
        scalar => out.push((path.to_string(), at, scalar)),
    }
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
    fn a_type_error_names_the_value_it_refused() {
        let cases = [
            (
                "invalid value: integer `-3`, expected usize",
                Some(Refused::Integer(-3)),
            ),
            (
                "invalid type: floating point `1.5`, expected u64",
                Some(Refused::Float(1.5)),
            ),
            (
                "invalid type: string \"a\\\"b\", expected f64",
                Some(Refused::Text("\"a\\\"b\"".into())),
            ),
            (
                "invalid type: boolean `true`, expected usize",
                Some(Refused::Boolean(true)),
            ),
            (
                "invalid type: sequence, expected usize",
                Some(Refused::List),
            ),
            ("invalid type: map, expected a string", Some(Refused::Table)),
            ("unknown field `x`, expected `y`", None),
            (
                "invalid type: string \"a, expected b\", expected usize",
                Some(Refused::Text("\"a, expected b\"".into())),
            ),
        ];
        for (message, want) in cases {
            assert_eq!(refused_value(message), want, "{message}");
        }
        // The text form matches a TOML string as its escapes spell it.
        let doc = ImDocument::parse("k = \"a\\\"b\"").unwrap();
        let value = doc.get("k").unwrap().as_value().unwrap();
        assert!(Refused::Text("\"a\\\"b\"".into()).is(value));
    }

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
                "invalid type: string \"a, expected b\", expected usize",
                "expected a whole number >= 0, got \"a, expected b\"",
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
