//! The integration tests: one binary, one module per concern.

mod common;

mod cli_lab;
mod cli_run;
mod engine;
mod fidelity;
mod lab_parity;
mod physics;
mod pinned;
mod plan;
mod properties;
mod readme;
mod replay;
mod routers;
mod streams;
mod stretches;
mod sweep;
mod timeline;
