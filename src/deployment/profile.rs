//! A profile: the fitted corrections of the roofline step model ([`super::roofline`]) for one
//! engine, as `dynsim calibrate` writes them.
//!
//! The bundled profile of each engine (`data/profiles/vllm.toml`) is `calibrate`'s output on the
//! bundled measurements, and says so in its header with the command that reproduces it. A
//! scenario names another with `[timing] profile = "PATH"`; `bench` with `--profile PATH`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::features::{Features, FEATURES, FEATURE_NAMES, GPU_FEATURES, RATE_FEATURES};
use super::gpu::GpuSpec;
use super::Precision;
use crate::error::{Error, Result};

/// Where `step_us` sits among the step coefficients ([`FEATURE_NAMES`]).
pub const STEP_US: usize = 7;

/// The benchmark protocols a profile can hold a request overhead for
/// ([`crate::bench::Protocol`]'s names).
pub const PROTOCOL_NAMES: [&str; 3] = ["aiconfigurator", "inferencemax", "aiperf"];

/// The coefficients of a step's features, by name (see [`FEATURE_NAMES`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepCoefficients {
    /// x the GEMMs' FLOPs at the weights' precision's dense peak (1 / the GEMMs' utilisation of
    /// the peak).
    pub gemm_compute: f64,
    /// x the weights' bytes at the datasheet bandwidth, read once per step (1 / the bandwidth's
    /// utilisation).
    pub weight_read: f64,
    /// x the prefill chunks' attention FLOPs at the BF16 dense peak.
    pub attention_compute: f64,
    /// x the decoding requests' KV bytes at the datasheet bandwidth.
    pub kv_read: f64,
    /// x the all-reduces' bytes at the link's one-way bandwidth.
    pub allreduce: f64,
    /// µs per all-reduce (latency).
    pub allreduce_us: f64,
    /// µs per layer per step (kernel launches).
    pub layer_us: f64,
    /// µs per step.
    pub step_us: f64,
    /// µs per request in the step.
    pub sequence_us: f64,
}

impl StepCoefficients {
    /// As an array in [`FEATURE_NAMES`] order.
    pub fn to_array(self) -> Features {
        [
            self.gemm_compute,
            self.weight_read,
            self.attention_compute,
            self.kv_read,
            self.allreduce,
            self.allreduce_us,
            self.layer_us,
            self.step_us,
            self.sequence_us,
        ]
    }

    /// From an array in [`FEATURE_NAMES`] order.
    pub fn of_array(a: Features) -> Self {
        StepCoefficients {
            gemm_compute: a[0],
            weight_read: a[1],
            attention_compute: a[2],
            kv_read: a[3],
            allreduce: a[4],
            allreduce_us: a[5],
            layer_us: a[6],
            step_us: a[7],
            sequence_us: a[8],
        }
    }
}

/// Per-request costs outside the engine's steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestCoefficients {
    /// ms between a request's sending and its joining the engine's queue, and from its first
    /// token to the client (HTTP, tokenisation, detokenisation): part of its TTFT.
    pub overhead_ms: f64,
    /// A client's reply delay: after a response, the client waits a uniform draw from
    /// `[0, jitter_ms)` before its next request (not part of any latency), ms.
    pub jitter_ms: f64,
    /// `overhead_ms` as measured through each benchmark protocol's serving stack
    /// (`[request.by_protocol]`, `calibrate --overhead-by-protocol`: AIConfigurator's evaluation
    /// pipeline against the engine's own server, its aiperf benchmark through Dynamo's frontend,
    /// InferenceMAX's client against vLLM's server), by protocol name; a scenario or `bench`
    /// naming a protocol (`timing.protocol`) takes its own, else `overhead_ms`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_protocol: BTreeMap<String, f64>,
}

/// The coefficients measured on one GPU (`[gpu.h100_sxm]` in a profile), in place of
/// `[step]`'s on that GPU: 1 / the share of that GPU's datasheet rate its kernels reached. Kernels
/// reach different shares of different GPUs' datasheets (a newer part's kernels are less tuned,
/// its peak further from what a serving batch's GEMM sustains), so `calibrate` fits these per GPU
/// it has rows of; `[step]`'s are their row-weighted mean, for every other GPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuCoefficients {
    /// As [`StepCoefficients::gemm_compute`].
    pub gemm_compute: f64,
    /// As [`StepCoefficients::weight_read`].
    pub weight_read: f64,
    /// As [`StepCoefficients::kv_read`].
    pub kv_read: f64,
    /// As [`StepCoefficients::allreduce`].
    pub allreduce: f64,
}

