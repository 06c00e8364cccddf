//! The cell's protocol single-threaded: spilling, holes, coalescing, migration.

use super::*;

/// T = 10 ns, b = 2, generation 0.
fn p0() -> GcraParams {
    GcraParams::new(10, 2, 0, 10, 0)
}

fn booked(b: Result<Booking<Ticket>, AcquireError>) -> Ticket {
    match b {
        Ok(Booking::Booked { ticket, .. }) => ticket,
        other => panic!("expected a booking, got {other:?}"),
    }
}

#[test]
fn a_latest_cancel_stays_one_word_and_a_middle_one_spills() {
    let c = GcraCell::default();
    let src = || p0();
    assert!(c.check(100, 2, &src).allowed()); // tail 120
    let a = booked(c.reserve(100, 1, &src, None)); // (120, 130]
    let b = booked(c.reserve(100, 1, &src, None)); // (130, 140]
                                                   // b is the latest: the word moves back, nothing spills.
    c.cancel(&b, 100, &src);
    assert_eq!(c.snapshot(), (130, None));
    let b = booked(c.reserve(100, 1, &src, None));
    // a is not: the cell spills with a's stretch as a hole.
    c.cancel(&a, 100, &src);
    assert_eq!(c.snapshot(), (140, Some(vec![(120, 130)])));
    assert!(!c.is_fresh());
    // A decision takes the hole (it is inside the window [100, 120]? no: the hole starts at
    // 120, so one permit needs the window to reach 130, at 110).
    assert!(!c.check(100, 1, &src).allowed());
    assert!(c.check(110, 1, &src).allowed());
    assert_eq!(c.snapshot(), (140, Some(vec![])));
    // Cancelling b now moves the tail back; the emptied spill stays allocated until drop.
    c.cancel(&b, 110, &src);
    assert_eq!(c.snapshot(), (130, Some(vec![])));
}

#[test]
fn cancelling_everything_in_any_order_coalesces_into_the_tail() {
    for order in [
        [0, 1, 2],
        [2, 1, 0],
        [1, 0, 2],
        [0, 2, 1],
        [2, 0, 1],
        [1, 2, 0],
    ] {
        let c = GcraCell::default();
        let src = || p0();
        assert!(c.check(100, 2, &src).allowed()); // tail 120
        let tickets: Vec<Ticket> = (0..3)
            .map(|_| booked(c.reserve(100, 1, &src, None)))
            .collect();
        for i in order {
            c.cancel(&tickets[i], 100, &src);
        }
        assert_eq!(c.snapshot().0, 120, "{order:?}");
        assert!(c.snapshot().1.unwrap_or_default().is_empty(), "{order:?}");
    }
}

#[test]
fn migration_rescales_the_debt_once() {
    let c = GcraCell::default();
    assert!(c.check(0, 2, &|| p0()).allowed()); // tail 20: 2 permits of debt at T 10
    let p1 = GcraParams::new(100, 2, 1, 10, 0);
    // A decision under generation 1 sees 2 permits of debt at T 100: tail 200.
    let v = c.check(0, 0, &|| p1);
    assert_eq!(v.tail, 200);
    // A peek stores nothing, not even the migration; `migrate` does, exactly once.
    assert_eq!(c.tat(), 20);
    c.migrate(&|| p1);
    assert_eq!(c.tat(), 200);
    c.migrate(&|| p1);
    assert_eq!(c.tat(), 200);
    assert_eq!(c.tat_in(&p1), 200);
}

#[test]
fn a_spilled_cell_migrates_its_tail_and_drops_old_holes() {
    let c = GcraCell::default();
    let src0 = || p0();
    assert!(c.check(0, 2, &src0).allowed()); // tail 20
    let a = booked(c.reserve(0, 1, &src0, None)); // (20, 30]
    let _b = booked(c.reserve(0, 1, &src0, None)); // (30, 40]
    c.cancel(&a, 0, &src0);
    assert_eq!(c.snapshot(), (40, Some(vec![(20, 30)])));
    let p1 = GcraParams::new(20, 2, 1, 10, 0);
    c.migrate(&|| p1);
    assert_eq!(c.tat(), 80);
    // The next locked decision finds holes of another generation and drops them: a refusal
    // at worst, never a grant from a stretch measured in the old scale.
    let v = c.check(0, 1, &|| p1);
    assert!(!v.allowed());
    assert_eq!(c.snapshot(), (80, Some(vec![])));
}
