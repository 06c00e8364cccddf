//! `RateLimiter` and `KeyedRateLimiter`, every algorithm: one driver over the method family,
//! the direct limiter being the keyed one with a single key.

use std::fmt::{self, Debug};
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tollgate::{
    AcquireError, Algorithm, Clock, Decision, FixedWindow, Gcra, KeyedRateLimiter, ManualClock,
    Quota, QuotaError, RateLimiter, Reservation, SlidingLog, SlidingWindow, ThrottleReply,
    WeightedWindow, WhenFull, MAX_NANOS,
};

use crate::harness::{call, nanos, seed_of, FixedHasher, Key, Rng, Scale, Show, Trace};

/// The method family on one limiter, keyed or not (a direct limiter ignores the key).
trait Subject {
    fn keyed(&self) -> bool;
    fn quota(&self) -> Quota;
    fn set_quota(&self, q: Quota) -> Result<(), QuotaError>;
    fn try_acquire(&self, k: u32) -> bool;
    fn try_acquire_n(&self, k: u32, n: u64) -> Result<(), AcquireError>;
    fn check(&self, k: u32) -> Decision;
    fn check_n(&self, k: u32, n: u64) -> Decision;
    fn check_with(&self, k: u32, q: Quota) -> Result<Decision, QuotaError>;
    fn check_n_with(&self, k: u32, n: u64, q: Quota) -> Result<Decision, QuotaError>;
    fn peek(&self, k: u32) -> Decision;
    fn acquire(&self, k: u32) -> Result<Duration, AcquireError>;
    fn acquire_n(&self, k: u32, n: u64) -> Result<Duration, AcquireError>;
    fn try_acquire_for(&self, k: u32, d: Duration) -> Result<Duration, AcquireError>;
    fn try_acquire_n_for(&self, k: u32, n: u64, d: Duration) -> Result<Duration, AcquireError>;
    fn block(&self, k: u32, d: Duration) -> String;
    fn penalize(&self, k: u32, n: u64) -> String;
    fn reward(&self, k: u32, n: u64) -> Decision;
    fn reset(&self, k: u32) -> String;
    /// The keyed limiter's table operations (`None` on a direct limiter).
    fn housekeeping(&self, rng: &mut Rng, k: u32) -> Option<(String, String)>;
}

/// GCRA's own calls: `throttle` and reservations.
trait Booker {
    fn throttle(&self, k: u32, b: u64, c: u64, p: u64, q: u64)
        -> Result<ThrottleReply, QuotaError>;
    fn reserve(&self, k: u32) -> Result<Reservation<'_>, AcquireError>;
    fn reserve_n(&self, k: u32, n: u64) -> Result<Reservation<'_>, AcquireError>;
    fn try_reserve_for(&self, k: u32, d: Duration) -> Result<Reservation<'_>, AcquireError>;
    fn try_reserve_n_for(
        &self,
        k: u32,
        n: u64,
        d: Duration,
    ) -> Result<Reservation<'_>, AcquireError>;
}

impl<A: Algorithm> Subject for RateLimiter<A> {
    fn keyed(&self) -> bool {
        false
    }
    fn quota(&self) -> Quota {
        RateLimiter::quota(self)
    }
    fn set_quota(&self, q: Quota) -> Result<(), QuotaError> {
        RateLimiter::set_quota(self, q)
    }
    fn try_acquire(&self, _: u32) -> bool {
        RateLimiter::try_acquire(self)
    }
    fn try_acquire_n(&self, _: u32, n: u64) -> Result<(), AcquireError> {
        RateLimiter::try_acquire_n(self, n)
    }
    fn check(&self, _: u32) -> Decision {
        RateLimiter::check(self)
    }
    fn check_n(&self, _: u32, n: u64) -> Decision {
        RateLimiter::check_n(self, n)
    }
    fn check_with(&self, _: u32, q: Quota) -> Result<Decision, QuotaError> {
        RateLimiter::check_with(self, q)
    }
    fn check_n_with(&self, _: u32, n: u64, q: Quota) -> Result<Decision, QuotaError> {
        RateLimiter::check_n_with(self, n, q)
    }
    fn peek(&self, _: u32) -> Decision {
        RateLimiter::peek(self)
    }
    fn acquire(&self, _: u32) -> Result<Duration, AcquireError> {
        RateLimiter::acquire(self)
    }
    fn acquire_n(&self, _: u32, n: u64) -> Result<Duration, AcquireError> {
        RateLimiter::acquire_n(self, n)
    }
    fn try_acquire_for(&self, _: u32, d: Duration) -> Result<Duration, AcquireError> {
        RateLimiter::try_acquire_for(self, d)
    }
    fn try_acquire_n_for(&self, _: u32, n: u64, d: Duration) -> Result<Duration, AcquireError> {
        RateLimiter::try_acquire_n_for(self, n, d)
    }
    fn block(&self, _: u32, d: Duration) -> String {
        RateLimiter::block(self, d).show()
    }
    fn penalize(&self, _: u32, n: u64) -> String {
        RateLimiter::penalize(self, n).show()
    }
    fn reward(&self, _: u32, n: u64) -> Decision {
        RateLimiter::reward(self, n)
    }
    fn reset(&self, _: u32) -> String {
        RateLimiter::reset(self);
        format!("() then peek: {}", RateLimiter::peek(self).show())
    }
    fn housekeeping(&self, _: &mut Rng, _: u32) -> Option<(String, String)> {
        None
    }
}

