//! The router's own bookkeeping of what it routed: requests routed to each worker, those still in
//! flight (and their prompt blocks), and which workers are up.
//!
//! A router only counts what it routed itself: an ack or a hand-back for a request it does not
//! know (routed by another router) changes nothing, so several routers, or a second tier, never
//! drive a count below zero.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::hashers::IdBuilder;
use crate::ids::{RequestId, WorkerId};

use super::lab_rule::LoadView;
use super::select::{least_loaded, LoadTree};
use crate::protocol::signals::WorkerSignals;

/// What "load" means in the lab rule's second step (`router.load`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LoadKind {
    /// Requests routed so far (the lab's).
    #[default]
    Routed,
    /// Requests routed and not yet acknowledged.
    InFlight,
}

/// A router's view of its workers' load, from its own decisions and acks.
#[derive(Clone, Debug)]
pub struct LoadBook {
    kind: LoadKind,
    routed: Vec<u64>,
    in_flight: Vec<u64>,
    in_flight_blocks: Vec<u64>,
    up: Vec<bool>,
    up_count: usize,
    /// Whether each worker is in the cluster (a worker slot of a scaling pool may be empty:
    /// it then counts in no load range).
    present: Vec<bool>,
    /// Requests routed here and not yet finished: worker and prompt blocks (looked up by id
    /// only; the table's order never reaches a result).
    open: HashMap<RequestId, (WorkerId, u64), IdBuilder>,
    /// The workers' load signals as of the last refresh.
    signals: Vec<WorkerSignals>,
    /// Requests routed and requests in flight per worker, for the least-loaded of all workers
    /// without a scan; and requests in flight again, for the most loaded.
    least_routed: LoadTree,
    least_in_flight: LoadTree,
    most_in_flight: LoadTree,
    /// Whether the trees are kept (false for a policy that never asks them:
    /// [`LoadBook::drop_trees`]).
    trees: bool,
}

impl LoadBook {
    /// A book over `n_workers` workers, all up, comparing loads of `kind`.
    pub fn new(n_workers: usize, kind: LoadKind) -> Self {
        LoadBook {
            kind,
            routed: vec![0; n_workers],
            in_flight: vec![0; n_workers],
            in_flight_blocks: vec![0; n_workers],
            up: vec![true; n_workers],
            up_count: n_workers,
            present: vec![true; n_workers],
            open: HashMap::default(),
            signals: vec![WorkerSignals::default(); n_workers],
            least_routed: LoadTree::new(n_workers.max(1)),
            least_in_flight: LoadTree::new(n_workers.max(1)),
            most_in_flight: LoadTree::greatest(n_workers.max(1)),
            trees: true,
        }
    }

    /// Stops keeping the trees of loads, for a router whose policy never asks for the least or
    /// most loaded worker of all
    /// ([`RoutingPolicy::reads_load_trees`](crate::router::policy::RoutingPolicy::reads_load_trees)):
    /// each routed and finished request then costs no walk up three trees (9 levels each at
    /// 512 workers). Asking for them afterwards panics.
    pub fn drop_trees(&mut self) {
        self.trees = false;
    }

    /// The trees, checked to be kept.
    fn kept_trees(&self) -> (&LoadTree, &LoadTree, &LoadTree) {
        assert!(
            self.trees,
            "the load trees are not kept for this router's policy"
        );
        (
            &self.least_routed,
            &self.least_in_flight,
            &self.most_in_flight,
        )
    }

    /// The number of workers.
    pub fn workers(&self) -> usize {
        self.up.len()
    }

    /// Records a request sent to `worker` with `blocks` prompt blocks.
    pub fn routed_to(&mut self, request: RequestId, worker: WorkerId, blocks: usize) {
        self.routed[worker.index()] += 1;
        self.open_on(request, worker, blocks);
    }

    /// Records a request another router replica sent to `worker` (replica sync): it counts in
    /// flight until it is freed, not as routed here.
    pub fn peer_routed(&mut self, request: RequestId, worker: WorkerId, blocks: usize) {
        self.open_on(request, worker, blocks);
    }

    fn open_on(&mut self, request: RequestId, worker: WorkerId, blocks: usize) {
        let w = worker.index();
        self.in_flight[w] += 1;
        self.in_flight_blocks[w] += blocks as u64;
        if let Some((earlier, b)) = self.open.insert(request, (worker, blocks as u64)) {
            // Routed again without a hand-back (cannot happen with one router): the earlier
            // placement no longer counts.
            self.in_flight[earlier.index()] -= 1;
            self.in_flight_blocks[earlier.index()] -= b;
            self.track(earlier.index());
        }
        self.track(w);
    }

