//! A backend that lives outside the library, built from its public API only:
//! `MutexBackend`, GCRA over a `Mutex<HashMap<K, _>>`, implements `tollgate::http::Backend`
//! and serves the HTTP layer over a real socket, and its reservation implements
//! `tollgate::Hold`, so `all_or_none_async` takes from it and from an in-process limiter
//! together, or from neither.

#[path = "support/mod.rs"]
mod http_support;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use http_support::{client, send, serve_axum};
use tollgate::http::{Answer, Backend, HeaderKey, HeaderName, RateLimitLayer, StatusCode};
use tollgate::{
    all_or_none_async, AcquireError, CancelFuture, Decision, Hold, KeyedRateLimiter, ManualClock,
    Quota,
};

/// GCRA per key: each key's theoretical arrival time (TAT), as time since `origin`.
struct MutexBackend<K> {
    quota: Quota,
    origin: Instant,
    tats: Mutex<HashMap<K, Duration>>,
}

impl<K: Hash + Eq + Clone> MutexBackend<K> {
    fn new(quota: Quota) -> Self {
        MutexBackend {
            quota,
            origin: Instant::now(),
            tats: Mutex::new(HashMap::new()),
        }
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// `n` intervals; `None` when it does not fit a `Duration`.
    fn cost(&self, n: u64) -> Option<Duration> {
        self.quota.interval().checked_mul(u32::try_from(n).ok()?)
    }

    /// GCRA: admit `n` if the TAT after them is at most the tolerance ahead of now.
    fn decide(&self, key: &K, n: u64) -> Decision {
        let (b, t) = (self.quota.burst(), self.quota.interval());
        let tau = self.quota.tolerance();
        let now = self.now();
        let mut tats = self.tats.lock().unwrap();
        let tat = tats.get(key).copied().unwrap_or(now).max(now);
        let remaining_at = |debt: Duration| {
            let free = tau.saturating_sub(debt).as_nanos() / t.as_nanos().max(1);
            u64::try_from(free).unwrap_or(u64::MAX).min(b)
        };
        let Some(new_tat) = self.cost(n).filter(|_| n <= b).map(|c| tat + c) else {
            return Decision::never(b, remaining_at(tat - now), tat - now);
        };
        let debt = new_tat - now;
        if debt > tau {
            let wait = debt - tau;
            return Decision::denied(b, remaining_at(tat - now), wait, tat - now);
        }
        tats.insert(key.clone(), new_tat);
        Decision::allowed(b, remaining_at(debt), debt)
    }

    /// `n` permits for `key` if they are available now, as a hold `all_or_none_async` can
    /// keep or give back.
    fn try_reserve_n(&self, key: &K, n: u64) -> Result<MutexHold<'_, K>, AcquireError> {
        let d = self.decide(key, n);
        match d.retry_after {
            _ if d.allowed => Ok(MutexHold {
                backend: self,
                key: key.clone(),
                n,
            }),
            Some(retry_after) => Err(AcquireError::RateLimited { retry_after }),
            None => Err(AcquireError::ExceedsBurst {
                requested: n,
                burst: self.quota.burst(),
            }),
        }
    }
}

/// `n` permits taken for `key`; cancelling moves the key's TAT back by their cost.
struct MutexHold<'a, K> {
    backend: &'a MutexBackend<K>,
    key: K,
    n: u64,
}

impl<K: Hash + Eq + Clone + Send + Sync> Hold for MutexHold<'_, K> {
    fn delay(&self) -> Duration {
        Duration::ZERO // made only when ready now
    }

    fn cancel(self: Box<Self>) -> CancelFuture {
        let cost = self.backend.cost(self.n).unwrap_or(Duration::ZERO);
        if let Some(tat) = self.backend.tats.lock().unwrap().get_mut(&self.key) {
            *tat = tat.saturating_sub(cost);
        }
        Box::pin(std::future::ready(()))
    }
}

impl<K: Hash + Eq + Clone + Send + Sync + 'static> Backend for MutexBackend<K> {
    type Key = K;
    type Error = Infallible;

    fn quota(&self) -> Quota {
        self.quota
    }

    fn window(&self) -> Duration {
        self.quota.tolerance()
    }

    fn keys_bounded(&self) -> bool {
        false // one entry per key ever seen: the layer needs `allow_unbounded_keys`
    }

    fn check_n(
        &self,
        key: &K,
        cost: u64,
    ) -> Answer<
        Result<Decision, Infallible>,
        impl Future<Output = Result<Decision, Infallible>> + Send + 'static,
    > {
        Answer::<_, std::future::Ready<_>>::Now(Ok(self.decide(key, cost)))
    }

    async fn check_n_for_async(
        &self,
        key: &K,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, Infallible> {
        let d = self.decide(key, cost);
        match d.retry_after {
            // Sleep until the permits would fit, then decide again (someone else may take
            // them first: then this is denied, never late).
            Some(wait) if !d.allowed && wait <= max_wait => {
                tokio::time::sleep(wait).await;
                Ok(self.decide(key, cost))
            }
            _ => Ok(d),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outside_backend_serves_the_http_layer() {
    let backend = Arc::new(MutexBackend::<String>::new(Quota::per_minute(2).unwrap()));
    let layer = RateLimitLayer::with_limiters(HeaderKey::new(HeaderName::from_static("x-api-key")))
        .limiter(backend.clone())
        .allow_unbounded_keys()
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let addr = serve_axum(app).await;
    let http = client();
    let get_as = |key: &'static str| {
        let http = http.clone();
        async move { send(&http, addr, "GET", "/", &[("x-api-key", key)]).await }
    };
    assert_eq!(get_as("a").await.status, StatusCode::OK);
    assert_eq!(get_as("a").await.status, StatusCode::OK);
    let refused = get_as("a").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    let retry_after = refused.header_u64("retry-after");
    assert!((29..=30).contains(&retry_after), "{retry_after}");
    assert_eq!(get_as("b").await.status, StatusCode::OK);
    // The decisions were the backend's: key "a" is full in it.
    assert!(!backend.decide(&"a".to_string(), 1).allowed);
}

#[tokio::test]
async fn an_outside_backend_composes_with_an_in_process_limit_all_or_none() {
    let global = MutexBackend::<&str>::new(Quota::per_minute(3).unwrap());
    let per_user = KeyedRateLimiter::<u8>::builder(Quota::per_minute(2).unwrap())
        .clock(ManualClock::new())
        .build();
    let take = |user: u8| {
        all_or_none_async::<AcquireError, _>([
            per_user
                .try_reserve_for(&user, Duration::ZERO)
                .map(Hold::boxed),
            global.try_reserve_n(&"all", 1).map(Hold::boxed),
        ])
    };
    take(1).await.unwrap();
    take(1).await.unwrap();
    // User 1 is out: the outside backend's permit is given back.
    assert!(take(1).await.is_err());
    assert_eq!(global.decide(&"all", 0).remaining, 1);
    take(2).await.unwrap();
    // The outside backend is out: user 3 is not charged.
    assert!(take(3).await.is_err());
    assert_eq!(per_user.peek(&3).remaining, 2);
}