impl GpuCoefficients {
    /// In [`GPU_FEATURES`] order.
    pub fn to_array(self) -> [f64; GPU_FEATURES.len()] {
        [
            self.gemm_compute,
            self.weight_read,
            self.kv_read,
            self.allreduce,
        ]
    }

    /// From [`GPU_FEATURES`] order.
    pub fn of_array(a: [f64; GPU_FEATURES.len()]) -> Self {
        GpuCoefficients {
            gemm_compute: a[0],
            weight_read: a[1],
            kv_read: a[2],
            allreduce: a[3],
        }
    }
}

/// How well a profile fits the rows it was fitted on (mean absolute percentage errors).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitError {
    /// Of mean TTFT, %.
    pub ttft_mape: f64,
    /// Of mean TPOT, %.
    pub tpot_mape: f64,
}

/// A profile file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// The engine whose steps it times (`vllm`).
    pub engine: String,
    /// What it was fitted on (the measurements' file name and its rows).
    pub fitted_on: String,
    /// The step coefficients.
    pub step: StepCoefficients,
    /// Coefficients measured on particular GPUs, by GPU name ([`GpuCoefficients`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu: BTreeMap<String, GpuCoefficients>,
    /// The GEMM coefficient measured on a GPU at each weight precision it has rows of, by GPU
    /// and precision name (`[gemm_by_precision.h100_sxm]`, `fp8 = 2.05`), in place of the GPU's
    /// `gemm_compute` at that precision: a GPU's FP8 and FP4 GEMMs reach a different share of
    /// their (higher) peaks than its BF16 ones. `calibrate` writes it for a GPU whose rows have
    /// more than one precision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gemm_by_precision: BTreeMap<String, BTreeMap<String, f64>>,
    /// `step.step_us` as measured through each benchmark protocol's serving stack, by protocol
    /// name (`[step_by_protocol]`, `calibrate --step-by-protocol`): a stack that handles each
    /// step's tokens on the way out can add to every step; a scenario or `bench` naming a
    /// protocol takes its own, else `step.step_us`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_by_protocol: BTreeMap<String, f64>,
    /// The per-request coefficients.
    pub request: RequestCoefficients,
    /// The fit's error on the rows it was fitted on.
    #[serde(default)]
    pub fit: FitError,
}

/// The coefficients a roofline step model runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Step coefficients, in [`FEATURE_NAMES`] order.
    pub step: Features,
    /// Coefficients of particular GPUs, in [`GPU_FEATURES`] order, in place of `step`'s on
    /// those GPUs.
    pub gpu_rates: BTreeMap<String, [f64; GPU_FEATURES.len()]>,
    /// GEMM coefficients of particular GPUs at particular weight precisions, by GPU and
    /// precision name, in place of `gpu_rates`' (see [`ProfileFile::gemm_by_precision`]).
    pub gemm_by_precision: BTreeMap<String, BTreeMap<String, f64>>,
    /// The per-step cost (`step_us`) as measured through a protocol's serving stack, by protocol
    /// name (see [`ProfileFile::step_by_protocol`]).
    pub protocol_step_us: BTreeMap<String, f64>,
    /// ms added to each request's time to first token (see [`RequestCoefficients`]).
    pub request_overhead_ms: f64,
    /// The request overhead as measured through a protocol's serving stack, by protocol name
    /// (see [`RequestCoefficients::by_protocol`]).
    pub protocol_overhead_ms: BTreeMap<String, f64>,
    /// A client's reply delay, at most, ms (see [`RequestCoefficients`]).
    pub request_jitter_ms: f64,
}

impl Profile {
    /// Every coefficient 1 and no request overhead: the bare roofline (for hand-computed tests).
    pub fn ones() -> Self {
        Profile {
            step: [1.0; FEATURES],
            gpu_rates: BTreeMap::new(),
            gemm_by_precision: BTreeMap::new(),
            protocol_step_us: BTreeMap::new(),
            request_overhead_ms: 0.0,
            protocol_overhead_ms: BTreeMap::new(),
            request_jitter_ms: 0.0,
        }
    }

