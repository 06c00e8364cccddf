//! Reservations racing with cancels (`TatCell::reserve` / `TatCell::cancel`).
//!
//! Property: whatever the interleaving,
//! - the history is linearizable: every `ready_at` handed out and the final TAT equal those of
//!   a sequential execution of the same calls (a refund computed from a stale TAT, or a
//!   reservation lost to a racing refund, shows up as a history no sequential order produces);
//! - refunds never give back capacity a later reservation was scheduled against: the permits in
//!   use (reservations not cancelled, at their ready times), together with everything the
//!   limiter hands out afterwards (probed with further reservations), conform to the quota.
//!
//! The limiter starts with its burst taken, so every reservation waits and cancelling it
//! before its ready time refunds (the clock is frozen).

use tollgate_loom_tests::{conforms, grants, probe, quota, run_model, History, Op, Out, Setup};

const T: u64 = 100;
const NOW: u64 = 1_000;

fn setup(burst: u64) -> Setup {
    Setup {
        quota: quota(T, burst),
        now: NOW,
        preload: burst,
    }
}

/// The conformance half of the property, shared by the models below.
fn check_capacity(
    setup: &Setup,
    threads: &[Vec<Op>],
    observed: &History,
    limiter: &tollgate::RateLimiter,
) {
    let mut used = grants(setup, threads, observed);
    used.extend(probe(limiter, 3));
    if let Err(e) = conforms(&used, setup.quota) {
        panic!("over-admission after cancel: {e}\n  history: {observed:?}");
    }
}

/// A reserves then cancels while B reserves: B's ready time stays honoured (the stored debt
/// still covers B's slot), and A's refund is all of A's slot if B came first or after the cancel,
/// nothing if B was scheduled behind A.
#[test]
fn reserve_cancel_vs_reserve() {
    let threads = vec![vec![Op::Reserve(1), Op::CancelLast], vec![Op::Reserve(1)]];
    run_model(setup(1), threads, |setup, threads, observed, limiter| {
        let Out::Ready(Ok(b_ready)) = observed.outs[1][0] else {
            panic!("B's reservation failed: {observed:?}");
        };
        // B's slot ends at b_ready + tau: the stored TAT must still cover it.
        let tau = T * setup.quota.burst();
        assert!(
            observed.fin.tat >= b_ready + tau,
            "B's slot was refunded: {observed:?}"
        );
        check_capacity(setup, threads, observed, limiter);
    });
}

/// Two threads reserve then cancel while a third reserves: refunds race with each other and
/// with a reservation that must keep its slot.
#[test]
fn two_cancellers_vs_reserve() {
    let threads = vec![
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1)],
    ];
    run_model(setup(1), threads, check_capacity);
}

/// A larger reservation cancelled after a smaller one was scheduled behind it. The refund rule
/// of DESIGN.md 3, `n*T - (tat_now - new_tat)`, would give back `T` here, re-opening the slot B
/// was scheduled into, so a later caller would be granted B's instant too (two permits at once
/// on a burst-1 cell); the rule in `gcra::refund` refunds only the latest reservation.
#[test]
fn larger_cancel_behind_smaller_reserve() {
    let threads = vec![vec![Op::Reserve(2), Op::CancelLast], vec![Op::Reserve(1)]];
    run_model(setup(1), threads, check_capacity);
}
