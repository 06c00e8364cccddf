use super::*;

fn cells(tats: &[Nanos]) -> Vec<TatCell> {
    tats.iter()
        .map(|&t| {
            let c = TatCell::new();
            if t > 0 {
                // A check of cost `t` at time 0 under T = 1 ns, burst `t` stores exactly `t`.
                let q = crate::quota::Quota::from_parts(1, t);
                assert!(c.check(0, t, q).allowed());
            }
            assert_eq!(c.tat(), t);
            c
        })
        .collect()
}

/// Drives `evict_cold` over a plain `Vec`, the way a table's `retain` would.
fn sweep_vec(v: &mut Vec<TatCell>, now: Nanos) -> ShardSweep {
    evict_cold(now, |keep| v.retain(|c| keep(c)))
}

#[test]
fn cold_means_tat_at_most_now_exactly() {
    let mut v = cells(&[0, 99, 100, 101, 500]);
    let s = sweep_vec(&mut v, 100);
    assert_eq!(s.evicted, 3); // 0, 99 and tat == now
    assert_eq!(s.min_tat, 101); // tat == now + 1 stays
    assert_eq!(v.iter().map(TatCell::tat).collect::<Vec<_>>(), [101, 500]);

    let s = sweep_vec(&mut v, 101);
    assert_eq!((s.evicted, s.min_tat), (1, 500));
    let s = sweep_vec(&mut v, 499);
    assert_eq!((s.evicted, s.min_tat), (0, 500));
    let s = sweep_vec(&mut v, u64::MAX);
    assert_eq!((s.evicted, s.min_tat), (1, u64::MAX));
    assert!(v.is_empty());
}

#[test]
fn counters_snapshot_reports_what_was_recorded() {
    let c = SweepCounters::default();
    c.record(3, Duration::from_micros(7), Duration::from_micros(2));
    c.record(4, Duration::from_micros(5), Duration::from_micros(1));
    let s = c.snapshot(9);
    assert_eq!((s.keys, s.sweeps, s.evicted), (9, 2, 7));
    assert_eq!(s.last_sweep, Duration::from_micros(5));
    assert_eq!(s.longest_pause, Duration::from_micros(1));
}
