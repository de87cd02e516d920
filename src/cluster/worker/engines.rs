//! Which engine a worker runs: each engine's own rules, and the one place that builds an engine
//! from them and the settings every engine shares ([`EngineSetup`]).
//!
//! It sits above the engines (it names each of them), so that the interface they implement
//! ([`engine`](super::engine)) names none of them.

use super::engine::{Engine, EngineSetup};
use super::{sglang, trtllm, vllm};

/// Each engine's own rules.
#[derive(Clone, Debug, PartialEq)]
pub enum EngineRules {
    /// vLLM v1.
    Vllm(vllm::VllmRules),
    /// TensorRT-LLM (`GUARANTEED_NO_EVICT`).
    Trtllm(trtllm::TrtllmRules),
    /// SGLang.
    Sglang(sglang::SglangRules),
}

/// Builds the engine `rules` name over `setup`: every engine runs on vLLM's step loop, over a
/// pool with the same lower tiers.
pub fn build<T: 'static>(setup: &EngineSetup, rules: &EngineRules) -> Box<dyn Engine<T>> {
    let cfg = match rules {
        EngineRules::Vllm(r) => vllm::SchedulerConfig::of(setup, r),
        EngineRules::Trtllm(r) => r.scheduler_config(setup),
        EngineRules::Sglang(r) => r.scheduler_config(setup),
    };
    Box::new(
        vllm::StepScheduler::new(cfg)
            .with_tiers(setup.tiers.as_ref())
            .with_itl(setup.itl.clone()),
    )
}
