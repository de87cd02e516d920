//! Range checks on a deserialised scenario. Each failure names the dotted key, its value and the
//! problem, so the loader can point at the line that set it.

pub use crate::error::Invalid;
pub use crate::limits::{
    MAX_CONTEXT_TOKENS, MAX_MS, MAX_REPLAY_BUFFER, MAX_REPLICAS, MAX_REQUESTS, MAX_WORKERS,
};

use std::path::Path;

use super::{
    Auto, EngineKind, Fault, Limit, Scenario, SglangSettings, Timing, TimingKind, TrtllmSettings,
    VllmSettings, Workload,
};
use crate::rng::SimRng;
use crate::router::loads::LoadKind;
use crate::router::policy::PolicySetup;
use crate::router::registry;
use crate::router::stream::MIN_STREAM_TIMER_MS;
use crate::workload::synthetic::SyntheticStream;

fn at_least_one(key: &str, n: usize) -> Result<(), Invalid> {
    if n == 0 {
        return Err(Invalid::new(key, n, "must be at least 1"));
    }
    Ok(())
}

fn non_negative(key: &str, x: f64) -> Result<(), Invalid> {
    if !x.is_finite() || x < 0.0 {
        return Err(Invalid::new(
            key,
            format!("{x:?}"),
            "must be a finite number >= 0",
        ));
    }
    Ok(())
}

/// A duration or instant in ms: finite, >= 0, at most [`MAX_MS`].
fn time_ms(key: &str, x: f64) -> Result<(), Invalid> {
    non_negative(key, x)?;
    if x > MAX_MS {
        return Err(Invalid::new(
            key,
            format!("{x:?}"),
            "must be at most 1e12 ms (about 31.7 years)",
        ));
    }
    Ok(())
}

fn at_most(key: &str, n: usize, max: usize) -> Result<(), Invalid> {
    if n > max {
        return Err(Invalid::new(key, n, &format!("must be at most {max}")));
    }
    Ok(())
}

fn positive(key: &str, x: f64) -> Result<(), Invalid> {
    if !x.is_finite() || x <= 0.0 {
        return Err(Invalid::new(
            key,
            format!("{x:?}"),
            "must be a finite number > 0",
        ));
    }
    Ok(())
}

fn limit(key: &str, l: Limit) -> Result<(), Invalid> {
    match l {
        Limit::Count(n) => at_least_one(key, n),
        Limit::Unbounded => Ok(()),
    }
}

/// The number of worker actors the scenario asks for (prefill + decode when disaggregated and
/// not colocated): every slot of a pool that scales ([`Scenario::pool_slots`]).
pub fn worker_count(s: &Scenario) -> usize {
    use super::Pool;
    if !s.disagg.enabled {
        s.pool_slots(Pool::Workers)
    } else if s.disagg.colocated {
        s.disagg.prefill_workers
    } else {
        s.pool_slots(Pool::Prefill) + s.pool_slots(Pool::Decode)
    }
}

/// Checks every range; the first problem found is returned. Model and profile files are not
/// read ([`validate_in`] reads them).
pub fn validate(s: &Scenario) -> Result<(), Invalid> {
    validate_in(s, None)
}

