//! Property tests: random sequences of try / check / reserve / cancel / advance on a
//! `ManualClock`, compared step by step with a plain reference model, and checked against the
//! GCRA guarantee that over any window `[t1, t2]` the permits admitted satisfy
//! `sum(n) * T <= max(tau, n_max * T) + (t2 - t1)`: the burst plus the elapsed time, where a
//! reservation larger than the burst (allowed for bandwidth shaping: it waits for the excess
//! first) counts as its own burst.
//!
//! The reference keeps the schedule as it is defined: the list of stretches `(s, s + n*T]`
//! that live grants and reservations occupy. A request of `n` takes the lowest free stretch
//! at or after `now` (a check only if it ends by `now + tau`; a reservation wherever, ready at
//! `max(now, end - tau)`), and a cancel simply removes its stretch. That is "every cancelled
//! reservation's capacity is usable by later arrivals, in any order" written down directly;
//! the limiter does it with one word, a tail and holes.
//!
//! This test is what showed the first design's partial refund rule unsafe: with it, cancels of
//! non-latest reservations let 10 permits through within one interval at burst 5
//! (`docs/design.md`, "3. Reservations, waiting, cancel").

use std::time::Duration;

use proptest::prelude::*;
use tollgate::{AcquireError, ManualClock, Quota, RateLimiter, Reservation};

#[derive(Clone, Debug)]
enum Op {
    TryAcquire(u64),
    Check(u64),
    Reserve(u64),
    TimeoutAcquire(u64, u64),
    Cancel(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..8).prop_map(Op::TryAcquire),
        2 => (0u64..8).prop_map(Op::Check),
        3 => (0u64..12).prop_map(Op::Reserve),
        1 => ((0u64..8), (0u64..400)).prop_map(|(n, t)| Op::TimeoutAcquire(n, t)),
        3 => (0usize..16).prop_map(Op::Cancel),
        3 => (0u64..300).prop_map(Op::Advance),
    ]
}

/// The reference: the schedule as a list of occupied stretches, in u128.
struct Model {
    /// Occupied stretches `(start, end]`, by id (`None` once cancelled).
    taken: Vec<Option<(u128, u128)>>,
    t: u128,
    b: u128,
}

impl Model {
    fn tau(&self) -> u128 {
        self.t * self.b
    }

    /// The end of the schedule: the last occupied position (0: nothing ever taken).
    fn tail(&self) -> u128 {
        self.taken.iter().flatten().map(|s| s.1).max().unwrap_or(0)
    }

    /// Whether `(s, s + len]` overlaps no occupied stretch.
    fn free(&self, s: u128, len: u128) -> bool {
        self.taken
            .iter()
            .flatten()
            .all(|&(a, e)| e <= s || a >= s + len)
    }

    /// The lowest `s >= now` with `(s, s + len]` free: `now` itself, or the end of some
    /// stretch.
    fn lowest_free(&self, now: u128, len: u128) -> u128 {
        std::iter::once(now)
            .chain(
                self.taken
                    .iter()
                    .flatten()
                    .map(|s| s.1)
                    .filter(|&e| e >= now),
            )
            .filter(|&s| self.free(s, len))
            .min()
            .expect("beyond the tail everything is free")
    }

    /// Whether a check of `len` at `at` could be placed (lowest free stretch within the window).
    fn fits_at(&self, at: u128, len: u128) -> bool {
        self.lowest_free(at, len) + len <= at + self.tau()
    }

    /// Whole intervals free in `[now, now + tau]`, at most the burst.
    fn remaining(&self, now: u128) -> u128 {
        let horizon = now + self.tau();
        let mut edges: Vec<(u128, u128)> = self
            .taken
            .iter()
            .flatten()
            .filter(|s| s.1 > now && s.0 < horizon)
            .copied()
            .collect();
        edges.sort_unstable();
        let (mut at, mut slots) = (now, 0);
        for (a, e) in edges {
            slots += a.saturating_sub(at) / self.t;
            at = at.max(e);
        }
        slots += horizon.saturating_sub(at) / self.t;
        slots.min(self.b)
    }

