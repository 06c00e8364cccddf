//! Property tests of the window algorithms: random schedules on a `ManualClock`, every call
//! compared with a plain reference model written from the definitions, every
//! `Decision` field included, then the window property each algorithm guarantees checked on
//! the permits the limiter actually granted.
//!
//! The models keep every grant `(time, n)` and answer from the definition, brute force where
//! the limiter computes: `retry_after` is the smallest `t >= 1` at which the request would fit
//! with nothing else admitted, `reset_after` the smallest `t >= 0` at which nothing counts any
//! more (the fixed window: the window's end). Windows are a few ns long so the searches are
//! cheap, and advances often land exactly on window and sub-window boundaries.

use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use tollgate::{
    AcquireError, Algorithm, Decision, FixedWindow, KeyedRateLimiter, ManualClock, Quota,
    QuotaError, RateLimiter, SlidingLog, SlidingWindow, WeightedWindow,
};

#[derive(Clone, Copy, Debug)]
enum Alg {
    /// Windows shifted by `offset` (an epoch-aligned limiter whose clock origin is `offset` ns
    /// after the epoch).
    Fixed {
        offset: u64,
    },
    /// `k` sub-windows.
    Sub {
        k: u64,
    },
    Weighted,
    Log,
}

/// The reference: a list of grants, and the definitions.
struct Model {
    alg: Alg,
    l: u64,
    w: u64,
    /// `(time, n)`; for the sliding window `(stamp, n)`, the stamp being the start of the
    /// grant's sub-window, never before a stamp still held (so stamps stay in order when a
    /// quota change moves the sub-window grid).
    grants: Vec<(u64, u64)>,
}

impl Model {
    fn sum(&self, keep: impl Fn(u64) -> bool) -> u64 {
        self.grants.iter().filter(|g| keep(g.0)).map(|g| g.1).sum()
    }

    /// `(previous, current)` fixed-window counts at `now` (for the fixed and weighted models).
    fn fixed_counts(&self, now: u64, offset: u64) -> (u64, u64) {
        let k = (now + offset) / self.w;
        let window = |t: u64| (t + offset) / self.w;
        (
            self.sum(|t| window(t) + 1 == k),
            self.sum(|t| window(t) == k),
        )
    }

    /// What counts at `now`, in units of `W` for the weighted model and permits otherwise.
    fn used(&self, now: u64) -> u128 {
        let w = self.w;
        match self.alg {
            Alg::Fixed { offset } => u128::from(self.fixed_counts(now, offset).1),
            // The log: the grants of (now - W, now]. The sliding window: the sub-windows
            // starting in (now - W, now], i.e. the current one and the k - 1 before it.
            Alg::Sub { .. } | Alg::Log => u128::from(self.sum(|s| s + w > now)),
            Alg::Weighted => {
                let (prev, cur) = self.fixed_counts(now, 0);
                let e = now % w;
                u128::from(prev) * u128::from(w - e) + u128::from(cur) * u128::from(w)
            }
        }
    }

    fn scale(&self) -> u128 {
        match self.alg {
            Alg::Weighted => u128::from(self.w),
            _ => 1,
        }
    }

    fn fits(&self, now: u64, n: u64) -> bool {
        self.used(now) + u128::from(n) * self.scale() <= u128::from(self.l) * self.scale()
    }

    fn remaining(&self, now: u64) -> u64 {
        let budget = u128::from(self.l) * self.scale();
        (budget.saturating_sub(self.used(now)) / self.scale()) as u64
    }

    fn reset_after(&self, now: u64) -> u64 {
        match self.alg {
            Alg::Fixed { offset } => ((now + offset) / self.w + 1) * self.w - offset - now,
            _ => (0..=3 * self.w).find(|&t| self.used(now + t) == 0).unwrap(),
        }
    }

    fn retry_after(&self, now: u64, n: u64) -> u64 {
        (1..=3 * self.w).find(|&t| self.fits(now + t, n)).unwrap()
    }

    /// A check of `n` at `now`, recording it if granted.
    fn check(&mut self, now: u64, n: u64) -> Decision {
        let (allowed, retry) = if n == 0 {
            (true, None)
        } else if n > self.l {
            (false, None)
        } else if self.fits(now, n) {
            let stamp = match self.alg {
                Alg::Sub { k } => {
                    let slot = now - now % (self.w / k);
                    self.grants.last().map_or(slot, |g| slot.max(g.0))
                }
                _ => now,
            };
            self.grants.push((stamp, n));
            (true, None)
        } else {
            (false, Some(self.retry_after(now, n)))
        };
        decision(
            allowed,
            self.l,
            self.remaining(now),
            retry,
            self.reset_after(now),
        )
    }
}

