//! Fuzz target: see `dynsim::fuzzing::scenario_run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::scenario_run(data));