    /// Brings the load trees up to date with `worker`'s counts (a worker not in the cluster
    /// is never the least loaded nor the most).
    fn track(&mut self, worker: usize) {
        if !self.trees {
            return;
        }
        if self.present[worker] {
            self.least_routed.set(worker, self.routed[worker]);
            self.least_in_flight.set(worker, self.in_flight[worker]);
            self.most_in_flight.set(worker, self.in_flight[worker]);
        } else {
            self.least_routed.set(worker, u64::MAX);
            self.least_in_flight.set(worker, u64::MAX);
            self.most_in_flight.set(worker, 0);
        }
    }

    /// Adds `worker` to the cluster, up (a worker joined), or takes it out, down (it left).
    pub fn set_present(&mut self, worker: WorkerId, present: bool) {
        self.present[worker.index()] = present;
        self.set_up(worker, present);
        self.track(worker.index());
    }

    /// The worker with the fewest requests in flight (lowest number on ties) among those up.
    /// `None` when none is up. O(log n) when all are up, else a scan.
    pub fn least_in_flight(&self) -> Option<usize> {
        if self.all_up() {
            Some(self.kept_trees().1.winner())
        } else {
            least_loaded(self.up_workers(), |w| self.in_flight[w])
        }
    }

    /// The fewest and the most requests in flight on any worker in the cluster, up or down (0
    /// and 0 without workers). O(1).
    pub fn in_flight_range(&self) -> (u64, u64) {
        if self.in_flight.is_empty() || !self.present.iter().any(|&p| p) {
            return (0, 0);
        }
        let (_, least, most) = self.kept_trees();
        (
            self.in_flight[least.winner()],
            self.in_flight[most.winner()],
        )
    }

    /// The number of workers up.
    pub fn up_count(&self) -> usize {
        self.up_count
    }

    /// The `k`-th worker that is up, in increasing order (O(1) when all are up).
    ///
    /// # Panics
    /// Panics if fewer than `k + 1` workers are up.
    pub fn nth_up(&self, k: usize) -> usize {
        if self.all_up() {
            assert!(k < self.up.len(), "worker {k} of {}", self.up.len());
            k
        } else {
            self.up_workers().nth(k).expect("k below the number up")
        }
    }

    /// A request completed or came back: the worker this router had sent it to, or `None` if
    /// this router did not route it.
    pub fn finished(&mut self, request: RequestId) -> Option<WorkerId> {
        let (worker, blocks) = self.open.remove(&request)?;
        self.in_flight[worker.index()] -= 1;
        self.in_flight_blocks[worker.index()] -= blocks;
        self.track(worker.index());
        Some(worker)
    }

    /// The worker this router sent `request` to, while it is open.
    pub fn worker_of(&self, request: RequestId) -> Option<WorkerId> {
        self.open.get(&request).map(|(w, _)| *w)
    }

    /// Marks a worker down (it gets no requests) or up.
    pub fn set_up(&mut self, worker: WorkerId, up: bool) {
        let w = worker.index();
        if self.up[w] != up {
            self.up[w] = up;
            if up {
                self.up_count += 1;
            } else {
                self.up_count -= 1;
            }
        }
    }

    /// Whether any worker is up.
    pub fn any_up(&self) -> bool {
        self.up_count > 0
    }

    /// Whether `worker` is up.
    pub fn up(&self, worker: usize) -> bool {
        self.up[worker]
    }

    /// The workers that are up, in increasing order.
    pub fn up_workers(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        (0..self.up.len()).filter(|&w| self.up[w])
    }

    /// Requests routed to each worker so far (re-routes included).
    pub fn routed(&self) -> &[u64] {
        &self.routed
    }

    /// Requests routed to `worker` and not finished.
    pub fn in_flight(&self, worker: usize) -> u64 {
        self.in_flight[worker]
    }

    /// `worker`'s load signals as of the router's last refresh.
    pub fn signals(&self, worker: usize) -> &WorkerSignals {
        &self.signals[worker]
    }

    /// Replaces the snapshot of the workers' signals.
    pub fn refresh_signals(&mut self, live: &[WorkerSignals]) {
        self.signals.copy_from_slice(live);
    }

    /// Prompt blocks of the requests in flight on `worker`.
    pub fn in_flight_blocks(&self, worker: usize) -> u64 {
        self.in_flight_blocks[worker]
    }
}

