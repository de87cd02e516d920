//! The scenario's keys and the report's fields, generated from their types (`schemars` reads
//! the same doc comments and serde attributes the parser uses): `dynsim schema` prints every
//! scenario key with its type, default and meaning; `--json-schema scenario|report` prints JSON
//! Schemas that editors check files against.

use serde_json::{Map, Value as Json};

use crate::router::registry::POLICIES;

/// The JSON Schema of a scenario file (each policy's `[router.NAME]` table included).
pub fn scenario_schema() -> Json {
    let mut root = serde_json::to_value(schemars::schema_for!(crate::scenario::Scenario))
        .expect("a schema serialises");
    plain_descriptions(&mut root);
    for &(definition, tag, keys) in REQUIRED {
        require(&mut root, definition, tag, keys);
    }
    let mut tables = Map::new();
    for p in POLICIES {
        let s = serde_json::to_value((p.settings)()).expect("a schema serialises");
        tables.insert(p.name.to_string(), inline(&s));
    }
    if let Some(router) = root
        .pointer_mut("/definitions/Router")
        .and_then(Json::as_object_mut)
    {
        let props = router
            .entry("properties")
            .or_insert_with(|| Json::Object(Map::new()));
        if let Json::Object(props) = props {
            props.extend(tables);
            // The validator takes the registry's names, no other.
            if let Some(Json::Object(policy)) = props.get_mut("policy") {
                policy.insert("enum".into(), crate::router::registry::names().into());
            }
        }
    }
    root
}

/// Keys the parser defaults to `""` but the validator refuses empty, so that a table (or the
/// variant with the tag given) must give them: (definition, tag, keys).
const REQUIRED: &[(&str, Option<&str>, &[&str])] = &[
    ("DeploymentSettings", None, &["model", "gpu"]),
    ("Workload", Some("trace"), &["path"]),
];

/// Marks `keys` of `definition` (of its variant tagged `tag`) required, without a default.
fn require(root: &mut Json, definition: &str, tag: Option<&str>, keys: &[&str]) {
    let Some(def) = root.pointer_mut(&format!("/definitions/{definition}")) else {
        panic!("no definition {definition}");
    };
    let table = match tag {
        None => Some(def),
        Some(tag) => def
            .get_mut("oneOf")
            .and_then(Json::as_array_mut)
            .into_iter()
            .flatten()
            .find(|v| {
                variant_tags(&serde_json::json!({ "oneOf": [v] }))
                    .iter()
                    .any(|t| t.ends_with(&format!("= \"{tag}\"")))
            }),
    };
    let table = table.unwrap_or_else(|| panic!("{definition} has no variant {tag:?}"));
    for key in keys {
        let prop = table
            .pointer_mut(&format!("/properties/{key}"))
            .and_then(Json::as_object_mut)
            .unwrap_or_else(|| panic!("{definition} has no key {key}"));
        prop.remove("default");
        let required = table
            .as_object_mut()
            .expect("a table")
            .entry("required")
            .or_insert_with(|| Json::Array(Vec::new()));
        if let Json::Array(r) = required {
            if !r.iter().any(|k| k == key) {
                r.push((*key).into());
            }
        }
    }
}

/// The JSON Schema of `dynsim run --json`'s report.
pub fn report_schema() -> Json {
    let mut root =
        serde_json::to_value(schemars::schema_for!(crate::report::Report)).expect("serialises");
    plain_descriptions(&mut root);
    root
}

/// Every `description` of `schema` (the doc comments) without rustdoc's links: ``[`a::b::C`]``
/// reads `` `C` `` (a user reads the schema, not the crate's documentation).
fn plain_descriptions(schema: &mut Json) {
    match schema {
        Json::Object(m) => {
            for (k, v) in m.iter_mut() {
                match v {
                    Json::String(text) if k == "description" => *text = plain_links(text),
                    other => plain_descriptions(other),
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

/// `text` with each intra-doc link ``[`path::Name`]`` as `` `Name` `` (a code span that then
/// touches another, `` `1..=`[`MAX`] ``, joins it: `` `1..=MAX` ``).
fn plain_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        let path = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push('`');
        out.push_str(path.rsplit("::").next().unwrap_or(path));
        out.push('`');
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out.replace("``", "")
}

/// A policy's settings schema with its definitions inlined (it sits inside the scenario's).
fn inline(root: &Json) -> Json {
    let defs = root.get("definitions").cloned().unwrap_or(Json::Null);
    let mut s = root.clone();
    if let Json::Object(m) = &mut s {
        m.remove("definitions");
        m.remove("$schema");
    }
    resolve_all(&s, &defs)
}

fn resolve_all(v: &Json, defs: &Json) -> Json {
    match v {
        Json::Object(m) => {
            if let Some(name) = m.get("$ref").and_then(Json::as_str) {
                let key = name.trim_start_matches("#/definitions/");
                if let Some(d) = defs.get(key) {
                    return resolve_all(d, defs);
                }
            }
            Json::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), resolve_all(v, defs)))
                    .collect(),
            )
        }
        Json::Array(a) => Json::Array(a.iter().map(|v| resolve_all(v, defs)).collect()),
        other => other.clone(),
    }
}

