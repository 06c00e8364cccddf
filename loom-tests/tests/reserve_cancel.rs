//! Reservations racing with cancels and decisions (`GcraCell::reserve` / `cancel` / `check`,
//! including a cell spilling into holes and decisions that find the holes locked).
//!
//! Property, whatever the interleaving:
//! - no capacity is lost and none is handed out twice: once every thread is done, the
//!   schedule's occupied positions after `now` measure exactly what the holders still hold
//!   (reservations not cancelled, at their exact stretches; granted checks; the preload), each
//!   held reservation's stretch is occupied and no two overlap
//!   ([`assert_schedule_exact`]). A cancel that is not the latest must leave a hole, and the
//!   hole must be reused or stay free; a refund of the latest must move the tail back;
//! - everything handed out, together with what the limiter hands out afterwards (probed with
//!   further reservations), conforms to the quota from the definition ([`conforms`]).
//!
//! These models check properties, not a strict order: a decision that finds the cell's holes
//! locked by a concurrent cancel decides on the tail alone (it never waits), which a sequential
//! execution would not do. That can only refuse or postpone, so both properties still hold.
//!
//! The limiter starts with its burst taken, so every reservation waits (the clock is frozen).

use tollgate_loom_tests::{
    assert_schedule_exact, conforms, grants, probe, quota, run_model_props, History, Op, Setup,
};

const T: u64 = 100;
const NOW: u64 = 1_000;

fn setup(burst: u64) -> Setup {
    Setup {
        quota: quota(T, burst),
        now: NOW,
        preload: burst,
    }
}

fn check(setup: &Setup, threads: &[Vec<Op>], observed: &History, limiter: &tollgate::RateLimiter) {
    assert_schedule_exact(setup, threads, observed, limiter);
    let mut used = grants(setup, threads, observed);
    used.extend(probe(limiter, 3));
    if let Err(e) = conforms(&used, setup.quota) {
        panic!("over-admission after cancel: {e}\n  history: {observed:?}");
    }
}

/// A reserves then cancels while B reserves: if B came after A, A's cancel is not the latest
/// and leaves a hole; otherwise it moves the tail back. Either way B keeps its stretch.
#[test]
fn reserve_cancel_vs_reserve() {
    let threads = vec![vec![Op::Reserve(1), Op::CancelLast], vec![Op::Reserve(1)]];
    run_model_props(setup(1), threads, check);
}

/// Two threads reserve then cancel while a third reserves: holes are made, merged, reused and
/// coalesced into the tail in every order.
#[test]
fn two_cancellers_vs_reserve() {
    let threads = vec![
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1)],
    ];
    run_model_props(setup(1), threads, check);
}

/// A larger reservation cancelled after a smaller one was booked behind it: the rule of
/// golang.org/x/time/rate would lower the tail under the smaller one and hand its stretch out
/// twice; here the larger one's stretch becomes a hole.
#[test]
fn larger_cancel_behind_smaller_reserve() {
    let threads = vec![vec![Op::Reserve(2), Op::CancelLast], vec![Op::Reserve(1)]];
    run_model_props(setup(1), threads, check);
}

/// A cancel racing a reservation and then a check on a cell that may have spilled: decisions
/// on the spilled cell take the holes (or, finding them locked, the tail) and never a stretch
/// someone holds.
#[test]
fn cancel_vs_reserve_then_check() {
    let threads = vec![
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1), Op::Check(1)],
    ];
    run_model_props(setup(2), threads, check);
}
