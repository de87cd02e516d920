//! Python-compatible rounding for the lab's output formats.

/// Rounds `x` to `digits` decimals exactly as Python's `round(x, digits)` does: half-to-even on the
/// exact binary value (`0.40625` is exactly representable and a tie, so it gives `0.4062`;
/// `0.15` is slightly below the tie, so it gives `0.1`).
///
/// Rust's `{:.N}` formatting rounds the exact binary value half-to-even, the same rule as
/// CPython's `_Py_dg_dtoa`; parsing the digits back gives the nearest double, which is what Python
/// returns. Non-finite values are returned unchanged.
pub fn round_py(x: f64, digits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.digits$}")
        .parse()
        .expect("formatted float parses")
}

/// `x` to `digits` significant digits by [`round_py`], its whole part kept whole when it has
/// more digits than that (98,765.4 to 3 digits is 98,765), and at most 12 decimals.
pub fn significant(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let decimals = (digits - 1 - x.abs().log10().floor() as i32).clamp(0, 12);
    round_py(x, decimals as usize)
}

/// `hits / total` rounded like Python's `round(x, 4)` (the lab's rate format); 0.0 when `total`
/// is 0.
pub fn rate(hits: usize, total: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        round_py(hits as f64 / total as f64, 4)
    }
}

#[cfg(test)]
mod tests {
    use super::{rate, round_py, significant};

    #[test]
    fn significant_keeps_digits_and_whole_parts() {
        assert_eq!(significant(1.4 / 3600.0, 3), 0.000389);
        assert_eq!(significant(12.3456, 3), 12.3);
        assert_eq!(significant(98_765.4, 3), 98_765.0);
        assert_eq!(significant(0.0, 3), 0.0);
    }

    #[test]
    fn rates_round_to_four_places_and_zero_without_a_total() {
        assert_eq!(rate(26, 64), 0.4062);
        assert_eq!(rate(49, 60), 0.8167);
        assert_eq!(rate(0, 0), 0.0);
    }

    #[test]
    fn exact_ties_go_to_even() {
        assert_eq!(round_py(26.0 / 64.0, 4), 0.4062);
        assert_eq!(round_py(0.40635, 4), 0.4063); // not a tie in binary: below it
        assert_eq!(round_py(0.125, 2), 0.12);
        assert_eq!(round_py(0.375, 2), 0.38);
        assert_eq!(round_py(2.5, 0), 2.0);
        assert_eq!(round_py(3.5, 0), 4.0);
        assert_eq!(round_py(164.0625, 1), 164.1);
    }

    #[test]
    fn decimal_looking_ties_follow_the_binary_value() {
        // Python: round(0.15, 1) == 0.1, round(0.35, 1) == 0.3, round(0.05, 1) == 0.1.
        assert_eq!(round_py(0.15, 1), 0.1);
        assert_eq!(round_py(0.35, 1), 0.3);
        assert_eq!(round_py(0.05, 1), 0.1);
        assert_eq!(round_py(49.0 / 60.0, 4), 0.8167);
    }

    #[test]
    fn non_finite_is_unchanged() {
        assert!(round_py(f64::NAN, 2).is_nan());
        assert_eq!(round_py(f64::INFINITY, 2), f64::INFINITY);
    }
}
