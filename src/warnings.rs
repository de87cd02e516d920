//! Warnings: the silent failures of a run made loud ([`of_run`]: a router fed by events that
//! applied none, a stale index, unacknowledged or rejected requests, a hot spot), and over many
//! runs (a sweep's points, a plan's probes, a comparison's scenarios) each kind of warning once,
//! naming the first run that gave it, with a count of the others ([`summarize`]).
//!
//! Two warnings are of one kind when they read the same with their numbers taken out ("hot
//! spot: worker0 received 812 of 1500 ..." and "hot spot: worker3 received 790 of 1500 ..."
//! are one kind).

use crate::cluster::router_actor::RouterStats;
use crate::report::{Report, WorkerReport};
use crate::router::stream::OnGap;
use crate::scenario::{EngineKind, Pool, Scenario};

/// Makes the silent failures loud. `routers`: every router replica's counters, summed;
/// `learns`: whether their policy learns from KV events.
pub fn of_run(s: &Scenario, r: &Report, routers: &RouterStats, learns: bool) -> Vec<String> {
    let decisions = routers.decisions;
    let mut out = Vec::new();
    let policy = &s.router.policy;
    let e = &r.events;
    if matches!(s.workload, crate::scenario::Workload::Trace(_))
        && s.timing_kind() == crate::scenario::TimingKind::Fixed
    {
        out.push(format!(
            "timing.model = \"fixed\": every step of this trace takes {} ms whatever its batch, \
             so its latencies do not answer to load (use model = \"steps\", as \
             scenarios/dynamo-mocker.toml does)",
            s.timing.service_ms
        ));
    }
    if learns && decisions > 0 {
        let replicas = s.router.replicas as u64;
        // Workers that published nothing (every request rejected, say) left the router
        // nothing to learn: its blindness is no loss then, and the bus lost nothing.
        if e.applied == 0 && (!s.bus.publish || e.published > 0) {
            // Fallback predicts only a stream it found broken: no gap, no prediction. A
            // snapshot stands in for a stream until its next gap.
            let predicts = s.router.on_gap == OnGap::Fallback && e.gaps_detected > 0;
            let snapshots = (routers.snapshots_applied > 0).then(|| {
                format!(
                    "the {} snapshot{} it resynced with",
                    routers.snapshots_applied,
                    if routers.snapshots_applied == 1 {
                        ""
                    } else {
                        "s"
                    }
                )
            });
            let consequence = match (predicts, snapshots) {
                (true, Some(snapshots)) => format!(
                    "the router routes on predictions from its own decisions (router.on_gap = \
                     \"fallback\") and on {snapshots}"
                ),
                (true, None) => "the router routes on predictions from its own decisions \
                                 (router.on_gap = \"fallback\")"
                    .to_string(),
                (false, Some(snapshots)) => {
                    format!("the router knew the workers' caches only from {snapshots}")
                }
                (false, None) if s.router.on_gap == OnGap::Fallback => format!(
                    "the router is blind: it routes knowing no worker's cache, on load alone \
                     (router.on_gap = \"fallback\" predicts a worker's cache only once it \
                     finds a gap, and it found none: no stream stayed silent \
                     router.gap_silence_ms = {} ms after a request)",
                    s.router.gap_silence_ms
                ),
                (false, None) => {
                    "the router is blind: it routes knowing no worker's cache, on load alone"
                        .to_string()
                }
            };
            let cause = if !s.bus.publish {
                "workers are not publishing KV events (bus.publish = false)".to_string()
            } else if routers.events_received == 0 && replicas == 1 {
                format!(
                    "the bus lost every event ({} published, {} dropped)",
                    e.published, e.dropped
                )
            } else if routers.events_received == 0 {
                // Each replica is sent its own copy, dropped apart: 19100 of 9550 would read
                // as more lost than sent.
                format!(
                    "the bus lost every event ({} published, a copy to each of {replicas} router \
                     replicas: {} copies dropped)",
                    e.published, e.dropped
                )
            } else {
                // Each event that got through came while its worker's stream awaited a
                // replay or snapshot (or opened such a wait): set aside, never applied.
                let lost = if replicas == 1 {
                    format!("{} of {} events", e.dropped, e.published)
                } else {
                    format!(
                        "{} of the {} copies it carries ({} events, a copy to each of {replicas} \
                         router replicas)",
                        e.dropped,
                        e.published * replicas,
                        e.published
                    )
                };
                // The mode is named once: the consequence may name it already.
                let mode = if consequence.contains("router.on_gap") {
                    String::new()
                } else {
                    format!(" (router.on_gap = \"{}\")", s.router.on_gap.name())
                };
                // With replicas the copies that got through are summed over them.
                let reached = if replicas == 1 {
                    "that reached the router"
                } else {
                    "copies that reached the replicas"
                };
                format!(
                    "the bus lost {lost}, and the {} {reached} were set aside (each came while its \
                     worker's stream was recovering from a gap{mode}, or was stale)",
                    routers.events_received
                )
            };
            out.push(format!(
                "router.policy = \"{policy}\" routed {decisions} requests but applied no KV event: \
                 {cause}; {consequence}"
            ));
        } else if let Some((first, last)) = routers
            .first_applied_ns
            .zip(routers.last_decided_ns)
            .filter(|&(first, last)| e.applied > 0 && first > last)
        {
            // Events that reach the router only after its last decision (before the last
            // completion, or after it): counted as applied, yet no decision of the run saw one.
            let latency = if s.bus.latency_ms > 0.0 {
                format!(" (bus.latency_ms = {})", s.bus.latency_ms)
            } else {
                String::new()
            };
            out.push(format!(
                "router.policy = \"{policy}\" routed {decisions} requests, the last {} ms into \
                 the run, before it applied its first KV event, {} ms into the run{latency}: the \
                 router routed the whole run blind, on load alone",
                crate::round::round_py(last as f64 / 1e6, 3),
                crate::round::round_py(first as f64 / 1e6, 3),
            ));
        } else if (s.router.on_gap == OnGap::Ignore
            || (s.router.on_gap == OnGap::Replay && routers.snapshots_applied == 0))
            && e.applied * 10 < e.published * s.router.replicas as u64 * 9
        {
            // A replaying router's applied events count the replayed ones: short of the
            // published, with no snapshot standing in, its recovery did not keep up.
            let recovered = if s.router.on_gap == OnGap::Replay {
                format!(
                    "; router.on_gap = \"replay\" recovered {}",
                    routers.replayed
                )
            } else {
                String::new()
            };
            out.push(if replicas == 1 {
                format!(
                    "the router applied only {} of {} published KV events (the bus dropped \
                     {}{recovered}): its index is stale and part of its routing is blind",
                    e.applied, e.published, e.dropped
                )
            } else {
                // Each replica is sent every event: "190 of 140" read as more than all.
                format!(
                    "the {replicas} router replicas applied only {} of {} KV events ({} published \
                     to each; the bus dropped {}{recovered}): their indexes are stale and part of \
                     their routing is blind",
                    e.applied,
                    e.published * replicas,
                    e.published,
                    e.dropped
                )
            });
        } else if let Some(q) = r.index.filter(|q| q.recall < 0.5) {
            // An index that lagged (late events) or lost (recovery that did not keep up), in
            // any mode: under "resync" and "fallback" the applied events do not measure what
            // the router knew (snapshots and predictions stand in), the audit does.
            let (whose, sent) = if replicas == 1 {
                ("the router's index", format!("{} events", e.published))
            } else {
                (
                    "the router replicas' indexes",
                    format!("{} copies", e.published * replicas),
                )
            };
            out.push(format!(
                "{whose} held {:.0} % of the (worker, block) pairs the workers held \
                 (index.recall = {}, averaged over the run): it lagged or lost what the caches \
                 held (the bus dropped {} of {sent}; bus.latency_ms = {}, router.on_gap = \
                 \"{}\"), and part of the routing is blind",
                q.recall * 100.0,
                q.recall,
                e.dropped,
                s.bus.latency_ms,
                s.router.on_gap.name()
            ));
        }
    }
    if r.acks != r.requests as u64 {
        out.push(format!(
            "only {} of {} requests completed",
            r.acks, r.requests
        ));
    }
    out.extend(settings_without_effect(s, learns));
    // A fault the run outlived tested nothing: the worker went down with no request left.
    for (i, crate::scenario::Fault::Restart { worker, at_ms, .. }) in s.faults.iter().enumerate() {
        if *at_ms > r.duration_ms {
            out.push(format!(
                "faults[{i}]: worker {worker} went down at {at_ms} ms, after the last request \
                 completed ({} ms): it changed no request (its restart is still counted)",
                r.duration_ms
            ));
        }
    }
    // So did a scaling step or a planner's first decision: a step may still be taken (the run
    // goes on while workers load or events travel) and shows in scale_events, yet no request
    // saw it.
    let end_s = crate::round::round_py(r.duration_ms / 1e3, 3);
    for (i, step) in s.scale.iter().enumerate() {
        if step.at_s * 1e3 > r.duration_ms {
            out.push(format!(
                "scale[{i}]: pool \"{}\" was to have {} workers at {} s, after the last request \
                 completed ({end_s} s): it changed no request",
                step.pool.name(),
                step.workers,
                step.at_s
            ));
        }
    }
    if let Some(p) = &s.planner {
        let every = crate::planner::interval_s(p);
        if every * 1e3 > r.duration_ms {
            out.push(format!(
                "planner.kind = \"{}\" decides every {every} s (planner.adjustment_interval_s): \
                 its first decision was due after the last request completed ({end_s} s), so it \
                 changed no request",
                p.kind.name()
            ));
        }
    }
    // A cluster whose size changed routes everything to its one worker while it has one, so
    // a share of the whole run says nothing of balance there; one that only made room for
    // more (`cluster.max_workers`) kept its starting workers throughout.
    if r.scale_events.is_empty() {
        let routable = if s.disagg.enabled {
            s.initial_workers(Pool::Prefill)
        } else {
            s.initial_workers(Pool::Workers)
        };
        out.extend(hot_spot(&r.per_worker, routable, policy));
    }
    if r.rejected > 0 {
        let limit = match r.deployments.first() {
            Some(d) => format!(
                "are longer than the deployment accepts (max_model_len = {} tokens) or its KV \
                 holds ({} tokens per worker)",
                d.max_model_len, d.kv_capacity_tokens
            ),
            None => format!(
                "need more KV blocks than a worker has (cluster.kv_capacity_blocks = {})",
                s.cluster
                    .kv_capacity_blocks
                    .count()
                    .map_or("unbounded".to_string(), |c| c.to_string())
            ),
        };
        // An engine that schedules prompts only whole also refuses one longer than a step.
        let whole = match s.engine.kind {
            EngineKind::Vllm => {
                (!s.engine.vllm.chunked_prefill).then_some("engine.vllm.chunked_prefill")
            }
            EngineKind::Trtllm => (!s.engine.trtllm.enable_chunked_prefill)
                .then_some("engine.trtllm.enable_chunked_prefill"),
            // SGLang has no step budget: a whole prompt is always scheduled.
            EngineKind::Sglang => None,
        };
        let too_long = match (whole, s.max_num_batched_tokens()) {
            (Some(key), Some(budget)) => format!(
                ", or their prompt is longer than a step's {budget} tokens ({key} = false: a \
                 prompt is scheduled only whole)"
            ),
            _ => String::new(),
        };
        out.push(format!(
            "{} requests were rejected: their prompt and output {limit}{too_long}",
            r.rejected
        ));
    }
    out
}

