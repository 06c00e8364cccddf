//! The denial cache told of changes made elsewhere: a limiter that resets a key, rewards it or
//! cancels a reservation on it (the loosening changes; a local batch given back is not
//! published, see the guide) publishes the key's state key on its prefix's channel
//! (`<prefix>:invalidate`), and every limiter with a denial cache, subscribed to that channel,
//! forgets its cached denial of that state key on the message.
//!
//! Penalties and blocks publish nothing: they make a key stricter, so a cached denial of it
//! is still right, and if it ends before Redis's new, longer one, the next call asks Redis.
//!
//! The message is the state key, verbatim: Redis messages are binary-safe, so a key of any
//! bytes arrives as it left and names exactly its own entry; a payload that is not UTF-8
//! names no key (state keys are strings) and drops nothing.
//!
//! One subscription per limiter, on a connection of its own, started when the limiter connects
//! (`connect` waits for its first attempt within the connect timeout, so calls made once
//! `connect` returns find it made on a healthy server). When it is lost (the connection closed or killed, a `PING` unanswered, the Sentinel
//! primary moved), it is made again (10 ms to 500 ms apart, through a cluster's nodes in
//! turn), and once made the whole cache is forgotten: a change published meanwhile was not
//! heard. While it is down the cache refuses at worst until each denial's `retry_after`, as
//! with no subscription at all.
//!
//! Waiting for the first attempt (`Listener::start`, `Shared::first_attempt_ended`) is
//! modelled step for step in `loom-tests/tests/first_subscription.rs`: change both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ::redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;

use super::super::connection::meter::Meter;
use super::super::connection::subscribe::Source;
use super::denial_cache::DenialCache;

/// How often a quiet subscription is checked (a `PING`, and through Sentinel the primary).
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The pause after a failed or lost subscription, doubling up to the most.
const RETRY_MIN: Duration = Duration::from_millis(10);
const RETRY_MAX: Duration = Duration::from_millis(500);

/// The channel a limiter with `prefix` publishes on and listens to.
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}:invalidate")
}

/// The state key a message's `payload` names (the payload is the state key, verbatim).
pub(crate) fn key_of(payload: &[u8]) -> Option<&str> {
    std::str::from_utf8(payload).ok()
}

/// What the listening task shares with the limiter.
struct Shared {
    source: Source,
    channel: String,
    /// Messages heard that named a key.
    heard: AtomicU64,
    /// Subscriptions lost after being made.
    losses: AtomicU64,
    /// Set, and `tried` notified, once the first attempt to subscribe has ended (made or not).
    attempted: AtomicBool,
    tried: Notify,
}

/// The limiter's subscription: started once, stopped when the limiter is dropped.
pub(crate) struct Listener {
    shared: Arc<Shared>,
    started: AtomicBool,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Listener {
    pub(crate) fn new(source: Source, prefix: &str) -> Listener {
        Listener {
            shared: Arc::new(Shared::new(source, channel(prefix))),
            started: AtomicBool::new(false),
            task: Mutex::new(None),
        }
    }

    /// Starts listening for `cache`, unless started (or there is no runtime to listen on),
    /// and waits until the first attempt to subscribe has ended, made or not (a failed one is
    /// tried again in the background). Called when the limiter connects: a cache filled
    /// before the subscription is made is forgotten when it is made, so starting first keeps
    /// the first denials cached.
    pub(crate) async fn start(&self, cache: &Arc<DenialCache>) {
        if !self.spawn(cache) {
            return;
        }
        let tried = self.shared.tried.notified();
        tokio::pin!(tried);
        tried.as_mut().enable();
        if !self.shared.attempted.load(Ordering::Acquire) {
            tried.await;
        }
    }

    /// Spawns the listening task unless one was spawned; false if there is no runtime.
    fn spawn(&self, cache: &Arc<DenialCache>) -> bool {
        // The runtime first: a call without one must not hold the flag even for a moment, or
        // a concurrent call that saw it set would wait for a task never spawned.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        if self.started.load(Ordering::Relaxed) || self.started.swap(true, Ordering::Relaxed) {
            return true;
        }
        let task = rt.spawn(listen(self.shared.clone(), Arc::downgrade(cache)));
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        true
    }

    /// Messages heard that named a key.
    pub(crate) fn heard(&self) -> u64 {
        Meter::get(&self.shared.heard)
    }

