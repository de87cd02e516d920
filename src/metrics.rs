//! The one table of metric names: how a report metric may be spelled (`ttft_p90_ms` or its
//! report path `ttft_ms.p90`, accepted alike by `sweep`, `plan` and `compare`), what it is
//! called on a chart ("TTFT p90 (ms)"), what kind of number it is (a latency must be positive
//! in an SLA, a share lies in [0, 1]), and the names of the settings sweeps vary.

/// What kind of number a metric is: it decides its bounds and how an axis shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A time in ms, positive.
    Latency,
    /// A share in [0, 1].
    Share,
    /// A rate per second, at least 0.
    Rate,
    /// A count, at least 0.
    Count,
    /// Bytes, at least 0 (shown in MiB or GiB).
    Bytes,
    /// Anything else.
    Other,
}

/// A metric as a chart and an SLA see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metric {
    /// Its path in the `--json` report (`ttft_ms.p90`).
    pub path: String,
    /// Its human name with its unit (`TTFT p90 (ms)`).
    pub label: String,
    /// Its kind.
    pub kind: Kind,
}

const LATENCIES: [(&str, &str); 6] = [
    ("ttft", "TTFT"),
    ("tpot", "TPOT"),
    ("itl", "ITL"),
    ("e2e", "end-to-end latency"),
    ("queue", "queue time"),
    ("recovery", "gap recovery time"),
];
const STATS: [&str; 4] = ["p50", "p90", "p99", "mean"];

/// The report path of a metric spelled either way: `LATENCY_STAT_ms` (`ttft_p90_ms`) reads
/// `LATENCY_ms.STAT`; anything else is a report path already (`ttft_ms.p90`,
/// `block_hit_rate`, `index.precision`).
pub fn path(key: &str) -> String {
    for (latency, _) in LATENCIES {
        for stat in STATS {
            if key == format!("{latency}_{stat}_ms") {
                return format!("{latency}_ms.{stat}");
            }
        }
    }
    key.to_string()
}

/// The metric spelled `key` (either spelling), named for people.
pub fn metric(key: &str) -> Metric {
    let path = path(key);
    let (label, kind) = describe(&path);
    Metric { path, label, kind }
}

fn describe(path: &str) -> (String, Kind) {
    for (latency, name) in LATENCIES {
        for stat in STATS {
            if path == format!("{latency}_ms.{stat}") {
                return (format!("{name} {stat} (ms)"), Kind::Latency);
            }
        }
    }
    let fixed: Option<(&str, Kind)> = match path {
        "hit_rate" => Some(("hit rate (lab: repeats sent to a holder)", Kind::Share)),
        "block_hit_rate" => Some(("block reuse (share of prompt blocks cached)", Kind::Share)),
        "prefix_reuse" => Some(("prefix reuse (share of prompt tokens cached)", Kind::Share)),
        "reuse_by_tier.device" => Some((
            "reuse from the device (share of prompt tokens)",
            Kind::Share,
        )),
        "reuse_by_tier.host" => Some((
            "reuse loaded from host (share of prompt tokens)",
            Kind::Share,
        )),
        "reuse_by_tier.disk" => Some((
            "reuse loaded from disk (share of prompt tokens)",
            Kind::Share,
        )),
        "kv_offload_bytes.host" => Some(("KV offloaded to host", Kind::Bytes)),
        "kv_offload_bytes.disk" => Some(("KV offloaded to disk", Kind::Bytes)),
        "kv_onload_bytes.host" => Some(("KV loaded back from host", Kind::Bytes)),
        "kv_onload_bytes.disk" => Some(("KV loaded back from disk", Kind::Bytes)),
        "busiest_worker_share" => Some(("busiest worker's share of requests", Kind::Share)),
        "index.precision" => Some(("index precision", Kind::Share)),
        "index.recall" => Some(("index recall", Kind::Share)),
        "throughput_rps" => Some(("throughput (requests/s)", Kind::Rate)),
        "output_tokens_per_s" => Some(("output tokens/s", Kind::Rate)),
        "duration_ms" => Some(("duration (ms)", Kind::Latency)),
        "events.resync_bytes" => Some(("snapshot traffic", Kind::Bytes)),
        "events.published" => Some(("KV events published", Kind::Count)),
        "events.dropped" => Some(("KV events lost", Kind::Count)),
        "events.applied" => Some(("KV events applied", Kind::Count)),
        "events.gaps_detected" => Some(("event gaps detected", Kind::Count)),
        "events.replays" => Some(("replay requests", Kind::Count)),
        "events.resyncs" => Some(("snapshot requests", Kind::Count)),
        "hits" => Some(("hits (lab)", Kind::Count)),
        "requests" => Some(("requests", Kind::Count)),
        "rejected" => Some(("requests rejected", Kind::Count)),
        "preemptions" => Some(("preemptions", Kind::Count)),
        _ => None,
    };
    if let Some((label, kind)) = fixed {
        return (label.to_string(), kind);
    }
    if let Some(rest) = path.strip_prefix("misses.") {
        return (format!("missed blocks: {rest}"), Kind::Count);
    }
    if let Some(rest) = path.strip_prefix("per_worker.") {
        if let Some((worker, field)) = rest.split_once('.') {
            return (
                format!("worker {worker}: {}", field.replace('_', " ")),
                Kind::Other,
            );
        }
    }
    (path.to_string(), Kind::Other)
}

