//! `penalize`, `reward` and `block` racing decisions and a reservation's cancel on one GCRA
//! cell (each is one step of the cell's CAS loop, or of the spill's under the holes' lock).
//!
//! Property: every history is linearizable against the library's own sequential behaviour
//! (so no change is lost or applied twice, and a decision sees each change entirely or not at
//! all), and the final TAT is the sequential one for the grants made. A change made as a
//! plain load and store instead of a CAS step fails `penalty_races_a_grant` (a lost update),
//! and a reward on a spilled cell that adjusts the tail alone when the holes' lock is taken
//! fails `reward_races_two_cancels`.

use tollgate_loom_tests::{quota, run_model, Op, Out, Setup};

const T: u64 = 100;
const NOW: u64 = 1_000;

fn granted(out: &Out) -> u64 {
    u64::from(*out == Out::Granted(true))
}

#[test]
fn penalty_races_a_grant() {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 0,
    };
    let ops = vec![vec![Op::Penalize(1)], vec![Op::TryAcquire(1)]];
    run_model(setup, ops, |setup, _, observed, _| {
        let g = granted(&observed.outs[1][0]);
        assert_eq!(g, 1, "burst 2 holds both: {observed:?}");
        assert_eq!(observed.fin.tat, setup.now + 2 * T, "no lost update");
    });
}

#[test]
fn reward_races_a_grant() {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 2,
    };
    let ops = vec![vec![Op::Reward(1)], vec![Op::TryAcquire(1)]];
    run_model(setup, ops, |setup, _, observed, _| {
        let g = granted(&observed.outs[1][0]);
        assert_eq!(observed.fin.tat, setup.now + (1 + g) * T, "no lost update");
    });
}

#[test]
fn block_races_penalty_and_grant() {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 0,
    };
    let ops = vec![
        vec![Op::Block(500)],
        vec![Op::Penalize(1), Op::TryAcquire(1)],
    ];
    run_model(setup, ops, |_, _, observed, _| {
        // Whatever the order, the block's end (NOW + 500, TAT NOW + 600) bounds the state.
        assert!(observed.fin.tat >= NOW + 600, "{observed:?}");
    });
}

/// A reward racing a reservation and its cancel: the cancel may spill the cell (a hole) or
/// move the tail, the reward may cut the hole; linearizability covers every order.
#[test]
fn reward_races_reserve_and_cancel() {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 2,
    };
    let ops = vec![
        vec![Op::Reserve(1), Op::Reserve(1), Op::CancelLast],
        vec![Op::Reward(2)],
    ];
    run_model(setup, ops, |_, _, _, _| {});
}

/// A reward racing two cancels: when both reservations are booked before either cancel, the
/// first cancel leaves a hole (the cell spills) and the second takes the holes' lock to give
/// its stretch back, while the reward must wait for that lock to cut the hole or move the
/// tail. A reward that did not wait (adjusting the tail alone when the lock is taken) gives a
/// report and a tail no sequential order gives: caught.
#[test]
fn reward_races_two_cancels() {
    let setup = Setup {
        quota: quota(T, 2),
        now: NOW,
        preload: 2,
    };
    let ops = vec![
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reserve(1), Op::CancelLast],
        vec![Op::Reward(1)],
    ];
    run_model(setup, ops, |_, _, _, _| {});
}
