//! `dynsim schema`: the JSON Schemas agree with what the binary writes and accepts, and the key
//! list says what the validator says.

use serde_json::Value;

use crate::common::{bad, ok};

/// The errors of `value` against `schema` (the draft-07 keywords schemars writes: `$ref` into
/// `definitions`, `allOf`, `anyOf`, `oneOf`, `type`, `enum`, `const`, `required`, `properties`,
/// `additionalProperties`, `items`, `minItems`, `maxItems`, `minimum`, `maximum`), each with the
/// JSON pointer of the value at fault. Enough to check dynsim's own schemas without a Python
/// package.
pub fn schema_errors(root: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(s) = schema.as_object() else {
        return errors; // `true` and the like accept anything.
    };
    if let Some(name) = s.get("$ref").and_then(Value::as_str) {
        let key = name.trim_start_matches("#/definitions/");
        let def = &root["definitions"][key];
        assert!(!def.is_null(), "{name}: no such definition");
        errors.extend(schema_errors(root, def, value, at));
    }
    for sub in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        errors.extend(schema_errors(root, sub, value, at));
    }
    for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(options) = s.get(key).and_then(Value::as_array) {
            let each: Vec<Vec<String>> = options
                .iter()
                .map(|o| schema_errors(root, o, value, at))
                .collect();
            let passing = each.iter().filter(|e| e.is_empty()).count();
            if passing == 0 || (exactly_one && passing > 1) {
                // Each option's own errors say why it refused.
                errors.push(format!(
                    "{at}: {passing} of {key}'s options accept {value} ({})",
                    each.concat().join("; ")
                ));
            }
        }
    }
    if let Some(ty) = s.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let fits = |t: &str| match t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "number" => value.is_number(),
            "integer" => value.is_i64() || value.is_u64(),
            _ => panic!("type {t}"),
        };
        if !types.iter().any(|t| fits(t)) {
            errors.push(format!("{at}: {value} is not {types:?}"));
        }
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        if !values.contains(value) {
            errors.push(format!("{at}: {value} is not one of {values:?}"));
        }
    }
    if let Some(c) = s.get("const") {
        if c != value {
            errors.push(format!("{at}: {value} is not {c}"));
        }
    }
    if let Some(x) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            if x < min {
                errors.push(format!("{at}: {x} is below the minimum {min}"));
            }
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            if x > max {
                errors.push(format!("{at}: {x} is above the maximum {max}"));
            }
        }
    }
    if let Some(obj) = value.as_object() {
        for key in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = key.as_str().unwrap();
            if !obj.contains_key(key) {
                errors.push(format!("{at}: required {key:?} is missing"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (key, v) in obj {
            let here = format!("{at}/{key}");
            match (
                props.and_then(|p| p.get(key)),
                s.get("additionalProperties"),
            ) {
                (Some(sub), _) => errors.extend(schema_errors(root, sub, v, &here)),
                (None, Some(Value::Bool(false))) => {
                    errors.push(format!("{here}: not a property the schema allows"))
                }
                (None, Some(extra @ Value::Object(_))) => {
                    errors.extend(schema_errors(root, extra, v, &here))
                }
                (None, _) => {}
            }
        }
    }
    if let Some(items) = value.as_array() {
        match s.get("items") {
            Some(Value::Array(each)) => {
                for (i, (sub, v)) in each.iter().zip(items).enumerate() {
                    errors.extend(schema_errors(root, sub, v, &format!("{at}/{i}")));
                }
            }
            Some(sub) => {
                for (i, v) in items.iter().enumerate() {
                    errors.extend(schema_errors(root, sub, v, &format!("{at}/{i}")));
                }
            }
            None => {}
        }
        let n = items.len() as u64;
        if s.get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|m| n < m)
            || s.get("maxItems")
                .and_then(Value::as_u64)
                .is_some_and(|m| n > m)
        {
            errors.push(format!("{at}: {n} items is outside the schema's bounds"));
        }
    }
    errors
}

/// The JSON Schema `dynsim schema --json-schema which` prints.
fn json_schema(which: &str) -> Value {
    serde_json::from_str(&ok(&["schema", "--json-schema", which])).expect("JSON")
}

#[test]
fn the_validator_of_these_tests_refuses_what_it_should() {
    let schema = json_schema("report");
    let report: Value = serde_json::from_str(&ok(&["run", "scenarios/rr.toml", "--json"])).unwrap();
    assert_eq!(
        schema_errors(&schema, &schema, &report, ""),
        Vec::<String>::new()
    );
    let mut wrong = report.clone();
    wrong.as_object_mut().unwrap().remove("requests");
    wrong["seed"] = "one".into();
    wrong["ttft_ms"]["p50"] = Value::Null;
    wrong["deployments"] = 1.into();
    let errors = schema_errors(&schema, &schema, &wrong, "");
    for part in [
        "\"requests\" is missing",
        "/seed",
        "/ttft_ms/p50",
        "/deployments",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(part)),
            "{part}: {errors:?}"
        );
    }
}

