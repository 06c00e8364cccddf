//! Shared harness for the loom models in `tests/` (one file per protocol).
//!
//! Every model follows the same recipe, so adding one is a new `tests/<name>.rs` of a few lines:
//!
//! 1. describe each thread as a list of [`Op`]s and the limiter it starts from ([`Setup`]);
//! 2. [`run_model`] runs the threads under loom (every interleaving, up to the preemption
//!    bound), collects what each call returned and the final state, and checks that this
//!    history is *linearizable*: it equals, value for value, the history of some sequential
//!    execution of the same calls in an order that respects each thread's program order;
//! 3. the model then adds the assertions specific to its property (counts, conformance).
//!
//! [`run_model_with`] takes a weaker [`Spec`] where a strict order is not the contract (a
//! decision racing `set_quota` may use the quota it loaded just before). Models of other
//! structures (the keyed store and its sweeper) need not use `Op`s at all: [`model`] alone gives
//! the same bounded search, so such a model is one more file in `tests/` built on it.
//!
//! Keep at most one thread that can spin (`yield_now` in a retry loop) at any time: two
//! spinners can hand the CPU to each other forever without spending loom's preemption budget,
//! and the search never ends ("Model exceeded maximum number of branches").
//!
//! The sequential executions run the real library too, on a fresh limiter, single-threaded; the
//! independent oracle is [`conforms`], a from-the-definition GCRA conformance check.
//!
//! The library is built with `--cfg loom`, so every atomic in `tollgate` (the TAT cell, the quota
//! seqlock, the manual clock) is a loom atomic and each access is a scheduling point.

#[cfg(not(loom))]
compile_error!("the loom models only build with RUSTFLAGS=\"--cfg loom\" (see README.md)");

use std::time::Duration;

use std::collections::BTreeMap;
use std::ops::Deref;

use loom::sync::{Arc, RwLock, RwLockReadGuard};
use tollgate::{Decision, ManualClock, Quota, RateLimiter, Reservation};

/// The preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set: enough for every model
/// here to reach its bad interleavings, small enough for the suite to take minutes.
pub const DEFAULT_MAX_PREEMPTIONS: usize = 3;

/// Runs `f` under loom, bounding preemptions unless the environment already does.
pub fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_MAX_PREEMPTIONS);
    }
    builder.check(f);
}

/// A quota from raw parts: `t` ns between permits, burst `burst`.
pub fn quota(t: u64, burst: u64) -> Quota {
    Quota::from_interval(Duration::from_nanos(t))
        .and_then(|q| q.with_burst(burst))
        .expect("valid test quota")
}

/// One call a model thread makes.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// `try_acquire_n(n)`.
    TryAcquire(u64),
    /// `try_acquire()`: one permit, on GCRA's own path for it (`Rules::allows`: the first
    /// parameter words only, the common word inline), not `try_acquire_n(1)`'s.
    TryAcquireOne,
    /// `check_n(n)`.
    Check(u64),
    /// `reserve(n)`; the reservation is kept (used) unless a later `CancelLast` cancels it.
    Reserve(u64),
    /// Cancel this thread's most recent reservation that is not cancelled yet.
    CancelLast,
    /// `set_quota(q)`.
    SetQuota(Quota),
    /// `penalize(n)`.
    Penalize(u64),
    /// `reward(n)`.
    Reward(u64),
    /// `block` for this many ns.
    Block(u64),
}

/// What a call returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// `try_acquire_n`: granted or not.
    Granted(bool),
    /// `check_n`: the full decision.
    Decision(Decision),
    /// `reserve`: the reservation's `ready_at` and its stretch `(start, end]` of the schedule
    /// (or the error's debug text).
    Ready(Result<(u64, (u64, u64)), String>),
    /// Calls that return nothing.
    Unit,
}

/// The observable state after every thread has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Final {
    /// The stored TAT, as `now + peek().reset_after` (exact while `tat >= now`; any `tat <= now`
    /// is the same full bucket and reads as `now`).
    pub tat: u64,
    /// The quota in force.
    pub quota: Quota,
}

/// How a model's limiter starts: quota, frozen clock time, and permits taken beforehand.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// The initial quota.
    pub quota: Quota,
    /// The (frozen) clock reading every call sees.
    pub now: u64,
    /// Permits taken with `try_acquire_n` before the threads start (so that reservations
    /// wait, and cancelling them is meaningful).
    pub preload: u64,
}

