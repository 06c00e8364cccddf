//! [`Lease`]: permits held on one key until released, renewed, or expired on the server's
//! clock; its [`LeaseId`] and fencing token; what a release reports ([`Released`]).

use std::fmt;
use std::time::Duration;

use super::super::connection::error::RedisLimitError;
use super::super::scripts::clamp_i64;
use super::RedisConcurrencyLimiter;

/// What names a lease on its key: its fencing token, a random nonce of the process that took
/// it, and its number of permits. Pass it to another process to renew or release the lease
/// there ([`RedisConcurrencyLimiter::renew`], [`RedisConcurrencyLimiter::release`]).
///
/// ```
/// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// let lease = sem.try_acquire_n("{acct9}:migration", 1).await?;
/// let id = lease.id();
/// println!("lease {id}: token {}, {} permit(s)", id.token(), id.permits());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseId {
    pub(super) token: u64,
    pub(super) nonce: u64,
    pub(super) permits: u64,
}

impl LeaseId {
    /// The fencing token: strictly increasing per key, across every process and across the
    /// key's expiry (see [`Lease::token`]).
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// assert_eq!(lease.id().token(), lease.token());
    /// # }
    /// ```
    #[must_use]
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The permits the lease holds.
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// assert_eq!(lease.id().permits(), lease.permits());
    /// # }
    /// ```
    #[must_use]
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// The script arguments naming the lease: token, nonce, permits (each below 2^63).
    pub(super) fn args(&self) -> [i64; 3] {
        [self.token, self.nonce, self.permits].map(clamp_i64)
    }
}

/// `token:nonce:permits`, the lease's member name in Redis.
impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.token, self.nonce, self.permits)
    }
}

/// What a release did.
///
/// ```
/// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// use tollgate::redis::Released;
/// let lease = sem.try_acquire_n("{acct9}:export", 1).await?;
/// match lease.release().await? {
///     Released::Returned => {}
///     Released::NotHeld => println!("the lease had expired: someone else may have had the permit"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a lease that was no longer held means the work ran unprotected for a while"]
pub enum Released {
    /// The lease was held; its permits are back.
    Returned,
    /// The lease was no longer held: it had expired (its permits came back then, and may
    /// have been granted again since), or it was released before. Nothing changed.
    NotHeld,
}

/// Permits held on one key: a lease with an id, a fencing token and an expiry on the server's
/// clock. Release it with [`release`](Self::release) (which reports whether it was still
/// held); dropping it releases it in the background, best effort. If the process dies, the
/// permits come back when the lease expires. Renew it with [`renew`](Self::renew), or let a
/// background task do it while the work runs ([`keep_alive`](Self::keep_alive)).
///
/// ```
/// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// if let Some(mut lease) = sem.try_acquire("{acct9}:export").await? {
///     // Send lease.token() with every write, so that the store can refuse a stale holder.
///     if !lease.renew().await? {
///         println!("lost the lease: stop");
///     }
///     let _ = lease.release().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a lease releases it at once"]
pub struct Lease {
    pub(super) sem: RedisConcurrencyLimiter,
    /// The Redis key (`<prefix>:sem:<key>`).
    pub(super) state: String,
    pub(super) id: LeaseId,
    pub(super) expires_at: Duration,
    /// Released already.
    pub(super) done: bool,
}

impl Lease {
    /// The lease's id.
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// println!("{}", lease.id());
    /// # }
    /// ```
    #[must_use]
    pub fn id(&self) -> LeaseId {
        self.id
    }

    /// The fencing token: strictly increasing per key, across every process, and across the
    /// key's expiry (a token is at least the server's clock in µs at the grant, and the key
    /// outlives its last token on that clock). A store that keeps the largest token it has
    /// seen for a resource and refuses writes carrying a smaller one refuses a holder whose
    /// lease expired after a newer holder wrote.
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// println!("write with fencing token {}", lease.token());
    /// # }
    /// ```
    #[must_use]
    pub fn token(&self) -> u64 {
        self.id.token
    }

    /// The permits the lease holds.
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// assert!(lease.permits() >= 1);
    /// # }
    /// ```
    #[must_use]
    pub fn permits(&self) -> u64 {
        self.id.permits
    }

    /// When the lease ends unless renewed: the server's clock since the Unix epoch, whole µs.
    /// Compare with the server's time, not your own clock.
    ///
    /// ```
    /// # fn demo(lease: &tollgate::redis::Lease) {
    /// println!("held until {:?} after the epoch (server clock)", lease.expires_at());
    /// # }
    /// ```
    #[must_use]
    pub fn expires_at(&self) -> Duration {
        self.expires_at
    }

    /// Extends the lease to a full lease from now (on the server's clock) if it is still held.
    /// `Ok(false)`: it had ended; it stays ended (its permits may be someone else's), and the
    /// work it protected should stop.
    ///
    /// # Errors
    /// The Redis failure ([`RedisLimitError::Timeout`], [`RedisLimitError::Unavailable`],
    /// [`RedisLimitError::Server`]), whatever the failure policy: the lease runs on until its
    /// expiry.
    ///
    /// ```
    /// # async fn demo(mut lease: tollgate::redis::Lease) -> Result<(), tollgate::redis::RedisLimitError> {
    /// if lease.renew().await? {
    ///     println!("held until {:?}", lease.expires_at());
    /// }
    /// # Ok(()) }
    /// ```
    #[must_use = "false means the lease was lost"]
    pub async fn renew(&mut self) -> Result<bool, RedisLimitError> {
        match self.sem.renew_state(&self.state, &self.id).await? {
            Some(at) => {
                self.expires_at = at;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Gives the permits back, exactly once: [`Released::Returned`] if the lease was held,
    /// [`Released::NotHeld`] if it had already ended (expired, or released through
    /// [`RedisConcurrencyLimiter::release`]).
    ///
    /// # Errors
    /// The Redis failure, whatever the failure policy; the lease then ends at its expiry.
    ///
    /// ```
    /// # async fn demo(lease: tollgate::redis::Lease) -> Result<(), tollgate::redis::RedisLimitError> {
    /// assert_eq!(lease.release().await?, tollgate::redis::Released::Returned);
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<Released, RedisLimitError> {
        self.done = true;
        self.sem.returned(self.id.permits);
        self.sem.release_state(&self.state, &self.id).await
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.done {
            self.sem.returned(self.id.permits);
            self.sem.release_in_background(self.state.clone(), self.id);
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.state)
            .field("id", &self.id)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}
