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
use tollgate::{FixedWindow, Gcra, Quota};

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
        prop_assert!(c * t0 >= d * t);
        prop_assert!((c - 1) * t0 < d * t || d == 0);
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
/// refused by `connect`, as is a window algorithm whose state keeps no quota.
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
        let r = RedisRateLimiter::builder(Quota::per_second(10).unwrap())
            .algorithm(tollgate::SlidingLog)
            .unwrap()
            .state_name("login")
            .connect(&server.url())
            .await;
        assert!(matches!(r, Err(RedisLimitError::Unsupported(_))));
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
