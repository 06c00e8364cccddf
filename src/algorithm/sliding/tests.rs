use std::time::Duration;

use super::ring::{INLINE, SHRINK_FROM};
use super::*;
use crate::algorithm::{SlidingLog, SlidingWindow};
use crate::MAX_NANOS;

fn params(alg: impl Stamping, limit: u64, window: Nanos) -> SlidingParams {
    let q = Quota::new(limit, Duration::from_nanos(window)).unwrap();
    alg.params(&q, 0).unwrap()
}

fn fields(v: &Verdict) -> (Kind, u64, u64) {
    (v.kind, v.remaining, v.reset_after)
}

#[test]
fn the_log_counts_exactly_the_last_window() {
    let p = params(SlidingLog, 3, 100);
    let mut log = Log::default();
    assert_eq!(fields(&decide(&mut log, 10, 1, &p)), (Kind::Allow, 2, 100));
    assert_eq!(fields(&decide(&mut log, 40, 2, &p)), (Kind::Allow, 0, 100));
    assert_eq!(log.entries(), [(10, 1), (40, 2)]);
    // One permit fits when the grant at 10 leaves (110); three only when both have (140).
    let v = decide(&mut log, 60, 1, &p);
    assert_eq!(fields(&v), (Kind::Deny { retry_after: 50 }, 0, 80));
    assert_eq!(
        decide(&mut log, 60, 3, &p).kind,
        Kind::Deny { retry_after: 80 }
    );
    assert_eq!(
        decide(&mut log, 109, 1, &p).kind,
        Kind::Deny { retry_after: 1 }
    );
    assert_eq!(fields(&decide(&mut log, 110, 1, &p)), (Kind::Allow, 0, 100));
    assert_eq!(log.entries(), [(40, 2), (110, 1)]);
    // Grants at the same nanosecond share an entry.
    let mut log = Log::default();
    decide(&mut log, 5, 1, &p);
    decide(&mut log, 5, 1, &p);
    assert_eq!(log.entries(), [(5, 2)]);
    assert_eq!(decide(&mut log, 5, 0, &p).kind, Kind::Peek);
    assert_eq!(decide(&mut log, 5, 4, &p).kind, Kind::ExceedsBurst);
    assert_eq!(decide(&mut log, MAX_NANOS + 1, 1, &p).kind, Kind::Never);
    // Everything left: an empty log, no allocation needed, reset 0.
    assert_eq!(fields(&decide(&mut log, 105, 0, &p)), (Kind::Peek, 3, 0));
    assert!(log.is_empty());
}

#[test]
fn sub_windows_share_entries_and_leave_whole() {
    // W = 100 in 4 sub-windows of 25.
    let p = params(SlidingWindow::new(4), 3, 100);
    assert_eq!(p.granularity, 25);
    let mut log = Log::default();
    assert_eq!(fields(&decide(&mut log, 30, 1, &p)), (Kind::Allow, 2, 95));
    assert_eq!(fields(&decide(&mut log, 49, 1, &p)), (Kind::Allow, 1, 76));
    assert_eq!(log.entries(), [(25, 2)]);
    decide(&mut log, 50, 1, &p);
    assert_eq!(log.entries(), [(25, 2), (50, 1)]);
    // The sub-window [25, 50) counts until 125 (the sub-windows [50, 150) are the window).
    assert_eq!(
        decide(&mut log, 124, 1, &p).kind,
        Kind::Deny { retry_after: 1 }
    );
    assert_eq!(
        decide(&mut log, 60, 3, &p).kind,
        Kind::Deny { retry_after: 90 }
    );
    assert_eq!(decide(&mut log, 125, 2, &p).kind, Kind::Allow);
    assert_eq!(log.entries(), [(50, 1), (125, 2)]);
}

#[test]
fn sub_window_counts_must_divide_the_window() {
    let q = Quota::new(3, Duration::from_nanos(100)).unwrap();
    for k in [0, 1, 65, 3, 7] {
        assert!(
            matches!(
                SlidingWindow::new(k).params(&q, 0),
                Err(QuotaError::Unsupported(_))
            ),
            "k = {k}"
        );
    }
    for k in [2, 4, 5, 10, 20, 25, 50] {
        assert!(SlidingWindow::new(k).params(&q, 0).is_ok(), "k = {k}");
    }
    let q = Quota::new(3, Duration::from_nanos(6400)).unwrap();
    assert_eq!(
        SlidingWindow::new(64).params(&q, 0).unwrap().granularity,
        100
    );
}