/// Router settings the run could not act on: gap recovery for a policy that learns no KV
/// events, a recovery timer or the replay buffer outside the `on_gap` modes that use them, and
/// replica settings with one replica. (Refused outright, as `signal_refresh_ms` is
/// with a policy that reads no signals, they would break sweeps that cross policies or
/// replica counts with them: a warning says it instead.)
fn settings_without_effect(s: &Scenario, learns: bool) -> Vec<String> {
    let r = &s.router;
    let mut out = Vec::new();
    if !learns && r.on_gap != OnGap::Ignore {
        out.push(format!(
            "router.on_gap = \"{}\" has no effect: router.policy = \"{}\" learns no KV events, \
             so it has no stream to recover",
            r.on_gap.name(),
            r.policy
        ));
    }
    if !s.disagg.enabled {
        // A sweep may turn disaggregation off at some points and keep the pools' sizes: a
        // warning, where a deployment per pool without it is refused.
        let (d, defaults) = (&s.disagg, crate::scenario::Disagg::default());
        out.extend(keys_without_effect(
            [
                (
                    "disagg.prefill_workers",
                    d.prefill_workers != defaults.prefill_workers,
                ),
                (
                    "disagg.decode_workers",
                    d.decode_workers != defaults.decode_workers,
                ),
                ("disagg.link_gbps", d.link_gbps != defaults.link_gbps),
                (
                    "disagg.transfer_overhead_ms",
                    d.transfer_overhead_ms != defaults.transfer_overhead_ms,
                ),
                ("disagg.colocated", d.colocated != defaults.colocated),
                ("disagg.model", d.model != defaults.model),
            ],
            "disaggregation is off (disagg.enabled = false)",
        ));
    }
    // Gap recovery's timers and buffer act only in the modes that use them (workers keep no
    // replay buffer unless a learning router replays): set elsewhere, they are ignored.
    let (router_defaults, bus_defaults) = (
        crate::scenario::Router::default(),
        crate::scenario::Bus::default(),
    );
    for (key, set, used, why) in [
        (
            "router.recovery_timeout_ms",
            r.recovery_timeout_ms != router_defaults.recovery_timeout_ms,
            r.on_gap != OnGap::Ignore,
            "it times replay and snapshot requests, which only \"replay\", \"resync\" and \
             \"fallback\" send",
        ),
        (
            "router.fallback_ttl_ms",
            r.fallback_ttl_ms != router_defaults.fallback_ttl_ms,
            r.on_gap == OnGap::Fallback,
            "it times predictions, which only \"fallback\" makes",
        ),
        (
            "bus.replay_buffer",
            s.bus.replay_buffer != bus_defaults.replay_buffer,
            r.on_gap == OnGap::Replay,
            "workers keep a replay buffer only for \"replay\"",
        ),
    ] {
        if set && !(learns && used) {
            out.push(if learns {
                format!(
                    "{key} has no effect with router.on_gap = \"{}\": {why}",
                    r.on_gap.name()
                )
            } else {
                format!(
                    "{key} has no effect: router.policy = \"{}\" learns no KV events, so it \
                     recovers no stream",
                    r.policy
                )
            });
        }
    }
    // The bus carries KV events (and their recovery) and replicas' sync notes: with neither
    // read, its faults and delays change nothing but the report's event counts. (Not
    // `publish`, which a scenario may turn off to say so.)
    let syncs = r.replicas > 1 && r.sync == crate::scenario::ReplicaSync::ActiveLoad;
    if !learns && !syncs {
        let (b, defaults) = (&s.bus, crate::scenario::Bus::default());
        let why = format!(
            "router.policy = \"{}\" learns no KV events and no router replicas sync over the \
             bus, so nothing it carries is read",
            r.policy
        );
        out.extend(keys_without_effect(
            [
                ("bus.drop_rate", b.drop_rate != defaults.drop_rate),
                ("bus.latency_ms", b.latency_ms != defaults.latency_ms),
                ("bus.jitter_ms", b.jitter_ms != defaults.jitter_ms),
                ("bus.reorder", b.reorder != defaults.reorder),
                ("bus.outages", b.outages != defaults.outages),
            ],
            &why,
        ));
    }
    if r.replicas == 1 {
        let defaults = crate::scenario::Router::default();
        for (key, set) in [
            ("router.sync", r.sync != defaults.sync),
            ("router.spread", r.spread != defaults.spread),
        ] {
            if set {
                out.push(format!(
                    "{key} has no effect with one router replica (router.replicas = 1)"
                ));
            }
        }
    }
    out
}

