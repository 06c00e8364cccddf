//! The method family, written once: every limiter method is one of these, over an
//! [`Algorithm`] and a [`Slot`] (where the call's cell is: the direct limiter's one cell, or a
//! key's in the keyed table, `keyed`: the keyed engine, which holds that table). Every
//! decision has one shape, [`decide_on_shard`]: on the slot's cell if stored, else on a
//! scratch fresh cell, which the slot stores only if that changed it; so a decision runs its
//! rule from here, down to the cell. The public types only add the key and the docs.

pub(crate) mod keyed;

use std::ops::Deref;
use std::time::Duration;

use crate::algorithm::{Adjust, Booking, ParamSource};
use crate::cell::params::Live;
use crate::cell::Algorithm;
use crate::clock::{duration_to_nanos, AnyClock};
use crate::decision::{AcquireError, AdjustError, Decision};
use crate::meter::{Meter, Outcome, WaitMeter};
use crate::quota::{Quota, QuotaError};
use crate::sync::Mutex;
use crate::Nanos;

/// Where a decision was made.
pub(crate) enum Placed<R> {
    /// On the key's stored cell (or as a fresh key, with nothing to store).
    Tracked(R),
    /// As a fresh key that could not be stored (key cap reached, `WhenFull::AllowUntracked`):
    /// nothing was recorded, so there is nothing to cancel either.
    Untracked(R),
    /// Not made: key cap reached, `WhenFull::Deny`; the suggested wait in ns.
    Full(Nanos),
}

/// What a read-only look at a slot found.
pub(crate) enum Found<'c, C> {
    /// The key's stored cell.
    Cell(&'c C),
    /// No cell: it would be a fresh one.
    Fresh,
    /// No cell, and none could be made (key cap, `WhenFull::Deny`); the suggested wait in ns.
    Full(Nanos),
}

/// Where one call's cell lives, for looking only.
pub(crate) trait Find<A: Algorithm> {
    /// The cell as a lookup holds it (a table's under its shard's read guard).
    type Held<'s>: Deref<Target = A::Cell>
    where
        Self: 's;
    /// The cell if it is stored.
    fn lookup(&self) -> Option<Self::Held<'_>>;
    /// For a missing cell at `now`: the suggested wait if a decision that stores it would be
    /// refused (a full key cap), `None` if it would get in.
    fn refusal(&self, _now: Nanos) -> Option<Nanos> {
        None
    }
    /// Told after a cancel may have lowered the cell's state (the keyed store keeps a lower
    /// bound on every key's cold time).
    fn lowered(&self, _cell: &A::Cell) {}
}

/// Where one call's cell lives: looked up, and stored if missing, by the engine's decisions
/// ([`decide_on_shard`]).
pub(crate) trait Slot<A: Algorithm>: Find<A> {
    /// Whether the cell is a keyed table's (the `keyed` of [`Rules::check`]).
    ///
    /// [`Rules::check`]: crate::cell::rules::Rules::check
    const KEYED: bool = false;
    /// A decision on a missing cell that stores something (`fresh`: its answer on a scratch
    /// fresh cell): store the cell and decide again there with `op`, or answer without it.
    fn insert<R>(&self, op: impl Fn(&A::Cell, Nanos) -> R, fresh: R) -> Placed<R>;
    /// The earliest time at or after `now` when a new key could be stored here, judged from
    /// the slot's state now (only a key cap delays it); asked when a decision came back
    /// [`Placed::Full`].
    fn slot_free_at(&self, now: Nanos) -> Nanos {
        now
    }
}

/// The direct limiter's slot: its one cell, always there.
pub(crate) struct Direct<'c, A: Algorithm>(pub(crate) &'c A::Cell);

impl<A: Algorithm> Find<A> for Direct<'_, A> {
    type Held<'s>
        = &'s A::Cell
    where
        Self: 's;

    #[inline(always)]
    fn lookup(&self) -> Option<&A::Cell> {
        Some(self.0)
    }
}

impl<A: Algorithm> Slot<A> for Direct<'_, A> {
    /// Never asked: the one cell is always there.
    fn insert<R>(&self, _: impl Fn(&A::Cell, Nanos) -> R, fresh: R) -> Placed<R> {
        Placed::Tracked(fresh)
    }
}

