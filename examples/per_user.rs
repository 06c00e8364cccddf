//! Per-user, per-action and per-plan limits with one `KeyedRateLimiter` each, a background
//! sweeper and a key cap. Prints what each request got.
//!
//! Run with `cargo run --release --example per_user`.
//!
//! It also shows the cheapest way to key by two owned strings: `(String, String)` keys are
//! normally looked up with a `&(String, String)`, which allocates two strings per check. The
//! map looks keys up through `Borrow`, so a trait object that both the owned pair and a pair
//! of `&str` implement (hashing and comparing alike) lets a check borrow instead.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::time::Duration;

use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};

mod support;
use support::ms;

/// A `(user, action)` key as a view: implemented by the stored `(String, String)` and by the
/// `(&str, &str)` a request has at hand.
trait UserAction {
    fn user(&self) -> &str;
    fn action(&self) -> &str;
}

impl UserAction for (String, String) {
    fn user(&self) -> &str {
        &self.0
    }
    fn action(&self) -> &str {
        &self.1
    }
}

impl UserAction for (&str, &str) {
    fn user(&self) -> &str {
        self.0
    }
    fn action(&self) -> &str {
        self.1
    }
}

impl<'a> Borrow<dyn UserAction + 'a> for (String, String) {
    fn borrow(&self) -> &(dyn UserAction + 'a) {
        self
    }
}

/// Hashes exactly as `(String, String)` does (each string in turn), as `Borrow` requires.
impl Hash for dyn UserAction + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.user().hash(h);
        self.action().hash(h);
    }
}

impl PartialEq for dyn UserAction + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.user() == other.user() && self.action() == other.action()
    }
}

impl Eq for dyn UserAction + '_ {}

/// A new key is stored as the owned pair (the only allocation, once per new key).
impl ToOwned for dyn UserAction + '_ {
    type Owned = (String, String);
    fn to_owned(&self) -> (String, String) {
        (self.user().to_owned(), self.action().to_owned())
    }
}

/// The borrowed key a check passes.
fn key<'a>(user: &'a str, action: &'a str) -> (&'a str, &'a str) {
    (user, action)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A manual clock so the output is the same on every run; use the default clock in a service.
    let clock = ManualClock::new();

    // The key decides the granularity: (user, action) gives every user a separate bucket per
    // action. Key by `user` alone for a per-user limit, by `action` alone for a global
    // per-action limit.
    let limiter: KeyedRateLimiter<(String, String)> =
        KeyedRateLimiter::builder(Quota::per_second(2)?)
            .clock(clock.clone())
            .sweep_interval(Duration::from_secs(10)) // idle keys are evicted in the background
            .max_keys(NonZeroUsize::new(100_000).unwrap()) // and never more are tracked
            .when_full(WhenFull::Deny)
            .build();

    let requests = [
        ("alice", "upload"),
        ("alice", "upload"),
        ("alice", "upload"), // alice's third upload in the same instant: denied
        ("alice", "search"), // her searches have their own bucket
        ("bob", "upload"),   // and bob has his own
    ];
    println!("2 per second per (user, action):");
    for (user, action) in requests {
        let d = limiter.check(&key(user, action) as &dyn UserAction);
        print!("  {user:>5} {action:<6} ");
        if d.allowed {
            println!("allowed   remaining {}", d.remaining);
        } else {
            let wait = d.retry_after.unwrap_or_default();
            println!("denied    retry after {} ms", ms(wait));
        }
    }

    clock.advance(Duration::from_millis(500));
    let d = limiter.check(&key("alice", "upload") as &dyn UserAction);
    println!(
        "  500 ms later, alice upload: {}",
        if d.allowed { "allowed" } else { "denied" }
    );

    // Per-plan limits on one limiter: the quota travels with the call, the state is per user.
    let by_plan: KeyedRateLimiter<String> = KeyedRateLimiter::builder(Quota::per_minute(5)?)
        .clock(clock.clone())
        .build();
    let free = Quota::per_minute(5)?;
    let pro = Quota::per_minute(100)?;
    println!("per plan (free 5/min, pro 100/min), 8 requests each:");
    for (user, plan) in [("carol", free), ("dave", pro)] {
        let mut allowed = 0;
        for _ in 0..8 {
            // `Err` only for a quota the algorithm cannot run; GCRA runs every quota.
            allowed += usize::from(by_plan.check_n_with(user, 1, plan)?.allowed);
        }
        println!("  {user:>5}: {allowed} of 8 allowed");
    }

    // redis-cell compatible: CL.THROTTLE erin 15 30 60 1.
    let reply = by_plan.throttle("erin", 15, 30, 60, 1)?;
    println!("CL.THROTTLE erin 15 30 60 1 -> {:?}", reply.to_array());

    // Idle keys go away: a minute later every bucket above is full again, hence cold.
    clock.advance(Duration::from_secs(60));
    let evicted = limiter.sweep_now() + by_plan.sweep_now();
    println!(
        "after a minute idle: {evicted} keys evicted, {} + {} left",
        limiter.len(),
        by_plan.len()
    );
    Ok(())
}
