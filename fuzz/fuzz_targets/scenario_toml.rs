//! Fuzz target: see `dynsim::fuzzing::scenario_toml`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::scenario_toml(data));
