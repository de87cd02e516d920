//! Measured benchmark rows: the columns of AIConfigurator's silicon sample
//! (`data/measurements/aic_silicon_dense_agg_train.csv`), which a user's own benchmark can use
//! too.
//!
//! Required columns: `backend` (the engine: vllm, sglang, trtllm), `model_path` (a model id),
//! `system` (a GPU name), `precision` (bf16, fp8, fp4; empty = the checkpoint's own, bf16),
//! `isl`, `osl`, `batch_size` (the benchmark's concurrency), `tp_size`, `silicon_ttft_ms` and
//! `silicon_tpot_ms` (the run's mean TTFT and mean TPOT). Optional: `id`, `backend_version`,
//! `mode` (only `agg` rows are aggregated serving; others are skipped), `pp_size` (rows with
//! pipeline parallelism are skipped) and `kv_cache_dtype` (auto, bf16, fp8). Other columns are
//! ignored.
//!
//! A well-formed row of a deployment dynsim does not model (another weight precision or KV
//! dtype, such as int4; more than 64 GPUs, such as a 72-GPU NVLink domain) is kept apart with
//! the reason ([`Measurements::unmodelled`]), so that a file of other tools' deployments (such
//! as AIConfigurator's whole `silicon_sample.csv`) can be checked for the rows dynsim does
//! model; a malformed cell is refused in any row.
//!
//! A row without `kv_cache_dtype` ran its protocol's server ([`crate::bench::Protocol::of_row`],
//! [`crate::bench::Protocol::server_kv_dtype`]). AIConfigurator's generated servers (the rows with
//! an engine version) pass their KV dtype on the command line, FP8 for FP8 or FP4 weights and
//! the model's dtype for BF16 ones, which is [`KvDtype::Auto`]; InferenceMAX's vLLM servers ran
//! a bf16 KV cache on the H100 and an fp8 one on the H200 and Blackwell.

use std::path::Path;

use crate::deployment::{KvDtype, Precision};
use crate::error::{Error, Result};

/// One measured benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredRow {
    /// The file's line (1-based).
    pub line: usize,
    /// Its id (or `line N` without an `id` column).
    pub id: String,
    /// The engine.
    pub backend: String,
    /// The engine's version (may be empty).
    pub version: String,
    /// The model id as measured.
    pub model: String,
    /// The GPU.
    pub gpu: String,
    /// The weights' precision.
    pub precision: Precision,
    /// The KV cache's dtype (`auto` without a `kv_cache_dtype` column).
    pub kv_dtype: KvDtype,
    /// Prompt tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
    /// Clients.
    pub concurrency: usize,
    /// GPUs, tensor parallel.
    pub tp: u64,
    /// Mean time to first token, ms.
    pub ttft_ms: f64,
    /// Mean time per output token, ms.
    pub tpot_ms: f64,
}

/// The rows of a measurements file, and how many were skipped (not aggregated serving, or
/// pipeline parallel).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurements {
    /// The rows, in file order.
    pub rows: Vec<MeasuredRow>,
    /// Rows skipped.
    pub skipped: usize,
    /// Well-formed rows of aggregated serving that dynsim does not model (a weight precision or
    /// KV dtype other than its own, more GPUs than a deployment may have), in file order: what
    /// a file of other tools' deployments, such as AIConfigurator's whole `silicon_sample.csv`,
    /// holds beside the rows dynsim can predict.
    pub unmodelled: Vec<Unmodelled>,
}

/// A well-formed measured row that dynsim does not model, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Unmodelled {
    /// The file's line (1-based).
    pub line: usize,
    /// Its id (or `line N` without an `id` column).
    pub id: String,
    /// The engine.
    pub backend: String,
    /// What dynsim does not model, naming the file, line and column.
    pub why: String,
}

/// The most GPUs of one deployment a row may name (`tp_size`).
const MAX_TP: u64 = 64;

const REQUIRED: [&str; 10] = [
    "backend",
    "model_path",
    "system",
    "precision",
    "isl",
    "osl",
    "batch_size",
    "tp_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
];

/// The optional columns the reader uses.
const OPTIONAL: [&str; 5] = ["id", "backend_version", "mode", "pp_size", "kv_cache_dtype"];

