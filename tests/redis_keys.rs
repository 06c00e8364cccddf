//! Key names, expiry and writes on a real Redis: algorithms and quotas never share a key,
//! every key expires exactly when its state stops carrying information, and denials and peeks
//! write nothing.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::{eventually, RedisServer};
use tollgate::redis::{RedisAlgorithm, RedisLimitError, RedisRateLimiter};
use tollgate::{FixedWindow, Gcra, Quota, QuotaError, SlidingLog, SlidingWindow, WeightedWindow};

async fn connect<A: RedisAlgorithm>(server: &RedisServer, alg: A, q: Quota) -> RedisRateLimiter<A> {
    RedisRateLimiter::builder(q)
        .algorithm(alg)
        .unwrap()
        .deadline(Duration::from_secs(2))
        .connect(&server.url())
        .await
        .unwrap()
}

/// Writes the server has applied so far (its dirty counter).
fn writes(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut server.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn algorithms_and_quotas_never_share_a_key() {
    let server = RedisServer::start();
    let q = Quota::per_minute(2).unwrap();
    let gcra = connect(&server, Gcra, q).await;
    let names = [
        gcra.state_key("{u1}:x"),
        connect(&server, FixedWindow::epoch_aligned(), q)
            .await
            .state_key("{u1}:x"),
        connect(&server, WeightedWindow, q)
            .await
            .state_key("{u1}:x"),
        connect(&server, SlidingLog, q).await.state_key("{u1}:x"),
        connect(&server, SlidingWindow::new(4), q)
            .await
            .state_key("{u1}:x"),
        connect(&server, SlidingWindow::new(6), q)
            .await
            .state_key("{u1}:x"),
        connect(&server, Gcra, q.with_burst(3).unwrap())
            .await
            .state_key("{u1}:x"),
        connect(&server, Gcra, Quota::per_minute(3).unwrap())
            .await
            .state_key("{u1}:x"),
    ];
    let mut unique = names.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert_eq!(names[0], "tollgate:gcra:30000000:2:{u1}:x");
    // The other algorithms' names are as they were; the sliding window's k comes before the
    // user's key, which stays last.
    assert_eq!(names[3], "tollgate:log:60000000:2:{u1}:x");
    assert_eq!(names[4], "tollgate:sliding:60000000:2:4:{u1}:x");
    // Exhausting the key under one quota leaves it untouched under another.
    assert!(gcra.try_acquire_n("{u1}:x", 2).await.is_ok());
    assert!(!gcra.try_acquire("{u1}:x").await.unwrap());
    assert!(
        gcra.check_n_with("{u1}:x", 1, q.with_burst(3).unwrap())
            .await
            .unwrap()
            .allowed
    );
}

/// Admits once, then checks the key's expiry equals the end of the information:
/// `ceil((server time + reset_after) / 1 ms)`, and that the key is gone after it.
async fn expires_exactly<A: RedisAlgorithm>(server: &RedisServer, alg: A, q: Quota) {
    let l = connect(server, alg, q).await;
    // A decision near the end of a short window may see its key expire before the read
    // (-2: no key) on a slow machine: decide again, a bounded number of times.
    let mut tries = 0;
    let (end_us, at) = loop {
        let d = l.decide_n("k", 2).await.unwrap();
        assert!(d.decision.allowed);
        let end_us = (d.server_time.unwrap() + d.decision.reset_after).as_micros() as i64;
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg(l.state_key("k"))
            .query(&mut server.conn())
            .unwrap();
        tries += 1;
        if at != -2 || tries == 20 {
            break (end_us, at);
        }
        assert!(l.reset("k").await.is_ok());
    };
    assert_eq!(at, (end_us + 999) / 1000, "{}", A::NAME);
    let gone = eventually(200, Duration::from_millis(5), async || {
        let n: u64 = redis::cmd("EXISTS")
            .arg(l.state_key("k"))
            .query(&mut server.conn())
            .unwrap();
        n == 0
    })
    .await;
    assert!(gone, "{} key outlived its information", A::NAME);
    // And the next decision sees a fresh key.
    assert_eq!(l.peek("k").await.unwrap().remaining, q.burst());
}

/// Sliding windows of different `k`, or a per-call quota, on the same user key: separate Redis
/// keys, so exhausting one leaves the others whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_windows_of_different_k_never_share_state() {
    let server = RedisServer::start();
    let q = Quota::per_hour(2).unwrap();
    let four = connect(&server, SlidingWindow::new(4), q).await;
    let six = connect(&server, SlidingWindow::new(6), q).await;
    assert!(four.try_acquire_n("{u1}:x", 2).await.is_ok());
    let d = four.check("{u1}:x").await.unwrap();
    assert!(!d.allowed && d.remaining == 0);
    let d = six.peek("{u1}:x").await.unwrap();
    assert_eq!((d.remaining, d.reset_after), (2, Duration::ZERO));
    assert!(six.try_acquire_n("{u1}:x", 2).await.is_ok());
    let exists = |name: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(name)
            .query::<u64>(&mut server.conn())
            .unwrap()
            == 1
    };
    assert!(exists("tollgate:sliding:3600000000:2:4:{u1}:x"));
    assert!(exists("tollgate:sliding:3600000000:2:6:{u1}:x"));
    // A per-call quota runs the limiter's k on its own window and limit, under its own key.
    let per_call = Quota::new(3, Duration::from_secs(60)).unwrap();
    let d = four.check_n_with("{u1}:x", 3, per_call).await.unwrap();
    assert!(d.allowed && d.limit == 3 && d.remaining == 0);
    assert!(exists("tollgate:sliding:60000000:3:4:{u1}:x"));
    let d = four.check_n_with("{u1}:x", 1, per_call).await.unwrap();
    assert!(!d.allowed && d.retry_after.is_some());
    assert!(!four.check("{u1}:x").await.unwrap().allowed);
}