#[test]
fn a_later_newest_stamp_is_decided_at() {
    // A decision that read the clock at 90 finds a grant stamped 100.
    let p = params(SlidingLog, 2, 100);
    let mut log = Log::default();
    decide(&mut log, 0, 1, &p);
    decide(&mut log, 100, 1, &p);
    // At 100 the grant at 0 has left: one fits, stamped 100 (not 90: stamps stay ordered).
    assert_eq!(decide(&mut log, 90, 1, &p).kind, Kind::Allow);
    assert_eq!(log.entries(), [(100, 2)]);
    let v = decide(&mut log, 90, 1, &p);
    assert_eq!(v.kind, Kind::Deny { retry_after: 110 });
}

#[test]
fn a_grant_goes_before_a_block_entry_stamped_later() {
    // L = 2, W = 1000: a block until 8000 at 5000 is an entry of 2 stamped 7000; a reward
    // leaves 1 in it. A grant at 5000 is stamped 5000 (not 7000) and counts until 6000.
    let p = params(SlidingLog, 2, 1000);
    let mut log = Log::default();
    adjust(&mut log, 5000, Adjust::Block { until: 8000 }, &p);
    adjust(&mut log, 5000, Adjust::Reward(1), &p);
    assert_eq!(log.entries(), [(7000, 1)]);
    assert_eq!(
        fields(&decide(&mut log, 5000, 1, &p)),
        (Kind::Allow, 0, 3000)
    );
    assert_eq!(log.entries(), [(5000, 1), (7000, 1)]);
    assert_eq!(log.cold_at(&p), 8000);
    // A decision that read the clock before the grant's stamp is still made at that stamp.
    assert_eq!(
        decide(&mut log, 4990, 1, &p).kind,
        Kind::Deny { retry_after: 1010 }
    );
    // At 6500 the grant has left; the block's entry has not.
    assert_eq!(
        fields(&decide(&mut log, 6500, 1, &p)),
        (Kind::Allow, 0, 1500)
    );
    assert_eq!(log.entries(), [(6500, 1), (7000, 1)]);
    // A reward takes the newest permits: the block's.
    adjust(&mut log, 6500, Adjust::Reward(1), &p);
    assert_eq!(log.entries(), [(6500, 1)]);
    assert_eq!(log.cold_at(&p), 7500);
    // A penalty is stamped as a grant: before a block's entry stamped later.
    adjust(&mut log, 6500, Adjust::Block { until: 9000 }, &p);
    assert_eq!(log.entries(), [(8000, 2)]);
    adjust(&mut log, 6500, Adjust::Reward(2), &p);
    assert!(log.is_empty());
    adjust(&mut log, 6600, Adjust::Block { until: 9000 }, &p);
    adjust(&mut log, 6600, Adjust::Reward(1), &p);
    adjust(&mut log, 6600, Adjust::Penalize(1), &p);
    assert_eq!(log.entries(), [(6600, 1), (8000, 1)]);
}

#[test]
fn a_sub_window_grant_goes_before_a_block_entry_off_the_grid() {
    // W = 100 in sub-windows of 25, L = 2: a block until 105 at 10 is stamped 5, inside the
    // sub-window [0, 25); a grant at 20 is stamped 0, the sub-window's start, before it.
    let p = params(SlidingWindow::new(4), 2, 100);
    let mut log = Log::default();
    adjust(&mut log, 10, Adjust::Block { until: 105 }, &p);
    adjust(&mut log, 10, Adjust::Reward(1), &p);
    assert_eq!(fields(&decide(&mut log, 20, 1, &p)), (Kind::Allow, 0, 85));
    assert_eq!(log.entries(), [(0, 1), (5, 1)]);
    // At 100 the grant's sub-window has left; the block's entry counts until 105.
    assert_eq!(fields(&decide(&mut log, 100, 0, &p)), (Kind::Peek, 1, 5));
    assert_eq!(fields(&decide(&mut log, 100, 1, &p)), (Kind::Allow, 0, 100));
    assert_eq!(log.entries(), [(5, 1), (100, 1)]);
}