    /// (allowed, remaining, retry_after, reset_after); takes the stretch when allowed.
    fn check(&mut self, now: u128, n: u128) -> (bool, u128, Option<u128>, u128) {
        let reset = |m: &Model| m.tail().max(now) - now;
        if n == 0 || n > self.b {
            return (n == 0, self.remaining(now), None, reset(self));
        }
        let len = n * self.t;
        if self.fits_at(now, len) {
            let s = self.lowest_free(now, len);
            self.taken.push(Some((s, s + len)));
            return (true, self.remaining(now), None, reset(self));
        }
        // The earliest time it fits: `now`, or when the window's end reaches a free stretch's
        // start far enough (`start + len - tau`); checked from the definition at each.
        let retry = std::iter::once(now)
            .chain(
                self.taken
                    .iter()
                    .flatten()
                    .map(|s| (s.1 + len).saturating_sub(self.tau())),
            )
            .filter(|&at| at >= now && self.fits_at(at, len))
            .min()
            .expect("past the tail it always fits");
        (false, self.remaining(now), Some(retry - now), reset(self))
    }

    /// Reserve: the lowest free stretch; returns (id, ready_at).
    fn reserve(&mut self, now: u128, n: u128) -> (Option<usize>, u128) {
        if n == 0 {
            return (None, now);
        }
        let len = n * self.t;
        let s = self.lowest_free(now, len);
        self.taken.push(Some((s, s + len)));
        (
            Some(self.taken.len() - 1),
            (s + len).saturating_sub(self.tau()).max(now),
        )
    }

    fn cancel(&mut self, id: Option<usize>) {
        if let Some(id) = id {
            self.taken[id] = None;
        }
    }
}

/// A reservation not yet cancelled: the limiter's, the model's stretch id, and its index among
/// the admitted events.
type Live<'a> = (Reservation<'a>, Option<usize>, Option<usize>);

/// Permits used at a time (the call time for try, the ready time for reservations).
struct Admitted {
    at: u128,
    n: u128,
}

fn assert_window_bound(events: &[Admitted], t: u128, tau: u128) {
    for a in events {
        for b in events {
            if b.at < a.at {
                continue;
            }
            let window = events.iter().filter(|e| e.at >= a.at && e.at <= b.at);
            let sum: u128 = window.clone().map(|e| e.n).sum();
            let burst = window.map(|e| e.n * t).max().unwrap_or(0).max(tau);
            assert!(
                sum * t <= burst + (b.at - a.at),
                "{sum} permits admitted in [{}, {}] with T={t}, tau={tau}",
                a.at,
                b.at
            );
        }
    }
}