/// One warning naming every key of `keys` (each with whether it is set away from its default)
/// that is set: "a, b have no effect: `why`".
fn keys_without_effect<const N: usize>(keys: [(&str, bool); N], why: &str) -> Option<String> {
    let set: Vec<&str> = (keys.into_iter())
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
    (!set.is_empty()).then(|| {
        let verb = if set.len() == 1 { "has" } else { "have" };
        format!("{} {verb} no effect: {why}", set.join(", "))
    })
}

/// A hot spot: on a cluster of at least four routable workers, one received more than half of
/// the routed requests (exactly half is not a hot spot; smaller clusters never have one, nor
/// does a run of fewer requests than workers, where one request on 64 workers read "100 %").
/// Not asked of a cluster whose size changed over the run.
fn hot_spot(per_worker: &[WorkerReport], routable: usize, policy: &str) -> Option<String> {
    let routed: u64 = per_worker.iter().map(|w| w.routed).sum();
    if routable < 4 || routed < routable as u64 {
        return None;
    }
    let hot = per_worker.iter().max_by_key(|w| w.routed)?;
    (hot.routed * 2 > routed).then(|| {
        format!(
            "hot spot: {} received {} of {} routed requests ({:.0} %) on a cluster of {} \
             (router.policy = \"{policy}\")",
            hot.name,
            hot.routed,
            routed,
            hot.routed as f64 * 100.0 / routed as f64,
            routable
        )
    })
}