#[test]
fn stamps_stay_ordered_across_a_change_of_grid() {
    // Sub-windows of 50 logged, then sub-windows of 100 (set_quota to W = 200).
    let p = params(SlidingWindow::new(2), 10, 100);
    let mut log = Log::default();
    decide(&mut log, 160, 1, &p);
    assert_eq!(log.entries(), [(150, 1)]);
    let p2 = params(SlidingWindow::new(2), 10, 200);
    decide(&mut log, 170, 1, &p2); // its sub-window starts at 100, before 150
    assert_eq!(log.entries(), [(150, 2)]);
}

#[test]
fn the_ring_gives_memory_back() {
    let p = params(SlidingLog, 1000, 1000);
    let mut log = Log::default();
    for t in 0..500 {
        decide(&mut log, t, 1, &p);
    }
    assert!(log.entries.capacity() >= 500);
    decide(&mut log, 1498, 0, &p); // one entry left
    assert_eq!(log.entries.len(), 1);
    assert!(
        log.entries.capacity() < SHRINK_FROM,
        "{}",
        log.entries.capacity()
    );
    // Few entries go back in place: no allocation.
    assert!(!log.entries.on_heap());
}

#[test]
fn up_to_four_entries_stay_in_place() {
    let p = params(SlidingLog, 1000, 1000);
    let mut log = Log::default();
    for t in 0..INLINE as u64 {
        decide(&mut log, t, 1, &p);
        assert!(!log.entries.on_heap(), "{t}");
    }
    decide(&mut log, 10, 1, &p);
    assert!(log.entries.on_heap());
    assert_eq!(log.entries(), [(0, 1), (1, 1), (2, 1), (3, 1), (10, 1)]);
    // Back in place once at most two are left; not at four (no churn at the boundary).
    decide(&mut log, 1001, 0, &p);
    assert!(log.entries.on_heap());
    decide(&mut log, 1003, 0, &p);
    assert_eq!(log.entries(), [(10, 1)]);
    assert!(!log.entries.on_heap());
}

#[test]
fn a_log_in_place_is_small() {
    // Four entries of 8 bytes and their base stamp: with the key's lock (8 bytes) one key's
    // state is 64 bytes, a cache line (was 88 with 16-byte entries).
    assert!(
        std::mem::size_of::<Log>() <= 56,
        "{}",
        std::mem::size_of::<Log>()
    );
}

#[test]
fn stamps_and_counts_out_of_the_compact_range_go_to_the_heap_exactly() {
    let wide = 1u64 << 42;
    // Offsets from the oldest entry that do not fit in place: the heap, decided as ever.
    let p = params(SlidingLog, 10, 4 * wide);
    let mut log = Log::default();
    decide(&mut log, 7, 1, &p);
    assert!(!log.entries.on_heap());
    decide(&mut log, 7 + wide - 1, 1, &p); // the largest offset in place
    assert!(!log.entries.on_heap());
    decide(&mut log, 7 + wide, 1, &p);
    assert!(log.entries.on_heap());
    assert_eq!(log.entries(), [(7, 1), (7 + wide - 1, 1), (7 + wide, 1)]);
    // Once the far entries leave, the rest comes back in place, rebased.
    decide(&mut log, 4 * wide + 7 + wide - 1, 0, &p);
    assert_eq!(log.entries(), [(7 + wide, 1)]);
    assert!(!log.entries.on_heap());
    // Stamps near the clock's end.
    let p = params(SlidingLog, 10, 1 << 40);
    let mut log = Log::default();
    for t in [MAX_NANOS - 3, MAX_NANOS - 1, MAX_NANOS] {
        assert!(decide(&mut log, t, 1, &p).kind == Kind::Allow);
    }
    assert!(!log.entries.on_heap());
    assert_eq!(
        log.entries(),
        [(MAX_NANOS - 3, 1), (MAX_NANOS - 1, 1), (MAX_NANOS, 1)]
    );
    // A count that does not fit in place, on an entry of its own and added to one.
    let big = 1u64 << 22;
    let (g, w) = (1u64 << 29, 1u64 << 30);
    let p = params(SlidingWindow::new(2), 4 * big, w);
    let mut log = Log::default();
    decide(&mut log, 1, big - 1, &p);
    assert!(!log.entries.on_heap());
    decide(&mut log, 2, 1, &p);
    assert!(log.entries.on_heap());
    assert_eq!(log.entries(), [(0, big)]);
    decide(&mut log, g + 5, big + 1, &p);
    assert_eq!(log.entries(), [(0, big), (g, big + 1)]);
    let v = decide(&mut log, w - 1, 2 * big, &p);
    assert_eq!(
        fields(&v),
        (Kind::Deny { retry_after: 1 }, 2 * big - 1, g + 1)
    );
}

