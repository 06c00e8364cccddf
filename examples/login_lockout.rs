//! Account lockout: five failed logins within ten minutes lock the account for fifteen.
//!
//! One keyed limiter counts each account's failures in an exact sliding window of ten minutes
//! (`SlidingLog`, limit 5). The fifth failure blocks the account for fifteen minutes; a
//! successful login, or an administrator, resets it. The sliding log's block ends exactly on
//! time with a fresh start (the guide's Penalties page says what each algorithm does).
//!
//! Across several servers, the same story runs on a `tollgate::redis::RedisRateLimiter<SlidingLog>`
//! (feature `redis`): its `block`, `reset` and `peek` decide as these do, on Redis's clock
//! (the guide's Penalties page, "On Redis").
//!
//! Runs on a manual clock, so the whole story takes no time:
//! `cargo run --release --example login_lockout`.

use std::time::Duration;

use tollgate::{KeyedRateLimiter, ManualClock, Quota, SlidingLog};

const FAILURES: u64 = 5;
const WINDOW: Duration = Duration::from_secs(10 * 60);
const LOCKOUT: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Welcome,
    WrongPassword { attempts_left: u64 },
    LockedNow,
    Locked { left: Duration },
}

struct Logins {
    failures: KeyedRateLimiter<String, SlidingLog>,
    clock: ManualClock,
}

impl Logins {
    fn attempt(&self, user: &str, password_ok: bool) -> Outcome {
        // While blocked the account has nothing left, and the block's entry is all it counts:
        // it empties when the block ends.
        let state = self.failures.peek(user);
        let outcome = if state.remaining == 0 {
            Outcome::Locked {
                left: state.reset_after,
            }
        } else if password_ok {
            self.failures.reset(user); // past failures are forgiven
            Outcome::Welcome
        } else {
            let counted = self.failures.check(user);
            if counted.remaining == 0 {
                self.failures
                    .block(user, LOCKOUT)
                    .expect("no key cap on this limiter");
                Outcome::LockedNow
            } else {
                Outcome::WrongPassword {
                    attempts_left: counted.remaining,
                }
            }
        };
        println!(
            "{:>5}  {user:<6} {:<8} {}",
            clock_time(self.clock.now_duration()),
            if password_ok { "right" } else { "wrong" },
            describe(&outcome)
        );
        outcome
    }

    fn at(&self, minutes: u64) {
        assert!(
            self.clock.set(minutes * 60 * 1_000_000_000),
            "time runs forward"
        );
    }
}

fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Welcome => "welcome".into(),
        Outcome::WrongPassword { attempts_left } => {
            let s = if *attempts_left == 1 { "" } else { "s" };
            format!("wrong password, {attempts_left} attempt{s} left")
        }
        Outcome::LockedNow => format!("locked for {} min", LOCKOUT.as_secs() / 60),
        Outcome::Locked { left } => format!("locked, {} left", clock_time(*left)),
    }
}

fn clock_time(d: Duration) -> String {
    format!("{:02}:{:02}", d.as_secs() / 60, d.as_secs() % 60)
}

trait NowDuration {
    fn now_duration(&self) -> Duration;
}

impl NowDuration for ManualClock {
    fn now_duration(&self) -> Duration {
        Duration::from_nanos(tollgate::Clock::now(self))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    let failures = KeyedRateLimiter::<String>::builder(Quota::new(FAILURES, WINDOW)?)
        .clock(clock.clone())
        .algorithm(SlidingLog)?
        .build();
    let logins = Logins { failures, clock };
    println!(" time  user   password result");

    // Mallory guesses alice's password every two minutes.
    for (i, minute) in [0, 2, 4, 6].into_iter().enumerate() {
        logins.at(minute);
        let left = FAILURES - 1 - i as u64;
        assert_eq!(
            logins.attempt("alice", false),
            Outcome::WrongPassword {
                attempts_left: left
            }
        );
    }
    logins.at(8);
    assert_eq!(logins.attempt("alice", false), Outcome::LockedNow);
    // Even the right password is refused during the lockout.
    logins.at(9);
    let locked = logins.attempt("alice", true);
    assert_eq!(
        locked,
        Outcome::Locked {
            left: Duration::from_secs(14 * 60)
        }
    );
    logins.at(22);
    assert!(matches!(
        logins.attempt("alice", true),
        Outcome::Locked { .. }
    ));
    // Fifteen minutes after the fifth failure: a fresh start.
    logins.at(23);
    assert_eq!(logins.attempt("alice", true), Outcome::Welcome);

    // Bob mistypes twice, then gets in: his failures are forgotten.
    logins.at(30);
    assert!(matches!(
        logins.attempt("bob", false),
        Outcome::WrongPassword { attempts_left: 4 }
    ));
    assert!(matches!(
        logins.attempt("bob", false),
        Outcome::WrongPassword { attempts_left: 3 }
    ));
    assert_eq!(logins.attempt("bob", true), Outcome::Welcome);
    assert!(matches!(
        logins.attempt("bob", false),
        Outcome::WrongPassword { attempts_left: 4 }
    ));

    // Carol is locked out; the help desk unlocks her by hand.
    logins.at(40);
    for _ in 0..4 {
        let _ = logins.attempt("carol", false);
    }
    assert_eq!(logins.attempt("carol", false), Outcome::LockedNow);
    logins.at(41);
    assert!(logins.failures.reset("carol"));
    println!("{:>5}  carol  unlocked by the help desk", "41:00");
    assert_eq!(logins.attempt("carol", true), Outcome::Welcome);
    Ok(())
}
