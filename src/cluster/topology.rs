//! The topology: every actor's address and name, each worker's number and role, and the KV links
//! between prefill and decode workers, computed once from a scenario.
//!
//! It is the one place that knows how actors are laid out: the wiring ([`super::build`]), fault
//! injection, the trace writer and the reports ask it, and nothing else computes an address or
//! compares a name.
//!
//! Layout: the client, the router replicas (`router` when there is one, else `router0`,
//! `router1`, ...), the bus, then the workers in worker-number order (prefill workers first when
//! disaggregated, then decode workers). Routable workers are numbered from 0.

use crate::engine::ActorId;
use crate::ids::WorkerId;
use crate::scenario::validate::{routable_workers, worker_count};
use crate::scenario::{Pool, Scenario};

/// What a worker does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Aggregated serving.
    Unified,
    /// Disaggregated prefill.
    Prefill,
    /// Disaggregated decode.
    Decode,
    /// Disaggregated prefill and decode sharing one GPU.
    Colocated,
}

/// What kind of actor a name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    /// The client (`client`).
    Client,
    /// A router replica (`router`, or `router0`, `router1`, ...).
    Router,
    /// The KV event bus (`bus`).
    Bus,
    /// A worker (`worker0`, `prefill0`, `decode1`, `gpu0`, ...).
    Worker,
}

impl ActorKind {
    /// The kind of the actor a topology names `name` (as traces and reports print it), `None` for
    /// a name no topology gives.
    pub fn of_name(name: &str) -> Option<ActorKind> {
        let numbered = |prefix: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        match name {
            "client" => Some(ActorKind::Client),
            "router" => Some(ActorKind::Router),
            "bus" => Some(ActorKind::Bus),
            _ if numbered("router") => Some(ActorKind::Router),
            _ if ["worker", "prefill", "decode", "gpu"]
                .into_iter()
                .any(numbered) =>
            {
                Some(ActorKind::Worker)
            }
            _ => None,
        }
    }
}

/// One worker's place in the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerSlot {
    /// Its number.
    pub id: WorkerId,
    /// Its actor address.
    pub addr: ActorId,
    /// Its role.
    pub role: Role,
    /// Its display name (`worker0`, `prefill0`, `decode1`, `gpu0`).
    pub name: String,
    /// Whether the router sends it requests.
    pub routable: bool,
    /// Whether it serves from the start (a pool that scales has slots for workers that join
    /// later: [`Scenario::pool_slots`]).
    pub present: bool,
}

impl WorkerSlot {
    /// The pool it belongs to.
    pub fn pool(&self) -> Pool {
        match self.role {
            Role::Unified => Pool::Workers,
            Role::Prefill | Role::Colocated => Pool::Prefill,
            Role::Decode => Pool::Decode,
        }
    }
}

/// A KV transfer link: a prefill worker hands prefilled requests to a decode worker over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLink {
    /// The sending (prefill or colocated) worker.
    pub from: WorkerId,
    /// The receiving decode worker (itself for a colocated GPU).
    pub to: WorkerId,
}

/// Every actor of a run.
#[derive(Clone, Debug)]
pub struct Topology {
    client: ActorId,
    routers: Vec<ActorId>,
    bus: ActorId,
    workers: Vec<WorkerSlot>,
    links: Vec<KvLink>,
    names: Vec<String>,
}

impl Topology {
    /// The topology a validated scenario asks for.
    pub fn of(s: &Scenario) -> Self {
        let routable = routable_workers(s);
        let total = worker_count(s);
        let replicas = s.router.replicas.max(1);
        let client = ActorId(0);
        let routers: Vec<ActorId> = (1..=replicas as u32).map(ActorId).collect();
        let bus = ActorId(replicas as u32 + 1);
        let mut names = vec!["client".to_string()];
        if replicas == 1 {
            names.push("router".into());
        } else {
            names.extend((0..replicas).map(|r| format!("router{r}")));
        }
        names.push("bus".into());
        let d = &s.disagg;
        let workers: Vec<WorkerSlot> = (0..total)
            .map(|w| {
                let (role, name, present) = match (d.enabled, d.colocated, w < routable) {
                    (false, _, _) => (Role::Unified, format!("worker{w}"), w < s.cluster.workers),
                    (true, true, _) => (Role::Colocated, format!("gpu{w}"), true),
                    (true, false, true) => {
                        (Role::Prefill, format!("prefill{w}"), w < d.prefill_workers)
                    }
                    (true, false, false) => (
                        Role::Decode,
                        format!("decode{}", w - routable),
                        w - routable < d.decode_workers,
                    ),
                };
                let addr = ActorId(u32::try_from(names.len()).expect("fewer than 2^32 actors"));
                names.push(name.clone());
                WorkerSlot {
                    id: WorkerId::at(w),
                    addr,
                    role,
                    name,
                    routable: w < routable,
                    present,
                }
            })
            .collect();
        let mut links = Vec::new();
        for p in workers.iter().filter(|w| w.routable) {
            match p.role {
                Role::Prefill => {
                    links.extend(workers.iter().filter(|d| d.role == Role::Decode).map(|d| {
                        KvLink {
                            from: p.id,
                            to: d.id,
                        }
                    }))
                }
                Role::Colocated => links.push(KvLink {
                    from: p.id,
                    to: p.id,
                }),
                Role::Unified | Role::Decode => {}
            }
        }
        Topology {
            client,
            routers,
            bus,
            workers,
            links,
            names,
        }
    }

