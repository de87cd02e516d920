//! Virtual time: integer nanoseconds, never floating point, so that orderings are exact.

/// Virtual time and durations, in nanoseconds.
pub type Nanos = u64;

/// Converts milliseconds to whole virtual nanoseconds (rounded to nearest, halves up; negative
/// or NaN gives 0, beyond `u64::MAX` ns saturates: callers bound their inputs first).
pub fn ms_to_ns(ms: f64) -> Nanos {
    let ns = ms * 1e6;
    // Adding a half and truncating is round-to-nearest for non-negative values, without a
    // library call (every decode step converts one).
    if ns > 0.0 {
        (ns + 0.5) as Nanos
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_round_to_the_nearest_nanosecond() {
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(0.000_000_4), 0);
        assert_eq!(ms_to_ns(0.000_000_6), 1);
        assert_eq!(ms_to_ns(-3.0), 0);
    }
}
