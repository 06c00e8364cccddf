//! Block, penalize, reward and reset, per algorithm, on a `ManualClock`: what a
//! decision sees during and after each, the key cap, the sweeper, quota changes and GCRA's
//! holes. The rules are in `docs/guide/penalties.md`.

use std::num::NonZeroUsize;
use std::time::Duration;

use tollgate::{
    AcquireError, AdjustError, Algorithm, Clock, FixedWindow, KeyedRateLimiter, ManualClock, Quota,
    RateLimiter, SlidingLog, SlidingWindow, WeightedWindow, WhenFull,
};

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn direct<A: Algorithm>(q: Quota, alg: A) -> (RateLimiter<A>, ManualClock) {
    let clock = ManualClock::new();
    // Far from the clock's origin: a sliding block cannot stamp before it (the guide says so).
    clock.advance(1000 * S);
    let l = RateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    (l, clock)
}

fn keyed<A: Algorithm>(q: Quota, alg: A) -> (KeyedRateLimiter<u32, A>, ManualClock) {
    let clock = ManualClock::new();
    clock.advance(1000 * S);
    let l = KeyedRateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build();
    (l, clock)
}

/// Permits granted one at a time right now, up to `max`.
fn drain(l: &RateLimiter<impl Algorithm>, max: usize) -> usize {
    (0..max).take_while(|_| l.try_acquire()).count()
}

fn q(count: u64, period: Duration) -> Quota {
    Quota::new(count, period).unwrap()
}

#[test]
fn gcra_block_refuses_until_its_end_then_refills_from_empty() {
    let (l, clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let d = l.block(5 * S);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(5 * S));
    assert_eq!(d.remaining, 0);
    clock.advance(4900 * MS);
    assert_eq!(
        l.try_acquire_n(1),
        Err(AcquireError::RateLimited {
            retry_after: 100 * MS
        })
    );
    clock.advance(100 * MS);
    // One permit at the end, then one per T: the bucket refills from empty.
    assert_eq!(drain(&l, 20), 1);
    clock.advance(900 * MS);
    assert_eq!(drain(&l, 20), 9);
    assert_eq!(l.peek().remaining, 0);
    clock.advance(S);
    assert_eq!(l.peek().remaining, 10);
}

#[test]
fn a_block_never_shortens_what_is_owed_and_zero_does_nothing() {
    let (l, _clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(l.block(Duration::ZERO), l.peek());
    assert_eq!(l.peek().remaining, 10);
    let d = l.penalize(100);
    assert_eq!(d.retry_after, Some(9100 * MS));
    assert_eq!(l.block(S), d, "a shorter block changes nothing");
    assert_eq!(l.block(20 * S).retry_after, Some(20 * S));
}

#[test]
fn gcra_penalty_is_debt_and_saturates() {
    let (l, clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let d = l.penalize(4);
    assert!(d.allowed);
    assert_eq!(d.remaining, 6);
    let d = l.penalize(10); // 14 taken: 4 beyond the burst
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(500 * MS));
    clock.advance(500 * MS);
    assert_eq!(drain(&l, 20), 1);
    // The largest penalty refuses for good, without overflow or panic.
    let d = l.penalize(u64::MAX);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, None);
    assert_eq!(
        l.try_acquire_n(1),
        Err(AcquireError::Unrepresentable { requested: 1 })
    );
    assert_eq!(l.block(Duration::MAX).retry_after, None);
    l.reset();
    assert_eq!(drain(&l, 20), 10);
}

