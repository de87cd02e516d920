//! The lab's selection rule: (1) most overlapping blocks, (2) then the least load, (3) then the
//! lowest worker index.

/// Among `candidates` (worker indices in increasing order, all with the same, deepest overlap),
/// the one with the least `load`, the lowest index on ties. `None` if there is no candidate.
pub fn least_loaded(
    candidates: impl IntoIterator<Item = usize>,
    load: impl Fn(usize) -> u64,
) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for worker in candidates {
        let l = load(worker);
        if best.is_none_or(|(best_load, _)| l < best_load) {
            best = Some((l, worker));
        }
    }
    best.map(|(_, worker)| worker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_load_wins_then_lowest_index() {
        let loads = [3, 1, 1, 0];
        assert_eq!(least_loaded([0, 1, 2], |w| loads[w]), Some(1));
        assert_eq!(least_loaded([0, 1, 2, 3], |w| loads[w]), Some(3));
        assert_eq!(least_loaded([], |w| loads[w]), None);
    }
}
