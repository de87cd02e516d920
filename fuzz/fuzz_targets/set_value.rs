//! Fuzz target: see `dynsim::fuzzing::set_value`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dynsim::fuzzing::set_value(data));
