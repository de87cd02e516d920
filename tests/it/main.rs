//! The integration tests: one binary, one module per concern.

mod common;

mod bench_protocol;
mod bounds;
mod cli_lab;
mod cli_run;
mod engine;
mod fidelity;
mod fuzz;
mod invariants;
mod kv_tiers;
mod lab_parity;
mod outputs;
mod own_tails;
mod physics;
mod pinned;
mod pipelined_io;
mod plan;
mod properties;
mod readme;
mod real_gpus;
mod replay;
mod routers;
mod scaling;
mod schemas;
mod serving_engines;
mod streams;
mod stretches;
mod structure;
mod sweep;
mod timeline;
mod timeline_plot;
