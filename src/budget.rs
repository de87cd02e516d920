//! The memory a run may use, and the estimate that refuses a run before it starts when it
//! would need more.
//!
//! A run's memory follows the cluster, not the history of the run: KV blocks held by the
//! workers, the routers' indexes of them, the requests in flight, and what the report needs
//! (32 bytes per request). What can grow with the history is estimated before the run, from an
//! upper bound on the distinct prompt blocks the workload can create:
//! - KV caches without a capacity (`cluster.kv_capacity_blocks = "unbounded"`) keep every block
//!   they computed; with a capacity they hold at most that many;
//! - routers fed by KV events keep an index of what the workers hold (one per replica), of
//!   the blocks other requests could name when nothing reads requests' own tails (the
//!   workload says how many at most:
//!   [`Recipe::listed_blocks`](crate::workload::source::Recipe::listed_blocks));
//! - some policies remember their own decisions without forgetting (`kv`,
//!   `vllm-prefix-aware`, `sglang` up to its cap): [`RoutingPolicy::history_bytes`];
//! - the built workload itself (a trace's table, the lab's order);
//! - when misses are attributed, each pool's memory of lost blocks, which spans its capacity
//!   (sized by the capacity rather than by the blocks the workload makes), and the ground
//!   truth's table of who holds each block (at most the blocks held: own tails leave it only
//!   until a preemption or a prefill's end lists them);
//! - when a policy's index is audited, the audit's entry per (worker, block) held or believed,
//!   counted like the caches' blocks;
//! - what every worker and router replica allocates when the run is built, whatever the
//!   workload: a worker's actor, scheduler and empty pool (its name table starts at 16 cells
//!   and grows with the names it holds, counted per block), each replica's load book, index and
//!   policy state per worker.
//!
//! The estimate is made before anything is allocated, so a run that cannot fit is refused
//! with it instead of failing (or aborting) part way.
//!
//! Requests in flight are counted while the run goes: a cluster that falls behind an open-loop
//! workload holds every request that has arrived, and the run stops with an error once they
//! pass the budget. The per-block costs are measured (docs/RELIABILITY.md has the command) and
//! rounded up; the memory of lost blocks is its allocation's size.
//!
//! [`RoutingPolicy::history_bytes`]: crate::router::policy::RoutingPolicy::history_bytes

use std::sync::atomic::{AtomicU64, Ordering};

/// The default memory budget of one run: 2 GiB.
pub const DEFAULT_BUDGET_BYTES: u64 = 2 << 30;

/// Bytes a KV pool holds per cached block (its slot, its cells in the name table and its entry in
/// the release queue).
pub const POOL_BYTES_PER_BLOCK: u64 = 80;

/// Bytes an index of blocks takes per (block, worker) it knows (an events-fed router's, or the
/// lab rule's own).
pub const INDEX_BYTES_PER_BLOCK: u64 = 96;

/// Bytes a policy's tree of routed prompts takes per block (SGLang's, vLLM's router's).
pub const TREE_BYTES_PER_BLOCK: u64 = 112;

/// Bytes a KV pool's memory of lost blocks takes per block of capacity, when misses are
/// attributed (a two-generation Bloom filter of 32 bits per block each, rounded up to a power
/// of two: at most 16).
pub const LOSS_MEMORY_BYTES_PER_BLOCK: u64 = 16;

/// Bytes the ground truth's table of holders (`HeldBy`) and the index audit take per entry (a
/// 16-byte pair and a control byte in std's table, at least 7/16 full after it grows: 39 at
/// most, rounded up).
pub const INSTRUMENT_BYTES_PER_ENTRY: u64 = 40;

/// Bytes a worker takes when the run is built, besides its pool's presized name table (its
/// actor, scheduler and empty pool, and the heaviest policy's per-worker state in one router:
/// measured 2.0 KiB with `llm-d` at 65,536 workers, rounded up).
pub const WORKER_BYTES: u64 = 2304;

/// Bytes each further router replica takes per worker (its load book, index and policy state:
/// measured 61, rounded up).
pub const REPLICA_BYTES_PER_WORKER: u64 = 128;

/// Bytes the report keeps per completed request (its TTFT, TPOT, end-to-end and queue times).
pub const SAMPLE_BYTES_PER_REQUEST: u64 = 32;

/// Bytes a request in flight holds besides its block names (its spec, its place in a queue,
/// its scheduler state, the routers' bookkeeping).
pub const IN_FLIGHT_BYTES: u64 = 512;

static BUDGET: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET_BYTES);

/// Sets the memory budget of every run in this process (the CLI reads it from
/// `DYNSIM_MEMORY_GIB`).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// The memory budget of one run, bytes.
pub fn budget() -> u64 {
    BUDGET.load(Ordering::Relaxed)
}