impl Model {
    /// `set_quota(l per w)` at `now`, for the sliding window and log (`docs/guide/algorithms.md`,
    /// "Quota changes and per-call quotas"): the grants that had left the window in force at the change are
    /// gone for good; the others are kept and judged under the new limit and window.
    fn set_quota(&mut self, now: u64, l: u64, w: u64) {
        assert!(
            matches!(self.alg, Alg::Sub { .. } | Alg::Log),
            "the sliding models only"
        );
        let old = self.w;
        self.grants.retain(|g| g.0 + old > now);
        (self.l, self.w) = (l, w);
    }

    /// The stamp granularity: the sub-window, or the window for the others.
    fn granularity(&self) -> u64 {
        match self.alg {
            Alg::Sub { k } => self.w / k,
            Alg::Log => 1,
            _ => self.w,
        }
    }
}

fn decision(allowed: bool, limit: u64, remaining: u64, retry: Option<u64>, reset: u64) -> Decision {
    // Decision is non_exhaustive: build it the way a user would compare it, field by field.
    let mut d = RateLimiter::builder(Quota::per_second(1).unwrap())
        .clock(ManualClock::new())
        .build()
        .peek();
    d.allowed = allowed;
    d.limit = limit;
    d.remaining = remaining;
    d.retry_after = retry.map(Duration::from_nanos);
    d.reset_after = Duration::from_nanos(reset);
    d.refused_by = (!allowed).then_some(tollgate::RefusedBy::Quota);
    d
}

#[derive(Clone, Copy, Debug)]
enum Size {
    Zero,
    One,
    Limit,
    OverLimit,
    Any(u64),
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Try(Size),
    Check(Size),
    Peek,
    /// Blocking acquire (the manual clock's sleep advances it).
    Acquire(Size),
    /// `try_acquire_n_for(n, timeout)`.
    AcquireFor(Size, u64),
    Advance(u64),
    /// To the next multiple of this many ns: window and sub-window boundaries exactly.
    ToBoundary(bool),
    /// `set_quota` to `L` per this many ns (sub-windows for the sliding window), both at least
    /// 1 and adjusted to a valid quota.
    SetQuota(u64, u64),
    /// `sweep_now` on the keyed limiter that is also looked at.
    Sweep,
}

fn size() -> impl Strategy<Value = Size> {
    prop_oneof![
        1 => Just(Size::Zero),
        4 => Just(Size::One),
        2 => Just(Size::Limit),
        1 => Just(Size::OverLimit),
        3 => (0u64..8).prop_map(Size::Any),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => size().prop_map(Op::Try),
        3 => size().prop_map(Op::Check),
        1 => Just(Op::Peek),
        1 => size().prop_map(Op::Acquire),
        1 => (size(), 0u64..30).prop_map(|(s, t)| Op::AcquireFor(s, t)),
        3 => (0u64..12).prop_map(Op::Advance),
        2 => any::<bool>().prop_map(Op::ToBoundary),
    ]
}

fn n_of(s: Size, l: u64) -> u64 {
    match s {
        Size::Zero => 0,
        Size::One => 1,
        Size::Limit => l,
        Size::OverLimit => l + 1,
        Size::Any(n) => n % (l + 2),
    }
}

fn limiter<A: Algorithm>(q: Quota, clock: &ManualClock, alg: A) -> RateLimiter<A> {
    RateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build()
}

fn keyed<A: Algorithm>(q: Quota, clock: &ManualClock, alg: A) -> KeyedRateLimiter<u8, A> {
    KeyedRateLimiter::builder(q)
        .clock(clock.clone())
        .algorithm(alg)
        .unwrap()
        .build()
}

/// The limiters a schedule runs on, each on its own clock (a waiting method sleeps on its
/// own; the clocks must still agree after every step): a direct one, a keyed one (key 0)
/// that is also peeked before every step and swept at `Op::Sweep`, and a keyed one that only
/// gets the schedule's own calls. A look and a sweep take nothing, so all three must decide
/// alike, and like the model.
struct Subjects<A: Algorithm> {
    direct: RateLimiter<A>,
    touched: KeyedRateLimiter<u8, A>,
    untouched: KeyedRateLimiter<u8, A>,
    clocks: [ManualClock; 3],
}

