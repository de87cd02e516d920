//! Pinned results: performance work must leave every output bit-identical. The trace hashes and
//! summaries below were produced before the engine was optimised (and cross-checked against the
//! unoptimised build); a change here means results changed, not just speed.

use std::path::Path;

use dynsim::run::run_scenario;
use dynsim::scenario::load::parse_scenario;
use xxhash_rust::xxh3::xxh3_64;

fn traced(name: &str) -> (dynsim::report::Report, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let s = parse_scenario(&path, &text, &[]).unwrap();
    let mut trace = Vec::new();
    let report = run_scenario(&s, path.parent().unwrap(), Some(&mut trace)).unwrap();
    (report, trace)
}

#[test]
fn bundled_scenario_traces_are_pinned() {
    let pinned: [(&str, u64, usize); 5] = [
        ("kv.toml", 14_396_522_344_105_064_929, 504),
        ("lossy-bus.toml", 18_095_920_477_365_499_027, 486),
        ("late-events.toml", 8_672_042_999_261_324_576, 504),
        ("measured-2026-10-07.toml", 10_834_021_139_934_215_846, 552),
        ("disagg-one-gpu.toml", 4_493_269_660_658_444_481, 1_800),
    ];
    for (name, hash, lines) in pinned {
        let (_, trace) = traced(name);
        let n = trace.iter().filter(|&&b| b == b'\n').count();
        assert_eq!((xxh3_64(&trace), n), (hash, lines), "{name}");
    }
}

#[test]
fn mooncake_replay_summary_is_pinned() {
    let (r, _) = traced("mooncake-conversation.toml");
    assert_eq!((r.block_hit_rate, r.cached_blocks), (0.2116, 61_046));
    assert_eq!(
        (r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99),
        (91.44, 619.3, 3807.118)
    );
    assert_eq!((r.misses.cold, r.misses.stale_index), (182_790, 44_664));
}
