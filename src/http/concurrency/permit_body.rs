//! [`PermitBody`]: a response body that holds a concurrency permit until the body is finished
//! or dropped.
//!
//! A request is in flight until its response has been sent, not until its handler returned
//! the headers: a streaming export runs for the length of its body. So the layer's
//! concurrency mode moves the permit into the body, which gives it back at the end of the
//! stream (the inner body reports its end, or fails) or when the server drops the body (the
//! response was sent, or the client went away mid-body), whichever comes first.

use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The response body of a layer with concurrency limits: the inner service's body, and the
    /// permit its request holds (none for the layer's own rejections, or when no concurrency
    /// policy applied). The permit is dropped, giving the slot back, when the inner body ends
    /// (`poll_frame` returns `None` or an error, or a frame after which `is_end_stream` is
    /// true) or when this body is dropped.
    ///
    /// Frames, size hint and end of stream are the inner body's, unchanged.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::pin::Pin;
    /// use std::sync::Arc;
    /// use http_body::Body;
    /// use tollgate::http::PermitBody;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let slot = Arc::new(()); // stands for a permit: counted by its strong count
    /// let mut body = PermitBody::new(String::from("hi"), Some(Arc::clone(&slot)));
    /// assert_eq!(Arc::strong_count(&slot), 2); // held by the body
    /// let frame = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
    /// assert_eq!(frame.unwrap().unwrap().into_data().unwrap(), "hi");
    /// assert_eq!(Arc::strong_count(&slot), 1); // the body ended: given back
    /// # }
    /// ```
    pub struct PermitBody<B, P> {
        #[pin]
        inner: B,
        permit: Option<P>,
    }
}

impl<B, P> PermitBody<B, P> {
    /// `inner`, holding `permit` until it ends or is dropped.
    ///
    /// ```
    /// let body: tollgate::http::PermitBody<String, ()> = tollgate::http::PermitBody::new(String::new(), None);
    /// assert!(!body.holds_permit());
    /// ```
    pub fn new(inner: B, permit: Option<P>) -> Self {
        PermitBody { inner, permit }
    }

    /// Whether the body still holds its permit (it has not ended yet).
    ///
    /// ```
    /// let body = tollgate::http::PermitBody::new(String::new(), Some(()));
    /// assert!(body.holds_permit());
    /// ```
    #[must_use]
    pub fn holds_permit(&self) -> bool {
        self.permit.is_some()
    }

    /// The inner body, giving the permit back now.
    ///
    /// ```
    /// let body = tollgate::http::PermitBody::new(String::from("x"), Some(()));
    /// assert_eq!(body.into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: Body, P> Body for PermitBody<B, P> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        // The stream is over once the inner body says so: give the slot back now rather than
        // when the server gets round to dropping the body.
        let ended = match &frame {
            Some(Ok(_)) => this.inner.is_end_stream(),
            Some(Err(_)) | None => true,
        };
        if ended {
            *this.permit = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An empty inner body without a permit, so the layer's own rejections can be made in this
/// type ([`NoBody`](super::super::NoBody)) when another layer sits outside this one.
impl<B: Default, P> Default for PermitBody<B, P> {
    fn default() -> Self {
        PermitBody::new(B::default(), None)
    }
}

/// An inner body from bytes, without a permit ([`ProblemJson`](super::super::ProblemJson)
/// rejections of an outer layer).
impl<B: From<Bytes>, P> From<Bytes> for PermitBody<B, P> {
    fn from(bytes: Bytes) -> Self {
        PermitBody::new(B::from(bytes), None)
    }
}

impl<B: fmt::Debug, P> fmt::Debug for PermitBody<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitBody")
            .field("inner", &self.inner)
            .field("holds_permit", &self.permit.is_some())
            .finish()
    }
}
