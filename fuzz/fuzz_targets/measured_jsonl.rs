//! Fuzz target: see `dynsim::fuzzing::measured_jsonl`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::measured_jsonl(data));
