//! The routing policies, one file each; [`super::registry`] lists them.

pub mod approx;
pub mod cost;
pub mod dynamo;
pub mod lab;
pub mod least_loaded;
pub mod llm_d;
pub mod power_of_two;
pub mod random;
pub mod rr;
pub mod sglang;
pub mod vllm_router;