impl Booker for RateLimiter<Gcra> {
    fn throttle(
        &self,
        _: u32,
        b: u64,
        c: u64,
        p: u64,
        q: u64,
    ) -> Result<ThrottleReply, QuotaError> {
        RateLimiter::throttle(self, b, c, p, q)
    }
    fn reserve(&self, _: u32) -> Result<Reservation<'_>, AcquireError> {
        RateLimiter::reserve(self)
    }
    fn reserve_n(&self, _: u32, n: u64) -> Result<Reservation<'_>, AcquireError> {
        RateLimiter::reserve_n(self, n)
    }
    fn try_reserve_for(&self, _: u32, d: Duration) -> Result<Reservation<'_>, AcquireError> {
        RateLimiter::try_reserve_for(self, d)
    }
    fn try_reserve_n_for(
        &self,
        _: u32,
        n: u64,
        d: Duration,
    ) -> Result<Reservation<'_>, AcquireError> {
        RateLimiter::try_reserve_n_for(self, n, d)
    }
}

impl<A, S> Subject for KeyedRateLimiter<u32, A, S>
where
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn keyed(&self) -> bool {
        true
    }
    fn quota(&self) -> Quota {
        KeyedRateLimiter::quota(self)
    }
    fn set_quota(&self, q: Quota) -> Result<(), QuotaError> {
        KeyedRateLimiter::set_quota(self, q)
    }
    fn try_acquire(&self, k: u32) -> bool {
        KeyedRateLimiter::try_acquire(self, &k)
    }
    fn try_acquire_n(&self, k: u32, n: u64) -> Result<(), AcquireError> {
        KeyedRateLimiter::try_acquire_n(self, &k, n)
    }
    fn check(&self, k: u32) -> Decision {
        KeyedRateLimiter::check(self, &k)
    }
    fn check_n(&self, k: u32, n: u64) -> Decision {
        KeyedRateLimiter::check_n(self, &k, n)
    }
    fn check_with(&self, k: u32, q: Quota) -> Result<Decision, QuotaError> {
        KeyedRateLimiter::check_with(self, &k, q)
    }
    fn check_n_with(&self, k: u32, n: u64, q: Quota) -> Result<Decision, QuotaError> {
        KeyedRateLimiter::check_n_with(self, &k, n, q)
    }
    fn peek(&self, k: u32) -> Decision {
        KeyedRateLimiter::peek(self, &k)
    }
    fn acquire(&self, k: u32) -> Result<Duration, AcquireError> {
        KeyedRateLimiter::acquire(self, &k)
    }
    fn acquire_n(&self, k: u32, n: u64) -> Result<Duration, AcquireError> {
        KeyedRateLimiter::acquire_n(self, &k, n)
    }
    fn try_acquire_for(&self, k: u32, d: Duration) -> Result<Duration, AcquireError> {
        KeyedRateLimiter::try_acquire_for(self, &k, d)
    }
    fn try_acquire_n_for(&self, k: u32, n: u64, d: Duration) -> Result<Duration, AcquireError> {
        KeyedRateLimiter::try_acquire_n_for(self, &k, n, d)
    }
    fn block(&self, k: u32, d: Duration) -> String {
        KeyedRateLimiter::block(self, &k, d).show()
    }
    fn penalize(&self, k: u32, n: u64) -> String {
        KeyedRateLimiter::penalize(self, &k, n).show()
    }
    fn reward(&self, k: u32, n: u64) -> Decision {
        KeyedRateLimiter::reward(self, &k, n)
    }
    fn reset(&self, k: u32) -> String {
        KeyedRateLimiter::reset(self, &k).show()
    }
    fn housekeeping(&self, rng: &mut Rng, k: u32) -> Option<(String, String)> {
        Some(match rng.below(10) {
            0..=3 => ("sweep_now()".into(), self.sweep_now().show()),
            4..=5 => (
                "len()".into(),
                format!("{} empty={}", self.len(), self.is_empty()),
            ),
            6..=7 => (
                call("contains_key", &[&Key(k)]),
                self.contains_key(&k).show(),
            ),
            8 => ("stats()".into(), self.stats().show()),
            _ => {
                self.shrink_to_fit();
                ("shrink_to_fit()".into(), format!("len={}", self.len()))
            }
        })
    }
}

