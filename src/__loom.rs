//! The internals the loom models (`loom-tests/`) drive, built only under `--cfg loom` and
//! hidden from the docs. Not an API: thin wrappers around the very functions the limiters run,
//! so the models check the library's code, not a copy.
//!
//! The sweeper model keeps its own lock-guarded ordered map (the store's tables are ordered by a
//! randomly seeded hash, and loom replays each execution step for step), and calls these for
//! the steps that decide: [`check_on_shard`] is the read side of the keyed store's
//! `decide`, and [`evict_cold`] is the rule its sweep runs under a shard's write lock.

use std::ops::Deref;
use std::task::{Poll, Waker};

use crate::algorithm::gcra::GcraParams;
use crate::algorithm::rules::Terms;
use crate::algorithm::{Gcra, ParamSource};
use crate::cell::gcra::GcraCell;
use crate::cell::params::{Live, ParamsCell};
use crate::cell::semaphore::SemCell;
use crate::decision::Decision;
use crate::engine::{self, OnShard};
use crate::quota::Quota;
use crate::reservation::Reservation;
use crate::store::evict;
use crate::{Nanos, RateLimiter};

pub use crate::cell::semaphore::word::Take;
pub use crate::cell::semaphore::{Cancelled, Enqueued};
pub use crate::smooth::loom_api::SmoothTicket;

/// One shard of a `LeasedRateLimiter`: its count of leased permits and the take-when-empty
/// protocol (`cell::lease`).
#[derive(Debug, Default)]
pub struct Lease(crate::cell::lease::LeaseCell);

impl Lease {
    /// An empty shard.
    pub fn new() -> Lease {
        Lease::default()
    }

    /// One permit: from the shard, or by taking a lease (`lease()`: how many the shared limiter
    /// granted), or from `one()` (the shared limiter directly), as the limiter's `try_acquire`.
    pub fn acquire(&self, lease: impl FnOnce() -> u64, one: impl FnOnce() -> bool) -> bool {
        self.0.acquire(lease, one)
    }

    /// Unused leased permits now.
    pub fn held(&self) -> u64 {
        self.0.held()
    }
}

/// The keyed limiter's per-key cell (one atomic word).
#[derive(Debug, Default)]
pub struct TatCell(GcraCell);

/// GCRA parameters for `q` in quota generation 0 (the keyed models never change quotas).
fn params(q: Quota) -> GcraParams {
    Gcra.params(&q, 0).expect("GCRA runs every quota")
}

impl TatCell {
    /// A fresh cell: TAT 0, a full bucket.
    pub fn new() -> TatCell {
        TatCell::default()
    }

    /// A check of `n` permits at `now` under `q` (the CAS loop).
    pub fn check(&self, now: Nanos, n: u64, q: Quota) -> Checked {
        let p = params(q);
        checked(&self.0, now, n, &|| p)
    }

    /// The stored TAT.
    pub fn tat(&self) -> Nanos {
        self.0.tat()
    }
}

/// A limiter's GCRA parameters in their sequence lock, as `set_quota` changes them.
pub struct Params(ParamsCell<GcraParams>);

impl Params {
    /// The parameters of `q` (generation 0).
    pub fn new(q: Quota) -> Params {
        Params(ParamsCell::new(params(q)))
    }

    /// What `Engine::set_quota` publishes before it migrates cells: the next generation, for
    /// `q`, changed at `now`.
    pub fn publish(&self, q: Quota, now: Nanos) {
        let next = Gcra
            .next_params(&self.0.load_full(), &q, now)
            .expect("GCRA runs every quota");
        self.0.store(next);
    }

    /// The generation in force.
    pub fn generation(&self) -> u64 {
        self.0.load().generation
    }
}

impl TatCell {
    /// A check of `n` permits at `now` with the parameters read from `p` on every attempt, as
    /// a limiter's decisions do.
    pub fn check_live(&self, now: Nanos, n: u64, p: &Params) -> Checked {
        checked(&self.0, now, n, &Live(&p.0))
    }

    /// What `set_quota`'s walk does to each cell.
    pub fn migrate(&self, p: &Params) {
        self.0.migrate(&Live(&p.0));
    }

    /// Whether the cell's word is in `p`'s generation (its parity matches).
    pub fn in_generation_of(&self, p: &Params) -> bool {
        self.0.parity() == p.0.load().generation & 1
    }
}

/// [`check_on_shard`] with parameters read live from `p`.
pub fn check_on_shard_live<G>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    n: u64,
    p: &Params,
) -> Looked
where
    G: Deref<Target = TatCell>,
{
    on_shard(lookup, now, |cell: &TatCell, now| {
        cell.check_live(now, n, p)
    })
}

/// One check's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The `now` the check was made at.
    pub now: Nanos,
    /// The decision as the limiter reports it.
    pub decision: Decision,
    /// The TAT it stored, if any.
    pub stored: Option<Nanos>,
}

