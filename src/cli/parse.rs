//! Value parsers shared by the subcommands: each rejects bad values with a one-line reason.

use crate::scenario::validate::MAX_WORKERS;

/// A count of at least 1 (`--workers`, `--block`).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

/// A worker count: 1 to [`MAX_WORKERS`].
pub fn workers(s: &str) -> Result<usize, String> {
    let n = at_least_one(s)?;
    if n > MAX_WORKERS {
        return Err(format!("must be at most {MAX_WORKERS}"));
    }
    Ok(n)
}

/// A count of at least 1 as u64 (`--layers`, `--kv-heads`, `--head-dim`, `--dtype-bytes`).
pub fn at_least_one_u64(s: &str) -> Result<u64, String> {
    at_least_one(s).map(|n| n as u64)
}

/// A positive, finite number (`--gbps`).
pub fn positive(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !x.is_finite() || x <= 0.0 {
        return Err(format!("{s} must be a positive, finite number"));
    }
    Ok(x)
}

/// A finite number of at least 0 (`--overhead-ms`, `--prefill-ms`).
pub fn non_negative(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !x.is_finite() || x < 0.0 {
        return Err(format!("{s} must be a finite number of at least 0"));
    }
    Ok(x)
}

/// A reply jitter in ms: a finite number from 0 to 1e9, the range a profile's
/// `request.jitter_ms` takes (past it, a benchmark's clients would wait beyond the clock's end).
pub fn jitter_ms(s: &str) -> Result<f64, String> {
    let x = non_negative(s)?;
    if x > 1e9 {
        return Err(format!(
            "{s} must be at most 1e9 ms, a profile's request.jitter_ms range"
        ));
    }
    Ok(x)
}

/// `NAME=VALUE` of `calibrate --hold`: a step coefficient's name and the value it is held at (a
/// rate's at least 1, the datasheet's bound; a fixed cost's at least 0), as (its index in
/// `FEATURE_NAMES`, the value).
pub fn held_coefficient(s: &str) -> Result<(usize, f64), String> {
    use crate::deployment::features::{FEATURE_NAMES, RATE_FEATURES};
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    let k = FEATURE_NAMES
        .iter()
        .position(|&n| n == name)
        .ok_or_else(|| {
            format!(
                "{name:?} is not a step coefficient: one of {}",
                FEATURE_NAMES.join(", ")
            )
        })?;
    let x = non_negative(value)?;
    if k < RATE_FEATURES && x < 1.0 {
        return Err(format!(
            "{name} = {x} would beat the GPU's datasheet: a rate is held at 1 or more"
        ));
    }
    Ok((k, x))
}

/// `yes` or `no`.
pub fn yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("{s:?} is not yes or no")),
    }
}

/// A value parser accepting exactly `names` (clap lists them in help and errors), converted with
/// the type's `FromStr`.
pub fn choice<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).map(|s| {
        s.parse::<T>()
            .unwrap_or_else(|_| unreachable!("clap accepted only listed names"))
    })
}