/// What the estimate needs to know of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    /// Requests in the workload.
    pub requests: u64,
    /// An upper bound on the distinct prompt blocks the workload can create.
    pub distinct_blocks: u64,
    /// Blocks all workers together can hold (`None`: unbounded).
    pub kv_capacity_blocks: Option<u64>,
    /// Whether the routers keep an index fed by KV events.
    pub events_index: bool,
    /// An upper bound on the distinct prompt blocks some request names before its own tail.
    pub listed_blocks: u64,
    /// Whether the routers leave requests' own tails out of their index (nothing reads them:
    /// no request routed twice), so it holds at most the listed blocks,
    /// each with a set of holders that may span every worker.
    pub own_tails_unread: bool,
    /// Whether misses are attributed (each pool remembers a capacity of lost blocks, and the
    /// ground truth keeps a table of holders).
    pub attribute_misses: bool,
    /// Whether the routers' index is audited (an entry per (worker, block) held or believed).
    pub audited: bool,
    /// Router replicas (each keeps its own index).
    pub replicas: u64,
    /// What the policies' memory of their own decisions may take, all replicas together.
    pub history_bytes: u64,
    /// What the built workload holds.
    pub workload_bytes: u64,
    /// Workers (every pool, routable or not).
    pub workers: u64,
    /// What each worker's pool presizes (its name table), bytes.
    pub presized_bytes_per_worker: u64,
}

/// An estimate, part by part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// (what, bytes), the parts that are not zero.
    pub parts: Vec<(&'static str, u64)>,
}

impl Estimate {
    /// The whole estimate, bytes.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|(_, b)| b).sum()
    }

    /// `about 2.6 GiB (KV caches 1.0 GiB, ...)`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .filter(|(_, b)| *b >= 1 << 20)
            .map(|(what, b)| format!("{what} {}", size(*b)))
            .collect();
        format!("about {} ({})", size(self.total()), parts.join(", "))
    }
}

/// The history-dependent memory of a run.
pub fn estimate(i: &Inputs) -> Estimate {
    let held = i
        .kv_capacity_blocks
        .map_or(i.distinct_blocks, |cap| cap.min(i.distinct_blocks));
    // Without own tails an index holds the blocks other requests name, blocks many workers
    // may hold at once: each is charged a whole set of holders past one word too.
    let index_per_replica = if i.own_tails_unread {
        // One word holds the set inline (the index's own layout); past it the set spills.
        let words = crate::worker_set::words_for(usize::try_from(i.workers).unwrap_or(usize::MAX));
        let set = if words > 1 { 8 * words as u64 } else { 0 };
        held.min(i.listed_blocks)
            .saturating_mul(INDEX_BYTES_PER_BLOCK + set)
    } else {
        held.saturating_mul(INDEX_BYTES_PER_BLOCK)
    };
    let parts = [
        ("KV caches", held.saturating_mul(POOL_BYTES_PER_BLOCK)),
        (
            "routers' indexes",
            if i.events_index {
                index_per_replica.saturating_mul(i.replicas)
            } else {
                0
            },
        ),
        (
            "ground truth",
            if i.attribute_misses {
                held.saturating_mul(INSTRUMENT_BYTES_PER_ENTRY)
            } else {
                0
            },
        ),
        (
            "index audit",
            if i.audited {
                held.saturating_mul(INSTRUMENT_BYTES_PER_ENTRY)
            } else {
                0
            },
        ),
        (
            "memory of lost blocks",
            match i.kv_capacity_blocks {
                Some(cap) if i.attribute_misses => cap.saturating_mul(LOSS_MEMORY_BYTES_PER_BLOCK),
                _ => 0,
            },
        ),
        ("routing history", i.history_bytes),
        (
            "workers",
            i.workers
                .saturating_mul(WORKER_BYTES + i.presized_bytes_per_worker),
        ),
        (
            "router replicas",
            i.workers
                .saturating_mul(i.replicas.saturating_sub(1))
                .saturating_mul(REPLICA_BYTES_PER_WORKER),
        ),
        (
            "report samples",
            i.requests.saturating_mul(SAMPLE_BYTES_PER_REQUEST),
        ),
        ("workload", i.workload_bytes),
    ];
    Estimate {
        parts: parts.into_iter().filter(|(_, b)| *b > 0).collect(),
    }
}

