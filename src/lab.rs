//! The lab calculations: `sim` (routing modes on the repeated-prefix workload), `kvcost` (KV size
//! and transfer time) and the artefacts of `dynsim lab`.
//!
//! The formats are exact: the same parameters give the same JSON as the reference Python lab.

use serde::Serialize;

use crate::disagg::{self, ModelShape};
use crate::hash::block_hashes;
use crate::rng::{RngKind, SimRng};
use crate::round::round_py;
use crate::router::KvRouter;
use crate::workload::lab::{LabHits, PrefixRepeat};

/// How `sim` routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabMode {
    /// Request i goes to worker i % workers.
    Rr,
    /// One `randrange(workers)` per request, in order.
    Random,
    /// The self-tracking KV router.
    Kv,
    /// The events-fed KV router; with `publish` the chosen worker publishes the request's blocks.
    KvEvents,
}

impl LabMode {
    /// Every mode's name, as `--mode` spells it.
    pub const NAMES: &'static [&'static str] = &["rr", "random", "kv", "kv-events"];
}

impl std::str::FromStr for LabMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rr" => Ok(LabMode::Rr),
            "random" => Ok(LabMode::Random),
            "kv" => Ok(LabMode::Kv),
            "kv-events" => Ok(LabMode::KvEvents),
            _ => Err(format!("{s:?} is not a mode (rr, random, kv, kv-events)")),
        }
    }
}

/// The parameters of one `sim` run.
#[derive(Clone, Copy, Debug)]
pub struct SimParams {
    /// Routing mode.
    pub mode: LabMode,
    /// Whether workers publish KV events (kv-events mode only).
    pub publish: bool,
    /// Worker count (at least 1).
    pub workers: usize,
    /// The workload.
    pub workload: PrefixRepeat,
    /// The generator's seed.
    pub seed: u64,
    /// Tokens per block (at least 1).
    pub block: usize,
    /// The generator.
    pub rng: RngKind,
}

impl Default for SimParams {
    /// The lab's defaults: kv mode, 2 workers, 12 x 6 requests of 96 + 16 tokens, seed 1, block 16,
    /// the Python generator.
    fn default() -> Self {
        SimParams {
            mode: LabMode::Kv,
            publish: true,
            workers: 2,
            workload: PrefixRepeat::default(),
            seed: 1,
            block: 16,
            rng: RngKind::Python,
        }
    }
}

/// One `sim` result, serialised in the lab's key order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    /// The mode, as given on the command line.
    pub mode: LabMode,
    /// Worker count.
    pub workers: usize,
    /// Requests routed.
    pub requests: usize,
    /// Requests whose prefix was seen before.
    pub repeat_requests: usize,
    /// Repeat requests sent to a worker that had processed their prefix.
    pub hits: usize,
    /// hits / repeat_requests, Python-rounded to 4 places.
    pub hit_rate: f64,
    /// "yes" or "no", kv-events mode only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish: Option<&'static str>,
}

/// Runs the lab simulation. Callers validate `workers >= 1` and `block >= 1`.
pub fn run_sim(p: &SimParams) -> SimReport {
    let mut rng = SimRng::new(p.rng, p.seed);
    let order = p.workload.order(&mut rng);
    let mut hits = LabHits::new(p.workload.prefixes, p.workers);
    let mut router = match p.mode {
        LabMode::Kv => Some(KvRouter::new(p.workers, p.block)),
        LabMode::KvEvents => Some(KvRouter::with_events(p.workers, p.block)),
        LabMode::Rr | LabMode::Random => None,
    };
    for (i, &k) in order.iter().enumerate() {
        let worker = match (p.mode, router.as_mut()) {
            (LabMode::Rr, _) => i % p.workers,
            (LabMode::Random, _) => rng.below(p.workers),
            (_, Some(router)) => {
                let hashes = block_hashes(&p.workload.tokens(i, k), p.block);
                let worker = router.route_hashes(&hashes).worker.index();
                if p.mode == LabMode::KvEvents && p.publish {
                    router.on_event(worker, &hashes);
                }
                worker
            }
            (_, None) => unreachable!("kv modes always build a router"),
        };
        hits.record(k, worker);
    }
    SimReport {
        mode: p.mode,
        workers: p.workers,
        requests: hits.requests,
        repeat_requests: hits.repeat_requests,
        hits: hits.hits,
        hit_rate: hits.hit_rate(),
        publish: (p.mode == LabMode::KvEvents).then_some(if p.publish { "yes" } else { "no" }),
    }
}