impl<S> Booker for KeyedRateLimiter<u32, Gcra, S>
where
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn throttle(
        &self,
        k: u32,
        b: u64,
        c: u64,
        p: u64,
        q: u64,
    ) -> Result<ThrottleReply, QuotaError> {
        KeyedRateLimiter::throttle(self, &k, b, c, p, q)
    }
    fn reserve(&self, k: u32) -> Result<Reservation<'_>, AcquireError> {
        KeyedRateLimiter::reserve(self, &k)
    }
    fn reserve_n(&self, k: u32, n: u64) -> Result<Reservation<'_>, AcquireError> {
        KeyedRateLimiter::reserve_n(self, &k, n)
    }
    fn try_reserve_for(&self, k: u32, d: Duration) -> Result<Reservation<'_>, AcquireError> {
        KeyedRateLimiter::try_reserve_for(self, &k, d)
    }
    fn try_reserve_n_for(
        &self,
        k: u32,
        n: u64,
        d: Duration,
    ) -> Result<Reservation<'_>, AcquireError> {
        KeyedRateLimiter::try_reserve_n_for(self, &k, n, d)
    }
}

/// How wild a scenario's inputs are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Bounded inputs over thousands of steps: the decisions in their everyday range.
    Main,
    /// Huge counts and durations, the clock near and at the end of time; short.
    Extreme,
    /// Like `Main`, but every count and duration is bounded so that a key always turns cold
    /// again (a blocking acquire at a full key cap waits for that).
    Capped,
}

struct Drive<'a, L> {
    lim: &'a L,
    book: Option<&'a dyn Booker>,
    clock: ManualClock,
    scale: Scale,
    quotas: Vec<Quota>,
    keys: u32,
    mode: Mode,
}

/// A reservation held by the driver, with the number its line gave it.
struct Held<'a> {
    id: u64,
    key: u32,
    res: Reservation<'a>,
}

