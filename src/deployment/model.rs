//! A model's architecture, as its published `config.json` gives it: the numbers a step's work and
//! a deployment's memory follow from.
//!
//! The bundled models are data files in `data/models/`, one per architecture, each citing the
//! config it was read from (repository and revision). A model's name is its Hugging Face id; the
//! instruct and quantized checkpoints of the same architecture (`-Instruct`, `-FP8`, ...) are its
//! aliases. A user adds a model by writing one such file and naming its path (a scenario's
//! `deployment.model = "my-model.toml"`, or `dynsim bench --model-file PATH`).
//!
//! Parameters are counted from the architecture (dense decoder: attention projections, gated
//! MLP, embeddings, untied output head, norms); the file's published `parameters` must agree
//! within 1 %, so a mistyped dimension is caught when the file is read.

use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A dense decoder-only transformer, as its `config.json` describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Its Hugging Face id (`Qwen/Qwen3-32B`).
    pub name: String,
    /// Other ids of the same architecture (instruct and quantized checkpoints).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Where the numbers come from: the config's address at a named revision.
    pub source: String,
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `hidden_size`.
    pub hidden_size: u64,
    /// `num_attention_heads`.
    pub attention_heads: u64,
    /// `num_key_value_heads`.
    pub kv_heads: u64,
    /// `head_dim` (`hidden_size / num_attention_heads` where the config leaves it out).
    pub head_dim: u64,
    /// `intermediate_size` (the gated MLP's width).
    pub intermediate_size: u64,
    /// `vocab_size`.
    pub vocab_size: u64,
    /// `tie_word_embeddings`: the output head reuses the input embeddings.
    pub tied_embeddings: bool,
    /// `max_position_embeddings`: the longest context, tokens.
    pub max_context: u64,
    /// The published parameter count (model card or checkpoint metadata).
    pub parameters: u64,
}

impl ModelSpec {
    /// Parameters of one layer's linear projections: q, k, v, o and the gated MLP's gate, up and
    /// down.
    pub fn linear_params_per_layer(&self) -> u64 {
        // Exact in u128 ([`ModelSpec::check`] bounds the total, so every read model fits u64).
        self.linear_per_layer_wide() as u64
    }

    /// Parameters of every layer's linear projections (what a quantized checkpoint quantizes).
    pub fn linear_params(&self) -> u64 {
        self.linear_wide() as u64
    }

    /// Parameters of the output head (`vocab x hidden`; computed every step even when tied).
    pub fn head_params(&self) -> u64 {
        self.head_wide() as u64
    }

    /// Parameters stored outside the linear projections: embeddings, the untied head, norms.
    pub fn other_params(&self) -> u64 {
        self.other_wide() as u64
    }

    /// Parameters counted from the architecture.
    pub fn counted_params(&self) -> u64 {
        self.counted_wide() as u64
    }

    // The counts in u128: dimensions of up to 2^24 multiply past u64 (2^24 x 2^24 x 2^24), which
    // wrapped a count into the published total's 1 % once; u128 holds any product of three.

    fn linear_per_layer_wide(&self) -> u128 {
        let [h, heads, kv, d, i] = [
            self.hidden_size,
            self.attention_heads,
            self.kv_heads,
            self.head_dim,
            self.intermediate_size,
        ]
        .map(u128::from);
        let q = h * heads * d;
        let kv = 2 * h * kv * d;
        let o = heads * d * h;
        let mlp = 3 * h * i;
        q + kv + o + mlp
    }

    fn linear_wide(&self) -> u128 {
        u128::from(self.layers) * self.linear_per_layer_wide()
    }

    fn head_wide(&self) -> u128 {
        u128::from(self.vocab_size) * u128::from(self.hidden_size)
    }

    fn other_wide(&self) -> u128 {
        let embeddings = self.head_wide();
        let head = if self.tied_embeddings {
            0
        } else {
            self.head_wide()
        };
        // Two RMS norms per layer and the final one (Qwen3's per-head q/k norms are a rounding
        // error next to these and left out).
        let norms = (2 * u128::from(self.layers) + 1) * u128::from(self.hidden_size);
        embeddings + head + norms
    }

    fn counted_wide(&self) -> u128 {
        self.linear_wide() + self.other_wide()
    }

    /// KV heads each of `tp` GPUs holds: the heads split over the GPUs, one replicated on each
    /// when there are more GPUs than heads (vLLM's rule).
    pub fn kv_heads_per_gpu(&self, tp: u64) -> u64 {
        (self.kv_heads / tp).max(1)
    }