/// One line of `dynsim schema`: a key, its type, its default and its meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The dotted key (`bus.drop_rate`), with the variant it belongs to
    /// (`workload.path (kind = "trace")`).
    pub key: String,
    /// Its type in words.
    pub ty: String,
    /// Its default as TOML would spell it, or empty.
    pub default: String,
    /// Its doc comment, on one line.
    pub meaning: String,
}

/// Every key of a scenario file, in the order of the types' fields.
pub fn scenario_keys() -> Vec<Key> {
    let root = scenario_schema();
    let defs = root.get("definitions").cloned().unwrap_or(Json::Null);
    let mut out = Vec::new();
    walk("", "", &resolve_all(&root, &defs), &mut out);
    out
}

/// `dynsim schema`'s text: one block per key.
pub fn scenario_text() -> String {
    let mut text = String::from(
        "Every key of a scenario file (TOML). Omitted keys take their default; unknown keys are \
         refused. `--set KEY=VALUE` takes the same dotted keys.\n",
    );
    for k in scenario_keys() {
        text.push_str(&format!("\n{}  ({}", k.key, k.ty));
        if !k.default.is_empty() {
            text.push_str(&format!(", default {}", k.default));
        }
        text.push_str(")\n");
        if !k.meaning.is_empty() {
            text.push_str(&format!("    {}\n", k.meaning));
        }
    }
    text
}

fn walk(prefix: &str, variant: &str, schema: &Json, out: &mut Vec<Key>) {
    let schema = single(schema);
    if let Some(variants) = schema.get("oneOf").and_then(Json::as_array) {
        if variants.iter().all(|v| v.get("properties").is_some()) {
            for v in variants {
                let tag = v
                    .get("properties")
                    .and_then(|p| p.as_object())
                    .and_then(|p| {
                        p.iter().find_map(|(k, s)| {
                            enum_values(single(s))
                                .filter(|e| e.len() == 1)
                                .map(|e| format!("{k} = {}", e[0]))
                        })
                    })
                    .unwrap_or_default();
                // A union inside a variant (`workload.input` of `kind = "synthetic"`) is
                // named by both tags.
                let tag = if variant.is_empty() {
                    tag
                } else {
                    format!("{variant}, {tag}")
                };
                walk(prefix, &tag, v, out);
            }
            return;
        }
    }
    let Some(props) = schema.get("properties").and_then(Json::as_object) else {
        return;
    };
    for (name, sub) in props {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let sub_s = single(sub);
        // An optional table (`[deployment]`) lists its keys like a table.
        let sub_s = optional_table(sub_s).unwrap_or(sub_s);
        let is_table = sub_s.get("properties").is_some()
            || sub_s
                .get("oneOf")
                .and_then(Json::as_array)
                .is_some_and(|v| v.iter().all(|x| x.get("properties").is_some()));
        if is_table {
            if sub_s.get("oneOf").is_some() && !std::ptr::eq(sub_s, single(sub)) {
                // An optional table of variants (`rate_schedule`): a line of its own says
                // what it is for, then its variants' keys.
                out.push(Key {
                    key: shown(&key, variant),
                    ty: format!("table, optional: {}", variant_tags(sub_s).join(" or ")),
                    default: String::new(),
                    meaning: description(sub).unwrap_or_default(),
                });
            }
            walk(&key, variant, sub_s, out);
            continue;
        }
        if let Some(item) = sub_s.get("items").filter(|i| is_tables(i)) {
            // A list of tables (`[[faults]]`): its entries' keys as `faults[].worker`.
            out.push(Key {
                key: key.clone(),
                ty: "list of tables".into(),
                default: String::new(),
                meaning: description(sub).unwrap_or_default(),
            });
            walk(&format!("{key}[]"), variant, single(item), out);
            continue;
        }
        if !variant.is_empty() && enum_values(sub_s).is_some_and(|e| e.len() == 1) {
            // The variant's tag (`kind`) itself: one line per variant.
            out.push(Key {
                key,
                ty: format!("{variant} selects these keys"),
                default: String::new(),
                meaning: description(sub)
                    .or_else(|| description(schema))
                    .unwrap_or_default(),
            });
            continue;
        }
        let required = schema
            .get("required")
            .and_then(Json::as_array)
            .is_some_and(|r| r.iter().any(|k| k == name));
        out.push(Key {
            key: shown(&key, variant),
            ty: if required {
                format!("{}, required", type_words(sub_s))
            } else {
                type_words(sub_s)
            },
            default: sub
                .get("default")
                .or_else(|| sub_s.get("default"))
                .map(toml_text)
                .unwrap_or_default(),
            meaning: description(sub).unwrap_or_default(),
        });
    }
}

