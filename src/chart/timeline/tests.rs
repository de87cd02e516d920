//! The plot's series by hand, and its panels.

use super::*;

fn interval(t_s: f64, load_rps: f64, ttft: Option<f64>) -> IntervalReport {
    IntervalReport {
        t_s,
        load_rps,
        completed: u64::from(ttft.is_some()),
        ttft_p90_ms: ttft,
        itl_p90_ms: None,
        // A hand-made reuse: the TTFT in ms over 1,000.
        prefix_reuse: ttft.map(|t| t / 1000.0),
        sla_attainment: None,
    }
}

fn point(t_s: f64, pool: Pool, workers: usize, starting: usize) -> ReplicaPoint {
    ReplicaPoint {
        t_s,
        pool,
        workers,
        starting,
        draining: 0,
    }
}

#[test]
fn series_hold_each_interval_and_each_pool_size_until_the_next() {
    // Three 10 s intervals; nothing completes in the second; the run ends at 27 s, so the
    // axis runs to the last interval's end, 30 s. The pool grows at 5 s (2 start) and they
    // serve from 8 s.
    let intervals = [
        interval(0.0, 4.0, Some(100.0)),
        interval(10.0, 6.0, None),
        interval(20.0, 2.5, Some(300.0)),
    ];
    let replicas = [
        point(0.0, Pool::Workers, 2, 0),
        point(5.0, Pool::Workers, 2, 2),
        point(8.0, Pool::Workers, 4, 0),
    ];
    let s = timeline_series(&intervals, &replicas, 27.0, Some(250.0));
    assert_eq!(s.end_s, 30.0);
    assert_eq!(
        s.load_rps,
        vec![
            (0.0, 4.0),
            (10.0, 4.0),
            (10.0, 6.0),
            (20.0, 6.0),
            (20.0, 2.5),
            (30.0, 2.5)
        ]
    );
    assert_eq!(
        s.ttft_p90_ms,
        vec![
            vec![(0.0, 100.0), (10.0, 100.0)],
            vec![(20.0, 300.0), (30.0, 300.0)]
        ]
    );
    assert_eq!(
        s.prefix_reuse,
        vec![
            vec![(0.0, 0.1), (10.0, 0.1)],
            vec![(20.0, 0.3), (30.0, 0.3)]
        ]
    );
    assert_eq!(s.replicas.len(), 1);
    let p = &s.replicas[0];
    assert_eq!(p.pool, "workers");
    let serving = vec![
        (0.0, 2.0),
        (5.0, 2.0),
        (5.0, 2.0),
        (8.0, 2.0),
        (8.0, 4.0),
        (30.0, 4.0),
    ];
    assert_eq!(p.serving, serving);
    let paid = vec![
        (0.0, 2.0),
        (5.0, 2.0),
        (5.0, 4.0),
        (8.0, 4.0),
        (8.0, 4.0),
        (30.0, 4.0),
    ];
    assert_eq!(p.paid, paid);
    assert_eq!(s.ttft_target_ms, Some(250.0));
}

#[test]
fn disaggregated_pools_get_their_own_lines_in_order_of_appearance() {
    let replicas = [
        point(0.0, Pool::Prefill, 1, 0),
        point(0.0, Pool::Decode, 3, 0),
        point(4.0, Pool::Decode, 2, 0),
    ];
    let s = timeline_series(&[interval(0.0, 1.0, None)], &replicas, 6.0, None);
    let names: Vec<_> = s.replicas.iter().map(|p| p.pool).collect();
    assert_eq!(names, ["prefill", "decode"]);
    assert_eq!(s.replicas[0].serving, vec![(0.0, 1.0), (6.0, 1.0)]);
    assert_eq!(
        s.replicas[1].serving,
        vec![(0.0, 3.0), (4.0, 3.0), (4.0, 2.0), (6.0, 2.0)]
    );
    // A lone interval spans the run.
    assert_eq!(s.load_rps, vec![(0.0, 1.0), (6.0, 1.0)]);
    assert!(s.ttft_p90_ms.is_empty());
}

#[test]
fn the_plot_names_its_panels_and_is_deterministic() {
    let s = timeline_series(
        &[
            interval(0.0, 2.0, Some(80.0)),
            interval(60.0, 3.0, Some(90.0)),
        ],
        &[point(0.0, Pool::Workers, 2, 0)],
        100.0,
        Some(120.0),
    );
    let svg = timeline_svg(&s, "scaling");
    for text in [
        "Offered load per interval",
        "Replicas per pool",
        "TTFT p90 per interval",
        "[sla] target 120 ms",
        "Prefix reuse per interval",
        "time (s)",
    ] {
        assert!(svg.contains(text), "{text}");
    }
    assert_eq!(svg, timeline_svg(&s, "scaling"));
}
