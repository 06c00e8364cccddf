//! Operators' changes to one key: block, penalize, reward, reset (the guide's
//! [Penalties](crate::guide::penalties) page defines them per algorithm).

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::KeyedRateLimiter;
use crate::algorithm::Adjust;
use crate::cell::Algorithm;
use crate::clock::duration_to_nanos;
use crate::decision::{AdjustError, Decision};

impl<K, A, S> KeyedRateLimiter<K, A, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    A: Algorithm,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Refuses every request of `key` for `duration` from now (a zero duration does nothing),
    /// and returns the key's state after it, taking nothing: `allowed` and `retry_after` as a
    /// check of one permit would find them now (refused, until the block ends), `remaining`
    /// and `reset_after` as [`peek`](Self::peek) reports them. A block never shortens what the
    /// key owes already, and a blocked key is not swept before the block ends. What the key
    /// is at the end of the block depends on the algorithm: the guide's
    /// [Penalties](crate::guide::penalties) page.
    ///
    /// # Errors
    /// [`AdjustError::KeyCapReached`] if `key` is new and the key cap is reached: nothing was
    /// recorded.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = KeyedRateLimiter::<&str>::builder(Quota::per_second(10)?)
    ///     .clock(clock.clone())
    ///     .build();
    /// let d = limiter.block(&"mallory", Duration::from_secs(60))?;
    /// assert!(!d.allowed);
    /// assert_eq!(d.retry_after, Some(Duration::from_secs(60)));
    /// clock.advance(Duration::from_secs(59));
    /// assert!(!limiter.try_acquire(&"mallory"));
    /// clock.advance(Duration::from_secs(1));
    /// assert!(limiter.try_acquire(&"mallory"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn block<Q>(&self, key: &Q, duration: Duration) -> Result<Decision, AdjustError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let d = duration_to_nanos(duration);
        self.engine().adjust(&self.slot(key), |now| Adjust::Block {
            until: now.saturating_add(d),
        })
    }

    /// Charges `key` `n` permits now, even into debt (saturating at what the algorithm's state
    /// holds, which refuses everything until it drains), and returns the key's state after it
    /// as [`block`](Self::block) does. `n = 0` does nothing.
    ///
    /// # Errors
    /// [`AdjustError::KeyCapReached`] if `key` is new and the key cap is reached: nothing was
    /// recorded.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_second(5)?)
    ///     .clock(ManualClock::new())
    ///     .build();
    /// let d = limiter.penalize(&7, 8)?; // 3 permits of debt beyond the burst
    /// assert_eq!((d.allowed, d.remaining), (false, 0));
    /// assert_eq!(d.retry_after, Some(Duration::from_millis(800)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn penalize<Q>(&self, key: &Q, n: u64) -> Result<Decision, AdjustError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.engine()
            .adjust(&self.slot(key), |_| Adjust::Penalize(n))
    }

    /// Gives `key` `n` permits back, never above a full limit (a key with nothing counted is
    /// left alone, and not stored), and returns the key's state after it as
    /// [`block`](Self::block) does.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, ManualClock, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::builder(Quota::per_minute(5)?)
    ///     .clock(ManualClock::new())
    ///     .build();
    /// assert!(limiter.try_acquire_n(&7, 5).is_ok());
    /// assert_eq!(limiter.reward(&7, 2).remaining, 2);
    /// assert_eq!(limiter.reward(&7, 100).remaining, 5); // never above a full bucket
    /// assert_eq!(limiter.reward(&8, 1).remaining, 5);
    /// assert!(!limiter.contains_key(&8));
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn reward<Q>(&self, key: &Q, n: u64) -> Decision
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.engine().adjust(&self.slot(key), |_| Adjust::Reward(n)) {
            Ok(d) => d,
            // A reward never stores a new key, so it never meets the cap; if it did, the key
            // is not tracked and is what a peek reports.
            Err(_) => self.peek(key),
        }
    }

    /// Forgets `key`: it is removed (its slot under the key cap is freed), so its next
    /// request is decided as a fresh key's. Whether it was tracked.
    ///
    /// ```
    /// use tollgate::{KeyedRateLimiter, Quota};
    ///
    /// let limiter = KeyedRateLimiter::<u64>::new(Quota::per_minute(1)?);
    /// assert!(limiter.try_acquire(&7));
    /// assert!(!limiter.try_acquire(&7));
    /// assert!(limiter.reset(&7));
    /// assert!(limiter.try_acquire(&7));
    /// assert!(!limiter.reset(&8));
    /// # Ok::<(), tollgate::QuotaError>(())
    /// ```
    pub fn reset<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.store.remove_key(key)
    }
}
