//! `SmoothRateLimiter` (Guava semantics): the 128-bit state word, the parameter sequence lock,
//! the locked mode after a `set_rate` in debt, and refunds, under every interleaving.
//!
//! Property: strict linearizability. Every concurrent history (each call's result, the final
//! state word and rate) equals that of some sequential execution of the same calls that keeps
//! each thread's order, where every decision uses the rate in force when it takes effect. A
//! decision that combined a state word rescaled for one rate with the parameters of another
//! produces a wait or a state no sequential execution produces: the setups are chosen so that
//! the two rates give different results (saved permits to spend, fresh permits to pay for).
//!
//! The sequential executions run the library itself, single-threaded, on fresh limiters with
//! the clock frozen at the same instant; so these models check the concurrency, and the rules
//! are checked against Guava elsewhere (unit tests, vectors, the property test).
//!
//! At most one thread can spin at a time (a decision waits for a `set_rate` to publish; the
//! writers block on a mutex), see the harness docs.

use std::time::Duration;

use loom::sync::Arc;
use tollgate::__loom::SmoothTicket;
use tollgate::{ManualClock, SmoothRateLimiter};
use tollgate_loom_tests::{interleavings, model};

/// One call a model thread makes.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `acquire_n(n)` without the sleep: its moment.
    Reserve(u64),
    /// `try_acquire_n(n)`.
    TryAcquire(u64),
    /// `set_quota(r)`.
    SetRate(f64),
    /// Drop this thread's latest reservation, as a dropped async waiter does.
    CancelLast,
    /// Drop the setup's pending reservation ([`Setup::pending`]).
    CancelPending,
}

#[derive(Clone, Debug, PartialEq)]
enum Out {
    Moment(i64),
    Granted(bool),
    Unit,
}

/// The limiter a model starts from.
#[derive(Clone, Copy, Debug)]
struct Setup {
    rate: f64,
    /// Warm-up period in seconds (`None`: bursty).
    warmup_secs: Option<u64>,
    /// Reservations made at time 0 before the threads start.
    prep: &'static [u64],
    /// One more reservation made at time 0, kept for `Op::CancelPending`.
    pending: Option<u64>,
    /// The frozen time the threads run at, in milliseconds since the limiter was built.
    now_ms: u64,
}

impl Setup {
    fn build(&self) -> (SmoothRateLimiter, Option<SmoothTicket>) {
        let clock = ManualClock::new();
        let b = SmoothRateLimiter::builder(self.rate).clock(clock.clone());
        let b = match self.warmup_secs {
            Some(s) => b.warmup(Duration::from_secs(s)),
            None => b,
        };
        let limiter = b.build().expect("valid setup");
        for &n in self.prep {
            limiter.loom_reserve(n);
        }
        let pending = self.pending.map(|n| limiter.loom_reserve(n));
        clock.advance(Duration::from_millis(self.now_ms));
        (limiter, pending)
    }
}

/// What a history ends with: the state word's content (stored bits, next free) and the rate
/// bits. The `LOCKED` bit is left out: it is how the state is protected, not what it is.
type Final = (u64, i64, u64);

fn final_state(l: &SmoothRateLimiter) -> Final {
    let (stored, next_free, _) = l.loom_state();
    (stored, next_free, l.quota().to_bits())
}

#[derive(Clone, Debug, PartialEq)]
struct History {
    outs: Vec<Vec<Out>>,
    fin: Final,
}

fn step(
    l: &SmoothRateLimiter,
    pending: Option<SmoothTicket>,
    op: Op,
    held: &mut Vec<SmoothTicket>,
) -> Out {
    match op {
        Op::Reserve(n) => {
            let t = l.loom_reserve(n);
            held.push(t);
            Out::Moment(t.moment())
        }
        Op::TryAcquire(n) => Out::Granted(l.try_acquire_n(n).is_ok()),
        Op::SetRate(r) => {
            l.set_quota(r).expect("valid rate");
            Out::Unit
        }
        Op::CancelLast => {
            l.loom_cancel(&held.pop().expect("a reservation to cancel"));
            Out::Unit
        }
        Op::CancelPending => {
            l.loom_cancel(&pending.expect("a pending reservation"));
            Out::Unit
        }
    }
}

