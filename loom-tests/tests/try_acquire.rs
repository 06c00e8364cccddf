//! Concurrent `try_acquire` on one cell (the CAS loop in `TatCell::update`).
//!
//! Property: with the clock frozen, exactly `min(attempts, burst)` permits are granted in every
//! interleaving (never more: no double grant from a stale read; never fewer: a lost CAS is
//! retried against the winner's value, not turned into a denial), and the final TAT is the
//! sequential one, `now + granted * T` (no lost update). Every history is also checked to be
//! linearizable against the library's own sequential behaviour.

use tollgate_loom_tests::{quota, run_model, Op, Out, Setup};

const T: u64 = 100;
const NOW: u64 = 1_000;

fn attempts(threads: usize, burst: u64) {
    attempts_of(Op::TryAcquire(1), threads, burst);
}

/// [`attempts`] of `try_acquire()`, GCRA's own one-permit path (`Rules::allows`).
fn attempts_one(threads: usize, burst: u64) {
    attempts_of(Op::TryAcquireOne, threads, burst);
}

fn attempts_of(op: Op, threads: usize, burst: u64) {
    let setup = Setup {
        quota: quota(T, burst),
        now: NOW,
        preload: 0,
    };
    let ops = vec![vec![op]; threads];
    run_model(setup, ops, move |setup, _, observed, _| {
        let granted = observed
            .outs
            .iter()
            .flatten()
            .filter(|o| **o == Out::Granted(true))
            .count() as u64;
        let expected = (threads as u64).min(burst);
        assert_eq!(granted, expected, "granted permits: {observed:?}");
        assert_eq!(observed.fin.tat, setup.now + expected * T, "final TAT");
    });
}

#[test]
fn two_threads_burst_1() {
    attempts(2, 1);
}

#[test]
fn three_threads_burst_1() {
    attempts(3, 1);
}

#[test]
fn two_threads_burst_2() {
    attempts(2, 2);
}

#[test]
fn three_threads_burst_2() {
    attempts(3, 2);
}

/// Mixed costs on a burst-2 cell: `try_acquire_n(2)` and `try_acquire_n(1)` cannot both fit, so
/// exactly one is granted, whichever wins the CAS.
#[test]
fn mixed_costs_burst_2() {
    two_against_one(Op::TryAcquire(1));
}

/// `try_acquire_n(2)` against `one` (one permit) on a burst-2 cell: exactly one is granted.
fn two_against_one(one: Op) {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 0,
    };
    let ops = vec![vec![Op::TryAcquire(2)], vec![one]];
    run_model(setup, ops, |setup, _, observed, _| {
        let two = observed.outs[0][0] == Out::Granted(true);
        let one = observed.outs[1][0] == Out::Granted(true);
        assert!(two ^ one, "exactly one grant expected: {observed:?}");
        let cost = if two { 2 } else { 1 };
        assert_eq!(observed.fin.tat, setup.now + cost * T);
    });
}

#[test]
fn two_threads_burst_1_one_permit_path() {
    attempts_one(2, 1);
}

#[test]
fn three_threads_burst_2_one_permit_path() {
    attempts_one(3, 2);
}

/// `try_acquire()` against `try_acquire_n(2)` on a burst-2 cell: exactly one is granted, and
/// each path's CAS sees the other's store.
#[test]
fn one_permit_path_against_two_permits() {
    two_against_one(Op::TryAcquireOne);
}