impl Setup {
    /// A fresh limiter on a frozen manual clock, with the preload taken.
    pub fn build(&self) -> RateLimiter {
        let clock = ManualClock::new();
        clock.set(self.now);
        let limiter = RateLimiter::builder(self.quota).clock(clock).build();
        if self.preload > 0 {
            limiter
                .try_acquire_n(self.preload)
                .expect("preload fits the burst");
        }
        limiter
    }
}

/// The state of a limiter at the setup's frozen time.
pub fn final_state(limiter: &RateLimiter, now: u64) -> Final {
    Final {
        tat: now + nanos(limiter.peek().reset_after),
        quota: limiter.quota(),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("test durations fit in u64")
}

/// Which sequential histories a concurrent one may match.
#[derive(Clone, Debug)]
pub enum Spec {
    /// Strict linearizability: each call takes effect at one instant between its start and end.
    Linearizable,
    /// As `Linearizable`, except that a decision (`TryAcquire`, `Check`) may use any quota that
    /// was in force at or before its linearization point: a decision that loaded the quota just
    /// before a concurrent `set_quota` finished legitimately decides under the old one. A torn
    /// quota is still never allowed.
    StaleQuota,
}

/// `check_with` on a GCRA limiter, which runs every quota (an `Err` would be a bug).
fn gcra_check_n_with(limiter: &RateLimiter, n: u64, q: Quota) -> Decision {
    limiter
        .check_n_with(n, q)
        .expect("GCRA runs every per-call quota")
}

/// Runs one op, keeping this thread's live reservations in `held`. `quota` overrides the
/// limiter's quota for decisions (the sequential replays of [`Spec::StaleQuota`]).
fn step<'a>(
    limiter: &'a RateLimiter,
    op: Op,
    quota: Option<Quota>,
    held: &mut Vec<Reservation<'a>>,
) -> Out {
    match (op, quota) {
        (Op::TryAcquire(n), None) => Out::Granted(limiter.try_acquire_n(n).is_ok()),
        // Same cell operation as try_acquire_n, under an explicit quota.
        (Op::TryAcquire(n), Some(q)) => Out::Granted(gcra_check_n_with(limiter, n, q).allowed),
        (Op::TryAcquireOne, None) => Out::Granted(limiter.try_acquire()),
        (Op::TryAcquireOne, Some(q)) => Out::Granted(gcra_check_n_with(limiter, 1, q).allowed),
        (Op::Check(n), None) => Out::Decision(limiter.check_n(n)),
        (Op::Check(n), Some(q)) => Out::Decision(gcra_check_n_with(limiter, n, q)),
        (Op::Reserve(n), _) => Out::Ready(match limiter.reserve_n(n) {
            Ok(r) => {
                let ready = (r.ready_at(), tollgate::__loom::stretch(&r));
                held.push(r);
                Ok(ready)
            }
            Err(e) => Err(format!("{e:?}")),
        }),
        (Op::CancelLast, _) => {
            held.pop()
                .expect("CancelLast without a reservation")
                .cancel();
            Out::Unit
        }
        (Op::SetQuota(q), _) => {
            limiter.set_quota(q).expect("GCRA runs every quota");
            Out::Unit
        }
        (Op::Penalize(n), _) => Out::Decision(limiter.penalize(n)),
        (Op::Reward(n), _) => Out::Decision(limiter.reward(n)),
        (Op::Block(d), _) => Out::Decision(limiter.block(Duration::from_nanos(d))),
    }
}

/// Runs one thread's ops in order; reservations still held at the end are kept (dropping a
/// reservation keeps its permits).
pub fn run_thread(limiter: &RateLimiter, ops: &[Op]) -> Vec<Out> {
    let mut held = Vec::new();
    ops.iter()
        .map(|&op| step(limiter, op, None, &mut held))
        .collect()
}

/// Every merge of threads with `lens[i]` ops each that keeps each thread's order, as the
/// sequence of thread indices to step.
pub fn interleavings(lens: &[usize]) -> Vec<Vec<usize>> {
    fn go(left: &mut Vec<usize>, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.iter().all(|&l| l == 0) {
            out.push(prefix.clone());
            return;
        }
        for i in 0..left.len() {
            if left[i] > 0 {
                left[i] -= 1;
                prefix.push(i);
                go(left, prefix, out);
                prefix.pop();
                left[i] += 1;
            }
        }
    }
    let mut out = Vec::new();
    go(&mut lens.to_vec(), &mut Vec::new(), &mut out);
    out
}