impl LoadView for LoadBook {
    fn load(&self, worker: usize) -> u64 {
        match self.kind {
            LoadKind::Routed => self.routed[worker],
            LoadKind::InFlight => self.in_flight[worker],
        }
    }
    fn is_up(&self, worker: usize) -> bool {
        self.up[worker]
    }
    fn all_up(&self) -> bool {
        self.up_count == self.up.len()
    }
    fn least_of_all(&self) -> Option<usize> {
        let (routed, in_flight, _) = self.kept_trees();
        Some(match self.kind {
            LoadKind::Routed => routed.winner(),
            LoadKind::InFlight => in_flight.winner(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_this_router_routed_are_counted_down() {
        let mut book = LoadBook::new(2, LoadKind::InFlight);
        book.routed_to(RequestId(7), WorkerId(1), 4);
        assert_eq!((book.in_flight(1), book.in_flight_blocks(1)), (1, 4));
        assert_eq!(book.finished(RequestId(8)), None, "not routed here");
        assert_eq!(book.finished(RequestId(7)), Some(WorkerId(1)));
        assert_eq!(book.finished(RequestId(7)), None, "finished once");
        assert_eq!((book.in_flight(1), book.in_flight_blocks(1)), (0, 0));
        assert_eq!(book.routed(), &[0, 1]);
    }

    #[test]
    fn a_book_without_trees_keeps_the_counts_and_refuses_the_trees_questions() {
        let mut kept = LoadBook::new(3, LoadKind::InFlight);
        let mut book = LoadBook::new(3, LoadKind::InFlight);
        book.drop_trees();
        for b in [&mut kept, &mut book] {
            b.routed_to(RequestId(1), WorkerId(2), 5);
            b.routed_to(RequestId(2), WorkerId(0), 3);
            b.set_present(WorkerId(1), false);
            b.set_present(WorkerId(1), true);
            b.finished(RequestId(2));
        }
        assert_eq!(book.routed(), kept.routed());
        for w in 0..3 {
            assert_eq!(
                (book.in_flight(w), book.in_flight_blocks(w), book.up(w)),
                (kept.in_flight(w), kept.in_flight_blocks(w), kept.up(w))
            );
        }
        let asked = std::panic::catch_unwind(|| book.least_in_flight());
        assert!(asked.is_err(), "the trees are not kept");
        assert_eq!(kept.least_in_flight(), Some(0));
    }

    #[test]
    fn least_of_all_follows_the_kind_of_load() {
        let mut book = LoadBook::new(3, LoadKind::InFlight);
        book.routed_to(RequestId(1), WorkerId(0), 1);
        book.routed_to(RequestId(2), WorkerId(1), 1);
        assert_eq!(book.least_of_all(), Some(2));
        book.routed_to(RequestId(3), WorkerId(2), 1);
        book.finished(RequestId(1));
        assert_eq!(book.least_of_all(), Some(0), "in flight goes down");
        let mut routed = LoadBook::new(2, LoadKind::Routed);
        routed.routed_to(RequestId(1), WorkerId(0), 1);
        routed.finished(RequestId(1));
        assert_eq!(
            routed.least_of_all(),
            Some(1),
            "routed counts never go down"
        );
    }

    #[test]
    fn the_in_flight_range_spans_every_worker_up_or_down() {
        let mut book = LoadBook::new(3, LoadKind::Routed);
        assert_eq!(book.in_flight_range(), (0, 0));
        for r in 0..3 {
            book.routed_to(RequestId(r), WorkerId(1), 1);
        }
        book.routed_to(RequestId(3), WorkerId(0), 1);
        assert_eq!(book.in_flight_range(), (0, 3));
        book.set_up(WorkerId(1), false);
        book.set_up(WorkerId(2), false);
        assert_eq!(book.in_flight_range(), (0, 3), "down workers count");
        book.routed_to(RequestId(4), WorkerId(2), 1);
        book.finished(RequestId(0));
        book.finished(RequestId(1));
        assert_eq!(book.in_flight_range(), (1, 1));
        assert_eq!(LoadBook::new(0, LoadKind::Routed).in_flight_range(), (0, 0));
    }

    #[test]
    fn up_and_down() {
        let mut book = LoadBook::new(3, LoadKind::Routed);
        book.set_up(WorkerId(1), false);
        book.set_up(WorkerId(1), false);
        assert!(!book.all_up() && book.any_up());
        assert_eq!(book.up_workers().collect::<Vec<_>>(), vec![0, 2]);
        book.set_up(WorkerId(0), false);
        book.set_up(WorkerId(2), false);
        assert!(!book.any_up());
        book.set_up(WorkerId(2), true);
        assert_eq!(book.up_workers().collect::<Vec<_>>(), vec![2]);
    }
}
