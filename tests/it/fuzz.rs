//! Short mutation tests of every input reader: real inputs (the bundled scenarios, sweeps and
//! traces) with random bytes flipped, inserted, deleted or replaced by tokens that break
//! parsers (huge and negative numbers, brackets, quotes, line ends). Each must be read or
//! refused in one line, never panic. The long runs of the same checks under cargo-fuzz are in
//! `fuzz/` and docs/RELIABILITY.md.

use std::path::Path;

use dynsim::fuzzing;
use proptest::prelude::*;

/// Tokens that make parsers take unusual paths.
const TOKENS: &[&str] = &[
    "1e300",
    "-1",
    "0",
    "18446744073709551616",
    "nan",
    "inf",
    "\"\"",
    "\"unbounded\"",
    "[",
    "]",
    "{",
    "}",
    "=",
    ",",
    "\n",
    "\r\n",
    "\u{feff}",
    "null",
    "[[faults]]",
    "kind = \"synthetic\"",
    "1.5",
    "\"hash_ids\": []",
];

/// One mutation: at `at` (modulo the length), `kind` 0 flips a byte, 1 inserts `byte`, 2
/// deletes, 3 inserts a token.
type Mutation = (u16, u8, u8);

fn mutate(seed: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for &(at, kind, byte) in mutations {
        let at = usize::from(at) % (data.len() + 1);
        match kind {
            0 if at < data.len() => data[at] ^= byte | 1,
            1 => data.insert(at, byte),
            2 if at < data.len() => {
                data.remove(at);
            }
            _ => {
                let token = TOKENS[usize::from(byte) % TOKENS.len()].as_bytes();
                data.splice(at..at, token.iter().copied());
            }
        }
    }
    data
}

fn files(dir: &str, ext: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("bundled folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| std::fs::read(p).expect("readable"))
        .collect()
}

/// The first `n` lines of a bundled trace, with a leading selector byte for the trace targets.
fn trace_head(name: &str, n: usize) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/traces")
        .join(name);
    let text = std::fs::read_to_string(path).expect("bundled trace");
    let head: Vec<&str> = text.lines().take(n).collect();
    let mut data = vec![1u8]; // 64-token blocks, strict
    data.extend(head.join("\n").as_bytes());
    data
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec((any::<u16>(), 0u8..4, any::<u8>()), 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn scenario_files_are_read_or_refused_in_one_line(seed in any::<prop::sample::Index>(), m in mutations()) {
        let seeds = files("scenarios", "toml");
        fuzzing::scenario_toml(&mutate(&seeds[seed.index(seeds.len())], &m));
    }

    #[test]
    fn sweep_files_are_read_or_refused_in_one_line(seed in any::<prop::sample::Index>(), m in mutations()) {
        let seeds = files("sweeps", "toml");
        fuzzing::sweep_toml(&mutate(&seeds[seed.index(seeds.len())], &m));
    }

    #[test]
    fn set_values_are_applied_or_refused_in_one_line(seed in 0usize..8, m in mutations()) {
        let seeds = [
            "cluster.kv_capacity_blocks=64",
            "workload.speedup=2.0",
            "router.policy=dynamo",
            "bus.drop_rate=0.5",
            "faults=[{kind=\"restart\",worker=0,at_ms=1.0,down_ms=5.0}]",
            "workload.prefixes=100",
            "timing.model=\"fixed\"",
            "engine.vllm.max_num_seqs=\"unbounded\"",
        ];
        fuzzing::set_value(&mutate(seeds[seed].as_bytes(), &m));
    }

    #[test]
    fn mooncake_rows_are_read_or_refused_in_one_line(
        which in 0usize..2,
        m in mutations(),
        selector in any::<u8>(),
    ) {
        let name = ["mooncake_conversation_trace.jsonl", "mooncake_synthetic_trace.jsonl"][which];
        let mut data = mutate(&trace_head(name, 12), &m);
        data[0] = selector;
        fuzzing::mooncake_jsonl(&data);
    }

    #[test]
    fn azure_rows_are_read_or_refused_in_one_line(m in mutations(), selector in any::<u8>()) {
        let mut data = mutate(&trace_head("azure_llm_inference_2023_conv.csv", 12), &m);
        data[0] = selector;
        fuzzing::azure_csv(&data);
    }

    #[test]
    fn measured_rows_are_read_or_refused_in_one_line(m in mutations()) {
        let seed = "{\"mode\":\"agg\",\"input\":1500,\"conc\":1,\"rep\":0,\"ttft_p50_ms\":50.0}\n\
                    {\"mode\":\"disagg\",\"input\":1500,\"conc\":1,\"rep\":0,\"ttft_p50_ms\":300.0}\n";
        fuzzing::measured_jsonl(&mutate(seed.as_bytes(), &m));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Mutated small scenarios that stay valid are run, twice, to the end.
    #[test]
    fn small_mutated_scenarios_run_to_the_end(seed in 0usize..5, m in mutations()) {
        let seeds = ["rr.toml", "kv.toml", "lossy-bus.toml", "late-events.toml", "events-on.toml"];
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios").join(seeds[seed]);
        let text = std::fs::read(path).expect("bundled scenario");
        fuzzing::scenario_run(&mutate(&text, &m));
    }
}

/// Inputs the long fuzzing runs found (docs/RELIABILITY.md), each a bug fixed since.
#[test]
fn inputs_found_by_fuzzing_are_refused_in_one_line() {
    // A sweep file whose quoted key holds an escaped line end: the key was printed raw, on two
    // lines.
    let input = b"#\x22 =, 8]= ro[\x22\x22\x0a [\x22rr\xde\x8avve\x5cnts\x22]\x0a";
    fuzzing::sweep_toml(input);
    let text = std::str::from_utf8(input).expect("UTF-8");
    let err = dynsim::sweep::parse_sweep(Path::new("found.toml"), text).expect_err("refused");
    assert!(!err.to_string().contains('\n'), "{err}");
}
