//! The summary tables: every contender of a comparison measured in interleaved rounds
//! (`support/rounds.rs` explains why and how).
//!
//! Run (in benches/): `cargo bench --bench compare` (`-- --quick` for a smoke run), or
//! `bash benches/run.sh`, which also runs the other measurements. Prints markdown.

use std::hint::black_box;
use std::num::NonZeroU32;

use std::time::Duration;

use tollgate::{CoarseClock, DefaultClock, KeyedRateLimiter, Quota, RateLimiter, StdClock};

mod support;
use support::rounds::{case, compare, threaded, Settings, ROUNDS};
use support::{random_u64_keys, string_key, ArrayBound, DirectFloor, KeyedFloor, RawQuanta};

type FloorHasher = foldhash::fast::RandomState;

/// T = 1 ns, burst 1e9: every call is allowed (calls take tens of ns), so every call stores.
const FAST: u64 = 1_000_000_000;

/// The two defaults: tollgate with no clock chosen (`DefaultClock`), governor's `direct`/`keyed`
/// (quanta).
const TG_DEFAULT: &str = "tollgate (default)";
const GOV_DEFAULT: &str = "governor (default)";

fn tq_fast() -> Quota {
    Quota::per_second(FAST).unwrap()
}
fn gq_fast() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(FAST as u32).unwrap())
}

/// Direct limiter, single thread: default-vs-default first (tollgate's `DefaultClock`, the TSC
/// here, against governor's quanta), then each on the other's clock, `check()` (the full
/// `Decision`) against `try_acquire`, and the floors.
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
        let floor_d = DirectFloor::new(DefaultClock::new(), t, burst);
        let floor_std = DirectFloor::new(StdClock::new(), t, burst);
        let floor_q = DirectFloor::new(RawQuanta::new(), t, burst);
        let tg = RateLimiter::new(tq);
        let tg_check = RateLimiter::new(tq);
        let tg_s = RateLimiter::builder(tq).clock(StdClock::new()).build();
        let gov_q = governor::RateLimiter::direct(gq);
        let gov_s = governor::RateLimiter::direct_with_clock(gq, governor::clock::MonotonicClock);
        // On the denied path spend the one permit first.
        let _ = (
            floor_d.try_acquire(),
            floor_std.try_acquire(),
            floor_q.try_acquire(),
            tg.try_acquire(),
            tg_check.try_acquire(),
            tg_s.try_acquire(),
        );
        let _ = (gov_q.check(), gov_s.check());

        let cases = vec![
            case(TG_DEFAULT, |_| {
                black_box(black_box(&tg).try_acquire());
            }),
            case(GOV_DEFAULT, |_| {
                black_box(black_box(&gov_q).check().is_ok());
            }),
            case("tollgate check() (default clock)", |_| {
                black_box(black_box(&tg_check).check());
            }),
            case("tollgate/std (StdClock)", |_| {
                black_box(black_box(&tg_s).try_acquire());
            }),
            case("governor/std (MonotonicClock)", |_| {
                black_box(black_box(&gov_s).check().is_ok());
            }),
            case("floor/default", |_| {
                black_box(black_box(&floor_d).try_acquire());
            }),
            case("floor/quanta", |_| {
                black_box(black_box(&floor_q).try_acquire());
            }),
            case("floor/std", |_| {
                black_box(black_box(&floor_std).try_acquire());
            }),
        ];
        let title = if allowed {
            "direct try_acquire, allowed path"
        } else {
            "direct try_acquire, denied path"
        };
        compare(
            title,
            s,
            200_000,
            &[GOV_DEFAULT, TG_DEFAULT, "floor/default", "floor/std"],
            cases,
        );
        // The paths measured were the ones named: checked once, outside the timing.
        assert_eq!(tg.try_acquire(), allowed);
        assert_eq!(tg_check.check().allowed, allowed);
        assert_eq!(tg_s.try_acquire(), allowed);
        assert_eq!(gov_q.check().is_ok(), allowed);
        assert_eq!(floor_d.try_acquire(), allowed);
        assert_eq!(floor_std.try_acquire(), allowed);
    }
}

