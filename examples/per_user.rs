//! Per-user, per-action and per-plan limits with one `KeyedRateLimiter` each, a background
//! sweeper and a key cap. Prints what each request got.
//!
//! Run with `cargo run --example per_user`.

use std::time::Duration;

use tollgate::{KeyedRateLimiter, ManualClock, Quota, WhenFull};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A manual clock so the output is the same on every run; use the default clock in a service.
    let clock = ManualClock::new();

    // The key decides the granularity: (user, action) gives every user a separate bucket per
    // action. Key by `user` alone for a per-user limit, by `action` alone for a global
    // per-action limit.
    let limiter: KeyedRateLimiter<(String, &'static str)> =
        KeyedRateLimiter::builder(Quota::per_second(2)?)
            .clock(clock.clone())
            .sweep_interval(Duration::from_secs(10)) // idle keys are evicted in the background
            .max_keys(100_000) // and never more than this many are tracked
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
        let d = limiter.check(&(user.to_string(), action));
        print!("  {user:>5} {action:<6} ");
        if d.allowed {
            println!("allowed   remaining {}", d.remaining);
        } else {
            let wait = d.retry_after.unwrap_or_default();
            println!("denied    retry after {} ms", wait.as_millis());
        }
    }

    clock.advance(Duration::from_millis(500));
    let d = limiter.check(&("alice".to_string(), "upload"));
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
        let allowed = (0..8)
            .filter(|_| by_plan.check_with(user, 1, plan).allowed)
            .count();
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
