//! Wiring: a validated [`Scenario`] and its workload become a ready-to-run simulation, laid out
//! as its [`Topology`] says.

use std::rc::Rc;

use crate::deployment::Deployment;
use crate::engine::{ms_to_ns, ActorId, Simulation};
use crate::router::loads::LoadBook;
use crate::router::policy::PolicySetup;
use crate::router::registry;
use crate::router::stream::OnGap;
use crate::scenario::kv::SELECTIVE_WRITE_HITS;
use crate::scenario::{
    AdmissionKind, EngineKind, Fault, PreemptionKind, PrefillCharge, ReplicaSync, Scenario,
    SchedulePolicyKind, Spread,
};
use crate::sketch::SharedHistogram;
use crate::workload::source::Recipe;

use super::audit::{IndexAudit, SharedAudit};
use super::board::board;
use super::bus::{BusActor, BusFaults, BusModel};
use super::client::{Arrivals, Client, Feed, Pacing, SharedFeed};
use super::hardware::Hardware;
use super::probes::Probes;
use super::router_actor::{GapRecovery, Placement, RouterActor, RouterSetup, SeenPrefixes};
use super::timeline::SharedTimeline;
use super::topology::{Role, Topology};
use super::truth::Truth;
use super::worker::engine::EngineSetup;
use super::worker::engines::EngineRules;
use super::worker::sglang::{SchedulePolicy, SglangRules};
use super::worker::tiers::{SharedHost, TierSpec, TiersSetup};
use super::worker::trtllm::TrtllmRules;
use super::worker::vllm::{Admission, Preemption, VllmRules};
use super::worker::{Link, SharedTransfers, Worker, WorkerSetup};
use super::Node;
use crate::protocol::kv_event::Tier;
use crate::protocol::messages::Msg;