/// A history: what each thread's calls returned, and the final state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// `outs[i][j]`: the result of thread `i`'s `j`-th op.
    pub outs: Vec<Vec<Out>>,
    /// The state once every thread has finished.
    pub fin: Final,
}

/// A sequential execution: the order threads were stepped in, the quota each decision used
/// (`None`: the one in force), and what it produced.
#[derive(Clone, Debug)]
pub struct Sequential {
    /// Thread index of each step.
    pub order: Vec<usize>,
    /// Per step, the quota a decision was forced to use.
    pub quotas: Vec<Option<Quota>>,
    /// The resulting history.
    pub history: History,
}

/// Runs `threads` sequentially in `order` on a fresh limiter, decisions using `quotas[k]` at
/// step `k` when given.
fn replay(
    setup: &Setup,
    threads: &[Vec<Op>],
    order: &[usize],
    quotas: &[Option<Quota>],
) -> History {
    let limiter = setup.build();
    let mut held: Vec<Vec<Reservation<'_>>> = threads.iter().map(|_| Vec::new()).collect();
    let mut next = vec![0; threads.len()];
    let mut outs: Vec<Vec<Out>> = threads.iter().map(|_| Vec::new()).collect();
    for (k, &t) in order.iter().enumerate() {
        let op = threads[t][next[t]];
        next[t] += 1;
        outs[t].push(step(&limiter, op, quotas[k], &mut held[t]));
    }
    drop(held);
    let fin = final_state(&limiter, setup.now);
    History { outs, fin }
}

/// For [`Spec::StaleQuota`]: every assignment of quotas to the decisions of `order` in which
/// each decision uses a quota already in force at its step.
fn stale_choices(setup: &Setup, threads: &[Vec<Op>], order: &[usize]) -> Vec<Vec<Option<Quota>>> {
    let mut next = vec![0; threads.len()];
    let mut in_force = vec![setup.quota];
    let mut choices: Vec<Vec<Option<Quota>>> = vec![Vec::new()];
    for &t in order {
        let op = threads[t][next[t]];
        next[t] += 1;
        let options: Vec<Option<Quota>> = match op {
            Op::TryAcquire(_) | Op::TryAcquireOne | Op::Check(_) => {
                in_force.iter().copied().map(Some).collect()
            }
            Op::SetQuota(q) => {
                in_force.push(q);
                vec![None]
            }
            _ => vec![None],
        };
        choices = choices
            .into_iter()
            .flat_map(|prefix| {
                options.iter().map(move |o| {
                    let mut p = prefix.clone();
                    p.push(*o);
                    p
                })
            })
            .collect();
    }
    choices
}

/// Every history `spec` accepts for these threads. Computed once, in a single-threaded loom
/// execution of its own (the library's atomics are loom's), so the concurrent model only has to
/// look its history up.
pub fn sequential_histories(setup: Setup, threads: &[Vec<Op>], spec: &Spec) -> Vec<Sequential> {
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (sink, threads, spec) = (out.clone(), threads.to_vec(), spec.clone());
    // One thread, so one execution; but every replay's atomic accesses count as branches.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 1 << 20;
    builder.check(move || {
        let lens: Vec<usize> = threads.iter().map(Vec::len).collect();
        let mut all = Vec::new();
        for order in interleavings(&lens) {
            let quota_sets = match spec {
                Spec::Linearizable => vec![vec![None; order.len()]],
                Spec::StaleQuota => stale_choices(&setup, &threads, &order),
            };
            for quotas in quota_sets {
                let history = replay(&setup, &threads, &order, &quotas);
                all.push(Sequential {
                    order: order.clone(),
                    quotas,
                    history,
                });
            }
        }
        *sink.lock().unwrap() = all;
    });
    // The 2024 edition drops the guard (a tail expression's temporary) before `out`.
    out.lock().unwrap().clone()
}

