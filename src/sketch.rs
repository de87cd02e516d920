//! A bounded, mergeable summary of a distribution of durations with weights: a log-linear
//! histogram (the layout of HdrHistogram) whose quantiles are within 0.05 % of the exact value,
//! whatever the number of samples, with an exact count, mean, minimum and maximum.
//!
//! Inter-token latencies come in millions per run, many of them equal (every request in a decode
//! step sees the same gap), so they are summarised here rather than kept one by one.

/// Relative accuracy of [`LogHistogram::quantile`] (a bound: buckets are 2^-10 wide relative
/// to their value, and a quantile is its bucket's middle).
pub const RELATIVE_ACCURACY: f64 = 0.001;

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;

/// Weighted samples of non-negative integers (durations in ns), summarised.
#[derive(Clone, Debug, Default)]
pub struct LogHistogram {
    /// Weights by bucket, from bucket `first` on: values below 2^10 have a bucket each; above,
    /// each power of two is cut into 2^10 equal buckets. Only the span from the lowest bucket
    /// added to the highest is kept: gaps between tokens fill a few powers of two far from zero,
    /// so a histogram from bucket 0 would be 200-odd KiB, mostly zeros, and its few written
    /// lines would lie pages apart.
    buckets: Vec<u64>,
    /// The bucket `buckets[0]` counts.
    first: usize,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

fn bucket_of(value: u64) -> usize {
    if value < SUB {
        return value as usize;
    }
    let top = 63 - value.leading_zeros(); // >= SUB_BITS
    let shift = top - SUB_BITS;
    let sub = (value >> shift) & (SUB - 1);
    (((u64::from(shift) + 1) << SUB_BITS) | sub) as usize
}

/// One histogram several owners add to: the cluster's inter-token gaps, which every worker's
/// engine adds to (one histogram a few tens of KiB, instead of one per worker, which at hundreds
/// of workers no longer fit a core's cache), read once by the report.
pub type SharedHistogram = std::rc::Rc<std::cell::RefCell<LogHistogram>>;

/// The middle of bucket `index`'s range.
fn middle_of(index: usize) -> f64 {
    let index = index as u64;
    if index < SUB {
        return index as f64;
    }
    let shift = (index >> SUB_BITS) - 1;
    let low = (SUB | (index & (SUB - 1))) << shift;
    low as f64 + ((1u64 << shift) as f64 - 1.0) / 2.0
}

impl PartialEq for LogHistogram {
    /// Equal summaries: the same weights in the same buckets (empty buckets aside).
    fn eq(&self, other: &Self) -> bool {
        self.weights().eq(other.weights())
            && (self.count, self.sum, self.min, self.max)
                == (other.count, other.sum, other.min, other.max)
    }
}

impl LogHistogram {
    /// Widens the kept span to cover buckets `from..to` (not empty), with zero weights.
    #[cold]
    fn cover(&mut self, from: usize, to: usize) {
        if self.buckets.is_empty() {
            self.first = from;
            self.buckets.resize(to - from, 0);
            return;
        }
        if from < self.first {
            let more = self.first - from;
            self.buckets.splice(0..0, std::iter::repeat_n(0, more));
            self.first = from;
        }
        if to > self.first + self.buckets.len() {
            self.buckets.resize(to - self.first, 0);
        }
    }

    /// Every bucket's (index, weight) with a weight, in order of index.
    fn weights(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0)
            .map(|(k, &w)| (self.first + k, w))
    }

    /// Adds `value` with weight `weight` (a weight of 0 adds nothing).
    pub fn add(&mut self, value: u64, weight: u64) {
        if weight == 0 {
            return;
        }
        let index = bucket_of(value);
        // One bound check when the bucket is kept (below `first`, the difference wraps past it).
        match self.buckets.get_mut(index.wrapping_sub(self.first)) {
            Some(w) => *w += weight,
            None => {
                self.cover(index, index + 1);
                self.buckets[index - self.first] += weight;
            }
        }
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += weight;
        self.sum += u128::from(value) * u128::from(weight);
    }
}

impl std::ops::AddAssign<&LogHistogram> for LogHistogram {
    /// Adds every sample of `other`.
    fn add_assign(&mut self, other: &LogHistogram) {
        if other.count == 0 {
            return;
        }
        if !other.buckets.is_empty() {
            self.cover(other.first, other.first + other.buckets.len());
            let at = other.first - self.first;
            for (mine, theirs) in self.buckets[at..].iter_mut().zip(&other.buckets) {
                *mine += theirs;
            }
        }
        if self.count == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.sum += other.sum;
    }
}