/// `key` as listed: with the variant it belongs to, if any (`workload.path (kind = "trace")`).
fn shown(key: &str, variant: &str) -> String {
    if variant.is_empty() {
        key.to_string()
    } else {
        format!("{key} ({variant})")
    }
}

/// The tags of a union of tables (`shape = "sine"`, `shape = "piecewise"`).
fn variant_tags(s: &Json) -> Vec<String> {
    let variants = s.get("oneOf").and_then(Json::as_array);
    variants
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.get("properties")?.as_object()?.iter().find_map(|(k, s)| {
                enum_values(single(s))
                    .filter(|e| e.len() == 1)
                    .map(|e| format!("{k} = {}", e[0]))
            })
        })
        .collect()
}

/// Whether a schema describes a table (its keys) or tables tagged by a key.
fn is_tables(s: &Json) -> bool {
    let s = single(s);
    s.get("properties").is_some()
        || s.get("oneOf")
            .and_then(Json::as_array)
            .is_some_and(|v| v.iter().all(|x| x.get("properties").is_some()))
}

/// The table (or union of tables) an optional table's schema (`anyOf: [table, null]`) holds.
fn optional_table(s: &Json) -> Option<&Json> {
    let options = s.get("anyOf")?.as_array()?;
    let mut tables = options
        .iter()
        .filter(|o| o.get("type").and_then(Json::as_str) != Some("null"))
        .map(single);
    let table = tables.next().filter(|t| is_tables(t))?;
    (tables.next().is_none() && options.len() == 2).then_some(table)
}

/// A schema wrapped in `allOf: [one]` (how a described field refers to its type) unwrapped.
fn single(s: &Json) -> &Json {
    match s.get("allOf").and_then(Json::as_array) {
        Some(a) if a.len() == 1 => single(&a[0]),
        _ => s,
    }
}