impl<L: Subject> Drive<'_, L> {
    fn op(&self, name: &str, k: u32, args: &[&dyn Debug]) -> String {
        if self.lim.keyed() {
            let key = Key(k);
            let mut all: Vec<&dyn Debug> = vec![&key];
            all.extend_from_slice(args);
            call(name, &all)
        } else {
            call(name, args)
        }
    }

    fn key(&self, rng: &mut Rng) -> u32 {
        // A few hot keys and a colder tail.
        if rng.chance(50) {
            rng.below(u64::from(self.keys.min(2))) as u32
        } else {
            rng.below(u64::from(self.keys)) as u32
        }
    }

    fn n(&self, rng: &mut Rng) -> u64 {
        let n = self.scale.n(rng);
        if self.mode == Mode::Capped {
            n.min(self.scale.limit.saturating_mul(4))
        } else {
            n
        }
    }

    fn n_wait(&self, rng: &mut Rng) -> u64 {
        if self.mode == Mode::Extreme && rng.chance(30) {
            return rng.pick(&[u64::MAX, 1 << 40, 1 << 20, MAX_NANOS]);
        }
        self.scale.n_wait(rng)
    }

    fn wait(&self, rng: &mut Rng) -> Duration {
        if self.mode == Mode::Extreme && rng.chance(30) {
            return rng.pick(&[
                Duration::MAX,
                Duration::from_nanos(u64::MAX),
                Duration::from_nanos(MAX_NANOS),
                Duration::from_nanos(MAX_NANOS + 1),
                Duration::from_secs(100 * 365 * 86_400),
            ]);
        }
        self.scale.wait(rng)
    }

    fn advance(&self, rng: &mut Rng) -> u64 {
        if self.mode == Mode::Extreme && rng.chance(2) {
            return rng.pick(&[MAX_NANOS / 4, MAX_NANOS / 2, MAX_NANOS, u64::MAX / 2]);
        }
        self.scale.advance(rng)
    }

    fn now(&self) -> u64 {
        self.clock.now()
    }

    fn run<'a>(&'a self, t: &mut Trace, rng: &mut Rng, steps: usize) {
        let mut held: Vec<Held<'a>> = Vec::new();
        let mut next_id = 0u64;
        for _ in 0..steps {
            let k = self.key(rng);
            let lim = self.lim;
            // Codes 757 and up are GCRA's own calls; without them, a smaller share goes to
            // the table operations (keyed) or a peek (direct).
            let code = rng.below(if self.book.is_some() { 1000 } else { 817 });
            match code {
                0..=189 => {
                    let d = self.advance(rng);
                    self.clock.advance_nanos(d);
                    t.rec(call("advance", &[&d]), format!("now={}", self.now()));
                }
                190..=259 => t.rec(self.op("try_acquire", k, &[]), lim.try_acquire(k).show()),
                260..=339 => {
                    let n = self.n(rng);
                    t.rec(
                        self.op("try_acquire_n", k, &[&n]),
                        lim.try_acquire_n(k, n).show(),
                    );
                }
                340..=379 => t.rec(self.op("check", k, &[]), lim.check(k).show()),
                380..=449 => {
                    let n = self.n(rng);
                    t.rec(self.op("check_n", k, &[&n]), lim.check_n(k, n).show());
                }
                450..=484 => t.rec(self.op("peek", k, &[]), lim.peek(k).show()),
                485..=509 => {
                    let q = rng.pick(&self.quotas);
                    t.rec(
                        self.op("check_with", k, &[&Shown(q)]),
                        lim.check_with(k, q).show(),
                    );
                }
                510..=539 => {
                    let n = self.n(rng);
                    let q = rng.pick(&self.quotas);
                    t.rec(
                        self.op("check_n_with", k, &[&n, &Shown(q)]),
                        lim.check_n_with(k, n, q).show(),
                    );
                }
                540..=564 => {
                    let r = lim.acquire(k);
                    t.rec(
                        self.op("acquire", k, &[]),
                        format!("{} now={}", r.show(), self.now()),
                    );
                }
                565..=594 => {
                    let n = self.n_wait(rng);
                    let r = lim.acquire_n(k, n);
                    t.rec(
                        self.op("acquire_n", k, &[&n]),
                        format!("{} now={}", r.show(), self.now()),
                    );
                }
                595..=619 => {
                    let d = self.wait(rng);
                    let r = lim.try_acquire_for(k, d);
                    t.rec(
                        self.op("try_acquire_for", k, &[&d]),
                        format!("{} now={}", r.show(), self.now()),
                    );
                }
                620..=659 => {
                    let n = self.n(rng);
                    let d = self.wait(rng);
                    let r = lim.try_acquire_n_for(k, n, d);
                    t.rec(
                        self.op("try_acquire_n_for", k, &[&n, &d]),
                        format!("{} now={}", r.show(), self.now()),
                    );
                }
                660..=679 => {
                    let d = self.wait(rng);
                    t.rec(self.op("block", k, &[&d]), lim.block(k, d));
                }
                680..=699 => {
                    let n = self.n(rng);
                    t.rec(self.op("penalize", k, &[&n]), lim.penalize(k, n));
                }
                700..=729 => {
                    let n = self.n(rng);
                    t.rec(self.op("reward", k, &[&n]), lim.reward(k, n).show());
                }
                730..=741 => t.rec(self.op("reset", k, &[]), lim.reset(k)),
                742..=756 => {
                    let q = rng.pick(&self.quotas);
                    let r = lim.set_quota(q);
                    t.rec(
                        call("set_quota", &[&Shown(q)]),
                        format!("{} quota={}", r.show(), lim.quota().show()),
                    );
                }
                _ => {
                    if let Some(book) = self.book {
                        if self.gcra(t, rng, book, k, &mut held, &mut next_id) {
                            continue;
                        }
                    }
                    if let Some((op, r)) = lim.housekeeping(rng, k) {
                        t.rec(op, r);
                    } else {
                        t.rec(self.op("peek", k, &[]), lim.peek(k).show());
                    }
                }
            }
        }
        // What the reservations still held end at, then dropped (kept: no refund).
        for h in held {
            t.rec(
                format!("drop(#{})", h.id),
                format!("remaining_delay={:?}", h.res.remaining_delay()),
            );
        }
    }

    /// GCRA's calls; `false` when the draw is for the table operations instead.
    fn gcra<'a>(
        &self,
        t: &mut Trace,
        rng: &mut Rng,
        book: &'a dyn Booker,
        k: u32,
        held: &mut Vec<Held<'a>>,
        next_id: &mut u64,
    ) -> bool {
        if self.lim.keyed() && rng.chance(25) {
            return false;
        }
        let made: (String, Result<Reservation<'a>, AcquireError>) = match rng.below(20) {
            0..=2 => {
                let b = rng.pick(&[0, 1, 4, 14, 99, u64::MAX]);
                let c = rng.pick(&[0, 1, 5, 10, 30, 1000, u64::MAX]);
                let p = rng.pick(&[0, 1, 2, 60, 86_400, u64::MAX]);
                let q = rng.pick(&[0, 1, 2, 5, 20, u64::MAX]);
                t.rec(
                    self.op("throttle", k, &[&b, &c, &p, &q]),
                    book.throttle(k, b, c, p, q).show(),
                );
                return true;
            }
            3..=4 => (self.op("reserve", k, &[]), book.reserve(k)),
            5..=7 => {
                let n = self.n(rng);
                (self.op("reserve_n", k, &[&n]), book.reserve_n(k, n))
            }
            8..=9 => {
                let d = self.wait(rng);
                (
                    self.op("try_reserve_for", k, &[&d]),
                    book.try_reserve_for(k, d),
                )
            }
            10..=12 => {
                let n = self.n(rng);
                let d = self.wait(rng);
                (
                    self.op("try_reserve_n_for", k, &[&n, &d]),
                    book.try_reserve_n_for(k, n, d),
                )
            }
            13..=15 if !held.is_empty() => {
                let h = held.remove(rng.index(held.len()));
                h.res.cancel();
                let after = self.lim.peek(h.key).show();
                t.rec(
                    format!("cancel(#{})", h.id),
                    format!("() then peek: {after}"),
                );
                return true;
            }
            16 if !held.is_empty() => {
                let h = held.remove(rng.index(held.len()));
                t.rec(
                    format!("wait(#{})", h.id),
                    format!("{:?} now={}", h.res.wait(), self.now()),
                );
                return true;
            }
            17 if !held.is_empty() => {
                let h = &held[rng.index(held.len())];
                t.rec(
                    format!("remaining_delay(#{})", h.id),
                    format!("{:?}", h.res.remaining_delay()),
                );
                return true;
            }
            _ if !held.is_empty() => {
                // Dropped: kept, as after a blocking acquire.
                let h = held.remove(rng.index(held.len()));
                t.rec(format!("drop(#{})", h.id), "()");
                return true;
            }
            _ => (self.op("reserve", k, &[]), book.reserve(k)),
        };
        match made {
            (op, Ok(res)) => {
                let id = *next_id;
                *next_id += 1;
                t.rec(op, format!("Ok({}) #{id}", res.show()));
                held.push(Held { id, key: k, res });
            }
            (op, Err(e)) => t.rec(op, format!("Err({e:?})")),
        }
        // Never hold many: the oldest is dropped (kept).
        if held.len() > 6 {
            let h = held.remove(0);
            t.rec(format!("drop(#{})", h.id), "()");
        }
        true
    }
}