    /// Where `calibrate` starts when not told otherwise: datasheet rates at plausible
    /// efficiencies (GEMMs at 80 % of peak, weights and KV read at 85 % and 67 % of the
    /// bandwidth, all-reduces at 83 % of the link) and modest fixed costs. The fit moves every
    /// one; starting here makes `calibrate`'s output a function of the measurements alone.
    pub fn start() -> Self {
        Profile {
            step: [1.25, 1.15, 2.0, 1.5, 1.2, 5.0, 60.0, 500.0, 10.0],
            gpu_rates: BTreeMap::new(),
            gemm_by_precision: BTreeMap::new(),
            protocol_step_us: BTreeMap::new(),
            request_overhead_ms: 50.0,
            protocol_overhead_ms: BTreeMap::new(),
            request_jitter_ms: 0.0,
        }
    }

    /// The step coefficients on `gpu` with weights in `precision`: `step`, with the GPU's own
    /// where the profile has them, else the mean of those of the profile's GPUs of the same
    /// architecture (the same kernels), if any. The GEMM coefficient of each such GPU is its own
    /// at `precision` where the profile has one ([`Profile::gemm_by_precision`]), else its
    /// `gemm_compute`.
    pub fn step_on(&self, gpu: &GpuSpec, precision: Precision) -> Features {
        let mut step = self.step;
        let sources: Vec<&String> = if self.gpu_rates.contains_key(&gpu.name) {
            vec![&gpu.name]
        } else {
            self.gpu_rates
                .keys()
                .filter(|name| {
                    super::gpu::find(name).is_some_and(|g| g.architecture == gpu.architecture)
                })
                .collect()
        };
        if sources.is_empty() {
            return step;
        }
        let n = sources.len() as f64;
        for (i, &k) in GPU_FEATURES.iter().enumerate() {
            step[k] = sources.iter().map(|s| self.gpu_rates[*s][i]).sum::<f64>() / n;
        }
        let at = |s: &String| {
            self.gemm_by_precision
                .get(s)
                .and_then(|by| by.get(precision.name()))
                .copied()
        };
        step[GPU_FEATURES[0]] = sources
            .iter()
            .map(|s| at(s).unwrap_or(self.gpu_rates[*s][0]))
            .sum::<f64>()
            / n;
        step
    }

    /// The profile of a file.
    pub fn of_file(f: &ProfileFile) -> Self {
        Profile {
            step: f.step.to_array(),
            gpu_rates: f
                .gpu
                .iter()
                .map(|(g, r)| (g.clone(), r.to_array()))
                .collect(),
            gemm_by_precision: f.gemm_by_precision.clone(),
            protocol_step_us: f.step_by_protocol.clone(),
            request_overhead_ms: f.request.overhead_ms,
            protocol_overhead_ms: f.request.by_protocol.clone(),
            request_jitter_ms: f.request.jitter_ms,
        }
    }