    /// KV bytes one token takes on one of `tp` GPUs at `dtype_bytes` per element: layers x KV
    /// heads on the GPU x head dim x 2 (K and V) x bytes (the lab's `kvcost` formula per GPU).
    pub fn kv_bytes_per_token_per_gpu(&self, tp: u64, dtype_bytes: u64) -> u64 {
        crate::disagg::kv_bytes_per_token(
            self.layers,
            self.kv_heads_per_gpu(tp),
            self.head_dim,
            dtype_bytes,
        )
    }

    /// KV bytes one token takes in the whole model (every KV head once), what a KV transfer
    /// moves.
    pub fn kv_bytes_per_token(&self, dtype_bytes: u64) -> u64 {
        crate::disagg::kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, dtype_bytes)
    }

    /// Whether `id` names this model (its name or an alias, case aside).
    pub fn answers_to(&self, id: &str) -> bool {
        self.name.eq_ignore_ascii_case(id)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(id))
    }

    /// Checks the numbers: every dimension at least 1, heads that divide evenly, and a counted
    /// parameter total within 1 % of the published one. The error names the field.
    pub fn check(&self) -> Result<(), (String, String)> {
        let err = |k: &str, m: String| Err((k.to_string(), m));
        // The name is what reports and warnings call the model by.
        if self.name.trim().is_empty() {
            return err("name", "must name the model (\"my-org/my-model\")".into());
        }
        for (key, v) in [
            ("layers", self.layers),
            ("hidden_size", self.hidden_size),
            ("attention_heads", self.attention_heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("intermediate_size", self.intermediate_size),
            ("vocab_size", self.vocab_size),
            ("max_context", self.max_context),
            ("parameters", self.parameters),
        ] {
            if v == 0 {
                return err(key, "must be at least 1".into());
            }
            if v > 1 << 24 && key != "parameters" {
                return err(key, format!("= {v} is larger than any model has (2^24)"));
            }
        }
        if self.parameters > 1 << 44 {
            return err("parameters", "is more than 2^44 (17.6 trillion)".into());
        }
        if self.attention_heads % self.kv_heads != 0 {
            return err(
                "kv_heads",
                format!(
                    "= {} does not divide attention_heads = {} (grouped-query attention)",
                    self.kv_heads, self.attention_heads
                ),
            );
        }
        let counted = self.counted_wide();
        let published = self.parameters as f64;
        if (counted as f64 / published - 1.0).abs() > 0.01 {
            return err(
                "parameters",
                format!(
                    "= {} but the architecture counts {counted} parameters (more than 1 % apart): \
                     check the dimensions",
                    self.parameters,
                ),
            );
        }
        Ok(())
    }
}

/// Parses a model file's text; `path` only names it in errors, which give the line and field.
pub fn parse(path: &Path, text: &str) -> Result<ModelSpec> {
    let m: ModelSpec = toml::from_str(text)
        .map_err(|e| crate::toml_file::toml_error::<ModelSpec>(path, text, &e, |_| None))?;
    m.check().map_err(|(key, message)| {
        let line = crate::toml_file::line_of_key(text, &key).unwrap_or(1);
        Error::field(path, line, key, message)
    })?;
    Ok(m)
}

/// The bundled model files, by file name.
const BUNDLED: &[(&str, &str)] = &[
    (
        "qwen3-0.6b.toml",
        include_str!("../../data/models/qwen3-0.6b.toml"),
    ),
    (
        "qwen3-8b.toml",
        include_str!("../../data/models/qwen3-8b.toml"),
    ),
    (
        "qwen3-32b.toml",
        include_str!("../../data/models/qwen3-32b.toml"),
    ),
    (
        "llama-3.1-8b.toml",
        include_str!("../../data/models/llama-3.1-8b.toml"),
    ),
    (
        "llama-3.1-70b.toml",
        include_str!("../../data/models/llama-3.1-70b.toml"),
    ),
];

/// Every bundled model, read once.
pub fn catalog() -> &'static [ModelSpec] {
    static CATALOG: OnceLock<Vec<ModelSpec>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        BUNDLED
            .iter()
            .map(|(file, text)| {
                let m: ModelSpec = toml::from_str(text)
                    .unwrap_or_else(|e| panic!("data/models/{file} is a bundled model: {e}"));
                m
            })
            .collect()
    })
}

/// Whether a deployment's `model` names a model file (`*.toml`, read like `data/models/`'s)
/// rather than a bundled model.
pub fn names_a_file(model: &str) -> bool {
    model.ends_with(".toml")
}

/// The bundled model `id` names (its name or an alias, case aside).
pub fn find(id: &str) -> Option<&'static ModelSpec> {
    catalog().iter().find(|m| m.answers_to(id))
}