#[test]
fn real_reports_with_and_without_deployments_meet_the_report_schema() {
    let schema = json_schema("report");
    // Without a [deployment] (the report leaves `deployments` out), with one, disaggregated,
    // with host-tier, scaling and interval fields (cut short: a debug build runs them).
    for (scenario, cut) in [
        ("scenarios/rr.toml", None),
        ("scenarios/lossy-bus.toml", None),
        ("scenarios/disagg-one-gpu.toml", None),
        (
            "scenarios/qwen3-32b-fp8-h100.toml",
            Some("workload.limit=200"),
        ),
        ("scenarios/kv-tiers.toml", Some("workload.limit=200")),
        ("scenarios/scale.toml", Some("workload.requests=2000")),
        (
            "scenarios/burst-threshold.toml",
            Some("workload.requests=300"),
        ),
    ] {
        let mut args = vec!["run", scenario, "--json"];
        if let Some(set) = cut {
            args.extend(["--set", set]);
        }
        let report: Value = serde_json::from_str(&ok(&args)).unwrap();
        let errors = schema_errors(&schema, &schema, &report, "");
        assert!(errors.is_empty(), "{scenario}: {errors:?}");
        if scenario.contains("qwen3") {
            assert!(report["deployments"].is_array(), "{scenario}");
        }
    }
    let text = ok(&[
        "replay",
        "data/traces/mooncake_conversation_trace.jsonl",
        "--set",
        "workload.limit=50",
        "--json",
    ]);
    let report: Value = serde_json::from_str(&text).unwrap();
    assert!(report.get("deployments").is_none(), "left out when empty");
    let errors = schema_errors(&schema, &schema, &report, "");
    assert!(errors.is_empty(), "replay: {errors:?}");
}

/// A TOML file as the JSON an editor checks against the scenario schema.
fn toml_as_json(text: &str) -> Value {
    toml::from_str(text).expect("TOML")
}

#[test]
fn every_bundled_scenario_meets_the_scenario_schema() {
    let schema = json_schema("scenario");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let scenario = toml_as_json(&std::fs::read_to_string(&path).unwrap());
        let errors = schema_errors(&schema, &schema, &scenario, "");
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        checked += 1;
    }
    assert!(checked >= 20, "{checked} scenarios");
    // The optional schedule the key list now shows is one the schema takes.
    let scheduled = toml_as_json(
        "[workload]\nkind = \"synthetic\"\n\
         rate_schedule = { shape = \"piecewise\", points = [[0.0, 1.0], [10.0, 2.0]] }\n",
    );
    assert_eq!(
        schema_errors(&schema, &schema, &scheduled, ""),
        Vec::<String>::new()
    );
}