/// Every history of a sequential execution, computed once in a single-threaded loom run (the
/// library's atomics are loom's).
fn sequential_histories(setup: Setup, threads: &[Vec<Op>]) -> Vec<History> {
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (sink, threads) = (out.clone(), threads.to_vec());
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 1 << 20;
    builder.check(move || {
        let lens: Vec<usize> = threads.iter().map(Vec::len).collect();
        let mut all = Vec::new();
        for order in interleavings(&lens) {
            let (l, pending) = setup.build();
            let mut held: Vec<Vec<SmoothTicket>> = threads.iter().map(|_| Vec::new()).collect();
            let mut next = vec![0; threads.len()];
            let mut outs: Vec<Vec<Out>> = threads.iter().map(|_| Vec::new()).collect();
            for t in order {
                let op = threads[t][next[t]];
                next[t] += 1;
                outs[t].push(step(&l, pending, op, &mut held[t]));
            }
            all.push(History {
                outs,
                fin: final_state(&l),
            });
        }
        *sink.lock().unwrap() = all;
    });
    // The 2024 edition drops the guard (a tail expression's temporary) before `out`.
    out.lock().unwrap().clone()
}

/// Runs the threads concurrently under loom and checks each history against the sequential
/// ones.
fn linearizable(setup: Setup, threads: Vec<Vec<Op>>) {
    let accepted = sequential_histories(setup, &threads);
    model(move || {
        let (l, pending) = setup.build();
        let l = Arc::new(l);
        let handles: Vec<_> = threads
            .iter()
            .cloned()
            .map(|ops| {
                let l = Arc::clone(&l);
                loom::thread::spawn(move || {
                    let mut held = Vec::new();
                    ops.iter()
                        .map(|&op| step(&l, pending, op, &mut held))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let outs = handles
            .into_iter()
            .map(|h| h.join().expect("model thread panicked"))
            .collect();
        let observed = History {
            outs,
            fin: final_state(&l),
        };
        assert!(
            accepted.contains(&observed),
            "history matches no sequential execution\n  setup: {setup:?}\n  threads: \
             {threads:?}\n  observed: {observed:?}\n  accepted: {accepted:#?}"
        );
    });
}

/// Bursty 2/s (500 ms per permit, up to 2 saved), idle for 10 s: two permits saved.
const IDLE: Setup = Setup {
    rate: 2.0,
    warmup_secs: None,
    prep: &[],
    pending: None,
    now_ms: 10_000,
};

/// Bursty 2/s with 4 permits booked at 0 (next free at 2 s), at 500 ms: in debt, so a
/// `set_rate` cannot move `nextFree` and leaves the word locked.
const IN_DEBT: Setup = Setup {
    rate: 2.0,
    warmup_secs: None,
    prep: &[4],
    pending: None,
    now_ms: 500,
};

/// Warming up 2/s over 4 s (threshold 4, max 8 permits), all 8 taken at 0 (next free at 6 s),
/// then idle until 8.5 s: 5 permits stored, one above the threshold.
const WARMING: Setup = Setup {
    rate: 2.0,
    warmup_secs: Some(4),
    prep: &[8],
    pending: None,
    now_ms: 8_500,
};

/// Two reservations racing on the word: no lost update (both moments and the final state are
/// those of one order).
#[test]
fn reservations_race() {
    linearizable(IDLE, vec![vec![Op::Reserve(1)], vec![Op::Reserve(3)]]);
}

/// `try_acquire` racing a reservation while in debt: refusals store nothing.
#[test]
fn try_acquire_races_reserve_in_debt() {
    linearizable(
        Setup {
            now_ms: 2_000,
            ..IN_DEBT
        },
        vec![
            vec![Op::TryAcquire(1), Op::TryAcquire(1)],
            vec![Op::Reserve(2)],
        ],
    );
}

/// `set_rate` on an idle limiter (its resync moves `nextFree`: the word stays unlocked)
/// racing a reservation that spends saved permits and pays for fresh ones. Before: 2 saved,
/// 3 fresh at 500 ms. After `set_rate(4)`: 4 saved, 1 fresh at 250 ms. Mixed (the rescaled
/// word with the old parameters): 4 saved, 1 fresh at 500 ms, which no order produces.
#[test]
fn set_rate_races_reserve_when_idle() {
    linearizable(IDLE, vec![vec![Op::SetRate(4.0)], vec![Op::Reserve(5)]]);
}

/// `set_rate` in debt (the word is locked until `nextFree` passes the high-water mark) racing
/// two reservations: the first after the `set_rate` goes through the mutex and unlocks.
#[test]
fn set_rate_races_reserves_in_debt() {
    linearizable(
        IN_DEBT,
        vec![vec![Op::SetRate(4.0)], vec![Op::Reserve(1), Op::Reserve(1)]],
    );
}

/// Warming up: `set_rate(1)` rescales the 5 stored permits to 2.5 and moves the threshold from
/// 4 to 2, so the reservation pays 1.625 s before it, 3.125 s after it, and 1.5 s if it mixed
/// the rescaled word with the old parameters.
#[test]
fn set_rate_races_reserve_warming_up() {
    linearizable(WARMING, vec![vec![Op::SetRate(1.0)], vec![Op::Reserve(3)]]);
}

/// Two `set_rate`s in a row racing a reservation: a decision that read the first rate's
/// parameters must not complete on the second's state.
#[test]
fn two_set_rates_race_reserve() {
    linearizable(
        IN_DEBT,
        vec![
            vec![Op::SetRate(4.0), Op::SetRate(1.0)],
            vec![Op::Reserve(2)],
        ],
    );
}

/// A refund racing a reservation: refunded only while still the latest, never erasing the
/// other thread's booking.
#[test]
fn cancel_races_reserve() {
    linearizable(
        IN_DEBT,
        vec![vec![Op::Reserve(2), Op::CancelLast], vec![Op::Reserve(1)]],
    );
}

/// A refund racing a `set_rate`: never across it (the state before the reservation was at the
/// old rate).
#[test]
fn cancel_races_set_rate() {
    linearizable(
        IN_DEBT,
        vec![vec![Op::Reserve(2), Op::CancelLast], vec![Op::SetRate(4.0)]],
    );
}

/// After a refund the word is locked: a decision racing the refund and the one after it.
#[test]
fn reserves_around_a_refund() {
    linearizable(
        IDLE,
        vec![
            vec![Op::Reserve(3), Op::CancelLast, Op::Reserve(1)],
            vec![Op::TryAcquire(1)],
        ],
    );
}

/// The case the `LOCKED` bit exists for: the word coming back to an earlier value under other
/// parameters. At 2/s, 4 permits booked (next free 2 s) and a pending reservation R of 2 more
/// (next free 3 s); at 500 ms, one thread refunds R (back to 2 s), sets the rate to 4/s and
/// reserves 4, which at the new rate costs what R cost at the old one: the word's content is
/// R's result again. The other reserves 1: if it loaded R's result with the old parameters
/// before the refund, its CAS must still fail (the refund and the `set_rate` leave the word
/// locked until `nextFree` passes 3 s); otherwise it would book 500 ms on a 4/s limiter.
#[test]
fn a_word_that_comes_back_after_a_refund_and_a_set_rate() {
    let setup = Setup {
        pending: Some(2),
        ..IN_DEBT
    };
    linearizable(
        setup,
        vec![
            vec![Op::CancelPending, Op::SetRate(4.0), Op::Reserve(4)],
            vec![Op::Reserve(1)],
        ],
    );
}

/// A reservation racing a `set_rate` and the reservation after it, each free to start from
/// the word before the `set_rate` or after it (as a decision that guessed the word instead of
/// loading it would: with such a guess read Relaxed this model fails in 2 s). Before
/// `set_rate(4)`: 2 saved, 3 fresh at 500 ms; after: 4 saved, 1 fresh at 250 ms. A grant that
/// used the `set_rate`'s word with the old parameters books 1 fresh at 500 ms, which no order
/// gives.
#[test]
fn reserve_races_set_rate_and_reserve() {
    linearizable(
        IDLE,
        vec![vec![Op::Reserve(5)], vec![Op::SetRate(4.0), Op::Reserve(1)]],
    );
}
