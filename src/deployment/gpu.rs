//! A GPU's datasheet numbers: memory, memory bandwidth, dense tensor-core peak per precision and
//! the link tensor parallelism talks over.
//!
//! The bundled GPUs are data files in `data/gpus/`, named as AIConfigurator names its systems
//! (`h100_sxm`, `b200_sxm`, ...) so that measured rows name them as they are; each number cites
//! NVIDIA's datasheet. Peaks are **dense** (NVIDIA quotes tensor-core figures with 2:4 sparsity:
//! dense is half); link bandwidths are NVIDIA's bidirectional per-GPU figures (NVLink or PCIe
//! within a node of `gpus_per_node`, the NIC of NVIDIA's own DGX system beyond); memory is in GiB
//! (2^30 bytes): the 80 GB of the A100 and H100, which are GiB (80 GB H100 = 5 stacks of 16 GiB),
//! and for the others, whose datasheet GB are not (the H200's 141, the B200's 180, the GB200's 186,
//! Blackwell Ultra's decimal 288, the L40S's 48 less in-band ECC), the GiB nvidia-smi reports.
//! Either way the file's figure less [`super::DEVICE_RESERVED_GIB`] is within a quarter of a
//! GiB of the total CUDA reports, never above nvidia-smi's.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::Precision;

/// One GPU model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Its name (`h100_sxm`).
    pub name: String,
    /// The product, as NVIDIA names it.
    pub product: String,
    /// Its architecture (`hopper`, `blackwell`, ...): GPUs of one architecture run the same
    /// kernels, so a profile's coefficients measured on one serve the others it has no rows of
    /// ([`super::profile::Profile::step_on`]).
    pub architecture: String,
    /// Where the numbers come from: the datasheet's address.
    pub source: String,
    /// Memory per GPU, GiB (see the module doc).
    pub memory_gb: f64,
    /// Memory bandwidth, TB/s (1e12 bytes/s).
    pub memory_tbps: f64,
    /// Dense BF16 tensor-core peak, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor-core peak, TFLOP/s (absent: no FP8 tensor cores).
    pub fp8_tflops: Option<f64>,
    /// Dense FP4 tensor-core peak, TFLOP/s (absent: no FP4 tensor cores).
    pub fp4_tflops: Option<f64>,
    /// NVLink bandwidth per GPU, bidirectional, GB/s (absent: no NVLink).
    pub nvlink_gbps: Option<f64>,
    /// PCIe bandwidth per GPU, bidirectional, GB/s: the link tensor parallelism uses without
    /// NVLink.
    pub pcie_gbps: f64,
    /// GPUs one tensor-parallel group reaches over `nvlink_gbps` (or PCIe without NVLink): an
    /// HGX board's or a PCIe server's 8, an NVL72 rack's 72.
    pub gpus_per_node: u64,
    /// Scale-out network bandwidth per GPU, bidirectional, GB/s (its NIC: 400 Gb/s each way is
    /// 100 GB/s): the link a tensor-parallel group larger than `gpus_per_node` crosses (absent:
    /// none is given, and such a group is refused).
    pub network_gbps: Option<f64>,
}

