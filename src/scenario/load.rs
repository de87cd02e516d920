//! Reading a scenario: TOML text → `--set` overrides → [`Scenario`] → range checks, with every
//! error located (`file:line`, or `--set KEY`).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use super::validate::{validate_in, Invalid};
use super::Scenario;
use crate::error::{read_text, Error, Result};
use crate::toml_file::{key_offset, line_of, readable, toml_error};

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

impl Loaded {
    /// The files the scenario names and a run reads (relative to its folder), each with what
    /// it is: the trace, model files, the profile. The scenario file itself is its loader's.
    pub fn input_files(&self) -> Vec<(&'static str, PathBuf)> {
        let s = &self.scenario;
        let mut files = Vec::new();
        if let super::Workload::Trace(t) = &s.workload {
            files.push(("the trace", self.base_dir.join(&t.path)));
        }
        let deployments = [
            s.deployment.as_ref(),
            s.disagg.prefill_deployment.as_ref(),
            s.disagg.decode_deployment.as_ref(),
        ];
        for d in deployments.into_iter().flatten() {
            if crate::deployment::model::names_a_file(&d.model) {
                files.push(("a model file", self.base_dir.join(&d.model)));
            }
        }
        if let Some(profile) = &s.timing.profile {
            files.push(("the profile", self.base_dir.join(profile)));
        }
        files
    }
}

/// One xxh3 digest (hex) of the bytes of every file in `paths`, in their order, an unreadable
/// one counting as such: what tells a sweep's or a plan's kept runs from runs of edited inputs.
pub fn files_digest<'a>(paths: impl IntoIterator<Item = &'a Path>) -> String {
    let mut each = Vec::new();
    for path in paths {
        let digest = file_digest(path).unwrap_or(u64::MAX);
        each.extend_from_slice(&digest.to_le_bytes());
    }
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&each))
}

/// The xxh3 of a file's bytes, read in pieces (a trace may be gigabytes: it is not held whole
/// just to be hashed). Equal to `xxh3_64` of the whole file.
fn file_digest(path: &Path) -> std::io::Result<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut piece = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut piece) {
            Ok(0) => return Ok(hasher.digest()),
            Ok(n) => hasher.update(&piece[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
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
    let mut scenario: Scenario =
        toml::from_str(text).map_err(|e| toml_error::<Scenario>(path, text, &e, moved_key))?;
    if !overrides.is_empty() {
        let mut table = toml::Table::try_from(&scenario).expect("a scenario serialises to TOML");
        for o in overrides {
            set_path(&mut table, &o.key, o.value.clone()).map_err(|m| set_error(o, &m))?;
            scenario = Scenario::deserialize(toml::Value::Table(table.clone()))
                .map_err(|e| set_error(o, e.message()))?;
        }
    }
    let base_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    validate_in(&scenario, Some(base_dir)).map_err(|inv| locate(path, text, overrides, inv))?;
    Ok(scenario)
}

fn set_error(o: &Override, message: &str) -> Error {
    let message = match moved_key(&o.key) {
        Some(hint) if message.contains("unknown field") => hint.to_string(),
        _ => readable(message.trim()),
    };
    Error::arg(format!("--set {}", o.key), message)
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

/// Where a key of an older scenario format went.
fn moved_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "cluster.service_ms" => {
            "moved: the fixed step time is [timing] service_ms, with model = \"fixed\""
        }
        "timing.max_batch" => {
            "replaced by the step scheduler's limit, [engine.vllm] max_num_seqs (requests \
             running at once; they now share each step)"
        }
        k if k == "scheduler" || k.starts_with("scheduler.") => {
            "moved to [engine.vllm]: the step scheduler's settings are the vLLM engine's now \
             (the same keys: max_num_seqs, max_num_batched_tokens, chunked_prefill, preemption, \
             admission, decode_stretches)"
        }
        _ => return None,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Read in pieces, a file's digest is the one of its whole bytes (past one piece too), so
    /// the digests results.json files hold stay what they were.
    #[test]
    fn a_file_digest_in_pieces_is_the_whole_bytes_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            file_digest(&path).unwrap(),
            xxhash_rust::xxh3::xxh3_64(&bytes)
        );
        assert!(file_digest(&dir.path().join("none")).is_err());
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
