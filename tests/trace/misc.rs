//! `Quota`'s constructors, `LeasedRateLimiter`, and `all_or_none` over direct and keyed
//! limiters.

use std::num::NonZeroU32;
use std::time::Duration;

use tollgate::{
    all_or_none, Clock, KeyedRateLimiter, LeasedRateLimiter, ManualClock, Quota, QuotaError,
    RateLimiter, MAX_NANOS,
};

use crate::harness::{call, seed_of, FixedHasher, Rng, Scale, Show, Trace};

/// A quota and what it derives: its interval, tolerance and window limit.
fn quota_line(q: Result<Quota, QuotaError>) -> String {
    match q {
        Ok(q) => format!(
            "Ok([{q}] interval={:?} tolerance={:?} window_limit={})",
            q.interval(),
            q.tolerance(),
            q.window_limit().show()
        ),
        Err(e) => format!("Err({e:?})"),
    }
}

fn quotas(t: &mut Trace) {
    let name = "quota/constructors";
    let seed = seed_of(name);
    let mut rng = Rng::new(seed);
    t.scenario(name, seed, "random counts, periods and bursts");
    let counts = [0, 1, 2, 3, 7, 10, 60, 1000, 1 << 32, 1 << 62, u64::MAX];
    let periods = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_nanos(7),
        Duration::from_micros(1),
        Duration::from_millis(333),
        Duration::from_secs(1),
        Duration::from_secs(86_400),
        Duration::from_nanos(MAX_NANOS),
        Duration::from_nanos(MAX_NANOS + 1),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    for _ in 0..300 {
        let (op, r) = match rng.below(10) {
            0..=4 => {
                let c = rng.pick(&counts);
                let p = rng.pick(&periods);
                let b = rng.pick(&counts);
                (
                    format!("new({c},{p:?}).with_burst({b})"),
                    quota_line(Quota::new(c, p).and_then(|q| q.with_burst(b))),
                )
            }
            5 => {
                let c = rng.pick(&counts);
                let p = rng.pick(&periods);
                (format!("new({c},{p:?})"), quota_line(Quota::new(c, p)))
            }
            6 => {
                let p = rng.pick(&periods);
                (
                    call("from_interval", &[&p]),
                    quota_line(Quota::from_interval(p)),
                )
            }
            7 => {
                let c = rng.pick(&counts);
                let (f, q): (&str, Result<Quota, QuotaError>) = match rng.below(4) {
                    0 => ("per_second", Quota::per_second(c)),
                    1 => ("per_minute", Quota::per_minute(c)),
                    2 => ("per_hour", Quota::per_hour(c)),
                    _ => ("per_day", Quota::per_day(c)),
                };
                (call(f, &[&c]), quota_line(q))
            }
            _ => {
                let b = rng.pick(&[0, 1, 14, 1 << 40, u64::MAX]);
                let c = rng.pick(&counts);
                let p = rng.pick(&[0, 1, 60, 86_400, 1 << 40, u64::MAX]);
                (
                    call("from_throttle", &[&b, &c, &p]),
                    quota_line(Quota::from_throttle(b, c, p)),
                )
            }
        };
        t.rec(op, r);
    }
}

fn leased(t: &mut Trace) {
    for (name, quota, lease, steps) in [
        ("leased/100ps_lease8", Quota::per_second(100), 8, 800),
        ("leased/10ps_lease64", Quota::per_second(10), 64, 400),
        ("leased/3ph_lease2", Quota::per_hour(3), 2, 300),
    ] {
        let quota = quota.expect("a valid quota");
        let seed = seed_of(name);
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new();
        let inner = RateLimiter::builder(quota).clock(clock.clone()).build();
        // One shard: which shard a thread is dealt depends on the threads before it.
        let l = LeasedRateLimiter::with_shards(inner, NonZeroU32::new(lease).expect("> 0"), 1);
        t.scenario(
            name,
            seed,
            format!(
                "quota=[{quota}] lease={} shards={} max_over_admission={}",
                l.lease(),
                l.shards(),
                l.max_over_admission()
            ),
        );
        let scale = Scale::of(quota);
        for _ in 0..steps {
            let (op, r) = match rng.below(10) {
                0..=2 => {
                    let d = scale.advance(&mut rng);
                    clock.advance_nanos(d);
                    (call("advance", &[&d]), format!("now={}", clock.now()))
                }
                3..=7 => ("try_acquire()".to_owned(), l.try_acquire().show()),
                8 => (
                    "inner().try_acquire()".to_owned(),
                    l.inner().try_acquire().show(),
                ),
                _ => ("inner().peek()".to_owned(), l.inner().peek().show()),
            };
            t.rec(op, format!("{r} held={}", l.held()));
        }
    }
}

fn compose(t: &mut Trace) {
    let name = "all_or_none/user_and_global";
    let seed = seed_of(name);
    let mut rng = Rng::new(seed);
    let clock = ManualClock::new();
    let global_q = Quota::per_second(20).expect("a valid quota");
    let user_q = Quota::per_second(2)
        .and_then(|q| q.with_burst(3))
        .expect("a valid quota");
    let global = RateLimiter::builder(global_q).clock(clock.clone()).build();
    let users = KeyedRateLimiter::<u32>::builder(user_q)
        .clock(clock.clone())
        .hasher(FixedHasher::default())
        .build();
    t.scenario(name, seed, format!("global=[{global_q}] user=[{user_q}]"));
    t.rec("all_or_none([])", all_or_none([]).show());
    let scale = Scale {
        interval: 50_000_000,
        period: 1_000_000_000,
        limit: 3,
    };
    for _ in 0..800 {
        let k = rng.below(5) as u32;
        let (op, r) = match rng.below(10) {
            0..=2 => {
                let d = scale.advance(&mut rng);
                clock.advance_nanos(d);
                (call("advance", &[&d]), format!("now={}", clock.now()))
            }
            3..=6 => {
                let n = scale.n(&mut rng);
                let d = if rng.chance(70) {
                    Duration::ZERO
                } else {
                    scale.wait(&mut rng)
                };
                let r = all_or_none([
                    users.try_reserve_n_for(&k, n, d),
                    global.try_reserve_n_for(n, d),
                ]);
                (
                    format!("all_or_none([user k{k} try_reserve_n_for({n},{d:?}), global same])"),
                    r.show(),
                )
            }
            7 => {
                let n = scale.n(&mut rng);
                let r = all_or_none([
                    global.reserve_n(n),
                    users.reserve_n(&k, n),
                    users.reserve(&((k + 1) % 5)),
                ]);
                (
                    format!("all_or_none([global reserve_n({n}), user k{k} reserve_n({n}), user k{} reserve()])", (k + 1) % 5),
                    r.show(),
                )
            }
            8 => (
                format!("user k{k} try_acquire()"),
                users.try_acquire(&k).show(),
            ),
            _ => (
                "global try_acquire()".to_owned(),
                global.try_acquire().show(),
            ),
        };
        t.rec(
            op,
            format!(
                "{r} | global {} | user k{k} {}",
                global.peek().show(),
                users.peek(&k).show()
            ),
        );
    }
}

/// The `misc` family.
pub fn misc(t: &mut Trace) {
    quotas(t);
    leased(t);
    compose(t);
}
