//! Wiring: a validated [`Scenario`] and its workload become a ready-to-run simulation, laid out
//! as its [`Topology`] says.

use crate::engine::{ms_to_ns, Simulation};
use crate::router::loads::LoadBook;
use crate::router::policy::PolicySetup;
use crate::router::registry;
use crate::scenario::{Fault, Scenario};
use crate::workload::RequestSpec;

use super::bus::BusActor;
use super::client::{Client, Pacing};
use super::messages::Msg;
use super::router_actor::RouterActor;
use super::timing::TimingModel;
use super::topology::{Role, Topology};
use super::truth::Truth;
use super::worker::{Link, Worker, WorkerSetup};
use super::Node;

/// Builds the simulation: actors, the workload's first deliveries and injected faults, and
/// returns the topology it laid out. `sim` must be new (its generator may already have drawn the
/// workload).
pub fn populate(
    s: &Scenario,
    specs: Vec<RequestSpec>,
    pacing: Pacing,
    sim: &mut Simulation<Node>,
) -> Topology {
    let topo = Topology::of(s);
    let routable = topo.routable().len();
    let truth = Truth::shared(routable);
    let mut client = Client::new(specs, pacing, topo.router(), routable);
    let first = client.initial();
    let entry = registry::entry(&s.router.policy).expect("a validated scenario names a policy");
    let policy = (entry.build)(&PolicySetup {
        name: entry.name,
        workers: routable,
        settings: s.router.settings.get(entry.name),
    })
    .expect("a validated scenario's policy settings build");
    let router = RouterActor::new(
        policy,
        entry.learns_from_events,
        LoadBook::new(routable, s.router.load),
        topo.routable().iter().map(|w| w.addr).collect(),
        topo.client(),
        truth.clone(),
    );
    let added = [
        sim.add(Node::Client(Box::new(client))),
        sim.add(Node::Router(Box::new(router))),
        sim.add(Node::Bus(BusActor::new(&s.bus, topo.router()))),
    ];
    assert_eq!(added, [topo.client(), topo.router(), topo.bus()]);

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
    for slot in topo.workers() {
        let setup = WorkerSetup {
            index: slot.id,
            role: slot.role,
            capacity: s.cluster.kv_capacity_blocks.count(),
            // Colocated prefill and decode share one GPU: one phase of one request at a time.
            max_batch: match slot.role {
                Role::Colocated => Some(1),
                _ => s.timing.as_ref().and_then(|t| t.max_batch.count()),
            },
            block_size: s.block_size(),
            timing: timing.clone(),
            publish: s.bus.publish,
            router: topo.router(),
            bus: topo.bus(),
            decode_peers: topo.handoff_peers(slot.id),
            link,
            truth: truth.clone(),
        };
        assert_eq!(
            sim.add(Node::Worker(Box::new(Worker::new(setup)))),
            slot.addr
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
        let slot = topo.worker(crate::ids::WorkerId::at(*worker));
        let mut targets = vec![slot.addr];
        targets.extend(topo.fault_listeners(slot.id));
        for to in targets {
            sim.schedule(down, slot.addr, to, Msg::WorkerDown { worker: slot.id });
            sim.schedule(up, slot.addr, to, Msg::WorkerUp { worker: slot.id });
        }
    }
    sim.schedule_stream(topo.client(), topo.router(), first);
    topo
}