impl<A: Algorithm + Copy> Subjects<A> {
    fn new(q: Quota, alg: A) -> Self {
        let clocks = [ManualClock::new(), ManualClock::new(), ManualClock::new()];
        Subjects {
            direct: limiter(q, &clocks[0], alg),
            touched: keyed(q, &clocks[1], alg),
            untouched: keyed(q, &clocks[2], alg),
            clocks,
        }
    }

    /// A call on each limiter: `direct` on the direct one, `keyed` on key 0 of the others.
    fn each<R>(
        &self,
        direct: impl Fn(&RateLimiter<A>) -> R,
        keyed: impl Fn(&KeyedRateLimiter<u8, A>) -> R,
    ) -> [R; 3] {
        [
            direct(&self.direct),
            keyed(&self.touched),
            keyed(&self.untouched),
        ]
    }

    fn now(&self) -> Result<u64, TestCaseError> {
        let [a, b, c] = self.clocks.each_ref().map(tollgate::Clock::now);
        prop_assert!(a == b && b == c, "the clocks parted: {} {} {}", a, b, c);
        Ok(a)
    }
}

/// Runs `ops` on the limiters and the model side by side; returns the grants the direct
/// limiter made.
fn run<A: Algorithm + Copy>(
    alg: A,
    model_alg: Alg,
    l: u64,
    w: u64,
    ops: &[Op],
) -> Result<Vec<(u64, u64)>, TestCaseError> {
    let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
    let lims = Subjects::new(q, alg);
    let mut model = Model {
        alg: model_alg,
        l,
        w,
        grants: Vec::new(),
    };
    let mut granted = Vec::new();
    for (i, &op) in ops.iter().enumerate() {
        let t = lims.now()?;
        let l = model.l;
        // The extra look: it must see what the model sees, and change nothing.
        prop_assert_eq!(
            lims.touched.peek(&0),
            model.check(t, 0),
            "look before op {}",
            i
        );
        match op {
            Op::Try(s) => {
                let n = n_of(s, l);
                let want = model.check(t, n);
                let want = if want.allowed {
                    Ok(())
                } else if let Some(r) = want.retry_after {
                    Err(AcquireError::RateLimited { retry_after: r })
                } else {
                    Err(AcquireError::ExceedsBurst {
                        requested: n,
                        burst: l,
                    })
                };
                for got in lims.each(|d| d.try_acquire_n(n), |k| k.try_acquire_n(&0, n)) {
                    prop_assert_eq!(got, want, "op {} {:?} at {}", i, op, t);
                }
                if want.is_ok() {
                    granted.push((t, n));
                }
            }
            Op::Check(s) => {
                let n = n_of(s, l);
                let want = model.check(t, n);
                for got in lims.each(|d| d.check_n(n), |k| k.check_n(&0, n)) {
                    prop_assert_eq!(got, want, "op {} {:?} at {}", i, op, t);
                }
                if want.allowed {
                    granted.push((t, n));
                }
            }
            Op::Peek => {
                let want = model.check(t, 0);
                prop_assert_eq!(lims.direct.peek(), want, "op {} {:?} at {}", i, op, t);
                prop_assert_eq!(lims.touched.peek(&0), want, "op {} {:?} at {}", i, op, t);
            }
            Op::Acquire(s) | Op::AcquireFor(s, _) => {
                let n = n_of(s, l);
                let timeout = match op {
                    Op::AcquireFor(_, d) => Some(Duration::from_nanos(d)),
                    _ => None,
                };
                // The model: wait until it fits (nothing else is admitted meanwhile).
                let want = if n > l {
                    Err(AcquireError::ExceedsBurst {
                        requested: n,
                        burst: l,
                    })
                } else {
                    let wait = if n == 0 || model.fits(t, n) {
                        0
                    } else {
                        model.retry_after(t, n)
                    };
                    let wait = Duration::from_nanos(wait);
                    match timeout {
                        Some(d) if wait > d => Err(AcquireError::RateLimited { retry_after: wait }),
                        _ => {
                            model.check(t + wait.as_nanos() as u64, n);
                            Ok(wait)
                        }
                    }
                };
                let got = match timeout {
                    Some(d) => lims.each(
                        |x| x.try_acquire_n_for(n, d),
                        |k| k.try_acquire_n_for(&0, n, d),
                    ),
                    None => lims.each(|x| x.acquire_n(n), |k| k.acquire_n(&0, n)),
                };
                for got in got {
                    prop_assert_eq!(got, want, "op {} {:?} at {}", i, op, t);
                }
                let after = lims.now()?;
                if let Ok(waited) = want {
                    prop_assert_eq!(after, t + waited.as_nanos() as u64);
                    granted.push((after, n));
                } else {
                    prop_assert_eq!(after, t, "a refused wait never sleeps");
                }
            }
            Op::Advance(d) => lims.clocks.iter().for_each(|c| c.advance_nanos(d)),
            Op::ToBoundary(whole) => {
                let unit = if whole { model.w } else { model.granularity() };
                let offset = match model_alg {
                    Alg::Fixed { offset } => offset,
                    _ => 0,
                };
                let to = (t + offset) / unit * unit + unit - offset;
                for c in &lims.clocks {
                    c.set(to);
                }
            }
            Op::SetQuota(l, units) => {
                let (l, w) = match model_alg {
                    // Whole sub-windows of at least L / k ns (at most one permit per ns).
                    Alg::Sub { k } => (l, k * units.max(l.div_ceil(k))),
                    _ => (l, units.max(l)),
                };
                let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
                for got in lims.each(|d| d.set_quota(q), |k| k.set_quota(q)) {
                    prop_assert_eq!(got, Ok(()));
                }
                model.set_quota(t, l, w);
            }
            Op::Sweep => {
                lims.touched.sweep_now();
            }
        }
    }
    granted.retain(|g| g.1 > 0);
    Ok(granted)
}