/// Builds the simulation: actors, the workload's first deliveries and injected faults, and
/// returns the topology it laid out (and the index audit). `sim` must be new (its generator may already have drawn the
/// workload).
pub fn populate(
    s: &Scenario,
    hw: &Hardware,
    recipe: &Recipe,
    pacing: Pacing,
    sim: &mut Simulation<Node>,
    instruments: Instruments,
) -> Built {
    let Instruments {
        timeline,
        record_features,
        list_own_tails,
    } = instruments;
    let topo = Topology::of(s);
    let routable = topo.routable().len();
    // The cluster's one histogram of gaps between tokens, which every worker's engine adds to.
    let itl = SharedHistogram::default();
    // Loss attribution's ground truth, unless the scenario turns attribution off.
    let truth = s.router.attribute_misses.then(Truth::shared);
    let entry = registry::entry(&s.router.policy).expect("a validated scenario names a policy");
    let routers = topo.routers().to_vec();
    let by_session = s.router.spread == Spread::Session;
    let feed = Feed::shared(recipe, pacing, routers.clone(), by_session);
    let client = Client::new(feed.clone(), routable, ms_to_ns(hw.request_jitter_ms(s)))
        .with_timeline(timeline.clone());
    let policies: Vec<_> = routers
        .iter()
        .map(|_| {
            (entry.build)(&PolicySetup {
                name: entry.name,
                workers: routable,
                block_size: s.block_size(),
                kv_capacity_blocks: hw.kv_capacity(s, topo.routable()[0].role),
                settings: s.router.settings.get(entry.name),
            })
            .expect("a validated scenario's policy settings build")
        })
        .collect();
    // Workers post load signals only for a policy that reads them; the routers' belief is
    // audited, and workers keep a replay buffer, only for a policy that learns from events.
    let board = policies[0].reads_signals().then(|| board(routable));
    let learns = policies[0].learns_from_events();
    let audit =
        (learns && s.router.audit_index).then(|| IndexAudit::shared(routable, routers.len()));
    let replay_buffer = if learns && s.router.on_gap == OnGap::Replay {
        s.bus.replay_buffer
    } else {
        0
    };
    let own_tails_unread = own_tails_unread(s, list_own_tails);
    assert_eq!(sim.add(Node::Client(Box::new(client))), topo.client());
    let seen_prefixes = SeenPrefixes::default();
    for (replica, policy) in policies.into_iter().enumerate() {
        let setup = RouterSetup {
            workers: topo.routable().iter().map(|w| w.addr).collect(),
            client: topo.client(),
            dispatch_ns: ms_to_ns(hw.request_overhead_ms(s)),
            board: board
                .clone()
                .map(|b| (b, ms_to_ns(s.router.signal_refresh_ms))),
            probes: Probes {
                truth: truth.clone(),
                audit: audit.clone(),
                timeline: None,
            },
            own_tails_unread,
            shares_active_load: s.router.sync == ReplicaSync::ActiveLoad,
            recovery: GapRecovery {
                on_gap: s.router.on_gap,
                silence_ns: ms_to_ns(s.router.gap_silence_ms),
                timeout_ns: ms_to_ns(s.router.recovery_timeout_ms),
                guess_ttl_ns: ms_to_ns(s.router.fallback_ttl_ms),
            },
            seen_prefixes: Rc::clone(&seen_prefixes),
        };
        let place = Placement {
            replica,
            peers: routers
                .iter()
                .copied()
                .filter(|&r| r != routers[replica])
                .collect(),
            bus: topo.bus(),
        };
        let mut loads = LoadBook::new(routable, s.router.load);
        if !policy.reads_load_trees() {
            loads.drop_trees();
        }
        for slot in topo.routable().iter().filter(|w| !w.present) {
            loads.set_present(slot.id, false);
        }
        let router = RouterActor::new(policy, loads, setup, place);
        assert_eq!(sim.add(Node::Router(Box::new(router))), routers[replica]);
    }
    assert_eq!(
        sim.add(Node::Bus(Box::new(BusActor::new(
            BusModel::new(bus_faults(&s.bus)),
            routers.clone(),
            timeline.clone()
        )))),
        topo.bus()
    );

    let d = &s.disagg;
    let link = d.enabled.then(|| Link {
        bytes_per_token: hw.transfer_bytes_per_token(s),
        gbps: d.link_gbps,
        overhead_ms: d.transfer_overhead_ms,
    });
    // `[kv.host] scope = "cluster"`: one host pool for every worker, which each worker's
    // stream reports, woken by the others (by worker number) when the pool changes.
    let mut shared_host: Option<SharedHost> = None;
    // One list for all the workers (an `Rc`, not a copy each: O(workers) in all).
    let mut host_peers: Rc<[ActorId]> = Rc::from(Vec::new());
    if s.kv.host_shared() {
        let mut peers = vec![topo.client(); topo.workers().len()];
        for slot in topo.workers() {
            peers[slot.id.index()] = slot.addr;
        }
        host_peers = peers.into();
    }
    let transfers = SharedTransfers::default();
    for slot in topo.workers() {
        let mut engine = EngineSetup {
            record_features,
            itl: itl.clone(),
            ..engine_setup(s, hw, slot.role)
        };
        engine.list_own_tails |= list_own_tails;
        if let Some(t) = engine.tiers.as_mut().filter(|_| s.kv.host_shared()) {
            let capacity = t.tiers[0].capacity_blocks;
            let pool = shared_host.get_or_insert_with(|| SharedHost::new(capacity));
            t.shared_host = Some(pool.clone());
        }
        let setup = WorkerSetup {
            index: slot.id,
            role: slot.role,
            engine,
            rules: engine_rules(s, hw.of(slot.role)),
            host_peers: host_peers.clone(),
            publish: s.bus.publish,
            replay_buffer,
            bus: topo.bus(),
            decode_peers: topo.handoff_peers(slot.id),
            link,
            transfers: transfers.clone(),
            board: board.clone().filter(|_| slot.routable),
            probes: Probes {
                truth: truth.clone(),
                audit: audit.clone().filter(|_| slot.routable),
                timeline: timeline.clone(),
            },
        };
        let worker = match slot.present {
            true => Worker::new(setup),
            false => Worker::new(setup).absent(),
        };
        assert_eq!(sim.add(Node::Worker(Box::new(worker))), slot.addr);
    }
    // Faults first: at equal times a worker goes down before that instant's arrivals are routed.
    for fault in &s.faults {
        let Fault::Restart {
            worker,
            at_ms,
            down_ms,
        } = fault;
        let (down, up) = (ms_to_ns(*at_ms), ms_to_ns(at_ms + down_ms));
        let slot = topo.worker(crate::ids::WorkerId::at(*worker));
        let mut targets = vec![slot.addr];
        targets.extend(topo.fault_listeners(slot.id));
        for to in targets {
            sim.schedule(down, slot.addr, to, Msg::WorkerDown { worker: slot.id });
            sim.schedule(up, slot.addr, to, Msg::WorkerUp { worker: slot.id });
        }
    }
    // Prefill workers hand nothing to a decode slot that is empty.
    for slot in topo.workers().iter().filter(|w| !w.present && !w.routable) {
        for to in topo.fault_listeners(slot.id) {
            sim.schedule(0, slot.addr, to, Msg::WorkerDown { worker: slot.id });
        }
    }
    let arrivals = feed.borrow().initial_count() as u64;
    sim.schedule_stream(topo.client(), arrivals, Arrivals(feed.clone()));
    Built {
        topology: topo,
        audit,
        learns,
        feed,
        itl,
    }
}