/// The schema of dotted `key` in the scenario schema `root`: through `$ref`, `allOf`, optional
/// tables (`anyOf` with null) and every variant of a tagged table (`oneOf`).
fn key_schema<'a>(root: &'a Value, key: &str) -> &'a Value {
    fn tables<'a>(root: &'a Value, s: &'a Value, out: &mut Vec<&'a Value>) {
        if let Some(name) = s.get("$ref").and_then(Value::as_str) {
            tables(
                root,
                &root["definitions"][name.trim_start_matches("#/definitions/")],
                out,
            );
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            for sub in s.get(k).and_then(Value::as_array).into_iter().flatten() {
                tables(root, sub, out);
            }
        }
        if s.get("properties").is_some() {
            out.push(s);
        }
    }
    let mut at = root;
    for part in key.split('.') {
        let mut candidates = Vec::new();
        tables(root, at, &mut candidates);
        at = candidates
            .into_iter()
            .find_map(|t| t["properties"].get(part))
            .unwrap_or_else(|| panic!("{key}: no {part}"));
    }
    at
}

/// Keys the validator refuses below a minimum (or above a maximum), each with the command line
/// of a run whose `--set KEY=VALUE` reaches the check (`TRACE`: a two-row Mooncake trace of
/// one-token prompts, which any `trace_block_size` reads).
const BOUNDED: &[(&str, &[&str])] = &[
    ("cluster.workers", &["run", "scenarios/rr.toml"]),
    ("cluster.block_size", &["run", "scenarios/rr.toml"]),
    ("workload.prefixes", &["run", "scenarios/rr.toml"]),
    ("workload.reps", &["run", "scenarios/rr.toml"]),
    ("router.replicas", &["run", "scenarios/rr.toml"]),
    ("disagg.model.layers", &["run", "scenarios/rr.toml"]),
    ("disagg.model.kv_heads", &["run", "scenarios/rr.toml"]),
    ("disagg.model.head_dim", &["run", "scenarios/rr.toml"]),
    ("disagg.model.dtype_bytes", &["run", "scenarios/rr.toml"]),
    (
        "engine.sglang.max_prefill_tokens",
        &[
            "run",
            "scenarios/rr.toml",
            "--set",
            "engine.kind=\"sglang\"",
        ],
    ),
    (
        "router.vllm-session.virtual_nodes",
        &[
            "run",
            "scenarios/rr.toml",
            "--set",
            "router.policy=\"vllm-session\"",
        ],
    ),
    ("workload.turns", &["run", "scenarios/disagg-one-gpu.toml"]),
    (
        "workload.concurrency",
        &["run", "scenarios/disagg-one-gpu.toml"],
    ),
    (
        "workload.output.tokens",
        &["run", "scenarios/disagg-one-gpu.toml"],
    ),
    (
        "planner.min_workers",
        &["run", "scenarios/burst-threshold.toml"],
    ),
    ("workload.limit", &["replay", "TRACE"]),
    ("workload.trace_block_size", &["replay", "TRACE"]),
    // Bounds the schema once left out (it said "whole number >= 0" for each).
    ("workload.requests", &["run", "scenarios/scale.toml"]),
    (
        "workload.groups",
        &[
            "run",
            "scenarios/scale.toml",
            "--set",
            "workload.requests=64",
        ],
    ),
    (
        "disagg.prefill_workers",
        &["run", "scenarios/disagg-one-gpu.toml"],
    ),
    (
        "disagg.decode_workers",
        &["run", "scenarios/disagg-one-gpu.toml"],
    ),
    (
        "deployment.tp",
        &[
            "run",
            "scenarios/qwen3-32b-fp8-h100.toml",
            "--set",
            "workload.limit=5",
        ],
    ),
    (
        "deployment.max_model_len",
        &[
            "run",
            "scenarios/qwen3-32b-fp8-h100.toml",
            "--set",
            "workload.limit=5",
        ],
    ),
    ("planner.window", &["run", "scenarios/burst-threshold.toml"]),
    (
        "planner.learning_window",
        &["run", "scenarios/burst-threshold.toml"],
    ),
    (
        "planner.min_observations",
        &["run", "scenarios/burst-threshold.toml"],
    ),
];

