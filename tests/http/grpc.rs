//! A real gRPC call through the layer: a tonic server with the layer, a tonic client, over
//! loopback HTTP/2. The service and codec are written by hand (raw bytes), so no protoc or
//! prost is involved; the wire protocol is tonic's own.
//!
//! A limited call must reach the client as `RESOURCE_EXHAUSTED` (HTTP 429 would be read as
//! `UNAVAILABLE` by gRPC clients), and the key comes from tonic's own connection info through
//! a `KeyFn`.

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use tollgate::http::request::Parts;
use tollgate::http::{KeyError, KeyFn, RateLimitLayer};
use tollgate::{KeyedRateLimiter, ManualClock, Quota};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::server::{TcpConnectInfo, TcpIncoming};
use tonic::{Code, Status};

/// Messages are raw bytes.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// `/test.Echo/Say`: answers with the request's bytes.
#[derive(Clone)]
struct Echo;

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl UnaryService<Bytes> for Echo {
    type Response = Bytes;
    type Future = BoxFut<Result<tonic::Response<Bytes>, Status>>;
    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        Box::pin(async move { Ok(tonic::Response::new(req.into_inner())) })
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFut<Result<Self::Response, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(async move { Ok(Grpc::new(RawCodec).unary(Echo, req).await) })
    }
}

/// The peer IP from tonic's connection info (tonic does not insert a `SocketAddr`).
fn tonic_peer(req: &Parts) -> Result<IpAddr, KeyError> {
    req.extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .map(|a| a.ip())
        .ok_or(KeyError::misconfigured("no tonic TcpConnectInfo"))
}

async fn say(channel: tonic::transport::Channel, msg: &'static [u8]) -> Result<Bytes, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/test.Echo/Say");
    let res = grpc
        .unary(tonic::Request::new(Bytes::from_static(msg)), path, RawCodec)
        .await?;
    Ok(res.into_inner())
}

/// A tonic server with a burst-2 layer (`grpc` mapping on or off); returns a client channel.
async fn server(grpc: bool) -> (tonic::transport::Channel, Arc<KeyedRateLimiter<IpAddr>>) {
    let limiter: Arc<KeyedRateLimiter<IpAddr>> = Arc::new(
        KeyedRateLimiter::builder(Quota::per_minute(2).unwrap())
            .clock(ManualClock::new())
            .max_keys(tollgate::http::DEFAULT_MAX_KEYS)
            .build(),
    );
    let layer = RateLimitLayer::with_limiters(KeyFn(tonic_peer))
        .limiter(limiter.clone())
        .grpc(grpc)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(Echo)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (channel, limiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_grpc_call_is_resource_exhausted() {
    let (channel, limiter) = server(true).await;
    assert_eq!(&say(channel.clone(), b"one").await.unwrap()[..], b"one");
    assert_eq!(&say(channel.clone(), b"two").await.unwrap()[..], b"two");
    let status = say(channel.clone(), b"three").await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.message(),
        "rate limit \"default\" exceeded; retry after 30 s"
    );
    // The rate-limit headers travel as metadata.
    assert_eq!(status.metadata().get("retry-after").unwrap(), "30");
    assert_eq!(
        status.metadata().get("ratelimit").unwrap(),
        "\"default\";r=0;t=30"
    );
    assert_eq!(limiter.peek(&"127.0.0.1".parse().unwrap()).remaining, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_grpc_mapping_a_429_reaches_grpc_clients_as_unavailable() {
    let (channel, _) = server(false).await;
    say(channel.clone(), b"one").await.unwrap();
    say(channel.clone(), b"two").await.unwrap();
    let status = say(channel, b"three").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}