/// The summary lines for `runs`, each a run's label and its warnings, in run order: one line per
/// kind of warning, in order of first appearance: `LABEL: WARNING`, then ` (also at N more
/// points)` when others gave it too; `unit` names a run (singular, plural).
pub fn summarize<'a>(
    runs: impl IntoIterator<Item = (&'a str, &'a [String])>,
    unit: (&str, &str),
) -> Vec<String> {
    // (kind, first label, first message, runs that gave it), in order of first appearance.
    let mut kinds: Vec<(String, &str, &str, usize)> = Vec::new();
    for (label, warnings) in runs {
        let mut seen_here: Vec<String> = Vec::new();
        for w in warnings {
            let kind = kind_of(w);
            if seen_here.contains(&kind) {
                continue;
            }
            match kinds.iter_mut().find(|k| k.0 == kind) {
                Some(k) => k.3 += 1,
                None => kinds.push((kind.clone(), label, w, 1)),
            }
            seen_here.push(kind);
        }
    }
    kinds
        .into_iter()
        .map(|(_, label, message, n)| match n {
            1 => format!("{label}: {message}"),
            2 => format!("{label}: {message} (also at 1 more {})", unit.0),
            n => format!("{label}: {message} (also at {} more {})", n - 1, unit.1),
        })
        .collect()
}

