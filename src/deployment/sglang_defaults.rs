//! SGLang's server defaults that follow the GPU: the prefill chunk, the CUDA graphs' largest
//! batch and `mem_fraction_static`, the share of each GPU's memory it gives weights and KV.
//!
//! From sgl-project/sglang v0.5.6.post2, `python/sglang/srt/server_args.py`,
//! `ServerArgs._handle_gpu_memory_settings` (the same in v0.5.8.post1 without piecewise CUDA
//! graphs, its default). By the GPU's memory, `chunked_prefill_size` and `cuda_graph_max_bs`
//! (the latter below TP 4, and from TP 4 in brackets): below 20 GiB 2,048 and 8 (8); below 35
//! 2,048 and 24 (80); below 60 4,096 and 32 (160); below 160 8,192 and 256 (512); above, 16,384
//! and 512 (512). `--cuda-graph-bs` given sets `cuda_graph_max_bs` to its largest.
//!
//! Then SGLang reserves, in MiB, `512` (attention metadata) `+ 1.5 x max(chunked_prefill_size,
//! 2048)` (a prefill chunk's activations; `max_prefill_tokens` in place of the chunk when
//! chunking is off) `+ 2 x cuda_graph_max_bs` (CUDA graph buffers) `+ 1024 x tp / 8` (large
//! parallel sizes), and at least 10,240 on a GPU of more than 60 GiB; and
//! `mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3)`, where `gpu_mem` is the
//! GPU's memory in MiB.
//!
//! The KV then gets that share of the memory less the weights (`model_runner.py`,
//! `profile_max_num_token`: what is free after loading less `(1 − mem_fraction_static)` of what
//! was free before): no separate reserve for the sampler, as vLLM's profile run takes.
//!
//! `max_running_requests`, unless given, follows the KV: SGLang's request table holds
//! `int(kv_tokens / context_len x 512)` rows, at least 2,048 and at most 4,096, and it runs at most
//! that many requests and half the KV's tokens.
//!
//! Where dynsim differs: the KV is the share of the memory CUDA reports less the weights and
//! the memory outside torch ([`super::NON_TORCH_GIB_TP`], vLLM's measure), where SGLang takes the
//! share of what is free when it starts (that memory already gone): 0.02 to 0.09 GiB more KV
//! here. `gpu_mem` is the memory CUDA reports ([`super::DEVICE_RESERVED_GIB`]
//! less than the datasheet's), where SGLang reads `nvidia-smi`'s `memory.total` (on an H100,
//! 81,559 MiB against 81,080: the share differs by 0.001 at most); a scenario's engine settings
//! are one for all its pools, so with disaggregated pools on different GPUs the chunk follows the
//! aggregated or prefill workers' GPU; no data-parallel attention, speculative decoding or
//! multimodal model, whose extra reserves are left out.

/// What SGLang's default `mem_fraction_static` is derived from besides the GPU and the
/// parallelism: the server's chunk, prefill budget and CUDA graph batch sizes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SglangMemory {
    /// `--chunked-prefill-size`, or `None` for SGLang's default on the GPU; -1 (or any value
    /// below 1): no chunking.
    pub chunked_prefill_size: Option<i64>,
    /// `--max-prefill-tokens` (what a prefill reserves for when chunking is off).
    pub max_prefill_tokens: u64,
    /// `--cuda-graph-max-bs`, or `None` for SGLang's default on the GPU.
    pub cuda_graph_max_bs: Option<u64>,
}

/// MiB in a GiB.
const MIB_PER_GIB: f64 = 1024.0;

/// SGLang's defaults by the GPU's memory, one row per tier of `_handle_gpu_memory_settings`:
/// below this many GiB, `chunked_prefill_size`, and `cuda_graph_max_bs` below TP 4 and from it.
const TIERS: [(f64, i64, u64, u64); 5] = [
    (20.0, 2048, 8, 8),
    (35.0, 2048, 24, 80),
    (60.0, 4096, 32, 160),
    (160.0, 8192, 256, 512),
    (f64::INFINITY, 16384, 512, 512),
];

/// The tier of a GPU of `gpu_mib` MiB.
fn tier(gpu_mib: f64) -> (f64, i64, u64, u64) {
    *TIERS
        .iter()
        .find(|t| gpu_mib < t.0 * MIB_PER_GIB)
        .expect("the last tier has no upper bound")
}