proptest! {
    // 1024 cases by default; PROPTEST_CASES raises it for a soak run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1024),
        ..ProptestConfig::default()
    })]

    #[test]
    fn limiter_matches_reference_and_never_over_admits(
        t in 1u64..100,
        b in 1u64..6,
        start in 0u64..1_000,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let clock = ManualClock::new();
        clock.set(start);
        let quota = Quota::from_interval(Duration::from_nanos(t)).unwrap().with_burst(b).unwrap();
        let limiter = RateLimiter::builder(quota).clock(clock.clone()).build();
        let mut model = Model { taken: Vec::new(), t: t.into(), b: b.into() };
        // Live reservations with their model twin and their index among admitted events.
        let mut live: Vec<Live<'_>> = Vec::new();
        let mut admitted: Vec<Option<Admitted>> = Vec::new();

        for op in ops {
            let now = u128::from(tollgate::Clock::now(&clock));
            match op {
                Op::TryAcquire(n) => {
                    let (ok, _, retry, _) = model.check(now, n.into());
                    let got = limiter.try_acquire_n(n);
                    match (got, ok) {
                        (Ok(()), true) => {}
                        (Err(AcquireError::RateLimited { retry_after }), false) => {
                            prop_assert_eq!(Some(retry_after.as_nanos()), retry);
                        }
                        (Err(AcquireError::ExceedsBurst { requested, burst }), false) => {
                            prop_assert!(retry.is_none() && requested == n && burst == b);
                        }
                        (got, ok) => prop_assert!(false, "limiter {:?} vs model {}", got, ok),
                    }
                    if ok && n > 0 {
                        admitted.push(Some(Admitted { at: now, n: n.into() }));
                    }
                }
                Op::Check(n) => {
                    let (ok, remaining, retry, reset) = model.check(now, n.into());
                    let d = limiter.check_n(n);
                    prop_assert_eq!(d.allowed, ok);
                    prop_assert_eq!(u128::from(d.remaining), remaining);
                    prop_assert_eq!(d.retry_after.map(|r| r.as_nanos()), retry);
                    prop_assert_eq!(d.reset_after.as_nanos(), reset);
                    prop_assert_eq!(d.limit, b);
                    if ok && n > 0 {
                        admitted.push(Some(Admitted { at: now, n: n.into() }));
                    }
                }
                Op::Reserve(n) => {
                    let (id, ready) = model.reserve(now, n.into());
                    let r = limiter.reserve_n(n).unwrap();
                    prop_assert_eq!(u128::from(r.ready_at()), ready);
                    prop_assert_eq!(r.delay().as_nanos(), ready - now);
                    let slot = (n > 0).then(|| {
                        admitted.push(Some(Admitted { at: ready, n: n.into() }));
                        admitted.len() - 1
                    });
                    live.push((r, id, slot));
                }
                Op::TimeoutAcquire(n, timeout) => {
                    // The blocking call sleeps on the manual clock, which advances it.
                    let (id, ready_at) = model.reserve(now, n.into());
                    let wait = ready_at - now;
                    let fits = wait <= u128::from(timeout);
                    if !fits {
                        model.cancel(id);
                        model.taken.pop();
                    }
                    match limiter.try_acquire_n_for(n, Duration::from_nanos(timeout)) {
                        Ok(waited) => {
                            prop_assert!(fits);
                            prop_assert_eq!(waited.as_nanos(), wait);
                            if n > 0 {
                                admitted.push(Some(Admitted { at: ready_at.max(now), n: n.into() }));
                            }
                        }
                        Err(AcquireError::RateLimited { retry_after }) => {
                            prop_assert!(!fits);
                            prop_assert_eq!(retry_after.as_nanos(), wait);
                        }
                        Err(e) => prop_assert!(false, "unexpected {:?}", e),
                    }
                }
                Op::Cancel(i) => {
                    if !live.is_empty() {
                        let (r, id, slot) = live.remove(i % live.len());
                        model.cancel(id);
                        r.cancel();
                        // A cancelled reservation's permits are not used.
                        if let Some(s) = slot {
                            admitted[s] = None;
                        }
                    }
                }
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
            }
            let p = limiter.peek();
            let now = u128::from(tollgate::Clock::now(&clock));
            prop_assert_eq!(p.reset_after.as_nanos(), model.tail().max(now) - now, "stored TAT differs");
            prop_assert_eq!(u128::from(p.remaining), model.remaining(now), "remaining differs");
        }
        let events: Vec<Admitted> = admitted.into_iter().flatten().collect();
        assert_window_bound(&events, t.into(), u128::from(t) * u128::from(b));
    }

    #[test]
    fn quota_constructors_never_panic(count in any::<u64>(), nanos in any::<u64>(), burst in any::<u64>()) {
        if let Ok(q) = Quota::new(count, Duration::from_nanos(nanos)) {
            prop_assert!(q.interval().as_nanos() >= 1);
            if let Ok(q2) = q.with_burst(burst) {
                prop_assert!(q2.interval().as_nanos().checked_mul(u128::from(burst)).unwrap() <= u128::from(u64::MAX));
            }
        }
    }

    #[test]
    fn any_input_to_the_limiter_never_panics(
        start in any::<u64>(), t in 1u64..u64::MAX, b in 1u64..16, n in any::<u64>(), timeout in any::<u64>(),
    ) {
        let clock = ManualClock::new();
        clock.set(start);
        let Ok(quota) = Quota::from_interval(Duration::from_nanos(t)).and_then(|q| q.with_burst(b)) else {
            return Ok(());
        };
        let l = RateLimiter::builder(quota).clock(clock.clone()).build();
        let _ = l.check_n(n);
        let _ = l.try_acquire_n(n);
        let _ = l.try_acquire_n_for(n, Duration::from_nanos(timeout));
        if let Ok(r) = l.reserve_n(n) { r.cancel(); }
        let _ = l.throttle(b, n, timeout, n);
        let _ = l.peek();
    }
}
