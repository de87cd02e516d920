//! Fuzz target: see `dynsim::fuzzing::mooncake_jsonl`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::mooncake_jsonl(data));
