//! What the examples share.

use std::time::Duration;

/// A duration in whole milliseconds, rounded to the nearest (a 99.97 ms wait reads as 100,
/// where `as_millis` would truncate it to 99).
pub fn ms(d: Duration) -> u128 {
    (d.as_micros() + 500) / 1000
}
