//! The readable summary table of a run's [`Report`].

use super::Report;

impl Report {
    /// The readable summary table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mut row = |k: &str, v: String| out.push_str(&format!("{k:<14}{v}\n"));
        row(
            "scenario",
            format!(
                "{} (policy {}, seed {})",
                self.scenario, self.policy, self.seed
            ),
        );
        for d in &self.deployments {
            row(
                "deployment",
                format!(
                    "{}{} {} on {} x {}: {:.2} GB of weights and {:.2} GB of KV per GPU, {} \
                     tokens of KV ({} bytes per token; memory share {})",
                    match d.pool {
                        crate::scenario::Pool::Workers => String::new(),
                        pool => format!("{}: ", serde_json::to_value(pool).expect("a name")),
                    }
                    .replace('"', ""),
                    d.model,
                    d.precision,
                    d.tp,
                    d.gpu,
                    d.weights_gb_per_gpu,
                    d.kv_gb_per_gpu,
                    d.kv_capacity_tokens,
                    d.kv_bytes_per_token,
                    d.memory_share
                ),
            );
        }
        row(
            "requests",
            format!(
                "{} ({} repeats, {} acks, {} re-routed)",
                self.requests, self.repeat_requests, self.acks, self.rerouted
            ),
        );
        row(
            "hits",
            format!(
                "{} of {} repeats  hit_rate {}",
                self.hits, self.repeat_requests, self.hit_rate
            ),
        );
        row(
            "block hits",
            format!(
                "{} of {} prompt blocks  block_hit_rate {}  prefix_reuse {}  (router predicted {})",
                self.cached_blocks,
                self.prompt_blocks,
                self.block_hit_rate,
                self.prefix_reuse,
                self.predicted_blocks
            ),
        );
        if let (Some(r), Some(off), Some(on)) = (
            &self.reuse_by_tier,
            &self.kv_offload_bytes,
            &self.kv_onload_bytes,
        ) {
            row(
                "kv tiers",
                format!(
                    "reuse device {} host {} disk {} ({} prompt blocks loaded back)  offloaded \
                     {:.3} GB host {:.3} GB disk  loaded back {:.3} GB host {:.3} GB disk",
                    r.device.unwrap_or(0.0),
                    r.host,
                    r.disk,
                    self.loaded_blocks.unwrap_or(0),
                    off.host as f64 / 1e9,
                    off.disk as f64 / 1e9,
                    on.host as f64 / 1e9,
                    on.disk as f64 / 1e9
                ),
            );
        }
        row(
            "misses",
            match &self.misses {
                Some(m) => format!(
                    "cold {}  routing {}  stale_index {}  capacity {}  (blocks)",
                    m.cold, m.routing, m.stale_index, m.capacity
                ),
                None => "not attributed (router.attribute_misses = false)".to_string(),
            },
        );
        let e = &self.events;
        row(
            "kv events",
            format!(
                "published {}  dropped {}  applied {}",
                e.published, e.dropped, e.applied
            ),
        );
        if e.gaps_detected > 0 {
            row(
                "gaps",
                format!(
                    "{} detected  {} replays ({} events)  {} resyncs ({} bytes)  recovery ms p50 {} \
                     p99 {}",
                    e.gaps_detected,
                    e.replays,
                    e.replayed,
                    e.resyncs,
                    e.resync_bytes,
                    self.recovery_ms.p50,
                    self.recovery_ms.p99
                ),
            );
        }
        if let Some(q) = &self.index {
            row(
                "index",
                format!("precision {}  recall {}", q.precision, q.recall),
            );
        }
        for (name, p) in [
            ("ttft ms", &self.ttft_ms),
            ("tpot ms", &self.tpot_ms),
            ("itl ms", &self.itl_ms),
            ("e2e ms", &self.e2e_ms),
            ("queue ms", &self.queue_ms),
        ] {
            row(
                name,
                format!(
                    "p50 {}  p90 {}  p99 {}  mean {}",
                    p.p50, p.p90, p.p99, p.mean
                ),
            );
        }
        row(
            "throughput",
            format!(
                "{} req/s  {} output tokens/s  over {} ms",
                self.throughput_rps, self.output_tokens_per_s, self.duration_ms
            ),
        );
        if self.preemptions > 0 || self.rejected > 0 {
            row(
                "scheduler",
                format!(
                    "{} preemptions  {} rejected",
                    self.preemptions, self.rejected
                ),
            );
        }
        if let Some(t) = &self.trace {
            row("trace", format!("{} rows, {} skipped", t.rows, t.skipped));
        }
        out.push_str(&format!(
            "{:<12}{:>7}{:>7}{:>10}{:>8}{:>8}{:>7}{:>8}{:>9}{:>9}{:>9}\n",
            "worker",
            "routed",
            "hits",
            "completed",
            "util",
            "steps",
            "batch",
            "preempt",
            "peak_kv",
            "evicted",
            "restarts"
        ));
        for w in &self.per_worker {
            out.push_str(&format!(
                "{:<12}{:>7}{:>7}{:>10}{:>8}{:>8}{:>7}{:>8}{:>9}{:>9}{:>9}\n",
                w.name,
                w.routed,
                w.hits,
                w.completed,
                w.utilisation,
                w.steps,
                w.mean_batch_tokens,
                w.preemptions,
                w.peak_kv_blocks,
                w.evicted_blocks,
                w.restarts
            ));
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }
}