/// The bundled models' names, for error messages.
pub fn known() -> String {
    catalog()
        .iter()
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_model_reads_and_counts_its_published_parameters() {
        assert_eq!(catalog().len(), BUNDLED.len());
        for m in catalog() {
            m.check()
                .unwrap_or_else(|(k, e)| panic!("{}: {k}: {e}", m.name));
            assert!(m.source.contains("huggingface.co"), "{}", m.name);
        }
    }

    #[test]
    fn names_and_aliases_find_one_architecture() {
        let m = find("meta-llama/Llama-3.1-70B-Instruct").expect("an alias");
        assert_eq!(m.name, "meta-llama/Llama-3.1-70B");
        assert_eq!(
            find("qwen/qwen3-32b").expect("case aside").name,
            "Qwen/Qwen3-32B"
        );
        assert!(find("Qwen/Qwen3-33B").is_none());
        // The quantized checkpoints of each Qwen3 size NVIDIA and Red Hat publish (AIConfigurator
        // and Dynamo benchmark nvidia/Qwen3-8B-FP8) name its architecture, as Qwen3-32B's do.
        for size in ["8B", "32B"] {
            for id in [
                format!("nvidia/Qwen3-{size}-FP8"),
                format!("nvidia/Qwen3-{size}-FP4"),
                format!("nvidia/Qwen3-{size}-NVFP4"),
                format!("RedHatAI/Qwen3-{size}-FP8-dynamic"),
            ] {
                let m = find(&id).unwrap_or_else(|| panic!("{id} is not found"));
                assert_eq!(m.name, format!("Qwen/Qwen3-{size}"), "{id}");
            }
        }
        let mut ids: Vec<String> = catalog()
            .iter()
            .flat_map(|m| {
                std::iter::once(m.name.to_lowercase())
                    .chain(m.aliases.iter().map(|a| a.to_lowercase()))
            })
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id names two models");
    }

    /// By hand, Llama-3.1-70B: per layer q 8192x8192 = 67,108,864; k and v 2 x 8192x1024 =
    /// 16,777,216; o 67,108,864; MLP 3 x 8192x28672 = 704,643,072: 855,638,016, times 80 layers
    /// = 68,451,041,280; embeddings and the untied head 2 x 128256x8192 = 2,101,346,304; norms
    /// 161 x 8192 = 1,318,912: 70,553,706,496, and 141.1 GB in bf16.
    #[test]
    fn llama_70b_counts_by_hand() {
        let m = find("meta-llama/Llama-3.1-70B").unwrap();
        assert_eq!(m.linear_params_per_layer(), 855_638_016);
        assert_eq!(m.counted_params(), 70_553_706_496);
        // Its KV: 80 layers x 8 heads x 128 x 2 x 2 bytes = 327,680 bytes per token; at TP 4
        // each GPU holds 2 heads: 81,920; at TP 16 one head replicated: 40,960.
        assert_eq!(m.kv_bytes_per_token(2), 327_680);
        assert_eq!(m.kv_bytes_per_token_per_gpu(4, 2), 81_920);
        assert_eq!(m.kv_bytes_per_token_per_gpu(16, 2), 40_960);
    }

    /// Qwen3-0.6B is the lab's model: 114,688 KV bytes per token, as `kvcost` gives.
    #[test]
    fn the_labs_model_has_the_labs_kv_size() {
        let m = find("Qwen/Qwen3-0.6B").unwrap();
        assert_eq!(m.kv_bytes_per_token(2), 114_688);
        assert_eq!(
            m.kv_bytes_per_token(2),
            crate::disagg::ModelShape::default().bytes_per_token()
        );
    }

    #[test]
    fn a_mistyped_dimension_is_caught_by_the_parameter_count() {
        let mut m = find("Qwen/Qwen3-32B").unwrap().clone();
        m.intermediate_size = 2560; // a digit lost
        let (key, message) = m.check().unwrap_err();
        assert_eq!(key, "parameters");
        assert!(message.contains("more than 1 % apart"), "{message}");
        m.intermediate_size = 25600;
        m.kv_heads = 7;
        assert_eq!(m.check().unwrap_err().0, "kv_heads");
    }

    /// Dimensions whose products pass 2^64 are counted exactly, not wrapped: these count 2^66 +
    /// ... parameters, which wrapped in u64 to 134,217,728 and so passed for a 134M model.
    #[test]
    fn dimensions_past_u64_are_counted_not_wrapped() {
        let mut m = find("Qwen/Qwen3-0.6B").unwrap().clone();
        (m.layers, m.hidden_size, m.attention_heads, m.kv_heads) = (1, 1 << 24, 1 << 24, 1 << 24);
        (m.head_dim, m.intermediate_size, m.vocab_size) = (1 << 16, 1, 1);
        m.tied_embeddings = false;
        m.parameters = 134_217_728;
        let (key, message) = m.check().unwrap_err();
        assert_eq!(key, "parameters");
        let counted = 1u128 << 66 | 8 << 24;
        assert!(message.contains(&format!("counts {counted} ")), "{message}");
    }
}
