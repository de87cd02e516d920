//! Warnings over many runs (a sweep's points, a plan's probes, a comparison's scenarios): each
//! kind of warning once, naming the first run that gave it, with a count of the others.
//!
//! Two warnings are of one kind when they read the same with their numbers taken out ("hot
//! spot: worker0 received 812 of 1500 ..." and "hot spot: worker3 received 790 of 1500 ..."
//! are one kind).

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
}
