//! The signal board: where routable workers post their current load signals and the router
//! reads them (exactly at each decision, or into a snapshot it refreshes every
//! `router.signal_refresh_ms`). One simulation runs on one thread, so it is a shared cell, like a
//! metrics endpoint every worker serves.

use std::cell::RefCell;
use std::rc::Rc;

use crate::protocol::signals::WorkerSignals;

/// Each routable worker's latest signals, by worker number.
pub type SignalBoard = Rc<RefCell<Vec<WorkerSignals>>>;

/// A board for `workers` idle workers.
pub fn board(workers: usize) -> SignalBoard {
    Rc::new(RefCell::new(vec![WorkerSignals::default(); workers]))
}