/// `set_quota` at `at` from `p` to `limit` per `window` ns (same stamping).
fn changed(
    alg: impl Stamping,
    p: &SlidingParams,
    limit: u64,
    window: Nanos,
    at: Nanos,
) -> SlidingParams {
    let q = Quota::new(limit, Duration::from_nanos(window)).unwrap();
    alg.next_params(p, &q, at).unwrap()
}

#[test]
fn a_change_forgets_what_had_left_the_window() {
    // 2 per 2 ns: grants at 0 and 1; at 2 the window widens to 1 s. The grant at 0 had left
    // (0 + 2 <= 2), the one at 1 had not: it alone counts under the new quota.
    let p0 = params(SlidingLog, 2, 2);
    let mut log = Log::default();
    decide(&mut log, 0, 1, &p0);
    decide(&mut log, 1, 1, &p0);
    let p1 = changed(SlidingLog, &p0, 2, 1_000_000_000, 2);
    assert_eq!(p1.kept_from, 1);
    // Judged one generation behind, as `enter` will leave it, without changing it.
    assert_eq!(log.cold_at(&p1), 1_000_000_001);
    assert_eq!(log.entries(), [(0, 1), (1, 1)]);
    // Brought in lazily by the first decision (a look here).
    let v = decide(&mut log, 2, 0, &p1);
    assert_eq!(fields(&v), (Kind::Peek, 1, 999_999_999));
    assert_eq!(log.entries(), [(1, 1)]);
    // Entering the generation once: a second change at 3 keeps what is inside 1 s.
    let p2 = changed(SlidingLog, &p1, 2, 5, 3);
    assert_eq!(p2.kept_from, 0);
    log.enter(&p2);
    log.enter(&p2);
    assert_eq!(log.entries(), [(1, 1)]);
    assert_eq!(log.cold_at(&p2), 6);
}

#[test]
fn a_log_whose_newest_entry_had_left_is_cold_at_once() {
    // The reported case on two sub-windows: 1 per 2 ns, a grant at 0, 1 per 1 s at 2.
    let p0 = params(SlidingWindow::new(2), 1, 2);
    let mut log = Log::default();
    decide(&mut log, 0, 1, &p0);
    let p1 = changed(SlidingWindow::new(2), &p0, 1, 1_000_000_000, 2);
    assert_eq!(log.cold_at(&p1), 0);
    log.enter(&p1);
    assert!(log.is_empty());
    assert_eq!(
        fields(&decide(&mut log, 2, 1, &p1)),
        (Kind::Allow, 0, 999_999_998)
    );
}

#[test]
fn a_per_call_quota_reads_the_limiters_window_and_generation() {
    // check_with's parameters: the call's count on the limiter's window, in its generation, so
    // a per-call quota with a wider period revives nothing either.
    let p0 = params(SlidingLog, 1, 2);
    let mut log = Log::default();
    decide(&mut log, 0, 1, &p0);
    let p1 = changed(SlidingLog, &p0, 1, 4, 3);
    let wide = Quota::new(3, Duration::from_secs(1)).unwrap();
    let call = SlidingLog.call_params(&p1, &wide).unwrap();
    assert_eq!(call, SlidingParams { limit: 3, ..p1 });
    assert_eq!(fields(&decide(&mut log, 3, 0, &call)), (Kind::Peek, 3, 0));
}