/// What [`decide_on_shard`] did.
pub(crate) enum OnShard<R> {
    /// Decided: on the stored cell, or as a fresh key that stores nothing.
    Decided(R),
    /// The key is absent and the decision (this one, made on a scratch fresh cell) stores
    /// something: insert the key under the shard's write guard and decide again there.
    MustInsert(R),
}

/// Every decision's shape: on the slot's cell if stored, else on a scratch fresh one, stored
/// only if that changed it. For a keyed table it is the read side of a decision's protocol
/// with sweeping (`store::keyed`'s module docs); the direct limiter's cell is always there.
/// Shared with the loom model of the sweeper (through `tollgate::__loom`), which runs it over
/// its own lock-guarded map.
///
/// `now` is read before the lookup, so the clock read overlaps the lookup's cache misses
/// instead of waiting for them. On a stored cell an early `now` is safe: it can only make the
/// decision stricter, since `max(tat, now) - now` only grows as `now` shrinks. On a miss it is
/// not: the key may have been evicted after `now` was read, with a state above it. So a miss
/// reads `now` again, after `lookup` took (and released) the shard's read guard, which orders
/// it after any sweep that removed the key under the write guard: that `now` is at least the
/// sweep's, where the evicted key and a fresh one decide alike.
///
/// Absent is the same state as a fresh cell, so a miss decides on a scratch one: if it stays
/// fresh (a peek, a request over the burst, a wait past the timeout) the answer is already
/// exact and nothing needs inserting, so denials of unknown keys never grow the map.
///
/// What was done goes to `then`, on each path separately: a large result (a full decision)
/// then stays in registers on the hit path instead of meeting the miss path's in memory.
#[inline(always)]
pub(crate) fn decide_on_shard<G, C, R, T>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    op: &impl Fn(&C, Nanos) -> R,
    is_fresh: impl Fn(&C) -> bool,
    then: impl FnOnce(OnShard<R>) -> T,
) -> T
where
    G: Deref<Target = C>,
    C: Default,
{
    let early = now();
    if let Some(cell) = lookup() {
        // The guard is held until the decision is done.
        let r = op(&cell, early);
        drop(cell);
        return then(OnShard::Decided(r));
    }
    then(decide_on_scratch(now, op, is_fresh))
}

/// The miss half of [`decide_on_shard`], kept out of line so the hit path inlines `op`.
#[cold]
#[inline(never)]
fn decide_on_scratch<C, R>(
    now: impl Fn() -> Nanos,
    op: &impl Fn(&C, Nanos) -> R,
    is_fresh: impl Fn(&C) -> bool,
) -> OnShard<R>
where
    C: Default,
{
    let scratch = C::default();
    let fresh = op(&scratch, now());
    if is_fresh(&scratch) {
        OnShard::Decided(fresh)
    } else {
        OnShard::MustInsert(fresh)
    }
}

/// The state every limiter shares: the algorithm, its parameters, the clock.
pub(crate) struct Engine<A: Algorithm> {
    pub(crate) alg: A,
    pub(crate) params: crate::cell::params::ParamsCell<A::Params>,
    pub(crate) clock: AnyClock,
    /// The quota in force; its lock also serialises quota changes, so each migrates every
    /// cell before the next begins (the GCRA cell relies on that).
    quota: Mutex<Quota>,
    /// The limiter's name and its metrics (empty without the `metrics` feature).
    pub(crate) meter: Meter,
}

/// The parameters of a call made under its own quota (`check_n_with`): the limiter's, with the
/// call's quota layered on by the algorithm. If the algorithm refuses the quota on the
/// parameters a load finds, that load gives [inert](crate::algorithm::rules::Terms::inert)
/// parameters (the decision stores nothing) and the error is kept: the call returns it if its
/// last load was refused.
pub(crate) struct PerCall<'a, A: Algorithm> {
    engine: &'a Engine<A>,
    quota: &'a Quota,
    refused: std::cell::Cell<Option<QuotaError>>,
}

impl<A: Algorithm> PerCall<'_, A> {
    #[inline]
    fn layer(&self, base: A::Params) -> A::Params {
        let p = self.engine.alg.call_params(&base, self.quota);
        self.refused.set(p.as_ref().err().copied());
        p.unwrap_or_else(|_| A::inert(&base))
    }
}

