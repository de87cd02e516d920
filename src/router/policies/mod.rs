//! The routing policies, one file each; [`super::registry`] lists them.

pub mod approx;
pub mod cost;
pub mod dynamo;
pub mod lab;
pub mod random;
pub mod rr;
