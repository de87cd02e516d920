//! Non-negative least squares: `x >= 0` minimising `|A x − b|²`, by Lawson and Hanson's active-set
//! method ("Solving Least Squares Problems", 1974, chapter 23), on the normal equations (a
//! calibration has a dozen unknowns and a few hundred rows). Columns are scaled to unit norm
//! first, so that coefficients in µs and efficiencies near 1 are found alike.
//!
//! Hand-written rather than a linear-algebra crate: the whole method is a 12 x 12 solve in a
//! loop, and no crate already in the tree does it.

/// The `x >= 0` minimising `|A x − b|²`, `A` given as rows of equal length.
pub fn nnls(rows: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = rows.first().map_or(0, Vec::len);
    // Column norms: each column is scaled to unit length (zero columns stay zero).
    let norms: Vec<f64> = (0..n)
        .map(|j| rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt())
        .collect();
    let scale: Vec<f64> = norms
        .iter()
        .map(|&c| if c > 0.0 { 1.0 / c } else { 0.0 })
        .collect();
    let mut g = vec![vec![0.0; n]; n];
    let mut h = vec![0.0; n];
    for (r, &y) in rows.iter().zip(b) {
        for i in 0..n {
            let ri = r[i] * scale[i];
            h[i] += ri * y;
            for j in 0..n {
                g[i][j] += ri * r[j] * scale[j];
            }
        }
    }
    let x = solve_normal(&g, &h);
    x.iter().zip(&scale).map(|(v, s)| v * s).collect()
}

/// Lawson–Hanson on the normal equations `G x = h` with `x >= 0`.
fn solve_normal(g: &[Vec<f64>], h: &[f64]) -> Vec<f64> {
    let n = h.len();
    let tol = 1e-12 * (1.0 + h.iter().map(|v| v.abs()).fold(0.0, f64::max));
    let mut x = vec![0.0; n];
    let mut passive = vec![false; n];
    let gradient = |x: &[f64]| -> Vec<f64> {
        (0..n)
            .map(|i| h[i] - (0..n).map(|j| g[i][j] * x[j]).sum::<f64>())
            .collect()
    };
    for _ in 0..(3 * n + 10) {
        let w = gradient(&x);
        let Some(j) = (0..n)
            .filter(|&j| !passive[j] && w[j] > tol && g[j][j] > 0.0)
            .max_by(|&a, &b| w[a].total_cmp(&w[b]))
        else {
            break;
        };
        passive[j] = true;
        loop {
            let s = solve_subset(g, h, &passive);
            if (0..n).all(|i| !passive[i] || s[i] > 0.0) {
                x = s;
                break;
            }
            let alpha = (0..n)
                .filter(|&i| passive[i] && s[i] <= 0.0)
                .map(|i| x[i] / (x[i] - s[i]))
                .fold(f64::INFINITY, f64::min);
            for i in 0..n {
                x[i] += alpha * (s[i] - x[i]);
                if passive[i] && x[i] <= 1e-15 {
                    passive[i] = false;
                    x[i] = 0.0;
                }
            }
            if !passive.iter().any(|&p| p) {
                break;
            }
        }
    }
    x
}

/// The unconstrained solution of `G x = h` over the `passive` unknowns (the rest 0), by Gaussian
/// elimination with partial pivoting; a singular direction gets 0.
fn solve_subset(g: &[Vec<f64>], h: &[f64], passive: &[bool]) -> Vec<f64> {
    let idx: Vec<usize> = (0..h.len()).filter(|&i| passive[i]).collect();
    let k = idx.len();
    let mut a: Vec<Vec<f64>> = idx
        .iter()
        .map(|&i| {
            let mut row: Vec<f64> = idx.iter().map(|&j| g[i][j]).collect();
            row.push(h[i]);
            row
        })
        .collect();
    for col in 0..k {
        let pivot = (col..k)
            .max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))
            .expect("non-empty");
        a.swap(col, pivot);
        if a[col][col].abs() < 1e-14 {
            continue;
        }
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (v, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *v -= f * p;
                }
            }
        }
    }
    let mut x = vec![0.0; h.len()];
    for (r, &i) in idx.iter().enumerate() {
        x[i] = if a[r][r].abs() < 1e-14 {
            0.0
        } else {
            a[r][k] / a[r][r]
        };
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_positive_solution_is_found() {
        // y = 2 a + 0.5 b + 3 c on a few points.
        let rows: Vec<Vec<f64>> = (0..8)
            .map(|i| {
                let t = i as f64;
                vec![1.0 + t, (t * t) * 100.0, 1e-3 * (1.0 + (t * 0.7).sin())]
            })
            .collect();
        let b: Vec<f64> = rows
            .iter()
            .map(|r| 2.0 * r[0] + 0.5 * r[1] + 3.0 * r[2])
            .collect();
        let x = nnls(&rows, &b);
        for (got, want) in x.iter().zip([2.0, 0.5, 3.0]) {
            assert!((got - want).abs() < 1e-6 * want.max(1.0), "{x:?}");
        }
    }

    #[test]
    fn a_coefficient_that_would_be_negative_is_held_at_zero() {
        // y = x1 − x2 exactly: the best non-negative fit drops x2 and rescales x1.
        let rows = vec![
            vec![1.0, 0.0],
            vec![1.0, 1.0],
            vec![2.0, 1.0],
            vec![3.0, 2.0],
        ];
        let b: Vec<f64> = rows.iter().map(|r| r[0] - r[1]).collect();
        let x = nnls(&rows, &b);
        assert_eq!(x[1], 0.0);
        // Least squares of b = (1, 0, 1, 1) on the first column alone: Σ a b / Σ a² = 6 / 15.
        let want = 6.0 / 15.0;
        assert!((x[0] - want).abs() < 1e-12, "{x:?}");
    }
}