impl<A: Algorithm> ParamSource<A::Params> for PerCall<'_, A> {
    #[inline]
    fn load(&self) -> A::Params {
        self.layer(self.engine.params.load())
    }

    fn load_full(&self) -> A::Params {
        self.layer(self.engine.params.load_full())
    }
}

/// What a waiting method does after one attempt.
pub(crate) enum Next<T> {
    /// Granted, nothing to wait for.
    Done,
    /// Sleep `wait` ns; then it is granted (with the ticket to cancel if the wait is abandoned,
    /// for a tracked booking), or must be decided again.
    Sleep { wait: Nanos, then: Then<T> },
}

pub(crate) enum Then<T> {
    Granted(Option<T>),
    Retry,
}

/// One waiting acquire of `n` permits (blocking or async), between its attempts: its deadline,
/// the time it slept, how it failed, and its meter.
struct Waiter<'m> {
    n: u64,
    deadline: Option<Nanos>,
    waited: Duration,
    error: Option<AcquireError>,
    meter: WaitMeter<'m>,
}

impl<'m> Waiter<'m> {
    fn new<A: Algorithm>(engine: &'m Engine<A>, n: u64, timeout: Option<Duration>) -> Self {
        let deadline = timeout.map(|t| engine.clock.now().saturating_add(duration_to_nanos(t)));
        Waiter {
            n,
            deadline,
            waited: Duration::ZERO,
            error: None,
            meter: engine.meter.waiting(n),
        }
    }

