//! `schema`: every scenario key with its type, default and meaning, or the JSON Schemas of a
//! scenario file and of the `--json` report.

use clap::Args;

use super::ExitCode;
use crate::error::Result;
use crate::output::{pretty_json, write_stdout};
use crate::schema::{report_schema, scenario_schema, scenario_text};

/// Which JSON Schema `--json-schema` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// A scenario file (TOML, as editors' TOML checkers read JSON Schemas).
    Scenario,
    /// The report `run --json` and `replay --json` print.
    Report,
}

/// `dynsim schema`'s arguments.
#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Prints a JSON Schema instead of the list of keys.
    #[arg(long, value_enum, value_name = "scenario|report")]
    json_schema: Option<Which>,
}

/// Prints the keys, or a JSON Schema.
pub fn schema(a: SchemaArgs) -> Result<ExitCode> {
    let text = match a.json_schema {
        None => scenario_text().into_bytes(),
        Some(Which::Scenario) => pretty_json(&scenario_schema()),
        Some(Which::Report) => pretty_json(&report_schema()),
    };
    write_stdout(&text)?;
    Ok(0)
}