/// Checks every range, reading model and profile files relative to `base_dir`.
pub fn validate_in(s: &Scenario, base_dir: Option<&Path>) -> Result<(), Invalid> {
    match &s.workload {
        Workload::PrefixRepeat(w) => {
            at_least_one("workload.prefixes", w.prefixes)?;
            at_least_one("workload.reps", w.reps)?;
            let requests = w.prefixes.saturating_mul(w.reps);
            if requests > MAX_REQUESTS {
                return Err(Invalid::new(
                    "workload.prefixes",
                    w.prefixes,
                    &format!(
                        "times workload.reps = {} makes {requests} requests, more than a run may \
                         have ({MAX_REQUESTS})",
                        w.reps
                    ),
                ));
            }
            let context = (w.prefix_len as u64)
                .saturating_add(w.tail_len as u64)
                .saturating_add(u64::from(w.output_tokens));
            if context > MAX_CONTEXT_TOKENS {
                return Err(Invalid::new(
                    "workload.tail_len",
                    w.tail_len,
                    &format!(
                        "makes prefix_len + tail_len + output_tokens = {context} tokens, longer \
                         than the longest context ({MAX_CONTEXT_TOKENS})"
                    ),
                ));
            }
            time_ms("workload.interval_ms", w.interval_ms)?;
            let last_ms = w.interval_ms * (requests - 1) as f64;
            if last_ms > MAX_MS {
                return Err(Invalid::new(
                    "workload.interval_ms",
                    format!("{:?}", w.interval_ms),
                    &format!(
                        "puts the last of {} requests at {last_ms:e} ms, past the clock's limit \
                         of 1e12 ms (about 31.7 years)",
                        requests
                    ),
                ));
            }
        }
        Workload::Trace(t) => {
            if t.path.is_empty() {
                return Err(Invalid::new(
                    "workload.path",
                    "\"\"",
                    "must name a trace file",
                ));
            }
            at_least_one("workload.trace_block_size", t.trace_block_size)?;
            positive("workload.speedup", t.speedup)?;
            if let Some(c) = t.concurrency {
                at_least_one("workload.concurrency", c)?;
            }
            crate::workload::synthetic::check_ramp(t.concurrency, t.concurrency_ramp_s).map_err(
                |problem| {
                    Invalid::new(
                        "workload.concurrency_ramp_s",
                        format!("{:?}", t.concurrency_ramp_s.unwrap_or_default()),
                        &problem,
                    )
                },
            )?;
            if let Some(l) = t.limit {
                at_least_one("workload.limit", l)?;
            }
            if let Some(schedule) = &t.speedup_schedule {
                if t.speedup != 1.0 {
                    return Err(Invalid::new(
                        "workload.speedup",
                        format!("{:?}", t.speedup),
                        "is replaced by workload.speedup_schedule: remove one of them",
                    ));
                }
                schedule.validate().map_err(|(k, m)| {
                    Invalid::new(&format!("workload.speedup_schedule.{k}"), "", &m)
                })?;
            }
            if let Some(d) = t.duration_s {
                positive("workload.duration_s", d)?;
                time_ms("workload.duration_s", d * 1e3)?;
            }
            if t.concurrency.is_some() && (t.speedup_schedule.is_some() || t.duration_s.is_some()) {
                return Err(Invalid::new(
                    "workload.concurrency",
                    t.concurrency.unwrap_or(0),
                    "is a closed loop, which ignores arrival times: remove it, or \
                     speedup_schedule and duration_s",
                ));
            }
        }
        Workload::Synthetic(p) => {
            p.validate()
                .map_err(|(key, problem)| Invalid::new(&format!("workload.{key}"), "", &problem))?;
            // The draws themselves: every arrival within the clock, every request within the
            // longest context.
            SyntheticStream::check(p, s.block_size(), SimRng::new(s.rng, s.seed))
                .map_err(|(key, problem)| Invalid::new(&format!("workload.{key}"), "", &problem))?;
        }
    }
    let c = &s.cluster;
    at_least_one("cluster.workers", c.workers)?;
    at_most("cluster.workers", c.workers, MAX_WORKERS)?;
    at_least_one("cluster.block_size", c.block_size)?;
    limit("cluster.kv_capacity_blocks", c.kv_capacity_blocks)?;

    let b = &s.bus;
    if !(0.0..=1.0).contains(&b.drop_rate) {
        return Err(Invalid::new(
            "bus.drop_rate",
            format!("{:?}", b.drop_rate),
            "is outside 0..=1",
        ));
    }
    time_ms("bus.latency_ms", b.latency_ms)?;
    at_most("bus.replay_buffer", b.replay_buffer, MAX_REPLAY_BUFFER)?;
    if let Some(g) = b.link_gbps {
        positive("bus.link_gbps", g)?;
    }
    time_ms("bus.jitter_ms", b.jitter_ms)?;
    for (i, w) in b.outages.iter().enumerate() {
        time_ms(&format!("bus.outages[{i}].start_ms"), w.start_ms)?;
        time_ms(&format!("bus.outages[{i}].end_ms"), w.end_ms)?;
        if w.end_ms <= w.start_ms {
            return Err(Invalid::new(
                &format!("bus.outages[{i}].end_ms"),
                format!("{:?}", w.end_ms),
                "must be after start_ms",
            ));
        }
    }

    let t = &s.timing;
    time_ms("timing.service_ms", t.service_ms)?;
    for (name, coeffs) in [
        ("timing.prefill_coeffs", t.prefill_coeffs),
        ("timing.decode_coeffs", t.decode_coeffs),
    ] {
        if coeffs.iter().any(|x| !x.is_finite()) {
            return Err(Invalid::new(
                name,
                format!("{coeffs:?}"),
                "must be finite numbers",
            ));
        }
    }
    time_ms("timing.decode_floor_ms", t.decode_floor_ms)?;
    if let Some(o) = t.request_overhead_ms {
        time_ms("timing.request_overhead_ms", o)?;
    }
    if let Some(j) = t.request_jitter_ms {
        time_ms("timing.request_jitter_ms", j)?;
    }
    if let Some(p) = &t.protocol {
        if !crate::deployment::profile::PROTOCOL_NAMES.contains(&p.as_str()) {
            return Err(Invalid::new(
                "timing.protocol",
                format!("{p:?}"),
                &format!(
                    "must be one of {}",
                    crate::deployment::profile::PROTOCOL_NAMES.join(", ")
                ),
            ));
        }
    }
    inactive_timing(s)?;
    let v = &s.engine.vllm;
    if let Auto::Set(l) = v.max_num_seqs {
        limit("engine.vllm.max_num_seqs", l)?;
    }
    if let Auto::Set(l) = v.max_num_batched_tokens {
        limit("engine.vllm.max_num_batched_tokens", l)?;
    }
    let t = &s.engine.trtllm;
    limit("engine.trtllm.max_batch_size", t.max_batch_size)?;
    limit("engine.trtllm.max_num_tokens", t.max_num_tokens)?;
    sglang_settings(s)?;
    inactive_engine(s)?;

    let d = &s.disagg;
    if d.enabled {
        at_least_one("disagg.prefill_workers", d.prefill_workers)?;
        at_least_one("disagg.decode_workers", d.decode_workers)?;
        at_most("disagg.prefill_workers", d.prefill_workers, MAX_WORKERS)?;
        at_most("disagg.decode_workers", d.decode_workers, MAX_WORKERS)?;
        if d.colocated && d.prefill_workers != d.decode_workers {
            return Err(Invalid::new(
                "disagg.decode_workers",
                d.decode_workers,
                "must equal prefill_workers when colocated (each GPU runs one of each)",
            ));
        }
    }
    positive("disagg.link_gbps", d.link_gbps)?;
    time_ms("disagg.transfer_overhead_ms", d.transfer_overhead_ms)?;
    for (name, v) in [
        ("disagg.model.layers", d.model.layers),
        ("disagg.model.kv_heads", d.model.kv_heads),
        ("disagg.model.head_dim", d.model.head_dim),
        ("disagg.model.dtype_bytes", d.model.dtype_bytes),
    ] {
        if v == 0 {
            return Err(Invalid::new(name, v, "must be at least 1"));
        }
    }
    let m = &d.model;
    if crate::disagg::checked_kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, m.dtype_bytes)
        .is_none()
    {
        return Err(Invalid::new(
            "disagg.model.layers",
            m.layers,
            "makes the KV bytes per token overflow 64 bits",
        ));
    }

    validate_router(s)?;
    validate_deployment(s, base_dir)?;
    super::kv::validate(s)?;
    super::scaling::validate(s)?;

    let workers = worker_count(s);
    for (i, f) in s.faults.iter().enumerate() {
        match f {
            Fault::Restart {
                worker,
                at_ms,
                down_ms,
            } => {
                if *worker >= workers {
                    return Err(Invalid::new(
                        &format!("faults[{i}].worker"),
                        worker,
                        &format!("is not a worker (there are {workers}: 0..{workers})"),
                    ));
                }
                time_ms(&format!("faults[{i}].at_ms"), *at_ms)?;
                positive(&format!("faults[{i}].down_ms"), *down_ms)?;
                time_ms(&format!("faults[{i}].down_ms"), *down_ms)?;
                let overlaps = s.faults[..i].iter().any(|earlier| {
                    let Fault::Restart {
                        worker: w,
                        at_ms: a,
                        down_ms: d,
                    } = earlier;
                    w == worker && *a < at_ms + down_ms && *at_ms < a + d
                });
                if overlaps {
                    return Err(Invalid::new(
                        &format!("faults[{i}].at_ms"),
                        format!("{at_ms:?}"),
                        "overlaps an earlier restart of the same worker",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A setting of the timing model the scenario does not use, set to anything but its default,
/// would be silently ignored: refused instead, naming the model in use. The roofline needs a
/// deployment to time.
fn inactive_timing(s: &Scenario) -> Result<(), Invalid> {
    let t = &s.timing;
    let d = Timing::default();
    let kind = s.timing_kind();
    if kind == TimingKind::Roofline && !s.has_deployment() {
        return Err(Invalid::new(
            "timing.model",
            "\"roofline\"",
            "needs a [deployment] (model, gpu, tp, precision) to time its steps",
        ));
    }
    let settings = [
        (
            "timing.service_ms",
            t.service_ms != d.service_ms,
            format!("{:?}", t.service_ms),
            TimingKind::Fixed,
        ),
        (
            "timing.prefill_coeffs",
            t.prefill_coeffs != d.prefill_coeffs,
            format!("{:?}", t.prefill_coeffs),
            TimingKind::Steps,
        ),
        (
            "timing.decode_coeffs",
            t.decode_coeffs != d.decode_coeffs,
            format!("{:?}", t.decode_coeffs),
            TimingKind::Steps,
        ),
        (
            "timing.decode_floor_ms",
            t.decode_floor_ms != d.decode_floor_ms,
            format!("{:?}", t.decode_floor_ms),
            TimingKind::Steps,
        ),
        (
            "timing.profile",
            t.profile.is_some(),
            format!("{:?}", t.profile.as_deref().unwrap_or("")),
            TimingKind::Roofline,
        ),
        (
            "timing.protocol",
            t.protocol.is_some(),
            format!("{:?}", t.protocol.as_deref().unwrap_or("")),
            TimingKind::Roofline,
        ),
    ];
    match settings
        .into_iter()
        .find(|(_, changed, _, model)| *changed && *model != kind)
    {
        Some((key, _, value, model)) => Err(Invalid::new(
            key,
            value,
            &format!(
                "only applies to timing.model = \"{}\", and this scenario's model is \"{}\"",
                model.name(),
                kind.name()
            ),
        )),
        None => Ok(()),
    }
}

/// SGLang's chunk `c` (-1: none) on workers of `gpu` is whole pages of the scenario's blocks.
fn whole_pages(
    s: &Scenario,
    c: i64,
    gpu: Option<&crate::deployment::gpu::GpuSpec>,
) -> Result<(), Invalid> {
    let bs = s.block_size() as i64;
    if c == -1 || (c > 0 && c % bs == 0) {
        return Ok(());
    }
    Err(match s.engine.sglang.chunked_prefill_size {
        Auto::Derived => Invalid::new(
            "engine.sglang.chunked_prefill_size",
            "\"auto\"",
            &format!(
                "is {c} ({}), which is not whole pages of cluster.block_size ({bs}): set a \
                 multiple of it, or -1 for no chunking",
                gpu.map_or("without a deployment, Dynamo's mocker's".to_string(), |g| {
                    format!("SGLang's default on {}", g.name)
                })
            ),
        ),
        Auto::Set(_) => Invalid::new(
            "engine.sglang.chunked_prefill_size",
            c,
            &format!(
                "must be a positive multiple of cluster.block_size ({bs}: whole pages), or -1 \
                 for no chunking"
            ),
        ),
    })
}

/// `[engine.sglang]`'s values (SGLang's own checks, and the crate's: a chunk of whole pages).
fn sglang_settings(s: &Scenario) -> Result<(), Invalid> {
    let g = &s.engine.sglang;
    if let Auto::Set(n) = g.max_running_requests {
        limit("engine.sglang.max_running_requests", n)?;
    }
    if g.cuda_graph_max_bs == Auto::Set(0) {
        return Err(Invalid::new(
            "engine.sglang.cuda_graph_max_bs",
            0,
            "must be at least 1, or \"auto\"",
        ));
    }
    if s.engine.kind == EngineKind::Sglang {
        // The chunk each pool's workers take (SGLang's default follows their GPU).
        let gpus: Vec<_> = if s.has_deployment() {
            s.pools()
                .iter()
                .filter_map(|&p| s.deployment_of(p))
                .map(|d| crate::deployment::gpu::find(&d.gpu))
                .collect()
        } else {
            vec![None]
        };
        for gpu in gpus {
            whole_pages(s, s.sglang_chunked_prefill_size(gpu), gpu)?;
        }
    }
    if g.max_prefill_tokens == 0 {
        return Err(Invalid::new(
            "engine.sglang.max_prefill_tokens",
            0,
            "must be at least 1",
        ));
    }
    let k = g.schedule_conservativeness;
    if !(k.is_finite() && k >= 0.0) {
        return Err(Invalid::new(
            "engine.sglang.schedule_conservativeness",
            format!("{k:?}"),
            "must be a finite number, 0 or more",
        ));
    }
    Ok(())
}

/// A setting of an engine the scenario does not run must keep its default: refused rather than
/// ignored.
fn inactive_engine(s: &Scenario) -> Result<(), Invalid> {
    let kind = s.engine.kind;
    let (v, dv) = (&s.engine.vllm, VllmSettings::default());
    let (t, dt) = (&s.engine.trtllm, TrtllmSettings::default());
    let (g, dg) = (&s.engine.sglang, SglangSettings::default());
    let settings = [
        (
            "engine.vllm.gpu_memory_utilization",
            v.gpu_memory_utilization != dv.gpu_memory_utilization,
            shown(&v.gpu_memory_utilization),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.max_num_seqs",
            v.max_num_seqs != dv.max_num_seqs,
            shown(&v.max_num_seqs),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.max_num_batched_tokens",
            v.max_num_batched_tokens != dv.max_num_batched_tokens,
            shown(&v.max_num_batched_tokens),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.chunked_prefill",
            v.chunked_prefill != dv.chunked_prefill,
            shown(&v.chunked_prefill),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.preemption",
            v.preemption != dv.preemption,
            shown(&v.preemption),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.admission",
            v.admission != dv.admission,
            shown(&v.admission),
            EngineKind::Vllm,
        ),
        (
            "engine.vllm.decode_stretches",
            v.decode_stretches != dv.decode_stretches,
            shown(&v.decode_stretches),
            EngineKind::Vllm,
        ),
        (
            "engine.trtllm.free_gpu_memory_fraction",
            t.free_gpu_memory_fraction != dt.free_gpu_memory_fraction,
            shown(&t.free_gpu_memory_fraction),
            EngineKind::Trtllm,
        ),
        (
            "engine.trtllm.max_batch_size",
            t.max_batch_size != dt.max_batch_size,
            shown(&t.max_batch_size),
            EngineKind::Trtllm,
        ),
        (
            "engine.trtllm.max_num_tokens",
            t.max_num_tokens != dt.max_num_tokens,
            shown(&t.max_num_tokens),
            EngineKind::Trtllm,
        ),
        (
            "engine.trtllm.enable_chunked_prefill",
            t.enable_chunked_prefill != dt.enable_chunked_prefill,
            shown(&t.enable_chunked_prefill),
            EngineKind::Trtllm,
        ),
        (
            "engine.sglang.mem_fraction_static",
            g.mem_fraction_static != dg.mem_fraction_static,
            shown(&g.mem_fraction_static),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.cuda_graph_max_bs",
            g.cuda_graph_max_bs != dg.cuda_graph_max_bs,
            shown(&g.cuda_graph_max_bs),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.schedule_policy",
            g.schedule_policy != dg.schedule_policy,
            shown(&g.schedule_policy),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.max_running_requests",
            g.max_running_requests != dg.max_running_requests,
            shown(&g.max_running_requests),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.chunked_prefill_size",
            g.chunked_prefill_size != dg.chunked_prefill_size,
            shown(&g.chunked_prefill_size),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.max_prefill_tokens",
            g.max_prefill_tokens != dg.max_prefill_tokens,
            shown(&g.max_prefill_tokens),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.schedule_conservativeness",
            g.schedule_conservativeness != dg.schedule_conservativeness,
            shown(&g.schedule_conservativeness),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.enable_mixed_chunk",
            g.enable_mixed_chunk != dg.enable_mixed_chunk,
            shown(&g.enable_mixed_chunk),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.max_prefill_tokens_charge",
            g.max_prefill_tokens_charge != dg.max_prefill_tokens_charge,
            shown(&g.max_prefill_tokens_charge),
            EngineKind::Sglang,
        ),
        (
            "engine.sglang.recheck_locked_prefix",
            g.recheck_locked_prefix != dg.recheck_locked_prefix,
            shown(&g.recheck_locked_prefix),
            EngineKind::Sglang,
        ),
    ];
    match settings
        .into_iter()
        .find(|(_, changed, _, engine)| *changed && *engine != kind)
    {
        Some((key, _, value, engine)) => Err(Invalid::new(
            key,
            value,
            &format!(
                "only applies to engine.kind = \"{}\", and this scenario's engine is \"{}\"",
                engine.name(),
                kind.name()
            ),
        )),
        None => Ok(()),
    }
}

/// A setting's value as TOML writes it.
fn shown<T: serde::Serialize>(value: &T) -> String {
    toml::Value::try_from(value).map_or_else(|_| String::new(), |v| v.to_string())
}

/// `[deployment]` and `[engine]`: what a deployment derives may not also be set by hand, and
/// every pool's deployment must resolve (its model and GPU known, its weights and one request of
/// `max_model_len` fitting); model and profile files are read from `base_dir` when given.
fn validate_deployment(s: &Scenario, base_dir: Option<&Path>) -> Result<(), Invalid> {
    for (key, u, problem) in [
        (
            "engine.vllm.gpu_memory_utilization",
            Some(s.engine.vllm.gpu_memory_utilization),
            "must be in (0, 1]",
        ),
        (
            "engine.trtllm.free_gpu_memory_fraction",
            Some(s.engine.trtllm.free_gpu_memory_fraction),
            "must be in (0, 1]",
        ),
        (
            "engine.sglang.mem_fraction_static",
            s.engine.sglang.mem_fraction_static.set(),
            "must be in (0, 1], or \"auto\"",
        ),
    ] {
        if let Some(u) = u.filter(|u| !(u.is_finite() && *u > 0.0 && *u <= 1.0)) {
            return Err(Invalid::new(key, format!("{u:?}"), problem));
        }
    }
    let d = &s.disagg;
    if !d.enabled {
        for (key, given) in [
            ("disagg.prefill_deployment", d.prefill_deployment.is_some()),
            ("disagg.decode_deployment", d.decode_deployment.is_some()),
        ] {
            if given {
                return Err(Invalid::new(
                    key,
                    "",
                    "only applies with disagg.enabled = true (use [deployment] otherwise)",
                ));
            }
        }
    }
    if s.has_deployment() {
        if let Limit::Count(n) = s.cluster.kv_capacity_blocks {
            return Err(Invalid::new(
                "cluster.kv_capacity_blocks",
                n,
                "is derived from the [deployment] (the KV its engine finds in memory): remove it, \
                 or tune the engine's memory share (engine.vllm.gpu_memory_utilization, \
                 engine.trtllm.free_gpu_memory_fraction, engine.sglang.mem_fraction_static) or \
                 deployment.kv_dtype",
            ));
        }
        if d.model != crate::disagg::ModelShape::default() {
            return Err(Invalid::new(
                "disagg.model.layers",
                d.model.layers,
                "is derived from the [deployment]'s model: remove [disagg.model]",
            ));
        }
        if s.disagg.enabled && s.deployment_of(super::Pool::Prefill).is_none() {
            return Err(Invalid::new(
                "disagg.prefill_deployment",
                "",
                "is needed: the decode workers have a deployment, so the prefill workers need one \
                 too ([deployment] for both, or [disagg.prefill_deployment])",
            ));
        }
        if s.disagg.enabled && !s.disagg.colocated && s.deployment_of(super::Pool::Decode).is_none()
        {
            return Err(Invalid::new(
                "disagg.decode_deployment",
                "",
                "is needed: the prefill workers have a deployment, so the decode workers need one \
                 too ([deployment] for both, or [disagg.decode_deployment])",
            ));
        }
    }
    let resolved = super::deploy::resolve(s, base_dir)?;
    tiers_hold_a_block(s, &resolved)
}

/// A tier sized in GB that holds less than one block of the model's KV would hold nothing (a
/// host tier of 0 blocks drops, and so writes to disk, nothing): refused, with the block's size.
fn tiers_hold_a_block(s: &Scenario, resolved: &super::deploy::Resolved) -> Result<(), Invalid> {
    let deployments = [&resolved.workers, &resolved.prefill, &resolved.decode];
    let Some(bytes_per_token) = deployments
        .into_iter()
        .flatten()
        .map(|d| d.kv_bytes_per_token)
        .max()
    else {
        return Ok(());
    };
    let block_bytes = bytes_per_token.saturating_mul(s.block_size() as u64);
    for (name, tier) in [("host", &s.kv.host), ("disk", &s.kv.disk)] {
        let Some(gb) = tier.as_ref().and_then(|t| t.capacity_gb) else {
            continue;
        };
        if gb > 0.0 && gb * 1e9 < block_bytes as f64 {
            return Err(Invalid::new(
                &format!("kv.{name}.capacity_gb"),
                format!("{gb:?}"),
                &format!(
                    "holds no block: one block of {} tokens of the model's KV takes {block_bytes} \
                     bytes ({} GB); give at least that, or 0 for no tier",
                    s.block_size(),
                    block_bytes as f64 / 1e9
                ),
            ));
        }
    }
    Ok(())
}

/// A router timer `key` of `x` ms at least [`MIN_STREAM_TIMER_MS`]: it ticks for the whole run
/// (`why`), so a shorter one only costs the run time. `or` names what else the key may be.
fn timer_floor(key: &str, x: f64, or: &str, why: &str) -> Result<(), Invalid> {
    if x >= MIN_STREAM_TIMER_MS {
        return Ok(());
    }
    Err(Invalid::new(
        key,
        format!("{x:?}"),
        &format!(
            "must be {or}at least {MIN_STREAM_TIMER_MS} ms ({why}, so a shorter one only costs \
             the run time)"
        ),
    ))
}

/// `[router]`: a known policy, and every `[router.NAME]` table a known policy's valid settings.
fn validate_router(s: &Scenario) -> Result<(), Invalid> {
    let r = &s.router;
    time_ms("router.signal_refresh_ms", r.signal_refresh_ms)?;
    // The refresh ticks at this interval for the whole run: at 1e-6 ms a 711 ms run took 4 to
    // 6 s, and 0 is already exact at each decision.
    if r.signal_refresh_ms > 0.0 {
        timer_floor(
            "router.signal_refresh_ms",
            r.signal_refresh_ms,
            "0 (exact at each decision) or ",
            "the router refreshes its snapshot of the workers' signals at this interval",
        )?;
    }
    for (key, x) in [
        ("router.gap_silence_ms", r.gap_silence_ms),
        ("router.recovery_timeout_ms", r.recovery_timeout_ms),
        ("router.fallback_ttl_ms", r.fallback_ttl_ms),
    ] {
        time_ms(key, x)?;
    }
    for (key, x) in [
        ("router.gap_silence_ms", r.gap_silence_ms),
        ("router.recovery_timeout_ms", r.recovery_timeout_ms),
    ] {
        positive(key, x)?;
        // The stream check ticks at half the shorter of the two while requests are open: at
        // 1e-9 ms a ten-second run took 10^10 ticks and never ended.
        timer_floor(
            key,
            x,
            "",
            "the router checks its KV event streams every half of the shorter of \
             gap_silence_ms and recovery_timeout_ms while requests are open",
        )?;
    }
    at_least_one("router.replicas", r.replicas)?;
    at_most("router.replicas", r.replicas, MAX_REPLICAS)?;
    let known = || registry::names().join(", ");
    if registry::entry(&r.policy).is_none() {
        return Err(Invalid::new(
            "router.policy",
            format!("{:?}", r.policy),
            &format!("is not a policy (one of {})", known()),
        ));
    }
    let workers = routable_workers(s);
    for (name, value) in &r.settings {
        let Some(entry) = registry::entry(name) else {
            let moved = match name.as_str() {
                "overlap_weight" | "temperature" => Some("cost"),
                "ttl_s" => Some("approx"),
                _ => None,
            };
            let problem = match moved {
                Some(p) => format!("moved to the policy's own table: [router.{p}] {name} = ..."),
                None => format!(
                    "is not a [router] setting (policy, load, signal_refresh_ms, on_gap, \
                     gap_silence_ms, recovery_timeout_ms, fallback_ttl_ms, replicas, spread, sync, \
                     audit_index, attribute_misses) nor a policy's table (one of {})",
                    known()
                ),
            };
            return Err(Invalid::new(&format!("router.{name}"), value, &problem));
        };
        let setup = PolicySetup {
            name: entry.name,
            workers,
            block_size: s.block_size(),
            kv_capacity_blocks: s.cluster.kv_capacity_blocks.count(),
            settings: Some(value),
        };
        (entry.build)(&setup)?;
    }
    // A refresh period with a policy that reads no signals would silently do nothing.
    if r.signal_refresh_ms != 0.0 && !registry::reads_signals(&r.policy, r.settings.get(&r.policy))
    {
        let readers: Vec<&str> = registry::names()
            .into_iter()
            .filter(|n| registry::reads_signals(n, None))
            .collect();
        return Err(Invalid::new(
            "router.signal_refresh_ms",
            format!("{:?}", r.signal_refresh_ms),
            &format!(
                "has no effect: router.policy = {:?} reads no load signals (those that do: \
                 {}); remove it or set it to 0",
                r.policy,
                readers.join(", ")
            ),
        ));
    }
    // So would a load kind with a policy that never reads it.
    if r.load != LoadKind::default()
        && !registry::reads_load_kind(&r.policy, r.settings.get(&r.policy))
    {
        let readers: Vec<&str> = registry::names()
            .into_iter()
            .filter(|n| registry::reads_load_kind(n, None))
            .collect();
        return Err(Invalid::new(
            "router.load",
            "\"in-flight\"".to_string(),
            &format!(
                "has no effect: router.policy = {:?} does not read router.load (those that do: \
                 {}); remove it or set it to \"routed\"",
                r.policy,
                readers.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The number of workers the router routes to (prefill workers when disaggregated), slots of a
/// pool that scales included.
pub fn routable_workers(s: &Scenario) -> usize {
    if s.disagg.enabled && s.disagg.colocated {
        s.disagg.prefill_workers
    } else if s.disagg.enabled {
        s.pool_slots(super::Pool::Prefill)
    } else {
        s.pool_slots(super::Pool::Workers)
    }
}