impl LogHistogram {
    /// Total weight.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The exact weighted mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0..=1): the sample of rank `q·(count − 1)` (0-based, rounded
    /// down), to within [`RELATIVE_ACCURACY`]; exact at the extremes. 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = (q.clamp(0.0, 1.0) * (self.count - 1) as f64).floor() as u64;
        if rank == 0 {
            return self.min as f64;
        }
        if rank == self.count - 1 {
            return self.max as f64;
        }
        let mut seen = 0;
        for (k, &w) in self.buckets.iter().enumerate() {
            seen += w;
            if seen > rank {
                return middle_of(self.first + k).clamp(self.min as f64, self.max as f64);
            }
        }
        self.max as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_the_stated_accuracy() {
        let mut h = LogHistogram::default();
        let mut exact = Vec::new();
        let mut x: u64 = 12345;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let v = 1_000_000 + (x >> 20) % 50_000_000; // 1 to 51 ms in ns
            h.add(v, 1);
            exact.push(v);
        }
        exact.sort_unstable();
        for q in [0.5, 0.9, 0.99] {
            let want = exact[(q * (exact.len() - 1) as f64) as usize] as f64;
            let got = h.quantile(q);
            assert!(
                (got - want).abs() <= want * RELATIVE_ACCURACY * 1.01,
                "q {q}: {got} vs {want}"
            );
        }
        let mean = exact.iter().sum::<u64>() as f64 / exact.len() as f64;
        assert!((h.mean() - mean).abs() < 1e-6);
        assert_eq!(h.quantile(0.0), exact[0] as f64);
        assert_eq!(h.quantile(1.0), *exact.last().unwrap() as f64);
    }

    #[test]
    fn weights_count_like_repeated_samples_and_merge_adds() {
        let mut a = LogHistogram::default();
        a.add(5_000_000, 3);
        a.add(0, 1);
        let mut b = LogHistogram::default();
        for _ in 0..3 {
            b.add(5_000_000, 1);
        }
        b.add(0, 1);
        assert_eq!(a, b);
        let mut m = LogHistogram::default();
        m += &a;
        m += &b;
        assert_eq!((m.count(), m.quantile(0.0)), (8, 0.0));
        assert!((m.quantile(0.5) - 5e6).abs() < 5e6 * RELATIVE_ACCURACY);
        assert_eq!(LogHistogram::default().quantile(0.5), 0.0);
    }

    #[test]
    fn keeps_only_the_span_it_was_given_and_merges_spans_either_side() {
        // Values added high then low, and merges of spans below, above and apart: the same
        // summary as one histogram of every value, which keeps only the span it needs.
        let values = [40_000_000u64, 5_000_000, 39_000_000, 7, 1 << 40, 5_000_000];
        let mut all = LogHistogram::default();
        for (k, &v) in values.iter().enumerate() {
            all.add(v, k as u64 + 1);
        }
        let mut high = LogHistogram::default();
        high.add(40_000_000, 1);
        assert_eq!(
            high.buckets.len(),
            1,
            "one bucket, not every bucket below it"
        );
        high.add(39_000_000, 3);
        let mut low = LogHistogram::default();
        low.add(5_000_000, 2);
        low.add(7, 4);
        low.add(5_000_000, 6);
        let mut far = LogHistogram::default();
        far.add(1 << 40, 5);
        let mut merged = LogHistogram::default();
        merged += &high;
        merged += &far;
        merged += &LogHistogram::default();
        merged += &low;
        assert_eq!(merged, all);
        for q in [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] {
            assert_eq!(merged.quantile(q), all.quantile(q), "q {q}");
        }
        assert_eq!(all.quantile(0.5), middle_of(bucket_of(5_000_000)));
        assert_eq!(all.first, bucket_of(7));
    }

    #[test]
    fn every_value_falls_in_a_bucket_whose_middle_is_close() {
        for v in (0..5000u64).chain((10..60).map(|e| (1u64 << e) + 12345)) {
            let mid = middle_of(bucket_of(v));
            assert!(
                (mid - v as f64).abs() <= v as f64 * 0.0005 + 0.5,
                "{v}: {mid}"
            );
        }
    }
}
