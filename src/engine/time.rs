//! Virtual time: integer nanoseconds, never floating point, so that orderings are exact.

/// Virtual time and durations, in nanoseconds.
pub type Nanos = u64;

/// The end of virtual time, 2^63 ns (about 292 years): nothing is delivered at or after it.
/// Every time a setting or a workload may name is at most 1e12 ms (1e18 ns), so an actor may add
/// any of them to the current time without overflowing 64 bits.
pub const END_OF_TIME: Nanos = 1 << 63;

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
