//! Fuzz target: see `dynsim::fuzzing::sweep_toml`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::sweep_toml(data));