/// On the sliding algorithms: a per-call quota whose burst differs from its count
/// is refused (it was read as the count), any count is the call's limit, and inert parameters
/// store nothing.
#[test]
fn per_call_quotas_are_the_limit_or_refused() {
    use crate::{ManualClock, Quota, RateLimiter};
    let l = RateLimiter::builder(Quota::per_second(10).unwrap())
        .clock(ManualClock::new())
        .algorithm(SlidingWindow::new(4))
        .unwrap()
        .build();
    let bursty = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    assert!(matches!(
        l.check_n_with(1, bursty),
        Err(QuotaError::Unsupported(_))
    ));
    assert_eq!(l.peek().remaining, 10);
    // The call's window need not be divisible into the limiter's sub-windows: it is not used.
    let huge = Quota::new(MAX_NANOS, Duration::from_nanos(MAX_NANOS)).unwrap();
    let d = l.check_n_with(7, huge).unwrap();
    assert_eq!(
        (d.allowed, d.limit, d.remaining),
        (true, MAX_NANOS, MAX_NANOS - 7)
    );
    let p = SlidingLog::inert(&params(SlidingLog, 3, 100));
    let mut log = Log::default();
    for n in [0, 1, 3] {
        decide(&mut log, 10, n, &p);
        assert!(log.is_empty());
    }
}

/// One step on a ring and on its plain model.
#[derive(Clone, Debug)]
enum Step {
    PushBack(u64),
    PushFront(u64),
    PushBlockFront(u64),
    PopFront,
    PopBack,
    Push(u64, u64),
    AddToBack(u64),
    TakeBack(u64),
    Settle,
    FlipGen,
}

/// Values about `at` and the ends of `u64`, where an encoding would wrap or fall off.
fn edge(at: u64) -> impl proptest::strategy::Strategy<Value = u64> {
    use proptest::prelude::*;
    prop_oneof![
        (0..3u64).prop_map(move |d| at - 1 + d),
        (0..3u64).prop_map(move |d| 2 * at - 1 + d),
        (0..3u64).prop_map(|d| MAX_NANOS - d),
        (0..3u64).prop_map(|d| u64::MAX - d),
        0..3u64,
    ]
}

/// Counts about `at` (a log's counts stay far below `u64::MAX`: totals are below `2^63`).
fn count_edge(at: u64) -> impl proptest::strategy::Strategy<Value = u64> {
    use proptest::prelude::*;
    prop_oneof![
        (0..3u64).prop_map(move |d| at - 1 + d),
        (0..3u64).prop_map(move |d| 2 * at - 1 + d),
        0..3u64,
    ]
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => any::<u64>().prop_map(Step::PushBack),
        1 => any::<u64>().prop_map(Step::PushFront),
        // Stamps from the few the pushes use and above: block entries before and after them.
        2 => (0..8u64).prop_map(Step::PushBlockFront),
        2 => Just(Step::PopFront),
        1 => Just(Step::PopBack),
        1 => (0..100u64).prop_map(Step::AddToBack),
        1 => (0..300u64).prop_map(Step::TakeBack),
        // Few stamps, so that pushes often land on the newest entry's.
        3 => (0..4u64, 0..100u64).prop_map(|(s, n)| Step::Push(s, n)),
        // Stamps and counts at the edges of what fits in place (offsets of 42 bits from the
        // base, counts of 22): in place, rebased, or on the heap, never wrapped.
        2 => (edge(1 << 42), count_edge(1 << 22)).prop_map(|(s, n)| Step::Push(s, n)),
        1 => edge(1 << 42).prop_map(Step::PushBack),
        2 => Just(Step::Settle),
        1 => Just(Step::FlipGen),
    ]
}

