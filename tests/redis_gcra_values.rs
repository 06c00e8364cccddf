//! The GCRA script reads a state key's value by one rule, whichever way decides the check (the
//! fast way for a plain or same-quota named TAT, the general way for the rest): a value is
//! taken only if it is what the script writes, every number in it the decimal digits of an
//! integer without a leading zero within its bounds (a TAT at most the end of time; a named
//! state's quota `b,T` with `1 <= b, T` and `b * T <= 2^51`); anything else is a typed error
//! and the key is left as it was. Near misses of those bounds (leading zeros, one past the end
//! of time, past 2^53 where a double rounds) and random digit strings, on a plain and a named
//! limiter. A real server on loopback; every loop is bounded.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis_support::{runtime, RedisServer};
use tollgate::redis::{RedisLimitError, RedisRateLimiter, ServerErrorKind};
use tollgate::Quota;

/// The scripts' end of time in µs (`MAX_NANOS / 1000`).
const MAX_US: u128 = 4_611_686_018_427_387;
/// The most a quota's `b * T` is.
const MAX_SPAN: u128 = 1 << 51;

/// `s` as the script writes an integer in `[lo, hi]`: digits, no leading zero.
fn canonical(s: &str, lo: u128, hi: u128) -> bool {
    let digits = !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !digits || (s.len() > 1 && s.starts_with('0')) || s.len() > 30 {
        return false;
    }
    let x: u128 = s.parse().unwrap();
    lo <= x && x <= hi
}

/// Whether the script takes `v` as a state (no holes here: no `:`), named or not.
fn taken(v: &str, named: bool) -> bool {
    if !named {
        return canonical(v, 1, MAX_US);
    }
    let mut parts = v.splitn(3, ',');
    let (Some(b), Some(t), Some(tat)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    canonical(b, 1, MAX_SPAN)
        && canonical(t, 1, MAX_SPAN)
        && b.parse::<u128>().unwrap() * t.parse::<u128>().unwrap() <= MAX_SPAN
        && canonical(tat, 1, MAX_US)
}

/// Numbers at the bounds the script checks, and just past them.
fn near_bounds() -> Vec<&'static str> {
    vec![
        "0",
        "00",
        "05",
        "1",
        "4611686018427386",
        "4611686018427387",
        "4611686018427388",
        "04611686018427387",
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "9999999999999999",
        "10000000000000000",
        "2251799813685248",
        "2251799813685249",
        "100",
        "10000",
        "0100",
        "010000",
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(near_bounds()).prop_map(str::to_owned),
        2 => "[0-9]{0,18}",
        1 => "[1-9][0-9]{0,5}",
    ]
}

/// A value for a plain limiter's key, or for a named one's (`b,T,TAT` shaped).
fn value() -> impl Strategy<Value = (bool, String)> {
    let head = prop_oneof![
        3 => Just("100,10000,".to_owned()),
        1 => (number(), number()).prop_map(|(b, t)| format!("{b},{t},")),
    ];
    prop_oneof![
        (Just(false), number()),
        (
            Just(true),
            (head, number()).prop_map(|(h, n)| format!("{h}{n}"))
        ),
    ]
}

/// The key's value and expiry.
fn snapshot(conn: &mut redis::Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    let v = redis::cmd("GET").arg(key).query(conn).unwrap();
    let at = redis::cmd("PEXPIRETIME").arg(key).query(conn).unwrap();
    (v, at)
}

#[test]
fn a_gcra_value_is_taken_exactly_when_the_script_could_have_written_it() {
    let server = RedisServer::start();
    let rt = runtime();
    let quota = Quota::per_second(100).unwrap();
    let (plain, named) = rt.block_on(async {
        // Not the default 50 ms deadline, which a stall of a loaded machine can outlast: the
        // check below must be Redis's answer, never a `Timeout`.
        let plain = RedisRateLimiter::builder(quota)
            .prefix("values")
            .deadline(Duration::from_secs(2))
            .connect(&server.url())
            .await
            .unwrap();
        let named = RedisRateLimiter::builder(quota)
            .prefix("values")
            .state_name("named")
            .deadline(Duration::from_secs(2))
            .connect(&server.url())
            .await
            .unwrap();
        (plain, named)
    });
    // A Fn closure runs each case: the connection is borrowed per case.
    let conn = std::cell::RefCell::new(server.conn());
    let mut runner = TestRunner::new(Config {
        cases: 400,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&value(), |(is_named, v)| {
            let mut conn = conn.borrow_mut();
            let conn = &mut *conn;
            let l = if is_named { &named } else { &plain };
            let key = l.state_key("k");
            redis::cmd("SET")
                .arg(&key)
                .arg(&v)
                .arg("PX")
                .arg(600_000)
                .query::<()>(conn)
                .unwrap();
            let before = snapshot(conn, &key);
            let r = rt.block_on(l.check("k"));
            if taken(&v, is_named) {
                prop_assert!(r.is_ok(), "{:?} refused: {:?}", v, r);
            } else {
                let Err(RedisLimitError::Server(e)) = &r else {
                    return Err(TestCaseError::fail(format!("{v:?} taken: {r:?}")));
                };
                prop_assert_eq!(e.kind(), ServerErrorKind::Script, "{:?}: {}", v, e);
                prop_assert_eq!(snapshot(conn, &key), before, "{:?} changed", v);
            }
            Ok(())
        })
        .unwrap();
}