/// Inside a loom execution: runs `threads` on a limiter built from `setup`, one loom thread
/// each, and returns what they observed and the limiter.
fn run_concurrently(setup: &Setup, threads: &[Vec<Op>]) -> (History, Arc<RateLimiter>) {
    let limiter = Arc::new(setup.build());
    let handles: Vec<_> = threads
        .iter()
        .cloned()
        .map(|ops| {
            let limiter = Arc::clone(&limiter);
            loom::thread::spawn(move || run_thread(&limiter, &ops))
        })
        .collect();
    let outs = handles
        .into_iter()
        .map(|h| h.join().expect("model thread panicked"))
        .collect();
    let observed = History {
        outs,
        fin: final_state(&limiter, setup.now),
    };
    (observed, limiter)
}

/// Runs `threads` concurrently under loom from `setup` (one loom thread each), then checks that
/// the history is one `spec` accepts and hands it, and the limiter, to `check` for the model's
/// own assertions.
pub fn run_model_with<C>(setup: Setup, threads: Vec<Vec<Op>>, spec: Spec, check: C)
where
    C: Fn(&Setup, &[Vec<Op>], &History, &RateLimiter) + Sync + Send + 'static,
{
    let accepted = sequential_histories(setup, &threads, &spec);
    model(move || {
        let (observed, limiter) = run_concurrently(&setup, &threads);
        if !accepted.iter().any(|s| s.history == observed) {
            panic!(
                "history matches no sequential execution ({spec:?})\n  setup: {setup:?}\n  \
                 threads: {threads:?}\n  observed: {observed:?}\n  accepted: {accepted:#?}"
            );
        }
        check(&setup, &threads, &observed, &limiter);
    });
}

/// [`run_model_with`] under strict linearizability.
pub fn run_model<C>(setup: Setup, threads: Vec<Vec<Op>>, check: C)
where
    C: Fn(&Setup, &[Vec<Op>], &History, &RateLimiter) + Sync + Send + 'static,
{
    run_model_with(setup, threads, Spec::Linearizable, check);
}

/// Runs `threads` concurrently under loom from `setup`, with no linearizability check, and
/// hands the history and the limiter to `check`.
pub fn run_model_props<C>(setup: Setup, threads: Vec<Vec<Op>>, check: C)
where
    C: Fn(&Setup, &[Vec<Op>], &History, &RateLimiter) + Sync + Send + 'static,
{
    model(move || {
        let (observed, limiter) = run_concurrently(&setup, &threads);
        check(&setup, &threads, &observed, &limiter);
    });
}

/// The schedule's stretches still held once every thread is done: the preload, granted
/// `try_acquire`s and `check`s (their lengths; where they were placed is not observable), and
/// reservations not cancelled (their exact stretches).
pub fn held_stretches(
    setup: &Setup,
    threads: &[Vec<Op>],
    observed: &History,
) -> (Vec<(u64, u64)>, u64) {
    let t = nanos(setup.quota.interval());
    let mut placed = Vec::new();
    let mut unplaced = setup.preload * t;
    for (ops, outs) in threads.iter().zip(&observed.outs) {
        let mut held = Vec::new();
        for (op, res) in ops.iter().zip(outs) {
            match (op, res) {
                (Op::TryAcquire(n), Out::Granted(true)) => unplaced += n * t,
                (Op::TryAcquireOne, Out::Granted(true)) => unplaced += t,
                (Op::Check(n), Out::Decision(d)) if d.allowed => unplaced += n * t,
                (Op::Reserve(n), Out::Ready(Ok((_, s)))) if *n > 0 => held.push(Some(*s)),
                (Op::Reserve(_), _) => held.push(None),
                (Op::CancelLast, _) => {
                    held.pop().expect("cancel follows a reservation");
                }
                _ => {}
            }
        }
        placed.extend(held.into_iter().flatten());
    }
    (placed, unplaced)
}

