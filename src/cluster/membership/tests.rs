//! The ledger's hand-computed cases.

use super::*;

fn ledger(present: usize, slots: usize) -> Membership {
    let slots = (0..slots)
        .map(|w| (Pool::Workers, 2, format!("worker{w}"), w < present))
        .collect();
    Membership::new(slots, 60_000_000_000)
}

#[test]
fn gpu_seconds_count_startup_and_drains_by_hand() {
    // Two workers of 2 GPUs from 0; a third starts at 100 s (serves at 160 s); at 200 s the
    // pool goes back to 2, draining worker2 (the highest slot), whose drain ends at 230 s.
    let mut m = ledger(2, 4);
    let orders = m.scale(Pool::Workers, 3, true, 100_000_000_000, "schedule");
    assert!(orders.retire.is_empty());
    assert_eq!(m.next_ready(), Some(160_000_000_000));
    assert_eq!(m.ready(160_000_000_000), vec![WorkerId(2)]);
    let orders = m.scale(Pool::Workers, 2, true, 200_000_000_000, "schedule");
    assert_eq!(orders.retire, vec![(WorkerId(2), true)]);
    m.drained(WorkerId(2), 230_000_000_000, 240_000_000_000);
    // 2 x 2 x 300 s + 2 x (230 - 100) s = 1,200 + 260.
    assert_eq!(m.gpu_seconds(300_000_000_000), 1460.0);
    assert_eq!(m.sizes(Pool::Workers), (2, 0, 0));
    let kinds: Vec<_> = m
        .phases()
        .iter()
        .filter(|p| p.worker == WorkerId(2))
        .map(|p| {
            (
                p.kind,
                p.start / 1_000_000_000,
                p.end.map(|e| e / 1_000_000_000),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("starting", 100, Some(160)),
            ("serving", 160, Some(200)),
            ("draining", 200, Some(230))
        ]
    );
}

#[test]
fn shrinking_retires_starting_workers_first_and_full_slots_defer_starts() {
    let mut m = ledger(1, 2);
    m.scale(Pool::Workers, 2, true, 10, "api");
    let orders = m.scale(Pool::Workers, 1, true, 20, "api");
    assert!(orders.retire.is_empty(), "a starting worker just stops");
    assert_eq!(m.state(WorkerId(1)), SlotState::Absent);
    assert_eq!(
        m.gpu_seconds(20),
        round_py((2 * 20 + 2 * 10) as f64 / 1e9, 3)
    );
    // Both slots full (one draining): a start waits for the slot.
    m.scale(Pool::Workers, 2, true, 30, "api");
    m.ready(30 + 60_000_000_000);
    m.scale(Pool::Workers, 1, true, 70_000_000_000, "api");
    let e = m.scale(Pool::Workers, 2, true, 71_000_000_000, "api");
    assert!(e.retire.is_empty());
    assert_eq!(m.events().last().unwrap().deferred, 1);
    assert_eq!(m.target(Pool::Workers), 2);
    m.drained(WorkerId(1), 72_000_000_000, 73_000_000_000);
    assert!(matches!(
        m.state(WorkerId(1)),
        SlotState::Starting {
            since: 73_000_000_000,
            ..
        }
    ));
}

#[test]
fn a_worker_that_leaves_after_the_end_is_paid_up_to_the_end() {
    // Two workers of 2 GPUs from 0; the run's last completion is at 100 s and a stepped run
    // scales to 1 at 150 s (worker1 leaves, nothing to drain). Paid up to the end, 100 s:
    // 2 x 2 x 100 = 400 GPU-s, as if it had not scaled (it counted 2 x 150 + 2 x 100 = 500).
    let mut m = ledger(2, 2);
    let orders = m.scale(Pool::Workers, 1, false, 150_000_000_000, "api");
    assert_eq!(orders.retire, vec![(WorkerId(1), false)]);
    assert_eq!(m.state(WorkerId(1)), SlotState::Absent);
    assert_eq!(m.gpu_seconds(100_000_000_000), 400.0);
    // One that leaves before the end is paid up to its leaving: at 300 s, 2 x 300 + 2 x 150.
    assert_eq!(m.gpu_seconds(300_000_000_000), 900.0);
}
