//! The summary tables: every contender of a comparison measured in interleaved rounds
//! (`support/rounds.rs` explains why and how).
//!
//! Run (in benches/): `cargo bench --bench compare` (`-- --quick` for a smoke run), or
//! `bash benches/run.sh`, which also runs the other measurements. Prints markdown.

use std::hint::black_box;
use std::num::NonZeroU32;

use tollgate::{KeyedRateLimiter, Quota, RateLimiter, StdClock};

mod support;
use support::rounds::{case, compare, threaded, Settings};
use support::{quick, random_u64_keys, string_key, ArrayBound, DirectFloor, KeyedFloor, RawQuanta};

type FloorHasher = foldhash::fast::RandomState;

/// T = 1 ns, burst 1e9: every call is allowed (calls take tens of ns), so every call stores.
const FAST: u64 = 1_000_000_000;

fn tq_fast() -> Quota {
    Quota::per_second(FAST).unwrap()
}
fn gq_fast() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap())
}

fn direct(s: &Settings) {
    for allowed in [true, false] {
        let (tq, gq, t, burst) = if allowed {
            (tq_fast(), gq_fast(), 1, FAST)
        } else {
            (
                Quota::per_hour(1).unwrap(),
                governor::Quota::per_hour(NonZeroU32::new(1).unwrap()),
                3_600_000_000_000,
                1,
            )
        };
        let floor_std = DirectFloor::new(StdClock::new(), t, burst);
        let floor_q = DirectFloor::new(RawQuanta::new(), t, burst);
        let tg = RateLimiter::new(tq);
        let tg_q = RateLimiter::builder(tq)
            .clock(tollgate::QuantaClock::new())
            .build();
        let gov_q = governor::RateLimiter::direct(gq);
        let gov_s = governor::RateLimiter::direct_with_clock(gq, governor::clock::MonotonicClock);
        // On the denied path spend the one permit first.
        let _ = (
            floor_std.try_acquire(),
            floor_q.try_acquire(),
            tg.try_acquire(),
        );
        let _ = (gov_q.check(), gov_s.check());
        let _ = tg_q.try_acquire();

        let mut cases = vec![
            case("floor/std", |_| {
                black_box(black_box(&floor_std).try_acquire());
            }),
            case("floor/quanta", |_| {
                black_box(black_box(&floor_q).try_acquire());
            }),
            case("tollgate/std (default)", |_| {
                black_box(black_box(&tg).try_acquire());
            }),
            case("governor/quanta (default)", |_| {
                black_box(black_box(&gov_q).check().is_ok());
            }),
            case("governor/std", |_| {
                black_box(black_box(&gov_s).check().is_ok());
            }),
        ];
        cases.push(case("tollgate/quanta", |_| {
            black_box(black_box(&tg_q).try_acquire());
        }));
        let title = if allowed {
            "direct try_acquire, allowed path"
        } else {
            "direct try_acquire, denied path"
        };
        compare(
            title,
            s,
            200_000,
            &["floor/std", "floor/quanta", "governor/quanta (default)"],
            cases,
        );
        // The paths measured were the ones named: checked once, outside the timing.
        assert_eq!(tg.try_acquire(), allowed);
        assert_eq!(gov_q.check().is_ok(), allowed);
        assert_eq!(floor_std.try_acquire(), allowed);
    }
}

