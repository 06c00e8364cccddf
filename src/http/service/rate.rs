//! The service of a [`RateLayer`]: the rate step alone, with what the layers outside found,
//! or after screening the request itself when used alone.

use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::super::rate::backend::Backend;
use super::super::responses::rejection::RejectBody;
use super::super::state::{Backends, RateLayer};
use super::{handoff, rate_step, RateLimit, RateStep, ResponseFuture};

service! {
    inner RateLayer;
    fn call(&mut self, req) {
        let (mut parts, body) = req.into_parts();
        let shared = self.layer.shared();
        let handed = handoff::take::<B::Key>(&mut parts.extensions, handoff::owner(shared));
        let found = match handed.map_or_else(|| shared.screen_request(&parts).found(), Ok) {
            Ok(found) => found,
            Err(res) => return ResponseFuture::ready(res),
        };
        let Some(found) = found else {
            // Settled outside (or by the screening): through, counted already.
            return ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), None);
        };
        let mut headers = None;
        match rate_step(shared, &parts, &found, &mut headers) {
            RateStep::Proceed => {
                ResponseFuture::inner(self.inner.call(Request::from_parts(parts, body)), headers)
            }
            RateStep::Refused(mut res) => {
                // For a concurrency layer outside: its permit goes back now.
                handoff::mark_refused(&mut res);
                ResponseFuture::ready(res)
            }
            RateStep::Wait(waiting) => {
                let req = Request::from_parts(parts, body);
                waiting.future(found.key, shared, &mut self.inner, req)
            }
        }
    }
}
