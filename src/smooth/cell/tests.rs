//! The cell's protocol single-threaded: when the word is locked, when it unlocks, and which
//! refunds happen. (Concurrency is in the loom models and the stress tests.)

use super::*;

const BURSTY: Shape = Shape::Bursty {
    max_burst_seconds: 1.0,
};

fn admit_all(_: Micros) -> Result<(), Infallible> {
    Ok(())
}

use std::convert::Infallible;

fn reserve(c: &SmoothCell, now: Micros, n: u64) -> Ticket {
    match c.reserve(now, n, admit_all) {
        Ok(t) => t,
        Err(never) => match never {},
    }
}

fn content(c: &SmoothCell) -> (f64, Micros) {
    let s = c.load().state();
    (s.stored, s.next_free)
}

#[test]
fn words_round_trip_and_nan_is_canonical() {
    for (stored, next_free) in [(0.0, 0), (2.5, 17), (f64::INFINITY, i64::MAX)] {
        for locked in [false, true] {
            let w = Word::pack(State { stored, next_free }, locked);
            assert_eq!(w.state().stored.to_bits(), stored.to_bits());
            assert_eq!((w.state().next_free, w.locked()), (next_free, locked));
        }
    }
    let a = Word::pack(
        State {
            stored: f64::NAN,
            next_free: 3,
        },
        false,
    );
    let b = Word::pack(
        State {
            stored: -f64::NAN,
            next_free: 3,
        },
        false,
    );
    assert_eq!(a, b);
    assert!(a.state().stored.is_nan());
}

#[test]
fn set_rate_that_moves_next_free_leaves_the_word_unlocked() {
    let c = SmoothCell::new(BURSTY, 1.0);
    c.set_rate(|| 2_000_000, 2.0); // idle 2 s at rate 1: 1 stored, rescaled to 2
    assert!(!c.load().locked());
    assert_eq!(content(&c), (2.0, 2_000_000));
    assert_eq!(c.rate(), 2.0);
}

#[test]
fn set_rate_in_debt_locks_until_next_free_passes_the_high_water_mark() {
    let c = SmoothCell::new(BURSTY, 1.0);
    reserve(&c, 0, 3); // debt to 3 s
    let before = c.load();
    c.set_rate(|| 1_000_000, 2.0); // resync moves nothing: 0 stored -> 0, next_free kept
    let after = c.load();
    assert!(after.locked());
    assert_eq!(after.content(), before.content());
    assert_eq!(c.lock().hwm, 3_000_000);
    // The next reservation moves next_free past 3 s: unlocked again, at the new rate.
    let t = reserve(&c, 1_000_000, 1);
    assert_eq!(t.moment, 3_000_000);
    assert!(!c.load().locked());
    assert_eq!(content(&c), (0.0, 3_500_000));
}

#[test]
fn refunding_the_latest_restores_the_state_exactly_and_locks() {
    let c = SmoothCell::new(BURSTY, 1.0);
    reserve(&c, 0, 1);
    let before = c.load();
    let t = reserve(&c, 0, 4);
    c.cancel(&t);
    assert_eq!(c.load().content(), before.content());
    assert!(c.load().locked());
    assert_eq!(c.lock().hwm, 5_000_000);
    // A smaller reservation does not pass 5 s: still locked; a larger one does.
    reserve(&c, 0, 2);
    assert!(c.load().locked());
    reserve(&c, 0, 3);
    assert!(!c.load().locked());
    assert_eq!(content(&c).1, 6_000_000);
}

#[test]
fn refunds_unwind_latest_first_and_never_skip_a_later_reservation() {
    let c = SmoothCell::new(BURSTY, 1.0);
    let start = c.load();
    let a = reserve(&c, 0, 2);
    let b = reserve(&c, 0, 3);
    c.cancel(&a); // not the latest: b's wait was computed from it
    assert_eq!(content(&c).1, 5_000_000);
    c.cancel(&b);
    assert_eq!(content(&c).1, 2_000_000);
    c.cancel(&a); // now it is the latest
    assert_eq!(c.load().content(), start.content());
    c.cancel(&a); // twice: nothing
    assert_eq!(c.load().content(), start.content());
}

#[test]
fn no_refund_across_a_set_rate() {
    let c = SmoothCell::new(BURSTY, 1.0);
    reserve(&c, 0, 1);
    let t = reserve(&c, 0, 2);
    c.set_rate(|| 0, 1.0); // even the same rate: a new generation
    let w = c.load();
    c.cancel(&t);
    assert_eq!(c.load(), w);
}

#[test]
fn a_reservation_that_changes_nothing_is_not_refunded() {
    let c = SmoothCell::new(BURSTY, f64::INFINITY);
    let t = reserve(&c, 0, 5);
    let w = c.load();
    c.cancel(&t);
    assert_eq!(c.load(), w);
    assert!(!w.locked());
}

#[test]
fn refused_reservations_store_nothing() {
    let c = SmoothCell::new(BURSTY, 1.0);
    reserve(&c, 0, 1);
    let w = c.load();
    let r = c.reserve(10, 1, |next_free| {
        if rules::can_acquire(next_free, 10, 0) {
            Ok(())
        } else {
            Err(next_free)
        }
    });
    assert_eq!(r.unwrap_err(), 1_000_000);
    assert_eq!(c.load(), w);
}

/// After a `set_rate`, the word never again equals an unlocked word from before it: what
/// keeps a decision that read the old parameters from completing after it (module docs).
#[test]
fn no_unlocked_word_from_before_a_set_rate_comes_back() {
    let shapes = [
        BURSTY,
        Shape::WarmingUp {
            warmup: 4_000_000,
            cold_factor: 3.0,
        },
    ];
    for shape in shapes {
        for (rate, new_rate) in [(1.0, 1.0), (1.0, 2.0), (2.0, 0.5), (f64::INFINITY, 3.0)] {
            let c = SmoothCell::new(shape, rate);
            // Unlocked words seen before the latest set_rate, and every word since it.
            let (mut stale, mut since): (Vec<Word>, Vec<Word>) = (Vec::new(), vec![c.load()]);
            let mut now = 0;
            for step in 0..40u64 {
                if step % 5 == 0 {
                    stale.extend(since.drain(..).filter(|w| !w.locked()));
                    c.set_rate(|| now, if step % 2 == 0 { new_rate } else { rate });
                } else if step % 5 == 1 {
                    let t = reserve(&c, now, 1 + step % 3);
                    if step % 3 == 0 {
                        c.cancel(&t);
                    }
                } else if step % 5 == 2 {
                    now += 250_000;
                } else {
                    reserve(&c, now, 1);
                }
                let w = c.load();
                assert!(!stale.contains(&w), "{shape:?} {rate} {new_rate} {step}");
                since.push(w);
            }
        }
    }
}
