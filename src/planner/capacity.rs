//! A pool's capacity, from `bench` predictions of its own deployment: where Dynamo's planner
//! reads a pre-deployment profiling run (`planner/utils/perf_interpolation.py` at ai-dynamo/dynamo
//! 0dcef4ef: prefill TTFT and throughput per GPU by prompt length; decode ITL and throughput per
//! GPU by KV load and context), dynsim predicts the same closed-loop benchmark `dynsim bench`
//! runs (random prompts of the interval's mean length, 20 requests per client) on one worker of
//! the pool, at 1, 2, 4, ... clients until the SLA breaks.
//!
//! A profile is made for a prompt and output length rounded to a quarter-octave
//! ([`bucket`]), so that a day of slowly moving means asks for a handful of them.

use crate::scenario::Pool;

/// One benchmark point: `concurrency` clients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchPoint {
    /// Clients.
    pub concurrency: usize,
    /// TTFT p90, ms.
    pub ttft_p90_ms: f64,
    /// ITL p90, ms.
    pub itl_p90_ms: f64,
    /// Requests per second.
    pub rps: f64,
    /// Output tokens per second.
    pub output_tps: f64,
}

/// A worker's benchmark at one prompt and output length, by increasing concurrency.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchProfile {
    /// Prompt tokens.
    pub isl: u32,
    /// Output tokens.
    pub osl: u32,
    /// GPUs per worker.
    pub gpus: u64,
    /// The points, concurrency increasing (at least one).
    pub points: Vec<BenchPoint>,
}

impl BenchProfile {
    /// The most requests per second one worker serves with TTFT p90 and ITL p90 within the
    /// targets (the lowest concurrency's when none meets them: Dynamo then plans with its best
    /// and warns).
    pub fn capacity_rps(&self, ttft_ms: f64, itl_ms: f64) -> f64 {
        self.points
            .iter()
            .filter(|p| p.ttft_p90_ms <= ttft_ms && p.itl_p90_ms <= itl_ms)
            .map(|p| p.rps)
            .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
            .unwrap_or(self.points[0].rps)
    }

    /// The TTFT p90 of a lone request, ms (what the prefill correction compares with).
    pub fn expected_ttft_ms(&self) -> f64 {
        self.points[0].ttft_p90_ms
    }

    /// The ITL p90 at `concurrency` requests in flight, ms, interpolated linearly between
    /// points (held beyond them).
    pub fn expected_itl_ms(&self, concurrency: f64) -> f64 {
        let p = &self.points;
        let k = p.partition_point(|q| (q.concurrency as f64) <= concurrency);
        if k == 0 {
            return p[0].itl_p90_ms;
        }
        if k == p.len() {
            return p[k - 1].itl_p90_ms;
        }
        let (a, b) = (p[k - 1], p[k]);
        let f = (concurrency - a.concurrency as f64) / (b.concurrency - a.concurrency) as f64;
        a.itl_p90_ms + f * (b.itl_p90_ms - a.itl_p90_ms)
    }

    /// Output tokens per second per GPU at the highest load whose ITL p90 is within `itl_ms`
    /// (Dynamo's `find_best_throughput_per_gpu`; the lowest load's when none is).
    pub fn decode_tps_per_gpu(&self, itl_ms: f64) -> f64 {
        let best = self
            .points
            .iter()
            .rev()
            .find(|p| p.itl_p90_ms <= itl_ms)
            .unwrap_or(&self.points[0]);
        best.output_tps / self.gpus as f64
    }

    /// Prompt tokens per second per GPU of a lone prefill (Dynamo's prefill profile:
    /// `isl / ttft / GPUs`).
    pub fn prefill_tps_per_gpu(&self) -> f64 {
        f64::from(self.isl) / (self.expected_ttft_ms() / 1e3) / self.gpus as f64
    }
}

/// What computes a pool's profile (the run, by simulation).
pub trait Profiler {
    /// The benchmark of one worker of `pool` at `isl` prompt and `osl` output tokens, at
    /// 1, 2, 4, ... clients until TTFT p90 passes `ttft_ms` or ITL p90 passes `itl_ms` (or the
    /// engine's limit); `None` when it cannot be run (the error is kept for the run).
    fn profile(
        &mut self,
        pool: Pool,
        isl: u32,
        osl: u32,
        ttft_ms: f64,
        itl_ms: f64,
    ) -> Option<BenchProfile>;
}

/// `x` rounded to a quarter-octave (2^(k/4)), at least 1: the lengths profiles are made at.
pub fn bucket(x: f64) -> u32 {
    if !(x.is_finite() && x > 1.0) {
        return 1;
    }
    let k = (4.0 * x.log2()).round();
    (2f64.powf(k / 4.0).round() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> BenchProfile {
        let p = |c, ttft, itl, rps, tps| BenchPoint {
            concurrency: c,
            ttft_p90_ms: ttft,
            itl_p90_ms: itl,
            rps,
            output_tps: tps,
        };
        BenchProfile {
            isl: 1000,
            osl: 100,
            gpus: 2,
            points: vec![
                p(1, 100.0, 10.0, 1.0, 100.0),
                p(2, 150.0, 12.0, 1.8, 180.0),
                p(4, 300.0, 20.0, 3.0, 300.0),
            ],
        }
    }

    #[test]
    fn capacity_reads_the_highest_point_within_the_targets() {
        let p = profile();
        assert_eq!(p.capacity_rps(200.0, 15.0), 1.8);
        assert_eq!(p.capacity_rps(1000.0, 100.0), 3.0);
        assert_eq!(
            p.capacity_rps(50.0, 100.0),
            1.0,
            "none meets it: the lone request's"
        );
        assert_eq!(
            p.expected_itl_ms(3.0),
            16.0,
            "halfway between 2 and 4 clients"
        );
        assert_eq!(p.decode_tps_per_gpu(12.5), 90.0);
        // 1,000 tokens in 100 ms on 2 GPUs: 5,000 tokens/s per GPU.
        assert_eq!(p.prefill_tps_per_gpu(), 5000.0);
        assert_eq!(
            (bucket(1000.0), bucket(1100.0), bucket(0.3)),
            (1024, 1024, 1)
        );
    }
}