/// The name of a scenario key that sweeps and plans vary (`workload.speedup` is "load (x the
/// trace's rate)"); the key itself when the table has none.
pub fn setting_label(key: &str) -> String {
    match key {
        "workload.speedup" => "load (x the trace's rate)",
        "workload.rate_per_s" => "arrival rate (requests/s)",
        "cluster.workers" => "workers",
        "cluster.kv_capacity_blocks" => "KV capacity per worker (blocks)",
        "kv.host.capacity_blocks" => "host tier per worker (blocks)",
        "router.dynamo.host_cache_hit_weight" => "router's host tier credit",
        "router.policy" => "routing policy",
        "router.replicas" => "router replicas",
        "router.sync" => "replica sync",
        "router.on_gap" => "on a gap (router.on_gap)",
        "bus.drop_rate" => "KV events lost (share)",
        "bus.latency_ms" => "KV event latency (ms)",
        "workload.path" => "trace",
        "seed" => "seed",
        other => other,
    }
    .to_string()
}

/// Checks an SLA bound against the metric's kind: a latency bound must be positive (a time of
/// 0 or less is never met), a share's in [0, 1], a rate's, count's or size's at least 0.
pub fn check_bound(m: &Metric, bound: f64) -> Result<(), String> {
    let ok = match m.kind {
        Kind::Latency => bound > 0.0,
        Kind::Share => (0.0..=1.0).contains(&bound),
        Kind::Rate | Kind::Count | Kind::Bytes => bound >= 0.0,
        Kind::Other => true,
    };
    if ok {
        return Ok(());
    }
    let need = match m.kind {
        Kind::Latency => "a latency bound must be positive (ms)",
        Kind::Share => "a share's bound must be in [0, 1]",
        _ => "the bound must be at least 0",
    };
    Err(format!("{need}; {} is {bound}", m.label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_one_metric() {
        assert_eq!(metric("ttft_p90_ms"), metric("ttft_ms.p90"));
        assert_eq!(metric("ttft_p90_ms").label, "TTFT p90 (ms)");
        assert_eq!(path("e2e_p99_ms"), "e2e_ms.p99");
        assert_eq!(path("block_hit_rate"), "block_hit_rate");
        assert_eq!(metric("index.precision").kind, Kind::Share);
        assert_eq!(metric("nonsense.x").label, "nonsense.x");
        assert_eq!(
            setting_label("workload.speedup"),
            "load (x the trace's rate)"
        );
    }

    #[test]
    fn bounds_follow_the_metric_s_kind() {
        assert!(check_bound(&metric("ttft_p90_ms"), -5.0).is_err());
        assert!(check_bound(&metric("ttft_p90_ms"), 0.0).is_err());
        assert!(check_bound(&metric("ttft_p90_ms"), 500.0).is_ok());
        assert!(check_bound(&metric("block_hit_rate"), 1.2).is_err());
        assert!(check_bound(&metric("throughput_rps"), -1.0).is_err());
    }
}
