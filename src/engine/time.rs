//! Virtual time: integer nanoseconds, never floating point, so that orderings are exact.

/// Virtual time and durations, in nanoseconds.
pub type Nanos = u64;

/// Converts milliseconds to whole virtual nanoseconds (rounded to nearest; negative gives 0,
/// beyond `u64::MAX` ns saturates: callers bound their inputs first).
pub fn ms_to_ns(ms: f64) -> Nanos {
    (ms * 1e6).round().max(0.0) as Nanos
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