/// Aggregate throughput of 2 threads on one direct limiter (allowed path: every call stores,
/// so the threads contend on one word), default vs default, with 1 thread for scale.
///
/// On a loaded machine the two threads of a batch often do not overlap (one runs after the
/// other), and this then measures two uncontended threads: `contention.rs` measures over one
/// shared wall window and keeps only rounds in which both threads were on a CPU.
fn direct_threads(s: &Settings) {
    let tg = RateLimiter::new(tq_fast());
    let gov = governor::RateLimiter::direct(gq_fast());
    let floor = DirectFloor::new(DefaultClock::new(), 1, FAST);
    let (tg, gov, floor) = (&tg, &gov, &floor);
    let cases = vec![
        threaded("tollgate (default) 2 threads", 2, move |_, _| {
            black_box(tg.try_acquire());
        }),
        threaded("governor (default) 2 threads", 2, move |_, _| {
            black_box(gov.check().is_ok());
        }),
        threaded("floor/default 2 threads", 2, move |_, _| {
            black_box(floor.try_acquire());
        }),
        threaded("tollgate (default) 1 thread", 1, move |_, _| {
            black_box(tg.try_acquire());
        }),
        threaded("governor (default) 1 thread", 1, move |_, _| {
            black_box(gov.check().is_ok());
        }),
    ];
    compare(
        "direct, one limiter shared by 2 threads (ns/op is aggregate wall time / total ops; \
         throughput ratio = 1 / ns ratio)",
        s,
        200_000,
        &[
            "governor (default) 2 threads",
            "tollgate (default) 1 thread",
        ],
        cases,
    );
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
    let fd_u = KeyedFloor::<u64, FloorHasher, _>::new(DefaultClock::new(), 1, FAST);
    let fd_s = KeyedFloor::<String, FloorHasher, _>::new(DefaultClock::new(), 1, FAST);
    let fl_u = KeyedFloor::<u64, FloorHasher, _>::new(StdClock::new(), 1, FAST);
    let fl_s = KeyedFloor::<String, FloorHasher, _>::new(StdClock::new(), 1, FAST);
    // dashmap's own default shard count (4 per core, rounded up to a power of two).
    let dm_shards =
        (std::thread::available_parallelism().map_or(1, |n| n.get()) * 4).next_power_of_two();
    let fl8_u =
        KeyedFloor::<u64, FloorHasher, _>::with_shards(DefaultClock::new(), 1, FAST, dm_shards);
    let fl8_s =
        KeyedFloor::<String, FloorHasher, _>::with_shards(DefaultClock::new(), 1, FAST, dm_shards);
    let dm_name = format!("floor/default, {dm_shards} shards");
    let flq_u = KeyedFloor::<u64, FloorHasher, _>::new(RawQuanta::new(), 1, FAST);
    let flq_s = KeyedFloor::<String, FloorHasher, _>::new(RawQuanta::new(), 1, FAST);
    let bound = ArrayBound::new(DefaultClock::new(), universe as usize, 1, FAST);
    let (tgs_u, tgs_s) = {
        let u = KeyedRateLimiter::<u64>::builder(tq_fast())
            .clock(StdClock::new())
            .build();
        let s = KeyedRateLimiter::<String>::builder(tq_fast())
            .clock(StdClock::new())
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
            let _ = fd_s.try_acquire(key.as_str());
            let _ = fl_s.try_acquire(key.as_str());
            let _ = fl8_s.try_acquire(key.as_str());
            let _ = flq_s.try_acquire(key.as_str());
            let _ = tgs_s.try_acquire(key.as_str());
        } else {
            let _ = tg_u.try_acquire(&k);
            let _ = gov_u.check_key(&k);
            let _ = gov_um.check_key(&k);
            let _ = fd_u.try_acquire(&k);
            let _ = fl_u.try_acquire(&k);
            let _ = fl8_u.try_acquire(&k);
            let _ = flq_u.try_acquire(&k);
            let _ = tgs_u.try_acquire(&k);
        }
    }

    let seq = &seq;
    let names = &names;
    let key = move |i: u64| seq[(i & mask) as usize];
    let mut cases = if strings {
        vec![
            case("floor/default", move |i| {
                black_box(fd_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case("floor/std", move |i| {
                black_box(fl_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case(&dm_name, move |i| {
                black_box(fl8_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case(TG_DEFAULT, move |i| {
                black_box(tg_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case(GOV_DEFAULT, move |i| {
                black_box(gov_s.check_key(&names[key(i) as usize]).is_ok());
            }),
            case("governor/std (MonotonicClock)", move |i| {
                black_box(gov_sm.check_key(&names[key(i) as usize]).is_ok());
            }),
            case("floor/quanta", move |i| {
                black_box(flq_s.try_acquire(names[key(i) as usize].as_str()));
            }),
            case("bound: hash + array CAS/default", move |i| {
                black_box(bound.try_acquire(names[key(i) as usize].as_str()));
            }),
        ]
    } else {
        vec![
            case("floor/default", move |i| {
                black_box(fd_u.try_acquire(&key(i)));
            }),
            case("floor/std", move |i| {
                black_box(fl_u.try_acquire(&key(i)));
            }),
            case(&dm_name, move |i| {
                black_box(fl8_u.try_acquire(&key(i)));
            }),
            case(TG_DEFAULT, move |i| {
                black_box(tg_u.try_acquire(&key(i)));
            }),
            case(GOV_DEFAULT, move |i| {
                black_box(gov_u.check_key(&key(i)).is_ok());
            }),
            case("governor/std (MonotonicClock)", move |i| {
                black_box(gov_um.check_key(&key(i)).is_ok());
            }),
            case("floor/quanta", move |i| {
                black_box(flq_u.try_acquire(&key(i)));
            }),
            case("bound: hash + array CAS/default", move |i| {
                black_box(bound.try_acquire(&key(i)));
            }),
        ]
    };
    cases.push(if strings {
        case("tollgate/std (StdClock)", move |i| {
            black_box(tgs_s.try_acquire(names[key(i) as usize].as_str()));
        })
    } else {
        case("tollgate/std (StdClock)", move |i| {
            black_box(tgs_u.try_acquire(&key(i)));
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
        &[
            GOV_DEFAULT,
            "governor/std (MonotonicClock)",
            "floor/default",
            "floor/std",
        ],
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
    let fl = KeyedFloor::<u64, FloorHasher, _>::new(DefaultClock::new(), 1, FAST);
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
    ];
    compare(
        "one shared key (ns/op is aggregate wall time / total ops)",
        s,
        200_000,
        &["tollgate keyed 1 thread", "governor keyed 2 threads"],
        cases,
    );
}

/// Keyed `check` (the full `Decision`) against keyed `try_acquire`, on one hot u64 key and on
/// 10k u64 keys, allowed path, with governor's `check_key` for scale.
fn keyed_check(s: &Settings) {
    for universe in [1u64, 10_000] {
        const SEQ: usize = 1 << 20;
        let seq: Vec<u64> = if universe == 1 {
            vec![0; SEQ]
        } else {
            random_u64_keys(universe, SEQ, 0x5EED)
        };
        let mask = SEQ as u64 - 1;
        let tg = KeyedRateLimiter::<u64>::new(tq_fast());
        let tg_check = KeyedRateLimiter::<u64>::new(tq_fast());
        let gov = governor::RateLimiter::<u64, _, _>::keyed(gq_fast());
        for k in 0..universe {
            let _ = (
                tg.try_acquire(&k),
                tg_check.try_acquire(&k),
                gov.check_key(&k),
            );
        }
        let seq = &seq;
        let key = move |i: u64| seq[(i & mask) as usize];
        let (tg_r, tg_check_r, gov_r) = (&tg, &tg_check, &gov);
        let cases = vec![
            case(TG_DEFAULT, move |i| {
                black_box(tg_r.try_acquire(&key(i)));
            }),
            case("tollgate check() (default clock)", move |i| {
                black_box(tg_check_r.check(&key(i)));
            }),
            case(GOV_DEFAULT, move |i| {
                black_box(gov_r.check_key(&key(i)).is_ok());
            }),
        ];
        let what = if universe == 1 {
            "one hot key"
        } else {
            "10k random keys"
        };
        compare(
            &format!("keyed check() vs try_acquire, {what}, u64 keys, allowed path"),
            s,
            200_000,
            &[TG_DEFAULT, GOV_DEFAULT],
            cases,
        );
        // The path measured was the one named: checked once, outside the timing.
        assert!(tg_check.check(&key(0)).allowed);
    }
}

/// Fastest vs fastest: tollgate on a `CoarseClock` against governor on its
/// `QuantaUpkeepClock`, both refreshed every 1 ms by a thread; direct (allowed and denied) and
/// keyed on one hot u64 key, with the floor on the same coarse clock and the two defaults for
/// scale.
fn coarse(s: &Settings) {
    const TICK: Duration = Duration::from_millis(1);
    let tg_clock = CoarseClock::with_resolution(TICK).expect("coarse clock");
    let gov_clock = governor::clock::QuantaUpkeepClock::from_interval(TICK).expect("upkeep clock");
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
        let tg = RateLimiter::builder(tq).clock(tg_clock.clone()).build();
        let tg_d = RateLimiter::new(tq);
        let gov = governor::RateLimiter::direct_with_clock(gq, gov_clock.clone());
        let gov_d = governor::RateLimiter::direct(gq);
        let floor = DirectFloor::new(tg_clock.clone(), t, burst);
        let floor_d = DirectFloor::new(DefaultClock::new(), t, burst);
        let _ = (tg.try_acquire(), tg_d.try_acquire(), floor.try_acquire());
        let _ = (floor_d.try_acquire(), gov.check(), gov_d.check());
        let cases = vec![
            case("tollgate (CoarseClock 1 ms)", |_| {
                black_box(black_box(&tg).try_acquire());
            }),
            case("governor (QuantaUpkeepClock 1 ms)", |_| {
                black_box(black_box(&gov).check().is_ok());
            }),
            case("floor/coarse", |_| {
                black_box(black_box(&floor).try_acquire());
            }),
            case(TG_DEFAULT, |_| {
                black_box(black_box(&tg_d).try_acquire());
            }),
            case(GOV_DEFAULT, |_| {
                black_box(black_box(&gov_d).check().is_ok());
            }),
            case("floor/default", |_| {
                black_box(black_box(&floor_d).try_acquire());
            }),
        ];
        compare(
            if allowed {
                "fastest clocks: direct try_acquire, allowed path"
            } else {
                "fastest clocks: direct try_acquire, denied path"
            },
            s,
            200_000,
            &["governor (QuantaUpkeepClock 1 ms)", "floor/coarse"],
            cases,
        );
        assert_eq!(tg.try_acquire(), allowed);
        assert_eq!(gov.check().is_ok(), allowed);
        assert_eq!(floor.try_acquire(), allowed);
    }

    let tg = KeyedRateLimiter::<u64>::builder(tq_fast())
        .clock(tg_clock.clone())
        .build();
    let tg_d = KeyedRateLimiter::<u64>::new(tq_fast());
    let gov = governor::RateLimiter::<u64, _, _, _>::dashmap_with_clock(gq_fast(), gov_clock);
    let gov_d = governor::RateLimiter::<u64, _, _>::keyed(gq_fast());
    let floor = KeyedFloor::<u64, FloorHasher, _>::new(tg_clock, 1, FAST);
    let hot = 0u64;
    let _ = (
        tg.try_acquire(&hot),
        tg_d.try_acquire(&hot),
        floor.try_acquire(&hot),
    );
    let _ = (gov.check_key(&hot), gov_d.check_key(&hot));
    let cases = vec![
        case("tollgate (CoarseClock 1 ms)", |_| {
            black_box(tg.try_acquire(black_box(&hot)));
        }),
        case("governor (QuantaUpkeepClock 1 ms)", |_| {
            black_box(gov.check_key(black_box(&hot)).is_ok());
        }),
        case("floor/coarse", |_| {
            black_box(floor.try_acquire(black_box(&hot)));
        }),
        case(TG_DEFAULT, |_| {
            black_box(tg_d.try_acquire(black_box(&hot)));
        }),
        case(GOV_DEFAULT, |_| {
            black_box(gov_d.check_key(black_box(&hot)).is_ok());
        }),
    ];
    compare(
        "fastest clocks: keyed try_acquire, one hot u64 key, allowed path",
        s,
        200_000,
        &["governor (QuantaUpkeepClock 1 ms)", "floor/coarse"],
        cases,
    );
}

/// `--only SECTION[,SECTION]` (direct, keyed, keyed-check, scaling, coarse) runs just those; default
/// all.
fn wanted(section: &str) -> bool {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--only") {
        Some(i) => args
            .get(i + 1)
            .is_some_and(|list| list.split(',').any(|s| s == section)),
        None => true,
    }
}

/// `--keys N[,N]` (1, 10000, 1000000) runs the `keyed` section at those key counts only;
/// default all three.
fn keys_wanted(universe: u64) -> bool {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--keys") {
        Some(i) => args.get(i + 1).is_some_and(|list| {
            list.split(',')
                .any(|s| s.parse::<u64>().ok() == Some(universe))
        }),
        None => true,
    }
}

fn main() {
    // `--rounds N`, `--batch N` for a longer, finer run on a noisy machine.
    let s = Settings::from_args(ROUNDS);
    println!(
        "tollgate compare: {} interleaved rounds; ratios are medians of per-round ratios",
        s.rounds
    );
    if wanted("direct") {
        direct(&s);
        direct_threads(&s);
    }
    if wanted("keyed") {
        for universe in [1, 10_000, 1_000_000]
            .into_iter()
            .filter(|&u| keys_wanted(u))
        {
            for strings in [false, true] {
                keyed(&s, universe, strings);
            }
        }
    }
    if wanted("keyed-check") {
        keyed_check(&s);
    }
    if wanted("scaling") {
        scaling(&s);
    }
    if wanted("coarse") {
        coarse(&s);
    }
}