#[test]
fn gcra_reward_never_passes_a_full_bucket() {
    let (l, _clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(l.reward(5).remaining, 10);
    assert_eq!(drain(&l, 20), 10);
    let d = l.reward(3);
    assert_eq!((d.allowed, d.remaining), (true, 3));
    assert_eq!(l.reward(u64::MAX).remaining, 10);
    assert_eq!(drain(&l, 30), 10);
}

/// A reservation cancelled after a reward gave its permits back gives back only what is
/// still below the tail: here nothing, as the reward already filled the bucket. Before the
/// refund rule was clipped at the tail, the cancel left a hole above it and 20 permits
/// passed at once at burst 10.
#[test]
fn a_cancel_after_a_reward_gives_nothing_twice() {
    let (l, _clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let r = l.reserve_n(10).unwrap();
    assert_eq!(r.delay(), Duration::ZERO);
    assert_eq!(l.reward(10).remaining, 10);
    r.cancel();
    assert_eq!(drain(&l, 30), 10);

    // The same after a reset.
    let (l, _clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let r = l.reserve_n(10).unwrap();
    l.reset();
    r.cancel();
    assert_eq!(drain(&l, 30), 10);
}

/// A reward moves the tail below an earlier reservation's end, a later one is booked from the
/// lowered tail, then both are cancelled (found by `tests/redis_gcra_holes.rs`'s property
/// test): the first cancel's hole reaches up to the tail; the second, the latest, moves the
/// tail back below that hole's end. The part of the hole at or above the new tail must go
/// (those positions are free already), or it would be handed out twice: at 104 ms, 2 permits
/// from the hole and 1 more from the tail, 3 at one instant with a burst of 2.
#[test]
fn cancelling_the_latest_below_a_hole_hands_nothing_out_twice() {
    let quota = Quota::from_interval(50 * MS)
        .unwrap()
        .with_burst(2)
        .unwrap();
    let (l, clock) = direct(quota, tollgate::Gcra);
    assert!(!l.block(54 * MS).allowed); // tail at 104 ms
    let a = l.reserve_n(3).unwrap(); // (104 ms, 254 ms]
    l.reward(1);
    l.reward(1); // tail at 154 ms
    let b = l.reserve_n(1).unwrap(); // (154 ms, 204 ms]
    a.cancel(); // a hole (104 ms, 204 ms]: a's part below the tail
    b.cancel(); // the latest: the tail back to 154 ms, and over what is free below it
    clock.advance(104 * MS);
    // Both cancelled: the state is the block's alone, as on a limiter that only blocked.
    let (only_blocked, clock2) = direct(quota, tollgate::Gcra);
    assert!(!only_blocked.block(54 * MS).allowed);
    clock2.advance(104 * MS);
    assert_eq!(l.peek(), only_blocked.peek());
    assert!(l.try_acquire_n(2).is_ok());
    assert!(
        !l.try_acquire(),
        "a third permit at one instant with a burst of 2"
    );
}

/// Holes: a reward drops the holes its lowered tail passes; a block clears them.
#[test]
fn gcra_holes_under_rewards_and_blocks() {
    let (l, clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(drain(&l, 10), 10);
    let a = l.reserve_n(2).unwrap(); // (1.0 s, 1.2 s]
    let _b = l.reserve_n(2).unwrap(); // (1.2 s, 1.4 s]
    a.cancel(); // a hole below the tail
    clock.advance(200 * MS);
    // At 0.2 s: the hole's 2 permits fit (they end by now + tau); the tail does not.
    assert_eq!(l.peek().remaining, 2);
    // Reward 3: the tail goes from 1.4 s to 1.1 s and the hole is cut to (1.0 s, 1.1 s]. The
    // positions it freed within reach, (1.1 s, 1.2 s], were the hole's already: a reward
    // gives back schedule positions, and those a hole held were free, so nothing more now.
    assert_eq!(l.reward(3).remaining, 2);
    // Reward 2: the tail goes to 0.9 s, past the hole, which goes: (0.9 s, 1.2 s] is free.
    assert_eq!(l.reward(2).remaining, 3);
    assert_eq!(drain(&l, 20), 3);
    // A block clears what holes are left.
    let (l, clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(drain(&l, 10), 10);
    let a = l.reserve_n(2).unwrap();
    let _b = l.reserve_n(2).unwrap();
    a.cancel();
    clock.advance(200 * MS);
    assert!(!l.block(S).allowed);
    assert_eq!(drain(&l, 20), 0);
    clock.advance(S);
    assert_eq!(drain(&l, 20), 1);
}

#[test]
fn fixed_window_block_ends_at_a_window_boundary_then_fresh() {
    let (l, clock) = direct(q(5, 10 * S), FixedWindow::new());
    clock.advance(3 * S); // 1003 s: window [1000 s, 1010 s)
    assert!(l.try_acquire());
    // Until 1018 s: the window [1010 s, 1020 s) holds its last instant.
    let d = l.block(15 * S);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(17 * S));
    clock.advance(16 * S);
    assert_eq!(l.check().retry_after, Some(S));
    clock.advance(S);
    assert_eq!(drain(&l, 10), 5);
}

#[test]
fn fixed_window_penalty_and_reward_count_in_the_window() {
    let (l, clock) = direct(q(5, 10 * S), FixedWindow::new());
    assert_eq!(l.penalize(3).remaining, 2);
    assert!(!l.penalize(100).allowed); // 103
    assert_eq!(l.reward(100).remaining, 2);
    assert_eq!(l.reward(100).remaining, 5); // floored at 0
    assert_eq!(drain(&l, 10), 5);
    assert_eq!(l.reward(2).remaining, 2);
    assert_eq!(drain(&l, 10), 2);
    assert!(!l.penalize(7).allowed);
    clock.advance(10 * S); // the next window: a penalty is forgotten with its window
    assert_eq!(drain(&l, 10), 5);
    // A block's count is held at its largest: a reward does not lift it, a reset does.
    assert!(!l.block(5 * S).allowed);
    assert!(!l.reward(1000).allowed);
    l.reset();
    assert_eq!(drain(&l, 10), 5);
}

fn sliding_block_is_exact<A: Algorithm + Copy>(alg: A) {
    let (l, clock) = direct(q(5, 10 * S), alg);
    assert_eq!(drain(&l, 2), 2);
    clock.advance(S); // at 1001 s
    let d = l.block(3 * S); // until 1004 s: an entry of 5 stamped 994 s
    assert_eq!(d.retry_after, Some(3 * S));
    clock.advance(3 * S - MS);
    assert_eq!(l.check().retry_after, Some(MS));
    clock.advance(MS);
    // The block is over; the two grants of 1000 s still count until 1010 s.
    assert_eq!(drain(&l, 10), 3);
    assert_eq!(l.check().retry_after, Some(6 * S));
    clock.advance(6 * S);
    assert_eq!(drain(&l, 10), 2);
    // A long block drops what would leave before its end: fresh at its end.
    let d = l.block(20 * S);
    assert_eq!(d.retry_after, Some(20 * S));
    clock.advance(20 * S - MS);
    assert!(!l.try_acquire());
    clock.advance(MS);
    assert_eq!(drain(&l, 10), 5);
}

#[test]
fn sliding_log_block_ends_exactly() {
    sliding_block_is_exact(SlidingLog);
}

#[test]
fn sliding_window_block_ends_exactly() {
    sliding_block_is_exact(SlidingWindow::new(5));
}

fn sliding_penalty_and_reward<A: Algorithm + Copy>(alg: A) {
    let (l, clock) = direct(q(5, 10 * S), alg);
    assert_eq!(l.penalize(2).remaining, 3);
    clock.advance(4 * S);
    assert!(l.try_acquire_n(3).is_ok());
    // Reward 2: the newest permits go first (the grant at 1004 s, not the penalty at 1000 s).
    assert_eq!(l.reward(2).remaining, 2);
    clock.advance(6 * S); // the penalty leaves at 1010 s
    assert_eq!(l.peek().remaining, 4);
    assert_eq!(l.reward(100).remaining, 5);
    let d = l.penalize(u64::MAX);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(10 * S));
}

#[test]
fn sliding_log_penalty_and_reward() {
    sliding_penalty_and_reward(SlidingLog);
}

#[test]
fn sliding_window_penalty_and_reward() {
    sliding_penalty_and_reward(SlidingWindow::new(10));
}

/// Near the clock's origin a sliding block cannot stamp before 0: it lasts until `W`.
#[test]
fn a_sliding_block_near_the_origin_lasts_a_window() {
    let clock = ManualClock::new();
    let l = RateLimiter::builder(q(5, 10 * S))
        .clock(clock.clone())
        .algorithm(SlidingLog)
        .unwrap()
        .build();
    clock.advance(S);
    assert_eq!(l.block(2 * S).retry_after, Some(9 * S));
}

#[test]
fn weighted_window_block_holds_a_full_window_then_decays() {
    let (l, clock) = direct(q(10, S), WeightedWindow);
    clock.advance(300 * MS); // 1000.3 s, window 1000
                             // Until 1000.8 s: window 1000 is counted full; window 1001 lets one permit in once
                             // 10 * (1 s - e) + 1 <= 10, at e = 100 ms.
    let d = l.block(500 * MS);
    assert_eq!(d.retry_after, Some(800 * MS));
    clock.advance(800 * MS);
    assert_eq!(drain(&l, 20), 1);
    clock.advance(S);
    assert_eq!(drain(&l, 20), 9);
    assert_eq!(l.penalize(3).remaining, 0); // cur 12
    clock.advance(S);
    // prev 12 weighs 90%: 10.8 of 10; reward 2 takes from prev (cur is empty): 9 of 10.
    assert_eq!(l.reward(2).remaining, 1);
}

#[test]
fn weighted_window_penalty_and_reward() {
    let (l, clock) = direct(q(10, S), WeightedWindow);
    assert_eq!(l.penalize(4).remaining, 6);
    clock.advance(S); // window 1001: the 4 weigh 100% at its start
    assert_eq!(l.peek().remaining, 6);
    assert_eq!(l.reward(1).remaining, 7); // from `prev`, as `cur` is empty
    assert!(!l.penalize(u64::MAX).allowed);
    assert_eq!(l.reward(u64::MAX).remaining, 10);
}

/// A blocked key carries information: the sweeper keeps it until the block has passed.
#[test]
fn the_sweeper_keeps_a_blocked_key() {
    fn check<A: Algorithm + Copy>(alg: A) {
        let (l, clock) = keyed(q(5, S), alg);
        assert!(l.block(&1, 60 * S).is_ok());
        clock.advance(59 * S);
        assert_eq!(l.sweep_now(), 0, "{alg:?}");
        assert!(!l.try_acquire(&1), "{alg:?}");
        clock.advance(3 * S);
        assert_eq!(l.sweep_now(), 1, "{alg:?}");
        assert!(l.try_acquire(&1), "{alg:?}");
    }
    check(tollgate::Gcra);
    check(FixedWindow::new());
    check(SlidingWindow::new(5));
    check(WeightedWindow);
    check(SlidingLog);
}

#[test]
fn a_reward_lets_the_sweeper_evict_sooner() {
    let (l, clock) = keyed(q(5, S), tollgate::Gcra);
    assert!(l.penalize(&1, 50).is_ok());
    assert_eq!(l.reward(&1, 50).remaining, 5);
    clock.advance_nanos(1);
    assert_eq!(l.sweep_now(), 1);
}

#[test]
fn the_key_cap_refuses_to_record_a_new_key_but_reset_frees_a_slot() {
    for when_full in [WhenFull::Deny, WhenFull::AllowUntracked] {
        let clock = ManualClock::new();
        let l = KeyedRateLimiter::<u32>::builder(Quota::per_second(5).unwrap())
            .clock(clock.clone())
            .max_keys(NonZeroUsize::MIN)
            .when_full(when_full)
            .build();
        assert!(l.penalize(&1, 2).is_ok());
        let full = l.block(&2, S).unwrap_err();
        let AdjustError::KeyCapReached { retry_after } = full else {
            unreachable!()
        };
        assert!(retry_after > Duration::ZERO && retry_after <= S);
        assert!(l.penalize(&2, 1).is_err());
        // A reward never stores a new key, so it never meets the cap.
        assert_eq!(l.reward(&2, 1).remaining, 5);
        assert_eq!(l.len(), 1);
        // Blocking and penalizing a tracked key at the cap works.
        assert!(l.block(&1, S).is_ok());
        assert!(l.reset(&1));
        assert!(!l.reset(&1));
        assert_eq!(l.len(), 0);
        assert!(l.block(&2, S).is_ok());
        assert!(l.contains_key(&2));
        assert!(!l.try_acquire(&2));
    }
}

#[test]
fn reset_is_a_fresh_key_for_every_algorithm() {
    fn check<A: Algorithm + Copy>(alg: A) {
        let (l, clock) = keyed(q(5, 10 * S), alg);
        let (fresh, fresh_clock) = keyed(q(5, 10 * S), alg);
        assert!(l.penalize(&1, 3).is_ok());
        assert!(l.block(&1, 100 * S).is_ok());
        assert!(l.reset(&1));
        assert!(!l.contains_key(&1));
        for step in 0..30u64 {
            let n = step % 4;
            assert_eq!(
                l.check_n(&1, n),
                fresh.check_n(&1, n),
                "{alg:?} step {step}"
            );
            clock.advance(700 * MS);
            fresh_clock.advance(700 * MS);
        }
        // The direct limiter's reset too.
        let (d, clock) = direct(q(5, 10 * S), alg);
        let (f, fclock) = direct(q(5, 10 * S), alg);
        assert!(!d.block(100 * S).allowed);
        d.reset();
        for step in 0..30u64 {
            let n = step % 4;
            assert_eq!(d.check_n(n), f.check_n(n), "{alg:?} step {step}");
            clock.advance(700 * MS);
            fclock.advance(700 * MS);
        }
    }
    check(tollgate::Gcra);
    check(FixedWindow::new());
    check(SlidingWindow::new(5));
    check(WeightedWindow);
    check(SlidingLog);
}

/// A block lives in the algorithm's state, so a quota change treats it as that state (the
/// guide's Penalties page): GCRA keeps it as debt in permits.
#[test]
fn a_gcra_block_is_debt_under_a_quota_change() {
    let (l, clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(l.block(10 * S).retry_after, Some(10 * S));
    l.set_quota(Quota::per_second(5).unwrap()).unwrap();
    // 10.9 s of debt is 109 permits; at 5/s they are 21.8 s, of which the burst's 1 s less
    // one interval's 0.2 s need not have drained for one permit.
    assert_eq!(l.check().retry_after, Some(21 * S));
    clock.advance(21 * S);
    assert!(l.try_acquire());
}

#[test]
fn keyed_and_direct_agree() {
    let (k, kclock) = keyed(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let (d, dclock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    assert_eq!(k.penalize(&1, 3).unwrap(), d.penalize(3));
    assert_eq!(k.reward(&1, 1), d.reward(1));
    assert_eq!(k.block(&1, S).unwrap(), d.block(S));
    kclock.advance(S);
    dclock.advance(S);
    assert_eq!(kclock.now(), dclock.now());
    assert_eq!(k.check(&1), d.check());
}

/// The largest inputs, on a clock near the end of its range too: no overflow, no panic (the
/// tests run with overflow checks), and a reset still gives a fresh key.
#[test]
fn extreme_inputs_never_panic() {
    fn check<A: Algorithm + Copy>(alg: A) {
        for start in [0, 1000 * 1_000_000_000, tollgate::MAX_NANOS - 5_000_000_000] {
            let clock = ManualClock::new();
            clock.set(start);
            let l = KeyedRateLimiter::<u32>::builder(q(5, 10 * S))
                .clock(clock.clone())
                .algorithm(alg)
                .unwrap()
                .build();
            for key in 0..3u32 {
                let _ = l.penalize(&key, u64::MAX).unwrap();
                let _ = l.block(&key, Duration::MAX).unwrap();
                let _ = l.penalize(&key, u64::MAX).unwrap();
                let _ = l.reward(&key, u64::MAX - 1);
                let _ = l.block(&key, Duration::MAX).unwrap();
                assert!(!l.try_acquire(&key), "{alg:?} at {start}");
                let _ = l.check_n(&key, 5);
                let _ = l.peek(&key);
            }
            // Within the clock's range (past `MAX_NANOS` every state is in the past).
            clock.advance(S);
            assert_eq!(
                l.sweep_now(),
                0,
                "{alg:?} at {start}: a block for good is kept"
            );
            l.set_quota(q(3, 5 * S)).unwrap();
            let _ = l.check(&0);
            assert!(l.reset(&0), "{alg:?} at {start}: {:?}", l.peek(&1));
            if start < tollgate::MAX_NANOS - 5_000_000_000 {
                assert!(l.try_acquire(&0), "{alg:?} at {start}");
            }
        }
    }
    check(tollgate::Gcra);
    check(FixedWindow::new());
    check(SlidingWindow::new(5));
    check(WeightedWindow);
    check(SlidingLog);
}

/// The documented limit (guide, Penalties, GCRA): a reservation made before a reset and
/// cancelled after the key took permits past its stretch gives its permits to the new state,
/// at most its own count, once.
#[test]
fn a_cancel_after_a_reset_gives_at_most_its_own_permits() {
    let (l, _clock) = direct(Quota::per_second(10).unwrap(), tollgate::Gcra);
    let r = l.reserve_n(2).unwrap();
    l.reset();
    let before = drain(&l, 30);
    r.cancel();
    let after = drain(&l, 30);
    assert_eq!(before, 10);
    assert!(after <= 2, "{after} permits after the cancel");
}

/// A grant is stamped `now` (its sub-window's start), also while a block's entry stamped
/// later still counts after a reward: W = 1 µs, L = 2. A block of 3 µs at 5 µs is an entry of
/// 2 stamped 7 µs; a reward leaves 1 in it. The grant at 5 µs counts until 6 µs, so at 6.5 µs
/// a second one fits beside the block's 1 (it was refused until 8 µs: the grant had been
/// stamped with the block's 7 µs). Direct and keyed, both sliding algorithms; the keyed key
/// stays tracked until its newest entry (the block's) leaves, at 8 µs.
#[test]
fn a_grant_after_a_rewarded_long_block_is_stamped_now() {
    fn check<A: Algorithm + Copy>(alg: A) {
        let q = Quota::new(2, Duration::from_nanos(1000)).unwrap();
        let clock = ManualClock::new();
        let l = RateLimiter::builder(q)
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build();
        clock.set(5000);
        let d = l.block(Duration::from_nanos(3000));
        assert_eq!(d.retry_after, Some(Duration::from_nanos(3000)), "{alg:?}");
        assert_eq!(l.reward(1).remaining, 1, "{alg:?}");
        assert_eq!(l.try_acquire_n(1), Ok(()), "{alg:?}");
        assert_eq!(l.peek().reset_after, Duration::from_nanos(3000), "{alg:?}");
        clock.set(6500);
        assert_eq!(l.try_acquire_n(1), Ok(()), "{alg:?}");
        // Now full: the grant at 6.5 µs leaves at 7.5 µs, the block's entry at 8 µs.
        assert_eq!(
            l.try_acquire_n(1),
            Err(AcquireError::RateLimited {
                retry_after: Duration::from_nanos(1000)
            }),
            "{alg:?}"
        );

        let clock = ManualClock::new();
        let k = KeyedRateLimiter::<u32>::builder(q)
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build();
        clock.set(5000);
        assert!(k.block(&1, Duration::from_nanos(3000)).is_ok());
        assert_eq!(k.reward(&1, 1).remaining, 1, "{alg:?}");
        assert_eq!(k.try_acquire_n(&1, 1), Ok(()), "{alg:?}");
        clock.set(6500);
        assert_eq!(k.try_acquire_n(&1, 1), Ok(()), "{alg:?}");
        assert_eq!(k.check(&1).retry_after, Some(Duration::from_nanos(1000)));
        clock.set(7999);
        assert_eq!(k.sweep_now(), 0, "{alg:?}: the block's entry still counts");
        assert_eq!(k.peek(&1).remaining, 1, "{alg:?}");
        clock.set(8000);
        assert_eq!(k.sweep_now(), 1, "{alg:?}: nothing counts from 8 µs");
        assert!(!k.contains_key(&1));
    }
    check(SlidingLog);
    check(SlidingWindow::new(2));
}

/// The weighted window's block ending in a later window leaves the key's counts in that
/// window, ahead of the clock. A reward lowers its count, and until the clock reaches it every
/// decision is made as at its start (`e = 0`: the window before it weighs fully); grants and
/// penalties count in it.
#[test]
fn weighted_window_decides_a_rewarded_blocks_window_as_at_its_start() {
    let (l, clock) = direct(q(10, S), WeightedWindow);
    clock.advance(300 * MS); // 1000.3 s, window 1000
    assert_eq!(l.penalize(3).remaining, 7);
    // Until 1001.3 s: window 1001 full, with window 1000's 3 as its previous count.
    assert!(!l.block(S).allowed);
    // 8 from window 1001's 10: 2 left, and the 3 before it weigh fully, as at 1001.0 s.
    assert_eq!(l.reward(8).remaining, 5);
    assert_eq!(l.penalize(1).remaining, 4); // counted in window 1001 too
    assert!(l.try_acquire_n(4).is_ok());
    // Window 1001 counts 7, window 1000 3: the next permit fits once 3 (W - e) + 8 W <= 10 W,
    // e = W - floor(2 W / 3) into window 1001.
    let d = l.check();
    assert_eq!(d.retry_after, Some(Duration::from_nanos(1_033_333_334)));
    assert_eq!(d.reset_after, Duration::from_millis(2700)); // window 1001's count weighs until 1003 s
    clock.advance(Duration::from_nanos(1_033_333_334));
    assert!(l.try_acquire());
    assert!(!l.try_acquire());
}

/// A reward that empties the block's later window (both its counts) makes the key a fresh
/// one: decided in the clock's window, and evictable at once.
#[test]
fn weighted_window_a_block_window_emptied_by_a_reward_is_a_fresh_key() {
    let (l, clock) = direct(q(10, S), WeightedWindow);
    let (fresh, fresh_clock) = direct(q(10, S), WeightedWindow);
    clock.advance(300 * MS);
    fresh_clock.advance(300 * MS);
    assert!(!l.block(2 * S).allowed); // window 1002 full
    assert_eq!(l.reward(10).remaining, 10);
    for step in 0..12u64 {
        let n = step % 4 * 3;
        assert_eq!(l.check_n(n), fresh.check_n(n), "step {step}");
        clock.advance(300 * MS);
        fresh_clock.advance(300 * MS);
    }
    // Keyed: the emptied key carries nothing, so a sweep evicts it; one count left keeps it.
    let (k, clock) = keyed(q(10, S), WeightedWindow);
    clock.advance(300 * MS);
    assert!(k.block(&1, 2 * S).is_ok());
    assert!(k.block(&2, 2 * S).is_ok());
    assert_eq!(k.reward(&1, 10).remaining, 10);
    assert_eq!(k.reward(&2, 9).remaining, 9); // 1 left in window 1002
    assert_eq!(k.sweep_now(), 1);
    assert!(!k.contains_key(&1) && k.contains_key(&2));
    clock.advance(2700 * MS - Duration::from_nanos(1)); // window 1002's count weighs until 1004 s
    clock.advance(S);
    assert_eq!(k.sweep_now(), 0);
    clock.advance_nanos(1);
    assert_eq!(k.sweep_now(), 1);
}

/// A block shorter than the key's later window (after a reward lowered it) counts that window
/// full: it lasts to that window's end, then decays as after any full window.
#[test]
fn weighted_window_a_shorter_block_lasts_to_the_later_windows_end() {
    let (l, clock) = direct(q(10, S), WeightedWindow);
    clock.advance(300 * MS); // 1000.3 s
    assert!(!l.block(2 * S).allowed); // until 1002.3 s: window 1002 full
    assert_eq!(l.reward(4).remaining, 4);
    // Until 1000.4 s asked; window 1002 is counted full again: refused until 1003 s, and one
    // permit fits W - floor(9 W / 10) = 100 ms into window 1003.
    let d = l.block(100 * MS);
    assert_eq!(d.retry_after, Some(2800 * MS));
    clock.advance(2800 * MS - Duration::from_nanos(1));
    assert!(!l.try_acquire());
    clock.advance_nanos(1);
    assert!(l.try_acquire());
}
