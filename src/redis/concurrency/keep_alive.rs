//! [`KeepAlive`]: a lease renewed by a tokio task every third of its length while the work
//! runs, released when the guard goes.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::super::connection::error::RedisLimitError;
use super::lease::{Lease, LeaseId, Released};

/// What the renewing task last learned.
#[derive(Clone, Copy, Debug)]
struct Renewal {
    expires_at: Duration,
    held: bool,
}

/// A [`Lease`] renewed in the background every third of the lease's length (a failed renewal
/// is retried a third later: two more tries before the lease would end). Dropping it stops
/// the renewals and releases the lease in the background, best effort. Made by
/// [`Lease::keep_alive`].
///
/// ```
/// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
/// let held = sem.try_acquire_n("{acct9}:migration", 1).await?.keep_alive();
/// println!("token {}, held until {:?}", held.token(), held.expires_at());
/// drop(held); // stops renewing, releases in the background
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard stops the renewals and releases the lease"]
pub struct KeepAlive {
    /// `None` only once `release` took it.
    lease: Option<Lease>,
    renewal: Arc<Mutex<Renewal>>,
    task: JoinHandle<()>,
}

// Here rather than beside the lease: the guard is what it starts.
impl Lease {
    /// Renews the lease every third of its length in a tokio task while the returned guard
    /// lives; dropping the guard stops the renewals and releases the lease in the background.
    ///
    /// # Panics
    /// Outside a tokio runtime (as `tokio::spawn`).
    ///
    /// ```
    /// # async fn demo(sem: tollgate::redis::RedisConcurrencyLimiter) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let held = sem.try_acquire_n("{acct9}:migration", 1).await?.keep_alive();
    /// // ... long work, checking now and then that the lease was not lost:
    /// if !held.is_held() {
    ///     return Ok(()); // stop: another holder may run
    /// }
    /// let _ = held.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn keep_alive(self) -> KeepAlive {
        KeepAlive::start(self)
    }
}

impl KeepAlive {
    fn start(lease: Lease) -> KeepAlive {
        let renewal = Arc::new(Mutex::new(Renewal {
            expires_at: lease.expires_at,
            held: true,
        }));
        let (sem, state, id) = (lease.sem.clone(), lease.state.clone(), lease.id);
        let every = sem.lease_duration() / 3;
        let shared = renewal.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match sem.renew_state(&state, &id).await {
                    Ok(Some(at)) => lock(&shared).expires_at = at,
                    Ok(None) => {
                        lock(&shared).held = false;
                        return;
                    }
                    // Not lost yet: try again a third later.
                    Err(_) => {}
                }
            }
        });
        KeepAlive {
            lease: Some(lease),
            renewal,
            task,
        }
    }

    /// The lease's id.
    ///
    /// ```
    /// # fn demo(held: &tollgate::redis::KeepAlive) {
    /// println!("{}", held.id());
    /// # }
    /// ```
    #[must_use]
    pub fn id(&self) -> LeaseId {
        self.lease.as_ref().map_or(
            LeaseId {
                token: 0,
                nonce: 0,
                permits: 0,
            },
            Lease::id,
        )
    }

    /// The fencing token ([`Lease::token`]).
    ///
    /// ```
    /// # fn demo(held: &tollgate::redis::KeepAlive) {
    /// println!("write with fencing token {}", held.token());
    /// # }
    /// ```
    #[must_use]
    pub fn token(&self) -> u64 {
        self.id().token
    }

    /// The expiry after the last successful renewal (server clock since the epoch).
    ///
    /// ```
    /// # fn demo(held: &tollgate::redis::KeepAlive) {
    /// println!("held until {:?}", held.expires_at());
    /// # }
    /// ```
    #[must_use]
    pub fn expires_at(&self) -> Duration {
        lock(&self.renewal).expires_at
    }

    /// False once a renewal found the lease ended (it expired while renewals failed): the
    /// renewals stop, and the work it protected should too.
    ///
    /// ```
    /// # fn demo(held: &tollgate::redis::KeepAlive) {
    /// if !held.is_held() {
    ///     println!("lost the lease: stop");
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn is_held(&self) -> bool {
        lock(&self.renewal).held
    }

    /// Stops the renewals and releases the lease, as [`Lease::release`].
    ///
    /// # Errors
    /// As [`Lease::release`].
    ///
    /// ```
    /// # async fn demo(held: tollgate::redis::KeepAlive) -> Result<(), tollgate::redis::RedisLimitError> {
    /// let _ = held.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<Released, RedisLimitError> {
        self.task.abort();
        match self.lease.take() {
            Some(lease) => lease.release().await,
            None => Ok(Released::NotHeld),
        }
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // A renewal in flight may still land; the release queued by the lease's drop comes
        // after it on the connection, or finds the lease gone.
        self.task.abort();
    }
}

fn lock(m: &Mutex<Renewal>) -> std::sync::MutexGuard<'_, Renewal> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Debug for KeepAlive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeepAlive")
            .field("lease", &self.lease)
            .field("renewal", &*lock(&self.renewal))
            .finish()
    }
}