/// A quota in an op's arguments: its `Display`.
struct Shown(Quota);

impl Debug for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0)
    }
}

/// The quotas a scenario moves to (`set_quota`) or decides under (`check_with`): its own, the
/// same limit faster and slower, other limits and windows, a burst other than the count (which
/// the window algorithms refuse), windows no sub-window count divides, one permit per ns, a
/// limit above `u32::MAX`, a day.
fn quota_pool(base: Quota) -> Vec<Quota> {
    let p = base.period();
    let c = base.count();
    [
        Ok(base),
        Ok(base),
        Quota::new(c * 2, p),
        Quota::new(c, p * 2),
        Quota::new(c.div_ceil(2), p),
        Quota::new(3, Duration::from_millis(300)),
        Quota::per_second(1),
        Quota::per_second(10).and_then(|q| q.with_burst(3)),
        Quota::per_second(10).and_then(|q| q.with_burst(30)),
        Quota::new(5, Duration::from_nanos(999_999_999)),
        Quota::new(7, Duration::from_secs(1)),
        Quota::new(100, Duration::from_secs(60)),
        Quota::new(1_000, Duration::from_micros(1)),
        Quota::new(u64::from(u32::MAX) + 1, Duration::from_secs(3600)),
        Quota::per_day(10_000),
        Quota::from_interval(Duration::from_millis(250)),
    ]
    .into_iter()
    .map(|q| q.expect("a valid quota"))
    .collect()
}