/// SGLang's default `max_running_requests` for a KV of `kv_tokens` tokens and a context of
/// `context_len` (`tp_worker.py`: the request table's size, `int(kv_tokens / context_len x 512)`
/// held between 2,048 and 4,096 (`model_runner.py`, `init_memory_pool`), and at most half the
/// KV's tokens).
pub fn default_max_running_requests(kv_tokens: u64, context_len: u64) -> usize {
    let table = ((kv_tokens as f64 / context_len.max(1) as f64 * 512.0) as u64).clamp(2048, 4096);
    table.min(kv_tokens / 2).max(1) as usize
}

/// SGLang's default `chunked_prefill_size` on a GPU of `gpu_mib` MiB.
pub fn default_chunked_prefill_size(gpu_mib: f64) -> i64 {
    tier(gpu_mib).1
}

/// SGLang's default `cuda_graph_max_bs` on a GPU of `gpu_mib` MiB at `tp`.
pub fn default_cuda_graph_max_bs(gpu_mib: f64, tp: u64) -> u64 {
    let (_, _, small_tp, large_tp) = tier(gpu_mib);
    if tp < 4 {
        small_tp
    } else {
        large_tp
    }
}

/// The MiB SGLang keeps out of `mem_fraction_static` on a GPU of `gpu_mib` MiB at `tp`: a
/// prefill's activations, CUDA graphs, metadata, at least 10 GiB above 60 GiB.
pub fn reserved_mib(gpu_mib: f64, tp: u64, m: SglangMemory) -> f64 {
    let chunk = m
        .chunked_prefill_size
        .unwrap_or_else(|| default_chunked_prefill_size(gpu_mib));
    let chunk_or_budget = if chunk > 0 {
        chunk as f64
    } else {
        m.max_prefill_tokens as f64
    };
    let graphs = m
        .cuda_graph_max_bs
        .unwrap_or_else(|| default_cuda_graph_max_bs(gpu_mib, tp));
    let reserved =
        512.0 + chunk_or_budget.max(2048.0) * 1.5 + graphs as f64 * 2.0 + tp as f64 / 8.0 * 1024.0;
    if gpu_mib > 60.0 * MIB_PER_GIB {
        reserved.max(10.0 * MIB_PER_GIB)
    } else {
        reserved
    }
}