/// What a run observes of itself beyond its report.
#[derive(Clone, Default)]
pub struct Instruments {
    /// Notes for the run's timeline (`--perfetto`).
    pub timeline: Option<SharedTimeline>,
    /// Workers keep feature clocks under a roofline (for `calibrate`).
    pub record_features: bool,
    /// Every request's own tail stays listed and indexed
    /// ([`RunHooks::list_own_tails`](crate::run::RunHooks::list_own_tails)).
    pub list_own_tails: bool,
}

/// Whether a request may be routed twice: handed back by a worker that goes down (a fault) or
/// leaves the cluster (a `[[scale]]` step or the planner removing it, or a request or a
/// prefill's handoff reaching a worker that has left). A request routed again may find its own
/// tail where it was before (a prefill worker lists it when the request leaves), so then own
/// tails are read.
pub(crate) fn may_route_twice(s: &Scenario) -> bool {
    !s.faults.is_empty() || !s.scale.is_empty() || s.planner.is_some()
}

/// Whether the routers may leave requests' own tails unread ([`RouterSetup::own_tails_unread`]):
/// no request is routed twice ([`may_route_twice`]). Neither instrument reads them from the
/// index: loss attribution asks about the routed request's own blocks, whose own tail no worker
/// holds before the request is first routed, and the index audit counts the events the router
/// applies, every name of them. `listed`: the run keeps every own tail listed and indexed
/// anyway ([`RunHooks::list_own_tails`](crate::run::RunHooks::list_own_tails)).
pub(crate) fn own_tails_unread(s: &Scenario, listed: bool) -> bool {
    !listed && !may_route_twice(s)
}

/// What [`populate`] laid out: the topology, the routers' index audit if there is one, and
/// whether their policy learns from KV events.
pub struct Built {
    /// Every actor's place.
    pub topology: Topology,
    /// Precision and recall of the routers' indexes (for a policy that learns from events).
    pub audit: Option<SharedAudit>,
    /// Whether the routers' policy, as built with the scenario's settings, learns from KV
    /// events ([`crate::router::policy::RoutingPolicy::learns_from_events`]).
    pub learns: bool,
    /// The client's feed of requests (the run watches what its requests in flight hold).
    pub feed: SharedFeed,
    /// The gaps between consecutive tokens of every request, ns, as the workers add them.
    pub itl: SharedHistogram,
}

/// A worker's engine, from the scenario, its deployment and its role.
pub fn engine_setup(s: &Scenario, hw: &Hardware, role: Role) -> EngineSetup {
    EngineSetup {
        block_size: s.block_size(),
        kv_capacity: hw.kv_capacity(s, role),
        prefill_only: matches!(role, Role::Prefill | Role::Colocated),
        attribute_misses: s.router.attribute_misses,
        list_own_tails: s.router.attribute_misses && may_route_twice(s),
        timing: hw.timing(s, role),
        max_model_len: hw.of(role).map(|d| d.max_model_len),
        record_features: false,
        tiers: tiers_setup(s, hw, role),
        itl: SharedHistogram::default(),
    }
}

/// The engine a worker serving `deployment` runs under `s`, with its own rules.
fn engine_rules(s: &Scenario, deployment: Option<&Deployment>) -> EngineRules {
    match s.engine.kind {
        EngineKind::Vllm => EngineRules::Vllm(vllm_rules(s)),
        EngineKind::Trtllm => {
            let t = &s.engine.trtllm;
            EngineRules::Trtllm(TrtllmRules {
                max_batch_size: s.max_num_seqs(None),
                max_num_tokens: s.max_num_batched_tokens(),
                enable_chunked_prefill: t.enable_chunked_prefill,
            })
        }
        EngineKind::Sglang => EngineRules::Sglang(sglang_rules(s, deployment)),
    }
}

/// The SGLang engine's rules under `s` for a worker serving `deployment`.
fn sglang_rules(s: &Scenario, deployment: Option<&Deployment>) -> SglangRules {
    let g = &s.engine.sglang;
    SglangRules {
        schedule_policy: match g.schedule_policy {
            SchedulePolicyKind::Fcfs => SchedulePolicy::Fcfs,
            SchedulePolicyKind::Lpm => SchedulePolicy::Lpm,
        },
        max_running_requests: s.sglang_max_running_requests(deployment.map(Deployment::served_kv)),
        chunked_prefill_size: usize::try_from(
            s.sglang_chunked_prefill_size(deployment.map(|d| &d.gpu)),
        )
        .ok(),
        max_prefill_tokens: g.max_prefill_tokens as usize,
        schedule_conservativeness: g.schedule_conservativeness,
        enable_mixed_chunk: g.enable_mixed_chunk,
        charge_chunk: g.max_prefill_tokens_charge == PrefillCharge::Chunk,
        recheck_locked_prefix: g.recheck_locked_prefix,
    }
}