/// Parses a measurements file's text; `path` names it in errors (`file:line: column: what`).
pub fn parse(path: &Path, text: &str) -> Result<Measurements> {
    // The csv crate places a record after a `\r\n` at its `\n` and so counts a CRLF file's lines
    // one short: read such a file with `\n` endings (the bundled measurements are CRLF).
    let text = if text.contains("\r\n") {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| Error::file(path, format!("cannot read the header: {e}")))?
        .clone();
    let column = |name: &str| header.iter().position(|h| h.trim() == name);
    // A column the reader uses, named twice, would be read from one and ignored in the other.
    for name in REQUIRED.iter().chain(&OPTIONAL) {
        if header.iter().filter(|h| h.trim() == *name).count() > 1 {
            return Err(Error::field(
                path,
                1,
                "header",
                format!("the `{name}` column is named twice"),
            ));
        }
    }
    let mut at = std::collections::BTreeMap::new();
    for name in REQUIRED {
        let i = column(name).ok_or_else(|| {
            Error::field(
                path,
                1,
                "header",
                format!("no `{name}` column (needed: {})", REQUIRED.join(", ")),
            )
        })?;
        at.insert(name, i);
    }
    let optional = |name: &str| column(name);
    let [id_col, version_col, mode_col, pp_col, kv_col] = OPTIONAL.map(optional);
    let mut out = Measurements::default();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            Error::field(path, line, "line", e.to_string())
        })?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let get = |name: &str| record.get(at[name]).unwrap_or("").trim();
        let opt = |col: Option<usize>| col.and_then(|i| record.get(i)).unwrap_or("").trim();
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        let bad = |name: &str, what: String| Error::field(path, line, name, what);
        // Disaggregated rows and pipeline parallelism are skipped, but read: a malformed cell
        // is refused in any row. (A skipped row's other cells may be empty, as a disaggregated
        // row's `batch_size` is.)
        let mode = opt(mode_col);
        if !matches!(mode, "" | "agg" | "disagg") {
            return Err(bad(
                "mode",
                format!("expected agg or disagg (or nothing), got {mode:?}"),
            ));
        }
        let pp = match opt(pp_col) {
            "" => 1,
            text => text
                .parse::<u64>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    bad(
                        "pp_size",
                        format!("expected a whole number of at least 1, got {text:?}"),
                    )
                })?,
        };
        if mode == "disagg" || pp != 1 {
            out.skipped += 1;
            continue;
        }
        let whole = |name: &str, max: u64| -> Result<u64> {
            let text = get(name);
            text.parse::<u64>()
                .ok()
                .filter(|&n| n >= 1 && n <= max)
                .ok_or_else(|| {
                    bad(
                        name,
                        format!("expected a whole number in 1..={max}, got {text:?}"),
                    )
                })
        };
        let ms = |name: &str| -> Result<f64> {
            let text = get(name);
            text.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0 && *x <= crate::limits::MAX_MS)
                .ok_or_else(|| {
                    bad(
                        name,
                        format!("expected a positive time in ms, got {text:?}"),
                    )
                })
        };
        let id = match opt(id_col) {
            "" => format!("line {line}"),
            id => id.to_string(),
        };
        // Well-formed cells dynsim does not model: a precision or KV dtype named otherwise
        // than its own, tensor parallelism past the most GPUs a deployment may have. The row is
        // read to the end first, so that a malformed cell is refused as in any other row.
        let mut unmodelled = None;
        let precision = match get("precision") {
            "" => Precision::Bf16,
            p => p.parse().unwrap_or_else(|e: String| {
                unmodelled.get_or_insert(bad("precision", e));
                Precision::Bf16
            }),
        };
        let kv_dtype = match opt(kv_col) {
            "" => KvDtype::Auto,
            k => k.parse().unwrap_or_else(|e: String| {
                unmodelled.get_or_insert(bad("kv_cache_dtype", e));
                KvDtype::Auto
            }),
        };
        let tp = match whole("tp_size", u64::MAX) {
            Ok(tp) if tp > MAX_TP => {
                unmodelled.get_or_insert(bad(
                    "tp_size",
                    format!("{tp} GPUs: a deployment has 1 to {MAX_TP}"),
                ));
                1
            }
            tp => tp?,
        };
        let max_len = crate::limits::MAX_CONTEXT_TOKENS;
        let isl = whole("isl", max_len)? as u32;
        let osl = whole("osl", max_len)? as u32;
        if u64::from(isl) + u64::from(osl) > max_len {
            return Err(bad(
                "osl",
                format!("isl + osl is more than {max_len} tokens"),
            ));
        }
        for name in ["backend", "model_path", "system"] {
            if get(name).is_empty() {
                return Err(bad(name, "is empty".into()));
            }
        }
        let concurrency = whole("batch_size", 1 << 20)? as usize;
        let (ttft_ms, tpot_ms) = (ms("silicon_ttft_ms")?, ms("silicon_tpot_ms")?);
        if let Some(why) = unmodelled {
            out.unmodelled.push(Unmodelled {
                line,
                id,
                backend: get("backend").to_string(),
                why: why.to_string(),
            });
            continue;
        }
        out.rows.push(MeasuredRow {
            line,
            id,
            backend: get("backend").to_string(),
            version: opt(version_col).to_string(),
            model: get("model_path").to_string(),
            gpu: get("system").to_string(),
            precision,
            kv_dtype,
            isl,
            osl,
            concurrency,
            tp,
            ttft_ms,
            tpot_ms,
        });
    }
    if out.rows.is_empty() && out.unmodelled.is_empty() {
        return Err(Error::file(path, "no measured rows of aggregated serving"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "id,backend,model_path,system,precision,mode,isl,osl,batch_size,tp_size,pp_size,silicon_ttft_ms,silicon_tpot_ms\n";

    #[test]
    fn rows_read_with_their_lines_and_skips() {
        let text = format!(
            "{HEADER}a,vllm,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,8,2,1,154.2,18.04\n\
             b,vllm,Qwen/Qwen3-32B,h100_sxm,fp8,disagg,1024,128,8,2,1,1,1\n\
             c,vllm,Qwen/Qwen3-32B,h100_sxm,fp8,agg,1024,128,8,2,2,1,1\n\
             d,trtllm,meta-llama/Llama-3.1-70B,b200_sxm,fp4,agg,8192,1024,64,4,1,1176.6,27.78\n"
        );
        let m = parse(Path::new("m.csv"), &text).unwrap();
        assert_eq!(m.skipped, 2);
        assert_eq!(m.rows.len(), 2);
        let a = &m.rows[0];
        assert_eq!(
            (a.line, a.id.as_str(), a.precision, a.concurrency),
            (2, "a", Precision::Bf16, 8)
        );
        assert_eq!((a.ttft_ms, a.tpot_ms), (154.2, 18.04));
        assert_eq!((m.rows[1].line, m.rows[1].precision), (5, Precision::Fp4));
    }

    /// A skipped row's `mode` and `pp_size` are read too: a malformed one is refused by its line
    /// and column, not skipped in silence; so is a column the reader uses named twice.
    #[test]
    fn a_malformed_mode_or_pp_size_and_a_doubled_column_are_refused() {
        let row = |mode: &str, pp: &str| {
            format!(
                "{HEADER}a,vllm,Qwen/Qwen3-32B,h100_sxm,,{mode},1024,128,8,2,{pp},154.2,18.04\n"
            )
        };
        for (mode, pp, want) in [
            ("abc", "1", "m.csv:2: mode: expected agg or disagg"),
            (
                "agg",
                "abc",
                "m.csv:2: pp_size: expected a whole number of at least 1",
            ),
            ("agg", "-1", "m.csv:2: pp_size:"),
            ("agg", "0", "m.csv:2: pp_size:"),
            ("disagg", "x", "m.csv:2: pp_size:"),
        ] {
            let e = parse(Path::new("m.csv"), &row(mode, pp))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{mode} {pp}: {e}");
        }
        // A disaggregated row's empty cells and no pp_size are its own: skipped.
        let text = format!(
            "{HEADER}a,vllm,Q,h100_sxm,,disagg,1024,128,,,,1,1\n{}",
            &row("agg", "")[HEADER.len()..]
        );
        assert_eq!(parse(Path::new("m.csv"), &text).unwrap().skipped, 1);
        let doubled =
            row("agg", "1")
                .replacen("isl,", "isl,isl,", 1)
                .replacen(",1024,", ",1024,1024,", 1);
        let e = parse(Path::new("m.csv"), &doubled).unwrap_err().to_string();
        assert_eq!(e, "m.csv:1: header: the `isl` column is named twice");
    }

    /// The `kv_cache_dtype` column is read as written, and a row without it runs `auto`
    /// (its protocol's server decides, [`crate::bench::Protocol::server_kv_dtype`]), whatever
    /// its engine version: before Dec 5 2026 a vLLM 0.12.0 row was given bf16 here, where
    /// AIConfigurator's generated server ran an fp8 cache under FP8 weights and `bench` of the
    /// same row ran fp8.
    #[test]
    fn a_rows_kv_dtype_is_its_column_else_auto_whatever_the_version() {
        let text = "id,backend,backend_version,model_path,system,precision,mode,isl,osl,\
                    batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms,kv_cache_dtype\n\
                    a,vllm,0.12.0,M,h200_sxm,fp8,agg,1024,128,8,1,1,1,\n\
                    b,vllm,0.16.1,M,h200_sxm,fp8,agg,1024,128,8,1,1,1,\n\
                    c,vllm,,M,h200_sxm,fp8,agg,1024,128,8,1,1,1,\n\
                    d,vllm,0.12.0,M,h200_sxm,fp8,agg,1024,128,8,1,1,1,bf16\n\
                    e,sglang,0.5.6,M,h200_sxm,fp8,agg,1024,128,8,1,1,1,fp8\n";
        let m = parse(Path::new("m.csv"), text).unwrap();
        let kv: Vec<KvDtype> = m.rows.iter().map(|r| r.kv_dtype).collect();
        assert_eq!(
            kv,
            [
                KvDtype::Auto,
                KvDtype::Auto,
                KvDtype::Auto,
                KvDtype::Bf16,
                KvDtype::Fp8
            ]
        );
    }

    /// A `\r\n` file (the bundled measurements are one) names the same lines as a `\n` one.
    #[test]
    fn crlf_files_name_their_rows_lines() {
        let text = format!(
            "{HEADER}a,vllm,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,8,2,1,154.2,18.04\n\
             b,vllm,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,8,2,1,154.2,18.04\n"
        )
        .replace('\n', "\r\n");
        let m = parse(Path::new("m.csv"), &text).unwrap();
        assert_eq!((m.rows[0].line, m.rows[1].line), (2, 3));
        let bad = text.replace("18.04\r\n", "-1\r\n");
        let err = parse(Path::new("m.csv"), &bad).unwrap_err().to_string();
        assert!(err.starts_with("m.csv:2: silicon_tpot_ms:"), "{err}");
    }

    /// A precision or KV dtype dynsim does not model, or more GPUs than a deployment has, keeps
    /// a well-formed row apart with the reason, naming file, line and column; a malformed cell is
    /// refused in such a row as in any other.
    #[test]
    fn rows_dynsim_does_not_model_are_kept_apart_with_why() {
        let header = "id,backend,model_path,system,precision,mode,isl,osl,batch_size,tp_size,\
                      silicon_ttft_ms,silicon_tpot_ms,kv_cache_dtype\n";
        let text = format!(
            "{header}a,vllm,M,b200_sxm,int4,agg,1024,128,8,8,1,1,\n\
             b,sglang,M,gb200,fp8,agg,1024,128,8,72,1,1,\n\
             c,vllm,M,h100_sxm,fp8,agg,1024,128,8,2,1,1,fp6\n\
             d,vllm,M,h100_sxm,fp8,agg,1024,128,8,2,1,1,\n"
        );
        let m = parse(Path::new("m.csv"), &text).unwrap();
        assert_eq!(m.rows.len(), 1);
        assert_eq!(m.rows[0].id, "d");
        let why: Vec<(usize, &str, &str, &str)> = m
            .unmodelled
            .iter()
            .map(|u| (u.line, u.id.as_str(), u.backend.as_str(), u.why.as_str()))
            .collect();
        assert_eq!(why.len(), 3);
        assert_eq!(why[0].0..=why[2].0, 2..=4);
        assert!(
            why[0].3.starts_with("m.csv:2: precision: \"int4\""),
            "{why:?}"
        );
        assert_eq!(why[1].2, "sglang");
        assert!(why[1].3.starts_with("m.csv:3: tp_size: 72 GPUs"), "{why:?}");
        assert!(why[2].3.starts_with("m.csv:4: kv_cache_dtype:"), "{why:?}");
        // Only such rows: still read, for the caller to name them.
        let only = format!("{header}a,vllm,M,b200_sxm,int4,agg,1024,128,8,8,1,1,\n");
        assert_eq!(
            parse(Path::new("m.csv"), &only).unwrap().unmodelled.len(),
            1
        );
        let malformed = text.replace("int4,agg,1024,128,8,8,1,1,", "int4,agg,1024,128,8,8,-1,1,");
        let err = parse(Path::new("m.csv"), &malformed)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("m.csv:2: silicon_ttft_ms:"), "{err}");
    }

    #[test]
    fn bad_cells_name_file_line_and_column() {
        let cases = [
            (
                "x,vllm,M,h100_sxm,fp8,agg,0,128,8,2,1,1,1\n",
                "m.csv:2: isl: expected a whole number",
            ),
            (
                "x,vllm,M,h100_sxm,fp8,agg,1,128,8,0,1,1,1\n",
                "m.csv:2: tp_size: expected a whole number",
            ),
            (
                "x,vllm,M,h100_sxm,fp8,agg,1,128,8,2,1,-3,1\n",
                "m.csv:2: silicon_ttft_ms: expected a positive",
            ),
            ("x,vllm,M,h100_sxm,fp8,agg,1,128,8\n", "m.csv:2: line:"),
        ];
        for (row, want) in cases {
            let err = parse(Path::new("m.csv"), &format!("{HEADER}{row}"))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{err}");
        }
        let err = parse(Path::new("m.csv"), "backend,isl\nvllm,1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("m.csv:1: header: no `model_path` column"),
            "{err}"
        );
    }
}