/// At most `l` permits in each window `[start, start + w)` for every `start` in `starts`.
fn at_most_per_window(
    grants: &[(u64, u64)],
    l: u64,
    w: u64,
    starts: impl Iterator<Item = u64>,
) -> Result<(), TestCaseError> {
    for s in starts {
        let sum: u64 = grants
            .iter()
            .filter(|g| g.0 >= s && g.0 < s + w)
            .map(|g| g.1)
            .sum();
        prop_assert!(
            sum <= l,
            "{} permits in [{}, {}): {:?}",
            sum,
            s,
            s + w,
            grants
        );
    }
    Ok(())
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..80)
}

/// Schedules with quota changes (random limits and windows, wider and narrower) and sweeps.
fn changing_ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        12 => op(),
        2 => ((1u64..6), (1u64..25)).prop_map(|(l, w)| Op::SetQuota(l, w)),
        2 => Just(Op::Sweep),
    ];
    prop::collection::vec(op, 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fixed_window_matches_its_definition(
        l in 1u64..6, w in 1u64..30, origin in 0u64..100, ops in ops()
    ) {
        // Below one permit per ns (at exactly one, a shifted grid may not fit the word).
        let w = w.max(l + 1);
        let alg = FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_nanos(origin));
        let offset = origin % w;
        let granted = run(alg, Alg::Fixed { offset }, l, w, &ops)?;
        // At most L in every window [k*W - offset, (k+1)*W - offset).
        let mut per_window = std::collections::BTreeMap::new();
        for &(t, n) in &granted {
            *per_window.entry((t + offset) / w).or_insert(0) += n;
        }
        prop_assert!(per_window.values().all(|&sum| sum <= l), "{:?}", per_window);
    }

    #[test]
    fn sliding_window_matches_its_definition(
        l in 1u64..6, k in 2u64..7, g in 1u64..6, ops in ops()
    ) {
        let g = g.max(l.div_ceil(k)); // W = k*g, at least L
        let w = k * g;
        let granted = run(SlidingWindow::new(k as u32), Alg::Sub { k }, l, w, &ops)?;
        // At most L in every window of length W starting on a sub-window boundary, and in
        // every span of W - g wherever it starts.
        let last = granted.last().map_or(0, |gr| gr.0);
        at_most_per_window(&granted, l, w, (0..=last / g).map(|j| j * g))?;
        at_most_per_window(&granted, l, w - g, 0..=last)?;
    }

    #[test]
    fn weighted_window_matches_its_definition(l in 1u64..6, w in 1u64..30, ops in ops()) {
        let w = w.max(l);
        let granted = run(WeightedWindow, Alg::Weighted, l, w, &ops)?;
        // At most L in every fixed window, at most 2L in any window of length W.
        let last = granted.last().map_or(0, |g| g.0);
        at_most_per_window(&granted, l, w, (0..=last / w).map(|k| k * w))?;
        at_most_per_window(&granted, 2 * l, w, 0..=last)?;
    }

    #[test]
    fn sliding_log_matches_its_definition(l in 1u64..6, w in 1u64..30, ops in ops()) {
        let w = w.max(l);
        let granted = run(SlidingLog, Alg::Log, l, w, &ops)?;
        // At most L in every window of length W, wherever it starts.
        let last = granted.last().map_or(0, |g| g.0);
        at_most_per_window(&granted, l, w, 0..=last)?;
    }

    /// Quota changes on the sliding window and log follow the guide's rule (the
    /// model's `set_quota`), every `Decision` field; a limiter that is looked at before every
    /// call and swept at random decides exactly like one that is not.
    #[test]
    fn sliding_window_quota_changes_follow_the_rule(
        l in 1u64..6, k in 2u64..7, g in 1u64..6, ops in changing_ops()
    ) {
        let w = k * g.max(l.div_ceil(k));
        run(SlidingWindow::new(k as u32), Alg::Sub { k }, l, w, &ops)?;
    }

    #[test]
    fn sliding_log_quota_changes_follow_the_rule(l in 1u64..6, w in 1u64..30, ops in changing_ops()) {
        run(SlidingLog, Alg::Log, l, w.max(l), &ops)?;
    }
}

