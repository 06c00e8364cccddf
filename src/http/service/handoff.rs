//! What the separate layers of one [`RateLimitLayer`](super::super::RateLimitLayer) hand each
//! other ([`AccessLayer`](super::super::AccessLayer), then
//! [`ConcurrencyLimitLayer`](super::super::ConcurrencyLimitLayer), then
//! [`RateLayer`](super::super::RateLayer)): a request extension holding what the outermost one
//! found (the key, extracted once, and the policies), or saying that the request is settled
//! (its outcome counted, no limiter to run). And a response extension by which the rate layer
//! tells the concurrency layer that it refused a request at once, so that the permit goes back
//! now rather than after the refusal is sent.
//!
//! The combined layer's service runs the steps directly and uses none of this: an extension
//! allocates.

use std::sync::Arc;

use http::{Extensions, Response};

use super::Found;

/// A request's hand-off between the layers of one state.
pub(crate) struct Handoff<K> {
    /// The address of the state of the layers it is for: a layer of another
    /// `RateLimitLayer` (with the same key type) never reads it.
    owner: usize,
    /// What was found; `None` once the request is settled.
    found: Option<Found<K>>,
}

/// A request's extensions may be cloned (they must be `Clone`), but a key need not be: a clone
/// is for no one, and a layer meeting one screens the request itself.
impl<K> Clone for Handoff<K> {
    fn clone(&self) -> Self {
        Handoff {
            owner: 0,
            found: None,
        }
    }
}

/// The identity of a layer's state, as the hand-off records it.
pub(crate) fn owner<T>(shared: &Arc<T>) -> usize {
    Arc::as_ptr(shared).cast::<()>() as usize
}

/// Hands `found` (`None`: the request is settled) to the layers of `owner` inside.
pub(crate) fn hand_on<K: Send + Sync + 'static>(
    extensions: &mut Extensions,
    owner: usize,
    found: Option<Found<K>>,
) {
    extensions.insert(Handoff { owner, found });
}

/// What an outer layer of `owner` handed on, left in place: `None` if none did,
/// `Some(None)` if it settled the request.
pub(crate) fn peek<K: Send + Sync + 'static>(
    extensions: &Extensions,
    owner: usize,
) -> Option<Option<&Found<K>>> {
    extensions
        .get::<Handoff<K>>()
        .filter(|h| h.owner == owner)
        .map(|h| h.found.as_ref())
}

/// What an outer layer of `owner` handed on, taken out (the innermost layer's read).
pub(crate) fn take<K: Send + Sync + 'static>(
    extensions: &mut Extensions,
    owner: usize,
) -> Option<Option<Found<K>>> {
    peek::<K>(extensions, owner)?;
    extensions.remove::<Handoff<K>>().map(|h| h.found)
}

/// Marks the request settled for the layers of `owner` inside: in the hand-off an outer layer
/// left, or in a new one.
pub(crate) fn settle<K: Send + Sync + 'static>(extensions: &mut Extensions, owner: usize) {
    match extensions.get_mut::<Handoff<K>>() {
        Some(h) if h.owner == owner => h.found = None,
        _ => hand_on::<K>(extensions, owner, None),
    }
}

/// The mark of a response the rate layer made for a request it refused at once.
#[derive(Clone, Copy)]
struct RefusedAtOnce;

/// Marks `res` as a refusal made at once.
pub(crate) fn mark_refused<B>(res: &mut Response<B>) {
    res.extensions_mut().insert(RefusedAtOnce);
}

/// Whether `res` is a refusal made at once (removing the mark).
#[inline]
pub(crate) fn refused_at_once<B>(res: &mut Response<B>) -> bool {
    res.extensions_mut().remove::<RefusedAtOnce>().is_some()
}
