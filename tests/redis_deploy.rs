//! A limit changed in a rolling deploy (`state_name`): processes under different quotas share a
//! named GCRA state, and one under another quota than the state's converts the debt in permits,
//! rounded up: TAT' = now + ceil((TAT - now) * T / T0). A pure model of that rule (property
//! tests: two quotas alternating on one key never admit more than the larger quota's bound,
//! `max b + w / min T` over any window `w`, and a switch never lowers the debt in permits, so
//! never gives a fresh burst), the script checked against the model on a real server, and two
//! groups of limiters (separate connections, as two process groups) switched over mid-run on
//! one key. Real servers on loopback; every loop is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use redis::Commands;
use redis_support::{runtime, RedisServer};
use tollgate::redis::{RedisAlgorithm, RedisLimitError, RedisRateLimiter, ServerErrorKind};
use tollgate::{FixedWindow, Gcra, Quota, SlidingLog, SlidingWindow, WeightedWindow};

/// A named GCRA state as the model keeps it: the TAT and the quota that wrote it (µs).
#[derive(Clone, Copy, Debug)]
struct State {
    tat: u64,
    b: u64,
    t: u64,
}

/// The debt `d = TAT - now` (µs) of a state written under `t0`, read under `t`: the same
/// number of permits, rounded up to a whole µs (never forgiving part of a permit).
fn convert(d: u64, t: u64, t0: u64) -> u64 {
    let scaled = (u128::from(d) * u128::from(t)).div_ceil(u128::from(t0));
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// One check of `n` at `now` under `(b, t)`, as the script decides it (no holes, far from the
/// end of time): whether it was admitted; the state is written under `(b, t)` when admitted.
fn check(s: &mut Option<State>, now: u64, n: u64, b: u64, t: u64) -> bool {
    let debt = match *s {
        Some(st) if st.tat > now => {
            let d = st.tat - now;
            if (st.b, st.t) == (b, t) {
                d
            } else {
                convert(d, t, st.t)
            }
        }
        _ => 0,
    };
    if n == 0 || n > b || debt + n * t > b * t {
        return false;
    }
    *s = Some(State {
        tat: now + debt + n * t,
        b,
        t,
    });
    true
}

/// Two quotas `(b, T)` in µs, each as small as makes the arithmetic interesting.
fn quota() -> impl Strategy<Value = (u64, u64)> {
    (1u64..12, 1u64..5_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Two quotas alternating on one key (in any order, at any times) never admit more than
    /// `max b + w / min T` permits over any window of events `w` apart.
    #[test]
    fn alternating_quotas_stay_under_the_larger_bound(
        qa in quota(),
        qb in quota(),
        steps in prop::collection::vec((any::<bool>(), 0u64..3_000, 1u64..4), 1..80),
    ) {
        let mut s = None;
        let mut now = 1_000_000;
        let mut admitted = Vec::new();
        for (use_b, gap, n) in steps {
            now += gap;
            let (b, t) = if use_b { qb } else { qa };
            if check(&mut s, now, n, b, t) {
                admitted.push((now, n));
            }
        }
        let bmax = qa.0.max(qb.0);
        let tmin = qa.1.min(qb.1);
        for i in 0..admitted.len() {
            let mut sum = 0;
            for j in i..admitted.len() {
                sum += admitted[j].1;
                let w = admitted[j].0 - admitted[i].0;
                // sum <= bmax + w / tmin, in whole µs.
                prop_assert!(
                    sum * tmin <= bmax * tmin + w,
                    "{} admitted over {} us (b {}, T {})", sum, w, bmax, tmin
                );
            }
        }
    }

    /// A switch never lowers the debt in permits (`d' / T >= d / T0`), and adds less than one
    /// µs to it: never a fresh burst, and nothing more than the rounding.
    #[test]
    fn a_switch_keeps_the_debt_in_permits(
        d in 0u64..1 << 51,
        t in 1u64..1 << 40,
        t0 in 1u64..1 << 40,
    ) {
        let c = convert(d, t, t0);
        let (c, d, t, t0) = (u128::from(c), u128::from(d), u128::from(t), u128::from(t0));
        if (d * t).div_ceil(t0) > u128::from(u64::MAX) {
            // Past what a u64 holds (far past the end of time): the most there is.
            prop_assert_eq!(c, u128::from(u64::MAX));
        } else {
            prop_assert!(c * t0 >= d * t);
            prop_assert!((c - 1) * t0 < d * t || d == 0);
        }
    }

    /// Once only the new quota decides, it decides exactly as a state it wrote itself: the
    /// converted debt is then its own.
    #[test]
    fn after_the_switch_the_new_rule_holds(
        qa in quota(),
        qb in quota(),
        before in 1u64..12,
        gaps in prop::collection::vec(0u64..3_000, 1..40),
    ) {
        let mut s = None;
        let mut now = 1_000_000;
        for _ in 0..before {
            check(&mut s, now, 1, qa.0, qa.1);
        }
        // The first decision under the new quota that writes; from then on the model is
        // plain GCRA under it.
        let mut plain: Option<State> = None;
        for gap in gaps {
            now += gap;
            let expected = plain.map(|p| {
                let mut q = Some(p);
                (check(&mut q, now, 1, qb.0, qb.1), q)
            });
            let ok = check(&mut s, now, 1, qb.0, qb.1);
            if let Some((e, q)) = expected {
                prop_assert_eq!(ok, e);
                plain = q;
            } else if ok {
                plain = s;
            }
        }
    }
}

/// Burst `b`, one permit every `t`.
fn gcra(b: u64, t: Duration) -> Quota {
    Quota::from_interval(t).unwrap().with_burst(b).unwrap()
}

/// A GCRA limiter named "login" on `server`.
async fn limiter(server: &RedisServer, quota: Quota) -> RedisRateLimiter {
    named(server, quota, Gcra).await
}

/// A limiter running `alg`, named "login", on `server`.
async fn named<A: RedisAlgorithm>(
    server: &RedisServer,
    quota: Quota,
    alg: A,
) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(quota)
        .algorithm(alg)
        .unwrap()
        .state_name("login")
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap()
}

/// The script's conversion is the model's, to the µs: a state written under one quota, peeked
/// at under another, reports the converted debt as its `reset_after`.
#[test]
fn the_script_converts_as_the_model() {
    let server = RedisServer::start();
    let conn = std::cell::RefCell::new(server.conn());
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    // Quotas whose T are awkward (rounded up to whole µs), b * T well within range.
    let q = (1u64..50, 1u64..200_000).prop_map(|(b, t)| (b, t * 997));
    runner
        .run(&(q.clone(), q, 0u64..1 << 22), |((b0, ns0), (b, ns), d)| {
            let (t0, t) = (ns0.div_ceil(1000), ns.div_ceil(1000));
            let reader_q = gcra(b, Duration::from_nanos(ns));
            rt.block_on(async {
                let reader = limiter(&server, reader_q).await;
                let key = reader.state_key("u");
                let now = reader.decide_n("u", 0).await.unwrap().server_time.unwrap();
                let now = u64::try_from(now.as_micros()).unwrap();
                // Well ahead of the reader's next look, whose server time the reply gives.
                let tat = now + d + 1_000_000;
                let value = format!("{b0},{t0},{tat}");
                let () = conn.borrow_mut().set(&key, &value).unwrap();
                let r = reader.decide_n("u", 0).await.unwrap();
                let at = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                let expected = if (b0, t0) == (b, t) {
                    tat - at
                } else {
                    convert(tat - at, t, t0)
                };
                let got = u64::try_from(r.decision.reset_after.as_micros()).unwrap();
                prop_assert_eq!(got, expected, "{} under b {} T {}", value, b, t);
                // A peek writes nothing: the state is still the writer's.
                let kept: String = conn.borrow_mut().get(&key).unwrap();
                prop_assert_eq!(kept, value);
                Ok(())
            })
        })
        .unwrap();
}

/// Two groups of limiters on separate connections, one per quota, on one named key: the old
/// group alone, then both (the deploy), then the new one alone. Over the whole run they admit
/// at most `max b + w / min T`, and the state ends under the new quota.
#[test]
fn a_rolling_deploy_stays_under_the_larger_bound() {
    let server = RedisServer::start();
    // Old: burst 20, T = 100 ms. New: burst 10, T = 50 ms.
    let old_q = gcra(20, Duration::from_millis(100));
    let new_q = gcra(10, Duration::from_millis(50));
    runtime().block_on(async {
        let mut old = Vec::new();
        let mut new = Vec::new();
        for _ in 0..2 {
            old.push(limiter(&server, old_q).await);
            new.push(limiter(&server, new_q).await);
        }
        let start = Instant::now();
        let mut admitted = 0u64;
        // The old group alone: its burst.
        for i in 0..40 {
            admitted += u64::from(old[i % 2].check("u").await.unwrap().allowed);
        }
        // The deploy: both groups alternate on the key.
        for i in 0..20 {
            admitted += u64::from(new[i % 2].check("u").await.unwrap().allowed);
            admitted += u64::from(old[i % 2].check("u").await.unwrap().allowed);
        }
        // The new group alone.
        for i in 0..40 {
            admitted += u64::from(new[i % 2].check("u").await.unwrap().allowed);
        }
        let w_us = u64::try_from(start.elapsed().as_micros()).unwrap();
        let bound = 20 + w_us / 50_000;
        assert!(
            admitted <= bound,
            "{admitted} admitted in {w_us} us: the bound is {bound}"
        );
        // After the deploy: a wait under the new quota writes the state under it.
        new[0].acquire_async("u").await.unwrap();
        let mut conn = server.conn();
        let value: String = conn.get(new[0].state_key("u")).unwrap();
        assert!(value.starts_with("10,50000,"), "{value}");
    });
}

/// A named state that is not "b,T,<TAT>" (or holes) as the script writes it is the typed
/// error for a foreign value, and nothing is written.
#[test]
fn malformed_named_states_are_refused() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    runtime().block_on(async {
        let l = limiter(&server, Quota::per_second(10).unwrap()).await;
        let key = l.state_key("u");
        for bad in [
            "1",
            "10,100000",
            "10,100000,",
            "0,100000,5",
            "10,0,5",
            "x,100000,5",
            "10,100000,5:",
            "10,100000,05",
            "3000000000000000,1,5",
            "10,100000,5,5",
            "10,100000,-5",
            "10,100000,1e3",
        ] {
            let () = conn.set(&key, bad).unwrap();
            let e = l.check("u").await.unwrap_err();
            let RedisLimitError::Server(s) = &e else {
                panic!("{bad}: {e:?}");
            };
            assert_eq!(s.kind(), ServerErrorKind::Script, "{bad}: {e}");
            let kept: String = conn.get(&key).unwrap();
            assert_eq!(kept, bad);
        }
    });
}