/// 1 per 2 ns, one grant at 0; at 2 (the grant has left the window) `set_quota`
/// to 1 per 1 s. The grant stays gone (`docs/guide/algorithms.md`, "Quota changes and per-call quotas"): a peek
/// says remaining 1, and says the same whether or not the key was looked at before the change.
fn widen_after_expiry<A: Algorithm + Copy>(alg: A) {
    let old = Quota::new(1, Duration::from_nanos(2)).unwrap();
    let new = Quota::new(1, Duration::from_secs(1)).unwrap();
    let clock = ManualClock::new();
    let looked = limiter(old, &clock, alg);
    let untouched = limiter(old, &clock, alg);
    assert!(looked.try_acquire() && untouched.try_acquire());
    clock.set(2);
    let _ = looked.peek();
    looked.set_quota(new).unwrap();
    untouched.set_quota(new).unwrap();
    let d = untouched.peek();
    assert_eq!(
        d,
        decision(true, 1, 1, None, 0),
        "{alg:?}: an expired grant came back"
    );
    assert_eq!(looked.peek(), d, "{alg:?}: a peek changed a later decision");
    // The permit is there to take.
    assert!(untouched.try_acquire() && looked.try_acquire(), "{alg:?}");
}

#[test]
fn a_wider_window_does_not_revive_expired_grants() {
    widen_after_expiry(SlidingLog);
    widen_after_expiry(SlidingWindow::new(2));
}

// Quota changes on the fixed window.

/// The fixed window under `set_quota`, from the guide's rule (`docs/guide/algorithms.md`): the count of the window current
/// at a change is carried into the new grid's window holding the change, and never lowered: a
/// count that reaches what the new window's word holds (or filled the old one's) is carried as
/// full, refusing until that window ends, and stays full if carried again. Grants after the
/// change count in their own windows. Windows are epoch-aligned for a clock whose origin is
/// `origin` ns after the epoch (offset `origin % w`).
struct CarryModel {
    origin: u64,
    l: u64,
    w: u64,
    /// The window the last change carried a count into, and the count (`None`: full).
    carried: Option<(u64, Option<u64>)>,
    /// Grants since the last change.
    grants: Vec<(u64, u64)>,
}

/// The largest count a fixed window's word holds (its module docs: bit 63 is the generation,
/// the window index takes the bits the last window up to `MAX_NANOS` needs, the count the
/// rest).
fn word_capacity(w: u64, offset: u64) -> u64 {
    let max_index = (tollgate::MAX_NANOS + offset) / w;
    let index_bits = u64::BITS - max_index.leading_zeros();
    (1 << (63 - index_bits)) - 1
}

impl CarryModel {
    fn offset(&self) -> u64 {
        self.origin % self.w
    }

    fn window(&self, t: u64) -> u64 {
        (t + self.offset()) / self.w
    }