/// No capacity lost and none handed out twice, on a frozen clock at `setup.now`: the schedule's
/// occupied positions after `now` (up to its tail, minus its holes) measure exactly what the
/// held stretches do, every held reservation's stretch is occupied (inside the tail, in no
/// hole) and no two of them overlap. A cancelled stretch that was not freed, or a stretch
/// handed to two holders, breaks the measure.
pub fn assert_schedule_exact(
    setup: &Setup,
    threads: &[Vec<Op>],
    observed: &History,
    limiter: &RateLimiter,
) {
    let now = setup.now;
    let (tail, holes) = tollgate::__loom::schedule(limiter);
    let (mut placed, unplaced) = held_stretches(setup, threads, observed);
    placed.sort_unstable();
    for w in placed.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "stretches {:?} and {:?} overlap: {observed:?}",
            w[0],
            w[1]
        );
    }
    for &(a, b) in &placed {
        assert!(
            b <= tail,
            "held stretch {:?} beyond the tail {tail}: {observed:?}",
            (a, b)
        );
        for &(ha, hb) in &holes {
            assert!(
                b <= ha || a >= hb,
                "held stretch {:?} inside hole {:?}: {observed:?}",
                (a, b),
                (ha, hb)
            );
        }
    }
    let free: u64 = holes
        .iter()
        .map(|&(a, b)| b.min(tail) - a.max(now).min(b))
        .sum();
    let occupied = tail.saturating_sub(now) - free;
    let held: u64 = placed
        .iter()
        .map(|&(a, b)| b - a.max(now).min(b))
        .sum::<u64>()
        + unplaced;
    assert_eq!(
        occupied, held,
        "schedule tail {tail} holes {holes:?} occupies {occupied} ns after {now}, but the \
         holders hold {held}: {observed:?}"
    );
}

/// Permits in use: `(time they are used at, count)`.
pub type Grant = (u64, u64);

/// The permits a history hands out: granted `try_acquire`s (at `now`), allowed `check`s, and
/// reservations that were not cancelled before their ready time (at `ready_at`); plus the
/// setup's preload.
pub fn grants(setup: &Setup, threads: &[Vec<Op>], observed: &History) -> Vec<Grant> {
    let mut out = vec![(setup.now, setup.preload)];
    for (ops, outs) in threads.iter().zip(&observed.outs) {
        let mut held: Vec<Grant> = Vec::new();
        for (op, res) in ops.iter().zip(outs) {
            match (op, res) {
                (Op::TryAcquire(n), Out::Granted(true)) => out.push((setup.now, *n)),
                (Op::TryAcquireOne, Out::Granted(true)) => out.push((setup.now, 1)),
                (Op::Check(n), Out::Decision(d)) if d.allowed => out.push((setup.now, *n)),
                (Op::Reserve(n), Out::Ready(Ok((at, _)))) => held.push((*at, *n)),
                (Op::CancelLast, _) => {
                    // A cancelled reservation's permits are not used.
                    held.pop().expect("cancel follows a reservation");
                }
                _ => {}
            }
        }
        out.extend(held);
    }
    out.retain(|&(_, n)| n > 0);
    out
}

/// Takes `count` more single permits by reservation (as any later caller would) and returns
/// when each may be used: the capacity the limiter is still handing out.
pub fn probe(limiter: &RateLimiter, count: usize) -> Vec<Grant> {
    (0..count)
        .map(|_| {
            let r = limiter.reserve_n(1).expect("probe reservation");
            (r.ready_at(), 1)
        })
        .collect()
}

/// GCRA conformance from the definition (virtual scheduling, starting from a full bucket at
/// time 0): permits used at these times never exceed what quota `q` allows. Returns the first
/// offending grant.
pub fn conforms(grants: &[Grant], q: Quota) -> Result<(), String> {
    let t = nanos(q.interval());
    let tau = nanos(q.tolerance());
    let mut sorted = grants.to_vec();
    sorted.sort_unstable();
    let mut tat = 0u64;
    for &(at, n) in &sorted {
        let new_tat = tat.max(at) + n * t;
        if new_tat.saturating_sub(tau) > at {
            return Err(format!(
                "{n} permit(s) at {at} exceed the quota (T={t}, tau={tau}): grants {sorted:?}"
            ));
        }
        tat = new_tat;
    }
    Ok(())
}

/// A read guard on one present key of a model's shard (a loom `RwLock<BTreeMap>` standing in for
/// a shard of the keyed store's table): what the table's `get` returns.
pub struct CellRef<'a, V> {
    map: RwLockReadGuard<'a, BTreeMap<u64, V>>,
    key: u64,
}

impl<V> Deref for CellRef<'_, V> {
    type Target = V;
    fn deref(&self) -> &V {
        &self.map[&self.key]
    }
}

/// A shard's `get`: the read guard on `key`'s value, if present.
pub fn lookup<V>(map: &RwLock<BTreeMap<u64, V>>, key: u64) -> Option<CellRef<'_, V>> {
    let map = map.read().unwrap();
    map.contains_key(&key).then_some(CellRef { map, key })
}