proptest::proptest! {
    /// The ring (in place up to four, on the heap beyond, back in place at two) holds exactly
    /// what a plain `VecDeque` does, in order, through every move between the two forms, and
    /// counts the block entries among the newest as a model that marks each entry does.
    #[test]
    fn the_ring_is_a_deque(steps in proptest::collection::vec(step(), 0..200)) {
        use std::collections::VecDeque;
        let mut ring = ring::Ring::default();
        // Each entry with whether it is a block entry that no grant has been recorded after.
        let mut model: VecDeque<((Nanos, u64), bool)> = VecDeque::new();
        let blocks = |m: &VecDeque<((Nanos, u64), bool)>| {
            m.iter().rev().take_while(|(_, b)| *b).count()
        };
        let mut generation = false;
        for (i, s) in steps.into_iter().enumerate() {
            match s {
                Step::PushBack(v) => {
                    ring.push_back((v, i as u64));
                    model.iter_mut().for_each(|(_, b)| *b = false);
                    model.push_back(((v, i as u64), false));
                }
                Step::PushFront(v) => {
                    ring.push_front((v, i as u64));
                    model.push_front(((v, i as u64), false));
                }
                Step::PushBlockFront(v) => {
                    ring.push_block_front((v, i as u64));
                    let all = blocks(&model) == model.len();
                    model.push_front(((v, i as u64), all));
                }
                Step::PopFront => {
                    ring.pop_front();
                    model.pop_front();
                }
                Step::PopBack => {
                    proptest::prop_assert_eq!(ring.pop_back(), model.pop_back().map(|(e, _)| e));
                }
                Step::Push(stamp, n) if ring.no_blocks() => {
                    // The rule's push: onto the newest entry if it has the stamp.
                    proptest::prop_assert!(ring.push(stamp, n));
                    match model.back_mut() {
                        Some(((s, c), _)) if *s == stamp => *c += n,
                        _ => model.push_back(((stamp, n), false)),
                    }
                }
                Step::Push(stamp, n) => {
                    // A grant beside block entries (or a count left by departures): in stamp
                    // order among them (not before the newest grant), onto an entry of its
                    // stamp if any; the entries up to it are no longer block entries.
                    let start = model.len() - blocks(&model);
                    let stamp = match start {
                        0 => stamp,
                        _ => stamp.max(model[start - 1].0 .0),
                    };
                    ring.insert_grant(stamp, n);
                    let mut at = start;
                    while at < model.len() && model[at].0 .0 < stamp {
                        at += 1;
                    }
                    let upto = if at < model.len() && model[at].0 .0 == stamp {
                        model[at].0 .1 += n;
                        at + 1
                    } else if at > 0 && model[at - 1].0 .0 == stamp {
                        model[at - 1].0 .1 += n;
                        at
                    } else {
                        model.insert(at, ((stamp, n), false));
                        at + 1
                    };
                    model.iter_mut().take(upto).for_each(|(_, b)| *b = false);
                }
                Step::AddToBack(n) => {
                    ring.add_back(n);
                    if let Some(((_, c), _)) = model.back_mut() {
                        *c += n;
                    }
                }
                Step::TakeBack(n) => {
                    // A reward: the newest permits first, each emptied entry dropped.
                    let mut left = n;
                    while let Some(((_, c), _)) = model.back_mut() {
                        let take = left.min(*c);
                        *c -= take;
                        left -= take;
                        if *c > 0 {
                            break;
                        }
                        model.pop_back();
                    }
                    proptest::prop_assert_eq!(ring.take_back(n), n - left);
                }
                Step::Settle => ring.settle(),
                Step::FlipGen => {
                    generation = !generation;
                    ring.set_gen(generation);
                }
            }
            proptest::prop_assert_eq!(ring.len(), model.len());
            proptest::prop_assert_eq!(ring.is_empty(), model.is_empty());
            proptest::prop_assert_eq!(ring.front(), model.front().map(|(e, _)| *e));
            proptest::prop_assert_eq!(ring.back(), model.back().map(|(e, _)| *e));
            let held: Vec<_> = (0..ring.len()).map(|i| ring.get(i)).collect();
            let want: Vec<_> = model.iter().map(|(e, _)| *e).collect();
            proptest::prop_assert_eq!(held, want);
            proptest::prop_assert_eq!(ring.blocks(), blocks(&model));
            proptest::prop_assert_eq!(ring.total(), model.iter().map(|((_, c), _)| c).sum::<u64>());
            proptest::prop_assert!(!ring.no_blocks() || blocks(&model) == 0);
            proptest::prop_assert_eq!(ring.generation(), generation);
            proptest::prop_assert!(ring.on_heap() || ring.len() <= INLINE);
        }
    }
}