    /// What counts in `now`'s window (`None`: full).
    fn count(&self, now: u64) -> Option<u64> {
        let k = self.window(now);
        let granted: u64 = self
            .grants
            .iter()
            .filter(|g| self.window(g.0) == k)
            .map(|g| g.1)
            .sum();
        match self.carried {
            Some((ck, None)) if ck == k => None,
            Some((ck, Some(c))) if ck == k => Some(c + granted),
            _ => Some(granted),
        }
    }

    /// A check of `n` at `now` under the limit `l` (the limiter's, or a call's own).
    fn check(&mut self, now: u64, n: u64, l: u64) -> Decision {
        let end = (self.window(now) + 1) * self.w - self.offset();
        let used = self.count(now).unwrap_or(u64::MAX);
        let fits = n <= l && used.saturating_add(n) <= l;
        if fits && n > 0 {
            self.grants.push((now, n));
        }
        let used = if fits { used + n } else { used };
        let retry = (n > 0 && !fits && n <= l).then_some(end - now);
        decision(n == 0 || fits, l, l.saturating_sub(used), retry, end - now)
    }

    /// `check_n_with(n, count per period)`: the call's count is the limit on these windows, or
    /// the call is refused if the word cannot count to it (`None`).
    fn check_n_with(&mut self, now: u64, n: u64, count: u64) -> Option<Decision> {
        (count <= word_capacity(self.w, self.offset())).then(|| self.check(now, n, count))
    }

    /// `false`: the quota is refused (its limit does not fit beside its windows' index).
    fn set_quota(&mut self, now: u64, l: u64, w: u64) -> bool {
        let cap_new = word_capacity(w, self.origin % w);
        if l > cap_new {
            return false;
        }
        let cap_old = word_capacity(self.w, self.offset());
        let carried = match self.count(now) {
            Some(0) => None,
            Some(c) if c < cap_old.min(cap_new) => Some(Some(c)),
            _ => Some(None),
        };
        (self.l, self.w) = (l, w);
        self.grants.clear();
        self.carried = carried.map(|c| (self.window(now), c));
        true
    }
}

#[derive(Clone, Copy, Debug)]
enum QOp {
    Try(u64),
    Check(u64),
    Peek,
    /// `check_n_with(n, count per period)`.
    CheckWith(u64, u64, u64),
    Advance(u64),
    ToBoundary,
    /// `count` per `period` ns (`count <= period`, scaled down if needed).
    SetQuota(u64, u64),
    /// The keyed limiter only.
    Sweep,
}