/// Names that could read as a quota's key segment, another name's key or a hash tag are
/// refused by `connect`; every algorithm takes a name.
#[test]
fn bad_state_names_are_refused() {
    let server = RedisServer::start();
    runtime().block_on(async {
        for bad in ["", "100000", "1abc", "a:b", "{a}", "a b", "é"] {
            let r = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
                .state_name(bad)
                .connect(&server.url())
                .await;
            assert!(
                matches!(r, Err(RedisLimitError::InvalidStateName(_))),
                "{bad:?}"
            );
        }
        let q = Quota::per_second(10).unwrap();
        let log = named(&server, q, SlidingLog).await;
        let sliding = named(&server, q, SlidingWindow::new(4)).await;
        let weighted = named(&server, q, WeightedWindow).await;
        assert_eq!(log.state_key("u"), "tollgate:log:login:u");
        assert_eq!(sliding.state_key("u"), "tollgate:sliding:login:u");
        assert_eq!(weighted.state_key("u"), "tollgate:weighted:login:u");
    });
}

/// A named limiter decides as an unnamed one with the same quota, in every mode (plain, with
/// coalesced checks, the denial cache, local batches) and through holes, reservations,
/// penalties, rewards and blocks (local batches: the same grants); only its keys and values
/// differ.
#[test]
fn named_limiters_decide_as_unnamed_ones() {
    let server = RedisServer::start();
    // An hour per permit: the few µs between the two limiters' calls change no field compared.
    let quota = gcra(5, Duration::from_secs(3600));
    type Mode =
        fn(tollgate::redis::RedisRateLimiterBuilder) -> tollgate::redis::RedisRateLimiterBuilder;
    let modes: [(&str, Mode); 4] = [
        ("plain", |b| b),
        ("coalesce", |b| b.coalesce()),
        ("denial cache", |b| {
            b.denial_cache(std::num::NonZeroUsize::new(16).unwrap())
        }),
        ("local batches", |b| {
            b.local_batches(Duration::from_secs(30), 50)
        }),
    ];
    let url = server.url();
    runtime().block_on(async {
        for (i, (mode, with)) in modes.into_iter().enumerate() {
            let build = |named: bool| {
                let b = RedisRateLimiter::builder(quota).prefix(format!("m{i}"));
                let b = if named { b.state_name("api") } else { b };
                with(b).deadline(Duration::from_secs(2)).connect(&url)
            };
            let (plain, named) = (build(false).await.unwrap(), build(true).await.unwrap());
            let mut seen = Vec::new();
            for l in [&plain, &named] {
                let mut out = Vec::new();
                let d = |d: tollgate::Decision| (d.allowed, d.remaining);
                out.push(d(l.check("u").await.unwrap()));
                let r1 = l.reserve("u").await.unwrap();
                let r2 = l.reserve("u").await.unwrap();
                out.push((r1.delay().is_zero(), 0));
                out.push((r2.delay().is_zero(), 0));
                // Not the latest: its stretch becomes a hole a later check is placed in.
                out.push((r1.cancel().await.unwrap(), 0));
                out.push(d(l.check("u").await.unwrap()));
                out.push(d(l.penalize("u", 1).await.unwrap().decision));
                out.push(d(l.reward("u", 3).await.unwrap().decision));
                out.push(d(l.check_n("u", 2).await.unwrap()));
                out.push(d(l.peek("u").await.unwrap()));
                out.push(d(l
                    .block("u", Duration::from_secs(60))
                    .await
                    .unwrap()
                    .decision));
                out.push(d(l.check("u").await.unwrap()));
                seen.push(out);
            }
            if mode == "local batches" {
                // What a local batch reports as remaining depends on when its background
                // refresh ran; what it grants does not.
                for s in &mut seen {
                    s.iter_mut().for_each(|d| d.1 = 0);
                }
            }
            assert_eq!(seen[0], seen[1], "{mode}");
            let mut conn = server.conn();
            let value: String = conn.get(named.state_key("u")).unwrap();
            assert!(value.starts_with("5,3600000000,"), "{mode}: {value}");
            assert_eq!(named.state_key("u"), format!("m{i}:gcra:api:u"));
        }
    });
}