/// Unix time at which the traced epoch-aligned fixed windows' clocks read 0: after the
/// epoch, at an odd instant (2024-01-01T18:00:00.123456789Z), and before it.
fn origin_after() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_704_132_000, 123_456_789)
}

fn origin_before() -> SystemTime {
    UNIX_EPOCH - Duration::new(86_400 * 3 + 17, 987_654_321)
}

#[derive(Clone, Copy)]
enum Which {
    Gcra,
    GcraBurst1,
    GcraBursty,
    GcraStartEmpty,
    FixedOrigin,
    FixedEpochAfter,
    FixedEpochBefore,
    SlidingLog,
    SlidingWindow4,
    SlidingWindow5,
    Weighted,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Gcra => "gcra",
            Which::GcraBurst1 => "gcra_burst1",
            Which::GcraBursty => "gcra_bursty",
            Which::GcraStartEmpty => "gcra_start_empty",
            Which::FixedOrigin => "fixed_origin",
            Which::FixedEpochAfter => "fixed_epoch_after",
            Which::FixedEpochBefore => "fixed_epoch_before",
            Which::SlidingLog => "sliding_log",
            Which::SlidingWindow4 => "sliding_window4",
            Which::SlidingWindow5 => "sliding_window5",
            Which::Weighted => "weighted",
        }
    }

    /// The share of a scenario's steps this one gets: the variants of an algorithm (another
    /// burst, an empty start, another alignment or sub-window count) fewer than the first.
    fn steps(self, steps: usize) -> usize {
        if self.primary() {
            steps
        } else {
            (steps * 2 / 5).max(100)
        }
    }

    /// The first form of each algorithm (the others are its variants).
    fn primary(self) -> bool {
        matches!(
            self,
            Which::Gcra
                | Which::FixedOrigin
                | Which::SlidingLog
                | Which::SlidingWindow4
                | Which::Weighted
        )
    }

    fn quota(self) -> Quota {
        match self {
            Which::GcraBurst1 => Quota::per_second(10).and_then(|q| q.with_burst(1)),
            Which::GcraBursty => Quota::per_second(10).and_then(|q| q.with_burst(25)),
            Which::SlidingLog => Quota::new(6, Duration::from_millis(600)),
            Which::SlidingWindow5 => Quota::new(20, Duration::from_secs(2)),
            Which::Weighted => Quota::new(8, Duration::from_millis(800)),
            Which::FixedEpochAfter | Which::FixedEpochBefore => Quota::per_minute(12),
            _ => Quota::per_second(10),
        }
        .expect("a valid quota")
    }
}

const DIRECT: [Which; 11] = [
    Which::Gcra,
    Which::GcraBurst1,
    Which::GcraBursty,
    Which::GcraStartEmpty,
    Which::FixedOrigin,
    Which::FixedEpochAfter,
    Which::FixedEpochBefore,
    Which::SlidingLog,
    Which::SlidingWindow4,
    Which::SlidingWindow5,
    Which::Weighted,
];

/// Builds a direct limiter of `which` on `clock` and hands it to `f` (the algorithm is a type
/// parameter, so each arm is its own instance).
fn with_direct(which: Which, clock: &ManualClock, f: &mut dyn FnMut(&dyn DirectRun)) {
    let q = which.quota();
    let b = RateLimiter::builder(q).clock(clock.clone());
    match which {
        Which::Gcra | Which::GcraBurst1 | Which::GcraBursty => f(&b.build()),
        Which::GcraStartEmpty => f(&b.start_empty().build()),
        Which::FixedOrigin => f(&alg(b, FixedWindow::new()).build()),
        Which::FixedEpochAfter => {
            f(&alg(b, FixedWindow::epoch_aligned_from(origin_after())).build())
        }
        Which::FixedEpochBefore => {
            f(&alg(b, FixedWindow::epoch_aligned_from(origin_before())).build())
        }
        Which::SlidingLog => f(&alg(b, SlidingLog).build()),
        Which::SlidingWindow4 => f(&alg(b, SlidingWindow::new(4)).build()),
        Which::SlidingWindow5 => f(&alg(b, SlidingWindow::new(5)).build()),
        Which::Weighted => f(&alg(b, WeightedWindow).build()),
    }
}