#[test]
fn the_scenario_schema_carries_the_validator_s_bounds() {
    let schema = json_schema("scenario");
    let dir = tempfile::tempdir().unwrap();
    let trace = crate::common::write(
        dir.path(),
        "t.jsonl",
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n\
         {\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n",
    );
    for &(key, command) in BOUNDED {
        let command: Vec<&str> = command
            .iter()
            .map(|&a| if a == "TRACE" { trace.as_str() } else { a })
            .collect();
        let s = key_schema(&schema, key);
        let min = s["minimum"]
            .as_f64()
            .map(|m| m as i64)
            .unwrap_or_else(|| panic!("{key}: no minimum in {s}"));
        let with = |value: i64| {
            let set = format!("{key}={value}");
            let mut args = command.to_vec();
            args.extend(["--set", &set, "--json"]);
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
        };
        let refs = |v: &[String]| {
            v.iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\u{0}")
        };
        let below = with(min - 1);
        let line = bad(&refs(&below).split('\u{0}').collect::<Vec<_>>());
        assert!(line.contains(key), "{key} = {}: {line}", min - 1);
        let at = with(min);
        ok(&refs(&at).split('\u{0}').collect::<Vec<_>>());
        if let Some(max) = s["maximum"].as_f64().map(|m| m as i64) {
            let above = with(max + 1);
            let line = bad(&refs(&above).split('\u{0}').collect::<Vec<_>>());
            assert!(line.contains(key), "{key} = {}: {line}", max + 1);
        }
        // An editor checking a file against the schema refuses what the validator refuses.
        let mut file = Value::Object(Default::default());
        let mut at = &mut file;
        for part in key.split('.') {
            at = &mut at[part];
        }
        *at = (min - 1).into();
        assert!(
            !schema_errors(&schema, &schema, &file, "").is_empty(),
            "{key} = {}: the schema accepts {file}",
            min - 1
        );
    }
    // The upper ends the validator takes, where a run at them is quick.
    for set in [
        "router.replicas=63",
        "router.vllm-session.virtual_nodes=10000",
    ] {
        ok(&[
            "run",
            "scenarios/rr.toml",
            "--set",
            "router.policy=\"vllm-session\"",
            "--set",
            set,
        ]);
    }
    assert_eq!(
        key_schema(&schema, "router.replicas")["maximum"],
        63.0,
        "MAX_REPLICAS"
    );
}

#[test]
fn keys_refused_empty_are_required_and_have_no_default() {
    let schema = json_schema("scenario");
    let keys = ok(&["schema"]);
    for key in ["workload.path", "deployment.model", "deployment.gpu"] {
        assert!(
            key_schema(&schema, key).get("default").is_none(),
            "{key} has a default"
        );
        let line = keys
            .lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("{key} missing"));
        assert!(line.ends_with("(string, required)"), "{line}");
    }
    // The JSON Schema refuses a table without them, as the validator does.
    for (file, missing) in [
        (
            r#"{"deployment": {"gpu": "h100_sxm"}}"#,
            "\"model\" is missing",
        ),
        (
            r#"{"deployment": {"model": "Qwen/Qwen3-32B"}}"#,
            "\"gpu\" is missing",
        ),
        (r#"{"workload": {"kind": "trace"}}"#, "options accept"),
    ] {
        let file: Value = serde_json::from_str(file).unwrap();
        let errors = schema_errors(&schema, &schema, &file, "");
        assert!(
            errors.iter().any(|e| e.contains(missing)),
            "{file}: {errors:?}"
        );
    }
    let line = bad(&[
        "run",
        "scenarios/qwen3-32b-fp8-h100.toml",
        "--set",
        "deployment.model=\"\"",
    ]);
    assert!(line.contains("deployment.model"), "{line}");
    let line = bad(&[
        "replay",
        "data/traces/mooncake_conversation_trace.jsonl",
        "--set",
        "workload.path=\"\"",
    ]);
    assert!(line.contains("workload.path"), "{line}");
}
