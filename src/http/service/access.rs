//! The service of an [`AccessLayer`]: the screening alone (the policies that apply, the allow
//! and deny lists, the key), its findings handed to the limiter layers inside.

use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::super::rate::backend::Backend;
use super::super::responses::rejection::RejectBody;
use super::super::state::{AccessLayer, Backends};
use super::handoff;
use super::{RateLimit, ResponseFuture};

service! {
    inner AccessLayer;
    fn call(&mut self, req) {
        let (mut parts, body) = req.into_parts();
        let shared = self.layer.shared();
        // `None`: settled, so that the layers inside let it through without counting it again.
        let found = match shared.screen_request(&parts).found() {
            Ok(found) => found,
            Err(res) => return ResponseFuture::ready(res),
        };
        handoff::hand_on::<B::Key>(&mut parts.extensions, handoff::owner(shared), found);
        ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), None)
    }
}