/// SGLang's default `mem_fraction_static` on a GPU of `gpu_mib` MiB at tensor parallelism `tp`.
pub fn mem_fraction_static(gpu_mib: f64, tp: u64, m: SglangMemory) -> f64 {
    crate::round::round_py((gpu_mib - reserved_mib(gpu_mib, tp, m)) / gpu_mib, 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNKED: SglangMemory = SglangMemory {
        chunked_prefill_size: Some(8192),
        max_prefill_tokens: 16384,
        cuda_graph_max_bs: None,
    };

    #[test]
    fn an_h100_at_tp_1_with_16_graphs_reserves_a_chunk_and_its_graphs() {
        // 80 GiB less 0.82 as CUDA reports it: 81,080.32 MiB. Reserved: 512 + 1.5 x 8,192 +
        // 2 x 16 + 1,024 / 8 = 12,960 MiB; (81,080.32 − 12,960) / 81,080.32 = 0.84016.
        let gpu = (80.0 - 0.82) * 1024.0;
        let graphs = SglangMemory {
            cuda_graph_max_bs: Some(16),
            ..CHUNKED
        };
        assert_eq!(mem_fraction_static(gpu, 1, graphs), 0.840);
        // SGLang's own graphs there: 256, so 13,440 MiB and 0.834.
        assert_eq!(default_cuda_graph_max_bs(gpu, 1), 256);
        assert_eq!(mem_fraction_static(gpu, 1, CHUNKED), 0.834);
        // At TP 8: 512 graphs and 1,024 MiB for the parallel size, 14,848 MiB: 0.81687.
        assert_eq!(mem_fraction_static(gpu, 8, CHUNKED), 0.817);
    }

    #[test]
    fn a_large_gpu_reserves_at_least_10_gib_and_a_small_one_what_its_chunk_needs() {
        // Chunks of 2,048 on an H200 (140.18 GiB as CUDA reports it): 512 + 3,072 + 512 + 128 =
        // 4,224 MiB, raised to 10,240: (143,544.32 − 10,240) / 143,544.32 = 0.92866.
        let h200 = (141.0 - 0.82) * 1024.0;
        let small_chunks = SglangMemory {
            chunked_prefill_size: Some(2048),
            ..CHUNKED
        };
        assert_eq!(mem_fraction_static(h200, 1, small_chunks), 0.929);
        // An L40S (47.18 GiB): 32 graphs, no floor: 512 + 12,288 + 64 + 128 = 12,992 MiB of
        // 48,312.32: 0.73108.
        let l40s = (48.0 - 0.82) * 1024.0;
        assert_eq!(default_cuda_graph_max_bs(l40s, 2), 32);
        assert_eq!(mem_fraction_static(l40s, 1, CHUNKED), 0.731);
        // Chunking off: the prefill budget stands in for the chunk (16,384 x 1.5 = 24,576).
        let unchunked = SglangMemory {
            chunked_prefill_size: Some(-1),
            ..CHUNKED
        };
        // (143,544.32 − 25,728) / 143,544.32 = 0.82076.
        assert_eq!(mem_fraction_static(h200, 1, unchunked), 0.821);
        assert_eq!(default_cuda_graph_max_bs(180.0 * 1024.0, 1), 512);
    }

    #[test]
    fn a_gpu_of_60_gib_or_less_takes_no_floor_and_its_own_chunk_and_graphs() {
        // An L40S left to SGLang: chunks of 4,096 and 32 graphs: 512 + 6,144 + 64 + 128 =
        // 6,848 MiB, under the 10,240 a larger GPU would reserve at least: 0.85826.
        let l40s = (48.0 - 0.82) * 1024.0;
        let own = SglangMemory {
            chunked_prefill_size: None,
            ..CHUNKED
        };
        assert_eq!(mem_fraction_static(l40s, 1, own), 0.858);
        // Graphs by memory and TP (below TP 4, from TP 4).
        let mib = |gib: f64| gib * 1024.0;
        for (gib, small, large) in [
            (16.0, 8, 8),
            (24.0, 24, 80),
            (48.0, 32, 160),
            (80.0, 256, 512),
            (141.0, 256, 512),
            (180.0, 512, 512),
        ] {
            assert_eq!(default_cuda_graph_max_bs(mib(gib), 3), small, "{gib} GiB");
            assert_eq!(default_cuda_graph_max_bs(mib(gib), 4), large, "{gib} GiB");
        }
    }

    #[test]
    fn running_requests_follow_the_kv_and_the_context() {
        // 21,920 tokens of a 40,960-token context: 274 table rows, raised to 2,048; half the
        // KV is 10,960, so 2,048.
        assert_eq!(default_max_running_requests(21_920, 40_960), 2048);
        // 2,845,456 tokens of 131,072: 11,115 rows, held at 4,096.
        assert_eq!(default_max_running_requests(2_845_456, 131_072), 4096);
        // 6,000 tokens of a 2,048-token context: 1,500 rows, raised to 2,048, under half the
        // KV (3,000). 4,000 tokens of a 1,000-token context: 2,048 rows, but half the KV is
        // 2,000.
        assert_eq!(default_max_running_requests(6_000, 2_048), 2048);
        assert_eq!(default_max_running_requests(4_000, 1_000), 2000);
        // Between the bounds: 1,000,000 tokens of 200,000 give 2,560.
        assert_eq!(default_max_running_requests(1_000_000, 200_000), 2560);
    }

    #[test]
    fn the_chunk_follows_the_gpu_memory() {
        let mib = |gib: f64| (gib - 0.82) * 1024.0;
        assert_eq!(default_chunked_prefill_size(mib(24.0)), 2048);
        assert_eq!(default_chunked_prefill_size(mib(48.0)), 4096); // L40S
        assert_eq!(default_chunked_prefill_size(mib(80.0)), 8192); // A100, H100
        assert_eq!(default_chunked_prefill_size(mib(141.0)), 8192); // H200
        assert_eq!(default_chunked_prefill_size(mib(180.0)), 16384); // B200
    }
}
