//! Feature `tracing` over the Redis limiter, in a test binary of its own: its scoped
//! subscriber (`set_default`) raced the other Redis HTTP tests' threads, which hit the same
//! callsites with no subscriber (one CI run in about twenty, and one local run in three, saw no
//! event at all; alone, never).

#[path = "../redis_support/mod.rs"]
mod redis_support;
#[path = "support/trace_collect.rs"]
mod trace_collect;

use std::sync::atomic::{AtomicU32, Ordering};

use redis_support::RedisServer;
use tollgate::redis::RedisRateLimiter;
use tollgate::Quota;

fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("httptrace{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Feature `tracing`: a Redis limiter's refusal is a debug event with its name and the outcome,
/// never the key unless the builder was told `trace_keys(true)`.
#[tokio::test(flavor = "current_thread")]
async fn a_redis_refusal_is_an_event_with_the_key_only_when_asked() {
    let redis = RedisServer::start();
    for trace_keys in [false, true] {
        let collect = trace_collect::Collect::default();
        let _guard = tracing::subscriber::set_default(collect.clone());
        let limiter = RedisRateLimiter::builder(Quota::per_hour(1).unwrap())
            .prefix(prefix())
            .name("login")
            .trace_keys(trace_keys)
            .connect(&redis.url())
            .await
            .unwrap();
        assert!(limiter.try_acquire("alice@example.com").await.unwrap());
        assert!(!limiter.try_acquire("alice@example.com").await.unwrap());
        assert!(limiter.try_acquire_n("alice@example.com", 5).await.is_err());

        let events = collect.events.lock().unwrap().clone();
        let refused: Vec<_> = events.iter().filter(|e| e.name == "refused").collect();
        assert_eq!(refused.len(), 2, "{events:?}");
        assert_eq!(refused[0].field("limiter"), Some("login"));
        assert_eq!(refused[0].field("outcome"), Some("denied"));
        assert_eq!(refused[1].field("outcome"), Some("exceeds_burst"));
        let everything = format!("{events:?}");
        if trace_keys {
            assert_eq!(refused[0].field("key"), Some("alice@example.com"));
        } else {
            assert!(
                !everything.contains("alice"),
                "a key was logged: {everything}"
            );
        }
    }
}
