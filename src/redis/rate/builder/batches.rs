//! The builder's [`local_batches`](RedisRateLimiterBuilder::local_batches) option.

use std::time::Duration;

use super::super::super::batch::BatchOptions;
use super::super::algorithm::RedisAlgorithm;
use super::RedisRateLimiterBuilder;
#[cfg(doc)]
use crate::redis::connection::error::RedisLimitError;

impl<A: RedisAlgorithm> RedisRateLimiterBuilder<A> {
    /// Grants a hot key's permits locally from batches booked in the shared state: a process
    /// takes up to half its key's demand over `refresh` (capped so that it never holds more
    /// than `max_share_percent` of the burst for the key) in one script call, grants from it with
    /// no round trip, fetches the next batch in the background before it runs out, and gives
    /// back what is unused when the batch ends (at most `refresh` after its take was sent; a
    /// fixed window's batch also ends with its window), when the key goes idle or when the
    /// limiter is dropped. A key asked for fewer than 4 permits per `refresh` gets no batch.
    /// Only `check`, `check_n`, `decide`, `decide_n`, `try_acquire` and `try_acquire_n` under
    /// the limiter's own quota are granted from batches; the rest always asks Redis. Off by
    /// default.
    ///
    /// Redis's accounting stays exact; what moves is *when* a booked permit is used. Over any
    /// interval `[s, s + L]`, all processes together grant at most the quota's own bound plus
    /// what was held in batches at `s`, and at most the quota's bound over `L + refresh`: the
    /// guide's Redis page, "A global limit at in-process speed", states the rule, the bound
    /// and the trade. [`Gcra`](crate::Gcra) and
    /// [`FixedWindow`](crate::FixedWindow) only (the others are
    /// [`RedisLimitError::Unsupported`] at [`connect`](Self::connect)); a `refresh` outside
    /// 1 ms to 1 hour, a share outside 1 to 100, or one that caps batches below 2 permits is
    /// [`RedisLimitError::InvalidBatches`] at `connect`. Counted in
    /// [`RedisStats`](crate::redis::RedisStats) (`batches_taken`, `permits_returned`,
    /// `local_grants`, `batch_size`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = tollgate::redis::RedisRateLimiter::builder(tollgate::Quota::per_second(50_000).unwrap())
    ///     .local_batches(Duration::from_millis(100), 5);
    /// # let _ = b;
    /// ```
    pub fn local_batches(mut self, refresh: Duration, max_share_percent: u8) -> Self {
        self.batches = Some(BatchOptions {
            refresh,
            max_share_percent,
        });
        self
    }
}