    /// The next attempt: `None` once granted or failed; else the sleep to take (counted as
    /// slept; a sleep on the meter unless zero) and what follows it.
    fn next<A: Algorithm>(
        &mut self,
        engine: &Engine<A>,
        slot: &impl Slot<A>,
    ) -> Option<(Duration, Then<A::Ticket>)> {
        match engine.attempt(slot, self.n, self.deadline) {
            Ok(Next::Done) => None,
            Ok(Next::Sleep { wait, then }) => {
                let wait = Duration::from_nanos(wait);
                if !wait.is_zero() {
                    self.meter.sleeping();
                }
                self.waited = self.waited.saturating_add(wait);
                Some((wait, then))
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    /// The acquire's result (the time slept, or how it failed), recorded on the meter.
    fn end(self) -> Result<Duration, AcquireError> {
        let r = self.error.map_or(Ok(self.waited), Err);
        self.meter.record_end(&r);
        r
    }
}

impl<A: Algorithm> Engine<A> {
    pub(crate) fn new(alg: A, quota: Quota, clock: AnyClock) -> Result<Engine<A>, QuotaError> {
        let params = alg.params(&quota, clock.now())?;
        Ok(Engine {
            alg,
            params: crate::cell::params::ParamsCell::new(params),
            clock,
            quota: Mutex::new(quota),
            meter: Meter::default(),
        })
    }

    /// The engine reporting to `meter` (builders name it).
    pub(crate) fn with_meter(mut self, meter: Meter) -> Engine<A> {
        self.meter = meter;
        self
    }

    /// The parameters, loaded afresh on every call (what cells re-read on each CAS retry).
    #[inline(always)]
    pub(crate) fn src(&self) -> Live<'_, A::Params> {
        Live(&self.params)
    }

    /// A per-call quota layered on the limiter's parameters.
    fn call_src<'a>(&'a self, quota: &'a Quota) -> PerCall<'a, A> {
        PerCall {
            engine: self,
            quota,
            refused: std::cell::Cell::new(None),
        }
    }

    pub(crate) fn quota(&self) -> Quota {
        *self.quota.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the parameters, then brings every cell `for_each_cell` visits up to them.
    pub(crate) fn set_quota(
        &self,
        quota: Quota,
        for_each_cell: impl FnOnce(&dyn Fn(&A::Cell)),
    ) -> Result<(), QuotaError> {
        let mut current = self.quota.lock().unwrap_or_else(|e| e.into_inner());
        let next = self
            .alg
            .next_params(&self.params.load_full(), &quota, self.clock.now())?;
        self.params.store(next);
        *current = quota;
        let src = self.src();
        for_each_cell(&|cell| self.alg.migrate(cell, &src));
        Ok(())
    }

    /// Runs `op` on the slot's cell (with `now` read as [`decide_on_shard`] explains),
    /// storing a missing cell only when `op` leaves a fresh one changed, and gives `then`
    /// where the decision was made, on each path (a large `R`, a full decision, then stays in
    /// registers on the hit path instead of meeting the miss path's in memory). `op` may run
    /// more than once (it must be a CAS step).
    #[inline(always)]
    fn decide_then<S: Slot<A>, R, T>(
        &self,
        slot: &S,
        op: impl Fn(&A::Cell, Nanos) -> R,
        then: impl FnOnce(Placed<R>) -> T,
    ) -> T {
        decide_on_shard(
            #[inline(always)]
            || slot.lookup(),
            #[inline(always)]
            || self.clock.now(),
            &op,
            |c| self.alg.is_fresh(c),
            #[inline(always)]
            |on| match on {
                OnShard::Decided(r) => then(Placed::Tracked(r)),
                OnShard::MustInsert(fresh) => then(slot.insert(&op, fresh)),
            },
        )
    }

    /// [`decide_then`](Engine::decide_then) with nothing after.
    #[inline(always)]
    pub(crate) fn decide<R>(
        &self,
        slot: &impl Slot<A>,
        op: impl Fn(&A::Cell, Nanos) -> R,
    ) -> Placed<R> {
        self.decide_then(slot, op, |placed| placed)
    }

    #[inline]
    pub(crate) fn try_acquire_n<S: Slot<A>>(&self, slot: &S, n: u64) -> Result<(), AcquireError> {
        let src = self.src();
        let r = match self.decide(
            slot,
            #[inline(always)]
            |cell, now| self.alg.check(cell, now, n, S::KEYED, &src),
        ) {
            Placed::Tracked(v) | Placed::Untracked(v) => A::result(&v, n),
            Placed::Full(wait) => Err(full_error(wait)),
        };
        self.meter.decided_result(&r, n);
        r
    }

    #[inline(always)]
    pub(crate) fn try_acquire<S: Slot<A>>(&self, slot: &S) -> bool {
        let src = self.src();
        let allowed = match self.decide(
            slot,
            #[inline(always)]
            |cell, now| self.alg.allows(cell, now, S::KEYED, &src),
        ) {
            Placed::Tracked(v) | Placed::Untracked(v) => v,
            Placed::Full(_) => {
                self.meter.decided(Outcome::KeyCapReached, 1);
                return false;
            }
        };
        self.meter.decided_one(allowed);
        allowed
    }

    /// `check_n(1)`, with the one permit a literal in the step (as `try_acquire` has it). A
    /// step's captures can live in memory (the keyed store hands the step to out-of-line code
    /// for a missing key), and a count read from there is not known to be 1: the decision
    /// would take the general path for `n` permits.
    #[inline(always)]
    pub(crate) fn check<S: Slot<A>>(&self, slot: &S) -> Decision {
        let src = self.src();
        self.decide_full(
            slot,
            &src,
            1,
            #[inline(always)]
            |cell, now| self.alg.check(cell, now, 1, S::KEYED, &src),
        )
    }

    #[inline(always)]
    pub(crate) fn check_n(&self, slot: &impl Slot<A>, n: u64) -> Decision {
        let src = self.src();
        self.check_on(slot, n, &src)
    }

    /// `check_n` under `quota` for this call only, or the algorithm's refusal of `quota`
    /// (then nothing was taken: the refused load decided on inert parameters).
    pub(crate) fn check_n_with(
        &self,
        slot: &impl Slot<A>,
        n: u64,
        quota: &Quota,
    ) -> Result<Decision, QuotaError> {
        let src = self.call_src(quota);
        let d = self.check_on(slot, n, &src);
        match src.refused.get() {
            Some(e) => Err(e),
            None => Ok(d),
        }
    }

    #[inline(always)]
    fn check_on<S: Slot<A>>(
        &self,
        slot: &S,
        n: u64,
        src: &impl ParamSource<A::Params>,
    ) -> Decision {
        if n == 0 {
            // A check of nothing is the peek, also where a key cap would refuse a new key
            // (a decision on a scratch cell that stays fresh never meets the cap).
            return self.peek_on(slot, src);
        }
        self.decide_full(
            slot,
            src,
            n,
            #[inline(always)]
            |cell, now| self.alg.check(cell, now, n, S::KEYED, src),
        )
    }

    /// The full [`Decision`] of `step` on the slot's cell.
    #[inline(always)]
    fn decide_full(
        &self,
        slot: &impl Slot<A>,
        src: &impl ParamSource<A::Params>,
        n: u64,
        step: impl Fn(&A::Cell, Nanos) -> A::Verdict,
    ) -> Decision {
        self.decide_then(
            slot,
            #[inline(always)]
            |cell, now| (step(cell, now), now),
            #[inline(always)]
            |placed| {
                let d = match placed {
                    Placed::Tracked((v, now)) | Placed::Untracked((v, now)) => A::decision(&v, now),
                    Placed::Full(wait) => full_decision(A::limit(&src.load()), wait),
                };
                self.meter.decided(Outcome::of_decision(&d), n);
                d
            },
        )
    }

    /// The state now, storing nothing and creating nothing; at a full key cap that would
    /// refuse a new key, what a check would report.
    pub(crate) fn peek(&self, slot: &impl Slot<A>) -> Decision {
        self.peek_on(slot, &self.src())
    }

    /// Runs `f` on what the slot holds now, creating nothing, with `now` read after the lookup
    /// (a miss needs it so, as [`decide_on_shard`] explains). A missing cell that a decision
    /// storing it would be refused reports `Full` with the wait that decision would report,
    /// so a peek agrees with the check that would follow.
    fn find<R>(&self, slot: &impl Find<A>, f: impl FnOnce(Found<'_, A::Cell>, Nanos) -> R) -> R {
        let held = slot.lookup();
        let now = self.clock.now();
        match held.as_deref() {
            Some(cell) => f(Found::Cell(cell), now),
            None => match slot.refusal(now) {
                Some(wait) => f(Found::Full(wait), now),
                None => f(Found::Fresh, now),
            },
        }
    }

    /// [`peek`](Engine::peek) under the parameters `src` gives.
    fn peek_on(&self, slot: &impl Find<A>, src: &impl ParamSource<A::Params>) -> Decision {
        self.find(slot, |found, now| match found {
            Found::Cell(cell) => A::decision(&self.alg.check(cell, now, 0, false, src), now),
            Found::Fresh => {
                let fresh = A::Cell::default();
                A::decision(&self.alg.check(&fresh, now, 0, false, src), now)
            }
            Found::Full(wait) => full_decision(A::limit(&src.load()), wait),
        })
    }

    /// Applies `op` to the slot's cell (one CAS step, as a decision is) and reports the state
    /// it left as a [`Decision`] taking nothing: `allowed` and `retry_after` as a check of one
    /// permit would find them now, `remaining` and `reset_after` as [`peek`](Engine::peek)
    /// reports them. A new key that `op` would store meets the key cap as a decision's does,
    /// except that an untracked decision is refused too (nothing could be recorded).
    /// `op` is made from the `now` the step runs at (a block's end is relative to it).
    pub(crate) fn adjust(
        &self,
        slot: &impl Slot<A>,
        op: impl Fn(Nanos) -> Adjust,
    ) -> Result<Decision, AdjustError> {
        let src = self.src();
        let placed = self.decide(slot, |cell, now| {
            let op = op(now);
            let v = self.alg.adjust(cell, now, op, &src);
            if op.may_lower() {
                slot.lowered(cell);
            }
            (v, now)
        });
        match placed {
            Placed::Tracked(([look, one], now)) => {
                let look = A::decision(&look, now);
                let one = A::decision(&one, now);
                Ok(Decision {
                    allowed: one.allowed,
                    retry_after: one.retry_after,
                    refused_by: one.refused_by,
                    ..look
                })
            }
            Placed::Untracked((_, now)) => Err(AdjustError::KeyCapReached {
                retry_after: Duration::from_nanos(
                    slot.slot_free_at(now).saturating_sub(now).max(1),
                ),
            }),
            Placed::Full(wait) => Err(AdjustError::KeyCapReached {
                retry_after: Duration::from_nanos(wait),
            }),
        }
    }

    /// One attempt of a waiting method that must be granted by `deadline` (if any).
    pub(crate) fn attempt(
        &self,
        slot: &impl Slot<A>,
        n: u64,
        deadline: Option<Nanos>,
    ) -> Result<Next<A::Ticket>, AcquireError> {
        let src = self.src();
        let placed = self.decide(slot, |cell, now| {
            let max_wait = deadline.map(|d| d.saturating_sub(now));
            (self.alg.book(cell, now, n, &src, max_wait), now)
        });
        let (booking, now, tracked) = match placed {
            Placed::Tracked((b, now)) => (b?, now, true),
            Placed::Untracked((b, now)) => (b?, now, false),
            Placed::Full(_) => {
                // The earliest grant: when a slot can free (judged from the keys as they are;
                // later decisions only delay it), then the new key's own wait from a fresh
                // cell at that time. What a fresh key refuses (a window's count above its
                // limit, a wait past the limiter's time) is refused now, as it is below the
                // cap, and so is a grant past the deadline: never a sleep and then a failure.
                // Otherwise sleep until that slot can free, however far (not the cap's
                // suggested wait, which is capped at the quota's period: a waiter behind a
                // long block would wake once a period), and decide again.
                let now = self.clock.now();
                let free_at = slot.slot_free_at(now);
                let grant = self.fresh_ready_at(free_at, n, &src)?;
                if deadline.is_some_and(|deadline| grant > deadline) {
                    return Err(full_error(grant.saturating_sub(now)));
                }
                return Ok(Next::Sleep {
                    wait: free_at.saturating_sub(now).max(1),
                    then: Then::Retry,
                });
            }
        };
        Ok(match booking {
            Booking::Now => Next::Done,
            Booking::Booked { ticket, ready_at } => Next::Sleep {
                wait: ready_at.saturating_sub(now),
                then: Then::Granted(tracked.then_some(ticket)),
            },
            // "Decide again after 0 ns" would make the waiting loops spin forever on a clock
            // that only moves when slept on (a manual or tokio test clock) and burn a core on
            // a real one: no algorithm returns it, but the loop must not depend on that, so
            // it waits the smallest step instead.
            Booking::Retry(wait) => Next::Sleep {
                wait: wait.max(1),
                then: Then::Retry,
            },
        })
    }

    /// When `n` permits would be ready for a fresh cell booked at `at`.
    fn fresh_ready_at(
        &self,
        at: Nanos,
        n: u64,
        src: &impl ParamSource<A::Params>,
    ) -> Result<Nanos, AcquireError> {
        let fresh = A::Cell::default();
        Ok(match self.alg.book(&fresh, at, n, src, None)? {
            Booking::Now => at,
            Booking::Booked { ready_at, .. } => ready_at,
            Booking::Retry(wait) => at.saturating_add(wait),
        })
    }

    /// Blocking acquire: attempts and sleeps (on the limiter's clock) until granted; returns
    /// the time slept. With a `timeout`, gives up at once when the wait would pass it.
    pub(crate) fn acquire(
        &self,
        slot: &impl Slot<A>,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<Duration, AcquireError> {
        let mut waiter = Waiter::new(self, n, timeout);
        while let Some((wait, then)) = waiter.next(self, slot) {
            if !wait.is_zero() {
                self.clock.sleep(wait);
            }
            if let Then::Granted(_) = then {
                break;
            }
        }
        waiter.end()
    }

    /// Cancels a booking on whatever cell the slot finds now (none: it was evicted as cold,
    /// so the booking's stretch is in the past and there is nothing to give back). Every
    /// cancel goes through here: `Reservation::cancel` (direct and keyed) and a dropped async
    /// acquire.
    ///
    /// The cancel is made at `now + max_skew`, not `now`. The refund rule (GCRA's `refund` in
    /// `algorithm::gcra`) gives back only schedule positions at or after the `now` it is given:
    /// a ticket that ends at or before it gives back nothing, and a hole starts at
    /// `max(start, now)`. Positions below a reading are the past, spent by time passing (a
    /// limiter never grants backwards in time). On a clock whose readings can be up to
    /// `max_skew` earlier than one that happened-before them on another core (the TSC), a
    /// cancel issued just after a stretch's ready time or end, as another core saw it, could
    /// read a `now` below that and give back positions that core had already seen pass. Every
    /// reading that happened-before this cancel is at most `now + max_skew`, so with that as
    /// the cancel's `now` nothing it gives back lies behind any of them. The cost is on the
    /// safe side: a cancel gives back at most `max_skew` less of the future than an exact
    /// clock would (nothing less on a clock ordered across threads, whose skew is 0).
    pub(crate) fn cancel(&self, slot: &impl Find<A>, ticket: &A::Ticket) {
        let src = self.src();
        let skew = self.clock.max_skew();
        self.find(slot, |found, now| {
            if let Found::Cell(cell) = found {
                self.alg
                    .cancel(cell, ticket, now.saturating_add(skew), &src);
                slot.lowered(cell);
            }
        });
    }
}

#[cfg(feature = "tokio")]
impl<A: Algorithm> Engine<A> {
    /// Async acquire: as [`acquire`](Engine::acquire), sleeping on tokio's timer. Dropping the
    /// future while it sleeps on a tracked booking cancels the booking (and, as any drop while
    /// it sleeps, the meter counts a cancelled wait).
    pub(crate) async fn acquire_async(
        &self,
        slot: &impl Slot<A>,
        n: u64,
        timeout: Option<Duration>,
    ) -> Result<Duration, AcquireError> {
        let mut waiter = Waiter::new(self, n, timeout);
        while let Some((wait, then)) = waiter.next(self, slot) {
            if let Then::Granted(ticket) = then {
                let guard = crate::reservation::CancelOnDrop::new(|| {
                    if let Some(t) = &ticket {
                        self.cancel(slot, t);
                    }
                });
                crate::reservation::sleep(wait).await;
                guard.disarm();
                break;
            }
            crate::reservation::sleep(wait).await;
        }
        waiter.end()
    }
}

#[cfg(feature = "tokio")]
impl<A: Algorithm> Engine<A> {
    /// `check_n_for_async`: takes `n` permits within `timeout` as
    /// [`acquire_async`](Engine::acquire_async) does, and reports the outcome as a
    /// [`Decision`]: granted, the slot's state as the grant left it; not within `timeout`, the
    /// wait needed as `retry_after`; never within it, no `retry_after`.
    pub(crate) async fn check_n_for_async(
        &self,
        slot: &impl Slot<A>,
        n: u64,
        timeout: Duration,
    ) -> Decision {
        let quota = self.quota();
        let never =
            |state: Decision| Decision::never(quota.burst(), state.remaining, state.reset_after);
        // GCRA serves a count above the burst by waiting: even from a full bucket `n` permits
        // wait `n * T - tau`. Beyond `timeout`, retrying can never help, so say so instead of
        // giving a retry-after. (The windows refuse such a count as `ExceedsBurst`.)
        let least_wait = n.saturating_mul(quota.t()).saturating_sub(quota.tau());
        if Duration::from_nanos(least_wait) > timeout {
            return never(self.peek(slot));
        }
        match self.acquire_async(slot, n, Some(timeout)).await {
            Ok(_) => {
                let state = self.peek(slot);
                Decision::allowed(state.limit, state.remaining, state.reset_after)
            }
            Err(AcquireError::RateLimited { retry_after }) => {
                Decision::denied(quota.burst(), 0, retry_after, retry_after)
            }
            Err(AcquireError::KeyCapReached {
                retry_after: Some(wait),
            }) => Decision::key_cap_reached(quota.burst(), wait),
            Err(_) => never(self.peek(slot)),
        }
    }
}

/// The decision reported when the key cap refuses a new key.
fn full_decision(limit: u64, wait: Nanos) -> Decision {
    Decision::key_cap_reached(limit, Duration::from_nanos(wait))
}

/// For callers that do not wait out a full table: the cap's refusal with its wait.
pub(crate) fn full_error(wait: Nanos) -> AcquireError {
    AcquireError::KeyCapReached {
        retry_after: Some(Duration::from_nanos(wait)),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::algorithm::gcra::{GcraParams, Ticket, Verdict};
    use crate::algorithm::rules::Terms;
    use crate::algorithm::Gcra;
    use crate::cell::gcra::GcraCell;
    use crate::cell::rules::Rules;
    use crate::{ManualClock, RateLimiter};

    /// GCRA, except that booking answers "decide again after 0 ns" until the clock has moved
    /// (and, so that a broken waiting loop ends the test instead of hanging it, after 1000
    /// calls).
    #[derive(Clone, Debug, Default)]
    struct RetryZero {
        books: Arc<AtomicU64>,
    }

    impl Terms for RetryZero {
        type Params = GcraParams;
        type Verdict = Verdict;
        type Ticket = Ticket;

        fn params(&self, quota: &Quota, now: Nanos) -> Result<GcraParams, QuotaError> {
            Gcra.params(quota, now)
        }
        fn next_params(
            &self,
            old: &GcraParams,
            quota: &Quota,
            now: Nanos,
        ) -> Result<GcraParams, QuotaError> {
            Gcra.next_params(old, quota, now)
        }
        fn call_params(&self, base: &GcraParams, quota: &Quota) -> Result<GcraParams, QuotaError> {
            Gcra.call_params(base, quota)
        }
        fn inert(base: &GcraParams) -> GcraParams {
            Gcra::inert(base)
        }
        fn allowed(v: &Verdict) -> bool {
            Gcra::allowed(v)
        }
        fn result(v: &Verdict, n: u64) -> Result<(), AcquireError> {
            Gcra::result(v, n)
        }
        fn decision(v: &Verdict, now: Nanos) -> Decision {
            Gcra::decision(v, now)
        }
        fn limit(p: &GcraParams) -> u64 {
            Gcra::limit(p)
        }
    }

    impl Rules for RetryZero {
        type Cell = GcraCell;

        fn check(
            &self,
            cell: &GcraCell,
            now: Nanos,
            n: u64,
            keyed: bool,
            p: &impl ParamSource<GcraParams>,
        ) -> Verdict {
            Gcra.check(cell, now, n, keyed, p)
        }
        fn book(
            &self,
            cell: &GcraCell,
            now: Nanos,
            n: u64,
            p: &impl ParamSource<GcraParams>,
            max_wait: Option<Nanos>,
        ) -> Result<Booking<Ticket>, AcquireError> {
            if now == 0 && self.books.fetch_add(1, Ordering::Relaxed) < 1000 {
                return Ok(Booking::Retry(0));
            }
            Gcra.book(cell, now, n, p, max_wait)
        }
        fn cancel(
            &self,
            cell: &GcraCell,
            t: &Ticket,
            now: Nanos,
            p: &impl ParamSource<GcraParams>,
        ) {
            Gcra.cancel(cell, t, now, p)
        }
        fn adjust(
            &self,
            cell: &GcraCell,
            now: Nanos,
            op: Adjust,
            p: &impl ParamSource<GcraParams>,
        ) -> [Verdict; 2] {
            Gcra.adjust(cell, now, op, p)
        }
        fn migrate(&self, cell: &GcraCell, p: &impl ParamSource<GcraParams>) {
            Gcra.migrate(cell, p)
        }
        fn cold_at(&self, cell: &GcraCell, p: &GcraParams) -> Nanos {
            Gcra.cold_at(cell, p)
        }
        fn is_fresh(&self, cell: &GcraCell) -> bool {
            Gcra.is_fresh(cell)
        }
    }

    #[test]
    fn a_retry_after_zero_waits_the_smallest_step_instead_of_spinning() {
        let clock = ManualClock::new();
        let alg = RetryZero::default();
        let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .algorithm(alg.clone())
            .unwrap()
            .build();
        assert_eq!(limiter.acquire(), Ok(Duration::from_nanos(1)));
        assert_eq!(clock.sleeps(), [Duration::from_nanos(1)]);
        assert_eq!(
            alg.books.load(Ordering::Relaxed),
            1,
            "decided again once, at 1 ns"
        );
    }

    /// A per-call quota that a `set_quota` makes unrepresentable between two loads of one
    /// decision (the CAS loop reloads on a lost race): that load gives inert parameters, so the
    /// decision stores nothing, and the call reports the error; a later load that fits clears
    /// it.
    #[test]
    fn a_per_call_quota_refused_on_a_reload_decides_on_inert_parameters() {
        use crate::algorithm::FixedWindow;
        let q = |l, w| Quota::new(l, Duration::from_nanos(w)).unwrap();
        let clock = AnyClock::custom(ManualClock::new());
        let e = Engine::new(FixedWindow::new(), q(1000, 1000), clock).unwrap();
        let call = q(1000, 5000);
        let src = e.call_src(&call);
        assert_eq!((src.load().limit, src.refused.get()), (1000, None));
        // 1 per ns: the word's count holds 1, not 1000.
        e.set_quota(q(1, 1), |_| {}).unwrap();
        let p = src.load_full();
        assert_eq!(p.limit, 0);
        assert!(matches!(
            src.refused.get(),
            Some(QuotaError::Unsupported(_))
        ));
        e.set_quota(q(1000, 1000), |_| {}).unwrap();
        assert_eq!((src.load().limit, src.refused.get()), (1000, None));
    }
}