/// Hostile bytes at a named state (and near-misses of "b,T,<TAT>[:holes]"): either refused as a
/// foreign value with the key unchanged, or read as a state the script writes, in which case
/// what it leaves is again such a state (or nothing).
#[test]
fn hostile_named_states_are_refused_or_read() {
    let server = RedisServer::start();
    let conn = std::cell::RefCell::new(server.conn());
    let rt = runtime();
    let l = rt.block_on(limiter(&server, Quota::per_second(10).unwrap()));
    let key = l.state_key("u");
    let near = ("[0-9]{1,17}", "[0-9]{1,17}", "[0-9:,x-]{0,24}")
        .prop_map(|(b, t, rest)| format!("{b},{t},{rest}").into_bytes());
    let value = prop_oneof![prop::collection::vec(any::<u8>(), 0..40), near];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 300,
        ..ProptestConfig::default()
    });
    runner
        .run(&value, |bytes| {
            let () = conn.borrow_mut().set(&key, &bytes).unwrap();
            let r = rt.block_on(l.check("u"));
            let now: Option<Vec<u8>> = conn.borrow_mut().get(&key).unwrap();
            match r {
                Err(RedisLimitError::Server(s)) => {
                    prop_assert_eq!(s.kind(), ServerErrorKind::Script);
                    prop_assert_eq!(now, Some(bytes));
                }
                Err(e) => return Err(TestCaseError::fail(format!("{e:?}"))),
                Ok(_) => {
                    if let Some(v) = now {
                        prop_assert!(is_own_state(&v), "{:?}", String::from_utf8_lossy(&v));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Whether `v` is a named state as the script writes it under `Quota::per_second(10)`:
/// "10,100000," then the TAT and any holes, `:`-separated digits.
fn is_own_state(v: &[u8]) -> bool {
    v.strip_prefix(b"10,100000,".as_slice())
        .is_some_and(|rest| {
            rest.split(|&c| c == b':')
                .all(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
        })
}

async fn fixed(
    server: &RedisServer,
    limit: u64,
    window: Duration,
) -> RedisRateLimiter<FixedWindow> {
    let quota = Quota::new(limit, window).unwrap();
    named(server, quota, FixedWindow::epoch_aligned()).await
}

/// The fixed window under a name: another limit carries the window's count as is, another
/// window length carries it while the stored window lasts; never a fresh window's worth.
/// Windows of hours: no test run crosses more than one boundary, and the checks below hold
/// across one.
#[test]
fn fixed_windows_carry_their_count() {
    let server = RedisServer::start();
    let hour = Duration::from_secs(3600);
    runtime().block_on(async {
        let old = fixed(&server, 5, hour).await;
        let smaller = fixed(&server, 3, hour).await;
        let larger = fixed(&server, 8, hour).await;
        let half = fixed(&server, 5, hour / 2).await;
        let mut admitted = 0;
        for _ in 0..10 {
            admitted += u64::from(old.check("u").await.unwrap().allowed);
        }
        // A boundary crossed just now would have reset the count anyway.
        if admitted == 5 {
            assert!(!smaller.check("u").await.unwrap().allowed);
            assert!(!half.check("u").await.unwrap().allowed);
            let mut more = 0;
            for _ in 0..10 {
                more += u64::from(larger.check("u").await.unwrap().allowed);
            }
            assert!(more <= 3, "{more} admitted past the old count");
            let mut conn = server.conn();
            let value: String = conn.get(larger.state_key("u")).unwrap();
            assert!(value.starts_with("8,3600000000,"), "{value}");
        }
        assert_eq!(old.state_key("u"), "tollgate:fixed:login:u");
        // Malformed named values are refused, and stay.
        let mut conn = server.conn();
        for bad in [
            "5:1",
            "5,3600000000,",
            "5,0,1:1",
            "5,3600000000,1:0",
            "x,1,1:1",
        ] {
            let () = conn.set(old.state_key("v"), bad).unwrap();
            let e = old.check("v").await.unwrap_err();
            let RedisLimitError::Server(s) = &e else {
                panic!("{bad}: {e:?}");
            };
            assert_eq!(s.kind(), ServerErrorKind::Script, "{bad}: {e}");
            let kept: String = conn.get(old.state_key("v")).unwrap();
            assert_eq!(kept, bad);
        }
    });
}

/// A converted state loses its holes (they only ever admit more), and a reservation made under
/// the old quota and cancelled after the switch gives nothing back.
#[test]
fn a_switch_drops_holes_and_old_cancels() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    runtime().block_on(async {
        // Seconds per permit: the checks below hold for 10 s after the reservations.
        let old = limiter(&server, gcra(4, Duration::from_secs(10))).await;
        let new = limiter(&server, gcra(4, Duration::from_secs(30))).await;
        // Four reservations; cancelling the second leaves a hole under the old quota.
        let mut r = Vec::new();
        for _ in 0..4 {
            r.push(old.reserve("u").await.unwrap());
        }
        let second = r.remove(1);
        assert!(second.cancel().await.unwrap());
        let value: String = conn.get(old.state_key("u")).unwrap();
        assert!(
            value.starts_with("4,10000000,") && value.contains(':'),
            "{value}"
        );
        // Under the new quota: the debt of four permits (the hole dropped) is four of its own.
        let d = new.decide_n("u", 0).await.unwrap();
        let at = u64::try_from(d.server_time.unwrap().as_micros()).unwrap();
        let tat: u64 = value["4,10000000,".len()..]
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let expected = convert(tat - at, 30_000_000, 10_000_000);
        assert_eq!(d.decision.reset_after.as_micros(), u128::from(expected));
        assert_eq!(d.decision.remaining, 0);
        // The peek wrote the state under the new quota (its holes dropped); the latest
        // reservation, made under the old one, gives nothing back now.
        let value: String = conn.get(old.state_key("u")).unwrap();
        assert!(
            value.starts_with("4,30000000,") && !value.contains(':'),
            "{value}"
        );
        assert!(!r.pop().unwrap().cancel().await.unwrap());
    });
}

/// Under a name, a per-call quota equal to the limiter's own decides on the named state; any
/// other selects its own state, keyed by the quota, as without a name.
#[test]
fn per_call_quotas_under_a_name() {
    let server = RedisServer::start();
    runtime().block_on(async {
        // Per hour: no permit comes back during the test.
        let own = Quota::per_hour(10).unwrap();
        let other = Quota::per_hour(5).unwrap();
        let l = limiter(&server, own).await;
        assert_eq!(l.state_key_with("u", own).unwrap(), "tollgate:gcra:login:u");
        assert_eq!(
            l.state_key_with("u", other).unwrap(),
            "tollgate:gcra:720000000:5:u"
        );
        // The limiter's own quota, per call, spends the named state's burst.
        let mut admitted = 0;
        for _ in 0..20 {
            admitted += u64::from(l.check_with("u", own).await.unwrap().allowed);
        }
        assert_eq!(admitted, 10);
        assert!(!l.check("u").await.unwrap().allowed);
        // Another quota has a state of its own, full.
        assert_eq!(l.check_with("u", other).await.unwrap().remaining, 4);
    });
}

// The window algorithms under a name. The sliding log and the sliding window keep stamped
// entries (a grant's stamp: its instant, or its sub-window's start): another quota decides on
// the same entries, counting them, while the writer's quota counts a longer window than its
// own, by that longer window (a *hold*, recorded with the state until the newest entry has
// left the writer's window). The weighted window's counts move to the new length's grid, each
// to a window where it weighs at least as much at every instant.

/// A hold `(H, U)`: a longer window `H` counted until `U` (µs).
type Hold = (u64, u64);

/// A named sliding log (`g = 1`) or sliding window (sub-windows of `g` µs) as the model keeps
/// it: its entries `(stamp, count)`, oldest first, the quota `(L, W)` that wrote it and the
/// hold `(H, U)` it recorded, and when the key expires.
#[derive(Clone, Debug, Default)]
struct Stamped {
    entries: Vec<(u64, u64)>,
    quota: Option<(u64, u64, Option<Hold>)>,
    expires: u64,
}

impl Stamped {
    /// The window a call under window `w` counts at `now`, and the hold it records: the
    /// writer's window (or the hold it recorded, while it lasts) if longer than `w`, until
    /// the newest entry has left the writer's own window.
    fn counted(&self, now: u64, w: u64) -> (u64, Option<Hold>) {
        let Some((_, w0, hold)) = self.quota else {
            return (w, None);
        };
        let (mut hw, mut hu) = (w0, 0);
        if let Some((h, u)) = hold.filter(|&(_, u)| now < u) {
            (hw, hu) = (h, u);
        }
        if hw > w {
            if let Some(&(newest, _)) = self.entries.last().filter(|_| w0 > w) {
                hu = hu.max(newest + w0);
            }
            if hu > now {
                return (hw, Some((hw, hu)));
            }
        }
        (w, None)
    }

    /// The permits counted at `now` by a call under window `w`.
    fn used(&self, now: u64, w: u64) -> u64 {
        if now >= self.expires {
            return 0;
        }
        let (cw, _) = self.counted(now, w);
        let at = now.max(self.entries.last().map_or(0, |e| e.0));
        self.entries
            .iter()
            .filter(|e| e.0 + cw > at)
            .map(|e| e.1)
            .sum()
    }

    /// One check of `n` at `now` under `(l, w)` with sub-windows of `g`, as the scripts decide
    /// it: whether it was admitted (the state is then written under `(l, w)`).
    fn check(&mut self, now: u64, n: u64, l: u64, w: u64, g: u64) -> bool {
        if now >= self.expires {
            *self = Stamped::default();
        }
        let (cw, hold) = self.counted(now, w);
        let newest = self.entries.last().map(|e| e.0);
        let at = now.max(newest.unwrap_or(0));
        let total = self.used(now, w);
        if n == 0 || n > l || total + n > l {
            return false;
        }
        self.entries.retain(|e| e.0 + cw > at);
        let slot = (at / g * g).max(newest.unwrap_or(0));
        match self.entries.last_mut() {
            Some(e) if e.0 == slot => e.1 += n,
            _ => self.entries.push((slot, n)),
        }
        self.quota = Some((l, w, hold));
        self.expires = slot + cw;
        true
    }
}

/// A window quota `(L, W, g)` in µs: `g = 1` for the sliding log, else `W / k`.
fn stamped_quota(log: bool) -> impl Strategy<Value = (u64, u64, u64)> {
    (1u64..8, 1u64..60, 1u64..6).prop_map(move |(l, g, k)| {
        if log {
            (l, g * k * 50, 1)
        } else {
            (l, g * k * 50, g * 50)
        }
    })
}

/// Admissions `(at, n)` of two quotas alternating on one key, in any order and at any times.
fn alternate_stamped(
    qa: (u64, u64, u64),
    qb: (u64, u64, u64),
    steps: &[(bool, u64, u64)],
) -> Vec<(u64, u64)> {
    let mut s = Stamped::default();
    let mut now = 1_000_000;
    let mut admitted = Vec::new();
    for &(use_b, gap, n) in steps {
        now += gap;
        let (l, w, g) = if use_b { qb } else { qa };
        if s.check(now, n, l, w, g) {
            admitted.push((now, n));
        }
    }
    admitted
}

/// A state written under `qa` by admissions at the given gaps, then read under `qb` at `now`:
/// returns the state, `now` and the permits `qa`'s own rule counts there.
fn written_under(qa: (u64, u64, u64), gaps: &[u64]) -> (Stamped, u64) {
    let mut s = Stamped::default();
    let mut now = 1_000_000;
    for &gap in gaps {
        now += gap;
        s.check(now, 1, qa.0, qa.1, qa.2);
    }
    (s, now)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The sliding log and the sliding window: two quotas alternating on one key admit at
    /// most the larger `L` over any stretch shorter than the shorter window less the longer
    /// sub-window (each permit counts at least that long, under either quota).
    #[test]
    fn stamped_windows_alternating_stay_under_the_larger_limit(
        log in any::<bool>(),
        (qa, qb) in any::<bool>().prop_flat_map(|log| (stamped_quota(log), stamped_quota(log))),
        steps in prop::collection::vec((any::<bool>(), 0u64..1_500, 1u64..4), 1..80),
    ) {
        let _ = log;
        let admitted = alternate_stamped(qa, qb, &steps);
        let lmax = qa.0.max(qb.0);
        let span = qa.1.min(qb.1).saturating_sub(qa.2.max(qb.2));
        for i in 0..admitted.len() {
            let mut sum = 0;
            for j in i..admitted.len() {
                if admitted[j].0 - admitted[i].0 >= span {
                    break;
                }
                sum += admitted[j].1;
                prop_assert!(sum <= lmax, "{} admitted within {} us (L {})", sum, span, lmax);
            }
        }
    }

    /// A switch never lowers the used count: whatever the new quota admits at the switch,
    /// at every instant after it the state counts at least the permits the old quota's own
    /// rule would still count (no permit is released earlier than the quota that counted it
    /// would release it).
    #[test]
    fn stamped_windows_switching_never_lower_the_used_count(
        (qa, qb) in any::<bool>().prop_flat_map(|log| (stamped_quota(log), stamped_quota(log))),
        gaps in prop::collection::vec(0u64..2_000, 1..30),
        at in 0u64..2_000,
        n in 0u64..4,
        later in prop::collection::vec(0u64..20_000, 1..8),
    ) {
        let (old, now) = written_under(qa, &gaps);
        let now = now + at;
        prop_assert!(old.used(now, qb.1) >= old.used(now, qa.1));
        let mut new = old.clone();
        new.check(now, n, qb.0, qb.1, qb.2);
        for dt in later {
            let t = now + dt;
            prop_assert!(
                new.used(t, qb.1) >= old.used(t, qa.1),
                "at +{}: {} counted under {:?}, {} under {:?}", dt,
                new.used(t, qb.1), qb, old.used(t, qa.1), qa
            );
        }
    }

    /// Once the old quota's hold has ended, the new quota decides by its own rule: its own
    /// window, on the entries as they stand.
    #[test]
    fn stamped_windows_after_the_hold_follow_the_new_rule(
        (qa, qb) in any::<bool>().prop_flat_map(|log| (stamped_quota(log), stamped_quota(log))),
        gaps in prop::collection::vec(0u64..2_000, 1..30),
        after in prop::collection::vec(0u64..2_000, 1..30),
    ) {
        let (mut s, mut now) = written_under(qa, &gaps);
        now += qa.1.max(qb.1);
        for gap in after {
            now += gap;
            prop_assert_eq!(s.counted(now, qb.1), (qb.1, None));
            s.check(now, 1, qb.0, qb.1, qb.2);
        }
    }
}

/// A named weighted window as the model keeps it: `(W, window, cur, prev)`, as written.
type Weighted = Option<(u64, u64, u64, u64)>;

/// The stored state as a call under window `w` reads it: the same, or (another `W`) each count
/// moved to the window of `w` ending at or after its own full weight's end plus
/// `max(W0 - w, 0)`, the older one merged in if that is the same window (the script's rule).
fn weighted_as(s: Weighted, w: u64) -> Option<(u64, u64, u64)> {
    let (w0, k, cur, prev) = s?;
    if w0 == w {
        return Some((k, cur, prev));
    }
    let late = w0.saturating_sub(w);
    let kc = ((k + 1) * w0 + late - 1) / w;
    let kp = ((k * w0 + late).max(1) - 1) / w;
    Some(if kp == kc {
        (kc, cur + prev, 0)
    } else {
        (kc, cur, prev)
    })
}

/// What the state weighs at `t` under window `w`, times `w`: `prev * (w - e) + cur * w` in its
/// own window (both in full in a later one), `cur * (w - e)` in the next.
fn weighs(s: Option<(u64, u64, u64)>, w: u64, t: u64) -> u128 {
    let Some((k, cur, prev)) = s else { return 0 };
    let (cur, prev, w128) = (u128::from(cur), u128::from(prev), u128::from(w));
    let kt = t / w;
    let e = u128::from(t % w);
    if k > kt {
        (cur + prev) * w128
    } else if k == kt {
        prev * (w128 - e) + cur * w128
    } else if k + 1 == kt {
        cur * (w128 - e)
    } else {
        0
    }
}

/// One check of `n` at `now` under `(l, w)`, as the script decides it.
fn weighted_check(s: &mut Weighted, now: u64, n: u64, l: u64, w: u64) -> bool {
    let kt = now / w;
    let (k, cur, prev) = match weighted_as(*s, w) {
        Some((k, cur, prev)) if k >= kt => (k, cur, prev),
        Some((k, cur, _)) if k + 1 == kt => (kt, 0, cur),
        _ => (kt, 0, 0),
    };
    let e = if k > kt { 0 } else { now % w };
    let fits = cur + n <= l
        && u128::from(prev) * u128::from(w - e) <= u128::from(l - cur - n) * u128::from(w);
    if n == 0 || n > l || !fits {
        return false;
    }
    *s = Some((w, k, cur + n, prev));
    true
}

/// A weighted quota `(L, W)` in µs.
fn weighted_quota() -> impl Strategy<Value = (u64, u64)> {
    (1u64..8, 1u64..100).prop_map(|(l, w)| (l, w * 37))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The weighted window: two quotas alternating on one key never admit a permit over the
    /// larger `L` counting each earlier permit at its weight under the shorter window
    /// (`1 - age / W_min`, at least what either quota's rule weighs it at): what each quota
    /// alone promises, with the larger limit and the shorter window.
    #[test]
    fn weighted_windows_alternating_stay_under_the_larger_limit(
        qa in weighted_quota(),
        qb in weighted_quota(),
        steps in prop::collection::vec((any::<bool>(), 0u64..3_000, 1u64..4), 1..80),
    ) {
        let mut s = None;
        let mut now = 1_000_000;
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (use_b, gap, n) in steps {
            now += gap;
            let (l, w) = if use_b { qb } else { qa };
            if weighted_check(&mut s, now, n, l, w) {
                admitted.push((now, n));
            }
        }
        let lmax = u128::from(qa.0.max(qb.0));
        let wmin = qa.1.min(qb.1);
        for j in 0..admitted.len() {
            let (tj, nj) = admitted[j];
            let before: u128 = admitted[..j]
                .iter()
                .map(|&(t, n)| u128::from(n) * u128::from(wmin.saturating_sub(tj - t)))
                .sum();
            prop_assert!(
                before + u128::from(nj) * u128::from(wmin) <= lmax * u128::from(wmin),
                "admission {} of {:?}", j, admitted
            );
        }
    }

    /// A switch never lowers the used count: at every instant the moved counts weigh at least
    /// what they weighed under the quota that wrote them.
    #[test]
    fn weighted_windows_switching_never_lower_the_used_count(
        w0 in 1u64..5_000,
        w in 1u64..5_000,
        k in 1u64..1_000,
        cur in 0u64..50,
        prev in 0u64..50,
        later in prop::collection::vec(0u64..20_000, 1..8),
    ) {
        let old = Some((w0, k, cur, prev));
        let new = weighted_as(old, w);
        // From the instant the state was written (in window k) on.
        for dt in later {
            let t = k * w0 + dt;
            prop_assert!(
                weighs(new, w, t) * u128::from(w0) >= weighs(Some((k, cur, prev)), w0, t) * u128::from(w),
                "at {}: {:?} under {} from {:?}", t, new, w, old
            );
        }
    }
}

/// The server's clock in µs.
fn server_us(conn: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    s * 1_000_000 + us
}

/// A sequence of calls (checks, peeks, adjustments) on one key: what each decided.
async fn script_of_calls<A: RedisAlgorithm>(l: &RedisRateLimiter<A>) -> Vec<(bool, u64)> {
    let d = |d: tollgate::Decision| (d.allowed, d.remaining);
    let mut out = vec![d(l.check("u").await.unwrap())];
    out.push(d(l.check_n("u", 2).await.unwrap()));
    out.push(d(l.peek("u").await.unwrap()));
    out.push(d(l.penalize("u", 1).await.unwrap().decision));
    out.push(d(l.reward("u", 3).await.unwrap().decision));
    out.push(d(l.check_n("u", 3).await.unwrap()));
    out.push(d(l.check("u").await.unwrap()));
    out.push(d(l
        .block("u", Duration::from_secs(7200))
        .await
        .unwrap()
        .decision));
    out.push(d(l.check("u").await.unwrap()));
    out.push(d(l.reward("u", 9).await.unwrap().decision));
    out.push(d(l.check("u").await.unwrap()));
    out
}

/// The window algorithms under a name decide as unnamed ones with the same quota (only their
/// keys and values differ), and their values name the quota.
#[test]
fn named_windows_decide_as_unnamed_ones() {
    let server = RedisServer::start();
    let url = server.url();
    // Five per hour: no permit comes back during the test.
    let quota = Quota::per_hour(5).unwrap();
    async fn both<A: RedisAlgorithm>(url: &str, quota: Quota, alg: A) -> [RedisRateLimiter<A>; 2] {
        let build = |named: bool| {
            let b = RedisRateLimiter::builder(quota)
                .algorithm(alg)
                .unwrap()
                .prefix(if named { "n" } else { "p" });
            let b = if named { b.state_name("api") } else { b };
            b.deadline(Duration::from_secs(2)).connect(url)
        };
        [build(false).await.unwrap(), build(true).await.unwrap()]
    }
    runtime().block_on(async {
        let mut conn = server.conn();
        let [plain, named] = both(&url, quota, SlidingLog).await;
        assert_eq!(script_of_calls(&plain).await, script_of_calls(&named).await);
        let members: Vec<String> = conn.zrangebyscore(named.state_key("u"), -2, -2).unwrap();
        assert_eq!(members, ["q:5:3600000000"]);
        let [plain, named] = both(&url, quota, SlidingWindow::new(4)).await;
        assert_eq!(script_of_calls(&plain).await, script_of_calls(&named).await);
        let (p, n): (String, String) = (
            conn.get(plain.state_key("u")).unwrap(),
            conn.get(named.state_key("u")).unwrap(),
        );
        assert_eq!(n, format!("5,3600000000,4,{p}"));
        let [plain, named] = both(&url, quota, WeightedWindow).await;
        assert_eq!(script_of_calls(&plain).await, script_of_calls(&named).await);
        let (p, n): (String, String) = (
            conn.get(plain.state_key("u")).unwrap(),
            conn.get(named.state_key("u")).unwrap(),
        );
        assert_eq!(n, format!("5,3600000000,{p}"));
        // Per-call quotas other than the limiter's own keep their quota-keyed states.
        let other = Quota::per_hour(4).unwrap();
        assert_eq!(
            named.state_key_with("u", other).unwrap(),
            "n:weighted:3600000000:4:u"
        );
        assert!(named.check_with("u", other).await.unwrap().allowed);
        let [_, named] = both(&url, quota, SlidingWindow::new(4)).await;
        assert_eq!(
            named.state_key_with("u", other).unwrap(),
            "n:sliding:3600000000:4:4:u"
        );
        assert_eq!(named.state_key_with("u", quota).unwrap(), "n:sliding:api:u");
    });
}

/// Each window algorithm under a name: five permits taken under five per hour stay counted
/// under a shorter window, a smaller limit and a longer window (which admits only the
/// difference), and a change under the shorter window records the hold.
#[test]
fn windows_keep_their_count_under_another_quota() {
    let server = RedisServer::start();
    let hour = Duration::from_secs(3600);
    async fn run<A: RedisAlgorithm>(server: &RedisServer, alg: A, hour: Duration) {
        let q = |l: u64, w: Duration| Quota::new(l, w).unwrap();
        let old = named(server, q(5, hour), alg).await;
        let shorter = named(server, q(5, hour / 4), alg).await;
        let smaller = named(server, q(3, hour), alg).await;
        let longer = named(server, q(8, hour * 2), alg).await;
        let mut conn = server.conn();
        // Not near an hour's end: no window boundary of any of them is crossed below.
        let t = server_us(&mut conn) % 900_000_000;
        if t > 890_000_000 {
            tokio::time::sleep(Duration::from_micros(900_000_000 - t + 10_000)).await;
        }
        for _ in 0..5 {
            assert!(old.check("u").await.unwrap().allowed, "{}", A::NAME);
        }
        assert!(!old.check("u").await.unwrap().allowed);
        assert!(!shorter.check("u").await.unwrap().allowed, "{}", A::NAME);
        assert!(!smaller.check("u").await.unwrap().allowed, "{}", A::NAME);
        let mut more = 0;
        for _ in 0..10 {
            more += u64::from(longer.check("u").await.unwrap().allowed);
        }
        assert_eq!(more, 3, "{}", A::NAME);
        assert!(!old.check("u").await.unwrap().allowed, "{}", A::NAME);
        // A change under the shorter window (a penalty) writes the state under it: still
        // counted, the longer quota's window held.
        let d = shorter.penalize("u", 1).await.unwrap().decision;
        assert!(!d.allowed, "{}: {d:?}", A::NAME);
        assert!(!shorter.check("u").await.unwrap().allowed, "{}", A::NAME);
        assert!(!old.check("u").await.unwrap().allowed, "{}", A::NAME);
    }
    runtime().block_on(async {
        run(&server, SlidingLog, hour).await;
        let mut conn = server.conn();
        let q: Vec<String> = conn.zrangebyscore("tollgate:log:login:u", -2, -2).unwrap();
        assert!(q[0].starts_with("q:5:900000000:7200000000:"), "{q:?}");
        run(&server, SlidingWindow::new(4), hour).await;
        let v: String = conn.get("tollgate:sliding:login:u").unwrap();
        assert!(v.starts_with("5,900000000,4,7200000000,"), "{v}");
        run(&server, WeightedWindow, hour).await;
        let v: String = conn.get("tollgate:weighted:login:u").unwrap();
        assert!(v.starts_with("5,900000000,"), "{v}");
    });
}

/// The scripts convert as the models: a state written by hand under one quota, peeked at
/// under another, reports the model's count (`remaining`) and the instant the last counted
/// permit leaves (`reset_after`). Sliding windows of `k` sub-windows (with and without a
/// recorded hold, current or past), the sliding log on the same entries, and weighted
/// windows.
#[test]
fn the_window_scripts_convert_as_the_models() {
    let server = RedisServer::start();
    let conn = std::cell::RefCell::new(server.conn());
    let rt = runtime();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 120,
        ..ProptestConfig::default()
    });
    // Sub-windows of whole ms; windows of up to 4 s; a state written within the last 8 s.
    let quota = (1u64..20, 1u64..500, 2u64..9).prop_map(|(l, g, k)| (l, g * k * 1000, k));
    let entries = prop::collection::btree_map(0u64..8_000, 1u64..4, 1..6);
    // A recorded hold: H beyond the writer's window, until an instant around now (ms).
    let hold = prop::option::of((1u64..3_000, 0u64..8_000));
    runner
        .run(
            &(quota.clone(), quota, entries, hold),
            |((l0, w0, k0), (l, w, k), entries, hold)| {
                rt.block_on(async {
                    let reader = named(
                        &server,
                        Quota::new(l, Duration::from_micros(w)).unwrap(),
                        SlidingWindow::new(u32::try_from(k).unwrap()),
                    )
                    .await;
                    let key = reader.state_key("u");
                    let now = server_us(&mut conn.borrow_mut());
                    // Stamps on the writer's grid, oldest first, the newest before now.
                    let g0 = w0 / k0;
                    let mut log: Vec<(u64, u64)> = Vec::new();
                    for (ms, c) in entries {
                        let stamp = (now - 8_000_000 - 1_000_000 + ms * 1000) / g0 * g0;
                        match log.last_mut() {
                            Some(e) if e.0 == stamp => e.1 += c,
                            _ => log.push((stamp, c)),
                        }
                    }
                    let long: Vec<String> = log.iter().map(|(t, c)| format!("{t}:{c}")).collect();
                    let newest = log.last().unwrap().0;
                    // The short form when it is one (as the script writes it), else the long one.
                    let short = log.iter().all(|e| newest - e.0 < w0);
                    let body = if short {
                        let mut parts = vec![(newest / g0).to_string()];
                        let mut m = newest / g0;
                        let first = log[0].0 / g0;
                        loop {
                            let c = log.iter().find(|e| e.0 / g0 == m).map_or(0, |e| e.1);
                            parts.push(c.to_string());
                            if m == first {
                                break;
                            }
                            m -= 1;
                        }
                        parts.join(":")
                    } else {
                        format!("={}", long.join(":"))
                    };
                    let hold = hold.map(|(h, u)| (w0 + h * 1000, now + u * 1000 - 2_000_000));
                    let held = hold.map_or(String::new(), |(h, u)| format!("{h},{u},"));
                    let value = format!("{l0},{w0},{k0},{held}{body}");
                    let model = Stamped {
                        entries: log.clone(),
                        quota: Some((l0, w0, hold)),
                        expires: u64::MAX,
                    };
                    let () = conn.borrow_mut().set(&key, &value).unwrap();
                    let r = reader.decide_n("u", 0).await.unwrap();
                    let at = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                    let used = model.used(at, w);
                    let (cw, _) = model.counted(at, w);
                    prop_assert_eq!(
                        r.decision.remaining,
                        l.saturating_sub(used),
                        "{} under {} {} {}",
                        value,
                        l,
                        w,
                        k
                    );
                    let reset = if used > 0 { newest + cw - at } else { 0 };
                    prop_assert_eq!(
                        r.decision.reset_after.as_micros(),
                        u128::from(reset),
                        "{}",
                        value
                    );
                    let kept: String = conn.borrow_mut().get(&key).unwrap();
                    prop_assert_eq!(kept, value.clone());
                    // The sliding log on the same entries: one member per permit.
                    let reader = named(
                        &server,
                        Quota::new(l, Duration::from_micros(w)).unwrap(),
                        SlidingLog,
                    )
                    .await;
                    let key = reader.state_key("u");
                    {
                        let mut c = conn.borrow_mut();
                        let quota_member = hold.map_or(format!("q:{l0}:{w0}"), |(h, u)| {
                            format!("q:{l0}:{w0}:{h}:{u}")
                        });
                        let _: () = c.zadd(&key, &quota_member, -2).unwrap();
                        for &(t, n) in &log {
                            for i in 1..=n {
                                let _: () = c.zadd(&key, format!("{t}:{i}"), t).unwrap();
                            }
                        }
                    }
                    let r = reader.decide_n("u", 0).await.unwrap();
                    let at = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                    let used = model.used(at, w);
                    let (cw, _) = model.counted(at, w);
                    prop_assert_eq!(
                        r.decision.remaining,
                        l.saturating_sub(used),
                        "log {:?}",
                        value
                    );
                    let reset = if used > 0 { newest + cw - at } else { 0 };
                    prop_assert_eq!(
                        r.decision.reset_after.as_micros(),
                        u128::from(reset),
                        "log {}",
                        value
                    );
                    let _: () = conn.borrow_mut().del(&key).unwrap();
                    Ok(())
                })
            },
        )
        .unwrap();
    // The weighted window: a state "L,W,k:cur:prev" written in the current window of W0 or the
    // one before, peeked at under another W.
    let quota = (1u64..20, 1u64..4_000).prop_map(|(l, w)| (l, w * 1000));
    runner
        .run(
            &(quota.clone(), quota, 0u64..2, 0u64..6, 0u64..6),
            |((l0, w0), (l, w), back, cur, prev)| {
                if cur + prev == 0 {
                    return Ok(());
                }
                rt.block_on(async {
                    let reader = named(
                        &server,
                        Quota::new(l, Duration::from_micros(w)).unwrap(),
                        WeightedWindow,
                    )
                    .await;
                    let key = reader.state_key("u");
                    let now = server_us(&mut conn.borrow_mut());
                    let k0 = now / w0 - back;
                    let value = format!("{l0},{w0},{k0}:{cur}:{prev}");
                    let () = conn.borrow_mut().set(&key, &value).unwrap();
                    let r = reader.decide_n("u", 0).await.unwrap();
                    let at = u64::try_from(r.server_time.unwrap().as_micros()).unwrap();
                    // The model's state as read, rolled to `at`'s window.
                    let (k, c, p) = weighted_as(Some((w0, k0, cur, prev)), w).unwrap();
                    let kt = at / w;
                    let (k, c, p) = if k >= kt {
                        (k, c, p)
                    } else if k + 1 == kt {
                        (kt, 0, c)
                    } else {
                        (kt, 0, 0)
                    };
                    let e = if k > kt { 0 } else { at % w };
                    let weighted_prev = (p * (w - e)).div_ceil(w);
                    let remaining = l.saturating_sub(c + weighted_prev);
                    prop_assert_eq!(
                        r.decision.remaining,
                        remaining,
                        "{} under {} {}",
                        value,
                        l,
                        w
                    );
                    let w_end = (k + 1) * w;
                    let reset = if c > 0 {
                        w_end + w - at
                    } else if p > 0 {
                        w_end - at
                    } else {
                        0
                    };
                    prop_assert_eq!(
                        r.decision.reset_after.as_micros(),
                        u128::from(reset),
                        "{} under {} {}",
                        value,
                        l,
                        w
                    );
                    Ok(())
                })
            },
        )
        .unwrap();
}

/// Named window values that are not what the scripts write are the typed error for a foreign
/// value, and stay as they were.
#[test]
fn malformed_named_window_states_are_refused() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let q = Quota::per_hour(5).unwrap();
    runtime().block_on(async {
        async fn refused<A: RedisAlgorithm>(l: &RedisRateLimiter<A>, what: &str) {
            for r in [
                l.check("u").await,
                l.peek("u").await,
                l.reward("u", 1).await.map(|d| d.decision),
            ] {
                let e = r.unwrap_err();
                let RedisLimitError::Server(s) = &e else {
                    panic!("{what}: {e:?}");
                };
                assert_eq!(s.kind(), ServerErrorKind::Script, "{what}: {e}");
            }
        }
        /// `bad` set at `l`'s key: refused, and left as it was.
        async fn refused_as_set<A: RedisAlgorithm>(
            conn: &mut redis::Connection,
            l: &RedisRateLimiter<A>,
            bad: &str,
        ) {
            let key = l.state_key("u");
            let () = conn.set(&key, bad).unwrap();
            refused(l, bad).await;
            let kept: String = conn.get(&key).unwrap();
            assert_eq!(kept, bad);
        }
        let sliding = named(&server, q, SlidingWindow::new(4)).await;
        for bad in [
            "5:1",
            "5,3600000000,5:1",
            "5,3600000000,4,",
            "5,3600000000,0,5:1",
            "5,3600000000,65,5:1",
            "5,3600000000,7,5:1",
            "5,0,4,5:1",
            "0,3600000000,4,5:1",
            "5,3600000000,4,3600000000,9,5:1",
            "5,3600000000,4,3600000001,,5:1",
            "5,3600000000,4,5:1:0",
            "5,3600000000,4,05:1",
            "5,3600000000,4,=5:1=2",
        ] {
            refused_as_set(&mut conn, &sliding, bad).await;
        }
        let weighted = named(&server, q, WeightedWindow).await;
        for bad in [
            "5:1:0",
            "5,3600000000,",
            "5,0,5:1:0",
            "5,3600000000,5:0:0",
            "x,1,1:1:1",
            "5,3600000000,5:1",
        ] {
            refused_as_set(&mut conn, &weighted, bad).await;
        }
        let log = named(&server, q, SlidingLog).await;
        let key = log.state_key("u");
        let now = server_us(&mut conn);
        let grant = format!("{now}:1");
        let members: [&[(i64, &str)]; 8] = [
            // An entry without the quota member, the quota member alone, two of them.
            &[(0, "")],
            &[(-2, "q:5:3600000000")],
            &[(-2, "q:5:3600000000"), (-2, "q:6:3600000000"), (0, "")],
            &[(-2, "q:5:3600000000:"), (0, "")],
            &[(-2, "q:5:3600000000:3600000000:1"), (0, "")],
            &[(-2, "q:0:3600000000"), (0, "")],
            &[(-2, "q:5:3600000000:7200000000"), (0, "")],
            &[(-3, "q:5:3600000000"), (0, "")],
        ];
        for set in members {
            let _: () = conn.del(&key).unwrap();
            for &(score, m) in set {
                let (score, m) = if m.is_empty() {
                    (i64::try_from(now).unwrap(), grant.as_str())
                } else {
                    (score, m)
                };
                let _: () = conn.zadd(&key, m, score).unwrap();
            }
            let before: Vec<(String, f64)> = conn.zrange_withscores(&key, 0, -1).unwrap();
            refused(&log, &format!("{set:?}")).await;
            let after: Vec<(String, f64)> = conn.zrange_withscores(&key, 0, -1).unwrap();
            assert_eq!(before, after, "{set:?}");
        }
        // An unnamed log refuses a named set, as a set it did not write.
        let unnamed = RedisRateLimiter::builder(q)
            .algorithm(SlidingLog)
            .unwrap()
            .deadline(Duration::from_secs(2))
            .connect(&server.url())
            .await
            .unwrap();
        let key = unnamed.state_key("u");
        let _: () = conn.zadd(&key, "q:5:3600000000", -2).unwrap();
        let _: () = conn.zadd(&key, &grant, now).unwrap();
        refused(&unnamed, "a named set under an unnamed log").await;
    });
}

/// Hostile bytes at named window states (and near-misses of what the scripts write): either
/// refused as a foreign value with the key unchanged, or read as a state the script writes.
#[test]
fn hostile_named_window_states_are_refused_or_read() {
    let server = RedisServer::start();
    let conn = std::cell::RefCell::new(server.conn());
    let rt = runtime();
    let q = Quota::per_second(10).unwrap();
    let sliding = rt.block_on(named(&server, q, SlidingWindow::new(4)));
    let weighted = rt.block_on(named(&server, q, WeightedWindow));
    let log = rt.block_on(named(&server, q, SlidingLog));
    let near = ("[0-9]{1,3}", "[0-9]{1,8}", "[0-9]{0,3}", "[0-9:,=]{0,24}")
        .prop_map(|(l, w, k, rest)| format!("{l},{w},{k},{rest}").into_bytes());
    let value = prop_oneof![prop::collection::vec(any::<u8>(), 0..40), near];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    /// Runs one check on `bytes` at `l`'s key: refused and unchanged, or left as `own` says.
    fn one<A: RedisAlgorithm>(
        rt: &tokio::runtime::Runtime,
        conn: &std::cell::RefCell<redis::Connection>,
        l: &RedisRateLimiter<A>,
        bytes: &[u8],
        own: impl Fn(&[u8]) -> bool,
    ) -> Result<(), TestCaseError> {
        let key = l.state_key("u");
        let () = conn.borrow_mut().set(&key, bytes).unwrap();
        let r = rt.block_on(l.check("u"));
        let now: Option<Vec<u8>> = conn.borrow_mut().get(&key).unwrap();
        match r {
            Err(RedisLimitError::Server(s)) => {
                prop_assert_eq!(s.kind(), ServerErrorKind::Script);
                prop_assert_eq!(now.as_deref(), Some(bytes));
            }
            Err(e) => return Err(TestCaseError::fail(format!("{e:?}"))),
            Ok(_) => {
                if let Some(v) = now {
                    prop_assert!(own(&v), "{:?}", String::from_utf8_lossy(&v));
                }
            }
        }
        Ok(())
    }
    let digits = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    runner
        .run(&value, |bytes| {
            one(&rt, &conn, &sliding, &bytes, |v| {
                v.strip_prefix(b"10,1000000,4,".as_slice())
                    .is_some_and(|rest| {
                        let rest = rest.strip_prefix(b"=").unwrap_or(rest);
                        rest.split(|&c| c == b':' || c == b'=').all(digits)
                    })
            })?;
            one(&rt, &conn, &weighted, &bytes, |v| {
                v.strip_prefix(b"10,1000000,".as_slice())
                    .is_some_and(|rest| {
                        rest.split(|&c| c == b':').count() == 3
                            && rest.split(|&c| c == b':').all(digits)
                    })
            })
        })
        .unwrap();
    // The log's quota member: hostile bytes beside one grant.
    let member = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        "q:[0-9:]{0,30}".prop_map(String::into_bytes)
    ];
    runner
        .run(&member, |m| {
            let key = log.state_key("u");
            let mut c = conn.borrow_mut();
            let now = server_us(&mut c);
            let _: () = c.del(&key).unwrap();
            let _: () = c.zadd(&key, &m, -2).unwrap();
            let _: () = c.zadd(&key, format!("{now}:1"), now).unwrap();
            let before: Vec<(Vec<u8>, f64)> = c.zrange_withscores(&key, 0, -1).unwrap();
            drop(c);
            let r = rt.block_on(log.check("u"));
            let after: Vec<(Vec<u8>, f64)> =
                conn.borrow_mut().zrange_withscores(&key, 0, -1).unwrap();
            match r {
                Err(RedisLimitError::Server(s)) => {
                    prop_assert_eq!(s.kind(), ServerErrorKind::Script);
                    prop_assert_eq!(after, before);
                }
                Err(e) => return Err(TestCaseError::fail(format!("{e:?}"))),
                Ok(_) => {
                    let q: Vec<&Vec<u8>> =
                        after.iter().filter(|e| e.1 == -2.0).map(|e| &e.0).collect();
                    prop_assert_eq!(q.len(), 1);
                    prop_assert!(
                        q[0].starts_with(b"q:") && q[0][2..].split(|&c| c == b':').all(digits)
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}