fn alg<B: Algorithm>(b: tollgate::RateLimiterBuilder, a: B) -> tollgate::RateLimiterBuilder<B> {
    b.algorithm(a)
        .expect("the scenario's quota suits its algorithm")
}

/// A built direct limiter, its algorithm erased.
trait DirectRun {
    fn run(&self, t: &mut Trace, rng: &mut Rng, clock: &ManualClock, mode: Mode, steps: usize);
}

impl<A: Algorithm> DirectRun for RateLimiter<A>
where
    RateLimiter<A>: MaybeBooker,
{
    fn run(&self, t: &mut Trace, rng: &mut Rng, clock: &ManualClock, mode: Mode, steps: usize) {
        let q = Subject::quota(self);
        Drive {
            lim: self,
            book: self.booker(),
            clock: clock.clone(),
            scale: Scale::of(q),
            quotas: quota_pool(q),
            keys: 1,
            mode,
        }
        .run(t, rng, steps);
    }
}

/// GCRA's limiters book; the others do not.
trait MaybeBooker {
    fn booker(&self) -> Option<&dyn Booker>;
}

macro_rules! no_booker {
    ($($a:ty),*) => {$(
        impl MaybeBooker for RateLimiter<$a> {
            fn booker(&self) -> Option<&dyn Booker> {
                None
            }
        }
        impl<S> MaybeBooker for KeyedRateLimiter<u32, $a, S>
        where
            S: BuildHasher + Clone + Send + Sync + 'static,
        {
            fn booker(&self) -> Option<&dyn Booker> {
                None
            }
        }
    )*};
}

no_booker!(FixedWindow, SlidingLog, SlidingWindow, WeightedWindow);

impl MaybeBooker for RateLimiter<Gcra> {
    fn booker(&self) -> Option<&dyn Booker> {
        Some(self)
    }
}

impl<S> MaybeBooker for KeyedRateLimiter<u32, Gcra, S>
where
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn booker(&self) -> Option<&dyn Booker> {
        Some(self)
    }
}

/// The `direct` family: each algorithm through thousands of everyday steps, then a short run
/// of extremes (huge counts and durations, the end of time).
pub fn direct(t: &mut Trace) {
    for which in DIRECT {
        for (mode, steps, suffix) in [(Mode::Main, 1400, ""), (Mode::Extreme, 150, "_extreme")] {
            let steps = which.steps(steps);
            let name = format!("direct/{}{suffix}", which.name());
            let seed = seed_of(&name);
            let mut rng = Rng::new(seed);
            let clock = ManualClock::new();
            if mode == Mode::Extreme && rng.chance(50) {
                clock.set(MAX_NANOS - rng.below(100 * nanos(which.quota().period())));
            }
            t.scenario(
                &name,
                seed,
                format!("quota=[{}] now={}", which.quota(), clock.now()),
            );
            with_direct(which, &clock, &mut |l| {
                l.run(t, &mut rng, &clock, mode, steps)
            });
        }
    }
}

/// A keyed scenario's table: hasher, shards, key cap.
#[derive(Clone, Copy)]
struct Table {
    name: &'static str,
    keys: u32,
    cap: Option<(usize, WhenFull)>,
    fixed_hasher: bool,
    mode: Mode,
    steps: usize,
}

const TABLES: [Table; 5] = [
    Table {
        name: "",
        keys: 6,
        cap: None,
        fixed_hasher: true,
        mode: Mode::Main,
        steps: 800,
    },
    Table {
        name: "_default_hasher",
        keys: 5,
        cap: None,
        fixed_hasher: false,
        mode: Mode::Main,
        steps: 250,
    },
    Table {
        name: "_cap3_deny",
        keys: 8,
        cap: Some((3, WhenFull::Deny)),
        fixed_hasher: true,
        mode: Mode::Capped,
        steps: 500,
    },
    Table {
        name: "_cap2_allow",
        keys: 8,
        cap: Some((2, WhenFull::AllowUntracked)),
        fixed_hasher: true,
        mode: Mode::Capped,
        steps: 350,
    },
    Table {
        name: "_extreme",
        keys: 4,
        cap: None,
        fixed_hasher: true,
        mode: Mode::Extreme,
        steps: 120,
    },
];