/// The sliding window's key expires when its newest sub-window leaves the window, computed
/// here from the server times alone: admit in one sub-window, then in a later one, and the
/// expiry follows the later one, `ceil(((floor(now / g) + k) * g) / 1 ms)`. A denial and a
/// peek leave it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_keys_expire_when_their_newest_sub_window_leaves() {
    let server = RedisServer::start();
    // 4 per second in 4 sub-windows of 250 ms (250_000 us).
    let (k, g) = (4u64, 250_000u64);
    let l = connect(
        &server,
        SlidingWindow::new(4),
        Quota::new(4, Duration::from_secs(1)).unwrap(),
    )
    .await;
    let expiry = || -> (i64, i64) {
        let mut c = server.conn();
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg(l.state_key("k"))
            .query(&mut c)
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(l.state_key("k"))
            .query(&mut c)
            .unwrap();
        (at, ttl)
    };
    let sub = |t: Duration| t.as_micros() as u64 / g;
    let expected = |t: Duration| ((sub(t) + k) * g).div_ceil(1000) as i64;
    let first = l.decide_n("k", 3).await.unwrap();
    assert!(first.decision.allowed);
    let t1 = first.server_time.unwrap();
    let (at, ttl) = expiry();
    assert_eq!(at, expected(t1));
    assert!(ttl > 0 && ttl <= 1000, "PTTL {ttl} ms");
    // 3 + 2 > 4: denied while the first sub-window counts (for 750 ms at least).
    let denied = l.decide_n("k", 2).await.unwrap();
    assert!(!denied.decision.allowed);
    assert_eq!(l.peek("k").await.unwrap().remaining, 1);
    assert_eq!(expiry().0, at, "a denial or a peek moved the expiry");
    // Into a later sub-window: the expiry moves with the newest counted one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = l.decide_n("k", 1).await.unwrap();
    let t2 = second.server_time.unwrap();
    assert!(sub(t2) > sub(t1) && sub(t2) < sub(t1) + k);
    assert_eq!(expiry().0, expected(t2));
    assert!(expiry().0 > at);
    // Both sub-windows count until the first leaves: nothing left, reset at the second's end.
    assert!(second.decision.allowed);
    assert_eq!(second.decision.remaining, 0);
    assert_eq!(
        (t2 + second.decision.reset_after).as_micros() as u64,
        (sub(t2) + k) * g
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_expires_when_its_state_stops_carrying_information() {
    let server = RedisServer::start();
    let q = Quota::new(4, Duration::from_millis(100)).unwrap();
    expires_exactly(&server, Gcra, q).await;
    expires_exactly(&server, FixedWindow::epoch_aligned(), q).await;
    expires_exactly(&server, WeightedWindow, q).await;
    expires_exactly(&server, SlidingLog, q).await;
    expires_exactly(&server, SlidingWindow::new(4), q).await;
}

async fn denials_write_nothing<A: RedisAlgorithm>(server: &RedisServer, alg: A) {
    // Per hour: the fixed window (aligned to the epoch) must not roll over mid-test.
    let l = connect(server, alg, Quota::per_hour(2).unwrap()).await;
    let before = writes(server);
    assert!(l.check_n("k", 2).await.unwrap().allowed);
    let after_admission = writes(server);
    assert!(
        after_admission > before,
        "{}: an admission must write",
        A::NAME
    );
    for n in [1, 2, 3, 0] {
        let d = l.check_n("k", n).await.unwrap();
        assert_eq!(d.allowed, n == 0);
    }
    assert_eq!(
        writes(server),
        after_admission,
        "{}: a denial or peek wrote",
        A::NAME
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_and_peeks_write_nothing() {
    let server = RedisServer::start();
    denials_write_nothing(&server, Gcra).await;
    denials_write_nothing(&server, FixedWindow::epoch_aligned()).await;
    denials_write_nothing(&server, WeightedWindow).await;
    denials_write_nothing(&server, SlidingLog).await;
    denials_write_nothing(&server, SlidingWindow::new(6)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configuration_is_a_typed_error() {
    let server = RedisServer::start();
    let q = Quota::per_second(1).unwrap();
    let e = RedisRateLimiter::builder(q)
        .prefix("a{b}")
        .connect(&server.url())
        .await;
    assert!(matches!(e, Err(RedisLimitError::InvalidPrefix(_))));
    // 72 years per permit: beyond the scripts' exact range.
    let too_long = Quota::from_interval(Duration::from_secs(72 * 365 * 24 * 3600)).unwrap();
    let e = RedisRateLimiter::builder(too_long)
        .connect(&server.url())
        .await;
    assert!(matches!(e, Err(RedisLimitError::QuotaOutOfRange(_))));
    let l = connect(&server, Gcra, q).await;
    let e = l.check_n_with("k", 1, too_long).await;
    assert!(matches!(e, Err(RedisLimitError::QuotaOutOfRange(_))));
    // A fixed window counted from a clock's origin has no meaning shared across processes.
    let e = RedisRateLimiter::builder(q)
        .algorithm(FixedWindow::new())
        .unwrap()
        .connect(&server.url())
        .await;
    assert!(matches!(e, Err(RedisLimitError::Unsupported(_))), "{e:?}");
    // What the in-process windows refuse, Redis refuses the same way (a burst is not a
    // window), and at the same call: `algorithm`.
    let bursty = Quota::per_second(10).unwrap().with_burst(3).unwrap();
    let e = RedisRateLimiter::builder(bursty).algorithm(SlidingLog);
    assert!(matches!(e, Err(QuotaError::Unsupported(_))), "{e:?}");
    let in_process = tollgate::RateLimiter::builder(bursty).algorithm(SlidingLog);
    assert_eq!(in_process.err(), e.err());
    let log = connect(&server, SlidingLog, q).await;
    let e = log.check_n_with("k", 1, bursty).await;
    assert!(matches!(e, Err(RedisLimitError::InvalidQuota(_))));
    // A sliding window whose sub-windows are not whole microseconds (1001 us / 8) runs in
    // process but not on Redis: refused when connecting and per call, nothing written.
    let odd = Quota::new(10, Duration::from_micros(1001)).unwrap();
    assert!(tollgate::RateLimiter::builder(odd)
        .algorithm(SlidingWindow::new(8))
        .is_ok());
    let e = RedisRateLimiter::builder(odd)
        .algorithm(SlidingWindow::new(8))
        .unwrap()
        .connect(&server.url())
        .await;
    assert!(matches!(e, Err(RedisLimitError::Unsupported(_))), "{e:?}");
    let sliding = connect(
        &server,
        SlidingWindow::new(8),
        Quota::per_second(8).unwrap(),
    )
    .await;
    let before = writes(&server);
    let e = sliding.check_n_with("k", 1, odd).await;
    assert!(matches!(e, Err(RedisLimitError::Unsupported(_))), "{e:?}");
    // What the in-process sliding window refuses (8 sub-windows of 1001 ns) is refused as in
    // process.
    let e = sliding
        .check_n_with("k", 1, Quota::new(1, Duration::from_nanos(1001)).unwrap())
        .await;
    assert!(
        matches!(
            e,
            Err(RedisLimitError::InvalidQuota(QuotaError::Unsupported(_)))
        ),
        "{e:?}"
    );
    assert_eq!(writes(&server), before);
    let e =
        RedisRateLimiter::builder(Quota::per_minute(7).unwrap()).algorithm(SlidingWindow::new(7));
    assert!(matches!(e, Err(QuotaError::Unsupported(_))), "{e:?}");
    // Nobody listens on the server's port once it is gone.
    let url = server.url();
    drop(server);
    // The limiter is built all the same (it connects in the background), and a call says
    // Redis is unavailable.
    let l = RedisRateLimiter::builder(q)
        .connect_timeout(Duration::from_millis(300))
        .connect(&url)
        .await
        .unwrap();
    let e = l.check("k").await.unwrap_err();
    assert!(e.is_unavailable(), "{e:?}");
    // A URL that does not parse is refused at once.
    let e = RedisRateLimiter::builder(q).connect("redis://[nope/").await;
    assert!(
        matches!(&e, Err(RedisLimitError::InvalidUrl { .. })),
        "{e:?}"
    );
}
