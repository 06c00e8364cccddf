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

/// A fresh cell that granted its whole burst at `now` under [`p0`] (tail `now + 20`), then
/// booked `bookings` single permits behind it: `(now + 20, now + 30]`, `(now + 30, now + 40]`...
fn drained_then_booked(now: Nanos, bookings: usize) -> (GcraCell, Vec<Ticket>) {
    let c = GcraCell::default();
    let src = || p0();
    assert!(c.check(now, 2, &src).allowed());
    let tickets = (0..bookings)
        .map(|_| booked(c.reserve(now, 1, &src, None)))
        .collect();
    (c, tickets)
}

#[test]
fn a_latest_cancel_stays_one_word_and_a_middle_one_spills() {
    let (c, tickets) = drained_then_booked(100, 2);
    let src = || p0();
    let (a, b) = (tickets[0], tickets[1]); // (120, 130], (130, 140]
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
        let (c, tickets) = drained_then_booked(100, 3);
        let src = || p0();
        for i in order {
            c.cancel(&tickets[i], 100, &src);
        }
        assert_eq!(c.snapshot().0, 120, "{order:?}");
        assert!(c.snapshot().1.unwrap_or_default().is_empty(), "{order:?}");
    }
}

#[test]
fn migration_rescales_the_debt_once() {
    let (c, _) = drained_then_booked(0, 0); // tail 20: 2 permits of debt at T 10
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
    assert_eq!(Gcra.cold_at(&c, &p1), 200);
}

#[test]
fn a_spilled_cell_migrates_its_tail_and_drops_old_holes() {
    let (c, tickets) = drained_then_booked(0, 2); // (20, 30], (30, 40]
    c.cancel(&tickets[0], 0, &|| p0());
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

/// Heap addresses as tagged-pointer platforms hand them out: Android's top-byte tag (0xB4,
/// bit 63 set), MTE's and HWASan's tags in the top byte, and the highest 8-aligned address.
/// Only the ones `usize` can hold are used on a narrower target.
fn tagged_addresses() -> impl Iterator<Item = usize> {
    [
        0x0000_0000_0000_0008_u64,
        0x0000_7fff_ffff_fff8,
        0xb400_0070_1c2d_3e40, // Android aarch64 (TBI): tag 0xb4
        0xb4ff_ffff_ffff_fff8,
        0x0f00_ffff_a0b0_c0d0, // MTE: a tag in bits 56..59
        0xff00_0000_0000_0010, // HWASan: any top byte
        0x8000_0000_0000_0000, // bit 63 alone
        0xc000_0000_0000_0000, // bits 63 and 62 (the flag and the parity bit of a TAT word)
        !7,                    // the highest 8-aligned address
        0x0000_0000_ffff_fff8, // the highest on a 32-bit target
    ]
    .into_iter()
    .filter_map(|a| usize::try_from(a).ok())
}

#[test]
fn tagged_spill_addresses_round_trip_exactly() {
    for addr in tagged_addresses() {
        let w = spill_word(addr).unwrap_or_else(|| panic!("{addr:#x} refused"));
        assert_ne!(w & FLAG, 0, "{addr:#x}: a spill's word reads as spilled");
        assert_eq!(
            spill_addr(w),
            addr,
            "{addr:#x} -> {w:#x} lost an address bit"
        );
    }
}

#[test]
fn an_address_with_low_bits_set_is_refused() {
    for addr in tagged_addresses() {
        for low in 1..8 {
            assert_eq!(spill_word(addr | low), None, "{:#x}", addr | low);
        }
    }
}

proptest::proptest! {
    /// Any address: encodable iff 8-aligned, and then decoded to exactly itself, with the
    /// spilled bit set (so it never reads as a TAT word).
    #[test]
    fn spill_words_encode_exactly_the_aligned_addresses(addr in proptest::num::usize::ANY) {
        match spill_word(addr) {
            Some(w) => {
                proptest::prop_assert_eq!(addr % 8, 0);
                proptest::prop_assert_ne!(w & FLAG, 0);
                proptest::prop_assert_eq!(spill_addr(w), addr);
            }
            None => proptest::prop_assert_ne!(addr % 8, 0),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Decide(u64),
    Reserve(u64),
    Cancel(usize),
    SetQuota(u64, u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u64..40).prop_map(Op::Decide),
        2 => (1u64..3).prop_map(Op::Reserve),
        2 => (0usize..8).prop_map(Op::Cancel),
        1 => (1u64..30, 1u64..4).prop_map(|(t, b)| Op::SetQuota(t, b)),
    ]
}

proptest::proptest! {
    /// `allows` (`try_acquire`'s form: the first words of the parameters, the common word
    /// inline) decides and stores exactly as `check` of one permit, on cells spilled by
    /// cancels and cells a quota generation behind.
    #[test]
    fn allows_decides_as_the_check_of_one_permit(ops in proptest::collection::vec(op(), 1..40)) {
        use crate::algorithm::rules::Terms;
        use crate::cell::params::{Live, ParamsCell};
        use crate::quota::Quota;
        use std::time::Duration;

        let params = ParamsCell::new(p0());
        let live = Live(&params);
        let (a, b) = (GcraCell::default(), GcraCell::default());
        let mut tickets = Vec::new();
        let mut now = 0;
        for op in ops {
            match op {
                Op::Decide(dt) => {
                    now += dt;
                    let checked = b.check(now, 1, &live).allowed();
                    proptest::prop_assert_eq!(a.allows(now, live), checked);
                }
                Op::Reserve(n) => {
                    let r = a.reserve(now, n, &live, None);
                    proptest::prop_assert_eq!(b.reserve(now, n, &live, None), r);
                    if let Ok(Booking::Booked { ticket, .. }) = r {
                        tickets.push(ticket);
                    }
                }
                Op::Cancel(i) => {
                    if i < tickets.len() {
                        let t = tickets.remove(i);
                        a.cancel(&t, now, &live);
                        b.cancel(&t, now, &live);
                    }
                }
                Op::SetQuota(t, burst) => {
                    // As `set_quota`: a cell is never more than one generation behind.
                    a.migrate(&live);
                    b.migrate(&live);
                    let q = Quota::from_interval(Duration::from_nanos(t)).and_then(|q| q.with_burst(burst)).unwrap();
                    params.store(Gcra.next_params(&params.load_full(), &q, now).unwrap());
                }
            }
            proptest::prop_assert_eq!(a.snapshot(), b.snapshot());
            proptest::prop_assert_eq!(a.tail_word(), b.tail_word());
        }
    }
}