/// Keyed `try_acquire` on `universe` keys (1 = one hot key), u64 or short string keys.
fn keyed(s: &Settings, universe: u64, strings: bool) {
    const SEQ: usize = 1 << 20;
    let seq: Vec<u64> = if universe == 1 {
        vec![0; SEQ]
    } else {
        random_u64_keys(universe, SEQ, 0x5EED)
    };
    let names: Vec<String> = if strings {
        (0..universe).map(string_key).collect()
    } else {
        Vec::new()
    };
    let mask = SEQ as u64 - 1;

    let tg_u = KeyedRateLimiter::<u64>::new(tq_fast());
    let tg_s = KeyedRateLimiter::<String>::new(tq_fast());
    let gov_u = governor::RateLimiter::<u64, _, _>::keyed(gq_fast());
    let gov_s = governor::RateLimiter::<String, _, _>::keyed(gq_fast());
    let gov_um = governor::RateLimiter::<u64, _, _, _>::dashmap_with_clock(
        gq_fast(),
        governor::clock::MonotonicClock,
    );
    let gov_sm = governor::RateLimiter::<String, _, _, _>::dashmap_with_clock(
        gq_fast(),
        governor::clock::MonotonicClock,
    );
    let fl_u = KeyedFloor::<u64, FloorHasher, _>::new(StdClock::new(), 1, FAST);
    let fl_s = KeyedFloor::<String, FloorHasher, _>::new(StdClock::new(), 1, FAST);
    // dashmap's own default shard count (4 per core, rounded up to a power of two).
    let dm_shards =
        (std::thread::available_parallelism().map_or(1, |n| n.get()) * 4).next_power_of_two();
    let fl8_u = KeyedFloor::<u64, FloorHasher, _>::with_shards(StdClock::new(), 1, FAST, dm_shards);
    let fl8_s =
        KeyedFloor::<String, FloorHasher, _>::with_shards(StdClock::new(), 1, FAST, dm_shards);
    let dm_name = format!("floor/std, {dm_shards} shards");
    let flq_u = KeyedFloor::<u64, FloorHasher, _>::new(RawQuanta::new(), 1, FAST);
    let flq_s = KeyedFloor::<String, FloorHasher, _>::new(RawQuanta::new(), 1, FAST);
    let bound = ArrayBound::new(StdClock::new(), universe as usize, 1, FAST);
    let (tgq_u, tgq_s) = {
        let u = KeyedRateLimiter::<u64>::builder(tq_fast())
            .clock(tollgate::QuantaClock::new())
            .build();
        let s = KeyedRateLimiter::<String>::builder(tq_fast())
            .clock(tollgate::QuantaClock::new())
            .build();
        (u, s)
    };

    // Every key present before timing: the steady state of a long-running service.
    for k in 0..universe {
        if strings {
            let key = &names[k as usize];
            let _ = tg_s.try_acquire(key.as_str());
            let _ = gov_s.check_key(key);
            let _ = gov_sm.check_key(key);
            let _ = fl_s.try_acquire(key.as_str());
            let _ = fl8_s.try_acquire(key.as_str());
            let _ = flq_s.try_acquire(key.as_str());
            let _ = tgq_s.try_acquire(key.as_str());
        } else {
            let _ = tg_u.try_acquire(&k);
            let _ = gov_u.check_key(&k);
            let _ = gov_um.check_key(&k);
            let _ = fl_u.try_acquire(&k);
            let _ = fl8_u.try_acquire(&k);
            let _ = flq_u.try_acquire(&k);
            let _ = tgq_u.try_acquire(&k);
        }
    }

    let seq = &seq;
    let names = &names;
    let key = move |i: u64| seq[(i & mask) as usize];
    let mut cases = if strings {
        vec![
            case("floor/std", move |i| {
                black_box(fl_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case(&dm_name, move |i| {
                black_box(fl8_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case("tollgate/std (default)", move |i| {
                black_box(tg_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case("governor/quanta (default)", move |i| {
                black_box(gov_s.check_key(&names[key(i) as usize]).is_ok());
            }),
            case("governor/std", move |i| {
                black_box(gov_sm.check_key(&names[key(i) as usize]).is_ok());
            }),
            case("floor/quanta", move |i| {
                black_box(flq_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case("bound: hash + array CAS/std", move |i| {
                black_box(bound.try_acquire(names[key(i) as usize].as_str()));
            }),
        ]
    } else {
        vec![
            case("floor/std", move |i| {
                black_box(fl_u.try_acquire(&key(i)));
            }),
            case(&dm_name, move |i| {
                black_box(fl8_u.try_acquire(&key(i)));
            }),
            case("tollgate/std (default)", move |i| {
                black_box(tg_u.try_acquire(&key(i)));
            }),
            case("governor/quanta (default)", move |i| {
                black_box(gov_u.check_key(&key(i)).is_ok());
            }),
            case("governor/std", move |i| {
                black_box(gov_um.check_key(&key(i)).is_ok());
            }),
            case("floor/quanta", move |i| {
                black_box(flq_u.try_acquire(&key(i)));
            }),
            case("bound: hash + array CAS/std", move |i| {
                black_box(bound.try_acquire(&key(i)));
            }),
        ]
    };
    cases.push(if strings {
        case("tollgate/quanta", move |i| {
            black_box(tgq_s.try_acquire(names[key(i) as usize].as_str()));
        })
    } else {
        case("tollgate/quanta", move |i| {
            black_box(tgq_u.try_acquire(&key(i)));
        })
    });
    let what = match universe {
        1 => "one hot key".to_string(),
        10_000 => "10k random keys".to_string(),
        1_000_000 => "1M random keys".to_string(),
        n => format!("{n} random keys"),
    };
    let kind = if strings { "String" } else { "u64" };
    compare(
        &format!("keyed try_acquire, {what}, {kind} keys"),
        s,
        if universe >= 1_000_000 {
            100_000
        } else {
            200_000
        },
        &["floor/std", "floor/quanta", "governor/quanta (default)"],
        cases,
    );
}

/// Aggregate throughput of 2 threads vs 1, on disjoint keys and on one shared key.
fn scaling(s: &Settings) {
    const SEQ: usize = 1 << 16;
    let seq = random_u64_keys(5_000, SEQ, 0xD15C);
    let mask = SEQ as u64 - 1;
    // Thread t only ever touches keys with k % 2 == t: disjoint sets of 5k keys each.
    let key = |t: usize, i: u64| seq[(i & mask) as usize] * 2 + t as u64;

    let tg = KeyedRateLimiter::<u64>::new(tq_fast());
    let gov = governor::RateLimiter::<u64, _, _>::keyed(gq_fast());
    let fl = KeyedFloor::<u64, FloorHasher, _>::new(StdClock::new(), 1, FAST);
    for k in 0..10_000u64 {
        let _ = (tg.try_acquire(&k), gov.check_key(&k), fl.try_acquire(&k));
    }
    let (tg, gov, fl) = (&tg, &gov, &fl);
    let cases = vec![
        threaded("tollgate 1 thread", 1, move |t, i| {
            black_box(tg.try_acquire(&key(t, i)));
        }),
        threaded("tollgate 2 threads", 2, move |t, i| {
            black_box(tg.try_acquire(&key(t, i)));
        }),
        threaded("floor 1 thread", 1, move |t, i| {
            black_box(fl.try_acquire(&key(t, i)));
        }),
        threaded("floor 2 threads", 2, move |t, i| {
            black_box(fl.try_acquire(&key(t, i)));
        }),
        threaded("governor 1 thread", 1, move |t, i| {
            black_box(gov.check_key(&key(t, i)).is_ok());
        }),
        threaded("governor 2 threads", 2, move |t, i| {
            black_box(gov.check_key(&key(t, i)).is_ok());
        }),
    ];
    compare(
        "keyed, disjoint 5k-key sets per thread (ns/op is aggregate wall time / total ops)",
        s,
        200_000,
        &["tollgate 1 thread", "floor 1 thread", "governor 1 thread"],
        cases,
    );

    let hot = 7u64;
    let direct = RateLimiter::new(tq_fast());
    let direct = &direct;
    let cases = vec![
        threaded("tollgate keyed 1 thread", 1, move |_, _| {
            black_box(tg.try_acquire(&hot));
        }),
        threaded("tollgate keyed 2 threads", 2, move |_, _| {
            black_box(tg.try_acquire(&hot));
        }),
        threaded("floor keyed 2 threads", 2, move |_, _| {
            black_box(fl.try_acquire(&hot));
        }),
        threaded("governor keyed 2 threads", 2, move |_, _| {
            black_box(gov.check_key(&hot).is_ok());
        }),
        threaded("tollgate direct 1 thread", 1, move |_, _| {
            black_box(direct.try_acquire());
        }),
        threaded("tollgate direct 2 threads", 2, move |_, _| {
            black_box(direct.try_acquire());
        }),
    ];
    compare(
        "one shared key (and the direct limiter) (ns/op is aggregate wall time / total ops)",
        s,
        200_000,
        &["tollgate keyed 1 thread", "tollgate direct 1 thread"],
        cases,
    );
}

/// `--only SECTION[,SECTION]` (direct, keyed, scaling) runs just those; default all.
fn wanted(section: &str) -> bool {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--only") {
        Some(i) => args
            .get(i + 1)
            .is_some_and(|list| list.split(',').any(|s| s == section)),
        None => true,
    }
}

fn main() {
    let s = Settings {
        rounds: if quick() { 5 } else { 21 },
    };
    println!(
        "tollgate compare: {} interleaved rounds; ratios are medians of per-round ratios",
        s.rounds
    );
    if wanted("direct") {
        direct(&s);
    }
    if wanted("keyed") {
        for universe in [1, 10_000, 1_000_000] {
            for strings in [false, true] {
                keyed(&s, universe, strings);
            }
        }
    }
    if wanted("scaling") {
        scaling(&s);
    }
}
