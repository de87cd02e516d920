//! Wiring: a validated [`Scenario`] and its workload become a ready-to-run simulation.
//!
//! Addresses: 0 client, 1 router, 2 bus, then the workers (prefill workers first when
//! disaggregated, then decode workers). Routable workers are numbered from 0 in that order.

use crate::engine::{ActorId, Simulation};
use crate::router::policy::{Policy, PolicyConfig};
use crate::scenario::{validate::worker_count, Fault, Scenario};
use crate::workload::{ms_to_ns, RequestSpec};

use super::bus::BusActor;
use super::client::{Client, Pacing};
use super::messages::Msg;
use super::router_actor::RouterActor;
use super::timing::TimingModel;
use super::truth::Truth;
use super::worker::{Link, Role, Worker, WorkerSetup};
use super::Node;

/// The client's address.
pub const CLIENT: ActorId = 0;
/// The router's address.
pub const ROUTER: ActorId = 1;
/// The bus's address.
pub const BUS: ActorId = 2;
/// The first worker's address.
pub const FIRST_WORKER: ActorId = 3;

/// The number of workers the router routes to (prefill workers when disaggregated).
pub fn routable_workers(s: &Scenario) -> usize {
    if s.disagg.enabled {
        s.disagg.prefill_workers
    } else {
        s.cluster.workers
    }
}

/// Display names of the actors, by address.
pub fn actor_names(s: &Scenario) -> Vec<String> {
    let mut names = vec!["client".to_string(), "router".into(), "bus".into()];
    let routable = routable_workers(s);
    for w in 0..worker_count(s) {
        names.push(match (s.disagg.enabled, w < routable) {
            (false, _) => format!("worker{w}"),
            (true, true) if s.disagg.colocated => format!("gpu{w}"),
            (true, true) => format!("prefill{w}"),
            (true, false) => format!("decode{}", w - routable),
        });
    }
    names
}

/// Builds the simulation: actors, the workload's first deliveries and injected faults. `sim`
/// must be new (its generator may already have drawn the workload).
pub fn populate(s: &Scenario, specs: Vec<RequestSpec>, pacing: Pacing, sim: &mut Simulation<Node>) {
    let routable = routable_workers(s);
    let total = worker_count(s);
    let truth = Truth::shared(routable);
    let mut client = Client::new(specs, pacing, ROUTER, routable);
    let first = client.initial();
    let policy = Policy::new(
        PolicyConfig {
            kind: s.router.policy,
            load: s.router.load,
            overlap_weight: s.router.overlap_weight,
            temperature: s.router.temperature,
            ttl_ns: ms_to_ns(s.router.ttl_s * 1e3),
        },
        routable,
    );
    let worker_ids: Vec<ActorId> = (0..routable).map(|w| FIRST_WORKER + w).collect();
    assert_eq!(sim.add(Node::Client(Box::new(client))), CLIENT);
    let router = RouterActor::new(policy, worker_ids, CLIENT, truth.clone());
    assert_eq!(sim.add(Node::Router(Box::new(router))), ROUTER);
    assert_eq!(sim.add(Node::Bus(BusActor::new(&s.bus, ROUTER))), BUS);

    let timing = match &s.timing {
        Some(t) => TimingModel::Polynomial(t.clone()),
        None => TimingModel::Fixed {
            service_ms: s.cluster.service_ms,
        },
    };
    let d = &s.disagg;
    let link = d.enabled.then(|| Link {
        bytes_per_token: d.model.bytes_per_token(),
        gbps: d.link_gbps,
        overhead_ms: d.transfer_overhead_ms,
    });
    for w in 0..total {
        let role = match (d.enabled, d.colocated, w < routable) {
            (false, _, _) => Role::Unified,
            (true, true, _) => Role::Colocated,
            (true, false, true) => Role::Prefill,
            (true, false, false) => Role::Decode,
        };
        let decode_peers = match role {
            Role::Prefill => (routable..total).map(|k| (k, FIRST_WORKER + k)).collect(),
            Role::Colocated => vec![(w, FIRST_WORKER + w)],
            Role::Unified | Role::Decode => Vec::new(),
        };
        let setup = WorkerSetup {
            index: w,
            role,
            capacity: s.cluster.kv_capacity_blocks.count(),
            // Colocated prefill and decode share one GPU: one phase of one request at a time.
            max_batch: match role {
                Role::Colocated => Some(1),
                _ => s.timing.as_ref().and_then(|t| t.max_batch.count()),
            },
            block_size: s.block_size(),
            timing: timing.clone(),
            publish: s.bus.publish,
            router: ROUTER,
            bus: BUS,
            decode_peers,
            link,
            truth: truth.clone(),
        };
        assert_eq!(
            sim.add(Node::Worker(Box::new(Worker::new(setup)))),
            FIRST_WORKER + w
        );
    }
    // Faults first: at equal times a worker goes down before that instant's arrivals are routed.
    for fault in &s.faults {
        let Fault::Restart {
            worker,
            at_ms,
            down_ms,
        } = fault;
        let (down, up) = (ms_to_ns(*at_ms), ms_to_ns(at_ms + down_ms));
        // The worker itself; the router for a routable worker, the prefill workers (which hand
        // off to it) for a decode worker.
        let mut targets = vec![FIRST_WORKER + worker];
        if *worker < routable {
            targets.push(ROUTER);
        } else {
            targets.extend((0..routable).map(|p| FIRST_WORKER + p));
        }
        for to in targets {
            sim.schedule(
                down,
                FIRST_WORKER + worker,
                to,
                Msg::WorkerDown { worker: *worker },
            );
            sim.schedule(
                up,
                FIRST_WORKER + worker,
                to,
                Msg::WorkerUp { worker: *worker },
            );
        }
    }
    sim.schedule_stream(CLIENT, ROUTER, first);
}