    /// Checks the coefficients: finite and >= 0. The error names the key.
    pub fn check(&self) -> Result<(), (String, String)> {
        // A rate coefficient is the datasheet's time over the kernels' (1 / the share of the
        // peak reached): below 1 the GPU would beat its datasheet. The counts' costs are any
        // microseconds >= 0.
        let coefficient = |key: String, k: usize, c: f64| {
            let least = if k < RATE_FEATURES { 1.0 } else { 0.0 };
            if !(c.is_finite() && (least..=1e9).contains(&c)) {
                let why = if k < RATE_FEATURES {
                    "must be a finite number >= 1 (a rate coefficient below 1 would beat the \
                     GPU's datasheet)"
                } else {
                    "must be >= 0 and finite"
                };
                return Err((key, format!("= {c} {why}")));
            }
            Ok(())
        };
        for (k, (name, &c)) in FEATURE_NAMES.iter().zip(&self.step).enumerate() {
            coefficient(format!("step.{name}"), k, c)?;
        }
        // A GPU the profile names must be one dynsim knows: coefficients under a misspelt name
        // (`[gpu.h100]`) would be read and never used.
        let gpus = (self.gpu_rates.keys().map(|gpu| ("gpu", gpu))).chain(
            self.gemm_by_precision
                .keys()
                .map(|gpu| ("gemm_by_precision", gpu)),
        );
        for (table, gpu) in gpus {
            if super::gpu::find(gpu).is_none() {
                return Err((
                    format!("{table}.{gpu}"),
                    format!("is not a GPU: one of {}", super::gpu::known()),
                ));
            }
        }
        for (gpu, own) in &self.gpu_rates {
            for (&k, &c) in GPU_FEATURES.iter().zip(own) {
                coefficient(format!("gpu.{gpu}.{}", FEATURE_NAMES[k]), k, c)?;
            }
        }
        for (gpu, by) in &self.gemm_by_precision {
            for (precision, &c) in by {
                let key = format!("gemm_by_precision.{gpu}.{precision}");
                if !Precision::NAMES.contains(&precision.as_str()) {
                    return Err((key, "is not a precision: one of bf16, fp8, fp4".into()));
                }
                coefficient(key, 0, c)?;
            }
        }
        let by_protocol = self
            .protocol_overhead_ms
            .iter()
            .map(|(name, &x)| (format!("request.by_protocol.{name}"), x))
            .chain(
                self.protocol_step_us
                    .iter()
                    .map(|(name, &x)| (format!("step_by_protocol.{name}"), x)),
            );
        for (key, x) in [
            ("request.overhead_ms".to_string(), self.request_overhead_ms),
            ("request.jitter_ms".to_string(), self.request_jitter_ms),
        ]
        .into_iter()
        .chain(by_protocol)
        {
            if !(x.is_finite() && (0.0..=1e9).contains(&x)) {
                return Err((key, format!("= {x} must be >= 0 and finite")));
            }
        }
        for (table, by) in [
            ("request.by_protocol", &self.protocol_overhead_ms),
            ("step_by_protocol", &self.protocol_step_us),
        ] {
            if let Some(name) = by.keys().find(|n| !PROTOCOL_NAMES.contains(&n.as_str())) {
                return Err((
                    format!("{table}.{name}"),
                    format!("is not a protocol: one of {}", PROTOCOL_NAMES.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// The profile as it times a benchmark measured through `protocol`'s serving stack: its
    /// per-step cost that protocol's if the profile has one ([`Profile::protocol_step_us`]),
    /// else `step_us` as it is.
    pub fn for_protocol(mut self, protocol: Option<&str>) -> Profile {
        if let Some(&us) = protocol.and_then(|name| self.protocol_step_us.get(name)) {
            self.step[STEP_US] = us;
        }
        self
    }

    /// The request overhead as measured through `protocol`'s serving stack, ms: its own if the
    /// profile has one, else [`Profile::request_overhead_ms`].
    pub fn request_overhead_for(&self, protocol: Option<&str>) -> f64 {
        protocol
            .and_then(|p| self.protocol_overhead_ms.get(p))
            .copied()
            .unwrap_or(self.request_overhead_ms)
    }
}

/// The bundled profiles, by engine.
const BUNDLED: &[(&str, &str)] = &[
    ("vllm", include_str!("../../data/profiles/vllm.toml")),
    ("trtllm", include_str!("../../data/profiles/trtllm.toml")),
    ("sglang", include_str!("../../data/profiles/sglang.toml")),
];

/// The engines with a bundled profile.
pub fn engines() -> Vec<&'static str> {
    BUNDLED.iter().map(|(e, _)| *e).collect()
}

/// The bundled profile of `engine`, if it has one.
pub fn bundled(engine: &str) -> Option<&'static ProfileFile> {
    static FILES: OnceLock<Vec<ProfileFile>> = OnceLock::new();
    let files = FILES.get_or_init(|| {
        BUNDLED
            .iter()
            .map(|(e, text)| {
                toml::from_str(text)
                    .unwrap_or_else(|err| panic!("data/profiles/{e}.toml is bundled: {err}"))
            })
            .collect()
    });
    BUNDLED
        .iter()
        .position(|(e, _)| *e == engine)
        .map(|i| &files[i])
}

/// Parses a profile file's text; `path` only names it in errors, which give the line and key.
pub fn parse(path: &Path, text: &str) -> Result<ProfileFile> {
    let f: ProfileFile = toml::from_str(text)
        .map_err(|e| crate::toml_file::toml_error::<ProfileFile>(path, text, &e, |_| None))?;
    Profile::of_file(&f).check().map_err(|(key, message)| {
        let line = crate::toml_file::line_of_key(text, &key).unwrap_or(1);
        Error::field(path, line, key, message)
    })?;
    Ok(f)
}

/// A profile file's text: a header saying how it was made, then the TOML.
pub fn render(f: &ProfileFile, header: &str) -> String {
    let mut text = String::new();
    for line in header.lines() {
        text.push_str("# ");
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&toml::to_string(f).expect("a profile serialises"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_profile_reads_and_round_trips() {
        let f = bundled("vllm").expect("bundled");
        assert_eq!(f.engine, "vllm");
        Profile::of_file(f).check().expect("valid");
        let again: ProfileFile = toml::from_str(&render(f, "a header\nover two lines")).unwrap();
        assert_eq!(&again, f);
        assert_eq!(StepCoefficients::of_array(f.step.to_array()), f.step);
    }

    /// A profile fitted per protocol names each protocol's overhead in `[request.by_protocol]`;
    /// a name that is no protocol is refused by its line and key.
    #[test]
    fn overheads_by_protocol_are_read_and_unknown_protocols_refused() {
        let f = bundled("vllm").expect("bundled");
        let text = render(f, "");
        let p = Profile::of_file(&parse(Path::new("p.toml"), &text).unwrap());
        for (name, &o) in &p.protocol_overhead_ms {
            assert!(PROTOCOL_NAMES.contains(&name.as_str()));
            assert_eq!(p.request_overhead_for(Some(name)), o);
        }
        assert_eq!(p.request_overhead_for(None), p.request_overhead_ms);
        let bad = text.replace(
            "[request.by_protocol]\n",
            "[request.by_protocol]\nvllm_bench = 3.0\n",
        );
        assert_ne!(bad, text, "the bundled vLLM profile is fitted per protocol");
        let e = parse(Path::new("p.toml"), &bad).unwrap_err().to_string();
        let line = bad
            .lines()
            .position(|l| l.starts_with("vllm_bench"))
            .unwrap()
            + 1;
        assert!(
            e.contains(&format!("p.toml:{line}")) && e.contains("request.by_protocol.vllm_bench"),
            "{e}"
        );
    }

    /// A per-step cost by protocol that is no protocol is refused by its key.
    #[test]
    fn a_step_cost_of_no_protocol_is_refused_by_name() {
        let mut p = Profile::ones();
        p.protocol_step_us.insert("aiperf".into(), 20_000.0);
        assert_eq!(p.check(), Ok(()));
        p.protocol_step_us.insert("vllm_bench".into(), 1.0);
        assert_eq!(p.check().unwrap_err().0, "step_by_protocol.vllm_bench");
    }

    /// A GPU table under a name that is no GPU (a typo) is refused by its key, in `[gpu.NAME]`
    /// and `[gemm_by_precision.NAME]`, in any case the GPU lookup accepts.
    #[test]
    fn coefficients_of_no_gpu_are_refused_by_name() {
        let mut p = Profile::ones();
        p.gpu_rates.insert("H100_SXM".into(), [1.5, 1.0, 1.0, 1.2]);
        assert_eq!(p.check(), Ok(()));
        p.gpu_rates.insert("h100".into(), [1.5, 1.0, 1.0, 1.2]);
        let (key, why) = p.check().unwrap_err();
        assert_eq!(key, "gpu.h100");
        assert!(why.starts_with("is not a GPU: one of a100_sxm"), "{why}");
        let mut q = Profile::ones();
        q.gemm_by_precision
            .insert("b200".into(), BTreeMap::from([("fp8".into(), 2.0)]));
        assert_eq!(q.check().unwrap_err().0, "gemm_by_precision.b200");
        let text = render(bundled("vllm").expect("bundled"), "")
            .replace("[gpu.h100_sxm]", "[gpu.h100_sxmX]");
        let e = parse(Path::new("p.toml"), &text).unwrap_err().to_string();
        let line = text
            .lines()
            .position(|l| l == "[gpu.h100_sxmX]")
            .expect("the bundled vLLM profile has H100 coefficients")
            + 1;
        assert!(
            e.starts_with(&format!("p.toml:{line}: gpu.h100_sxmX: is not a GPU")),
            "{e}"
        );
    }

    #[test]
    fn a_negative_coefficient_is_refused_by_name() {
        let mut p = Profile::ones();
        p.step[3] = -1.0;
        assert_eq!(p.check().unwrap_err().0, "step.kv_read");
    }

    /// A rate coefficient below 1 (a GPU beating its datasheet: 0 made every step free) is
    /// refused by name, in `[step]`, `[gpu.NAME]` and `[gemm_by_precision.NAME]`; a count's
    /// cost of 0 microseconds is a cost like any other.
    #[test]
    fn a_rate_below_one_is_refused_and_a_free_count_is_not() {
        let step_us = FEATURE_NAMES.iter().position(|&n| n == "step_us").unwrap();
        assert!(step_us >= RATE_FEATURES);
        let mut p = Profile::ones();
        p.step[step_us] = 0.0;
        assert_eq!(p.check(), Ok(()));
        for (k, name) in FEATURE_NAMES.iter().enumerate().take(RATE_FEATURES) {
            let mut q = p.clone();
            q.step[k] = 0.999;
            let (key, why) = q.check().unwrap_err();
            assert_eq!(key, format!("step.{name}"));
            assert!(why.contains(">= 1"), "{why}");
        }
        let mut q = p.clone();
        q.gpu_rates.insert("h100_sxm".into(), [1.5, 1.0, 0.0, 1.2]);
        assert_eq!(q.check().unwrap_err().0, "gpu.h100_sxm.kv_read");
        let mut q = p.clone();
        q.gemm_by_precision
            .insert("h100_sxm".into(), BTreeMap::from([("fp8".into(), 1e-30)]));
        assert_eq!(q.check().unwrap_err().0, "gemm_by_precision.h100_sxm.fp8");
    }

    /// A GPU's GEMMs at a weight precision it has its own coefficient for take that one; at
    /// another, its `gemm_compute`; a GPU of the same architecture without coefficients borrows
    /// both the same way (an H200's FP8 GEMMs: the H100's FP8 coefficient). A name that is no
    /// precision is refused by its key.
    #[test]
    fn gemms_take_their_precisions_coefficient_where_the_gpu_has_one() {
        let mut p = Profile::ones();
        p.gpu_rates.insert("h100_sxm".into(), [1.6, 1.1, 1.3, 1.4]);
        p.gemm_by_precision.insert(
            "h100_sxm".into(),
            BTreeMap::from([("bf16".into(), 1.3), ("fp8".into(), 2.1)]),
        );
        let gpu = |name| super::super::gpu::find(name).unwrap();
        let on = |name, precision| p.step_on(gpu(name), precision);
        assert_eq!(on("h100_sxm", Precision::Bf16)[0], 1.3);
        assert_eq!(on("h100_sxm", Precision::Fp8)[0], 2.1);
        assert_eq!(on("h100_sxm", Precision::Fp4)[0], 1.6);
        assert_eq!(
            on("h200_sxm", Precision::Fp8),
            on("h100_sxm", Precision::Fp8)
        );
        assert_eq!(
            on("h100_sxm", Precision::Fp8)[1..],
            on("h100_sxm", Precision::Bf16)[1..]
        );
        assert_eq!(on("b200_sxm", Precision::Fp8), p.step);
        p.gemm_by_precision
            .get_mut("h100_sxm")
            .unwrap()
            .insert("int8".into(), 1.0);
        assert_eq!(p.check().unwrap_err().0, "gemm_by_precision.h100_sxm.int8");
    }

    /// A GPU's own coefficients where the profile has them; else those of its architecture's
    /// GPUs (H200 is a Hopper like the H100); else `[step]`'s.
    #[test]
    fn a_gpu_without_coefficients_borrows_its_architectures() {
        let mut p = Profile::ones();
        p.step[0] = 1.5;
        p.gpu_rates.insert("h100_sxm".into(), [1.2, 1.1, 1.3, 1.4]);
        let gpu = |name| super::super::gpu::find(name).unwrap();
        let h100 = p.step_on(gpu("h100_sxm"), Precision::Bf16);
        assert_eq!(
            (h100[0], h100[1], h100[2], h100[3], h100[4]),
            (1.2, 1.1, 1.0, 1.3, 1.4)
        );
        assert_eq!(p.step_on(gpu("h200_sxm"), Precision::Bf16), h100);
        let b200 = p.step_on(gpu("b200_sxm"), Precision::Bf16);
        assert_eq!(b200, p.step);
        // Two of one architecture: their mean.
        p.gpu_rates.insert("b200_sxm".into(), [2.0, 1.0, 1.0, 2.0]);
        p.gpu_rates.insert("gb300".into(), [3.0, 1.0, 1.0, 3.0]);
        assert_eq!(p.step_on(gpu("gb200"), Precision::Bf16)[0], 2.5);
    }
}