/// The KV cost of one prompt, in the lab's `kvcost` shape (one decimal each).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvCostReport {
    /// KV bytes per token for the model.
    pub bytes_per_token: u64,
    /// The prompt's KV in MiB (2^20 bytes).
    pub kv_mib: f64,
    /// Transfer time in ms at the given GB/s (1e9 bytes/s).
    pub transfer_ms: f64,
    /// Prefill + transfer + overhead, when a prefill time was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_disagg_ms: Option<f64>,
    /// The link speed at which the transfer costs exactly the saved time, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakeven_gbps: Option<f64>,
}

/// The inputs of a `kvcost` calculation.
#[derive(Clone, Copy, Debug)]
pub struct KvCostParams {
    /// Prompt tokens.
    pub tokens: u64,
    /// Link speed, GB/s (positive, finite).
    pub gbps: f64,
    /// The model's KV shape.
    pub model: ModelShape,
    /// Prefill time, ms: adds `ttft_disagg_ms`.
    pub prefill_ms: Option<f64>,
    /// Fixed transfer overhead, ms (0 if absent).
    pub overhead_ms: Option<f64>,
    /// Time disaggregation saves, ms: adds `breakeven_gbps`.
    pub saved_ms: Option<f64>,
}

/// Computes the `kvcost` report.
pub fn kvcost(p: &KvCostParams) -> KvCostReport {
    let bpt = p.model.bytes_per_token();
    let overhead = p.overhead_ms.unwrap_or(0.0);
    KvCostReport {
        bytes_per_token: bpt,
        kv_mib: round_py(disagg::kv_mib(p.tokens, bpt), 1),
        transfer_ms: round_py(disagg::transfer_ms(p.tokens, bpt, p.gbps), 1),
        ttft_disagg_ms: p.prefill_ms.map(|prefill| {
            round_py(
                disagg::ttft_disagg(prefill, p.tokens, bpt, p.gbps, overhead),
                1,
            )
        }),
        breakeven_gbps: p
            .saved_ms
            .map(|saved| round_py(disagg::breakeven_gbps(p.tokens, bpt, saved), 3)),
    }
}

/// The link speeds of the lab's `kvcost.json`: the measured 0.112 and 0.608 GB/s and a 13.4 GB/s link.
pub const LAB_LINKS_GBPS: [f64; 3] = [0.112, 0.608, 13.4];
/// The prompt length of the lab's `kvcost.json`.
pub const LAB_TOKENS: u64 = 1500;

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(mode: LabMode, publish: bool) -> SimReport {
        run_sim(&SimParams {
            mode,
            publish,
            ..SimParams::default()
        })
    }

    #[test]
    fn default_outputs_equal_the_reference_lab() {
        let cases = [
            (LabMode::Rr, true, 49, 0.8167),
            (LabMode::Random, true, 48, 0.8),
            (LabMode::Kv, true, 60, 1.0),
            (LabMode::KvEvents, true, 60, 1.0),
            (LabMode::KvEvents, false, 49, 0.8167),
        ];
        for (mode, publish, hits, rate) in cases {
            let r = sim(mode, publish);
            assert_eq!((r.requests, r.repeat_requests), (72, 60), "{mode:?}");
            assert_eq!(
                (r.hits, r.hit_rate),
                (hits, rate),
                "{mode:?} publish={publish}"
            );
        }
    }

    #[test]
    fn events_off_equals_round_robin() {
        for seed in 0..20 {
            let p = |mode| SimParams {
                mode,
                publish: false,
                seed,
                ..SimParams::default()
            };
            assert_eq!(
                run_sim(&p(LabMode::KvEvents)).hits,
                run_sim(&p(LabMode::Rr)).hits
            );
        }
    }

    #[test]
    fn json_has_the_lab_key_order() {
        let json = serde_json::to_string(&sim(LabMode::KvEvents, false)).unwrap();
        assert_eq!(
            json,
            r#"{"mode":"kv-events","workers":2,"requests":72,"repeat_requests":60,"hits":49,"hit_rate":0.8167,"publish":"no"}"#
        );
    }

    #[test]
    fn kvcost_matches_the_lab() {
        let p = |gbps| KvCostParams {
            tokens: 1500,
            gbps,
            model: ModelShape::default(),
            prefill_ms: None,
            overhead_ms: None,
            saved_ms: None,
        };
        let r = kvcost(&p(0.112));
        assert_eq!(
            (r.bytes_per_token, r.kv_mib, r.transfer_ms),
            (114_688, 164.1, 1536.0)
        );
        assert_eq!(kvcost(&p(0.608)).transfer_ms, 282.9);
        assert_eq!(kvcost(&p(13.4)).transfer_ms, 12.8);
        assert_eq!(
            serde_json::to_string(&kvcost(&p(0.112))).unwrap(),
            r#"{"bytes_per_token":114688,"kv_mib":164.1,"transfer_ms":1536.0}"#
        );
    }
}
