//! Fidelity against Dynamo's own simulator: `scenarios/dynamo-mocker.toml` replays the Mooncake
//! conversation trace as Dynamo 1.6.1's mocker does (offline replay, default `MockerConfig` and
//! `KvRouterConfig`), and lands within the targets of its published rows (docs/FIDELITY.md has
//! the side-by-side table and the command that reproduces it).

use crate::common::{run_cached, scenario};

/// Dynamo's row: (prefix reuse, TTFT p50, TTFT p90, TPOT p50, requests/s).
type Row = (f64, f64, f64, f64, f64);

fn within(name: &str, got: f64, want: f64, rel: f64) {
    assert!(
        (got - want).abs() <= want * rel,
        "{name}: {got} vs Dynamo's {want} (±{:.0} %)",
        rel * 100.0
    );
}

fn check(policy: &str, speedup: f64, dynamo: Row) {
    let (mut s, base) = scenario("dynamo-mocker.toml");
    s.router.policy = policy.into();
    if let dynsim::scenario::Workload::Trace(t) = &mut s.workload {
        t.speedup = speedup;
    }
    let r = run_cached(&s, &base);
    let (reuse, p50, p90, tpot, rps) = dynamo;
    assert!(
        (r.prefix_reuse - reuse).abs() <= 0.03,
        "{policy} x{speedup}: reuse {} vs {reuse}",
        r.prefix_reuse
    );
    within("TTFT p50", r.ttft_ms.p50, p50, 0.25);
    within("TTFT p90", r.ttft_ms.p90, p90, 0.30);
    within("TPOT p50", r.tpot_ms.p50, tpot, 0.25);
    within("req/s", r.throughput_rps, rps, 0.02);
}

/// Dynamo's side of a row of docs/FIDELITY.md's first table (the conversation trace on 8
/// workers): the one source of the numbers, for the document and this test.
fn dynamo_row(speedup: &str, router: &str) -> Row {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/FIDELITY.md"),
    )
    .expect("docs/FIDELITY.md");
    let table = doc
        .split("**Conversation trace, 8 workers:**")
        .nth(1)
        .expect("the conversation table");
    let row = table
        .lines()
        .map(|l| l.split('|').map(str::trim).collect::<Vec<_>>())
        .find(|cells| cells.len() > 8 && cells[1] == speedup && cells[2] == router)
        .unwrap_or_else(|| panic!("no row {speedup} {router} in docs/FIDELITY.md"));
    // Each cell is "Dynamo / dynsim ok": Dynamo's is the first number.
    let dynamo = |i: usize| -> f64 {
        let text = row[i].split('/').next().expect("a cell").trim();
        text.parse()
            .unwrap_or_else(|_| panic!("{text:?} is not a number"))
    };
    (dynamo(3), dynamo(4), dynamo(5), dynamo(6), dynamo(7))
}

#[test]
fn round_robin_at_1x_is_within_the_targets_of_dynamos_mocker() {
    check("rr", 1.0, dynamo_row("1", "rr"));
}

#[test]
fn dynamos_kv_router_at_4x_is_within_the_targets_of_dynamos_mocker() {
    check("dynamo", 4.0, dynamo_row("4", "kv (dynamo)"));
}