/// A worker's lower KV tiers (`None` without `[kv.host]`): blocks of the model's KV bytes per
/// token (the deployment's, or `disagg.model`'s without one, as the KV link's) times the block
/// size.
fn tiers_setup(s: &Scenario, hw: &Hardware, role: Role) -> Option<TiersSetup> {
    let bytes_per_token = hw.of(role).map_or_else(
        || s.disagg.model.bytes_per_token(),
        |d| d.kv_bytes_per_token,
    );
    let block_bytes = bytes_per_token.saturating_mul(s.block_size() as u64);
    let resolved =
        s.kv.resolved(block_bytes, hw.kv_capacity(s, role), s.block_size());
    let host = resolved.iter().find(|t| !t.disk);
    let min_load_tokens = host.map_or(0, |t| t.min_load_tokens);
    // SGLang HiCache's `write_through_selective` writes a block at its second hit.
    let selective_hits = if host.is_some_and(|t| t.selective()) {
        SELECTIVE_WRITE_HITS
    } else {
        0
    };
    let tiers: Vec<TierSpec> = resolved
        .into_iter()
        .map(|t| TierSpec {
            tier: if t.disk { Tier::Disk } else { Tier::Host },
            capacity_blocks: t.capacity_blocks,
            d2h_gbps: t.d2h_gbps,
            h2d_gbps: t.h2d_gbps,
            first_byte_ms: t.first_byte_ms,
            write_through: t.write_through(),
        })
        .collect();
    (!tiers.is_empty()).then_some(TiersSetup {
        block_bytes,
        tiers,
        shared_host: None,
        min_load_tokens,
        selective_hits,
    })
}

/// The vLLM engine's rules under `s`.
fn vllm_rules(s: &Scenario) -> VllmRules {
    let v = &s.engine.vllm;
    VllmRules {
        max_num_seqs: s.max_num_seqs(None),
        max_num_batched_tokens: s.max_num_batched_tokens(),
        chunked_prefill: v.chunked_prefill,
        preemption: match v.preemption {
            PreemptionKind::Lifo => Preemption::Lifo,
            PreemptionKind::Fifo => Preemption::Fifo,
        },
        admission: match v.admission {
            AdmissionKind::Chunk => Admission::Chunk,
            AdmissionKind::WholePrompt => Admission::WholePrompt,
        },
        decode_stretches: v.decode_stretches,
    }
}

/// The bus's faults as `[bus]` sets them, in the simulation's units.
fn bus_faults(b: &crate::scenario::Bus) -> BusFaults {
    BusFaults {
        drop_rate: b.drop_rate,
        latency_ns: ms_to_ns(b.latency_ms),
        jitter_ns: ms_to_ns(b.jitter_ms),
        reorder: b.reorder,
        outages: b
            .outages
            .iter()
            .map(|w| (ms_to_ns(w.start_ms), ms_to_ns(w.end_ms)))
            .collect(),
        link_gbps: b.link_gbps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::load::parse_scenario;
    use std::path::Path;

    #[test]
    fn own_tails_go_unread_unless_a_request_may_be_routed_twice() {
        let scenario = |extra: &str| {
            let text = format!(
                "[workload]\nkind = \"synthetic\"\n[router]\npolicy = \"dynamo\"\n\
                 audit_index = false\nattribute_misses = false\n{extra}"
            );
            parse_scenario(Path::new("t.toml"), &text, &[]).expect("valid")
        };
        assert!(own_tails_unread(&scenario(""), false));
        assert!(
            !own_tails_unread(&scenario(""), true),
            "a run that lists them reads them"
        );
        let fault = "[[faults]]\nkind = \"restart\"\nworker = 0\nat_ms = 1.0\ndown_ms = 1.0\n";
        assert!(
            !own_tails_unread(&scenario(fault), false),
            "a hand-back routes twice"
        );
        // Workers that leave hand requests back too, faults or none.
        let removal =
            "[[scale]]\nat_s = 1.0\npool = \"workers\"\nworkers = 1\nleave = \"remove\"\n";
        assert!(!own_tails_unread(&scenario(removal), false));
        let planner = "[planner]\nkind = \"threshold\"\nmetric = \"queue\"\n\
                       adjustment_interval_s = 1.0\n";
        assert!(!own_tails_unread(&scenario(planner), false));
        let mut observed = scenario("");
        observed.router.audit_index = true;
        observed.router.attribute_misses = true;
        assert!(
            own_tails_unread(&observed, false),
            "the audit counts applied events, attribution asks about the routed request's blocks"
        );
        let attributed = observed;
        let hw = Hardware::resolve(&attributed, Path::new(".")).expect("no deployment");
        assert!(!engine_setup(&attributed, &hw, Role::Unified).list_own_tails);
        let mut attributed = scenario(fault);
        attributed.router.attribute_misses = true;
        assert!(
            engine_setup(&attributed, &hw, Role::Unified).list_own_tails,
            "a handed-back request's tail is looked up on the workers it left"
        );
    }
}