/// A warning with every run of digits replaced by `#`.
fn kind_of(warning: &str) -> String {
    let mut out = String::with_capacity(warning.len());
    let mut in_number = false;
    for c in warning.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Router;

    #[test]
    fn one_line_per_kind_naming_the_first_run_with_a_count() {
        let a = [
            "hot spot: worker0 received 812 of 1500".to_string(),
            "only 3 of 4 requests completed".to_string(),
        ];
        let b = ["hot spot: worker3 received 790 of 1500".to_string()];
        let c: Vec<String> = Vec::new();
        let d = ["hot spot: worker1 received 900 of 1500".to_string()];
        let lines = summarize(
            [
                ("point 0", &a[..]),
                ("point 1", &b[..]),
                ("point 2", &c[..]),
                ("point 3", &d[..]),
            ],
            ("point", "points"),
        );
        assert_eq!(
            lines,
            vec![
                "point 0: hot spot: worker0 received 812 of 1500 (also at 2 more points)",
                "point 0: only 3 of 4 requests completed",
            ]
        );
    }

    fn workers(routed: &[u64]) -> Vec<WorkerReport> {
        routed
            .iter()
            .enumerate()
            .map(|(i, &routed)| WorkerReport {
                name: format!("worker{i}"),
                routed,
                ..WorkerReport::default()
            })
            .collect()
    }

    #[test]
    fn more_than_half_on_one_of_four_or_more_is_a_hot_spot() {
        let hot = hot_spot(&workers(&[6, 2, 1, 1]), 4, "kv").expect("6 of 10");
        assert_eq!(
            hot,
            "hot spot: worker0 received 6 of 10 routed requests (60 %) on a cluster of 4 \
             (router.policy = \"kv\")"
        );
        assert!(
            hot_spot(&workers(&[1, 1, 7, 1, 0]), 5, "kv").is_some(),
            "7 of 10"
        );
    }

    #[test]
    fn disaggregation_settings_without_disaggregation_are_named() {
        let mut s = Scenario::default();
        assert!(settings_without_effect(&s, true).is_empty());
        s.disagg.link_gbps = 50.0;
        assert_eq!(
            settings_without_effect(&s, true),
            ["disagg.link_gbps has no effect: disaggregation is off (disagg.enabled = false)"]
        );
        s.disagg.prefill_workers = 3;
        s.disagg.colocated = true;
        assert_eq!(
            settings_without_effect(&s, true),
            [
                "disagg.prefill_workers, disagg.link_gbps, disagg.colocated have no effect: \
                 disaggregation is off (disagg.enabled = false)"
            ]
        );
        s.disagg.enabled = true;
        assert!(settings_without_effect(&s, true).is_empty());
    }

    #[test]
    fn gap_recovery_settings_outside_their_mode_are_named() {
        let mut s = Scenario::default();
        s.router.recovery_timeout_ms = 250.0;
        s.router.fallback_ttl_ms = 5_000.0;
        s.bus.replay_buffer = 100;
        // Under "ignore" none of them acts; they were silently ignored.
        assert_eq!(
            settings_without_effect(&s, true),
            [
                "router.recovery_timeout_ms has no effect with router.on_gap = \"ignore\": it \
                 times replay and snapshot requests, which only \"replay\", \"resync\" and \
                 \"fallback\" send",
                "router.fallback_ttl_ms has no effect with router.on_gap = \"ignore\": it times \
                 predictions, which only \"fallback\" makes",
                "bus.replay_buffer has no effect with router.on_gap = \"ignore\": workers keep a \
                 replay buffer only for \"replay\"",
            ]
        );
        s.router.on_gap = OnGap::Replay;
        assert_eq!(
            settings_without_effect(&s, true),
            [
                "router.fallback_ttl_ms has no effect with router.on_gap = \"replay\": it times \
                 predictions, which only \"fallback\" makes"
            ]
        );
        s.router.on_gap = OnGap::Fallback;
        assert_eq!(
            settings_without_effect(&s, true),
            [
                "bus.replay_buffer has no effect with router.on_gap = \"fallback\": workers keep \
                 a replay buffer only for \"replay\""
            ]
        );
        // A policy that learns no events recovers nothing, whatever the mode.
        s.router.on_gap = OnGap::Ignore;
        s.router.fallback_ttl_ms = Router::default().fallback_ttl_ms;
        s.router.recovery_timeout_ms = Router::default().recovery_timeout_ms;
        assert_eq!(
            settings_without_effect(&s, false),
            [
                "bus.replay_buffer has no effect: router.policy = \"kv\" learns no KV events, so \
                 it recovers no stream"
            ]
        );
    }

    #[test]
    fn bus_faults_nothing_reads_are_named() {
        let mut s = Scenario::default();
        s.bus.drop_rate = 0.3;
        s.bus.latency_ms = 5.0;
        let expected = "bus.drop_rate, bus.latency_ms have no effect: router.policy = \"kv\" \
                        learns no KV events and no router replicas sync over the bus, so nothing \
                        it carries is read";
        s.router.policy = "kv".into();
        assert_eq!(settings_without_effect(&s, false), [expected]);
        assert!(
            settings_without_effect(&s, true).is_empty(),
            "a learning router reads it"
        );
        s.router.replicas = 2;
        s.router.sync = crate::scenario::ReplicaSync::ActiveLoad;
        assert!(
            settings_without_effect(&s, false).is_empty(),
            "sync notes ride the bus"
        );
        s.router.sync = crate::scenario::ReplicaSync::None;
        assert_eq!(settings_without_effect(&s, false), [expected]);
    }

    #[test]
    fn exactly_half_is_not_a_hot_spot() {
        assert_eq!(hot_spot(&workers(&[5, 3, 1, 1]), 4, "kv"), None);
        // Fewer requests than workers: no share means anything.
        assert_eq!(hot_spot(&workers(&[3, 0, 0, 0]), 4, "kv"), None);
        let mut one = vec![0; 64];
        one[38] = 1;
        assert_eq!(hot_spot(&workers(&one), 64, "dynamo"), None);
        assert!(
            hot_spot(&workers(&[3, 1, 0, 0]), 4, "kv").is_some(),
            "4 of 4 routed"
        );
        assert_eq!(hot_spot(&workers(&[2, 0, 1, 1]), 4, "kv"), None);
    }

    #[test]
    fn clusters_under_four_workers_never_warn() {
        for n in 1..4 {
            let mut routed = vec![0; n];
            routed[0] = 100;
            assert_eq!(hot_spot(&workers(&routed), n, "kv"), None, "{n} workers");
        }
        // Four routable workers (prefill workers when disaggregated) are counted, not the
        // report's rows: decode workers show up there with nothing routed.
        assert_eq!(hot_spot(&workers(&[9, 1, 0, 0]), 2, "kv"), None);
        assert_eq!(
            hot_spot(&workers(&[0, 0, 0, 0]), 4, "kv"),
            None,
            "nothing routed"
        );
    }
}
