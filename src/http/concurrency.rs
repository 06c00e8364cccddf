//! Concurrency limits behind the layer: [`ConcurrencyBackend`](backend::ConcurrencyBackend),
//! what the layer needs from a keyed concurrency limiter ([`backend`]), and
//! [`PermitBody`](permit_body::PermitBody), the response body that holds a request's permit
//! until it is finished or dropped ([`permit_body`]). The service's concurrency mode that
//! takes the permits is `service/concurrent.rs`.

pub(super) mod backend;
pub(super) mod permit_body;
