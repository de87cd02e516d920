//! Workloads: where requests come from.
//!
//! - [`lab`]: the lab's repeated-prefix workload and its hit definition.

pub mod lab;