    /// Subscriptions lost after being made.
    pub(crate) fn losses(&self) -> u64 {
        Meter::get(&self.shared.losses)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

/// Subscribes, and again whenever the subscription is lost, until the cache is gone.
async fn listen(shared: Arc<Shared>, cache: Weak<DenialCache>) {
    let mut attempt = 0usize;
    let mut pause = RETRY_MIN;
    loop {
        let lost = Arc::new(Notify::new());
        let push = {
            let (shared, cache, lost) = (shared.clone(), cache.clone(), lost.clone());
            move |info: PushInfo| {
                shared.pushed(info, &cache, &lost);
                Ok::<(), std::convert::Infallible>(())
            }
        };
        match shared
            .source
            .subscribe(attempt, &shared.channel, push)
            .await
        {
            Ok(mut sub) => {
                let Some(c) = cache.upgrade() else { return };
                // Whatever was published before this subscription was not heard.
                c.clear();
                drop(c);
                shared.first_attempt_ended();
                pause = RETRY_MIN;
                loop {
                    if tokio::time::timeout(CHECK_EVERY, lost.notified())
                        .await
                        .is_ok()
                    {
                        break;
                    }
                    if cache.strong_count() == 0 {
                        return;
                    }
                    if !shared.source.alive(&mut sub).await {
                        break;
                    }
                }
                Meter::bump(&shared.losses);
            }
            Err(_) => {
                attempt = attempt.wrapping_add(1);
                shared.first_attempt_ended();
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

impl Shared {
    fn new(source: Source, channel: String) -> Shared {
        Shared {
            source,
            channel,
            heard: AtomicU64::new(0),
            losses: AtomicU64::new(0),
            attempted: AtomicBool::new(false),
            tried: Notify::new(),
        }
    }

    fn first_attempt_ended(&self) {
        if !self.attempted.swap(true, Ordering::AcqRel) {
            self.tried.notify_waiters();
        }
    }

    /// A push on the subscription's connection: a message forgets the key it names; a
    /// disconnection wakes the task to subscribe again.
    fn pushed(&self, info: PushInfo, cache: &Weak<DenialCache>, lost: &Notify) {
        match info.kind {
            PushKind::Message => {
                let [_, Value::BulkString(payload)] = info.data.as_slice() else {
                    return;
                };
                if let (Some(key), Some(c)) = (key_of(payload), cache.upgrade()) {
                    c.forget(key);
                    Meter::bump(&self.heard);
                }
            }
            PushKind::Disconnection => lost.notify_one(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Instant;

    fn message(channel: &str, payload: Vec<u8>) -> PushInfo {
        PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(channel.as_bytes().to_vec()),
                Value::BulkString(payload),
            ],
        }
    }

    fn shared() -> Shared {
        Shared::new(
            Source::nodes(&["redis://127.0.0.1:1/"], Duration::from_millis(1)).unwrap(),
            channel("p"),
        )
    }

    proptest! {
        /// Any key (any chars: separators, braces, NUL, CR LF, RESP framing, non-ASCII)
        /// travels as its bytes and drops exactly its own entry, among keys that differ from
        /// it by a byte; a payload of any bytes drops at most the key it spells.
        #[test]
        fn a_message_drops_exactly_the_key_it_carries(
            key in any::<String>(),
            others in proptest::collection::vec(any::<String>(), 0..6),
            junk in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let cache = Arc::new(DenialCache::new(1000));
            let now = Instant::now();
            let denied = [1, 0, 0, 1 << 40, 1 << 40];
            let mut keys = others.clone();
            keys.push(key.clone());
            keys.push(format!("{key}\0"));
            keys.push(format!("{key}:x"));
            for k in &keys {
                cache.record(k, 1, now, cache.generation(), &denied);
            }
            let s = shared();
            let lost = Notify::new();
            let weak = Arc::downgrade(&cache);
            s.pushed(message(&s.channel, key.as_bytes().to_vec()), &weak, &lost);
            for k in &keys {
                prop_assert_eq!(cache.lookup(k, 1, now).is_none(), *k == key, "{:?}", k);
            }
            // Arbitrary bytes: the one key they spell, if any, goes; nothing else.
            for k in &keys {
                cache.record(k, 1, now, cache.generation(), &denied);
            }
            s.pushed(message(&s.channel, junk.clone()), &weak, &lost);
            let spelled = std::str::from_utf8(&junk).ok();
            for k in &keys {
                prop_assert_eq!(cache.lookup(k, 1, now).is_none(), Some(k.as_str()) == spelled);
            }
        }
    }

    #[tokio::test]
    async fn other_pushes_drop_nothing_and_a_disconnection_wakes_the_task() {
        let cache = Arc::new(DenialCache::new(10));
        let now = Instant::now();
        cache.record("k", 1, now, cache.generation(), &[1, 0, 0, 100, 100]);
        let s = shared();
        let lost = Notify::new();
        let weak = Arc::downgrade(&cache);
        for kind in [
            PushKind::Subscribe,
            PushKind::PMessage,
            PushKind::Invalidate,
        ] {
            let info = PushInfo {
                kind,
                data: vec![Value::BulkString(b"k".to_vec())],
            };
            s.pushed(info, &weak, &lost);
        }
        // A message of another shape (no payload).
        let short = PushInfo {
            kind: PushKind::Message,
            data: vec![Value::BulkString(b"k".to_vec())],
        };
        s.pushed(short, &weak, &lost);
        assert!(cache.lookup("k", 1, now).is_some());
        assert_eq!(s.heard.load(Ordering::Relaxed), 0);
        let gone = PushInfo {
            kind: PushKind::Disconnection,
            data: vec![],
        };
        s.pushed(gone, &weak, &lost);
        // Told before it waits: the wake is kept for it.
        let woken = tokio::time::timeout(Duration::from_secs(5), lost.notified()).await;
        assert!(woken.is_ok());
    }
}
