//! What the layer writes into responses: the rate-limit headers it adds to every response
//! ([`headers`]), and the responses it makes itself, plain HTTP or gRPC ([`rejection`]).
//! Below everything that decides: it knows nothing of keys, policies or backends.

pub(super) mod headers;
pub(super) mod rejection;
