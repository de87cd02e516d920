//! The routing policies, one file each, and the list of them: [`POLICIES`]
//! ([`super::registry`] finds one by name).
//!
//! Adding a policy is one new file and one line: write `policies/NAME.rs` with its
//! `pub const ENTRY: PolicyEntry` (its name, summary and builder), and add `NAME: [ENTRY],` to
//! the list below, at the place help texts should show it. The line declares the module and
//! registers its entries; a file that defines several policies lists each of its entries.

use super::policy::PolicyEntry;

/// Declares each policy module and lists its entries in [`POLICIES`], in the order given.
macro_rules! policies {
    ($($module:ident: [$($entry:ident),+ $(,)?],)+) => {
        $(pub mod $module;)+

        /// The policies, in the order help texts list them.
        pub const POLICIES: &[PolicyEntry] = &[$($($module::$entry,)+)+];
    };
}

policies! {
    rr: [ENTRY],
    random: [ENTRY],
    lab: [KV, KV_EVENTS],
    cost: [ENTRY],
    approx: [ENTRY],
    dynamo: [ENTRY],
    sglang: [ENTRY],
    llm_d: [ENTRY],
    vllm_router: [SESSION, PREFIX_AWARE, LOADAWARE],
    least_loaded: [ENTRY],
    power_of_two: [ENTRY],
}