/// A check of `n` permits at `now` with the parameters `p` gives on every attempt.
fn checked(cell: &GcraCell, now: Nanos, n: u64, p: &impl ParamSource<GcraParams>) -> Checked {
    let v = cell.check(now, n, p);
    Checked {
        now,
        decision: v.decision(now),
        stored: v.store,
    }
}

/// What [`check_on_shard`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Looked {
    /// Decided on the stored cell, or as a fresh key storing nothing.
    Decided(Checked),
    /// The key was absent and this (scratch) decision stores: insert under the write lock and
    /// check again there with a fresh `now`.
    MustInsert(Checked),
}

/// The read side of the keyed store's `decide` (`engine::decide_on_shard`) with a check
/// of `n` permits: `lookup` takes the shard's read guard on the key's cell, `now` reads the
/// clock.
pub fn check_on_shard<G>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    n: u64,
    q: Quota,
) -> Looked
where
    G: Deref<Target = TatCell>,
{
    let p = params(q);
    on_shard(lookup, now, |cell: &TatCell, now| {
        checked(&cell.0, now, n, &|| p)
    })
}

/// The library's `decide_on_shard` with the check `op`.
fn on_shard<G>(
    lookup: impl FnOnce() -> Option<G>,
    now: impl Fn() -> Nanos,
    op: impl Fn(&TatCell, Nanos) -> Checked,
) -> Looked
where
    G: Deref<Target = TatCell>,
{
    engine::decide_on_shard(
        lookup,
        now,
        &op,
        |c: &TatCell| c.0.is_fresh(),
        |on| match on {
            OnShard::Decided(c) => Looked::Decided(c),
            OnShard::MustInsert(c) => Looked::MustInsert(c),
        },
    )
}

/// The eviction rule (`store::evict::verdict` over `evict_by`, with GCRA's `cold_at`) over
/// the model's table, at the sweeper's reading `now` of a clock with [`Clock::max_skew`]
/// `max_skew`; returns how many cells it evicted and the smallest TAT left.
///
/// [`Clock::max_skew`]: crate::Clock::max_skew
pub fn evict_cold(
    now: Nanos,
    max_skew: Nanos,
    retain: impl FnOnce(&mut dyn FnMut(&TatCell) -> bool),
) -> (usize, Nanos) {
    let judge = |c: &TatCell| evict::verdict(c.0.tat(), now, max_skew);
    let swept = evict::evict_by(judge, retain);
    (swept.evicted, swept.min_cold_at)
}

/// A direct GCRA limiter's schedule: its tail (TAT) and its holes.
pub fn schedule(limiter: &RateLimiter) -> (Nanos, Vec<(Nanos, Nanos)>) {
    let (tat, holes) = limiter.cell().snapshot();
    (tat, holes.unwrap_or_default())
}

/// The stretch `(start, end]` of the schedule a reservation holds.
pub fn stretch(r: &Reservation<'_>) -> (Nanos, Nanos) {
    let t = r.ticket();
    (t.start, t.end)
}

/// A concurrency limit's cell (`cell::semaphore::SemCell`): the very calls the concurrency
/// limiters make on it (`concurrency::wait` and `concurrency::sem_store`).
#[derive(Debug)]
pub struct Semaphore(SemCell);

/// A semaphore word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemState {
    /// Permits held.
    pub in_flight: u32,
    /// The limit in force.
    pub limit: u32,
    /// The waiter queue is not empty.
    pub queued: bool,
    /// Evicted: nothing is granted on it any more.
    pub closed: bool,
}

impl Semaphore {
    /// A fresh cell of `limit` permits.
    pub fn new(limit: u32) -> Semaphore {
        Semaphore(SemCell::new(limit))
    }

    /// The fast path: `n >= 1` permits now or why not (one CAS loop).
    pub fn try_take(&self, n: u32) -> Take {
        self.0.try_take(n)
    }

    /// Gives back `n` permits held (one CAS, or the mutex when waiters are queued).
    pub fn release(&self, n: u32) {
        self.0.release(n);
    }

    /// Takes `n` permits or queues for them, with `waker`.
    pub fn enqueue(&self, n: u32, waker: &Waker) -> Enqueued {
        self.0.enqueue(n, Some(waker))
    }

    /// Waiter `id`: served (`Ok`), refused (`Err(limit)`) or still waiting.
    pub fn poll(&self, id: u64, waker: &Waker) -> Poll<Result<(), u32>> {
        self.0.poll_waiter(id, waker)
    }

    /// Waiter `id` gives up.
    pub fn cancel(&self, id: u64) -> Cancelled {
        self.0.cancel(id)
    }

    /// Changes the limit live.
    pub fn set_limit(&self, limit: u32) {
        self.0.set_limit(limit);
    }

    /// The keyed store's eviction claim on an idle cell.
    pub fn try_close(&self) -> bool {
        self.0.try_close()
    }

    /// What the store does before freeing a closed cell.
    pub fn quiesce(&self) {
        self.0.quiesce();
    }

    /// The word, unpacked.
    pub fn state(&self) -> SemState {
        let s = self.0.state();
        SemState {
            in_flight: s.in_flight,
            limit: s.limit,
            queued: s.queued,
            closed: s.closed,
        }
    }
}