/// The `keyed` family: each algorithm on a table of a few keys (random hot and cold keys),
/// with the default hasher, at a key cap in both `WhenFull` modes, and at the extremes.
pub fn keyed(t: &mut Trace) {
    for which in DIRECT {
        if matches!(which, Which::GcraStartEmpty) {
            // An empty start is a direct limiter's option only.
            continue;
        }
        for table in TABLES {
            if !table.fixed_hasher && !which.primary() {
                // The default hasher changes no decision; once per algorithm is enough.
                continue;
            }
            let steps = which.steps(table.steps);
            let name = format!("keyed/{}{}", which.name(), table.name);
            let seed = seed_of(&name);
            let mut rng = Rng::new(seed);
            let clock = ManualClock::new();
            if table.mode == Mode::Extreme && rng.chance(50) {
                clock.set(MAX_NANOS - rng.below(100 * nanos(which.quota().period())));
            }
            t.scenario(
                &name,
                seed,
                format!(
                    "quota=[{}] keys={} cap={:?} now={}",
                    which.quota(),
                    table.keys,
                    table.cap,
                    clock.now()
                ),
            );
            with_keyed(which, table, &clock, &mut |l| {
                l.run(t, &mut rng, &clock, table, steps)
            });
        }
    }
}

/// A built keyed limiter, its algorithm and hasher erased.
trait KeyedRun {
    fn run(&self, t: &mut Trace, rng: &mut Rng, clock: &ManualClock, table: Table, steps: usize);
}

impl<A, S> KeyedRun for KeyedRateLimiter<u32, A, S>
where
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
    KeyedRateLimiter<u32, A, S>: MaybeBooker,
{
    fn run(&self, t: &mut Trace, rng: &mut Rng, clock: &ManualClock, table: Table, steps: usize) {
        let q = Subject::quota(self);
        Drive {
            lim: self,
            book: self.booker(),
            clock: clock.clone(),
            scale: Scale::of(q),
            quotas: quota_pool(q),
            keys: table.keys,
            mode: table.mode,
        }
        .run(t, rng, steps);
    }
}

fn with_keyed(which: Which, table: Table, clock: &ManualClock, f: &mut dyn FnMut(&dyn KeyedRun)) {
    let mut b = KeyedRateLimiter::<u32>::builder(which.quota()).clock(clock.clone());
    if let Some((cap, when)) = table.cap {
        b = b
            .max_keys(NonZeroUsize::new(cap).expect("a cap above 0"))
            .when_full(when);
    }
    // One macro for both hasher types: the built limiter's type differs with the hasher.
    macro_rules! go {
        ($b:expr_2021) => {
            match which {
                Which::Gcra | Which::GcraBurst1 | Which::GcraBursty | Which::GcraStartEmpty => {
                    f(&$b.build())
                }
                Which::FixedOrigin => f(&kalg($b, FixedWindow::new()).build()),
                Which::FixedEpochAfter => {
                    f(&kalg($b, FixedWindow::epoch_aligned_from(origin_after())).build())
                }
                Which::FixedEpochBefore => {
                    f(&kalg($b, FixedWindow::epoch_aligned_from(origin_before())).build())
                }
                Which::SlidingLog => f(&kalg($b, SlidingLog).build()),
                Which::SlidingWindow4 => f(&kalg($b, SlidingWindow::new(4)).build()),
                Which::SlidingWindow5 => f(&kalg($b, SlidingWindow::new(5)).build()),
                Which::Weighted => f(&kalg($b, WeightedWindow).build()),
            }
        };
    }
    if table.fixed_hasher {
        go!(b.hasher(FixedHasher::default()).shards(4))
    } else {
        go!(b)
    }
}

fn kalg<B: Algorithm, S>(
    b: tollgate::KeyedRateLimiterBuilder<u32, Gcra, S>,
    a: B,
) -> tollgate::KeyedRateLimiterBuilder<u32, B, S>
where
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    b.algorithm(a)
        .expect("the scenario's quota suits its algorithm")
}