/// Bytes in MiB or GiB, one decimal.
pub fn size(bytes: u64) -> String {
    let mib = bytes as f64 / f64::from(1 << 20);
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_caches_hold_at_most_their_capacity() {
        let unbounded = Inputs {
            requests: 1_000_000,
            distinct_blocks: 16_000_000,
            kv_capacity_blocks: None,
            events_index: true,
            replicas: 1,
            ..Inputs::default()
        };
        let e = estimate(&unbounded);
        // 16M blocks x (80 + 96) bytes + 1M x 32 bytes.
        assert_eq!(e.total(), 16_000_000 * 176 + 32_000_000);
        assert!(e.total() > DEFAULT_BUDGET_BYTES);
        let bounded = Inputs {
            kv_capacity_blocks: Some(80_000),
            ..unbounded
        };
        assert_eq!(estimate(&bounded).total(), 80_000 * 176 + 32_000_000);
        assert_eq!(
            estimate(&bounded).describe(),
            "about 43.9 MiB (KV caches 6.1 MiB, routers' indexes 7.3 MiB, report samples 30.5 MiB)"
        );
    }

    #[test]
    fn attributing_misses_remembers_a_capacity_of_lost_blocks() {
        let plain = Inputs {
            distinct_blocks: 1000,
            kv_capacity_blocks: Some(50_000_000),
            ..Inputs::default()
        };
        let attributed = Inputs {
            attribute_misses: true,
            ..plain
        };
        // The caches hold what the workload makes; the memory of losses spans the capacity
        // (the truth's table, like the caches, what the workload makes).
        assert_eq!(estimate(&plain).total(), 1000 * POOL_BYTES_PER_BLOCK);
        assert_eq!(
            estimate(&attributed).total() - estimate(&plain).total(),
            50_000_000 * LOSS_MEMORY_BYTES_PER_BLOCK + 1000 * INSTRUMENT_BYTES_PER_ENTRY
        );
    }

    #[test]
    fn every_worker_counts_what_it_allocates_when_built() {
        // 16,384 workers with a 256 KiB presized table each (what Dynamo's mocker defaults
        // presized before pools grew their tables from empty).
        let mocker = Inputs {
            workers: 16_384,
            presized_bytes_per_worker: 256 << 10,
            replicas: 1,
            ..Inputs::default()
        };
        let e = estimate(&mocker);
        assert_eq!(e.total(), 16_384 * (WORKER_BYTES + (256 << 10)));
        assert!(e.total() > DEFAULT_BUDGET_BYTES, "{}", e.describe());
        assert!(e.describe().contains("workers 4.0 GiB"), "{}", e.describe());
        let replicas = Inputs {
            replicas: 3,
            ..mocker
        };
        assert_eq!(
            estimate(&replicas).total() - e.total(),
            2 * 16_384 * REPLICA_BYTES_PER_WORKER
        );
    }

    #[test]
    fn each_replica_keeps_its_own_index() {
        let one = Inputs {
            distinct_blocks: 1000,
            events_index: true,
            replicas: 1,
            ..Inputs::default()
        };
        let three = Inputs { replicas: 3, ..one };
        assert_eq!(
            estimate(&three).total() - estimate(&one).total(),
            2 * 1000 * INDEX_BYTES_PER_BLOCK
        );
    }

    #[test]
    fn an_index_that_leaves_own_tails_unread_holds_at_most_the_listed_blocks() {
        // 1M distinct blocks, of which 512 are named by more than their own request: read,
        // each of 2 replicas indexes all 1M; unread, the 512. The caches hold all either way.
        let read = Inputs {
            distinct_blocks: 1_000_000,
            listed_blocks: 512,
            kv_capacity_blocks: Some(16_000_000),
            events_index: true,
            replicas: 2,
            ..Inputs::default()
        };
        let unread = Inputs {
            own_tails_unread: true,
            ..read
        };
        assert_eq!(
            estimate(&read).total(),
            1_000_000 * (POOL_BYTES_PER_BLOCK + 2 * INDEX_BYTES_PER_BLOCK)
        );
        assert_eq!(
            estimate(&unread).total(),
            1_000_000 * POOL_BYTES_PER_BLOCK + 2 * 512 * INDEX_BYTES_PER_BLOCK
        );
        // On 1,024 workers each listed block may be held by all: a set of 16 words beside it.
        let wide = Inputs {
            workers: 1024,
            ..unread
        };
        assert_eq!(
            estimate(&wide).total() - estimate(&unread).total(),
            1024 * (WORKER_BYTES + REPLICA_BYTES_PER_WORKER) + 2 * 512 * 16 * 8
        );
    }

    #[test]
    fn instruments_are_charged_an_entry_per_block_held() {
        // The same 1M blocks held: the audit has an entry for each (worker, block) held, the
        // truth's table at most one for each block held (own tails unlisted enter it when a
        // preemption or a prefill's end lists them, so no fewer are charged).
        let base = Inputs {
            distinct_blocks: 1_000_000,
            listed_blocks: 512,
            kv_capacity_blocks: Some(16_000_000),
            ..Inputs::default()
        };
        let extra = |i: Inputs| estimate(&i).total() - estimate(&base).total();
        let audited = Inputs {
            audited: true,
            ..base
        };
        assert_eq!(extra(audited), 1_000_000 * INSTRUMENT_BYTES_PER_ENTRY);
        let attributed = Inputs {
            attribute_misses: true,
            ..base
        };
        let memory = 16_000_000 * LOSS_MEMORY_BYTES_PER_BLOCK;
        assert_eq!(
            extra(attributed),
            memory + 1_000_000 * INSTRUMENT_BYTES_PER_ENTRY
        );
        let unread = Inputs {
            own_tails_unread: true,
            ..attributed
        };
        assert_eq!(extra(unread), extra(attributed));
    }
}
