//! Feature `tracing`: a debug event per refusal with the limiter's name (never the key), and a
//! `tollgate.wait` span per wait that records how it ended. Read back through a minimal
//! subscriber scoped to each test (`tracing::subscriber::with_default`).

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::{KeyedRateLimiter, ManualClock, Quota, RateLimiter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// What one event or span carried: its name (the message for events) and its fields.
#[derive(Clone, Debug, Default, PartialEq)]
struct Seen {
    name: String,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.fields.push((
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        ));
    }
}

#[derive(Clone, Default)]
struct Collect {
    events: Arc<Mutex<Vec<Seen>>>,
    spans: Arc<Mutex<Vec<Seen>>>,
}

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "tollgate"
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut seen = Seen {
            name: span.metadata().name().to_owned(),
            ..Seen::default()
        };
        span.record(&mut seen);
        let mut spans = self.spans.lock().unwrap();
        spans.push(seen);
        Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        values.record(&mut spans[span.into_u64() as usize - 1]);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut seen = Seen::default();
        event.record(&mut seen);
        seen.name = seen.field("message").unwrap_or_default().to_owned();
        self.events.lock().unwrap().push(seen);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_refusal_is_one_debug_event_with_the_name_and_no_key() {
    let collect = Collect::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(collect.clone(), || {
        let limiter = KeyedRateLimiter::<String>::builder(Quota::per_second(1).unwrap())
            .clock(clock.clone())
            .name("login")
            .build();
        let key = "alice@example.com".to_owned();
        assert!(limiter.try_acquire(&key));
        assert!(!limiter.try_acquire(&key));
        assert!(limiter.try_acquire_n(&key, 5).is_err());
    });
    let events = collect.events.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].name, "refused");
    assert_eq!(events[0].field("limiter"), Some("login"));
    assert_eq!(events[0].field("outcome"), Some("denied"));
    assert_eq!(events[1].field("outcome"), Some("exceeds_burst"));
    assert_eq!(events[1].field("permits"), Some("5"));
    let everything = format!("{events:?}");
    assert!(
        !everything.contains("alice"),
        "a key was logged: {everything}"
    );
}

#[test]
fn each_wait_is_a_span_that_says_how_it_ended() {
    let collect = Collect::default();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(collect.clone(), || {
        let limiter = RateLimiter::builder(Quota::per_second(10).unwrap().with_burst(1).unwrap())
            .clock(clock.clone())
            .name("paced")
            .build();
        assert_eq!(limiter.acquire(), Ok(Duration::ZERO)); // granted at once: no span
        assert_eq!(limiter.acquire(), Ok(Duration::from_millis(100)));
    });
    let spans = collect.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].name, "tollgate.wait");
    assert_eq!(spans[0].field("limiter"), Some("paced"));
    assert_eq!(spans[0].field("outcome"), Some("allowed"));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_async_wait_closes_its_span_as_cancelled() {
    let collect = Collect::default();
    let _guard = tracing::subscriber::set_default(collect.clone());
    let limiter = RateLimiter::builder(Quota::per_second(1).unwrap())
        .clock(tollgate::TokioClock::new())
        .build();
    assert!(limiter.try_acquire());
    let abandoned = tokio::time::timeout(Duration::from_millis(10), limiter.acquire_async()).await;
    assert!(abandoned.is_err());
    let spans = collect.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].field("limiter"), Some("unnamed"));
    assert_eq!(spans[0].field("outcome"), Some("cancelled"));
}
