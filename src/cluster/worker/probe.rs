//! A feature clock: a worker's time kept, beside nanoseconds, as the sum of its steps' roofline
//! features ([`crate::deployment::features::Features`]), for `dynsim calibrate`.
//!
//! A roofline step lasts `coefficients · features`, so a stretch of steps lasts the coefficients
//! dotted with their features' sum. Stamping each request with the clock's reading when it joins
//! the queue, when its first token comes and when its last does gives its TTFT and TPOT as
//! linear functions of the coefficients: with the schedule the run took, any other coefficients
//! would give `coefficients · features` (exactly when the schedule does not depend on the step
//! times; calibration re-runs with its fit until it no longer moves). A reading inside a step
//! counts the step's features in proportion to the time elapsed.

use std::collections::HashMap;

use crate::deployment::features::{Features, FEATURES};
use crate::engine::Nanos;
use crate::hashers::IdBuilder;
use crate::ids::RequestId;

/// What the clock found over the requests it saw complete.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FeatureTotals {
    /// Requests with a first token.
    pub ttft_requests: u64,
    /// Σ over them of the features from joining the queue to the first token.
    pub ttft: Features,
    /// Requests with two tokens or more.
    pub tpot_requests: u64,
    /// Σ over them of the features from the first token to the last, over output tokens − 1.
    pub tpot: Features,
}

impl std::ops::AddAssign<&FeatureTotals> for FeatureTotals {
    /// Adds `other`'s sums to these.
    fn add_assign(&mut self, other: &FeatureTotals) {
        self.ttft_requests += other.ttft_requests;
        self.tpot_requests += other.tpot_requests;
        for k in 0..FEATURES {
            self.ttft[k] += other.ttft[k];
            self.tpot[k] += other.tpot[k];
        }
    }
}

/// A worker's feature clock.
#[derive(Debug, Default)]
pub struct FeatureClock {
    /// Σ features of the steps that ended.
    done: Features,
    /// The plan in progress: when it started, and each step's end and features.
    start: Nanos,
    steps: Vec<(Nanos, Features)>,
    /// Readings at joining the queue and at the first token, by request.
    joined: HashMap<RequestId, Features, IdBuilder>,
    first: HashMap<RequestId, Features, IdBuilder>,
    totals: FeatureTotals,
}

fn add(a: &mut Features, b: &Features, scale: f64) {
    for k in 0..FEATURES {
        a[k] += b[k] * scale;
    }
}

impl FeatureClock {
    /// A plan starting at `start` with steps ending at `ends`, of these features.
    pub fn planned(
        &mut self,
        start: Nanos,
        ends: &[Nanos],
        features: impl Iterator<Item = Features>,
    ) {
        self.start = start;
        self.steps.clear();
        self.steps.extend(ends.iter().copied().zip(features));
    }

    /// The plan was cut after its first `keep` steps.
    pub fn truncated(&mut self, keep: usize) {
        self.steps.truncate(keep);
    }

    /// The plan ended: its steps' features are done.
    pub fn applied(&mut self) {
        for (_, f) in std::mem::take(&mut self.steps) {
            add(&mut self.done, &f, 1.0);
        }
    }

    /// The reading at `now`: the ended steps', and the step in progress in proportion.
    fn at(&self, now: Nanos) -> Features {
        let mut f = self.done;
        let mut from = self.start;
        for (end, step) in &self.steps {
            if now >= *end {
                add(&mut f, step, 1.0);
            } else {
                if now > from {
                    add(&mut f, step, (now - from) as f64 / (end - from) as f64);
                }
                break;
            }
            from = *end;
        }
        f
    }

    /// Request `id` joined the queue at `now`.
    pub fn joined(&mut self, id: RequestId, now: Nanos) {
        let reading = self.at(now);
        self.joined.insert(id, reading);
    }

    /// Request `id` produced its first token at the end of the plan just applied.
    pub fn first_token(&mut self, id: RequestId) {
        if let Some(j) = self.joined.remove(&id) {
            let mut d = self.done;
            add(&mut d, &j, -1.0);
            add(&mut self.totals.ttft, &d, 1.0);
            self.totals.ttft_requests += 1;
            self.first.insert(id, self.done);
        }
    }

    /// Request `id` produced its last (`generated`-th) token at the end of the plan just
    /// applied.
    pub fn finished(&mut self, id: RequestId, generated: u64) {
        self.joined.remove(&id);
        if let Some(f) = self.first.remove(&id) {
            if generated >= 2 {
                let mut d = self.done;
                add(&mut d, &f, -1.0);
                add(&mut self.totals.tpot, &d, 1.0 / (generated - 1) as f64);
                self.totals.tpot_requests += 1;
            }
        }
    }

    /// What it found.
    pub fn totals(&self) -> &FeatureTotals {
        &self.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> Features {
        let mut a = [0.0; FEATURES];
        a[0] = x;
        a
    }

    #[test]
    fn readings_count_steps_in_progress_in_proportion() {
        let mut c = FeatureClock::default();
        c.planned(100, &[200, 400], [f(1.0), f(4.0)].into_iter());
        c.joined(RequestId(7), 300); // the first step, half the second
        c.applied();
        c.first_token(RequestId(7));
        assert_eq!(c.totals().ttft[0], 5.0 - 3.0);
        c.planned(400, &[500], [f(2.0)].into_iter());
        c.applied();
        c.finished(RequestId(7), 3); // two gaps over 2.0
        assert_eq!(c.totals().tpot[0], 1.0);
        assert_eq!((c.totals().ttft_requests, c.totals().tpot_requests), (1, 1));
    }

    #[test]
    fn a_cut_plan_counts_only_the_steps_it_kept() {
        let mut c = FeatureClock::default();
        c.planned(0, &[10, 20, 30], [f(1.0), f(1.0), f(1.0)].into_iter());
        c.truncated(1);
        c.applied();
        c.joined(RequestId(1), 10);
        c.planned(10, &[25], [f(3.0)].into_iter());
        c.applied();
        c.first_token(RequestId(1));
        assert_eq!(c.totals().ttft[0], 3.0);
    }
}