impl GpuSpec {
    /// Memory per GPU, bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * f64::from(1u32 << 30)
    }

    /// Memory bandwidth, bytes/s.
    pub fn memory_bytes_per_s(&self) -> f64 {
        self.memory_tbps * 1e12
    }

    /// Dense tensor-core peak for GEMMs in `p`, FLOP/s; `None` when the GPU has no tensor cores
    /// for it.
    pub fn peak_flops(&self, p: Precision) -> Option<f64> {
        let tflops = match p {
            Precision::Bf16 => Some(self.bf16_tflops),
            Precision::Fp8 => self.fp8_tflops,
            Precision::Fp4 => self.fp4_tflops,
        };
        tflops.map(|t| t * 1e12)
    }

    /// The precisions it has tensor cores for.
    pub fn precisions(&self) -> Vec<Precision> {
        Precision::ALL
            .into_iter()
            .filter(|&p| self.peak_flops(p).is_some())
            .collect()
    }

    /// The bandwidth one GPU sends at to its `tp` tensor-parallel peers, bytes/s: half the
    /// bidirectional NVLink figure, or PCIe's without NVLink; half the network's when the group
    /// spans nodes (a ring all-reduce runs at its slowest hop, and NCCL's rings across nodes
    /// cross the network once per node boundary: each GPU's share is its own NIC's). `None`
    /// when the group spans nodes and no network bandwidth is given.
    pub fn link_bytes_per_s(&self, tp: u64) -> Option<f64> {
        let gbps = if tp <= self.gpus_per_node {
            self.nvlink_gbps.unwrap_or(self.pcie_gbps)
        } else {
            self.network_gbps?
        };
        Some(gbps / 2.0 * 1e9)
    }

    /// Checks the numbers: every figure positive and finite. The error names the field.
    pub fn check(&self) -> Result<(), (String, String)> {
        let optional = [
            ("fp8_tflops", self.fp8_tflops),
            ("fp4_tflops", self.fp4_tflops),
            ("nvlink_gbps", self.nvlink_gbps),
            ("network_gbps", self.network_gbps),
            ("gpus_per_node", Some(self.gpus_per_node as f64)),
        ];
        let required = [
            ("memory_gb", Some(self.memory_gb)),
            ("memory_tbps", Some(self.memory_tbps)),
            ("bf16_tflops", Some(self.bf16_tflops)),
            ("pcie_gbps", Some(self.pcie_gbps)),
        ];
        for (key, v) in required.into_iter().chain(optional) {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0 && x < 1e9) {
                    return Err((key.to_string(), format!("= {x} must be a positive number")));
                }
            }
        }
        Ok(())
    }
}

/// The bundled GPU files, by file name.
const BUNDLED: &[(&str, &str)] = &[
    (
        "a100_sxm.toml",
        include_str!("../../data/gpus/a100_sxm.toml"),
    ),
    (
        "h100_sxm.toml",
        include_str!("../../data/gpus/h100_sxm.toml"),
    ),
    (
        "h200_sxm.toml",
        include_str!("../../data/gpus/h200_sxm.toml"),
    ),
    (
        "b200_sxm.toml",
        include_str!("../../data/gpus/b200_sxm.toml"),
    ),
    ("gb200.toml", include_str!("../../data/gpus/gb200.toml")),
    (
        "b300_sxm.toml",
        include_str!("../../data/gpus/b300_sxm.toml"),
    ),
    ("gb300.toml", include_str!("../../data/gpus/gb300.toml")),
    ("l40s.toml", include_str!("../../data/gpus/l40s.toml")),
];

/// Every bundled GPU, read once.
pub fn catalog() -> &'static [GpuSpec] {
    static CATALOG: OnceLock<Vec<GpuSpec>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        BUNDLED
            .iter()
            .map(|(file, text)| {
                toml::from_str(text)
                    .unwrap_or_else(|e| panic!("data/gpus/{file} is a bundled GPU: {e}"))
            })
            .collect()
    })
}

/// The bundled GPU called `name` (case aside).
pub fn find(name: &str) -> Option<&'static GpuSpec> {
    catalog().iter().find(|g| g.name.eq_ignore_ascii_case(name))
}