fn description(s: &Json) -> Option<String> {
    let d = s
        .get("description")
        .or_else(|| single(s).get("description"))?;
    Some(d.as_str()?.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The values a schema allows, when it lists them: `enum`, `const`, or a `oneOf` of those (an
/// enum whose variants carry doc comments).
fn enum_values(s: &Json) -> Option<Vec<String>> {
    let s = single(s);
    if let Some(c) = s.get("const") {
        return Some(vec![c.to_string()]);
    }
    if let Some(values) = s.get("enum").and_then(Json::as_array) {
        return Some(values.iter().map(Json::to_string).collect());
    }
    let options = s.get("oneOf")?.as_array()?;
    let values: Option<Vec<Vec<String>>> = options.iter().map(enum_values).collect();
    Some(values?.concat())
}

/// Whether a schema is `{"type": "null"}` (the absent half of an optional key).
fn is_null(s: &Json) -> bool {
    s.get("type").and_then(Json::as_str) == Some("null")
}

fn type_words(s: &Json) -> String {
    if let Some(values) = enum_values(s) {
        return format!("one of {}", values.join(", "));
    }
    if let Some(options) = s
        .get("oneOf")
        .or_else(|| s.get("anyOf"))
        .and_then(Json::as_array)
    {
        let present: Vec<&Json> = options.iter().filter(|o| !is_null(o)).collect();
        let optional = if present.len() < options.len() {
            ", optional"
        } else {
            ""
        };
        let values: Option<Vec<Vec<String>>> = present.iter().map(|o| enum_values(o)).collect();
        if let Some(values) = values {
            return format!("one of {}{optional}", values.concat().join(", "));
        }
        if let Some(d) = s.get("description").and_then(Json::as_str) {
            return d.to_string();
        }
        let words: Vec<String> = options.iter().map(type_words).collect();
        return words.join(" or ");
    }
    let ty = match s.get("type") {
        Some(Json::String(t)) => vec![t.clone()],
        Some(Json::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let optional = ty.iter().any(|t| t == "null");
    let base: Vec<String> = ty
        .into_iter()
        .filter(|t| t != "null")
        .map(|t| match t.as_str() {
            "integer" => {
                let bound = |k: &str| s.get(k).and_then(Json::as_f64).map(|x| x as i64);
                match (bound("minimum"), bound("maximum")) {
                    (Some(min), Some(max)) => format!("whole number in {min}..={max}"),
                    (Some(min), None) => format!("whole number >= {min}"),
                    (None, Some(max)) => format!("whole number <= {max}"),
                    (None, None) => "whole number".to_string(),
                }
            }
            "number" => "number".to_string(),
            "boolean" => "true or false".to_string(),
            "string" => "string".to_string(),
            "array" => match s.get("items") {
                Some(Json::Array(items)) => format!(
                    "list of {} {}",
                    items.len(),
                    items.first().map(type_words).unwrap_or_default()
                ),
                Some(item) if item.get("properties").is_some() => "list of tables".into(),
                Some(item) => format!("list of {}", type_words(single(item))),
                None => "list".into(),
            },
            other => other.to_string(),
        })
        .collect();
    let words = base.join(" or ");
    if optional {
        format!("{words}, optional")
    } else {
        words
    }
}

fn toml_text(v: &Json) -> String {
    match v {
        Json::Null => String::new(),
        Json::String(s) => format!("{s:?}"),
        Json::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_text).collect::<Vec<_>>().join(", ")
        ),
        Json::Object(m) if m.is_empty() => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_key_is_listed_with_type_default_and_meaning() {
        let keys = scenario_keys();
        let find = |k: &str| {
            keys.iter()
                .find(|x| x.key == k)
                .unwrap_or_else(|| panic!("{k}"))
        };
        let drop = find("bus.drop_rate");
        assert_eq!((drop.ty.as_str(), drop.default.as_str()), ("number", "0.0"));
        assert!(drop.meaning.contains("lost"), "{drop:?}");
        assert_eq!(find("cluster.kv_capacity_blocks").default, "\"unbounded\"");
        assert!(find("workload.path (kind = \"trace\")")
            .meaning
            .contains("trace file"));
        assert!(find("router.dynamo.router_approximate_cache_policy")
            .ty
            .contains("\"lru\""));
        assert!(find("router.llm-d.precise_prefix_weight").default == "2.0");
        // Every key the default scenario serialises is listed (the policy tables aside).
        let table = toml::Table::try_from(crate::scenario::Scenario::default()).unwrap();
        for (top, v) in &table {
            match v {
                toml::Value::Table(t) if top != "workload" => {
                    for k in t.keys() {
                        let key = format!("{top}.{k}");
                        let nested = format!("{key}.");
                        assert!(
                            keys.iter()
                                .any(|x| x.key == key || x.key.starts_with(&nested)),
                            "{key} missing"
                        );
                    }
                }
                _ => assert!(
                    keys.iter().any(|x| x.key.starts_with(top.as_str())),
                    "{top}"
                ),
            }
        }
    }

    #[test]
    fn enums_read_as_their_values_and_optional_schedules_list_their_keys() {
        let keys = scenario_keys();
        let ty = |k: &str| {
            keys.iter()
                .find(|x| x.key == k)
                .unwrap_or_else(|| panic!("{k} missing"))
                .ty
                .clone()
        };
        // An optional enum whose variants carry doc comments (`anyOf` of a `oneOf`, and null).
        assert_eq!(
            ty("timing.model"),
            "one of \"steps\", \"fixed\", \"roofline\", optional"
        );
        assert!(ty("kv.host.write_policy").starts_with("one of \"write_back\""));
        assert!(ty("router.policy").starts_with("one of \"rr\""));
        for k in &keys {
            assert!(
                !k.ty.contains('`') && k.ty != k.meaning,
                "a description in the type column: {k:?}"
            );
            assert!(!k.meaning.contains("[`"), "a rustdoc link: {k:?}");
        }
        // The optional schedule's keys, under both workloads that take one.
        for (table, kind) in [
            ("workload.rate_schedule", "synthetic"),
            ("workload.speedup_schedule", "trace"),
        ] {
            assert!(ty(&format!("{table} (kind = \"{kind}\")")).starts_with("table, optional"));
            for (key, shape) in [
                ("peak", "sine"),
                ("trough", "sine"),
                ("period_s", "sine"),
                ("peak_at_s", "sine"),
                ("points", "piecewise"),
                ("interpolate", "piecewise"),
            ] {
                ty(&format!(
                    "{table}.{key} (kind = \"{kind}\", shape = \"{shape}\")"
                ));
            }
            assert!(keys.iter().any(|k| k.key == format!("{table}.shape")));
        }
    }

    #[test]
    fn rustdoc_links_read_as_plain_names() {
        assert_eq!(
            plain_links("see [`crate::a::b`]: one of [`X`], `1..=`[`MAX`]."),
            "see `b`: one of `X`, `1..=MAX`."
        );
        for schema in [scenario_schema(), report_schema()] {
            assert!(!schema.to_string().contains("[`"));
        }
    }

    #[test]
    fn the_schemas_are_json_schemas() {
        let s = scenario_schema();
        assert_eq!(s["title"], "Scenario");
        assert!(s.pointer("/definitions/Router/properties/dynamo").is_some());
        assert_eq!(report_schema()["title"], "Report");
    }
}
