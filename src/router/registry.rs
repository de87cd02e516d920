//! Every routing policy, by name. The list itself is [`POLICIES`], kept beside the policies'
//! files in [`super::policies`]: a new policy is one file there and one line in that list.

pub use super::policies::POLICIES;
pub use super::policy::PolicyEntry;
use super::policy::{PolicySetup, RoutingPolicy};

/// The entry named `name`.
pub fn entry(name: &str) -> Option<&'static PolicyEntry> {
    POLICIES.iter().find(|p| p.name == name)
}

/// Every policy's name, in registry order.
pub fn names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// The policy named `name` built with its `[router.NAME]` settings for one worker, to ask what
/// it needs (`None` for an unknown name or bad settings).
fn sample(name: &str, settings: Option<&toml::Value>) -> Option<Box<dyn RoutingPolicy>> {
    entry(name).and_then(|e| {
        (e.build)(&PolicySetup {
            name: e.name,
            workers: 1,
            block_size: 16,
            kv_capacity_blocks: None,
            settings,
        })
        .ok()
    })
}

/// Whether the policy named `name`, with its `[router.NAME]` settings, reads the workers' load
/// signals (`false` for an unknown name or bad settings).
pub fn reads_signals(name: &str, settings: Option<&toml::Value>) -> bool {
    sample(name, settings).is_some_and(|p| p.reads_signals())
}

/// Whether the policy named `name`, with its `[router.NAME]` settings, reads `router.load`
/// (`false` for an unknown name or bad settings).
pub fn reads_load_kind(name: &str, settings: Option<&toml::Value>) -> bool {
    sample(name, settings).is_some_and(|p| p.reads_load_kind())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::policy::PolicySetup;

    #[test]
    fn names_are_unique_and_every_policy_builds_with_its_defaults() {
        let mut seen = std::collections::BTreeSet::new();
        for p in POLICIES {
            assert!(seen.insert(p.name), "{} twice", p.name);
            let setup = PolicySetup {
                name: p.name,
                workers: 3,
                block_size: 16,
                kv_capacity_blocks: None,
                settings: None,
            };
            assert!((p.build)(&setup).is_ok(), "{}", p.name);
        }
    }

    #[test]
    fn policies_are_listed_in_help_order() {
        assert_eq!(
            names(),
            [
                "rr",
                "random",
                "kv",
                "kv-events",
                "cost",
                "approx",
                "dynamo",
                "sglang",
                "llm-d",
                "vllm-session",
                "vllm-prefix-aware",
                "vllm-loadaware",
                "least-loaded",
                "power-of-two",
            ]
        );
    }

    #[test]
    fn only_llm_d_reads_signals() {
        let readers: Vec<&str> = names()
            .into_iter()
            .filter(|n| reads_signals(n, None))
            .collect();
        assert_eq!(readers, vec!["llm-d"]);
        assert!(!reads_signals("nonsense", None));
    }

    #[test]
    fn only_the_lab_rule_reads_router_load() {
        let readers: Vec<&str> = names()
            .into_iter()
            .filter(|n| reads_load_kind(n, None))
            .collect();
        assert_eq!(readers, vec!["kv", "kv-events", "approx"]);
    }

    #[test]
    fn every_policy_decides_nothing_when_no_worker_is_up_and_only_among_those_up() {
        use crate::hash::BlockHash;
        use crate::ids::{RequestId, WorkerId};
        use crate::rng::{RngKind, SimRng};
        use crate::router::loads::{LoadBook, LoadKind};
        use crate::router::policy::RouteRequest;

        let blocks: Vec<BlockHash> = (1..=8).map(BlockHash).collect();
        for session in [None, Some(7)] {
            let req = RouteRequest {
                id: RequestId(0),
                blocks: (&blocks).into(),
                input_tokens: 128,
                session,
                now: 0,
            };
            for p in POLICIES {
                let setup = PolicySetup {
                    name: p.name,
                    workers: 3,
                    block_size: 16,
                    kv_capacity_blocks: Some(64),
                    settings: None,
                };
                let mut policy = (p.build)(&setup).unwrap();
                let mut rng = SimRng::new(RngKind::Chacha, 1);
                let mut loads = LoadBook::new(3, LoadKind::Routed);
                for w in 0..3 {
                    loads.set_up(WorkerId::at(w), false);
                }
                assert_eq!(policy.decide(&req, &loads, &mut rng), None, "{}", p.name);
                loads.set_up(WorkerId::at(1), true);
                for _ in 0..4 {
                    let d = policy.decide(&req, &loads, &mut rng);
                    assert_eq!(d.map(|d| d.worker), Some(WorkerId(1)), "{}", p.name);
                }
            }
        }
    }

    #[test]
    fn settings_of_another_policy_are_refused_by_name() {
        let table: toml::Value = toml::from_str("nonsense = 1").unwrap();
        let setup = PolicySetup {
            name: "rr",
            workers: 2,
            block_size: 16,
            kv_capacity_blocks: None,
            settings: Some(&table),
        };
        let err = (entry("rr").unwrap().build)(&setup).err().unwrap();
        assert_eq!(err.key, "router.rr.nonsense");
    }
}