/// The bundled GPUs' names, for error messages.
pub fn known() -> String {
    catalog()
        .iter()
        .map(|g| g.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_gpu_reads_and_cites_nvidia() {
        assert_eq!(catalog().len(), BUNDLED.len());
        for g in catalog() {
            g.check()
                .unwrap_or_else(|(k, e)| panic!("{}: {k}: {e}", g.name));
            assert!(g.source.contains("nvidia"), "{}", g.name);
            assert!(
                g.fp4_tflops.is_none() || g.fp8_tflops.is_some(),
                "{}",
                g.name
            );
        }
    }

    #[test]
    fn precisions_follow_the_tensor_cores() {
        let h100 = find("h100_sxm").unwrap();
        assert_eq!(h100.precisions(), vec![Precision::Bf16, Precision::Fp8]);
        assert_eq!(
            find("A100_SXM").unwrap().precisions(),
            vec![Precision::Bf16]
        );
        assert_eq!(
            find("b200_sxm").unwrap().precisions(),
            Precision::ALL.to_vec()
        );
        // H100: 80 GiB, 3.35 TB/s, 989 dense BF16 TFLOP/s; NVLink 900 GB/s both ways, 450 out.
        assert_eq!(h100.memory_bytes(), 85_899_345_920.0);
        assert_eq!(h100.memory_bytes_per_s(), 3.35e12);
        assert_eq!(h100.peak_flops(Precision::Bf16), Some(989e12));
        assert_eq!(h100.link_bytes_per_s(8), Some(450e9));
        // Past its 8-GPU board: a ConnectX-7 of 400 Gb/s each way, 50 GB/s out.
        assert_eq!(h100.link_bytes_per_s(16), Some(50e9));
        // An NVL72 rack's 72 GPUs share NVLink; past the rack, a ConnectX-7 each.
        let gb200 = find("gb200").unwrap();
        assert_eq!(gb200.link_bytes_per_s(64), Some(900e9));
        assert_eq!(gb200.link_bytes_per_s(128), Some(50e9));
        // L40S has no NVLink: PCIe Gen4 x16, 64 GB/s both ways; no network is given.
        let l40s = find("l40s").unwrap();
        assert_eq!(l40s.link_bytes_per_s(8), Some(32e9));
        assert_eq!(l40s.link_bytes_per_s(16), None);
        // Its in-band ECC takes a sixteenth of the 48 GiB: nvidia-smi's 46,068 MiB.
        assert!((l40s.memory_bytes() - 46_068.0 * 1_048_576.0).abs() < 0.01 * 1_073_741_824.0);
    }

    /// The memory a deployment takes CUDA to report (the figure less
    /// [`super::super::DEVICE_RESERVED_GIB`]) against what CUDA and nvidia-smi report on real
    /// GPUs, GiB. CUDA's totals are PyTorch's ("GPU 0 has a total capacity of ... GiB" in its
    /// out-of-memory messages, `totalGlobalMem` for the B200: pytorch/ao PR #4002); nvidia-smi's
    /// are its MiB / 1,024 (H200 143,771; B200 183,359, NVIDIA/TensorRT-LLM issue #10278; GB200
    /// 189,471, AIConfigurator's systems/gb200.yaml). The H200's 141, the B200's 180 and the
    /// GB200's 186 taken as GiB put CUDA's memory 0.38, 0.83 and 0.87 GiB above CUDA's own total,
    /// the B200's and GB200's above nvidia-smi's.
    #[test]
    fn memory_is_what_cuda_reports_plus_the_device_reserve() {
        use super::super::DEVICE_RESERVED_GIB;
        for (name, cuda, smi) in [
            ("a100_sxm", 79.15, 80.0),
            ("h100_sxm", 79.18, 81_559.0 / 1024.0),
            ("h200_sxm", 139.80, 143_771.0 / 1024.0),
            ("b200_sxm", 178.35, 183_359.0 / 1024.0),
            ("gb200", 184.31, 189_471.0 / 1024.0),
            ("b300_sxm", 267.69, 275_040.0 / 1024.0),
            ("l40s", 44.40, 46_068.0 / 1024.0),
        ] {
            let g = find(name).unwrap();
            let as_cuda = g.memory_gb - DEVICE_RESERVED_GIB;
            assert!(
                (as_cuda - cuda).abs() < 0.25,
                "{name}: {as_cuda:.2} GiB as CUDA reports it, CUDA reports {cuda}"
            );
            assert!(
                as_cuda < smi,
                "{name}: {as_cuda:.2} GiB, nvidia-smi {smi:.2}"
            );
        }
    }
}