fn qop() -> impl Strategy<Value = QOp> {
    prop_oneof![
        4 => (0u64..80).prop_map(QOp::Try),
        3 => (0u64..80).prop_map(QOp::Check),
        1 => Just(QOp::Peek),
        2 => ((0u64..140), (1u64..=130), (1u64..200))
            .prop_map(|(n, c, p)| QOp::CheckWith(n, c, p)),
        3 => (0u64..40).prop_map(QOp::Advance),
        1 => Just(QOp::ToBoundary),
        3 => ((1u64..=64), (1u64..=64)).prop_map(|(l, w)| QOp::SetQuota(l, w)),
        1 => Just(QOp::Sweep),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A direct limiter and a keyed one (swept at random) against [`CarryModel`], every
    /// `Decision` field, over random acquisitions, per-call quotas and quota changes between
    /// windows of 1 to 64 ns (narrow words: a 4 ns window's count holds 7 at most). Equal
    /// decisions mean no window ever admits more than the rule allows (nor less), and a
    /// per-call count the word cannot hold is refused, not capped.
    #[test]
    fn fixed_window_quota_changes_carry_counts_whole(
        l in 1u64..=64,
        w in 1u64..=64,
        origin in prop_oneof![Just(0u64), 1u64..100],
        ops in prop::collection::vec(qop(), 1..60),
    ) {
        let w = w.max(l + 1);
        let alg = if origin == 0 {
            FixedWindow::new()
        } else {
            FixedWindow::epoch_aligned_from(UNIX_EPOCH + Duration::from_nanos(origin))
        };
        let clock = ManualClock::new();
        let q = Quota::new(l, Duration::from_nanos(w)).unwrap();
        let direct = limiter(q, &clock, alg);
        let keyed = tollgate::KeyedRateLimiter::<u8>::builder(q)
            .clock(clock.clone())
            .algorithm(alg)
            .unwrap()
            .build();
        let mut model = CarryModel { origin, l, w, carried: None, grants: Vec::new() };
        for (i, &op) in ops.iter().enumerate() {
            let t = tollgate::Clock::now(&clock);
            match op {
                QOp::Try(n) => {
                    let n = n % (model.l + 2);
                    let want = model.check(t, n, model.l);
                    let want = if want.allowed {
                        Ok(())
                    } else if let Some(r) = want.retry_after {
                        Err(AcquireError::RateLimited { retry_after: r })
                    } else {
                        Err(AcquireError::ExceedsBurst { requested: n, burst: model.l })
                    };
                    prop_assert_eq!(direct.try_acquire_n(n), want, "op {} {:?} at {}", i, op, t);
                    prop_assert_eq!(keyed.try_acquire_n(&0, n), want, "keyed: op {} {:?} at {}", i, op, t);
                }
                QOp::Check(_) | QOp::Peek => {
                    let n = if let QOp::Check(n) = op { n % (model.l + 2) } else { 0 };
                    let want = model.check(t, n, model.l);
                    prop_assert_eq!(direct.check_n(n), want, "op {} {:?} at {}", i, op, t);
                    prop_assert_eq!(keyed.check_n(&0, n), want, "keyed: op {} {:?} at {}", i, op, t);
                }
                QOp::CheckWith(n, count, period) => {
                    let n = n % (count + 2);
                    let q = Quota::new(count, Duration::from_nanos(period.max(count))).unwrap();
                    let want = model.check_n_with(t, n, count).ok_or(());
                    let refused = |e: QuotaError| matches!(e, QuotaError::Unsupported(_));
                    let got = direct.check_n_with(n, q).map_err(refused);
                    prop_assert_eq!(got, want.map_err(|()| true), "op {} {:?} at {}", i, op, t);
                    let got = keyed.check_n_with(&0, n, q).map_err(refused);
                    prop_assert_eq!(got, want.map_err(|()| true), "keyed: op {} {:?} at {}", i, op, t);
                }
                QOp::Advance(d) => clock.advance_nanos(d),
                QOp::ToBoundary => {
                    let (w, o) = (model.w, model.offset());
                    clock.set((t + o) / w * w + w - o);
                }
                QOp::SetQuota(nl, nw) => {
                    let nl = nl.min(nw);
                    let q = Quota::new(nl, Duration::from_nanos(nw)).unwrap();
                    let ok = model.set_quota(t, nl, nw);
                    prop_assert_eq!(direct.set_quota(q).is_ok(), ok, "op {} {:?} at {}", i, op, t);
                    prop_assert_eq!(keyed.set_quota(q).is_ok(), ok, "keyed: op {} {:?}", i, op);
                }
                QOp::Sweep => {
                    keyed.sweep_now();
                }
            }
        }
    }
}

/// `check_with` under a quota the limiter can run decides exactly as a limiter built with the
/// call's count on the same windows (the call's period plays no part), every `Decision` field,
/// on shared state: the call's count is the limit, never another.
fn per_call_is_its_count<A: Algorithm + Copy>(
    alg: A,
    l: u64,
    w: u64,
    call: u64,
    period: u64,
    steps: &[(u64, u64)],
) -> Result<(), TestCaseError> {
    let clock = ManualClock::new();
    let with = limiter(Quota::new(l, Duration::from_nanos(w)).unwrap(), &clock, alg);
    let twin = limiter(
        Quota::new(call, Duration::from_nanos(w)).unwrap(),
        &clock,
        alg,
    );
    let q = Quota::new(call, Duration::from_nanos(period.max(call))).unwrap();
    for (i, &(advance, n)) in steps.iter().enumerate() {
        clock.advance_nanos(advance);
        let n = n % (call + 2);
        prop_assert_eq!(with.check_n_with(n, q), Ok(twin.check_n(n)), "step {}", i);
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..12, 0u64..20), 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn per_call_quotas_take_their_count_as_the_limit(
        l in 1u64..6, call in 1u64..12, w in 1u64..30, period in 1u64..100, steps in steps()
    ) {
        let w = w.max(l).max(call);
        per_call_is_its_count(FixedWindow::new(), l, w, call, period, &steps)?;
        per_call_is_its_count(WeightedWindow, l, w, call, period, &steps)?;
        per_call_is_its_count(SlidingLog, l, w, call, period, &steps)?;
        let g = w.div_ceil(3);
        per_call_is_its_count(SlidingWindow::new(3), l, 3 * g, call, period, &steps)?;
    }
}