    /// The client's address.
    pub fn client(&self) -> ActorId {
        self.client
    }

    /// The router replicas' addresses, by replica number.
    pub fn routers(&self) -> &[ActorId] {
        &self.routers
    }

    /// The bus's address.
    pub fn bus(&self) -> ActorId {
        self.bus
    }

    /// Every worker, by number.
    pub fn workers(&self) -> &[WorkerSlot] {
        &self.workers
    }

    /// The worker numbered `w`.
    pub fn worker(&self, w: WorkerId) -> &WorkerSlot {
        &self.workers[w.index()]
    }

    /// The workers the router sends requests to, by number (a prefix of [`Topology::workers`]).
    pub fn routable(&self) -> &[WorkerSlot] {
        let n = self.workers.iter().take_while(|w| w.routable).count();
        &self.workers[..n]
    }

    /// The KV links, by sending worker then receiving worker.
    pub fn links(&self) -> &[KvLink] {
        &self.links
    }

    /// The workers `from` hands prefilled requests to, as (number, address), in number order.
    pub fn handoff_peers(&self, from: WorkerId) -> Vec<(WorkerId, ActorId)> {
        self.links
            .iter()
            .filter(|l| l.from == from)
            .map(|l| (l.to, self.worker(l.to).addr))
            .collect()
    }

    /// Who must hear that `w` went down or came back, besides itself: every router replica for
    /// a routable worker, the workers that hand off to it for a decode worker.
    pub fn fault_listeners(&self, w: WorkerId) -> Vec<ActorId> {
        if self.worker(w).routable {
            self.routers.clone()
        } else {
            self.links
                .iter()
                .filter(|l| l.to == w)
                .map(|l| self.worker(l.from).addr)
                .collect()
        }
    }

    /// The actor's display name.
    pub fn name(&self, a: ActorId) -> &str {
        &self.names[a.index()]
    }

    /// Every actor's display name, by address.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The kind of actor at `a`.
    pub fn kind(&self, a: ActorId) -> ActorKind {
        if a == self.client {
            ActorKind::Client
        } else if a == self.bus {
            ActorKind::Bus
        } else if self.is_router(a) {
            ActorKind::Router
        } else {
            ActorKind::Worker
        }
    }

    /// Whether `a` is a router replica.
    pub fn is_router(&self, a: ActorId) -> bool {
        self.routers.contains(&a)
    }

    /// The number of actors.
    pub fn actors(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_a_topology_gives_maps_back_to_its_kind() {
        let mut layouts = Vec::new();
        for replicas in [1, 3, 12] {
            let mut s = Scenario::default();
            s.router.replicas = replicas;
            s.cluster.workers = 11;
            layouts.push(s.clone());
            s.disagg.enabled = true;
            s.disagg.prefill_workers = 2;
            s.disagg.decode_workers = 10;
            layouts.push(s.clone());
            s.disagg.colocated = true;
            layouts.push(s);
        }
        for s in &layouts {
            let t = Topology::of(s);
            for a in 0..t.actors() {
                let a = ActorId(a as u32);
                assert_eq!(
                    ActorKind::of_name(t.name(a)),
                    Some(t.kind(a)),
                    "{}",
                    t.name(a)
                );
            }
        }
        for stranger in ["routerx", "router-1", "worker", "gpu", "Bus", "client0", ""] {
            assert_eq!(ActorKind::of_name(stranger), None, "{stranger}");
        }
    }

    #[test]
    fn disaggregated_layout_links_every_prefill_worker_to_every_decode_worker() {
        let mut s = Scenario::default();
        s.disagg.enabled = true;
        s.disagg.prefill_workers = 2;
        s.disagg.decode_workers = 2;
        let t = Topology::of(&s);
        assert_eq!(
            t.names(),
            ["client", "router", "bus", "prefill0", "prefill1", "decode0", "decode1"]
        );
        assert_eq!(t.routable().len(), 2);
        assert_eq!(
            t.handoff_peers(WorkerId(1)),
            vec![(WorkerId(2), ActorId(5)), (WorkerId(3), ActorId(6))]
        );
        assert_eq!(t.fault_listeners(WorkerId(0)), t.routers());
        assert_eq!(t.fault_listeners(WorkerId(3)), vec![ActorId(3), ActorId(4)]);
        assert!(t.is_router(ActorId(1)) && !t.is_router(ActorId(3)));
    }

    #[test]
    fn a_colocated_gpu_links_to_itself() {
        let mut s = Scenario::default();
        s.disagg.enabled = true;
        s.disagg.colocated = true;
        let t = Topology::of(&s);
        assert_eq!(t.names(), ["client", "router", "bus", "gpu0"]);
        assert_eq!(
            t.handoff_peers(WorkerId(0)),
            vec![(WorkerId(0), ActorId(3))]
        );
        assert_eq!(t.worker(WorkerId(0)).role, Role::Colocated);
    }

    #[test]
    fn replicas_come_after_the_client_and_all_hear_of_faults() {
        let mut s = Scenario::default();
        s.router.replicas = 3;
        let t = Topology::of(&s);
        assert_eq!(
            t.names(),
            ["client", "router0", "router1", "router2", "bus", "worker0", "worker1"]
        );
        assert_eq!(t.routers(), [ActorId(1), ActorId(2), ActorId(3)]);
        assert_eq!(t.bus(), ActorId(4));
        assert_eq!(t.fault_listeners(WorkerId(1)), t.routers());
        assert!(t.is_router(ActorId(3)) && !t.is_router(ActorId(4)));
    }
}
