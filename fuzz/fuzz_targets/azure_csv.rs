//! Fuzz target: see `dynsim::fuzzing::azure_csv`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::azure_csv(data));
